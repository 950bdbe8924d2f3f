"""``cotaudit serve``: flags become a ServerConfig; the process prints its URL and serves."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import urllib.request

import orjson
import pytest

from cotaudit.cli import main
from cotaudit.errors import UsageError
from runner.commands.serve import add_arguments, config_from_args
from runner.server.faults import FaultKind
from runner.server.latency import LatencySpec


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_flags_become_a_server_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_SERVE_KEY", "sk-abc")
    args = _parse(
        [
            "--port", "0",
            "--latency", "lognormal:0.2,0.5",
            "--fault-429", "0.2",
            "--fault-reset", "0.05",
            "--fault-first", "503,ok,reset",
            "--seed", "4",
            "--rpm", "120",
            "--require-api-key-env", "TEST_SERVE_KEY",
        ]
    )  # fmt: skip
    config = config_from_args(args)
    assert config.port == 0
    assert config.latency == LatencySpec("lognormal", 0.2, 0.5)
    assert dict(config.faults.rates) == {FaultKind.RATE_LIMIT: 0.2, FaultKind.RESET: 0.05}
    assert config.faults.script == (FaultKind.UNAVAILABLE, None, FaultKind.RESET)
    assert config.faults.seed == 4
    assert config.rate_limit.requests_per_minute == 120
    assert config.rate_limit.tokens_per_minute is None
    assert config.require_api_key == "sk-abc"


def test_missing_key_variable_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_SERVE_KEY", raising=False)
    with pytest.raises(UsageError, match="TEST_SERVE_KEY is unset"):
        config_from_args(_parse(["--require-api-key-env", "TEST_SERVE_KEY"]))


def test_public_host_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "loopback only" in capsys.readouterr().err


def test_serve_prints_its_url_then_serves_until_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cotaudit", "serve", "--port", "0", "--fault-first", "500"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        assert proc.stdout.readline().startswith("models: ")
        body = orjson.dumps({"model": "echo", "messages": [{"role": "user", "content": "hi"}]})
        request = urllib.request.Request(
            base_url + "/chat/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=5)
        assert info.value.code == 500
        info.value.close()
        with urllib.request.urlopen(request, timeout=5) as resp:
            answer = orjson.loads(resp.read())
        assert answer["choices"][0]["message"]["content"] == "echo: hi"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err


def test_batch_flags_become_the_batch_spec() -> None:
    config = config_from_args(
        _parse(["--batch-processing", "30", "--batch-error-rate", "0.1", "--batch-expire", "90"])
    )
    assert (config.batches.processing_s, config.batches.error_rate) == (30.0, 0.1)
    assert config.batches.expire_s == 90.0
    assert config_from_args(_parse([])).batches.expire_s == 86_400.0


@pytest.mark.parametrize("flags", [["--batch-error-rate", "1.5"], ["--batch-processing", "-1"]])
def test_bad_batch_flags_are_usage_errors(flags: list[str]) -> None:
    with pytest.raises(UsageError, match="BatchSpec") as info:
        config_from_args(_parse(flags))
    assert info.value.exit_code == 2
