"""``cotaudit evaluate``'s honest outcomes: a run with nothing to audit, a run of another
task, a stream that joins runs, progress on stderr, and its flags."""

from __future__ import annotations

import asyncio
import io
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.cli import main
from evaluator.cpus import usable_cpus
from evaluator.progress import EvaluationProgress
from tests.stream_records import response_record


def _records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def _failed(record: dict[str, Any]) -> dict[str, Any]:
    if record["kind"] != "response":
        return record
    error = {"type": "ServerError", "status": 500, "message": "HTTP 500", "body": None}
    return {**record, "text": None, "finish_reason": None, "error": {**error, "attempts": 8}}


def _piped(data: bytes) -> io.TextIOWrapper:
    """Standard input piped from ``data`` (not a terminal)."""
    return io.TextIOWrapper(io.BytesIO(data))


def test_a_run_without_successful_responses_says_so(
    swept_run: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = swept_run(2)
    _write(run / "results.jsonl", [_failed(r) for r in _records(run / "results.jsonl")])
    assert main(["evaluate", str(run), "--n-boot", "0", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "no successful responses" in err and "ServerError" in err
    assert "--retry-errors" in err and "Traceback" not in err
    assert not (run / "eval").exists()  # nothing written, no empty eval/


def test_an_earlier_evaluation_survives_a_refused_one(
    swept_run: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = swept_run(2)
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    before = (run / "eval" / "report.json").read_bytes()
    _write(run / "results.jsonl", [_failed(r) for r in _records(run / "results.jsonl")])
    assert main(["evaluate", str(run), "--n-boot", "0", "--quiet"]) == 2
    assert (run / "eval" / "report.json").read_bytes() == before


def test_a_prompts_run_is_named_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problem = {"kind": "problem", "schema": 1, "task": "prompts", "problem_id": "hello"}
    problem.update(prompt="Say hi", system=None, temperature=0.0, samples=1)
    reply = response_record(task="prompts", problem_id="hello", condition="prompt")
    stream = _write(tmp_path / "run" / "results.jsonl", [problem, reply])
    assert main(["evaluate", str(stream.parent), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "'prompts' run" in err and "only ProntoQA grounding tasks" in err
    assert "no problem records" not in err


def test_a_stream_joining_two_runs_of_different_sizes_is_refused(
    swept_run: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    small, large = swept_run(2), swept_run(4)
    joined = (small / "results.jsonl").read_bytes() + (large / "results.jsonl").read_bytes()
    monkeypatch.setattr("sys.stdin", _piped(joined))
    out = tmp_path / "out"
    assert main(["evaluate", "-", "--out", str(out), "--n-boot", "0", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "joins overlapping runs" in err and "cotaudit compare" in err
    assert not out.exists()


def test_runs_of_different_models_and_problem_sets_are_refused_too(
    swept_run: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    def only(run: Path, endpoint: str) -> bytes:
        keep = [
            r
            for r in _records(run / "results.jsonl")
            if r["kind"] not in ("response", "truth") or r.get("endpoint") == endpoint
        ]
        return b"".join(orjson.dumps(r) + b"\n" for r in keep)

    joined = only(swept_run(2), "faithful") + only(swept_run(4), "shortcut")
    monkeypatch.setattr("sys.stdin", _piped(joined))
    assert main(["evaluate", "-", "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "different problem sets" in err and "declare 2 problems" in err
    assert "declare 4" in err and "faithful" in err and "shortcut" in err


def test_merged_shards_and_runs_on_the_same_problems_are_evaluated(
    swept_run: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    records = _records(swept_run(3) / "results.jsonl")
    problems = [r for r in records if r["kind"] == "problem"]
    rest = [r for r in records if r["kind"] != "problem"]
    # Two "shards": each repeats every problem record (identical) before its half.
    halves = [rest[0::2], rest[1::2]]
    joined = b"".join(orjson.dumps(r) + b"\n" for half in halves for r in (*problems, *half))
    monkeypatch.setattr("sys.stdin", _piped(joined))
    out = tmp_path / "out"
    args = ["evaluate", "-", "--out", str(out), "--n-boot", "0", "--quiet", "--no-figures"]
    assert main(args) == 0
    report = orjson.loads((out / "report.json").read_bytes())
    assert {m["problems_audited"] for m in report["models"].values()} == {3}


def test_progress_lines_carry_total_and_time_left_without_a_terminal() -> None:
    clock = [0.0]
    stream = io.StringIO()
    progress = EvaluationProgress(
        enabled=True, stream=stream, clock=lambda: clock[0], tty=False, interval_s=10.0
    )
    progress.set_total(200)
    for _ in range(79):
        clock[0] += 0.125
        progress.audited()
    assert stream.getvalue() == ""  # less than an interval: nothing yet
    for _ in range(20):
        clock[0] += 0.125
        progress.audited()
    lines = stream.getvalue().splitlines()
    assert lines == ["cotaudit evaluate: 80/200 audits (40%), 8.0/s, 15 s left, 10 s elapsed"]
    progress.stage("statistics (10,000 bootstrap resamples)")
    assert stream.getvalue().splitlines()[-1].endswith("statistics (10,000 bootstrap resamples)")
    quiet = io.StringIO()
    muted = EvaluationProgress(enabled=False, stream=quiet, clock=lambda: clock[0], tty=False)
    for _ in range(1000):
        clock[0] += 1
        muted.audited()
    muted.stage("figures")
    assert quiet.getvalue() == ""


def test_evaluate_reports_progress_on_stderr_and_quiet_silences_it(
    swept_run: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = swept_run(2)
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures"]) == 0
    captured = capsys.readouterr()
    assert "cotaudit evaluate: " in captured.err and "statistics" in captured.err
    assert "cotaudit evaluate:" not in captured.out  # the table stays alone on stdout
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_the_old_spelling_of_quiet_still_works_and_says_so(
    swept_run: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = swept_run(2)
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "cotaudit evaluate: --no-progress is now spelled --quiet; the old spelling goes away "
        "in the next release."
    ]


def test_a_negative_bootstrap_size_is_a_usage_error(
    swept_run: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = swept_run(2)
    with pytest.raises(SystemExit) as info:  # refused by the flag's type, as argparse does
        main(["evaluate", str(run), "--n-boot", "-1"])
    assert info.value.code == 2
    assert "--n-boot: must be an integer in [0, 10000000], got -1" in capsys.readouterr().err
    assert not (run / "eval").exists()
    shutil.rmtree(run)


def test_the_progress_total_counts_the_problems_still_to_be_read(tmp_path: Path) -> None:
    # Problems are declared as the stream goes: the total is estimated from the share of the
    # file read, not only the problems read so far (which put every line at "1 s left").
    from evaluator.pipeline import EvaluateOptions, evaluate_stream
    from tests.evaluator.test_evaldir import _many
    from tests.evaluator.test_pipeline import write_stream

    stream = write_stream(tmp_path / "results.jsonl", _many(300))
    out = io.StringIO()
    progress = EvaluationProgress(enabled=True, stream=out, tty=False, interval_s=0.0)
    evaluate_stream(stream, EvaluateOptions(n_boot=0), workers=0, progress=progress, endpoints=1)
    first = out.getvalue().splitlines()[0]
    done, total = (int(n.replace(",", "")) for n in first.split(": ")[1].split()[0].split("/"))
    assert done < 100 and 290 <= total <= 310, first


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["evaluate", "RUN", "--seed", "-1"], "--seed"),  # numpy refused it with a traceback
        (["evaluate", "RUN", "--n-boot", "100000000000000000000"], "--n-boot"),
        (["evaluate", "RUN", "--workers", "100000000000000000000000"], "--workers"),  # OOM
        (["verify", "RUN", "--workers", "-1"], "--workers"),
        (["evaluate", "RUN", "--workers", str(4 * usable_cpus() + 1)], "--workers"),
        (["compare", "A", "B", "--n-boot", "nan"], "--n-boot"),
        (["rescore", "PACK", "--seed", "1e400"], "--seed"),
        (["selection", "RUN", "--bootstrap", "-5"], "--bootstrap"),
        (["view", "RUN", "--port", "70000"], "--port"),
    ],
)
def test_bad_numeric_flags_of_the_evaluator_exit_2_naming_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and "must be an integer" in err
    assert "Traceback" not in err


def test_a_run_whose_stream_lacks_whole_problems_of_its_plan_is_said_to_be_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An interrupted run may stop between problems: every audit it holds is complete, and
    # only the plan (the manifest's planned_requests) tells that problems are missing. The
    # run counts its plan where it walks it anyway: here for its preflight.
    from cotaudit.commands.demo import demo_config
    from runner.engine import run_sweep

    config = demo_config(tmp_path, problems=2, seed=0)
    assert asyncio.run(run_sweep(config, progress=False, preflight=True)).errors == 0
    run = config.run_dir
    planned = orjson.loads((run / "manifest.json").read_bytes())["planned_requests"]
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    report = orjson.loads((run / "eval" / "report.json").read_bytes())
    assert report["stream"]["planned_requests"] == planned
    assert report["stream"]["responses"] == planned  # the whole plan, nothing more
    assert "responses its run plans" not in capsys.readouterr().err
    assert "Incomplete run" not in (run / "eval" / "report.md").read_text()
    import cotaudit

    assert cotaudit.evaluate(run, n_boot=0).incomplete is None
    stream = run / "results.jsonl"
    records = [orjson.loads(line) for line in stream.read_bytes().splitlines()]
    last = [r["problem_id"] for r in records if r["kind"] == "problem"][-1]
    kept = [r for r in records if r.get("problem_id") != last]
    stream.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in kept))
    held = Counter(r["endpoint"] for r in kept if r["kind"] == "response")
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    report = orjson.loads((run / "eval" / "report.json").read_bytes())
    assert report["stream"]["incomplete_groups"] == 0
    assert report["stream"]["responses"] == dict(held)
    err = capsys.readouterr().err
    first = next(iter(planned))
    assert (
        f"the stream holds {sum(held.values()):,} of the {sum(planned.values()):,} responses "
        f"its run plans ({first} {held[first]:,} of {planned[first]:,}, "
    ) in err
    # So does the Python API's report, and the report a paper's figures come from, above
    # the results.
    import cotaudit

    short = cotaudit.evaluate(run, n_boot=0).incomplete
    assert short is not None and short in err
    markdown = (run / "eval" / "report.md").read_text()
    assert f"**Incomplete run:** The stream holds {sum(held.values()):,} of the " in markdown
    assert markdown.index("Incomplete run") < markdown.index("##")


def test_an_interrupted_run_is_evaluated_and_said_to_be_incomplete(
    swept_run: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = swept_run(2)
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    report = orjson.loads((run / "eval" / "report.json").read_bytes())
    assert report["stream"]["incomplete_groups"] == 0
    assert "incomplete" not in capsys.readouterr().err
    # The stream as an interrupted run leaves it: its last problem's records cut short.
    stream = run / "results.jsonl"
    lines = stream.read_bytes().splitlines(keepends=True)
    stream.write_bytes(b"".join(lines[: len(lines) - 10]))
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    report = orjson.loads((run / "eval" / "report.json").read_bytes())
    short = report["stream"]["incomplete_groups"]
    assert short >= 1
    err = capsys.readouterr().err
    # The manifest plans more than the stream holds: that one note says it (the incomplete
    # audits are what a stopped run leaves).
    assert "note: the stream holds" in err and "its run plans" in err
    # With no plan to hold it against, the incomplete audits are named themselves.
    (run / "manifest.json").unlink()
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"note: the records of {short:,} audits (a model on a problem) are incomplete" in err
    report_md = (run / "eval" / "report.md").read_text(encoding="utf-8")
    assert "**Incomplete run:** The records of" in report_md


def _pack(root: Path, model: str, *, report: bool = True) -> Path:
    (root / "evidence" / model).mkdir(parents=True)
    if report:
        rows = {"main": {"A_consistent_full": {"f1": 0.5, "tp": 1, "fp": 1, "fn": 1, "tn": 1}}}
        (root / "evidence" / model / "final_report.json").write_bytes(orjson.dumps(rows))
    return root


@pytest.mark.parametrize(
    ("model", "report", "said"),
    [
        ("gpt-4o", True, "the pack publishes a table for gpt-4o, no model of this run (faithful,"),
        ("faithful", False, "not an evidence pack: no evidence/MODEL/final_report.json"),
    ],
    ids=["other-model", "no-report"],
)
def test_a_published_pack_that_would_show_nothing_is_refused(
    swept_run: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    model: str,
    report: bool,
    said: str,
) -> None:
    # Taken and left unused: report.md had no published column and no word why, and
    # report.json named the pack as if the run had been compared with it.
    run = swept_run(2)
    pack = _pack(tmp_path / "pack", model, report=report)
    out = tmp_path / "eval"
    argv = ["evaluate", str(run), "--out", str(out), "--published", str(pack)]
    assert main([*argv, "--n-boot", "0", "--no-figures", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"--published {pack}: {said}" in err and "Traceback" not in err
    assert not out.exists()


def test_a_published_pack_of_a_model_of_the_run_is_shown(
    swept_run: Callable[..., Path], tmp_path: Path
) -> None:
    run = swept_run(2)
    pack = _pack(tmp_path / "pack", "faithful")
    out = tmp_path / "eval"
    argv = ["evaluate", str(run), "--out", str(out), "--published", str(pack)]
    assert main([*argv, "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    assert "published F1" in (out / "report.md").read_text(encoding="utf-8")


def test_trace_reasoning_on_models_without_reasoning_is_refused(
    swept_run: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The demo's reasoners return no reasoning: the report read "answered correctly 0 of 0"
    # for every model, exit 0, and nowhere said that there was nothing to audit.
    run = swept_run(2)
    out = tmp_path / "eval"
    argv = ["evaluate", str(run), "--trace", "reasoning", "--out", str(out)]
    assert main([*argv, "--n-boot", "0", "--no-figures", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--trace reasoning: no response of the stream has a reasoning trace" in err
    assert "--trace answer" in err and "Traceback" not in err
    assert not out.exists()
