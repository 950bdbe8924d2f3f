"""``cotaudit serve --replay`` with sources that pass the cheap start-up check but hold no
usable recording, or with a ``--model`` they cannot answer: one message and exit status 2
before the URL is printed, not a server that answers every replay request with a 500 or a 404.

Each case runs the command as a process with a timeout: without the check the server starts
and serves, and the test fails on the timeout instead of hanging.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson
import pytest


def _serve(source: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [
        *(sys.executable, "-m", "cotaudit", "serve", "--port", "0", "--replay", str(source)),
        *flags,
    ]
    try:
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "PYTHONWARNINGS": "error"},
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the server started on {source} instead of refusing it: {exc.stdout!r}")


def test_a_stream_with_a_corrupt_line_is_refused_naming_the_line(tmp_path: Path) -> None:
    stream = tmp_path / "results.jsonl"
    stream.write_text('{"kind": "problem"}\nnot json\n{"kind": "response"}\n', encoding="utf-8")
    result = _serve(stream)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""  # no base URL: nobody is told to send requests to it
    assert f"{stream}:2: line is not valid JSON" in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr


@pytest.mark.parametrize(
    "lines",
    [
        ['{"kind": "problem", "problem_id": "p1"}', '{"kind": "request", "request_id": "r"}'],
        ['{"kind": "something-else"}'],
    ],
    ids=["a plan", "another tool's records"],
)
def test_a_stream_without_a_recording_is_refused(tmp_path: Path, lines: list[str]) -> None:
    stream = tmp_path / "plan.jsonl"
    stream.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = _serve(stream)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert f"--replay {stream}: no recordings" in result.stderr
    assert "evidence pack" in result.stderr and "Traceback" not in result.stderr


def test_a_corrupt_pack_output_is_refused_by_the_process(tmp_path: Path) -> None:
    output = tmp_path / "pack" / "evidence" / "m" / "p001" / "original_cot.json"
    output.parent.mkdir(parents=True)
    output.write_text("{", encoding="utf-8")
    result = _serve(tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert f"{output}: not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr


def _pack_of_two_models(root: Path) -> Path:
    for model, text in (("gpt-4o", "answer A"), ("claude", "answer B")):
        output = root / "pack" / "evidence" / model / "p001" / "original_cot.json"
        output.parent.mkdir(parents=True)
        record = {"prompt": f"PROMPT {model}", "raw_response": text, "model": model}
        output.write_bytes(orjson.dumps(record))
    return root / "pack"


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            "replay:model=gemini",
            "--model replay:model=gemini: the replay sources hold no recordings of model "
            "'gemini'; they hold replay:model=claude (1 recording), "
            "replay:model=gpt-4o (1 recording)",
        ),
        (
            "replay",
            "--model replay: the replay sources hold several models: replay:model=claude",
        ),
        ("replay:speed=2", "--model replay:speed=2: model 'replay:speed=2': unknown option"),
        ("nope", "--model nope: no model 'nope'. Use one of: "),
    ],
    ids=["a model the recordings do not hold", "ambiguous", "bad options", "unknown"],
)
def test_a_model_that_would_answer_every_request_with_an_error_is_refused(
    tmp_path: Path, model: str, message: str
) -> None:
    result = _serve(_pack_of_two_models(tmp_path), "--model", model)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""  # no base URL: nobody is told to send requests to it
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_serve_says_which_replay_models_it_holds_and_answers_any_name_with_model(
    tmp_path: Path,
) -> None:
    pack = _pack_of_two_models(tmp_path)
    command = [sys.executable, "-m", "cotaudit", "serve", "--port", "0", "--replay", str(pack)]
    proc = subprocess.Popen(
        [*command, "--model", "replay:model=claude"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert proc.stdout.readline() == "models: replay:model=claude (answers every model name)\n"
        assert proc.stdout.readline() == (
            "replay: replay:model=claude (1 recording), replay:model=gpt-4o (1 recording)\n"
        )
        body = {"model": "claude-x", "messages": [{"role": "user", "content": "PROMPT claude"}]}
        request = urllib.request.Request(
            base_url + "/chat/completions",
            data=orjson.dumps(body),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            answer = orjson.loads(resp.read())
        assert answer["choices"][0]["message"]["content"] == "answer B"
        assert answer["model"] == "claude-x"  # the name asked for, as llama.cpp's server does
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
