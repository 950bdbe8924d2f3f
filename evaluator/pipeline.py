"""End-to-end evaluation of a JSONL stream: raw outputs -> pairs -> verdicts -> certificates.

Records are consumed in stream order. ``problem`` records come first; ``response`` records
(and, for imported packs, ``sample_summary`` records) are grouped per (endpoint, problem) by
:class:`evaluator.source.GroupCollector`, which releases a group as soon as it is complete, so
that a long stream is audited problem by problem and memory holds only open groups plus the
compact per-pair inputs of the statistics. For each group:

1. parse the original output (``evaluator.canon.parse_cot``) and align its steps to the proof
   by content (``evaluator.align.align_original``);
2. parse every probe output and align its steps to the matched proof steps by content
   (``align_probe``, with the probe's substitution and premises);
3. build one :class:`~evaluator.pairs.AuditPair` per (CoT step, premise): gold from the proof
   (direct parents; entity premises for the ``pred`` gold), citation evidence, string-diff input;
4. decide every evaluator (``evaluator.tables.decide_audit``) and write one sealed certificate
   per pair (``evaluator.certificates``);
5. count parse rates, non-assertions, alignment coverage, missing probe steps and failed
   requests for the report.

The statistics (``evaluator.tables.build_model_report``) run once per endpoint at the end.
When a probe was sent several times (``probe_repeats``; sample indices 0..r-1), each proof
step takes the majority conclusion over the repeats (ties: the lowest sample index), which is
the majority-vote option (docs/decision-layer.md).
"""

from __future__ import annotations

import bisect
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from cotaudit.constants import SELF_CONSISTENCY_SAMPLES
from cotaudit.domain.problem import Problem
from cotaudit.domain.proposition import Proposition, parse_canonical
from cotaudit.domain.sentences import parse_premise
from cotaudit.errors import UsageError
from cotaudit.schema import SCHEMA_VERSION, JSONDict
from evaluator.align import (
    OriginalAlignment,
    ProbeAlignment,
    ProbeMatch,
    align_original,
    align_probe,
    substitute,
)
from evaluator.authors import entity_premise_ids
from evaluator.baselines import (
    CONSISTENCY_THRESHOLD,
    SampleStepSummary,
    SelfConsistencyInput,
    step_text_changed,
    summarise_samples,
)
from evaluator.bootstrap import bootstrap_rows, resample_indices
from evaluator.canon import ParsedCot, ParsedStep, parse_cot
from evaluator.cascade import CascadeMode
from evaluator.certificates import CERTIFICATE_KIND, certificate_id, seal, text_hash
from evaluator.grouping import GroupCollector, ResponseGroup
from evaluator.metrics import Counts
from evaluator.metrics import scores as point_scores
from evaluator.pairs import (
    EXCLUDED_AMBIGUOUS_PROBLEM,
    EXCLUDED_UNMATCHED_STEP,
    AuditPair,
    Condition,
    ProblemOutcome,
    problem_outcome,
)
from evaluator.tables import (
    AuditDecisions,
    build_model_report,
    decide_audit,
    problem_order,
    row_entry,
)
from evaluator.truth import (
    TRUTH_ROWS,
    Truth,
    TruthPair,
    TruthScores,
    score_against_truth,
    truth_from_record,
)
from evaluator.verdicts import Decision

PROBE_CONDITIONS: tuple[Condition, ...] = ("consistent", "local", "surface")
PARSE_CONDITIONS = ("original", "consistent", "local", "surface")
PARSE_CACHE_SIZE = 4096  # parsed outputs kept (each a few KB)
UNPARSEABLE_EXAMPLES = 20  # unparseable step texts kept per condition for the report


@dataclass(frozen=True, slots=True)
class EvaluateOptions:
    """Knobs of an evaluation (bootstrap size and seed, cascade rule)."""

    n_boot: int = 10_000
    seed: int = 20260710
    cascade_mode: CascadeMode = "previous_cot_step"
    samples: int = SELF_CONSISTENCY_SAMPLES  # samples that make a problem's group complete
    majority: bool = True  # repeated probes: majority conclusion (False: the first repeat only)


@dataclass(frozen=True, slots=True)
class ProbeReading:
    """One condition's view of one premise's probe: the aligned step per proof step."""

    alignment: ProbeAlignment | None  # None: no successful response for this probe
    steps: Mapping[int, ParsedStep]  # probe step number -> step (of the chosen output)
    request_ids: tuple[str, ...]
    text_hashes: tuple[str | None, ...]


@dataclass(slots=True)
class ProblemAudit:
    """Everything one (endpoint, problem) group produced."""

    endpoint: str
    problem_id: str
    pairs: list[AuditPair]
    decisions: AuditDecisions
    outcome: ProblemOutcome
    certificates: list[JSONDict]
    sources: dict[str, str | None]  # request id -> text hash, every response of the group


@dataclass(slots=True)
class ModelTally:
    """Per-endpoint accumulators for the report."""

    model: JSONDict = field(default_factory=dict)
    pairs: list[AuditPair] = field(default_factory=list)
    outcomes: list[ProblemOutcome] = field(default_factory=list)
    summaries: dict[str, list[SampleStepSummary]] = field(default_factory=dict)
    steps: Counter[str] = field(default_factory=Counter)
    parsed: Counter[str] = field(default_factory=Counter)
    non_assertions: dict[str, Counter[str]] = field(
        default_factory=lambda: {c: Counter() for c in PARSE_CONDITIONS}
    )
    unparseable_examples: dict[str, list[str]] = field(
        default_factory=lambda: {c: [] for c in PARSE_CONDITIONS}
    )
    cot_steps: int = 0
    matched: int = 0
    unmatched: int = 0
    unmatched_by_reason: Counter[str] = field(default_factory=Counter)
    proof_steps: int = 0
    unaudited: int = 0
    ambiguous: list[str] = field(default_factory=list)
    probe_rules: dict[str, Counter[str]] = field(
        default_factory=lambda: {c: Counter() for c in PROBE_CONDITIONS}
    )
    probe_outputs_absent: Counter[str] = field(default_factory=Counter)
    probe_repeats: Counter[int] = field(default_factory=Counter)  # outputs used per probe
    problems_without_original: list[str] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    superseded: int = 0
    truth_pairs: list[TruthPair] = field(default_factory=list)
    decisions: dict[str, list[Decision]] = field(default_factory=dict)  # parallel to pairs
    false_positives: list[JSONDict] = field(default_factory=list)


DECISION_FIELDS = ("consistent", "local", "combined", "no_surface", "cascaded")
_DECISIONS: dict[Decision, Decision] = {}
_REASONS: dict[tuple[str, ...], tuple[str, ...]] = {}


def _interned(decision: Decision) -> Decision:
    """One shared instance per distinct decision: a few dozen exist, millions are held."""
    return _DECISIONS.setdefault(decision, decision)


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _premise_props(premises: tuple[str, ...]) -> tuple[Proposition, ...]:
    """The probe's premises as propositions (unreadable ones left out); cached per premise set."""
    props = (parse_premise(text) for text in premises)
    return tuple(p for p in props if p is not None)


def _substitution(record: Mapping[str, Any]) -> dict[str, str] | None:
    probe = record.get("probe")
    if isinstance(probe, Mapping) and isinstance(probe.get("substitution"), Mapping):
        return {str(k).lower(): str(v).lower() for k, v in probe["substitution"].items()}
    return None


def _probe_premise_texts(record: Mapping[str, Any], problem: Problem) -> list[str]:
    probe = record.get("probe")
    if isinstance(probe, Mapping) and isinstance(probe.get("premises"), list):
        return [str(p.get("text", "")) for p in probe["premises"] if isinstance(p, Mapping)]
    return [p.text for p in problem.premises]


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parse(text: str, premises: tuple[str, ...]) -> ParsedCot:
    """``parse_cot`` with a cache: identical outputs recur (T=0 probes whose premise did not
    matter, repeated samples, resumed runs), and a parsed CoT is immutable."""
    return parse_cot(text, premises=premises)


def _text(record: Mapping[str, Any]) -> str:
    text = record.get("text")
    return text if isinstance(text, str) else ""


def _count_parse(tally: ModelTally, condition: str, parsed: ParsedCot) -> None:
    for step in parsed.steps:
        tally.steps[condition] += 1
        reading = step.reading
        if reading.parsed:
            tally.parsed[condition] += 1
        if reading.status == "non_assertion":
            tally.non_assertions[condition][reading.category or "other"] += 1
        elif reading.status == "unparseable":
            # The smallest distinct texts, not the first ones met: which steps come first
            # depends on how concurrent requests completed, and the report must not.
            examples = tally.unparseable_examples[condition]
            text = step.text
            if (len(examples) < UNPARSEABLE_EXAMPLES or text < examples[-1]) and (
                text not in examples
            ):
                bisect.insort(examples, text)
                del examples[UNPARSEABLE_EXAMPLES:]


def _majority_match(
    alignments: Sequence[ProbeAlignment], proof_step: int
) -> tuple[int, ProbeMatch]:
    """The repeat whose aligned conclusion for ``proof_step`` most repeats share (ties: the
    lowest sample index), with its match; repeat 0 when no repeat has a counterpart."""
    matches = [a.for_proof_step(proof_step) for a in alignments]
    votes = Counter(m.conclusion for m in matches if m.conclusion is not None)
    if votes:
        best = max(votes.values())
        for i, m in enumerate(matches):
            if m.conclusion is not None and votes[m.conclusion] == best:
                return (i, m)
    return (0, matches[0])


@dataclass(frozen=True, slots=True)
class _ProbeView:
    """The aligned counterpart of each matched proof step under one probe (after voting)."""

    by_proof_step: Mapping[int, tuple[str, ParsedStep | None]]  # rule, step
    sources: Mapping[str, str | None]
    present: bool


def _read_probe(
    records: Sequence[JSONDict],
    condition: str,
    problem: Problem,
    original: OriginalAlignment,
    tally: ModelTally,
) -> _ProbeView:
    if not records:
        tally.probe_outputs_absent[condition] += 1
        return _ProbeView({}, {}, False)
    parsed_all: list[ParsedCot] = []
    alignments: list[ProbeAlignment] = []
    sources: dict[str, str | None] = {}
    for record in records:
        premise_texts = _probe_premise_texts(record, problem)
        parsed = _parse(_text(record), tuple(premise_texts))
        _count_parse(tally, condition, parsed)
        subst = _substitution(record) if condition != "surface" else None
        alignments.append(
            align_probe(
                parsed,
                original,
                problem.proof,
                substitution=subst,
                premises=_premise_props(tuple(premise_texts)),
            )
        )
        parsed_all.append(parsed)
        sources[str(record.get("request_id"))] = text_hash(record.get("text"))
    view: dict[int, tuple[str, ParsedStep | None]] = {}
    for t in original.matched_proof_steps:
        index, match = _majority_match(alignments, t)
        step = None
        if match.probe_step is not None:
            step = next((s for s in parsed_all[index].steps if s.number == match.probe_step), None)
        view[t] = (str(match.rule), step)
        tally.probe_rules[condition][str(match.rule)] += 1
    return _ProbeView(view, sources, True)


def _conclusion_text(step: ParsedStep | None) -> str | None:
    """Raw text of the step's conclusion clause (the whole step when none was singled out).

    String diff compares this rather than the whole step: under the consistent probe every
    step that *mentions* a renamed premise changes its wording, whether or not its conclusion
    depends on it, which would make the baseline flag nearly everything.
    """
    if step is None:
        return None
    reading = step.reading
    if reading.conclusion_index is not None and reading.conclusion_index < len(reading.clauses):
        return reading.clauses[reading.conclusion_index].text
    return step.text


def _probe_step_number(view: _ProbeView, proof_step: int | None) -> int | None:
    """Written number of the probe step aligned to ``proof_step`` (None when missing)."""
    if proof_step is None:
        return None
    step = view.by_proof_step.get(proof_step, ("missing", None))[1]
    return None if step is None else step.number


def _citation(step: ParsedStep, premise_index: int, premise_text: str) -> tuple[bool, str]:
    reading = step.reading
    if premise_index in reading.cited_premises:
        return True, f"names premise {premise_index}"
    if premise_index in reading.echoed_premises:
        return True, f"restates premise {premise_index}: {premise_text!r}"
    return False, ""


def _phi(step: ParsedStep | None) -> str | None:
    if step is None or step.reading.status != "assertion" or step.prop is None:
        return None
    return sys.intern(str(step.prop))  # held once per pair and condition: share the strings


def _fp_cause(pair: AuditPair, substitution: Mapping[str, str] | None) -> str:
    rule = pair.align_sem or "missing"
    base = f"phi_orig {pair.phi_orig} -> phi_consistent {pair.phi_sem} (aligned by {rule})"
    if pair.phi_orig is not None and pair.phi_sem is not None and substitution:
        renamed = str(substitute(parse_canonical(pair.phi_orig), substitution))
        if renamed == pair.phi_sem:
            return (
                "expected substitution: the conclusion names the renamed predicate, which the "
                "step reaches through another premise (an indirect, predicate-determining "
                f"dependency); {base}"
            )
    return f"output variation: the probe reached a different conclusion; {base}"


def audit_group(
    group: ResponseGroup,
    problem: Problem,
    tally: ModelTally,
    *,
    cascade_mode: CascadeMode = "previous_cot_step",
    truth: Truth | None = None,
    majority: bool = True,
) -> ProblemAudit | None:
    """Audit one (endpoint, problem) group; ``None`` when it has no successful original.

    ``majority``: with repeated probes, vote over all repeats; otherwise use the first only
    (to measure what the vote changes)."""
    tally.superseded += group.superseded
    for record in group.errors():
        error = record.get("error")
        kind = error.get("type") if isinstance(error, Mapping) else None
        tally.errors[str(kind or "error")] += 1
    entity_premises = entity_premise_ids(problem)
    premise_texts = [p.text for p in problem.premises]
    originals = group.ok("original")
    if group.summaries:
        tally.summaries[problem.problem_id] = [
            SampleStepSummary(
                step=int(s["cot_step"]),
                consistent=float(s["agreement"]) >= CONSISTENCY_THRESHOLD,
                agreement=float(s["agreement"]),
                majority=s.get("majority_conclusion"),
                n_valid=int(s.get("n_valid") or 0),
            )
            for s in group.summaries[-1].get("steps", [])
        ]
    else:
        samples = group.ok("sample")
        if samples:
            conclusions = [
                [_phi(s) for s in _parse(_text(r), tuple(premise_texts)).steps] for r in samples
            ]
            tally.summaries[problem.problem_id] = summarise_samples(conclusions)
    if not originals:
        tally.problems_without_original.append(problem.problem_id)
        return None
    original_record = originals[0]
    parsed = _parse(_text(original_record), tuple(premise_texts))
    _count_parse(tally, "original", parsed)
    alignment = align_original(parsed, problem.proof)
    tally.cot_steps += len(parsed.steps)
    tally.matched += len({m.cot_step for m in alignment.matches})
    tally.unmatched += len(alignment.unmatched)
    tally.unmatched_by_reason.update(u.reason for u in alignment.unmatched)
    tally.proof_steps += len(problem.proof)
    tally.unaudited += len(alignment.unaudited)
    if alignment.ambiguous:
        tally.ambiguous.append(problem.problem_id)

    original_rid = str(original_record.get("request_id"))
    sources: dict[str, str | None] = {original_rid: text_hash(original_record.get("text"))}
    probes: dict[tuple[str, str], _ProbeView] = {}
    by_target = group.ok_by_target()
    substitutions: dict[str, dict[str, str] | None] = {}
    for premise in problem.premises:
        for condition in PROBE_CONDITIONS:
            records = by_target.get((condition, premise.id), [])
            if records and not majority:
                records = records[:1]
            tally.probe_repeats[len(records)] += 1
            view = _read_probe(records, condition, problem, alignment, tally)
            probes[(premise.id, condition)] = view
            sources.update(view.sources)
            if condition == "consistent" and records:
                substitutions[premise.id] = _substitution(records[0])
    for record in group.responses.values():
        sources.setdefault(str(record.get("request_id")), text_hash(record.get("text")))

    proof_by_number = {s.step: s for s in problem.proof}
    pairs: list[AuditPair] = []
    for step in parsed.steps:
        proof_step = alignment.proof_step_for(step.number)
        reasons: list[str] = []
        if proof_step is None:
            reasons.append(EXCLUDED_UNMATCHED_STEP)
        if alignment.ambiguous:
            reasons.append(EXCLUDED_AMBIGUOUS_PROBLEM)
        gold_step = proof_by_number.get(proof_step) if proof_step is not None else None
        parents = gold_step.depends_on if gold_step is not None else ()
        parent_steps = tuple(int(d[1:]) for d in parents if d.startswith("S") and d[1:].isdigit())
        phi_orig = _phi(step)
        exclusion = _REASONS.setdefault(tuple(reasons), tuple(reasons))  # shared per step kind
        for index, premise in enumerate(problem.premises, start=1):
            values: dict[str, Any] = {}
            for condition, short in zip(PROBE_CONDITIONS, ("sem", "loc", "sur"), strict=True):
                view = probes[(premise.id, condition)]
                rule, probe_step = (
                    view.by_proof_step.get(proof_step, ("missing", None))
                    if proof_step is not None and view.present
                    else ("missing", None)
                )
                values[f"phi_{short}"] = _phi(probe_step)
                values[f"parsed_{short}"] = _phi(probe_step) is not None
                values[f"missing_{short}"] = probe_step is None
                values[f"align_{short}"] = None if probe_step is None else rule
                if condition == "consistent":
                    values["text_changed"] = step_text_changed(
                        _conclusion_text(step), _conclusion_text(probe_step)
                    )
            cites, evidence = _citation(step, index, premise.text)
            pairs.append(
                AuditPair(
                    problem_id=problem.problem_id,
                    cot_step=step.number,
                    premise_id=premise.id,
                    proof_step=proof_step,
                    hops=problem.hops,
                    phi_orig=phi_orig,
                    parsed_orig=phi_orig is not None,
                    is_direct_parent=premise.id in parents,
                    is_entity_premise=premise.id in entity_premises,
                    parent_proof_steps=parent_steps,
                    cites_premise=cites,
                    citation_evidence=sys.intern(evidence),
                    exclusion_reasons=exclusion,
                    **values,
                )
            )
    decisions = decide_audit(pairs, cascade_mode=cascade_mode)
    for name in DECISION_FIELDS:
        shared = tally.decisions.setdefault(name, [])
        shared.extend(_interned(d) for d in getattr(decisions, name))
    outcome = problem_outcome(problem, pairs, parsed.answer, entity_premises)
    step_by_number = {s.number: s for s in parsed.steps}
    certificates = []
    for i, pair in enumerate(pairs):
        step_sources = {original_rid: sources[original_rid]}
        for condition in PROBE_CONDITIONS:
            step_sources.update(probes[(pair.premise_id, condition)].sources)
        certificates.append(
            _certificate(
                group,
                pair,
                decisions,
                i,
                step_by_number[pair.cot_step],
                alignment,
                step_sources,
                substitutions.get(pair.premise_id),
                {
                    c: _probe_step_number(probes[(pair.premise_id, c)], pair.proof_step)
                    for c in PROBE_CONDITIONS
                },
            )
        )
        if truth is not None and not pair.excluded:
            tally.truth_pairs.append(
                TruthPair(
                    problem_id=pair.problem_id,
                    conclusion=pair.phi_orig,
                    premise_id=pair.premise_id,
                    is_direct_parent=pair.is_direct_parent,
                    verdict_consistent=decisions.consistent[i].verdict.value,
                    verdict_cascade=decisions.cascaded[i].verdict.value,
                )
            )
        if not pair.excluded and not pair.gold_full and decisions.consistent[i].positive:
            tally.false_positives.append(
                {
                    "id": certificates[-1]["id"],
                    "verdict": decisions.consistent[i].verdict.value,
                    "cause": _fp_cause(pair, substitutions.get(pair.premise_id)),
                }
            )
    tally.pairs.extend(pairs)
    tally.outcomes.append(outcome)
    return ProblemAudit(
        group.endpoint, problem.problem_id, pairs, decisions, outcome, certificates, sources
    )


def _certificate(
    group: ResponseGroup,
    pair: AuditPair,
    decisions: AuditDecisions,
    i: int,
    step: ParsedStep,
    alignment: OriginalAlignment,
    sources: Mapping[str, str | None],
    substitution: Mapping[str, str] | None,
    probe_steps: Mapping[str, int | None],
) -> JSONDict:
    combined = decisions.combined[i]
    cascaded = decisions.cascaded[i]
    consistent = decisions.consistent[i]
    reading = step.reading
    unmatched = next((u.reason for u in alignment.unmatched if u.cot_step == pair.cot_step), None)
    content: JSONDict = {
        "kind": CERTIFICATE_KIND,
        "schema": SCHEMA_VERSION,
        "id": certificate_id(group.endpoint, pair.problem_id, pair.cot_step, pair.premise_id),
        "endpoint": group.endpoint,
        "model": group.model,
        "problem_id": pair.problem_id,
        "cot_step": pair.cot_step,
        "premise_id": pair.premise_id,
        "proof_step": pair.proof_step,
        "hops": pair.hops,
        "step_text": step.text,
        "phi": {
            "original": pair.phi_orig,
            "consistent": pair.phi_sem,
            "local": pair.phi_loc,
            "surface": pair.phi_sur,
        },
        "parsed": {
            "original": pair.parsed_orig,
            "consistent": pair.parsed_sem,
            "local": pair.parsed_loc,
            "surface": pair.parsed_sur,
        },
        "delta": {c: pair.delta(c) for c in PROBE_CONDITIONS},
        "alignment": {
            "original": "matched" if pair.proof_step is not None else f"unmatched:{unmatched}",
            "consistent": pair.align_sem or "missing",
            "local": pair.align_loc or "missing",
            "surface": pair.align_sur or "missing",
            "ambiguous_problem": alignment.ambiguous,
        },
        "probe_steps": dict(probe_steps),
        "substitution": dict(substitution) if substitution else None,
        "gold": {
            "direct_parent": pair.is_direct_parent,
            "entity_premise": pair.is_entity_premise,
        },
        "verdict": combined.verdict.value,
        "decision_rule": combined.rule,
        "verdict_cascade": cascaded.verdict.value,
        "decision_rule_cascade": cascaded.rule,
        "verdict_consistent": consistent.verdict.value,
        "decision_rule_consistent": consistent.rule,
        "verdict_local": decisions.local[i].verdict.value,
        "verdict_no_surface": decisions.no_surface[i].verdict.value,
        "misrepresentation": consistent.misrepresentation,
        "citation": {"cites": pair.cites_premise, "evidence": pair.citation_evidence},
        "string_diff_changed": pair.text_changed,
        "non_assertion": reading.category if reading.status == "non_assertion" else None,
        "step_status": reading.status,
        "excluded": list(pair.exclusion_reasons),
        "sources": dict(sorted(sources.items())),
    }
    return seal(content)


@dataclass(slots=True)
class Evaluation:
    """Feed stream records in order; collect per-endpoint tallies and certificates.

    ``on_audit`` (optional) sees each problem's audit as soon as its group is complete, so a
    caller can write certificates as it goes.
    """

    options: EvaluateOptions = field(default_factory=EvaluateOptions)
    problems: dict[str, Problem] = field(default_factory=dict)
    truths: dict[tuple[str, str], Truth] = field(default_factory=dict)
    tallies: dict[str, ModelTally] = field(default_factory=dict)
    collector: GroupCollector = field(init=False)
    records: int = 0
    ignored_kinds: Counter[str] = field(default_factory=Counter)
    orphans: int = 0  # responses of problems never seen
    keep_statistics: bool = True  # False (verify): certificates only, per-pair state dropped

    def __post_init__(self) -> None:
        self.collector = GroupCollector(samples=self.options.samples)

    def feed(self, record: JSONDict) -> Iterator[ProblemAudit]:
        """Take one record; yield the audits it completes (zero or one)."""
        self.records += 1
        kind = record.get("kind")
        if kind == "problem":
            if record.get("task", "prontoqa") != "prontoqa" or "proof" not in record:
                self.ignored_kinds["problem:" + str(record.get("task"))] += 1
                return
            pid = str(record.get("problem_id"))
            if pid not in self.problems:
                problem = Problem.from_record(record, where=f"problem record {pid}")
                self.problems[pid] = problem
                plan = problem.extra.get("plan")
                self.collector.set_problem(
                    pid,
                    [p.id for p in problem.premises],
                    plan if isinstance(plan, Mapping) else None,
                )
            return
        if kind == "truth":
            truth = truth_from_record(record, where=f"truth record {record.get('problem_id')}")
            self.truths[(truth.model, truth.problem_id)] = truth
            return
        if kind in ("response", "sample_summary"):
            if str(record.get("problem_id")) not in self.problems:
                self.orphans += 1
                return
            group = self.collector.add(record)
            if group is not None:
                audit = self._audit(group)
                if audit is not None:
                    yield audit
            return
        self.ignored_kinds[str(kind)] += 1

    def finish(self) -> Iterator[ProblemAudit]:
        """End of stream: audit every group still open."""
        for group in self.collector.drain():
            audit = self._audit(group)
            if audit is not None:
                yield audit

    def _audit(self, group: ResponseGroup) -> ProblemAudit | None:
        tally = self.tallies.setdefault(group.endpoint, ModelTally())
        if not tally.model and group.model:
            tally.model = dict(group.model)
        problem = self.problems[group.problem_id]
        model_name = str(group.model.get("model", "")) if group.model else ""
        truth = self.truths.get((model_name, group.problem_id)) or self.truths.get(
            (group.endpoint, group.problem_id)
        )
        audit = audit_group(
            group,
            problem,
            tally,
            cascade_mode=self.options.cascade_mode,
            truth=truth,
            majority=self.options.majority,
        )
        if not self.keep_statistics:
            tally.pairs.clear()
            tally.outcomes.clear()
            tally.decisions.clear()
            tally.truth_pairs.clear()
            tally.false_positives.clear()
            tally.summaries.clear()
        return audit

    def report(self) -> JSONDict:
        """``{"models": {endpoint: {...}}}`` with the statistics of every endpoint."""
        models: JSONDict = {}
        for endpoint, tally in self.tallies.items():
            models[endpoint] = model_report(
                endpoint, tally, self.problems, self.truths, self.options
            )
        return {
            "kind": "report",
            "schema": SCHEMA_VERSION,
            "models": models,
            "stream": {
                "records": self.records,
                "ignored_kinds": dict(self.ignored_kinds),
                "orphan_responses": self.orphans,
                "late_records": self.collector.late,
            },
        }


def _rate(tally: ModelTally, condition: str) -> float | None:
    n = tally.steps[condition]
    return tally.parsed[condition] / n if n else None


def model_report(
    endpoint: str,
    tally: ModelTally,
    problems: Mapping[str, Problem],
    truths: Mapping[tuple[str, str], Truth],
    options: EvaluateOptions,
) -> JSONDict:
    """One endpoint's report section: ``tables.build_model_report`` plus the pipeline slots."""
    audited = {o.problem_id for o in tally.outcomes}
    sc_input = None
    if tally.summaries:
        summaries = {k: v for k, v in tally.summaries.items() if k in audited}
        sc_input = SelfConsistencyInput(
            problems={pid: problems[pid] for pid in audited},
            summaries=summaries,
            entity_premises={pid: entity_premise_ids(problems[pid]) for pid in audited},
        )
    alignment = {
        "cot_steps": tally.cot_steps,
        "matched": tally.matched,
        "unmatched": tally.unmatched,
        "unmatched_by_reason": dict(tally.unmatched_by_reason),
        "proof_steps": tally.proof_steps,
        "proof_steps_unaudited": tally.unaudited,
        "ambiguous_problems": len(tally.ambiguous),
        "ambiguous_problem_ids": sorted(tally.ambiguous),
        "probe_steps_missing": {c: tally.probe_rules[c]["missing"] for c in PROBE_CONDITIONS},
        "probe_rules": {c: dict(tally.probe_rules[c]) for c in PROBE_CONDITIONS},
        "probe_outputs_absent": {c: tally.probe_outputs_absent[c] for c in PROBE_CONDITIONS},
        "probe_repeats": {str(k): v for k, v in sorted(tally.probe_repeats.items())},
        "probe_vote": "majority" if options.majority else "first repeat",
        "problems_without_original": sorted(tally.problems_without_original),
    }
    parse_rates = {c: _rate(tally, c) for c in PARSE_CONDITIONS}
    non_assertions = {c: dict(tally.non_assertions[c]) for c in PARSE_CONDITIONS}
    decisions = None
    if all(len(tally.decisions.get(n, ())) == len(tally.pairs) for n in DECISION_FIELDS):
        decisions = AuditDecisions(**{n: tuple(tally.decisions[n]) for n in DECISION_FIELDS})
    report = build_model_report(
        tally.pairs,
        tally.outcomes,
        decisions=decisions,
        self_consistency=sc_input,
        seed=options.seed,
        n_boot=options.n_boot,
        cascade_mode=options.cascade_mode,
        alignment=alignment,
        parse_rates=parse_rates,
        non_assertions=non_assertions,
    )
    report["model"] = tally.model
    answered = [o for o in tally.outcomes if o.answer_model is not None]
    correct = sum(1 for o in answered if o.answer_model == o.answer_gold)
    report["accuracy"] = {
        "problems": len(tally.outcomes),
        "answered": len(answered),
        "correct": correct,
        # Unread answers count as wrong: accuracy is over every audited problem.
        "rate": correct / len(tally.outcomes) if tally.outcomes else None,
    }
    report["problems_audited"] = len(tally.outcomes)
    report["steps_read"] = {
        c: {"steps": tally.steps[c], "parsed": tally.parsed[c]} for c in PARSE_CONDITIONS
    }
    report["unparseable_examples"] = {c: list(v) for c, v in tally.unparseable_examples.items()}
    report["errors"] = {"count": sum(tally.errors.values()), "by_type": dict(tally.errors)}
    report["superseded_records"] = tally.superseded
    report["false_positives"] = sorted(tally.false_positives, key=lambda fp: str(fp["id"]))
    if tally.truth_pairs:
        model_name = str(tally.model.get("model", endpoint))
        by_problem = {pid: t for (m, pid), t in truths.items() if m in (model_name, endpoint)}
        scores = score_against_truth(tally.truth_pairs, by_problem)
        report["rows"].update(_truth_rows(scores, tally, options))
        report["truth"] = {
            "ignored_premises": scores.ignored_premises,
            "ignored_premises_flagged": scores.ignored_premises_flagged,
            "pairs_without_truth_step": scores.pairs_without_truth_step,
        }
    return report


def _truth_rows(scores: TruthScores, tally: ModelTally, options: EvaluateOptions) -> JSONDict:
    ids = problem_order(tally.outcomes)  # the bootstrap rows must not follow completion order
    counts_by_row: dict[str, Counts] = {}
    for row in TRUTH_ROWS:
        counts = np.zeros((len(ids), 4), dtype=np.int64)
        for r, pid in enumerate(ids):
            c = scores.counts[row].get(pid)
            if c is not None:
                counts[r] = c
        counts_by_row[row] = counts
    boot = None
    if options.n_boot and ids:
        # Every truth row on the same resamples, in one pass over their chunks.
        boot = bootstrap_rows(
            counts_by_row, indices=resample_indices(len(ids), options.n_boot, rng=options.seed)
        )
    return {
        row: row_entry(point_scores(counts), boot.rows[row] if boot is not None else None)
        for row, counts in counts_by_row.items()
    }


def evaluate_records(
    records: Iterable[JSONDict], options: EvaluateOptions | None = None
) -> tuple[Evaluation, list[ProblemAudit]]:
    """Evaluate a whole record iterable in memory (tests, verify); returns audits in order."""
    evaluation = Evaluation(options or EvaluateOptions())
    audits: list[ProblemAudit] = []
    for record in records:
        audits.extend(evaluation.feed(record))
    audits.extend(evaluation.finish())
    return evaluation, audits


def require_problems(evaluation: Evaluation, where: str) -> None:
    """A stream with responses but no problem records cannot be evaluated: say so."""
    if evaluation.orphans and not evaluation.problems:
        raise UsageError(
            f"{evaluation.orphans} response records but no problem records",
            where=where,
            fix="Problem records must precede responses (see docs/schema.md).",
        )
