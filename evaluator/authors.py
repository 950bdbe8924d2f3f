"""The authors' evidence pack as decision-layer input: their certificates -> AuditPairs.

``cotaudit rescore`` feeds *their* per-certificate fields to *our* rules, so this module maps
fields and never decides anything:

==============================  ============================================================
certificate field               AuditPair field
==============================  ============================================================
phi_original/semantic/...       phi_original/phi_consistent/phi_local/phi_surface
parse_ok_orig/sem/local/sur     parsed_original/parsed_consistent/parsed_local/parsed_surface
alignment_sem/local/sur         missing_* (``MISSING_IN_PROBED``), align_* = "step_number"
semantic/local/surface_delta    delta_consistent/delta_local/delta_surface (given, not re-derived)
citation_detected/_evidence     cites_premise/citation_evidence
cot_step_id, matched_proof_...  cot_step, proof_step
evaluation_excluded + reason    exclusion_reasons (and the problem-level exclusion)
==============================  ============================================================

Gold (direct parents, entity premises, parent proof steps) comes from the problem's proof tree
(``pNNN/problem_meta.json``). The string-diff input is the certificate's own conclusion
strings: ``phi_semantic != phi_original`` (the certificates keep no step text; the authors'
published string-diff row equals this comparison count for count - docs/decision-layer.md).
Answers are read from ``original_cot.json`` (the last ``Answer: True/False``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from cotaudit.domain.pack_layout import EVIDENCE_DIRNAME, pack_json, pack_models
from cotaudit.domain.problem import Premise, Problem, ProofStep
from cotaudit.domain.proposition import parse_canonical
from cotaudit.errors import UsageError
from evaluator.baselines import SampleStepSummary, SelfConsistencyInput
from evaluator.pairs import (
    EXCLUDED_AMBIGUOUS_PROBLEM,
    AuditPair,
    ProblemOutcome,
    conclusion_delta,
    problem_outcome,
)

_CERT_NAME = re.compile(r"^cert_S(\d+)_(P\d+)\.json$")
_ANSWER = re.compile(r"Answer:\s*\**\s*(True|False)\b", re.IGNORECASE)
MISSING = "MISSING_IN_PROBED"


@dataclass(frozen=True, slots=True)
class AuthorsVerdict:
    """The authors' own decision for one certificate (reference only, never an input)."""

    verdict: str
    rule: str
    verdict_consistent: str


@dataclass(frozen=True, slots=True)
class AuthorsPack:
    """One model directory of an evidence pack, loaded."""

    model: str
    problems: dict[str, Problem]
    pairs: tuple[AuditPair, ...]
    outcomes: tuple[ProblemOutcome, ...]
    entity_premises: dict[str, frozenset[str]]
    verdicts: dict[tuple[str, int, str], AuthorsVerdict]
    self_consistency: SelfConsistencyInput | None
    published: dict[str, Any] = field(default_factory=dict)  # file stem -> parsed JSON
    # (CoT step, premise) pairs of a problem's steps with no certificate file, relative to
    # the model's directory (``pNNN/certificates/cert_Si_Pj.json``)
    missing_certificates: tuple[str, ...] = ()

    @property
    def problem_ids(self) -> list[str]:
        return [o.problem_id for o in self.outcomes]


_RESTORE = "Restore the file from the pack."


def _read_json(path: Path) -> Any:
    try:
        return pack_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise UsageError("file not found", where=str(path), fix=_RESTORE) from exc
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"not valid JSON ({exc})", where=str(path), fix=_RESTORE) from exc


def _field(data: Mapping[str, Any], name: str, path: Path, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(data, Mapping) or name not in data:
        raise UsageError(
            f"missing field {name!r}", where=str(path), fix="Is this an evidence pack file?"
        )
    value = data[name]
    if not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wanted = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
        raise UsageError(
            f"field {name!r} should be {wanted}, got {type(value).__name__} {value!r:.40}",
            where=str(path),
        )
    return value


def _opt_str(data: Mapping[str, Any], name: str, path: Path) -> str | None:
    value = _field(data, name, path, (str, type(None)))
    return value if isinstance(value, str) else None


def _opt_bool(data: Mapping[str, Any], name: str, path: Path) -> bool | None:
    value = _field(data, name, path, (bool, type(None)))
    return value if isinstance(value, bool) else None


def load_problem(path: Path) -> Problem:
    """A pack problem (``problem_meta.json`` or ``data/prontoqa_50/pNNN.json``)."""
    data = _read_json(path)
    premises = tuple(
        Premise(str(_field(p, "id", path, str)), str(_field(p, "text", path, str)))
        for p in _field(data, "premises", path, list)
    )
    proof = tuple(
        ProofStep(
            int(_field(s, "step", path, int)),
            str(_field(s, "conclusion", path, str)),
            tuple(str(d) for d in _field(s, "depends_on", path, list)),
        )
        for s in _field(data, "proof_tree", path, list)
    )
    return Problem(
        problem_id=str(_field(data, "problem_id", path, str)),
        premises=premises,
        question=str(_field(data, "question", path, str)),
        answer=bool(_field(data, "answer", path, bool)),
        proof=proof,
        source=f"evidence pack {path.parent.name}",
    )


def entity_premise_ids(problem: Problem) -> frozenset[str]:
    """Premises that introduce the proof's entity (``Alex is a bempus``): structural.

    The entity is the subject of the proof's ``is``/``not_is`` conclusions; a premise whose
    sentence starts with that name (``Alex is ...``) introduces it.
    """
    entities: set[str] = set()
    for step in problem.proof:
        try:
            prop = parse_canonical(step.conclusion)
        except ValueError:
            continue
        if prop.kind in ("is", "not_is"):
            entities.add(prop.subject)
    out = set()
    for premise in problem.premises:
        words = premise.text.split()
        if len(words) > 1 and words[0].lower() in entities and words[1] == "is":
            out.add(premise.id)
    return frozenset(out)


def _pair_from_certificate(
    data: Mapping[str, Any], path: Path, problem: Problem, entities: frozenset[str]
) -> tuple[AuditPair, AuthorsVerdict]:
    premise_id = str(_field(data, "premise_id", path, str))
    cot_step = int(_field(data, "cot_step_id", path, int))
    proof_step_raw = _field(data, "matched_proof_step_id", path, (int, type(None)))
    proof_step = proof_step_raw if isinstance(proof_step_raw, int) else None
    gold_step = next((s for s in problem.proof if s.step == proof_step), None)
    if proof_step is not None and gold_step is None:
        raise UsageError(
            f"matched_proof_step_id {proof_step} is not a step of {problem.problem_id}'s proof",
            where=str(path),
        )
    parents = gold_step.depends_on if gold_step else ()
    phi_original = _opt_str(data, "phi_original", path)
    phi_consistent = _opt_str(data, "phi_semantic", path)
    reasons: list[str] = []
    if _field(data, "evaluation_excluded", path, bool):
        reasons.append(_opt_str(data, "exclusion_reason", path) or "excluded")
    if _field(data, "primary_metric_excluded_problem", path, bool):
        reasons.append(
            _opt_str(data, "primary_metric_exclusion_reason", path) or EXCLUDED_AMBIGUOUS_PROBLEM
        )
    pair = AuditPair(
        problem_id=problem.problem_id,
        cot_step=cot_step,
        premise_id=premise_id,
        proof_step=proof_step,
        hops=problem.hops,
        phi_original=phi_original,
        phi_consistent=phi_consistent,
        phi_local=_opt_str(data, "phi_local", path),
        phi_surface=_opt_str(data, "phi_surface", path),
        parsed_original=bool(_field(data, "parse_ok_orig", path, bool)),
        parsed_consistent=bool(_field(data, "parse_ok_sem", path, bool)),
        parsed_local=bool(_field(data, "parse_ok_local", path, bool)),
        parsed_surface=bool(_field(data, "parse_ok_sur", path, bool)),
        missing_consistent=_field(data, "alignment_sem", path, str) == MISSING,
        missing_local=_field(data, "alignment_local", path, str) == MISSING,
        missing_surface=_field(data, "alignment_sur", path, str) == MISSING,
        align_consistent=None if data["alignment_sem"] == MISSING else "step_number",
        align_local=None if data["alignment_local"] == MISSING else "step_number",
        align_surface=None if data["alignment_sur"] == MISSING else "step_number",
        delta_consistent=_opt_bool(data, "semantic_delta", path),
        delta_local=_opt_bool(data, "local_delta", path),
        delta_surface=_opt_bool(data, "surface_delta", path),
        text_changed=conclusion_delta(phi_original, phi_consistent),
        is_direct_parent=premise_id in parents,
        is_entity_premise=premise_id in entities,
        parent_proof_steps=tuple(int(d[1:]) for d in parents if d.startswith("S")),
        cites_premise=bool(_field(data, "citation_detected", path, bool)),
        citation_evidence=_opt_str(data, "citation_evidence", path) or "",
        exclusion_reasons=tuple(reasons),
    )
    verdict = AuthorsVerdict(
        verdict=str(_field(data, "verdict", path, str)),
        rule=str(_field(data, "decision_rule", path, str)),
        verdict_consistent=str(_field(data, "verdict_consistent", path, str)),
    )
    return pair, verdict


def read_answer(text: str) -> bool | None:
    """The last ``Answer: True/False`` of a raw output, or ``None``."""
    found = _ANSWER.findall(text)
    return found[-1].lower() == "true" if found else None


def _load_summaries(path: Path) -> list[SampleStepSummary]:
    data = _read_json(path)
    steps = _field(data, "step_verdicts", path, dict)
    out = []
    for key, value in steps.items():
        if not str(key).isdigit():
            raise UsageError(f"step_verdicts key {key!r} is not a step number", where=str(path))
        out.append(
            SampleStepSummary(
                step=int(key),
                consistent=bool(_field(value, "consistent", path, bool)),
                agreement=float(_field(value, "agreement", path, (int, float))),
                majority=_opt_str(value, "majority_conclusion", path),
                n_valid=int(_field(value, "n_valid", path, int)),
            )
        )
    return sorted(out, key=lambda s: s.step)


def certificate_alignment(pack: AuthorsPack) -> dict[str, Any]:
    """The ``alignment`` slot of the report from the certificates' own alignment fields.

    Counts as the authors' ``step_alignment_summary.json`` does: CoT steps of the original
    outputs, those matched to a proof step, proof steps no CoT step matched, problems excluded
    as ambiguous; probe steps missing are counted per certificate (one probe per premise).
    """
    steps = {(p.problem_id, p.cot_step): p for p in pack.pairs}
    matched = {(p.problem_id, p.proof_step) for p in pack.pairs if p.proof_step is not None}
    ambiguous = sorted(
        {p.problem_id for p in pack.pairs if EXCLUDED_AMBIGUOUS_PROBLEM in p.exclusion_reasons}
    )
    proof_steps = sum(problem.hops for problem in pack.problems.values())
    return {
        "cot_steps": len(steps),
        "matched": sum(1 for p in steps.values() if p.proof_step is not None),
        "unmatched": sum(1 for p in steps.values() if p.proof_step is None),
        "proof_steps": proof_steps,
        "proof_steps_unaudited": proof_steps - len(matched),
        "ambiguous_problems": len(ambiguous),
        "ambiguous_problem_ids": ambiguous,
        "probe_steps_missing": {
            "consistent": sum(1 for p in pack.pairs if p.missing_consistent),
            "local": sum(1 for p in pack.pairs if p.missing_local),
            "surface": sum(1 for p in pack.pairs if p.missing_surface),
        },
        "unit_of_probe_counts": "certificate",
    }


def certificate_parse_rates(pack: AuthorsPack) -> dict[str, float]:
    """The ``parse_rates`` slot as the authors define it: the share of certificates whose step
    was read under each condition (they classify no non-assertions: every unread step fails).
    """
    n = len(pack.pairs) or 1
    return {
        "original": sum(1 for p in pack.pairs if p.parsed_original) / n,
        "consistent": sum(1 for p in pack.pairs if p.parsed_consistent) / n,
        "local": sum(1 for p in pack.pairs if p.parsed_local) / n,
        "surface": sum(1 for p in pack.pairs if p.parsed_surface) / n,
    }


PUBLISHED_FILES = ("final_report", "ablation", "bootstrap_ci")


def _model_dir(pack_dir: Path, model: str) -> Path:
    """``pack_dir/evidence/MODEL``, or ``UsageError`` saying what ``pack_dir`` is instead
    (missing, a file, the pack's ``evidence/`` or model directory, no pack) and what to give."""
    give = "Give the pack's root directory, the one holding evidence/MODEL/"
    if not pack_dir.exists():
        raise UsageError("no such directory", where=str(pack_dir), fix=f"{give}.")
    if not pack_dir.is_dir():
        raise UsageError(
            "a file, not an evidence pack's directory", where=str(pack_dir), fix=f"{give}."
        )
    models = pack_models(pack_dir)
    if not models:
        # A plausible slip: a directory of the pack (evidence/, evidence/MODEL/pNNN) for its
        # root; the message then names the root.
        root = next((r for r in pack_dir.resolve().parents if pack_models(r)), None)
        if root is not None:
            raise UsageError(
                f"a directory inside the evidence pack {root}, not its root",
                where=str(pack_dir),
                fix=f"Give the root: cotaudit rescore {root} --model MODEL.",
            )
        # The directory the pack was unpacked into (the pack one level down): name it.
        below = sorted(d for d in pack_dir.resolve().iterdir() if d.is_dir() and pack_models(d))
        if below:
            raise UsageError(
                "this directory holds an evidence pack, it is not one",
                where=str(pack_dir),
                fix=f"Give the root: cotaudit rescore {below[0]} --model MODEL.",
            )
        raise UsageError(
            f"not an evidence pack: no {EVIDENCE_DIRNAME}/MODEL/ directory",
            where=str(pack_dir),
            fix=f"{give}.",
        )
    if model not in models:
        raise UsageError(
            f"the pack has no evidence for model {model!r}",
            where=f"--model {model}" if model else "--model",
            fix=f"Name one of the pack's models: {', '.join(models)}.",
        )
    return pack_dir / EVIDENCE_DIRNAME / model


def load_pack(pack_dir: Path, model: str) -> AuthorsPack:
    """Load ``pack_dir/evidence/MODEL`` (certificates, problems, answers), the model's
    self-consistency summaries when present, and its published reports when present.

    Raises ``UsageError`` naming the file and field of anything missing or malformed.
    """
    base = _model_dir(pack_dir, model)
    problem_dirs = sorted(d for d in base.iterdir() if d.is_dir() and (d / "certificates").is_dir())
    if not problem_dirs:
        raise UsageError("no pNNN/certificates/ directories", where=str(base))
    problems: dict[str, Problem] = {}
    entity: dict[str, frozenset[str]] = {}
    pairs: list[AuditPair] = []
    verdicts: dict[tuple[str, int, str], AuthorsVerdict] = {}
    outcomes: list[ProblemOutcome] = []
    holes: list[str] = []
    for pdir in problem_dirs:
        problem = load_problem(pdir / "problem_meta.json")
        problems[problem.problem_id] = problem
        entity[problem.problem_id] = entity_premise_ids(problem)
        mine: list[AuditPair] = []
        for cert in sorted(pdir.joinpath("certificates").iterdir()):
            if not _CERT_NAME.match(cert.name):
                continue
            pair, verdict = _pair_from_certificate(
                _read_json(cert), cert, problem, entity[problem.problem_id]
            )
            mine.append(pair)
            verdicts[pair.key] = verdict
        holes.extend(_certificate_holes(pdir, problem, mine))
        mine.sort(key=lambda p: (p.cot_step, int(p.premise_id[1:])))
        pairs.extend(mine)
        original = _read_json(pdir / "original_cot.json")
        answer = read_answer(str(_field(original, "raw_response", pdir / "original_cot.json", str)))
        outcomes.append(problem_outcome(problem, mine, answer, entity[problem.problem_id]))
    sc_dir = pack_dir / "baselines" / "self_consistency" / model
    sc: SelfConsistencyInput | None = None
    if sc_dir.is_dir():
        summaries = {
            pid: _load_summaries(sc_dir / f"{pid}_samples.json")
            for pid in problems
            if (sc_dir / f"{pid}_samples.json").is_file()
        }
        sc = SelfConsistencyInput(problems, summaries, entity)
    return AuthorsPack(
        model=model,
        problems=problems,
        pairs=tuple(pairs),
        outcomes=tuple(outcomes),
        entity_premises=entity,
        verdicts=verdicts,
        self_consistency=sc,
        published=published_reports(pack_dir, model),
        missing_certificates=tuple(holes),
    )


def published_reports(pack_dir: Path, model: str) -> dict[str, Any]:
    """The model's published reports that the pack has (:data:`PUBLISHED_FILES`: file stem ->
    parsed JSON); ``UsageError`` naming a file that is not JSON (truncated, a BOM)."""
    base = _model_dir(pack_dir, model)
    return {
        stem: _read_json(base / f"{stem}.json")
        for stem in PUBLISHED_FILES
        if (base / f"{stem}.json").is_file()
    }


def _certificate_holes(pdir: Path, problem: Problem, pairs: list[AuditPair]) -> list[str]:
    """The certificates a problem lacks (``pNNN/certificates/cert_Si_Pj.json``, relative to
    the model's directory): the authors wrote one per pair of CoT steps 1..k and premises, so
    a hole is most likely a file lost from the pack, and the table rescored without it differs
    from the published one for that reason alone."""
    have = {(p.cot_step, p.premise_id) for p in pairs}
    steps = max((p.cot_step for p in pairs), default=0)
    return [
        f"{pdir.name}/certificates/cert_S{step}_{premise.id}.json"
        for step in range(1, steps + 1)
        for premise in problem.premises
        if (step, premise.id) not in have
    ]
