"""``cotaudit run`` as a user calls it: one-line runs, overrides, growing a run, honest exit
codes and summaries, and messages that are whole sentences (issue 17)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from cotaudit.errors import UsageError
from cotaudit.schema import read_records
from runner.commands.one_line import config_for_model, parse_model
from runner.config import load_config
from runner.engine import RunSummary, iter_plan, run_sweep
from runner.server.faults import FaultKind, FaultSpec
from runner.server.latency import LatencySpec
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig

REPO = Path(__file__).resolve().parents[2]

PRONTOQA = """\
run_dir = "run"
cache_dir = "cache"
[task]
kind = "prontoqa"
source = "generate"
n = N
seed = SEED
[[endpoints]]
name = "faithful"
provider = "local"
model = "faithful"
requests_per_minute = 600000
tokens_per_minute = 1e10
"""

PROMPTS = """\
run_dir = "run"
cache_dir = "cache"
[task]
kind = "prompts"
path = "prompts.jsonl"
[[endpoints]]
name = "echo"
provider = "local"
model = "echo"
base_url = "BASE_URL"
requests_per_minute = 600000
tokens_per_minute = 1e10
max_concurrency = 1
[retry]
max_attempts = 1
"""


def prontoqa(tmp_path: Path, n: int, seed: int = 0) -> Path:
    path = tmp_path / "audit.toml"
    path.write_text(PRONTOQA.replace("N", str(n)).replace("SEED", str(seed)))
    return path


def prompts(tmp_path: Path, base_url: str, count: int = 8) -> Path:
    with (tmp_path / "prompts.jsonl").open("wb") as f:
        for i in range(count):
            f.write(orjson.dumps({"id": f"q{i}", "prompt": f"Say {i}."}) + b"\n")
    path = tmp_path / "sweep.toml"
    path.write_text(PROMPTS.replace("BASE_URL", base_url))
    return path


def cotaudit(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cotaudit", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


# One-line runs -----------------------------------------------------------------------------


def test_a_one_line_run_audits_a_local_model_without_a_config(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    result = cotaudit("run", "--model", "local/faithful", "--limit", "2", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "runs" / "local-faithful"
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert manifest["config"]["task"]["kind"] == "prontoqa"
    assert manifest["config"]["task"]["samples"] == 5 and manifest["output_config"]["limit"] == 2
    records = list(read_records(run_dir / "results.jsonl"))
    assert sum(r["kind"] == "problem" for r in records) == 2
    assert all(r["error"] is None for r in records if r["kind"] == "response")
    assert (tmp_path / "xdg" / "cotaudit").is_dir()  # the shared cache, where docs say
    assert f"-> {run_dir}" in result.stderr
    # The preflight and the planning say what they do before the sweep starts.
    assert "preflight: checking 1 endpoint" in result.stderr and "planning:" in result.stderr


@pytest.mark.parametrize(
    ("spec", "provider", "model", "key", "base_url", "run_dir"),
    [
        ("openai/gpt-4o", "openai", "gpt-4o", "OPENAI_API_KEY", None, "runs/openai-gpt-4o"),
        (
            "anthropic/claude-sonnet-4-5",
            "anthropic",
            "claude-sonnet-4-5",
            "ANTHROPIC_API_KEY",
            None,
            "runs/anthropic-claude-sonnet-4-5",
        ),
        (
            "local/shortcut:p=0.5",
            "local",
            "shortcut:p=0.5",
            None,
            None,
            "runs/local-shortcut-p-0.5",
        ),
        (
            "openai-compatible/llama3@http://127.0.0.1:8000/v1",
            "openai",
            "llama3",
            None,  # no key variable set: a self-hosted server needs none
            "http://127.0.0.1:8000/v1",
            "runs/openai-compatible-llama3",
        ),
    ],
)
def test_model_specs_name_provider_key_variable_and_run_directory(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spec: str,
    provider: str,
    model: str,
    key: str | None,
    base_url: str | None,
    run_dir: str,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = config_for_model(spec, cwd=tmp_path)
    (ep,) = config.endpoints
    assert (ep.provider, ep.model, ep.api_key_env, ep.base_url) == (provider, model, key, base_url)
    assert config.run_dir == tmp_path / run_dir


@pytest.mark.parametrize("spec", ["gpt-4o", "mistral/large", "openai/", "openai-compatible/llama3"])
def test_a_bad_model_spec_says_which_forms_exist(spec: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_model(spec)
    assert str(info.value).startswith("--model: ") and "openai-compatible/" in str(info.value)


def test_overrides_apply_to_a_config_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = prontoqa(tmp_path, 3)
    other = tmp_path / "elsewhere"
    assert (
        main(
            [
                "run",
                str(config),
                "--quiet",
                "--limit",
                "1",
                "--run-dir",
                str(other),
                "--max-concurrency",
                "2",
                "--no-cache",
            ]
        )
        == 0
    )
    manifest = orjson.loads((other / "manifest.json").read_bytes())
    assert manifest["output_config"]["limit"] == 1
    assert manifest["config"]["endpoints"][0]["max_concurrency"] == 2
    assert not (tmp_path / "run").exists() and not (tmp_path / "cache").exists()  # --no-cache
    records = list(read_records(other / "results.jsonl"))
    assert sum(r["kind"] == "problem" for r in records) == 1
    err = capsys.readouterr().err  # --quiet: no progress or stage lines (preflight findings stay)
    assert "planning:" not in err and "preflight: checking" not in err and "records," not in err


# Growing a run ----------------------------------------------------------------------------


def test_raising_n_grows_the_run_and_a_change_to_written_requests_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = prontoqa(tmp_path, 2)
    assert main(["run", str(config), "--quiet"]) == 0
    stream = tmp_path / "run" / "results.jsonl"
    first = stream.read_bytes()
    small = sum(
        1
        for _ in iter_plan(
            load_config(config).build_task(), load_config(config).endpoints[0].identity()
        )
    )
    capsys.readouterr()

    prontoqa(tmp_path, 5)
    assert main(["run", str(config), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"{small} already done" in err
    after = stream.read_bytes()
    assert after.startswith(first)  # the smaller run is the prefix, untouched
    records = list(read_records(stream))
    assert sum(r["kind"] == "problem" for r in records) == 5
    ids = [r["request_id"] for r in records if r["kind"] == "response"]
    assert len(ids) == len(set(ids))
    manifest = orjson.loads((tmp_path / "run" / "manifest.json").read_bytes())
    assert len(manifest["extends"]) == 1

    prontoqa(tmp_path, 5, seed=1)  # other problems: the written ones would change
    assert main(["run", str(config), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "task.seed: 0 -> 1" in err and "none of the" in err
    assert "Start a new run directory" in err and "response cache" in err
    assert stream.read_bytes() == after

    prontoqa(tmp_path, 3)  # a smaller plan drops requests the stream holds
    assert main(["run", str(config), "--quiet"]) == 2
    assert "no longer planned" in capsys.readouterr().err


# Honest outcomes --------------------------------------------------------------------------


def test_requests_that_failed_for_good_exit_3_with_counts_and_the_retry_command(
    tmp_path: Path,
    make_server: Callable[[ServerConfig], ServerThread],
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = (FaultKind.UNAVAILABLE, FaultKind.UNAVAILABLE, FaultKind.BAD_REQUEST)
    server = make_server(ServerConfig(faults=FaultSpec(script=script)))
    config = prompts(tmp_path, server.base_url)
    assert main(["run", str(config), "--quiet", "--no-preflight"]) == 3
    err = capsys.readouterr().err
    assert "3 requests failed for good (2 ServerError, 1 BadRequest)" in err
    command = f"cotaudit run {config} --no-preflight --quiet --retry-errors"
    assert f"Retry them with: {command}" in err

    # A rerun finds them and says so; they are still failed, so the exit status stays 3.
    assert main(["run", str(config), "--quiet", "--no-preflight"]) == 3
    err = capsys.readouterr().err
    assert "the stream holds 3 requests that failed for good in an earlier run" in err
    assert command in err

    # The printed command, as printed, retries them (the server's faults are spent).
    assert main(shlex.split(command)[1:]) == 0
    records = [
        r for r in read_records(tmp_path / "run" / "results.jsonl") if r["kind"] == "response"
    ]
    done = {r["request_id"] for r in records if r["error"] is None}
    assert len(done) == 8


def test_after_an_interrupt_the_summary_counts_the_whole_plan(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    server = make_server(ServerConfig(latency=LatencySpec("fixed", 0.02)))
    config = load_config(prompts(tmp_path, server.base_url, count=2000))

    async def interrupted() -> RunSummary:
        stop = asyncio.Event()
        run = asyncio.create_task(run_sweep(config, progress=False, stop_event=stop))
        stream = config.run_dir / "results.jsonl"
        # The problem records come first: wait for a few answers.
        while not (stream.exists() and stream.read_bytes().count(b'"response"') > 5):
            await asyncio.sleep(0.01)
        stop.set()
        return await run

    summary = asyncio.run(interrupted())
    assert isinstance(summary, RunSummary) and summary.interrupted
    responses = [
        r for r in read_records(config.run_dir / "results.jsonl") if r["kind"] == "response"
    ]
    # The dispatcher had walked a few chunks of the plan when it stopped; the summary counts
    # all of it, and what is really left.
    assert summary.planned == 2000
    assert summary.pending == 2000 - len(responses)
    assert 0 < len(responses) < 1000


def test_a_plan_out_that_is_a_directory_gets_one_message_and_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = prontoqa(tmp_path, 2)
    (tmp_path / "adir").mkdir()
    assert main(["plan", str(config), "--out", str(tmp_path / "adir")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a directory" in err and "resume" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "audit.toml"]
    assert not list((tmp_path / "adir").iterdir())


def test_a_run_directory_under_a_file_gets_one_message_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = prontoqa(tmp_path, 2)
    (tmp_path / "afile").write_text("x")
    assert main(["run", str(config), "--run-dir", str(tmp_path / "afile" / "run")]) == 2
    err = capsys.readouterr().err
    assert "a file, not a directory" in err and "resume" not in err
    assert "Traceback" not in err and err.strip().count("\n") == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "audit.toml"]


def test_a_symlinked_stream_is_refused_and_its_target_left_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = prontoqa(tmp_path, 1)
    assert main(["run", str(config), "--quiet"]) == 0
    stream = tmp_path / "run" / "results.jsonl"
    target = tmp_path / "precious.jsonl"
    target.write_bytes(stream.read_bytes() + b'{"kind": "torn')  # a last line without newline
    before = target.read_bytes()
    stream.unlink()
    stream.symlink_to(target)
    assert main(["run", str(config), "--quiet"]) == 2
    assert "symlink" in capsys.readouterr().err
    assert target.read_bytes() == before


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path, with its bytes (links followed).

    ``.lock`` is left out: taking the lock writes the taker's pid into it, by design."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("corrupt line", "results.jsonl:3: line is not valid JSON"),
        ("another plan", "none of the"),
        ("smaller n", "no longer planned"),
        ("busy lock", "another cotaudit run is using this run directory"),
        ("symlinked stream", "symlink"),
    ],
)
def test_a_refused_run_of_a_moved_run_directory_leaves_every_file_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, message: str
) -> None:
    from runner.run_lock import run_dir_lock

    assert main(["run", str(prontoqa(tmp_path, 3)), "--quiet"]) == 0
    # A copy under a new name, run from a config of a new name: a run that got as far as
    # writing the manifest would record the new run_dir, config_source and updated_at.
    moved = tmp_path / "moved"
    shutil.copytree(tmp_path / "run", moved)
    n, seed = {"another plan": (3, 1), "smaller n": (2, 0)}.get(case, (3, 0))
    config = tmp_path / "moved.toml"
    config.write_text(
        PRONTOQA.replace('"run"', '"moved"').replace("N", str(n)).replace("SEED", str(seed))
    )
    stream = moved / "results.jsonl"
    if case == "corrupt line":
        lines = stream.read_bytes().splitlines(keepends=True)
        lines[2] = b"garbage line\n"
        stream.write_bytes(b"".join(lines) + b'{"kind": "torn')  # and a torn tail to cut
    if case == "symlinked stream":
        target = tmp_path / "elsewhere.jsonl"
        target.write_bytes(stream.read_bytes() + b'{"kind": "torn')
        stream.unlink()
        stream.symlink_to(target)
    before = _files(moved)  # the symlinked stream's target is read through the link
    capsys.readouterr()

    with run_dir_lock(moved) if case == "busy lock" else contextlib.nullcontext():
        assert main(["run", str(config), "--quiet"]) == 2
    assert message in capsys.readouterr().err
    assert _files(moved) == before


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("nosuch", "Use one of: ceiling, echo, faithful"),
        ("shortcut:p=2", "give a number between 0 and 1, e.g. 'shortcut:p=0.5'"),
    ],
)
def test_a_bad_local_model_is_named_in_whole_sentences(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, expected: str
) -> None:
    config = prontoqa(tmp_path, 2)
    config.write_text(config.read_text().replace('model = "faithful"', f'model = "{model}"'))
    assert main(["run", str(config), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert expected in err and "give )" not in err
    assert not (tmp_path / "run").exists()


def test_plan_refuses_an_unknown_local_model_as_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "plan.jsonl"
    assert main(["plan", "--model", "local/nosuch", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "the local server has no model 'nosuch'" in err
    assert "Use one of: ceiling, echo, faithful" in err
    assert list(tmp_path.iterdir()) == []  # no plan, no run directory


@pytest.mark.parametrize("command", ["run", "plan"])
@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        ("--limit", "0", "must be an integer >= 1, got 0"),
        (
            "--limit",
            "100000000000000000000000",
            "must be an integer >= 1 and <= 9223372036854775807 (64 bits)",
        ),
        ("--max-concurrency", "nan", "must be an integer >= 1, got nan"),
        ("--max-concurrency", "1e999", "must be an integer >= 1, got 1e999"),
    ],
)
def test_override_flags_refuse_a_bad_count_naming_the_flag(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    flag: str,
    value: str,
    expected: str,
) -> None:
    config = prontoqa(tmp_path, 2)
    out = ["--out", str(tmp_path / "plan.jsonl")] if command == "plan" else ["--quiet"]
    with pytest.raises(SystemExit) as info:
        main([command, str(config), *out, flag, value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"cotaudit {command}: error: argument {flag}: {expected}" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.toml"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--port", "99999"], "port 99999 is out of range"),
        (["--latency", "bogus"], "cannot read latency 'bogus'"),
        (["--latency", "fixed:-1"], "must be finite and >= 0"),
        (["--latency", "lognormal:nan,0.5"], "must be finite and >= 0"),
        (["--hang-limit", "0"], "argument --hang-limit: must be a number > 0, got 0"),
        (["--fault-503", "nan"], "argument --fault-503: must be a finite number in [0, 1]"),
    ],
)
def test_serve_refuses_bad_flags_with_a_message(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    result = cotaudit("serve", *args, cwd=tmp_path)
    assert result.returncode == 2
    assert expected in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("other", ["--retry-errors", "--dry-run"])
def test_cancel_batches_refuses_a_flag_that_contradicts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], other: str
) -> None:
    config = prontoqa(tmp_path, 2)
    assert main(["run", str(config), "--quiet", "--cancel-batches", other]) == 2
    err = capsys.readouterr().err
    assert f"--cancel-batches and {other} contradict each other" in err
    assert not (tmp_path / "run").exists()  # nothing written
