"""Named decision rules: an :class:`~evaluator.pairs.AuditPair` -> a five-valued verdict.

docs/decision-layer.md, "Rules". Each evaluator is a choice of semantic probes plus whether the
surface control is applied; one function, :func:`decide`, applies the rules in a fixed order and
names the rule that fired, using the authors' rule names (``config/audit_policy.json``):

=========================  =====================================================  ============
rule                       condition (in this order)                              verdict
=========================  =====================================================  ============
R_UNPARSEABLE_ORIG         original step not read                                 UNPARSEABLE
R_UNPARSEABLE_SUR          surface control on, surface probe step not read        UNPARSEABLE
R_UNPARSEABLE_SEM          every semantic probe of the evaluator not read         UNPARSEABLE
R_INPUT_SENSITIVE_BOTH     a semantic delta and a surface delta                   INPUT-SENSITIVE
R_UNSTABLE_SURFACE_ONLY    a surface delta, no semantic delta                     UNSTABLE
R_GROUNDED_BOTH            consistent and local deltas, no surface delta          GROUNDED
R_GROUNDED_PRED_CHANGE     consistent delta only                                  GROUNDED
R_GROUNDED_CASCADE         local delta only (the authors' "local change" rule)    GROUNDED
R_GROUNDED_VANISHED        local delta only, and it is a vanished conclusion      GROUNDED
R_MISREPRESENT_CITED       no delta, and the step cites Pj                        INSENSITIVE
R_INSENSITIVE_NO_CHANGE    no delta                                               INSENSITIVE
=========================  =====================================================  ============

The surface check comes before the semantic one (when both fail the authors name the surface
rule; the verdict is the same either way). A semantic probe that was read with the original
unread cannot happen (the original is checked first); a probe read but *not* among the
evaluator's probes is ignored, so the A evaluator never looks at the local probe.

A *vanished* local conclusion (``AuditPair.vanished_local``: the original step was read, the
local output was read whole, has no counterpart for the step, and the surface control still
reaches the step's conclusion) is a local delta: the conclusion went from phi to nothing
(docs/decision-layer.md, "Vanished conclusions"). When the pair's target predicate is the
object of another premise too (``AuditPair.target_shared``), the consistent probe renamed it in
several premises and is no premise-level intervention: the evaluators that have the local
probe decide such a pair by the local probe alone ("attribution by the local probe"); the A
evaluator, which has no other probe, keeps the consistent delta.

``CASCADE`` is not produced here: :mod:`evaluator.cascade` re-labels GROUNDED/INPUT-SENSITIVE
decisions after the fact.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from evaluator.pairs import AuditPair, Condition


class Verdict(StrEnum):
    UNPARSEABLE = "UNPARSEABLE"
    INPUT_SENSITIVE = "INPUT-SENSITIVE"
    UNSTABLE = "UNSTABLE"
    GROUNDED = "GROUNDED"
    INSENSITIVE = "INSENSITIVE"
    CASCADE = "CASCADE"  # only after the cascade filter

    @property
    def positive(self) -> bool:
        """Predicts a dependency under the metric policy."""
        return self in (Verdict.GROUNDED, Verdict.INPUT_SENSITIVE)


R_UNPARSEABLE_ORIG = "R_UNPARSEABLE_ORIG"
R_UNPARSEABLE_SUR = "R_UNPARSEABLE_SUR"
R_UNPARSEABLE_SEM = "R_UNPARSEABLE_SEM"
R_INPUT_SENSITIVE_BOTH = "R_INPUT_SENSITIVE_BOTH"
R_UNSTABLE_SURFACE_ONLY = "R_UNSTABLE_SURFACE_ONLY"
R_GROUNDED_BOTH = "R_GROUNDED_BOTH"
R_GROUNDED_PRED_CHANGE = "R_GROUNDED_PRED_CHANGE"
R_GROUNDED_CASCADE = "R_GROUNDED_CASCADE"
R_GROUNDED_VANISHED = "R_GROUNDED_VANISHED"  # ours: the local change is a vanished conclusion
R_MISREPRESENT_CITED = "R_MISREPRESENT_CITED"
R_INSENSITIVE_NO_CHANGE = "R_INSENSITIVE_NO_CHANGE"
R_CASCADE_FILTERED = "R_CASCADE_FILTERED"  # ours: set by evaluator.cascade

RULES: tuple[str, ...] = (
    R_UNPARSEABLE_ORIG,
    R_UNPARSEABLE_SUR,
    R_UNPARSEABLE_SEM,
    R_INPUT_SENSITIVE_BOTH,
    R_UNSTABLE_SURFACE_ONLY,
    R_GROUNDED_BOTH,
    R_GROUNDED_PRED_CHANGE,
    R_GROUNDED_CASCADE,
    R_GROUNDED_VANISHED,
    R_MISREPRESENT_CITED,
    R_INSENSITIVE_NO_CHANGE,
    R_CASCADE_FILTERED,
)


@dataclass(frozen=True, slots=True)
class Decision:
    """A verdict, the rule that produced it, and the deltas it was decided from."""

    verdict: Verdict
    rule: str
    delta_consistent: bool | None = None  # None: probe not used by this evaluator, or not read
    delta_local: bool | None = None
    delta_surface: bool | None = None
    attributed_local: bool = False  # target shared: the consistent delta was set aside

    @property
    def positive(self) -> bool:
        return self.verdict.positive

    @property
    def local_only(self) -> bool:
        """Positive through the local delta alone (the cascade filter's candidates)."""
        return self.positive and self.delta_local is True and self.delta_consistent is not True

    @property
    def misrepresentation(self) -> bool:
        """INSENSITIVE although the step cites the premise."""
        return self.rule == R_MISREPRESENT_CITED


@dataclass(frozen=True, slots=True)
class Evaluator:
    """Which semantic probes count, and whether the surface control applies."""

    name: str
    semantic: tuple[Condition, ...]
    surface_control: bool = True

    def __post_init__(self) -> None:
        bad = [c for c in self.semantic if c not in ("consistent", "local")]
        if not self.semantic or bad:
            raise ValueError(
                f"Evaluator {self.name!r}: semantic probes must be a non-empty subset of "
                f"('consistent', 'local'), got {self.semantic!r}"
            )


CONSISTENT = Evaluator("A", ("consistent",))
LOCAL = Evaluator("A'", ("local",))
COMBINED = Evaluator("A+A'", ("consistent", "local"))
COMBINED_NO_SURFACE = Evaluator("A+A' without surface control", ("consistent", "local"), False)
EVALUATORS: dict[str, Evaluator] = {
    e.name: e for e in (CONSISTENT, LOCAL, COMBINED, COMBINED_NO_SURFACE)
}


@functools.cache
def make_decision(
    verdict: Verdict,
    rule: str,
    delta_consistent: bool | None = None,
    delta_local: bool | None = None,
    delta_surface: bool | None = None,
    attributed_local: bool = False,
) -> Decision:
    """The one shared :class:`Decision` with these fields.

    There are only a few hundred distinct decisions, so sharing them keeps five decisions per
    pair (one per evaluator) at a pointer each, even for millions of pairs.
    """
    return Decision(verdict, rule, delta_consistent, delta_local, delta_surface, attributed_local)


Signals = tuple[bool, bool | None, bool | None, bool | None, bool, bool, bool]


def signals(pair: AuditPair) -> Signals:
    """Everything the rules read from a pair: original read, the three deltas, citation,
    whether the local delta is a vanished conclusion, and whether the target is shared."""
    return (
        pair.parsed_original and pair.phi_original is not None,
        pair.delta("consistent"),
        pair.delta("local"),
        pair.delta("surface"),
        pair.cites_premise,
        pair.vanished_local,
        pair.target_shared,
    )


@functools.cache
def decide_signals(
    evaluator: Evaluator,
    orig_read: bool,
    sem: bool | None,
    loc: bool | None,
    sur: bool | None,
    cites: bool,
    vanished: bool = False,
    shared: bool = False,
) -> Decision:
    """The rules of the module table on a pair's :func:`signals` (memoised: few distinct)."""
    attributed = shared and "local" in evaluator.semantic and "consistent" in evaluator.semantic
    if attributed:
        sem = None  # the consistent probe renamed the predicate in several premises
    if not orig_read:
        return make_decision(Verdict.UNPARSEABLE, R_UNPARSEABLE_ORIG, attributed_local=attributed)
    if not evaluator.surface_control:
        sur = None
    elif sur is None:
        return make_decision(Verdict.UNPARSEABLE, R_UNPARSEABLE_SUR, attributed_local=attributed)
    if "consistent" not in evaluator.semantic:
        sem = None
    if "local" not in evaluator.semantic:
        loc = None
    if sem is None and loc is None:
        return make_decision(Verdict.UNPARSEABLE, R_UNPARSEABLE_SEM, sem, loc, sur, attributed)
    semantic = bool(sem) or bool(loc)
    if semantic and sur:
        return make_decision(
            Verdict.INPUT_SENSITIVE, R_INPUT_SENSITIVE_BOTH, sem, loc, sur, attributed
        )
    if sur:
        return make_decision(Verdict.UNSTABLE, R_UNSTABLE_SURFACE_ONLY, sem, loc, sur, attributed)
    if sem and loc:
        return make_decision(Verdict.GROUNDED, R_GROUNDED_BOTH, sem, loc, sur, attributed)
    if sem:
        return make_decision(Verdict.GROUNDED, R_GROUNDED_PRED_CHANGE, sem, loc, sur, attributed)
    if loc:
        rule = R_GROUNDED_VANISHED if vanished else R_GROUNDED_CASCADE
        return make_decision(Verdict.GROUNDED, rule, sem, loc, sur, attributed)
    rule = R_MISREPRESENT_CITED if cites else R_INSENSITIVE_NO_CHANGE
    return make_decision(Verdict.INSENSITIVE, rule, sem, loc, sur, attributed)


def decide(pair: AuditPair, evaluator: Evaluator = COMBINED) -> Decision:
    """Apply the decision rules of ``evaluator`` to one pair (see the module table)."""
    return decide_signals(evaluator, *signals(pair))


def decide_all(pairs: Sequence[AuditPair], evaluator: Evaluator = COMBINED) -> list[Decision]:
    """:func:`decide` over ``pairs``, in order."""
    return [decide_signals(evaluator, *signals(p)) for p in pairs]


def decide_each(
    pairs: Sequence[AuditPair], evaluators: Sequence[Evaluator]
) -> list[list[Decision]]:
    """Decisions of several evaluators, reading each pair's signals once."""
    sigs = [signals(p) for p in pairs]
    return [[decide_signals(e, *sig) for sig in sigs] for e in evaluators]


def is_misrepresentation(pair: AuditPair, consistent: Decision) -> bool:
    """An INSENSITIVE step (under A) that cites Pj (docs/decision-layer.md)."""
    return consistent.verdict is Verdict.INSENSITIVE and pair.cites_premise
