"""The tamper suite (issue 18): one change of each kind a reader trusts, each caught by
``cotaudit verify`` naming what changed; an untouched run passes, one with restarted step
numbers too, and a stream edited and then evaluated again is caught against its quoted root.

The run: one problem with its probes, five self-consistency samples, a truth record and the
run's ``manifest.json``, evaluated through the real CLI with figures (so ``report.md`` carries
them) and a small bootstrap (so the report's floats are intervals too).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.cli import main
from tests.evaluator.test_pipeline import ORIGINAL, S1, S2, cot, records, response, write_stream

SAMPLES = [ORIGINAL, ORIGINAL, ORIGINAL, ORIGINAL, cot(S1, "Alex is not a bompus.")]
TRUTH = {
    "kind": "truth",
    "schema": 1,
    "model": "faithful",
    "problem_id": "q1",
    "answer": True,
    "steps": [
        {
            "step": 1,
            "kind": "rule",
            "conclusion": "is(alex, bimpus)",
            "used": ["P1"],
            "depends_on": [],
        },
        {
            "step": 2,
            "kind": "rule",
            "conclusion": "is(alex, bompus)",
            "used": ["P2"],
            "depends_on": ["S1"],
        },
    ],
}
MANIFEST = {"kind": "manifest", "config": {"endpoints": ["ep"]}, "note": "the run's config"}
EVALUATE = ["--n-boot", "50", "--quiet"]


def _stream() -> list[dict[str, Any]]:
    recs = records(samples=SAMPLES)
    recs.insert(1, dict(TRUTH))
    return recs


def _evaluate(run: Path) -> None:
    assert main(["evaluate", str(run), *EVALUATE]) == 0


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("tamper") / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", _stream())
    (run / "manifest.json").write_bytes(orjson.dumps(MANIFEST))
    _evaluate(run)
    return run


@pytest.fixture
def run(pristine: Path, tmp_path: Path) -> Path:
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(pristine, copy)
    # The copy's report records the stream's path as given; verify ignores it (IGNORED_REPORT_KEYS).
    return copy


def _verify(run: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["verify", str(run), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _edit_stream(run: Path, edit: Callable[[list[dict[str, Any]]], None]) -> None:
    path = run / "results.jsonl"
    recs = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    edit(recs)
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))


def _where(recs: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    return next(r for r in recs if all(r.get(k) == v for k, v in match.items()))


def _line_of(run: Path, **match: Any) -> int:
    for number, line in enumerate((run / "results.jsonl").read_bytes().splitlines(), start=1):
        record = orjson.loads(line)
        if all(record.get(k) == v for k, v in match.items()):
            return number
    raise AssertionError(match)


def test_an_untouched_run_passes_and_prints_its_root(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import hashlib

    code, out, err = _verify(run, capsys)
    assert code == 0, err
    root = hashlib.sha256((run / "eval" / "evaluation.json").read_bytes()).hexdigest()
    assert f"root {root}" in out
    report = orjson.loads((run / "eval" / "report.json").read_bytes())["models"]["ep"]
    # The run has what the suite tampers with: samples, truth rows, intervals.
    assert report["rows"]["self_consistency_full"]["tp"] > 0
    assert "A_consistent_truth" in report["rows"] and report["rows"]["A_consistent_full"]["ci"]
    assert main(["verify", str(run), "--root", root]) == 0


# Each case: (name, edit of the stream, what the failure names). The stream's edits are named
# by line and record (results.jsonl:N: <record> changed since the evaluation).
def _gut_samples(recs: list[dict[str, Any]]) -> None:
    for r in recs:
        if r.get("condition") == "sample":
            r["text"] = "Answer: True"


def _gold_answer(recs: list[dict[str, Any]]) -> None:
    _where(recs, kind="problem")["answer"] = False


def _truth(recs: list[dict[str, Any]]) -> None:
    _where(recs, kind="truth")["steps"][0]["used"] = ["P1", "P3"]


def _messages(recs: list[dict[str, Any]]) -> None:
    _where(recs, condition="local", target_premise="P2")["messages"][0]["content"] = "other"


def _usage(recs: list[dict[str, Any]]) -> None:
    _where(recs, condition="original")["usage"] = {"input_tokens": 1, "output_tokens": 1}


def _finish_reason(recs: list[dict[str, Any]]) -> None:
    _where(recs, condition="consistent", target_premise="P1")["finish_reason"] = "length"


STREAM_CASES = [
    ("self-consistency samples", _gut_samples, {"condition": "sample", "sample_index": 0}),
    ("the gold answer", _gold_answer, {"kind": "problem"}),
    ("a truth record", _truth, {"kind": "truth"}),
    ("prompts (messages)", _messages, {"condition": "local", "target_premise": "P2"}),
    ("usage", _usage, {"condition": "original"}),
    ("a finish reason", _finish_reason, {"condition": "consistent", "target_premise": "P1"}),
]


@pytest.mark.parametrize(
    ("edit", "match"), [c[1:] for c in STREAM_CASES], ids=[c[0] for c in STREAM_CASES]
)
def test_an_edited_stream_record_fails_verify_naming_its_line(
    run: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[list[dict[str, Any]]], None],
    match: dict[str, Any],
) -> None:
    line = _line_of(run, **match)
    _edit_stream(run, edit)
    code, out, err = _verify(run, capsys)
    assert code == 1
    assert re.search(rf"results\.jsonl:{line}: .* changed since the evaluation", err), err
    assert "root " in out


def test_a_deleted_problem_in_stream_and_certificates_fails_verify(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A second problem's lines and its certificates removed: everything left is consistent
    # with itself, but the stream is not the one evaluated.
    second = tmp = run.parent / "two"
    tmp.mkdir()
    recs = _stream()
    renamed = [
        dict(
            r,
            problem_id="q2",
            **(
                {"request_id": str(r["request_id"]).replace("/q1/", "/q2/")}
                if "request_id" in r
                else {}
            ),
        )
        for r in recs
    ]
    write_stream(second / "results.jsonl", recs + renamed)
    (second / "manifest.json").write_bytes(orjson.dumps(MANIFEST))
    _evaluate(second)
    code, _, err = _verify(second, capsys)
    assert code == 0, err
    write_stream(second / "results.jsonl", recs)
    certificates = second / "eval" / "certificates.jsonl"
    kept = [x for x in certificates.read_bytes().splitlines(keepends=True) if b"/q2/" not in x]
    certificates.write_bytes(b"".join(kept))
    code, _, err = _verify(second, capsys)
    assert code == 1
    assert "evaluated line" in err and "is no longer in the stream" in err
    assert "certificates.jsonl: changed since the evaluation" in err


def test_an_edited_run_manifest_fails_verify(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run / "manifest.json").write_bytes(orjson.dumps({**MANIFEST, "note": "edited"}))
    code, _, err = _verify(run, capsys)
    assert code == 1
    assert (
        """manifest.json: note changed since the evaluation ("the run's config" -> "edited")"""
        in err
    )


def _report(run: Path) -> tuple[Path, dict[str, Any]]:
    path = run / "eval" / "report.json"
    return path, orjson.loads(path.read_bytes())


def test_an_edited_f1_in_report_json_fails_verify_naming_it(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, report = _report(run)
    report["models"]["ep"]["rows"]["A_consistent_full"]["f1"] = 0.99
    path.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    code, _, err = _verify(run, capsys)
    assert code == 1
    assert "report.json: changed since the evaluation" in err
    assert "models.ep.rows.A_consistent_full.f1 is 0.99, recomputed from the stream" in err


def test_report_json_rewritten_with_the_same_numbers_passes_the_numbers_check(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Numbers, not bytes: the same report written otherwise (no indentation) differs only in
    # its file hash, which verify names, with no number named.
    path, report = _report(run)
    path.write_bytes(orjson.dumps(report))
    code, _, err = _verify(run, capsys)
    assert code == 1
    assert err.count("FAIL") == 1 and "report.json: changed since the evaluation" in err


def test_an_edited_report_md_fails_verify(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = run / "eval" / "report.md"
    text = path.read_text(encoding="utf-8")
    numbers = re.findall(r"0\.\d{3}", text)
    assert numbers
    path.write_text(text.replace(numbers[0], "0.990", 1), encoding="utf-8")
    code, _, err = _verify(run, capsys)
    assert code == 1
    assert "report.md: changed since the evaluation" in err
    assert "report.md: differs from the report rendered again from the stream" in err


def test_a_removed_or_added_eval_file_fails_verify(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = sorted((run / "eval").glob("*.png"))
    assert figures
    figures[0].unlink()
    (run / "eval" / "notes.txt").write_text("added")
    code, _, err = _verify(run, capsys)
    assert code == 1
    assert f"{figures[0].name}: missing" in err and "notes.txt: not part of the evaluation" in err


def test_a_stream_edited_then_evaluated_again_fails_against_the_quoted_root(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _verify(run, capsys)
    quoted = re.search(r"root ([0-9a-f]{64})", out)
    assert code == 0 and quoted
    _edit_stream(run, lambda recs: _where(recs, condition="original").update(text=cot(S2, S1)))
    _evaluate(run)
    # Self-consistent again: only the quoted root tells.
    code, out, err = _verify(run, capsys)
    assert code == 0, err
    assert quoted.group(1) not in out
    code, _, err = _verify(run, capsys, "--root", quoted.group(1))
    assert code == 1
    assert "the evaluation's root hash is" in err and f"not the quoted {quoted.group(1)}" in err


def test_three_step_1_lines_give_unique_ids_and_an_honest_run_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    restarted = f"Step 1: {S1}\nStep 1: {S1}\nStep 1: {S1}\nStep 2: {S2}\n\nAnswer: True"
    recs = records()
    recs[1] = response("original", restarted)
    run = tmp_path / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", recs)
    _evaluate(run)
    ids = [
        orjson.loads(line)["id"]
        for line in (run / "eval" / "certificates.jsonl").read_bytes().splitlines()
    ]
    assert len(ids) == len(set(ids)) == 4 * 3
    assert {"ep/q1/S1/P1", "ep/q1/S1.2/P1", "ep/q1/S1.3/P1"} <= set(ids)
    code, _, err = _verify(run, capsys)
    assert code == 0, err


def test_a_third_party_checks_a_quoted_root_with_sha256_alone(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # docs/certificates.md, "Checking a quoted root", step by step, without cotaudit.
    import hashlib
    import json

    _, out, _ = _verify(run, capsys)
    quoted = out.split("root ")[-1].strip()
    manifest_bytes = (run / "eval" / "evaluation.json").read_bytes()
    assert hashlib.sha256(manifest_bytes).hexdigest() == quoted
    m = json.loads(manifest_bytes)
    for name, entry in m["files"].items():
        assert hashlib.sha256((run / "eval" / name).read_bytes()).hexdigest() == entry["sha256"]
    h = hashlib.sha256()
    with (run / "results.jsonl").open("rb") as f:
        for _, line in zip(range(m["stream"]["lines"]), f, strict=False):
            h.update(hashlib.sha256(line).digest())
    assert h.hexdigest() == m["stream"]["root"]
    manifest = (run / "manifest.json").read_bytes()
    assert hashlib.sha256(manifest).hexdigest() == m["run_manifest"]["sha256"]


def test_the_viewers_page_in_eval_is_noted_not_a_failure(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `cotaudit view RUN` writes eval/view.html after the evaluation: derived, not tampering.
    assert main(["view", str(run)]) == 0
    assert (run / "eval" / "view.html").is_file()
    code, _, err = _verify(run, capsys)
    assert code == 0, err
    assert "view.html: a page `cotaudit view` wrote from the evaluation, not checked" in err
