"""The certify stage: one sealed certificate per pair (docs/certificates.md), the pairs scored
against a truth record, and the consistent evaluator's false positives with their causes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cotaudit.domain.proposition import parse_canonical
from cotaudit.schema import SCHEMA_VERSION, JSONDict
from evaluator.align import substitute
from evaluator.canon import ParsedStep
from evaluator.certificates import (
    CERTIFICATE_FORMAT,
    CERTIFICATE_KIND,
    FORMAT_FIELD,
    certificate_id,
    seal,
    text_hash,
)
from evaluator.grouping import ResponseGroup
from evaluator.pairs import AuditPair
from evaluator.stage_records import PROBE_CONDITIONS, AlignedGroup, ParsedGroup
from evaluator.tables import AuditDecisions
from evaluator.truth import Truth, TruthPair


def _fp_cause(pair: AuditPair, substitution: Mapping[str, str] | None) -> str:
    rule = pair.align_consistent or "missing"
    base = (
        f"phi_orig {pair.phi_original} -> phi_consistent {pair.phi_consistent} (aligned by {rule})"
    )
    if pair.phi_original is not None and pair.phi_consistent is not None and substitution:
        renamed = str(substitute(parse_canonical(pair.phi_original), substitution))
        if renamed == pair.phi_consistent:
            return (
                "expected substitution: the conclusion names the renamed predicate, which the "
                "step reaches through another premise (an indirect, predicate-determining "
                f"dependency); {base}"
            )
    return f"output variation: the probe reached a different conclusion; {base}"


def certificate(
    group: ResponseGroup,
    pair: AuditPair,
    decisions: AuditDecisions,
    i: int,
    step: ParsedStep,
    position: int,
    occurrence: int,
    aligned: AlignedGroup,
    sources: Mapping[str, str | None],
) -> JSONDict:
    """The sealed certificate of ``pair`` (``decisions[...][i]`` are its decisions; ``step``
    is the original step at 0-based ``position``, the ``occurrence``-th with its number)."""
    combined = decisions.combined[i]
    cascaded = decisions.cascaded[i]
    consistent = decisions.consistent[i]
    reading = step.reading
    alignment = aligned.alignment
    substitution = aligned.substitutions.get(pair.premise_id)
    unmatched = alignment.unmatched_reason_at(position)
    # The counterpart of the pair's proof step under each probe: its written number and its
    # position (what the pipeline looked it up by), None when missing.
    numbers: dict[str, int | None] = {}
    positions: dict[str, int | None] = {}
    for c in PROBE_CONDITIONS:
        found = aligned.probes[(pair.premise_id, c)].counterpart(pair.proof_step)
        numbers[c] = None if found.step is None else found.step.number
        positions[c] = None if found.position is None else found.position + 1
    content: JSONDict = {
        "kind": CERTIFICATE_KIND,
        "schema": SCHEMA_VERSION,
        FORMAT_FIELD: CERTIFICATE_FORMAT,
        "id": certificate_id(
            group.endpoint, pair.problem_id, pair.cot_step, pair.premise_id, occurrence
        ),
        "endpoint": group.endpoint,
        "model": group.model,
        "problem_id": pair.problem_id,
        "cot_step": pair.cot_step,
        "cot_index": position + 1,
        "premise_id": pair.premise_id,
        "proof_step": pair.proof_step,
        "hops": pair.hops,
        "step_text": step.text,
        "phi": {
            "original": pair.phi_original,
            "consistent": pair.phi_consistent,
            "local": pair.phi_local,
            "surface": pair.phi_surface,
        },
        "parsed": {
            "original": pair.parsed_original,
            "consistent": pair.parsed_consistent,
            "local": pair.parsed_local,
            "surface": pair.parsed_surface,
        },
        "delta": {c: pair.delta(c) for c in PROBE_CONDITIONS},
        "alignment": {
            "original": "matched" if pair.proof_step is not None else f"unmatched:{unmatched}",
            "consistent": pair.align_consistent or "missing",
            "local": pair.align_local or ("vanished" if pair.vanished_local else "missing"),
            "surface": pair.align_surface or "missing",
            "ambiguous_problem": alignment.ambiguous,
        },
        "probe_steps": numbers,
        "probe_step_index": positions,
        "substitution": dict(substitution) if substitution else None,
        "vanished": {"local": pair.vanished_local},
        "target_shared": pair.target_shared,
        "attributed_local": combined.attributed_local,
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
        "assumed": reading.assumed,
        "step_status": reading.status,
        "excluded": list(pair.exclusion_reasons),
        "sources": dict(sorted(sources.items())),
    }
    return seal(content)


@dataclass(frozen=True, slots=True)
class Certified:
    """The certify stage's output."""

    certificates: list[JSONDict]
    truth_pairs: list[TruthPair]
    false_positives: list[JSONDict]


def certify_stage(
    group: ResponseGroup,
    parsed: ParsedGroup,
    aligned: AlignedGroup,
    pairs: Sequence[AuditPair],
    decisions: AuditDecisions,
    truth: Truth | None,
) -> Certified:
    """Certificates of every pair, the pairs scored against the truth, and the false
    positives of the consistent evaluator with their causes."""
    assert parsed.original is not None and parsed.original_record is not None
    original_rid = str(parsed.original_record.get("request_id"))
    original_hash = text_hash(parsed.original_record.get("text"))
    steps = parsed.original.steps
    per_step = len(pairs) // len(steps) if steps else 0  # build_pairs: premises per step
    seen: Counter[int] = Counter()
    occurrences = []
    for step in steps:
        seen[step.number] += 1
        occurrences.append(seen[step.number])
    certificates: list[JSONDict] = []
    truth_pairs: list[TruthPair] = []
    false_positives: list[JSONDict] = []
    for i, pair in enumerate(pairs):
        step_sources = {original_rid: original_hash}
        for condition in PROBE_CONDITIONS:
            step_sources.update(aligned.probes[(pair.premise_id, condition)].sources)
        position = i // per_step
        cert = certificate(
            group,
            pair,
            decisions,
            i,
            steps[position],
            position,
            occurrences[position],
            aligned,
            step_sources,
        )
        certificates.append(cert)
        if truth is not None and not pair.excluded:
            truth_pairs.append(
                TruthPair(
                    problem_id=pair.problem_id,
                    conclusion=pair.phi_original,
                    premise_id=pair.premise_id,
                    is_direct_parent=pair.is_direct_parent,
                    verdict_consistent=decisions.consistent[i].verdict.value,
                    verdict_cascade=decisions.cascaded[i].verdict.value,
                )
            )
        if not pair.excluded and not pair.gold_full and decisions.consistent[i].positive:
            false_positives.append(
                {
                    "id": cert["id"],
                    "verdict": decisions.consistent[i].verdict.value,
                    "cause": _fp_cause(pair, aligned.substitutions.get(pair.premise_id)),
                }
            )
    return Certified(certificates, truth_pairs, false_positives)
