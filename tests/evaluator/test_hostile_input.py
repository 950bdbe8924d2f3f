"""Hostile and malformed input: the audit stays linear in an output's steps, an output past
the step cap is read up to it, and bad records get one clear error naming file and line."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import orjson
import pytest

from cotaudit.cli import main
from cotaudit.constants import MAX_STEPS_PER_OUTPUT
from evaluator.pipeline import EvaluateOptions, evaluate_records
from tests.evaluator.test_pipeline import S1, S2, cot, records, response, write_stream


def _long_original(n_steps: int) -> list[dict[str, Any]]:
    """The faithful stream with an original of ``n_steps`` steps (the short probes stay)."""
    recs = records()
    recs[1] = response("original", cot(*(S1 if i % 2 == 0 else S2 for i in range(n_steps))))
    return recs


def _opcodes_outside_the_parser(run: Callable[[], object]) -> int:
    """Bytecodes the evaluator executes in ``run``, the step parser's own excluded (its cost
    per step is constant and large, and would hide a superlinear term elsewhere)."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        if event == "call":
            if "/canon/" in frame.f_code.co_filename:
                return None
            frame.f_trace_opcodes = True
            frame.f_trace_lines = False
        elif event == "opcode":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        run()
    finally:
        sys.settrace(None)
    return count


def test_the_audit_work_grows_linearly_with_an_outputs_steps() -> None:
    # Measured in executed bytecodes, not seconds: a scan of the pairs per pair (the cascade
    # filter's parent search) or of the matches per step made 4x the steps cost 6x the work.
    small, large = _long_original(100), _long_original(400)
    options = EvaluateOptions(n_boot=0)
    evaluate_records(small, options)  # warm the imports and caches outside the count
    work_small = _opcodes_outside_the_parser(lambda: evaluate_records(small, options))
    work_large = _opcodes_outside_the_parser(lambda: evaluate_records(large, options))
    assert work_large / work_small < 4.6, (work_small, work_large)


def test_an_output_past_the_step_cap_is_read_up_to_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", _long_original(200_000))
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures"]) == 0
    report = orjson.loads((run / "eval" / "report.json").read_bytes())["models"]["ep"]
    read = report["steps_read"]["original"]
    assert read["steps"] == MAX_STEPS_PER_OUTPUT and read["outputs_capped"] == 1
    assert report["steps_read"]["consistent"]["outputs_capped"] == 0
    assert report["certificates"]["total"] == MAX_STEPS_PER_OUTPUT * 3  # three premises


def _first(kind: str, condition: str | None = None) -> Callable[[list[dict[str, Any]]], Any]:
    def pick(recs: list[dict[str, Any]]) -> Any:
        return next(
            r
            for r in recs
            if r["kind"] == kind and (condition is None or r.get("condition") == condition)
        )

    return pick


def _plan(recs: list[dict[str, Any]]) -> None:
    recs[0].setdefault("extra", {})["plan"] = {"samples": 0, "probe_repeats": "three"}


def _conclusion(recs: list[dict[str, Any]]) -> None:
    recs[0]["proof"][0]["conclusion"] = "Alex is a bimpus"


def _response_first(recs: list[dict[str, Any]]) -> None:
    recs.insert(0, recs.pop(1))


def _set(pick: Callable[[list[dict[str, Any]]], Any], **fields: Any) -> Callable[..., None]:
    return lambda recs: pick(recs).update(fields)


# (case, edit of the faithful stream, line named, what the message says)
MALFORMED = [
    ("text as a number", _set(_first("response"), text=3), 2, "'text' must be a string or null"),
    ("text as a list", _set(_first("response"), text=["a"]), 2, "not a list"),
    ("text as an object", _set(_first("response"), text={"a": 1}), 2, "not an object"),
    (
        "sample_index as a string",
        _set(_first("response", "consistent"), sample_index="0"),
        3,
        "'sample_index' must be an integer, not a string",
    ),
    (
        "premises as a string",
        _set(_first("problem"), premises="P1"),
        1,
        "'premises' must be a list",
    ),
    ("proof null", _set(_first("problem"), proof=None), 1, "'proof' must be a list, not null"),
    ("a non-canonical proof conclusion", _conclusion, 1, "is not canonical"),
    ("non-numeric probe_repeats", _plan, 1, "'extra.plan.probe_repeats' must be a whole number"),
    ("a response before its problem", _response_first, 1, "comes before its problem record"),
]


@pytest.mark.parametrize(
    ("edit", "line", "says"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_malformed_stream_record_is_one_clear_error_naming_file_and_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Callable[[list[dict[str, Any]]], None],
    line: int,
    says: str,
    workers: str,
) -> None:
    recs = records()
    edit(recs)
    run = tmp_path / "run"
    run.mkdir()
    stream = write_stream(run / "results.jsonl", recs)
    args = ["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet", "--workers", workers]
    assert main(args) == 2  # a traceback would raise here instead
    err = capsys.readouterr().err
    assert err.count("error:") == 1, err
    assert f"{stream}:{line}: " in err and says in err
    assert not (run / "eval").exists()


@pytest.mark.parametrize("where", ["report.json", "evaluation.json"])
def test_a_bogus_cascade_mode_read_by_verify_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", records())
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    path = run / "eval" / where
    data = orjson.loads(path.read_bytes())
    data["options"]["cascade_mode"] = "bogus"
    path.write_bytes(orjson.dumps(data))
    capsys.readouterr()
    code = main(["verify", str(run)])
    err = capsys.readouterr().err
    assert f"{path}: options.cascade_mode is 'bogus', not one of" in err
    assert "Traceback" not in err
    # The manifest's options decide the recomputation: bogus ones leave nothing to verify
    # with (exit 2). report.json's are one more thing verify checks: a failure (exit 1).
    assert code == (2 if where == "evaluation.json" else 1)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_response_whose_text_is_not_utf8_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], workers: str
) -> None:
    # A byte that is not UTF-8 inside a response's text: the reader's error for that line
    # (also should a reader one day decode only the fields it routes by), not a traceback.
    run = tmp_path / "run"
    run.mkdir()
    stream = write_stream(run / "results.jsonl", records())
    lines = stream.read_bytes().split(b"\n")
    assert b'"text":"Step 1' in lines[1]
    lines[1] = lines[1].replace(b'"text":"Step 1', b'"text":"\xff Step 1')
    stream.write_bytes(b"\n".join(lines))
    args = ["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet", "--workers", workers]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1, err
    assert f"{stream}:2: line is not valid JSON" in err
    assert not (run / "eval").exists()
