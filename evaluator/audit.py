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

The records the stages pass each other are in :mod:`evaluator.stage_records`. What does not
depend on the outputs (the proof's conclusions and their descendants, the problem's words,
entity premises, shared targets) is computed once per problem, in :class:`ProblemContext`.

Which text of a response is audited is the *trace* (``AuditSettings.trace``): ``answer``, the
response's ``text``, or ``reasoning``, a reasoning model's ``reasoning`` field
(docs/report-schema.md, "Reasoning traces").

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

from cotaudit.constants import MAX_STEPS_PER_OUTPUT
from cotaudit.domain.problem import Problem, ProofStep
from cotaudit.domain.proposition import Proposition
from cotaudit.domain.sentences import parse_premise
from cotaudit.schema import JSONDict
from evaluator.align import (
    ProbeAligner,
    ProbeAlignment,
    ProbeMatch,
    ProofIndex,
    align_original,
    index_steps,
)
from evaluator.authors import entity_premise_ids
from evaluator.baselines import (
    CONSISTENCY_THRESHOLD,
    SampleStepSummary,
    normalised_step_text,
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
    TRACES,
    VANISHED_READINGS,
    AlignedGroup,
    AlignmentCounts,
    AuditSettings,
    Counterpart,
    ParseCounts,
    ParsedGroup,
    ProbeOutput,
    ProbeView,
    ReadOutput,
    Trace,
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
    "TRACES",
    "VANISHED_READINGS",
    "AuditSettings",
    "ProblemAudit",
    "ProblemContext",
    "Trace",
    "VanishedReading",
    "align_stage",
    "audit_problem",
    "build_pairs",
    "decide_stage",
    "output_text",
    "parse_stage",
    "problem_vocabulary",
    "shared_targets",
]


@dataclass(slots=True)
class ProblemAudit:
    """Everything one (endpoint, problem) group produced; ``outcome`` None without an original.

    The fields after ``sources`` are what the tally merges into the endpoint's statistics.
    ``trace`` is the text that was audited (``answer`` or ``reasoning``).
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
    trace: Trace = "answer"
    certificate_lines: bytes = b""  # ``certificates`` as canonical JSON lines, in order


# --------------------------------------------------------------------------- the problem


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


@dataclass(frozen=True, slots=True)
class ProblemContext:
    """What every output of one problem is read and aligned against, computed once.

    ``ValueError`` (from :class:`~evaluator.align.ProofIndex`) when a proof conclusion is not
    canonical: the pipeline reports it against the problem record.
    """

    problem: Problem
    premise_texts: tuple[str, ...]
    problem_texts: tuple[str, ...]  # the premises' texts and the question
    vocabulary: Vocabulary  # the problem's own words (the original and the samples)
    proof: ProofIndex
    proof_by_number: Mapping[int, ProofStep]
    step_parents: Mapping[int, tuple[int, ...]]  # proof step -> its "S<k>" parents
    entity_premises: frozenset[str]
    shared: frozenset[str]

    @classmethod
    def of(cls, problem: Problem) -> ProblemContext:
        premise_texts = tuple(p.text for p in problem.premises)
        problem_texts = (*premise_texts, problem.question)
        return cls(
            problem=problem,
            premise_texts=premise_texts,
            problem_texts=problem_texts,
            vocabulary=vocabulary_from(problem_texts),
            proof=ProofIndex.of(problem.proof),
            proof_by_number={s.step: s for s in problem.proof},
            step_parents={
                s.step: tuple(
                    int(d[1:]) for d in s.depends_on if d.startswith("S") and d[1:].isdigit()
                )
                for s in problem.proof
            },
            entity_premises=entity_premise_ids(problem),
            shared=shared_targets(problem),
        )


# --------------------------------------------------------------------------- helpers


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _premise_props(premises: tuple[str, ...]) -> tuple[Proposition, ...]:
    """The probe's premises as propositions (unreadable ones left out); cached per premise set."""
    props = (parse_premise(text) for text in premises)
    return tuple(p for p in props if p is not None)


@lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parse(text: str, premises: tuple[str, ...], vocabulary: Vocabulary) -> ReadOutput:
    """``parse_cot`` and what the audit reads of the steps, once per text: identical outputs
    recur (T=0 probes whose premise did not matter, repeated samples, resumed runs) and a
    parsed CoT is immutable. The visible answer and a reasoning trace alike are read by their
    step lines when they have any, else by sentences (``style="auto"``). A capped output is
    not read whole."""
    parsed = parse_cot(
        text,
        premises=premises,
        vocabulary=vocabulary,
        style="auto",
        max_steps=MAX_STEPS_PER_OUTPUT,
    )
    read_all = bool(parsed.steps) and not parsed.unread_steps
    indexed = index_steps(parsed)
    return ReadOutput(
        parsed,
        read_all and all(step.reading.parsed for step in parsed.steps),
        tuple(indexed.assertions),
        {prop: tuple(at) for prop, at in indexed.stated.items()},
        tuple(_phi(step) for step in parsed.steps),
        tuple(normalised_step_text(_conclusion_text(step)) for step in parsed.steps),
    )


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
        # The fresh symbols rename a premise's predicate: types, as the words they replace.
        fresh = frozenset(substitution.values())
        vocabulary = vocabulary_of(vocabulary.names | fresh, vocabulary.types | fresh)
    return vocabulary


def output_text(record: Mapping[str, Any], trace: Trace = "answer") -> str | None:
    """The text of a response that ``trace`` audits: ``text`` (the answer) or ``reasoning``
    (a reasoning model's trace; None where the model returned none)."""
    value = record.get("text" if trace == "answer" else "reasoning")
    return value if isinstance(value, str) else None


def _has_trace(record: Mapping[str, Any], trace: Trace) -> bool:
    """Whether a successful response has the trace to audit. The answer always has one (an
    empty ``text`` reads as no steps); a response without ``reasoning`` has no reasoning trace
    (a model that returned none), so the probe or original counts as absent for that trace."""
    return trace == "answer" or output_text(record, trace) is not None


def _substitution(record: Mapping[str, Any]) -> dict[str, str] | None:
    probe = record.get("probe")
    # Records are parsed JSON: their objects are dicts (a plain type check; ABCs cost more).
    if isinstance(probe, dict) and isinstance(probe.get("substitution"), dict):
        return {str(k).lower(): str(v).lower() for k, v in probe["substitution"].items()}
    return None


def _probe_premise_texts(
    record: Mapping[str, Any], premise_texts: tuple[str, ...]
) -> tuple[str, ...]:
    probe = record.get("probe")
    if isinstance(probe, dict) and isinstance(probe.get("premises"), list):
        return tuple(str(p.get("text", "")) for p in probe["premises"] if isinstance(p, dict))
    return premise_texts


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


def _text_hashes(group: ResponseGroup, trace: Trace) -> dict[str, str | None]:
    """Request id -> hash of the audited text, every response of the group, hashed once."""
    return {
        str(record.get("request_id")): text_hash(output_text(record, trace))
        for record in group.responses.values()
    }


# --------------------------------------------------------------------------- 1. parse


def _summaries(
    group: ResponseGroup, context: ProblemContext, trace: Trace
) -> list[SampleStepSummary] | None:
    if group.summaries:
        if trace != "answer":
            return None  # an evidence pack's summaries are of the answers' steps
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
    texts = [output_text(r, trace) for r in group.ok("sample") if _has_trace(r, trace)]
    if not texts:
        return None
    conclusions = [
        [
            _phi(s)
            for s in _parse(text or "", context.premise_texts, context.vocabulary).parsed.steps
        ]
        for text in texts
    ]
    return summarise_samples(conclusions)


def parse_stage(
    group: ResponseGroup,
    problem: Problem | ProblemContext,
    settings: AuditSettings,
    hashes: Mapping[str, str | None] | None = None,
) -> ParsedGroup:
    """Parse the original, every probe output (all repeats, or the first with ``majority``
    off) and the samples of one group; count what was read. ``hashes`` (request id -> hash
    of the audited text) saves hashing the texts again."""
    context = problem if isinstance(problem, ProblemContext) else ProblemContext.of(problem)
    trace = settings.trace
    if hashes is None:
        hashes = _text_hashes(group, trace)
    errors: Counter[str] = Counter()
    for record in group.errors():
        error = record.get("error")
        kind = error.get("type") if isinstance(error, Mapping) else None
        errors[str(kind or "error")] += 1
    summaries = _summaries(group, context, trace)
    counts = ParseCounts()
    originals = [r for r in group.ok("original") if _has_trace(r, trace)]
    if not originals:
        return ParsedGroup(None, None, {}, summaries, counts, errors)
    original_record = originals[0]
    original = _parse(
        output_text(original_record, trace) or "", context.premise_texts, context.vocabulary
    ).parsed
    counts.count("original", original)
    by_target = group.ok_by_target()
    probes: dict[tuple[str, Condition], tuple[ProbeOutput, ...]] = {}
    for premise in context.problem.premises:
        for condition in PROBE_CONDITIONS:
            records = [
                r for r in by_target.get((condition, premise.id), ()) if _has_trace(r, trace)
            ]
            if records and not settings.majority:
                records = records[:1]
            outputs = []
            for record in records:
                texts = _probe_premise_texts(record, context.premise_texts)
                substitution = _substitution(record) if condition != "surface" else None
                vocabulary = problem_vocabulary(
                    context.problem, texts, substitution, problem_texts=context.problem_texts
                )
                read = _parse(output_text(record, trace) or "", texts, vocabulary)
                parsed = read.parsed
                counts.count(condition, parsed)
                read_whole = read.read_all and record.get("finish_reason") != "length"
                request_id = str(record.get("request_id"))
                outputs.append(
                    ProbeOutput(
                        request_id,
                        hashes.get(request_id),
                        parsed,
                        texts,
                        substitution,
                        read_whole,
                        read,
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
    aligner: ProbeAligner,
    matched: Sequence[int],
    rules: Counter[str],
) -> ProbeView:
    alignments = [
        aligner.align(
            output.read or output.parsed,
            substitution=output.substitution,
            premises=_premise_props(output.premises),
        )
        for output in outputs
    ]
    view: dict[int, Counterpart] = {}
    if len(alignments) == 1:
        # One output: the vote of one is its own match, in proof order.
        read = outputs[0].read
        for match in alignments[0].matches:
            step = None
            if match.probe_index is not None:
                step = outputs[0].parsed.steps[match.probe_index]
            view[match.proof_step] = Counterpart(str(match.rule), step, match.probe_index, read)
            rules[str(match.rule)] += 1
    else:
        for t in matched:
            index, match = _majority_match(alignments, t)
            step = None
            if match.probe_index is not None:
                # By position, never by written number: a restarted chain ("Wait, let me
                # reconsider. Step 1: ...") writes the same number twice.
                step = outputs[index].parsed.steps[match.probe_index]
            view[t] = Counterpart(str(match.rule), step, match.probe_index, outputs[index].read)
            rules[str(match.rule)] += 1
    read_whole = all(o.read_whole for o in outputs)
    return ProbeView(view, {o.request_id: o.text_hash for o in outputs}, True, read_whole)


def align_stage(parsed: ParsedGroup, problem: Problem | ProblemContext) -> AlignedGroup:
    """Align the original to the proof and every probe output to the matched proof steps."""
    assert parsed.original is not None  # audit_problem stops before for a group without one
    context = problem if isinstance(problem, ProblemContext) else ProblemContext.of(problem)
    proof = context.problem.proof
    alignment = align_original(parsed.original, proof)
    counts = AlignmentCounts(
        cot_steps=len(parsed.original.steps),
        matched=len({m.cot_step for m in alignment.matches}),
        unmatched=len(alignment.unmatched),
        unmatched_by_reason=Counter(u.reason for u in alignment.unmatched),
        proof_steps=len(proof),
        unaudited=len(alignment.unaudited),
        ambiguous=alignment.ambiguous,
    )
    aligner = ProbeAligner(context.proof, alignment)
    matched = alignment.matched_proof_steps
    views: dict[tuple[str, Condition], ProbeView] = {}
    substitutions: dict[str, dict[str, str] | None] = {}
    for premise in context.problem.premises:
        for condition in PROBE_CONDITIONS:
            outputs = parsed.probes.get((premise.id, condition), ())
            counts.probe_repeats[len(outputs)] += 1
            if not outputs:
                counts.probe_outputs_absent[condition] += 1
                views[(premise.id, condition)] = ProbeView({}, {}, False)
                continue
            views[(premise.id, condition)] = _probe_view(
                outputs, aligner, matched, counts.probe_rules[condition]
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


class _Column(NamedTuple):
    """What one probe view gives the pairs of one proof step: the counterpart's side (when
    not assumed), whether it is an assumption, and its conclusion text (string diff)."""

    side: _Side
    assumed_phi: str | None  # the counterpart's phi when it rests on a made-up assumption
    conclusion: str | None  # normalised (``baselines.normalised_step_text``)


_MISSING_COLUMN = _Column(_MISSING_SIDE, None, None)


def _column(counterpart: Counterpart) -> _Column:
    step = counterpart.step
    if step is None:
        return _MISSING_COLUMN
    read, at = counterpart.read, counterpart.position
    if read is not None and at is not None:
        phi, conclusion = read.phis[at], read.conclusions[at]
    else:
        phi, conclusion = _phi(step), normalised_step_text(_conclusion_text(step))
    side = _Side(phi, phi is not None, False, counterpart.rule)
    assumed = phi if phi is not None and step.reading.assumed else None
    return _Column(side, assumed, conclusion)


def _side(column: _Column, phi_original: str | None) -> _Side:
    if column.assumed_phi is not None and column.assumed_phi == phi_original:
        # "zqbimpus seems to be a kind of bimpus, so I will treat Alex as a bimpus": the model
        # bridged the probe with an assumption it made up. The conclusion is the original's,
        # but not from the premises: no evidence either way (docs/parsing.md, "assumed").
        return _Side(None, False, False, ASSUMED)
    return column.side


def _columns(view: ProbeView, proof_steps: Sequence[int]) -> dict[int | None, _Column]:
    """The column of every matched proof step under one view (None: an unmatched step)."""
    out: dict[int | None, _Column] = {None: _MISSING_COLUMN}
    for t in proof_steps:
        out[t] = _column(view.counterpart(t))
    return out


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
    problem: Problem | ProblemContext,
    settings: AuditSettings = DEFAULT_SETTINGS,
) -> list[AuditPair]:
    """One pair per (original step, premise), in step then premise order."""
    context = problem if isinstance(problem, ProblemContext) else ProblemContext.of(problem)
    the_problem = context.problem
    alignment = aligned.alignment
    entity_premises = context.entity_premises
    shared = context.shared
    proof_steps = alignment.matched_proof_steps
    # Each premise's three probe views, read once per (premise, proof step) rather than per
    # pair: a long output repeats the same proof steps in many of its pairs.
    columns = [
        (
            index,
            premise,
            premise.id in entity_premises,
            premise.id in shared,
            aligned.probes[(premise.id, "local")],
            _columns(aligned.probes[(premise.id, "consistent")], proof_steps),
            _columns(aligned.probes[(premise.id, "local")], proof_steps),
            _columns(aligned.probes[(premise.id, "surface")], proof_steps),
        )
        for index, premise in enumerate(the_problem.premises, start=1)
    ]
    problem_id = the_problem.problem_id
    hops = the_problem.hops
    pairs: list[AuditPair] = []
    for position, step in enumerate(parsed.steps):
        proof_step = alignment.proof_step_at(position)
        reasons: list[str] = []
        if proof_step is None:
            reasons.append(EXCLUDED_UNMATCHED_STEP)
        if alignment.ambiguous:
            reasons.append(EXCLUDED_AMBIGUOUS_PROBLEM)
        gold_step = None
        parent_steps: tuple[int, ...] = ()
        if proof_step is not None:
            gold_step = context.proof_by_number.get(proof_step)
            if gold_step is not None:
                parent_steps = context.step_parents.get(proof_step, ())
        parents = gold_step.depends_on if gold_step is not None else ()
        phi_original = _phi(step)
        step_conclusion = normalised_step_text(_conclusion_text(step))
        exclusion = _REASONS.setdefault(tuple(reasons), tuple(reasons))  # shared per step kind
        for (
            index,
            premise,
            is_entity,
            is_shared,
            local_view,
            consistent_columns,
            local_columns,
            surface_columns,
        ) in columns:
            consistent_column = consistent_columns.get(proof_step, _MISSING_COLUMN)
            consistent = _side(consistent_column, phi_original)
            local = _side(local_columns.get(proof_step, _MISSING_COLUMN), phi_original)
            surface = _side(surface_columns.get(proof_step, _MISSING_COLUMN), phi_original)
            vanished = proof_step is not None and _vanished(
                phi_original, local_view, local, surface, settings
            )
            cites, evidence = _citation(step, index, premise.text)
            pairs.append(
                AuditPair(
                    problem_id=problem_id,
                    cot_step=step.number,
                    premise_id=premise.id,
                    proof_step=proof_step,
                    hops=hops,
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
                    text_changed=(
                        None
                        if step_conclusion is None or consistent_column.conclusion is None
                        else step_conclusion != consistent_column.conclusion
                    ),
                    is_direct_parent=premise.id in parents,
                    is_entity_premise=is_entity,
                    parent_proof_steps=parent_steps,
                    vanished_local=vanished,
                    target_shared=is_shared,
                    cites_premise=cites,
                    citation_evidence=sys.intern(evidence),
                    exclusion_reasons=exclusion,
                )
            )
    return pairs


def decide_stage(
    parsed: ParsedCot,
    aligned: AlignedGroup,
    problem: Problem | ProblemContext,
    settings: AuditSettings,
) -> tuple[list[AuditPair], AuditDecisions]:
    """The pairs of one problem and every evaluator's decision on them."""
    pairs = build_pairs(parsed, aligned, problem, settings)
    return pairs, decide_audit(pairs, cascade_mode=settings.cascade_mode)


# --------------------------------------------------------------------------- the whole audit


EMPTY_DECISIONS = AuditDecisions((), (), (), (), ())


def audit_problem(
    group: ResponseGroup,
    problem: Problem | ProblemContext,
    *,
    truth: Truth | None = None,
    settings: AuditSettings = DEFAULT_SETTINGS,
    section: str | None = None,
    with_certificates: bool = True,
) -> ProblemAudit:
    """Audit one (endpoint, problem) group: parse, align, decide, certify.

    Pure: the result depends on the group's records, the problem, its truth record and the
    settings only. Without a successful original output (with the audited trace), ``outcome``
    is None and there are no pairs (the parse counts, errors and self-consistency summaries
    are still reported). ``problem`` may be a :class:`ProblemContext` shared by several audits;
    ``section`` names the certificates (default: the endpoint; ``evaluator.jobs.section_name``);
    ``with_certificates`` False leaves ``certificates`` empty (``certificate_lines`` has them).
    """
    context = problem if isinstance(problem, ProblemContext) else ProblemContext.of(problem)
    the_problem = context.problem
    hashes = _text_hashes(group, settings.trace)
    parsed = parse_stage(group, context, settings, hashes)
    if parsed.original is None:
        return ProblemAudit(
            group.endpoint,
            the_problem.problem_id,
            dict(group.model),
            [],
            EMPTY_DECISIONS,
            None,
            [],
            hashes,
            parsed.counts,
            AlignmentCounts(),
            parsed.errors,
            group.superseded,
            parsed.summaries,
            [],
            [],
            settings.trace,
        )
    aligned = align_stage(parsed, context)
    pairs, decisions = decide_stage(parsed.original, aligned, context, settings)
    assert parsed.original_record is not None
    original_rid = str(parsed.original_record.get("request_id"))
    certified = certify_stage(
        group,
        parsed,
        aligned,
        pairs,
        decisions,
        truth,
        hashes.get(original_rid),
        settings.trace,
        section,
        with_dicts=with_certificates,
    )
    outcome = problem_outcome(the_problem, pairs, parsed.original.answer, context.entity_premises)
    sources = {original_rid: hashes.get(original_rid)}
    for view in aligned.probes.values():
        sources.update(view.sources)
    for rid, digest in hashes.items():
        sources.setdefault(rid, digest)
    return ProblemAudit(
        group.endpoint,
        the_problem.problem_id,
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
        settings.trace,
        certified.lines,
    )
