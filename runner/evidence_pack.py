"""Convert the paper's evidence pack into our JSONL stream (``cotaudit import-evidence``).

Pack layout (``grounding-audit-gpt4o``)::

    data/prontoqa_50/pNNN.json                            problems (with proof_tree)
    evidence/MODEL/pNNN/original_cot.json                 original output (raw_response, prompt)
    evidence/MODEL/pNNN/probes/{semantic,local,surface}_Pj.json    one output per probe
    baselines/self_consistency/MODEL/pNNN_samples.json    per-step summaries (optional)

Output: ``problem`` records first, then per problem its ``response`` records (original, then
probes in premise order: consistent, local, surface) and, where the pack has them, one
``sample_summary`` record (documented in docs/reproduction.md). Raw texts and prompts are kept
byte for byte; the pack's own SHA-256 of each raw output is checked on the way in. Everything
is read and validated before anything is written, so a bad pack writes nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from cotaudit.domain.pack_layout import (
    EVIDENCE_DIRNAME,
    PROBLEMS_DIR,
    pack_json,
    pack_models,
    pack_usage,
)
from cotaudit.domain.problem import Premise, Problem, ProofStep
from cotaudit.errors import UsageError
from cotaudit.schema import SCHEMA_VERSION, JSONDict, sha256_hex
from runner.request_spec import EndpointIdentity, make_spec

PACK_CONDITIONS: Mapping[str, str] = {
    "semantic": "consistent",
    "local": "local",
    "surface": "surface",
}
CONDITION_ORDER = ("consistent", "local", "surface")
_PROBLEM_FILE = re.compile(r"^p\d+\.json$")
_PROBLEM_DIR = re.compile(r"^p\d+$")
_PROBE_FILE = re.compile(r"^(semantic|local|surface)_(P\d+)\.json$")
OPENAI_HOST = "api.openai.com"


@dataclass(frozen=True, slots=True)
class ImportResult:
    """Counts of what an import wrote."""

    problems: int
    responses: int
    summaries: int
    stream: Path
    # Probes of the problems' premises with no output file in the pack ("p007 local P3"):
    # imported as absent, which the evaluation counts (alignment.probe_outputs_absent).
    absent: tuple[str, ...] = ()


def load_pack_json(path: Path) -> Any:
    """The JSON of a pack file (:func:`pack_json`); ``UsageError`` naming the file where it is
    missing or not JSON."""
    try:
        return pack_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise UsageError("file is missing", where=str(path), fix="Check the pack layout.") from exc
    except orjson.JSONDecodeError as exc:
        raise UsageError(
            f"not valid JSON ({exc})", where=str(path), fix="Restore the file from the pack."
        ) from exc


def _field(data: Any, name: str, path: Path, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(data, dict) or name not in data:
        raise UsageError(
            f"missing field {name!r}", where=str(path), fix="Restore the file from the pack."
        )
    value = data[name]
    if not isinstance(value, kind):
        raise UsageError(
            f"field {name!r} has type {type(value).__name__}, expected {kind}",
            where=str(path),
            fix="Restore the file from the pack.",
        )
    return value


def load_pack_problem(path: Path) -> Problem:
    """A pack problem file (``data/prontoqa_50/pNNN.json``) as our Problem."""
    data = load_pack_json(path)
    premises = _field(data, "premises", path, list)
    proof = _field(data, "proof_tree", path, list)
    try:
        return Problem(
            problem_id=str(_field(data, "problem_id", path, str)),
            premises=tuple(Premise(str(p["id"]), str(p["text"])) for p in premises),
            question=str(_field(data, "question", path, str)),
            answer=bool(_field(data, "answer", path, bool)),
            proof=tuple(
                ProofStep(int(s["step"]), str(s["conclusion"]), tuple(s["depends_on"]))
                for s in proof
            ),
            source="grounding-audit-pack",
        )
    except (KeyError, TypeError, ValueError) as exc:
        # A KeyError names only the key; the others say what was wrong with a value.
        detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
        raise UsageError(
            f"malformed premise or proof step ({detail})",
            where=f"{path}: premises/proof_tree",
            fix="Each premise needs id and text; each proof step step, conclusion, depends_on "
            "(a list of premise ids).",
        ) from exc


def _endpoint(model_dir: str, recorded_model: str) -> EndpointIdentity:
    return EndpointIdentity(
        name=model_dir,
        provider="openai",
        model=recorded_model,
        host=OPENAI_HOST,
        cache_identity=f"https://{OPENAI_HOST}/v1",
    )


def _premise(premise: Any, path: Path, index: int) -> JSONDict:
    if not (
        isinstance(premise, dict)
        and isinstance(premise.get("id"), str)
        and isinstance(premise.get("text"), str)
    ):
        raise UsageError(
            "a modified premise is not an object with 'id' and 'text' strings",
            where=f"{path}: modified_premises[{index}]",
            fix="Restore the file from the pack.",
        )
    return {"id": premise["id"], "text": premise["text"]}


def _response_record(
    pack: Path,
    path: Path,
    output: Any,
    *,
    model_dir: str,
    problem_id: str,
    condition: str,
    target_premise: str | None,
) -> JSONDict:
    text = _field(output, "raw_response", path, str)
    prompt = _field(output, "prompt", path, str)
    model = _field(output, "model", path, str)
    temperature = _field(output, "temperature", path, (int, float))
    timestamp = _field(output, "timestamp", path, str)
    recorded_hash = output.get("sha256")
    if recorded_hash is not None and recorded_hash != sha256_hex(text):
        raise UsageError(
            "raw_response does not match its recorded sha256",
            where=f"{path}: raw_response",
            fix="The pack was altered; restore it from the release.",
        )
    if output.get("problem_id", problem_id) != problem_id:
        raise UsageError(
            f"problem_id {output.get('problem_id')!r} differs from directory {problem_id!r}",
            where=f"{path}: problem_id",
            fix="Restore the file from the pack.",
        )
    probe: JSONDict | None = None
    if condition != "original":
        premises = _field(output, "modified_premises", path, list)
        if condition == "surface":
            probe = {
                "rephrase": {
                    "from": _field(output, "original_text", path, str),
                    "to": _field(output, "rephrased_text", path, str),
                }
            }
        else:
            probe = {"substitution": dict(_field(output, "substitution", path, dict))}
        probe["premises"] = [_premise(p, path, n) for n, p in enumerate(premises)]
    spec = make_spec(
        _endpoint(model_dir, model),
        task="prontoqa",
        problem_id=problem_id,
        condition=condition,
        messages=[{"role": "user", "content": prompt}],
        temperature=float(temperature),
        target_premise=target_premise,
        probe=probe,
    )
    usage = pack_usage(output, path)
    record = spec.to_record()
    record.update(
        {
            "kind": "response",
            "text": text,
            "finish_reason": "stop",
            "usage": usage,
            "latency_s": None,
            "attempts": 1,
            "attempt_outcomes": ["ok"],
            "cached": False,
            "started_at": timestamp,
            "finished_at": timestamp,
            "error": None,
            "imported_from": path.relative_to(pack).as_posix(),
        }
    )
    return record


def _summary_record(path: Path, data: Any, *, model_dir: str, problem_id: str) -> JSONDict:
    steps = _field(data, "step_verdicts", path, dict)
    out_steps = []
    for key in sorted(steps, key=lambda k: int(k) if str(k).isdigit() else 0):
        s = steps[key]
        if not isinstance(s, dict) or "agreement" not in s:
            raise UsageError(
                "step summary lacks 'agreement'",
                where=f"{path}: step_verdicts.{key}",
                fix="Restore the file from the pack.",
            )
        try:
            out_steps.append(
                {
                    "cot_step": int(key),
                    "majority_conclusion": s.get("majority_conclusion"),
                    "agreement": float(s["agreement"]),
                    "n_valid": int(s.get("n_valid") or 0),
                    "n_unique": int(s.get("n_unique") or 0),
                    "consistent": bool(s.get("consistent")),
                }
            )
        except (TypeError, ValueError) as exc:
            raise UsageError(
                f"malformed step summary ({exc})",
                where=f"{path}: step_verdicts.{key}",
                fix="Keys are step numbers; agreement is a number, n_valid and n_unique "
                "integers. Restore the file from the pack.",
            ) from exc
    try:
        n_samples = int(data.get("n_samples") or 0)
        temperature = float(data.get("temperature") or 0.0)
    except (TypeError, ValueError) as exc:
        raise UsageError(
            f"malformed n_samples or temperature ({exc})",
            where=str(path),
            fix="Restore the file from the pack.",
        ) from exc
    return {
        "kind": "sample_summary",
        "schema": SCHEMA_VERSION,
        "endpoint": model_dir,
        "problem_id": problem_id,
        "model": {"provider": "openai", "model": str(data.get("model")), "host": OPENAI_HOST},
        "n_samples": n_samples,
        "temperature": temperature,
        "steps": out_steps,
        "source_sha256": sha256_hex(path.read_bytes()),
    }


def iter_sample_summaries(
    pack: Path, model: str, *, endpoint: str | None = None
) -> Iterator[JSONDict]:
    """The ``sample_summary`` records of a pack's model (none when it has no summaries).

    For runs that replay the pack's outputs through the engine (their streams have no raw
    samples): pass them to ``evaluate(..., extra_records=...)``. ``endpoint`` names the
    run's endpoint when it differs from the model directory.
    """
    directory = pack / "baselines" / "self_consistency" / model
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("p*_samples.json")):
        problem_id = path.name.removesuffix("_samples.json")
        yield _summary_record(
            path, load_pack_json(path), model_dir=endpoint or model, problem_id=problem_id
        )


_PACK_FIX = "PACK_DIR is the root of the evidence pack, the directory holding data/ and evidence/"


def _is_pack_root(path: Path) -> bool:
    return (path / PROBLEMS_DIR).is_dir()


def _not_a_pack(pack: Path) -> UsageError:
    """Why ``pack`` is not a pack root, with the root to give instead where one is near."""
    if not pack.exists():
        return UsageError("no such file or directory", where=str(pack), fix=f"{_PACK_FIX}.")
    # A path inside the pack (its evidence/, a model's directory) or the directory that
    # holds it: name the root, which is what the user meant.
    resolved = pack.resolve()
    root = next((p for p in resolved.parents if _is_pack_root(p)), None)
    if root is not None:
        return UsageError(
            f"this is inside the evidence pack {root}, not its root",
            where=str(pack),
            fix=f"Give PACK_DIR {root}.",
        )
    if pack.is_file():
        return UsageError(
            "this is a file, not the evidence pack's directory",
            where=str(pack),
            fix=f"{_PACK_FIX}.",
        )
    below = sorted(p for p in resolved.iterdir() if p.is_dir() and _is_pack_root(p))
    if below:
        return UsageError(
            "this directory holds an evidence pack, it is not one",
            where=str(pack),
            fix=f"Give PACK_DIR {below[0]}.",
        )
    return UsageError(
        "not an evidence pack: it has no data/prontoqa_50 directory",
        where=str(pack),
        fix=f"{_PACK_FIX}.",
    )


def pack_dirs(pack: Path, model: str) -> tuple[Path, Path]:
    """The pack's problem directory and ``model``'s evidence directory, checked to exist.

    ``model`` must be one of :func:`pack_models`: a name like ``../x`` or ``""`` would
    otherwise read another directory and name the run's endpoint after it.
    """
    if not _is_pack_root(pack):
        raise _not_a_pack(pack)
    known = pack_models(pack)
    if model not in known:
        raise UsageError(
            f"pack has no evidence for model {model!r}",
            where=str(pack / EVIDENCE_DIRNAME),
            fix=f"Use --model with one of: {', '.join(known) or '(none)'}.",
        )
    problems, evidence = pack / PROBLEMS_DIR, pack / EVIDENCE_DIRNAME / model
    # Outputs without their problem would be dropped without a word (the import and the
    # replayed sweep read the problems from data/), leaving a table of fewer problems to be
    # set beside the published one; the sweep's evaluation would then stop on the summaries.
    for pdir in sorted(evidence.iterdir()):
        problem_file = problems / f"{pdir.name}.json"
        if _PROBLEM_DIR.match(pdir.name) and pdir.is_dir() and not problem_file.is_file():
            raise UsageError(
                f"the pack has outputs for problem {pdir.name} ({pdir}) but no problem file for it",
                where=str(problem_file),
                fix="Restore the file from the pack: the audit reads each problem's "
                "premises and proof from data/prontoqa_50/.",
            )
    return problems, evidence


def check_out_of_pack(out: Path, pack: Path, *, flag: str) -> None:
    """Refuse an output directory at or inside ``pack``: the pack is the evidence, read-only
    by intent, and a ``results.jsonl`` at its root would make replay read that stream instead
    of the pack's outputs."""
    resolved, root = out.resolve(), pack.resolve()
    if resolved == root or root in resolved.parents:
        raise UsageError(
            f"{out} is inside the evidence pack {root}; nothing is written into the pack",
            where=flag,
            fix=f"Give {flag} a directory outside the pack.",
        )


def _problem_records(
    pack: Path, model: str, absent: list[str]
) -> Iterator[tuple[Problem, list[JSONDict], JSONDict | None]]:
    """Per problem with evidence: the problem, its responses, its summary; each probe of its
    premises with no output file is appended to ``absent``."""
    problems_dir, evidence = pack_dirs(pack, model)
    summaries = pack / "baselines" / "self_consistency" / model
    files = sorted(p for p in problems_dir.iterdir() if _PROBLEM_FILE.match(p.name))
    if not files:
        raise UsageError("no pNNN.json problem files", where=str(problems_dir))
    for path in files:
        problem = load_pack_problem(path)
        pdir = evidence / problem.problem_id
        if not pdir.is_dir():
            continue  # the model was not run on this problem: nothing to import
        responses = [
            _response_record(
                pack,
                pdir / "original_cot.json",
                load_pack_json(pdir / "original_cot.json"),
                model_dir=model,
                problem_id=problem.problem_id,
                condition="original",
                target_premise=None,
            )
        ]
        probes: dict[tuple[str, str], Path] = {}
        probe_dir = pdir / "probes"
        for probe_path in sorted(probe_dir.iterdir()) if probe_dir.is_dir() else []:
            m = _PROBE_FILE.match(probe_path.name)
            if m:
                probes[(m.group(2), PACK_CONDITIONS[m.group(1)])] = probe_path
        for premise in problem.premises:
            for condition in CONDITION_ORDER:
                found = probes.get((premise.id, condition))
                if found is None:  # the evaluation reports it absent
                    absent.append(f"{problem.problem_id} {condition} {premise.id}")
                    continue
                responses.append(
                    _response_record(
                        pack,
                        found,
                        load_pack_json(found),
                        model_dir=model,
                        problem_id=problem.problem_id,
                        condition=condition,
                        target_premise=premise.id,
                    )
                )
        summary_path = summaries / f"{problem.problem_id}_samples.json"
        summary = (
            _summary_record(
                summary_path,
                load_pack_json(summary_path),
                model_dir=model,
                problem_id=problem.problem_id,
            )
            if summary_path.is_file()
            else None
        )
        yield problem, responses, summary


def import_evidence(pack: Path, model: str, out: Path) -> ImportResult:
    """Convert ``pack`` (model directory ``model``) into ``out/results.jsonl`` + manifest.

    Reads and validates the whole pack first: on any error (``UsageError`` naming file and
    field) nothing is written. Refuses to overwrite an existing stream.
    """
    stream = out / "results.jsonl"
    for existing in (stream, out / "manifest.json"):
        # The manifest too: a directory with only a manifest.json (another run's, or a file
        # of the user's) would otherwise lose it to the import's own.
        if existing.exists():
            raise UsageError(
                f"run directory already holds a {existing.name}; it is left as it is",
                where=str(existing),
                fix="Import into a new directory (an import is not a resume).",
            )
    absent: list[str] = []
    items = list(_problem_records(pack, model, absent))
    check_out_of_pack(out, pack, flag="--out")  # once pack is known to be one
    if not items:
        raise UsageError(
            f"no problem of the pack has evidence for model {model!r}",
            where=str(pack / EVIDENCE_DIRNAME / model),
        )
    # The plan tells the evaluator what completes a problem: one output per probe, no raw
    # samples, and the summary when the pack has one.
    lines: list[bytes] = [
        orjson.dumps(
            replace(
                problem,
                extra={
                    **problem.extra,
                    "plan": {
                        "samples": 0,
                        "probe_repeats": 1,
                        "sample_summary": summary is not None,
                    },
                },
            ).to_record()
        )
        for problem, _, summary in items
    ]
    n_responses = n_summaries = 0
    for _, responses, summary in items:
        for record in responses:
            lines.append(orjson.dumps(record))
            n_responses += 1
        if summary is not None:
            lines.append(orjson.dumps(summary))
            n_summaries += 1
    body = b"\n".join(lines) + b"\n"
    manifest = {
        "kind": "manifest",
        "schema": SCHEMA_VERSION,
        "source": "import-evidence",
        "pack": str(pack.resolve()),
        "model": model,
        "problems": len(items),
        "responses": n_responses,
        "sample_summaries": n_summaries,
        "stream_sha256": sha256_hex(body),
    }
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "results.jsonl.tmp"
    tmp.write_bytes(body)
    os.replace(tmp, stream)
    (out / "manifest.json").write_bytes(
        orjson.dumps(manifest, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    )
    return ImportResult(len(items), n_responses, n_summaries, stream, tuple(absent))


__all__ = [
    "ImportResult",
    "check_out_of_pack",
    "import_evidence",
    "iter_sample_summaries",
    "load_pack_json",
    "load_pack_problem",
    "pack_dirs",
]
