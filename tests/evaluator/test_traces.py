"""``cotaudit evaluate --trace answer|reasoning|both`` on streams of the local server's
``thinker`` model (a reasoning trace and a visible answer written by different simulated
reasoners; docs/server.md, "Reasoning models"): the audit of each trace finds what its
reasoner did, and ``both`` pairs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.cli import main
from tests.evaluator.thinker_stream import write_thinker_run

FAITHFUL_TRACE = "thinker:trace=faithful,answer=shortcut,p=1"
FAITHFUL_ANSWER = "thinker:trace=shortcut,answer=faithful,p=1"


def _evaluate(run: Path, *args: str) -> dict[str, Any]:
    assert main(["evaluate", str(run), "--n-boot", "200", "--no-figures", "--quiet", *args]) == 0
    return orjson.loads((run / "eval" / "report.json").read_bytes())


def _found(report: dict[str, Any], section: str) -> dict[str, Any]:
    return report["models"][section]["headline"]["found"]["A+A'"]


@pytest.mark.parametrize("form", ["reasoning_content", "inline"])
def test_a_faithful_trace_behind_a_shortcut_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    run = write_thinker_run(tmp_path / "run", f"{FAITHFUL_TRACE},form={form}")
    report = _evaluate(run, "--trace", "both")
    assert list(report["models"]) == ["thinker", "thinker:reasoning"]
    answer, reasoning = _found(report, "thinker"), _found(report, "thinker:reasoning")
    assert reasoning["ignored"] == 0 and reasoning["grounded_share"] == 1.0
    assert answer["ignored"] > 0 and answer["grounded_share"] < 1.0
    pair = report["traces"]["endpoints"]["thinker"]
    assert pair["problems"] == 6
    assert pair["ignored"] == {"answer": answer["ignored"], "reasoning": 0}
    assert pair["problems_ignoring"]["answer_only"] and not pair["problems_ignoring"]["both"]
    assert pair["problems_ignoring"]["reasoning_only"] == []
    grounded = pair["grounded_share"]
    assert grounded["difference"] == pytest.approx(1.0 - answer["grounded_share"])
    assert grounded["answer"]["ci"][0] <= answer["grounded_share"] <= grounded["answer"]["ci"][1]
    # Each trace scored against its own truth record: the answer's skipped premises are true
    # negatives there, the faithful trace skipped none.
    assert report["models"]["thinker"]["truth"]["ignored_premises"] > 0
    assert report["models"]["thinker:reasoning"]["truth"]["ignored_premises"] == 0
    markdown = (run / "eval" / "report.md").read_text(encoding="utf-8")
    assert "## The reasoning trace beside the answer" in markdown
    capsys.readouterr()
    assert main(["verify", str(run)]) == 0, capsys.readouterr().err


def test_the_reverse_a_shortcut_trace_behind_a_faithful_answer(tmp_path: Path) -> None:
    run = write_thinker_run(tmp_path / "run", FAITHFUL_ANSWER)
    pair = _evaluate(run, "--trace", "both")["traces"]["endpoints"]["thinker"]
    assert pair["ignored"]["answer"] == 0 and pair["ignored"]["reasoning"] > 0
    assert (
        pair["problems_ignoring"]["reasoning_only"] and not pair["problems_ignoring"]["answer_only"]
    )


def test_one_trace_at_a_time(tmp_path: Path) -> None:
    run = write_thinker_run(tmp_path / "run", FAITHFUL_TRACE)
    default = _evaluate(run)
    assert list(default["models"]) == ["thinker"] and "traces" not in default
    assert default["options"]["trace"] == "answer"
    assert _found(default, "thinker")["ignored"] > 0  # the visible shortcut
    reasoning = _evaluate(run, "--trace", "reasoning")
    assert list(reasoning["models"]) == ["thinker:reasoning"]
    assert _found(reasoning, "thinker:reasoning")["ignored"] == 0  # the faithful trace
    certificates = (run / "eval" / "certificates.jsonl").read_bytes().splitlines()
    assert all(orjson.loads(c)["id"].startswith("thinker:reasoning/") for c in certificates)


def test_a_model_that_returns_no_trace_is_named_not_compared(tmp_path: Path) -> None:
    run = write_thinker_run(tmp_path / "run", "thinker:form=hidden")
    report = _evaluate(run, "--trace", "both")
    assert report["traces"]["endpoints"] == {}
    assert report["traces"]["without_reasoning"] == ["thinker"]
    assert report["models"]["thinker:reasoning"]["problems_audited"] == 0
    # The server withheld the trace (it counted reasoning tokens): the report says so.
    responses = [
        orjson.loads(line)
        for line in (run / "results.jsonl").read_bytes().splitlines()
        if b'"kind":"response"' in line
    ]
    assert all(r["reasoning_withheld"] for r in responses)
    assert report["traces"]["reasoning_withheld"] == {"thinker": len(responses)}
    assert report["models"]["thinker:reasoning"]["reasoning_withheld"] == len(responses)
    markdown = (run / "eval" / "report.md").read_text(encoding="utf-8")
    assert (
        f"No reasoning trace to audit: thinker (its server withheld the reasoning of "
        f"{len(responses):,} responses)." in markdown
    )
    assert main(["verify", str(run)]) == 0
    # The same stream from a model that did not reason at all: no trace, and nothing withheld.
    lines = (run / "results.jsonl").read_bytes().replace(b',"reasoning_withheld":true', b"")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "results.jsonl").write_bytes(lines)
    report = _evaluate(plain, "--trace", "both")
    assert report["traces"]["reasoning_withheld"] == {}
    assert report["models"]["thinker:reasoning"]["reasoning_withheld"] == 0
    markdown = (plain / "eval" / "report.md").read_text(encoding="utf-8")
    assert "No reasoning trace to audit: thinker." in markdown
