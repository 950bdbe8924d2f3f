"""The records passed between the audit's stages (``evaluator.audit``, ``evaluator.certify``).

Plain, immutable where they can be: what one problem's parse stage read
(:class:`ParsedGroup`, :class:`ParseCounts`), what its align stage found
(:class:`AlignedGroup`, :class:`ProbeView`, :class:`Counterpart`, :class:`AlignmentCounts`),
and the settings an audit decides with (:class:`AuditSettings`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, TypeAlias

from cotaudit.domain.proposition import Proposition
from cotaudit.schema import JSONDict
from evaluator.align import OriginalAlignment
from evaluator.baselines import SampleStepSummary
from evaluator.canon import ParsedCot, ParsedStep
from evaluator.cascade import EVALUATE_CASCADE_MODE, CascadeMode
from evaluator.pairs import Condition

PROBE_CONDITIONS: tuple[Condition, ...] = ("consistent", "local", "surface")
PARSE_CONDITIONS = ("original", "consistent", "local", "surface")


VanishedReading: TypeAlias = Literal["change", "missing"]
VANISHED_READINGS: tuple[VanishedReading, ...] = ("change", "missing")
# Which text of a response is audited: the visible answer (``text``) or a reasoning model's
# trace (``reasoning``); docs/report-schema.md, "Reasoning traces".
Trace: TypeAlias = Literal["answer", "reasoning"]
TRACES: tuple[Trace, ...] = ("answer", "reasoning")


@dataclass(frozen=True, slots=True)
class AuditSettings:
    """What an audit decides with: the cascade rule, the probe-repeat vote, how a local
    conclusion that vanished is read (``change``, or ``missing`` as before 2026-12), and
    which trace of each response is read."""

    cascade_mode: CascadeMode = EVALUATE_CASCADE_MODE
    majority: bool = True  # repeated probes: majority conclusion (False: the first repeat only)
    vanished: VanishedReading = "change"
    trace: Trace = "answer"


@dataclass(slots=True)
class ParseCounts:
    """Steps of one problem's outputs, per condition: all, read, non-assertions by category,
    and the distinct texts of unparseable steps (the report keeps the smallest)."""

    steps: Counter[str] = field(default_factory=Counter)
    parsed: Counter[str] = field(default_factory=Counter)
    non_assertions: dict[str, Counter[str]] = field(
        default_factory=lambda: {c: Counter() for c in PARSE_CONDITIONS}
    )
    unparseable: dict[str, set[str]] = field(
        default_factory=lambda: {c: set() for c in PARSE_CONDITIONS}
    )
    assumed: Counter[str] = field(default_factory=Counter)  # assertions marked assumed
    capped: Counter[str] = field(default_factory=Counter)  # outputs past MAX_STEPS_PER_OUTPUT

    def count(self, condition: str, parsed: ParsedCot) -> None:
        """Add the steps of one parsed output of ``condition``."""
        if parsed.unread_steps:
            self.capped[condition] += 1
        read = assumed = 0
        for step in parsed.steps:
            reading = step.reading
            status = reading.status
            if status == "assertion":
                read += 1
                assumed += reading.assumed
            elif status == "non_assertion":
                read += 1
                self.non_assertions[condition][reading.category or "other"] += 1
            else:
                self.unparseable[condition].add(step.text)
        self.steps[condition] += len(parsed.steps)
        self.parsed[condition] += read
        if assumed:
            self.assumed[condition] += assumed


@dataclass(slots=True)
class AlignmentCounts:
    """How one problem's outputs met its proof (the report's ``alignment`` section)."""

    cot_steps: int = 0
    matched: int = 0
    unmatched: int = 0
    unmatched_by_reason: Counter[str] = field(default_factory=Counter)
    proof_steps: int = 0
    unaudited: int = 0
    ambiguous: bool = False
    probe_rules: dict[str, Counter[str]] = field(
        default_factory=lambda: {c: Counter() for c in PROBE_CONDITIONS}
    )
    probe_outputs_absent: Counter[str] = field(default_factory=Counter)
    probe_repeats: Counter[int] = field(default_factory=Counter)  # outputs used per probe


@dataclass(frozen=True, slots=True, eq=False)
class ReadOutput:
    """One parsed output and what the audit reads of its steps, computed once per distinct
    text (the parse cache holds these): the assertion steps with their positions and
    conclusions, the positions each proposition is stated at, and per step its canonical
    conclusion (``phi``, None unless an assertion) and its conclusion clause's text as the
    string-diff baseline compares it."""

    parsed: ParsedCot
    read_all: bool  # at least one step, none past the cap, every step read or classified
    assertions: tuple[tuple[int, ParsedStep, Proposition], ...]
    stated: Mapping[Proposition, tuple[int, ...]]  # positions in ``assertions``
    phis: tuple[str | None, ...]
    conclusions: tuple[str | None, ...]


class ProbeOutput(NamedTuple):
    """One successful probe response, parsed."""

    request_id: str
    text_hash: str | None
    parsed: ParsedCot
    premises: tuple[str, ...]  # the probe's premise sentences
    substitution: dict[str, str] | None  # None for the surface probe
    read_whole: bool  # not cut off, at least one step, every step read or classified
    read: ReadOutput | None = None


@dataclass(frozen=True, slots=True)
class ParsedGroup:
    """The parse stage's output: every output of the group that the audit reads, parsed."""

    original_record: JSONDict | None
    original: ParsedCot | None
    probes: Mapping[tuple[str, Condition], tuple[ProbeOutput, ...]]  # (premise id, condition)
    summaries: list[SampleStepSummary] | None
    counts: ParseCounts
    errors: Counter[str]


class Counterpart(NamedTuple):
    """The probe step standing for one proof step after voting (``step`` None: missing)."""

    rule: str
    step: ParsedStep | None
    position: int | None = None  # 0-based position of ``step`` in its probe output
    read: ReadOutput | None = None  # the output ``step`` is in, when known


MISSING = Counterpart("missing", None)
ASSUMED = "assumed"  # alignment rule shown for a probe step read as a made-up assumption


@dataclass(frozen=True, slots=True)
class ProbeView:
    """The aligned counterpart of each matched proof step under one probe (after voting)."""

    by_proof_step: Mapping[int, Counterpart]
    sources: Mapping[str, str | None]
    present: bool  # a successful output of this probe exists
    read_whole: bool = False  # every output of it was read whole (ProbeOutput.read_whole)

    def counterpart(self, proof_step: int | None) -> Counterpart:
        """The counterpart of ``proof_step`` (``MISSING`` when there is none to look up)."""
        if proof_step is None or not self.present:
            return MISSING
        return self.by_proof_step.get(proof_step, MISSING)


@dataclass(frozen=True, slots=True)
class AlignedGroup:
    """The align stage's output."""

    alignment: OriginalAlignment
    probes: Mapping[tuple[str, Condition], ProbeView]
    substitutions: Mapping[str, dict[str, str] | None]  # premise id -> consistent substitution
    counts: AlignmentCounts
