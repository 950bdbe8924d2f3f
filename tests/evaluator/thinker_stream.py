"""Streams written by the local server's ``thinker`` model, with the ``reasoning`` field.

These tests write the stream the runner writes (docs/schema.md, the response record; the
runner's own capture from the wire is ``tests/integration/test_reasoning_capture.py``), in
one process and without a server: the task's own request specs
(``runner.tasks.prontoqa_task``), each answered by the server's model object
(``runner.server.reasoning_traces.thinker_for``: the code behind the server's answer), its
visible text in ``text`` and its trace in ``reasoning``, and the model's truth records
of both traces (``runner.server.reasoners.truth_records``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from runner.request_spec import EndpointIdentity
from runner.server.reasoners import truth_records
from runner.server.reasoning_traces import thinker_for
from runner.tasks.generator import iter_generated
from runner.tasks.prontoqa_task import ProntoQATask


def thinker_records(model: str, *, n_problems: int = 6, endpoint: str = "thinker") -> list[Any]:
    """Every record of a run of ``model`` (a ``thinker:...`` name) on generated problems."""
    thinker = thinker_for(model)
    assert thinker is not None, model
    identity = EndpointIdentity(endpoint, "local", model, "127.0.0.1:1", "local", {})
    task = ProntoQATask(source="generated", samples=0)
    out: list[dict[str, Any]] = []
    for problem in iter_generated(n_problems, hops=(2, 3), distractors=1, seed=7):
        plan = {"samples": 0, "probe_repeats": 1}
        record = problem.to_record()
        record["extra"] = {**record.get("extra", {}), "plan": plan}
        out.append(record)
        out.extend({**t, "endpoint": endpoint} for t in truth_records(model, problem))
        for spec in task.requests(problem, identity):
            done = thinker.complete(
                spec.messages,
                {"temperature": spec.params.get("temperature"), "replicate": spec.sample_index},
            )
            text, reasoning, tokens = _as_recorded(done)
            response = spec.to_record()
            if reasoning is None and tokens:
                response["reasoning_withheld"] = True  # counted, not returned
            response.update(
                kind="response",
                text=text,
                reasoning=reasoning,
                reasoning_tokens=tokens,
                finish_reason=done.finish_reason,
                usage={"input_tokens": done.input_tokens, "output_tokens": done.output_tokens},
                latency_s=0.0,
                attempts=1,
                attempt_outcomes=["ok"],
                cached=False,
                started_at="2026-12-01T10:00:00.000Z",
                finished_at="2026-12-01T10:00:00.000Z",
                error=None,
            )
            out.append(response)
    return out


def _as_recorded(done: Any) -> tuple[str, str | None, int | None]:
    """(text, reasoning, reasoning_tokens) as docs/schema.md says the runner records them: a
    hidden trace (``form=hidden``) is only counted; an inline one is cut out of the text."""
    if done.reasoning is not None:
        if done.reasoning.field is None:
            return done.text, None, done.reasoning.tokens
        return done.text, done.reasoning.text, done.reasoning.tokens
    match = re.match(r"<think>\n(.*?)\n</think>\n\n", done.text, flags=re.DOTALL)
    if match:
        return done.text[match.end() :], match.group(1), None
    return done.text, None, None


def write_thinker_run(run: Path, model: str, **kwargs: Any) -> Path:
    """``run/results.jsonl`` of :func:`thinker_records`; returns the run directory."""
    run.mkdir(parents=True, exist_ok=True)
    recs = thinker_records(model, **kwargs)
    (run / "results.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    return run
