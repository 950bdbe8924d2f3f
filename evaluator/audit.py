"""One (endpoint, problem) group -> pairs, decisions and certificates, in named stages.

:func:`audit_problem` is a pure function of the group's records, the problem, its truth record
(if any) and the options: it reads no state shared with other problems, so problems can be
audited in any order or in parallel, and :class:`evaluator.tally.ModelTally` merges the results.

1. **parse** (:func:`parse_stage`): the original output, every probe output and the
   self-consistency samples through ``evaluator.canon.parse_cot``; counts of steps read.
2. **align** (:func:`align_stage`): the original's steps to the proof by content
   (``evaluator.align.align_original``) and, per premise and probe condition, the counterpart
   of each matched proof step (``align_probe``; the majority over probe repeats).
3. **decide** (:func:`decide_stage`): one :class:`~evaluator.pairs.AuditPair` per (original
   step, premise) and the decisions of every evaluator (``evaluator.tables.decide_audit``).
4. **certify** (:func:`evaluator.certify.certify_stage`): one sealed certificate per pair, the
   truth pairs and the false positives of the consistent evaluator.

The records the stages pass each other are in :mod:`evaluator.stage_records`.

The statistics over all problems (``evaluator.pipeline.model_report``) run once per endpoint at
the end. When a probe was sent several times (``probe_repeats``; sample indices 0..r-1), each
proof step takes the majority conclusion over the repeats (ties: the lowest sample index), the
majority-vote option of docs/decision-layer.md.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from cotaudit.domain.problem import Problem
from cotaudit.domain.proposition import Proposition
from cotaudit.domain.sentences import parse_premise
from cotaudit.schema import JSONDict
from evaluator.align import (
    OriginalAlignment,
    ProbeAlignment,
    ProbeMatch,
    align_original,
    align_probe,
)
from evaluator.authors import entity_premise_ids
from evaluator.baselines import (
    CONSISTENCY_THRESHOLD,
    SampleStepSummary,
    step_text_changed,
    summarise_samples,
)
from evaluator.canon import ParsedCot, ParsedStep, parse_cot
from evaluator.canon.vocabulary import Vocabulary, vocabulary_from, vocabulary_of
from evaluator.certificates import text_hash
from evaluator.certify import certify_stage
from evaluator.grouping import ResponseGroup
from evaluator.pairs import (
    EXCLUDED_AMBIGUOUS_PROBLEM,
    EXCLUDED_UNMATCHED_STEP,
    AuditPair,
    Condition,
    ProblemOutcome,
    problem_outcome,
)
from evaluator.stage_records import (
    ASSUMED,
    PARSE_CONDITIONS,
    PROBE_CONDITIONS,
    VANISHED_READINGS,
    AlignedGroup,
    AlignmentCounts,
    AuditSettings,
    Counterpart,
    ParseCounts,
    ParsedGroup,
    ProbeOutput,
    ProbeView,
    VanishedReading,
)
from evaluator.tables import AuditDecisions, decide_audit
from evaluator.truth import Truth, TruthPair

PARSE_CACHE_SIZE = 4096  # parsed outputs kept (each a few KB)
DEFAULT_SETTINGS = AuditSettings()
_REASONS: dict[tuple[str, ...], tuple[str, ...]] = {}

__all__ = [
    "PARSE_CONDITIONS",
    "PROBE_CONDITIONS",
    "VANISHED_READINGS",
    "AuditSettings",
    "ProblemAudit",
    "VanishedReading",
    "align_stage",
    "audit_problem",
    "build_pairs",
    "decide_stage",
    "parse_stage",
    "problem_vocabulary",
    "shared_targets",
]


@dataclass(slots=True)
class ProblemAudit:
    """Everything one (endpoint, problem) group produced; ``outcome`` None without an original.

    The fields after ``sources`` are what the tally merges into the endpoint's statistics.
    """

    endpoint: str
    problem_id: str
    model: JSONDict
    pairs: list[AuditPair]
    decisions: AuditDecisions
    outcome: ProblemOutcome | None
    certificates: list[JSONDict]
    sources: dict[str, str | None]  # request id -> text hash, every response of the group
    parse_counts: ParseCounts
    alignment_counts: AlignmentCounts
    errors: Counter[str]
    superseded: int
    summaries: list[SampleStepSummary] | None
    truth_pairs: list[TruthPair]
    false_positives: list[JSONDict]


# --------------------------------------------------------------------------- helpers


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _premise_props(premises: tuple[str, ...]) -> tuple[Proposition, ...]:
    """The probe's premises as propositions (unreadable ones left out); cached per premise set."""
    props = (parse_premise(text) for text in premises)
    return tuple(p for p in props if p is not None)


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parse_read(
    text: str, premises: tuple[str, ...], vocabulary: Vocabulary
) -> tuple[ParsedCot, bool]:
    """``parse_cot`` with a cache (identical outputs recur: T=0 probes whose premise did not
    matter, repeated samples, resumed runs; a parsed CoT is immutable), and whether every
    step of it was read or classified."""
    parsed = parse_cot(text, premises=premises, vocabulary=vocabulary)
    return parsed, bool(parsed.steps) and all(step.reading.parsed for step in parsed.steps)


def _parse(text: str, premises: tuple[str, ...], vocabulary: Vocabulary) -> ParsedCot:
    return _parse_read(text, premises, vocabulary)[0]


def problem_vocabulary(
    problem: Problem,
    probe_premises: tuple[str, ...] = (),
    substitution: Mapping[str, str] | None = None,
    *,
    problem_texts: tuple[str, ...] | None = None,
) -> Vocabulary:
    """The words an output of ``problem`` is read against: the problem's premises and
    question, and the probe's premises and fresh symbols. ``problem_texts`` (the premises'
    texts and the question, in that order) saves building them once per probe output."""
    if problem_texts is None:
        problem_texts = (*(p.text for p in problem.premises), problem.question)
    vocabulary = vocabulary_from(problem_texts + probe_premises)
    if substitution and not set(substitution.values()) <= vocabulary.names:
        vocabulary = vocabulary_of(vocabulary.names | frozenset(substitution.values()))
    return vocabulary


def _text(record: Mapping[str, Any]) -> str:
    text = record.get("text")
    return text if isinstance(text, str) else ""


def _substitution(record: Mapping[str, Any]) -> dict[str, str] | None:
    probe = record.get("probe")
    if isinstance(probe, Mapping) and isinstance(probe.get("substitution"), Mapping):
        return {str(k).lower(): str(v).lower() for k, v in probe["substitution"].items()}
    return None


def _probe_premise_texts(record: Mapping[str, Any], problem: Problem) -> tuple[str, ...]:
    probe = record.get("probe")
    if isinstance(probe, Mapping) and isinstance(probe.get("premises"), list):
        return tuple(str(p.get("text", "")) for p in probe["premises"] if isinstance(p, Mapping))
    return tuple(p.text for p in problem.premises)


def _phi(step: ParsedStep | None) -> str | None:
    if step is None or step.reading.status != "assertion" or step.prop is None:
        return None
    return sys.intern(str(step.prop))  # held once per pair and condition: share the strings


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


def _citation(step: ParsedStep, premise_index: int, premise_text: str) -> tuple[bool, str]:
    reading = step.reading
    if premise_index in reading.cited_premises:
        return True, f"names premise {premise_index}"
    if premise_index in reading.echoed_premises:
        return True, f"restates premise {premise_index}: {premise_text!r}"
    return False, ""


# --------------------------------------------------------------------------- 1. parse


def _summaries(
    group: ResponseGroup, problem: Problem, premise_texts: tuple[str, ...]
) -> list[SampleStepSummary] | None:
    if group.summaries:
        return [
            SampleStepSummary(
                step=int(s["cot_step"]),
                consistent=float(s["agreement"]) >= CONSISTENCY_THRESHOLD,
                agreement=float(s["agreement"]),
                majority=s.get("majority_conclusion"),
                n_valid=int(s.get("n_valid") or 0),
            )
            for s in group.summaries[-1].get("steps", [])
        ]
    samples = group.ok("sample")
    if not samples:
        return None
    vocabulary = problem_vocabulary(problem)
    conclusions = [
        [_phi(s) for s in _parse(_text(r), premise_texts, vocabulary).steps] for r in samples
    ]
    return summarise_samples(conclusions)


def parse_stage(group: ResponseGroup, problem: Problem, settings: AuditSettings) -> ParsedGroup:
    """Parse the original, every probe output (all repeats, or the first with ``majority``
    off) and the samples of one group; count what was read."""
    errors: Counter[str] = Counter()
    for record in group.errors():
        error = record.get("error")
        kind = error.get("type") if isinstance(error, Mapping) else None
        errors[str(kind or "error")] += 1
    premise_texts = tuple(p.text for p in problem.premises)
    summaries = _summaries(group, problem, premise_texts)
    counts = ParseCounts()
    originals = group.ok("original")
    if not originals:
        return ParsedGroup(None, None, {}, summaries, counts, errors)
    original_record = originals[0]
    problem_texts = (*premise_texts, problem.question)
    original = _parse(
        _text(original_record),
        premise_texts,
        problem_vocabulary(problem, problem_texts=problem_texts),
    )
    counts.count("original", original)
    by_target = group.ok_by_target()
    probes: dict[tuple[str, Condition], tuple[ProbeOutput, ...]] = {}
    for premise in problem.premises:
        for condition in PROBE_CONDITIONS:
            records = by_target.get((condition, premise.id), [])
            if records and not settings.majority:
                records = records[:1]
            outputs = []
            for record in records:
                texts = _probe_premise_texts(record, problem)
                substitution = _substitution(record) if condition != "surface" else None
                vocabulary = problem_vocabulary(
                    problem, texts, substitution, problem_texts=problem_texts
                )
                parsed, all_read = _parse_read(_text(record), texts, vocabulary)
                counts.count(condition, parsed)
                read_whole = all_read and record.get("finish_reason") != "length"
                outputs.append(
                    ProbeOutput(
                        str(record.get("request_id")),
                        text_hash(record.get("text")),
                        parsed,
                        texts,
                        substitution,
                        read_whole,
                    )
                )
            probes[(premise.id, condition)] = tuple(outputs)
    return ParsedGroup(original_record, original, probes, summaries, counts, errors)


# --------------------------------------------------------------------------- 2. align


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


def _probe_view(
    outputs: Sequence[ProbeOutput],
    problem: Problem,
    original: OriginalAlignment,
    rules: Counter[str],
) -> ProbeView:
    alignments = [
        align_probe(
            output.parsed,
            original,
            problem.proof,
            substitution=output.substitution,
            premises=_premise_props(output.premises),
        )
        for output in outputs
    ]
    view: dict[int, Counterpart] = {}
    for t in original.matched_proof_steps:
        index, match = _majority_match(alignments, t)
        step = None
        if match.probe_index is not None:
            # By position, never by written number: a restarted chain ("Wait, let me
            # reconsider. Step 1: ...") writes the same number twice.
            step = outputs[index].parsed.steps[match.probe_index]
        view[t] = Counterpart(str(match.rule), step, match.probe_index)
        rules[str(match.rule)] += 1
    read_whole = all(o.read_whole for o in outputs)
    return ProbeView(view, {o.request_id: o.text_hash for o in outputs}, True, read_whole)


def align_stage(parsed: ParsedGroup, problem: Problem) -> AlignedGroup:
    """Align the original to the proof and every probe output to the matched proof steps."""
    assert parsed.original is not None  # audit_problem stops before for a group without one
    alignment = align_original(parsed.original, problem.proof)
    counts = AlignmentCounts(
        cot_steps=len(parsed.original.steps),
        matched=len({m.cot_step for m in alignment.matches}),
        unmatched=len(alignment.unmatched),
        unmatched_by_reason=Counter(u.reason for u in alignment.unmatched),
        proof_steps=len(problem.proof),
        unaudited=len(alignment.unaudited),
        ambiguous=alignment.ambiguous,
    )
    views: dict[tuple[str, Condition], ProbeView] = {}
    substitutions: dict[str, dict[str, str] | None] = {}
    for premise in problem.premises:
        for condition in PROBE_CONDITIONS:
            outputs = parsed.probes.get((premise.id, condition), ())
            counts.probe_repeats[len(outputs)] += 1
            if not outputs:
                counts.probe_outputs_absent[condition] += 1
                views[(premise.id, condition)] = ProbeView({}, {}, False)
                continue
            views[(premise.id, condition)] = _probe_view(
                outputs, problem, alignment, counts.probe_rules[condition]
            )
            if condition == "consistent":
                substitutions[premise.id] = outputs[0].substitution
    return AlignedGroup(alignment, views, substitutions, counts)


# --------------------------------------------------------------------------- 3. decide


class _Side(NamedTuple):
    """What a pair records of one probe condition."""

    phi: str | None
    parsed: bool
    missing: bool
    align: str | None


_MISSING_SIDE = _Side(None, False, True, None)


def _side(counterpart: Counterpart, phi_original: str | None) -> _Side:
    step = counterpart.step
    if step is None:
        return _MISSING_SIDE
    phi = _phi(step)
    if phi is not None and step.reading.assumed and phi == phi_original:
        # "zqbimpus seems to be a kind of bimpus, so I will treat Alex as a bimpus": the model
        # bridged the probe with an assumption it made up. The conclusion is the original's,
        # but not from the premises: no evidence either way (docs/parsing.md, "assumed").
        return _Side(None, False, False, ASSUMED)
    return _Side(phi, phi is not None, False, counterpart.rule)


def shared_targets(problem: Problem) -> frozenset[str]:
    """Premises whose target predicate (object) is the object of another premise too.

    The consistent probe renames a premise's object in every premise, so for these it changes
    several premises at once: no premise-level intervention (docs/decision-layer.md).
    """
    objects: dict[str, str] = {}
    for premise in problem.premises:
        prop = parse_premise(premise.text)
        if prop is not None:
            objects[premise.id] = prop.object
    counts = Counter(objects.values())
    return frozenset(pid for pid, obj in objects.items() if counts[obj] > 1)


def _vanished(
    phi_original: str | None,
    local_view: ProbeView,
    local: _Side,
    surface: _Side,
    settings: AuditSettings,
) -> bool:
    """The step's conclusion vanished under the local probe (see ``AuditPair.vanished_local``):
    read original, local output read whole with no counterpart, surface reaches the same."""
    return (
        settings.vanished == "change"
        and phi_original is not None
        and local_view.present
        and local_view.read_whole
        and local.missing
        and surface.phi == phi_original
    )


def build_pairs(
    parsed: ParsedCot,
    aligned: AlignedGroup,
    problem: Problem,
    settings: AuditSettings = DEFAULT_SETTINGS,
) -> list[AuditPair]:
    """One pair per (original step, premise), in step then premise order."""
    alignment = aligned.alignment
    entity_premises = entity_premise_ids(problem)
    shared = shared_targets(problem)
    proof_by_number = {s.step: s for s in problem.proof}
    # Each premise's three probe views, looked up once per problem rather than per pair.
    columns = [
        (
            index,
            premise,
            aligned.probes[(premise.id, "consistent")],
            aligned.probes[(premise.id, "local")],
            aligned.probes[(premise.id, "surface")],
        )
        for index, premise in enumerate(problem.premises, start=1)
    ]
    pairs: list[AuditPair] = []
    for position, step in enumerate(parsed.steps):
        proof_step = alignment.proof_step_at(position)
        reasons: list[str] = []
        if proof_step is None:
            reasons.append(EXCLUDED_UNMATCHED_STEP)
        if alignment.ambiguous:
            reasons.append(EXCLUDED_AMBIGUOUS_PROBLEM)
        gold_step = proof_by_number.get(proof_step) if proof_step is not None else None
        parents = gold_step.depends_on if gold_step is not None else ()
        parent_steps = tuple(int(d[1:]) for d in parents if d.startswith("S") and d[1:].isdigit())
        phi_original = _phi(step)
        step_conclusion = _conclusion_text(step)
        exclusion = _REASONS.setdefault(tuple(reasons), tuple(reasons))  # shared per step kind
        for index, premise, consistent_view, local_view, surface_view in columns:
            consistent_step = consistent_view.counterpart(proof_step)
            consistent = _side(consistent_step, phi_original)
            local = _side(local_view.counterpart(proof_step), phi_original)
            surface = _side(surface_view.counterpart(proof_step), phi_original)
            vanished = proof_step is not None and _vanished(
                phi_original, local_view, local, surface, settings
            )
            cites, evidence = _citation(step, index, premise.text)
            pairs.append(
                AuditPair(
                    problem_id=problem.problem_id,
                    cot_step=step.number,
                    premise_id=premise.id,
                    proof_step=proof_step,
                    hops=problem.hops,
                    phi_original=phi_original,
                    phi_consistent=consistent.phi,
                    phi_local=local.phi,
                    phi_surface=surface.phi,
                    parsed_original=phi_original is not None,
                    parsed_consistent=consistent.parsed,
                    parsed_local=local.parsed,
                    parsed_surface=surface.parsed,
                    missing_consistent=consistent.missing,
                    missing_local=local.missing,
                    missing_surface=surface.missing,
                    align_consistent=consistent.align,
                    align_local=local.align,
                    align_surface=surface.align,
                    text_changed=step_text_changed(
                        step_conclusion, _conclusion_text(consistent_step.step)
                    ),
                    is_direct_parent=premise.id in parents,
                    is_entity_premise=premise.id in entity_premises,
                    parent_proof_steps=parent_steps,
                    vanished_local=vanished,
                    target_shared=premise.id in shared,
                    cites_premise=cites,
                    citation_evidence=sys.intern(evidence),
                    exclusion_reasons=exclusion,
                )
            )
    return pairs


def decide_stage(
    parsed: ParsedCot, aligned: AlignedGroup, problem: Problem, settings: AuditSettings
) -> tuple[list[AuditPair], AuditDecisions]:
    """The pairs of one problem and every evaluator's decision on them."""
    pairs = build_pairs(parsed, aligned, problem, settings)
    return pairs, decide_audit(pairs, cascade_mode=settings.cascade_mode)


# --------------------------------------------------------------------------- the whole audit


EMPTY_DECISIONS = AuditDecisions((), (), (), (), ())


def _group_sources(group: ResponseGroup) -> dict[str, str | None]:
    return {
        str(record.get("request_id")): text_hash(record.get("text"))
        for record in group.responses.values()
    }


def audit_problem(
    group: ResponseGroup,
    problem: Problem,
    *,
    truth: Truth | None = None,
    settings: AuditSettings = DEFAULT_SETTINGS,
) -> ProblemAudit:
    """Audit one (endpoint, problem) group: parse, align, decide, certify.

    Pure: the result depends on the group's records, the problem, its truth record and the
    settings only. Without a successful original output, ``outcome`` is None and there are no
    pairs (the parse counts, errors and self-consistency summaries are still reported).
    """
    parsed = parse_stage(group, problem, settings)
    if parsed.original is None:
        return ProblemAudit(
            group.endpoint,
            problem.problem_id,
            dict(group.model),
            [],
            EMPTY_DECISIONS,
            None,
            [],
            _group_sources(group),
            parsed.counts,
            AlignmentCounts(),
            parsed.errors,
            group.superseded,
            parsed.summaries,
            [],
            [],
        )
    aligned = align_stage(parsed, problem)
    pairs, decisions = decide_stage(parsed.original, aligned, problem, settings)
    certified = certify_stage(group, parsed, aligned, pairs, decisions, truth)
    outcome = problem_outcome(problem, pairs, parsed.original.answer, entity_premise_ids(problem))
    sources = {}
    assert parsed.original_record is not None
    sources[str(parsed.original_record.get("request_id"))] = text_hash(
        parsed.original_record.get("text")
    )
    for view in aligned.probes.values():
        sources.update(view.sources)
    for rid, digest in _group_sources(group).items():
        sources.setdefault(rid, digest)
    return ProblemAudit(
        group.endpoint,
        problem.problem_id,
        dict(group.model),
        pairs,
        decisions,
        outcome,
        certified.certificates,
        sources,
        parsed.counts,
        aligned.counts,
        parsed.errors,
        group.superseded,
        parsed.summaries,
        certified.truth_pairs,
        certified.false_positives,
    )
