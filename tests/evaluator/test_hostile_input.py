"""Hostile and malformed input: the audit stays linear in an output's steps, an output past
the step cap is read up to it, and bad records get one clear error naming file and line."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import orjson

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
