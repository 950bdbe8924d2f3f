"""The certify stage: one sealed certificate per pair (docs/certificates.md), the pairs scored
against a truth record, and the consistent evaluator's false positives with their causes.

What a certificate shares with others is computed once: per original step (its text, reading,
position, alignment and id), per premise (the sources: every output the premise's probes
read) and per (premise, proof step) (the counterparts' numbers and positions).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cotaudit.domain.proposition import parse_canonical
from cotaudit.schema import SCHEMA_VERSION, JSONDict, canonical_json, sha256_hex
from evaluator.align import substitute
from evaluator.canon import ParsedStep
from evaluator.certificates import (
    CERTIFICATE_FORMAT,
    CERTIFICATE_KIND,
    FORMAT_FIELD,
    SEAL_FIELD,
    certificate_id,
)
from evaluator.grouping import ResponseGroup
from evaluator.pairs import AuditPair
from evaluator.stage_records import PROBE_CONDITIONS, AlignedGroup, ParsedGroup, Trace
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


def _sealed(content: JSONDict) -> JSONDict:
    """``content`` with its seal set in place (the seal of docs/certificates.md)."""
    content[SEAL_FIELD] = sha256_hex(canonical_json(content))
    return content


def sealed_line(content: JSONDict) -> bytes:
    """Seal ``content`` in place and return its canonical JSON line, serialising it once.

    Canonical JSON sorts the keys, so the sealed certificate's bytes are those of the keys
    before ``sha256``, the seal, then those after: the content is serialised in these two
    halves, whose join (without the seal) is exactly what the seal is the hash of.
    """
    head = {k: v for k, v in content.items() if k < SEAL_FIELD}
    tail = {k: v for k, v in content.items() if k > SEAL_FIELD}
    if not head or not tail:  # (never for a certificate; kept exact for any mapping)
        content[SEAL_FIELD] = sha256_hex(canonical_json(content))
        return canonical_json(content) + b"\n"
    line, content[SEAL_FIELD] = _line(head, tail)
    return line


@dataclass(frozen=True, slots=True)
class _StepPart:
    """The fields of a certificate that depend on the original step alone."""

    step: ParsedStep
    position: int
    occurrence: int
    original_alignment: str  # "matched" or "unmatched:<reason>"


def _probe_lookup(
    aligned: AlignedGroup, premise_id: str, proof_step: int | None
) -> tuple[dict[str, int | None], dict[str, int | None]]:
    # The counterpart of the pair's proof step under each probe: its written number and its
    # position (what the pipeline looked it up by), None when missing.
    numbers: dict[str, int | None] = {}
    positions: dict[str, int | None] = {}
    for c in PROBE_CONDITIONS:
        found = aligned.probes[(premise_id, c)].counterpart(proof_step)
        numbers[c] = None if found.step is None else found.step.number
        positions[c] = None if found.position is None else found.position + 1
    return numbers, positions


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
    unmatched = aligned.alignment.unmatched_reason_at(position)
    part = _StepPart(
        step,
        position,
        occurrence,
        "matched" if pair.proof_step is not None else f"unmatched:{unmatched}",
    )
    numbers, positions = _probe_lookup(aligned, pair.premise_id, pair.proof_step)
    substitution = aligned.substitutions.get(pair.premise_id)
    head, tail = _halves(
        group.endpoint,
        group.endpoint,
        "answer",
        group.model,
        pair,
        decisions,
        i,
        part,
        numbers,
        positions,
        dict(substitution) if substitution else None,
        aligned.alignment.ambiguous,
        dict(sorted(sources.items())),
    )
    return _sealed({**head, **tail})


def _halves(
    section: str,
    endpoint: str,
    trace: Trace,
    model: Mapping[str, Any],
    pair: AuditPair,
    decisions: AuditDecisions,
    i: int,
    part: _StepPart,
    numbers: dict[str, int | None],
    positions: dict[str, int | None],
    substitution: dict[str, str] | None,
    ambiguous: bool,
    sources: dict[str, str | None],
) -> tuple[JSONDict, JSONDict]:
    """A certificate's fields before ``sha256`` (in key order) and after it (see
    :func:`sealed_line`): built apart so that the line is serialised without copying."""
    combined = decisions.combined[i]
    cascaded = decisions.cascaded[i]
    consistent = decisions.consistent[i]
    reading = part.step.reading
    head: JSONDict = {
        "alignment": {
            "original": part.original_alignment,
            "consistent": pair.align_consistent or "missing",
            "local": pair.align_local or ("vanished" if pair.vanished_local else "missing"),
            "surface": pair.align_surface or "missing",
            "ambiguous_problem": ambiguous,
        },
        "assumed": reading.assumed,
        "attributed_local": combined.attributed_local,
        "citation": {"cites": pair.cites_premise, "evidence": pair.citation_evidence},
        "cot_index": part.position + 1,
        "cot_step": pair.cot_step,
        "decision_rule": combined.rule,
        "decision_rule_cascade": cascaded.rule,
        "decision_rule_consistent": consistent.rule,
        "delta": {
            "consistent": pair.delta("consistent"),
            "local": pair.delta("local"),
            "surface": pair.delta("surface"),
        },
        "endpoint": endpoint,
        "excluded": list(pair.exclusion_reasons),
        FORMAT_FIELD: CERTIFICATE_FORMAT,
        "gold": {
            "direct_parent": pair.is_direct_parent,
            "entity_premise": pair.is_entity_premise,
        },
        "hops": pair.hops,
        "id": certificate_id(
            section, pair.problem_id, pair.cot_step, pair.premise_id, part.occurrence
        ),
        "kind": CERTIFICATE_KIND,
        "misrepresentation": consistent.misrepresentation,
        "model": model,
        "non_assertion": reading.category if reading.status == "non_assertion" else None,
        "parsed": {
            "original": pair.parsed_original,
            "consistent": pair.parsed_consistent,
            "local": pair.parsed_local,
            "surface": pair.parsed_surface,
        },
        "phi": {
            "original": pair.phi_original,
            "consistent": pair.phi_consistent,
            "local": pair.phi_local,
            "surface": pair.phi_surface,
        },
        "premise_id": pair.premise_id,
        "probe_step_index": positions,
        "probe_steps": numbers,
        "problem_id": pair.problem_id,
        "proof_step": pair.proof_step,
        "schema": SCHEMA_VERSION,
    }
    tail: JSONDict = {
        "sources": sources,
        "step_status": reading.status,
        "step_text": part.step.text,
        "string_diff_changed": pair.text_changed,
        "substitution": substitution,
        "target_shared": pair.target_shared,
        "trace": trace,
        "vanished": {"local": pair.vanished_local},
        "verdict": combined.verdict.value,
        "verdict_cascade": cascaded.verdict.value,
        "verdict_consistent": consistent.verdict.value,
        "verdict_local": decisions.local[i].verdict.value,
        "verdict_no_surface": decisions.no_surface[i].verdict.value,
    }
    return head, tail


def _line(head: JSONDict, tail: JSONDict) -> tuple[bytes, str]:
    """The sealed line of a certificate given as its two halves, and its seal."""
    head_bytes = canonical_json(head)[:-1]  # without its closing brace
    tail_bytes = canonical_json(tail)[1:]  # without its opening brace
    digest = sha256_hex(head_bytes + b"," + tail_bytes)
    line = b"".join(
        (head_bytes, b',"', SEAL_FIELD.encode(), b'":"', digest.encode(), b'",', tail_bytes, b"\n")
    )
    return line, digest


@dataclass(frozen=True, slots=True)
class Certified:
    """The certify stage's output."""

    certificates: list[JSONDict]
    truth_pairs: list[TruthPair]
    false_positives: list[JSONDict]
    lines: bytes = b""  # the certificates as canonical JSON lines


def certify_stage(
    group: ResponseGroup,
    parsed: ParsedGroup,
    aligned: AlignedGroup,
    pairs: Sequence[AuditPair],
    decisions: AuditDecisions,
    truth: Truth | None,
    original_hash: str | None,
    trace: Trace = "answer",
    section: str | None = None,
    *,
    with_dicts: bool = True,
) -> Certified:
    """Certificates of every pair, the pairs scored against the truth, and the false
    positives of the consistent evaluator with their causes. ``original_hash`` is the hash
    of the original's audited text; ``section`` the id prefix (default: the endpoint).
    ``with_dicts`` False: the certificates as lines only (``Certified.lines``; a worker sends
    no more), ``Certified.certificates`` left empty."""
    assert parsed.original is not None and parsed.original_record is not None
    original_rid = str(parsed.original_record.get("request_id"))
    steps = parsed.original.steps
    alignment = aligned.alignment
    per_step = len(pairs) // len(steps) if steps else 0  # build_pairs: premises per step
    seen: Counter[int] = Counter()
    step_parts: list[_StepPart] = []
    for position, step in enumerate(steps):
        seen[step.number] += 1
        unmatched = alignment.unmatched_reason_at(position)
        matched = alignment.proof_step_at(position) is not None
        step_parts.append(
            _StepPart(
                step,
                position,
                seen[step.number],
                "matched" if matched else f"unmatched:{unmatched}",
            )
        )
    # Per premise: the sources of its certificates, and its consistent substitution.
    premise_sources: dict[str, dict[str, str | None]] = {}
    premise_substitution: dict[str, dict[str, str] | None] = {}
    lookups: dict[tuple[str, int | None], tuple[dict[str, int | None], dict[str, int | None]]]
    lookups = {}
    certificates: list[JSONDict] = []
    lines: list[bytes] = []
    truth_pairs: list[TruthPair] = []
    false_positives: list[JSONDict] = []
    for i, pair in enumerate(pairs):
        premise_id = pair.premise_id
        sources = premise_sources.get(premise_id)
        if sources is None:
            collected = {original_rid: original_hash}
            for condition in PROBE_CONDITIONS:
                collected.update(aligned.probes[(premise_id, condition)].sources)
            sources = premise_sources[premise_id] = dict(sorted(collected.items()))
            substitution = aligned.substitutions.get(premise_id)
            premise_substitution[premise_id] = dict(substitution) if substitution else None
        key = (premise_id, pair.proof_step)
        lookup = lookups.get(key)
        if lookup is None:
            lookup = lookups[key] = _probe_lookup(aligned, premise_id, pair.proof_step)
        substitution = premise_substitution[premise_id]
        share = not with_dicts  # serialised at once: the sub-dicts need no copies
        head, tail = _halves(
            section or group.endpoint,
            group.endpoint,
            trace,
            group.model,
            pair,
            decisions,
            i,
            step_parts[i // per_step],
            lookup[0] if share else dict(lookup[0]),
            lookup[1] if share else dict(lookup[1]),
            substitution if share or substitution is None else dict(substitution),
            alignment.ambiguous,
            sources if share else dict(sources),
        )
        line, digest = _line(head, tail)
        lines.append(line)
        cert_id = str(head["id"])
        if with_dicts:
            cert = {**head, **tail, SEAL_FIELD: digest}
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
                    "id": cert_id,
                    "verdict": decisions.consistent[i].verdict.value,
                    "cause": _fp_cause(pair, aligned.substitutions.get(pair.premise_id)),
                }
            )
    return Certified(certificates, truth_pairs, false_positives, b"".join(lines))
