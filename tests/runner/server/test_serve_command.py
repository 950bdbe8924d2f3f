"""``cotaudit serve``: flags become a ServerConfig; the process prints its URL and serves."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

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


def test_fault_rates_above_1_in_sum_are_refused_naming_the_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # It said "fault spec: fault rates sum to 1.200 > 1", naming no flag.
    assert main(["serve", "--port", "0", "--fault-429", "0.6", "--fault-500", "0.6"]) == 2
    err = capsys.readouterr().err
    assert "--fault-429 0.6, --fault-500 0.6: the fault rates sum to 1.2 > 1. Lower them" in err
    assert "fault spec" not in err
    rates = config_from_args(
        _parse(["--fault-429", "0.1", "--fault-500", "0.2", "--fault-503", "0.7"])
    )
    assert sum(rates.faults.rates.values()) == pytest.approx(1.0)


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
    assert config_from_args(_parse([])).batches.openai_enqueued_tokens is None
    limited = config_from_args(_parse(["--batch-enqueued-tokens", "90000"]))
    assert limited.batches.openai_enqueued_tokens == 90_000


BAD_FLAGS = [
    (["--batch-error-rate", "1.5"], "must be a number in [0, 1], got 1.5"),
    (["--batch-processing", "-1"], "must be a number >= 0, got -1"),
    (["--batch-expire", "nan"], "must be a finite number >= 0, got nan"),
    (["--batch-enqueued-tokens", "0"], "must be an integer >= 1, got 0"),
    (["--fault-429", "nan"], "must be a finite number in [0, 1], got nan"),
    (["--fault-hang", "inf"], "must be a finite number in [0, 1], got inf"),
    (["--retry-after", "inf"], "must be a finite number >= 0, got inf"),
    (["--per-token", "nan"], "must be a finite number >= 0, got nan"),
    (["--rpm", "inf"], "must be a finite number > 0, got inf"),
    (["--tpm", "0"], "must be a number > 0, got 0"),
    (
        ["--seed", "100000000000000000000000"],
        "must be an integer >= 0 and <= 9223372036854775807 (64 bits), got "
        "100000000000000000000000",
    ),
    (["--seed", "1.5"], "must be an integer >= 0, got 1.5; give e.g. --seed 1"),
    # random.Random seeds with |seed|: a negative one would draw what its positive one does.
    (["--seed", "-5"], "must be an integer >= 0, got -5; give e.g. --seed 1"),
    # A hang held 0 s is a reset at once, which --fault-reset already is.
    (["--hang-limit", "0"], "must be a number > 0, got 0; give e.g. 30; for a connection"),
    (["--hang-limit", "nan"], "must be a finite number > 0, got nan"),
    # The spec as typed and the value at fault, not the parsed internals ("-1.0, 0.0").
    (["--latency", "fixed:-1"], "latency 'fixed:-1': SECONDS must be finite and >= 0, got -1; "),
    (["--latency", "uniform:2,1"], "latency 'uniform:2,1': LOW 2 is above HIGH 1; swap"),
]


@pytest.mark.parametrize(("flags", "message"), BAD_FLAGS, ids=[" ".join(f) for f, _ in BAD_FLAGS])
def test_bad_numeric_flags_exit_2_naming_the_flag(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["serve", "--port", "0", *flags])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"cotaudit serve: error: argument {flags[0]}: {message}" in err, err


def test_replay_refuses_a_file_that_is_no_recording_before_serving(tmp_path: Path) -> None:
    config = tmp_path / "sweep.toml"
    config.write_text('run_dir = "runs/x"\n', encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "cotaudit", "serve", "--port", "0", "--replay", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )
    assert result.returncode == 2
    assert result.stdout == ""  # no base URL: the server never started
    assert f"--replay {config}: not a replay source" in result.stderr
    assert "evidence pack" in result.stderr and "Traceback" not in result.stderr
