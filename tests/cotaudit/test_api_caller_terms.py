"""The runner's and the evaluator's advice names options as the caller gives them
(``cotaudit.caller_terms``): a notebook calling ``cotaudit.run`` / ``evaluate`` is told its
arguments (``preflight=False``, ``shard=``, ``use_cache=False``, ``out=``, the config's
``run_dir`` key), also on ``run``'s worker thread; the command line is told its flags, as it
always was. Real runs through the local model server, over loopback."""

from __future__ import annotations

import asyncio
import contextvars
import errno
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

import cotaudit
from cotaudit import caller_terms
from cotaudit.cli import main
from cotaudit.errors import CacheError, UsageError
from evaluator.evaldir import EVALUATION_NAME, DiskFull, EvalBuild
from runner.engine import RunSummary
from runner.server.lifecycle import ServerThread

ENDPOINT = {
    "name": "faithful",
    "provider": "local",
    "model": "faithful",
    "requests_per_minute": 600_000,
    "tokens_per_minute": 1e10,
}
# An endpoint whose every request the server refuses (its model's limit is below the
# endpoint's max_tokens): preflight fails, naming it.
REFUSED = {
    "name": "refused",
    "provider": "openai",
    "model": "echo:max_output=1000",
    "max_tokens": 2048,
    "requests_per_minute": 600_000,
    "tokens_per_minute": 1e10,
}
CLI_FLAGS = ("--no-preflight", "--shard", "--run-dir", "--retry-errors", "--no-cache", "--out")


def _mapping(tmp: Path, *, seed: int = 0, **endpoint: Any) -> dict[str, Any]:
    return {
        "run_dir": str(tmp / "run"),
        "cache_dir": str(tmp / "cache"),
        "task": {"kind": "prontoqa", "source": "generate", "n": 2, "seed": seed},
        "endpoints": [{**ENDPOINT, **endpoint}],
    }


def _toml(tmp: Path, mapping: dict[str, Any], name: str = "sweep") -> Path:
    """The mapping as a config file for ``cotaudit run`` (flat tables, as the tests use)."""

    def value(v: Any) -> str:
        return orjson.dumps(v).decode() if isinstance(v, str) else repr(v)

    lines = [f"{k} = {value(v)}" for k, v in mapping.items() if k not in ("task", "endpoints")]
    lines += ["[task]", *(f"{k} = {value(v)}" for k, v in mapping["task"].items())]
    for endpoint in mapping["endpoints"]:
        lines += ["[[endpoints]]", *(f"{k} = {value(v)}" for k, v in endpoint.items())]
    path = tmp / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _no_flag(message: str) -> None:
    named = [flag for flag in CLI_FLAGS if flag in message]
    assert not named, f"{named} in {message!r}"


def _refusal(call: Callable[[], object]) -> str:
    with pytest.raises(UsageError) as refused:
        call()
    return str(refused.value)


# --- the Python API: its arguments


def test_a_failed_preflight_names_preflight_false(
    local_server: ServerThread, tmp_path: Path
) -> None:
    mapping = _mapping(tmp_path, **REFUSED, base_url=local_server.base_url)
    message = _refusal(lambda: cotaudit.run(mapping))
    assert "preflight failed" in message and "endpoint 'refused'" in message
    assert message.endswith("Fix the endpoint(s) named, or skip this check with preflight=False.")
    _no_flag(message)
    assert not (tmp_path / "run" / "results.jsonl").exists()


async def test_on_runs_worker_thread_too(local_server: ServerThread, tmp_path: Path) -> None:
    # A running loop (a Jupyter cell): run sweeps on a thread of its own, which does not
    # inherit the caller's context unless run hands it over.
    asyncio.get_running_loop()
    mapping = _mapping(tmp_path, **REFUSED, base_url=local_server.base_url)
    message = _refusal(lambda: cotaudit.run(mapping))
    assert "skip this check with preflight=False" in message
    _no_flag(message)


async def test_arun_names_its_arguments(local_server: ServerThread, tmp_path: Path) -> None:
    mapping = _mapping(tmp_path, **REFUSED, base_url=local_server.base_url)
    with pytest.raises(UsageError, match=r"skip this check with preflight=False\.$"):
        await cotaudit.arun(mapping)
    # ... and leaves the caller's own context as it was.
    assert caller_terms.current() is caller_terms.CLI


def test_a_shard_other_than_the_run_directorys_names_shard(tmp_path: Path) -> None:
    mapping = _mapping(tmp_path)
    cotaudit.run(mapping, shard="0/2", preflight=False)
    whole = _refusal(lambda: cotaudit.run(mapping, preflight=False))
    assert "this run directory was run with shard 0/2, this run with shard=None" in whole
    assert "Resume with the same shard= as before" in whole
    other = _refusal(lambda: cotaudit.run(mapping, shard="1/2", preflight=False))
    assert 'this run with shard="1/2"' in other
    for message in (whole, other):
        _no_flag(message)
    bad = _refusal(lambda: cotaudit.run(mapping, shard="2/2", preflight=False))
    assert bad == "shard: bad shard '2/2'. Use i/N with 0 <= i < N, e.g. shard=\"0/4\"."


def test_another_run_directory_is_the_configs_run_dir_key(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("mine", encoding="utf-8")
    mapping = {**_mapping(tmp_path), "run_dir": str(tmp_path / "file")}
    not_a_dir = _refusal(lambda: cotaudit.run(mapping, preflight=False))
    assert "Choose a run directory (the config's run_dir key) that is a directory" in not_a_dir
    assert (tmp_path / "file").read_text(encoding="utf-8") == "mine"

    cotaudit.run(_mapping(tmp_path), preflight=False)
    changed = _refusal(lambda: cotaudit.run(_mapping(tmp_path, seed=1), preflight=False))
    assert "belongs to another config" in changed
    assert "Start a new run directory (the config's run_dir key) for the changed" in changed

    # A stream of another config under this run's manifest: a foreign stream.
    cotaudit.run(_mapping(tmp_path / "other", seed=1), preflight=False)
    shutil.copy(tmp_path / "other" / "run" / "results.jsonl", tmp_path / "run")
    foreign = _refusal(lambda: cotaudit.run(_mapping(tmp_path), preflight=False))
    assert "appending to it would mix two runs" in foreign
    assert "another run directory (the config's run_dir key: requests already" in foreign
    for message in (not_a_dir, changed, foreign):
        _no_flag(message)


def test_a_cache_that_cannot_be_opened_names_use_cache_which_runs_without_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "cache").mkdir()
    garbage = b"not a database, just bytes\n" * 100
    (tmp_path / "cache" / "cache.db").write_bytes(garbage)
    mapping = _mapping(tmp_path)
    message = _refusal(lambda: cotaudit.run(mapping, preflight=False))
    assert "the response cache cannot be opened" in message
    assert "run without a cache (cotaudit.run(config, use_cache=False): every request" in message
    _no_flag(message)
    summary = cotaudit.run(mapping, preflight=False, use_cache=False)
    assert summary.errors == 0 and summary.written == summary.planned > 0
    assert summary.cache_hits == 0
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["cache.db"]
    assert (tmp_path / "cache" / "cache.db").read_bytes() == garbage  # neither read nor written


@pytest.mark.parametrize("given", ["no", 0, None])
def test_use_cache_is_true_or_false(tmp_path: Path, given: Any) -> None:
    with pytest.raises(UsageError, match=r"^run: use_cache is True or False, not "):
        cotaudit.run(_mapping(tmp_path), use_cache=given)
    assert not (tmp_path / "run").exists()


def test_a_cache_error_during_a_run_names_use_cache() -> None:
    with caller_terms.api_terms():
        message = str(CacheError("/cache", OSError("database is locked")))
    assert "(cotaudit.run(config, use_cache=False))" in message
    _no_flag(message)


def test_evaluating_only_failed_requests_names_retry_errors(tmp_path: Path) -> None:
    summary = cotaudit.run(_mapping(tmp_path), preflight=False)
    error = {"type": "ServerError", "status": 500, "message": "HTTP 500", "body": None}
    stream = summary.run_dir / "results.jsonl"
    records = [orjson.loads(line) for line in stream.read_bytes().splitlines()]
    failed = [
        {**r, "text": None, "finish_reason": None, "error": {**error, "attempts": 8}}
        if r["kind"] == "response"
        else r
        for r in records
    ]
    stream.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in failed))
    message = _refusal(lambda: cotaudit.evaluate(summary.run_dir, n_boot=0))
    assert "no successful responses" in message
    assert "Retry them with `cotaudit.run(config, retry_errors=True)` (the same" in message
    _no_flag(message)
    assert not (summary.run_dir / "eval").exists()


def test_a_full_disk_names_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd to tell the manifest's descriptor")
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(EVALUATION_NAME):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr("evaluator.evaldir.os.fsync", fsync)
    messages = []
    for terms in (caller_terms.API, caller_terms.CLI):
        with (
            caller_terms.using(terms),
            pytest.raises(DiskFull) as full,
            EvalBuild(tmp_path / "eval") as build,
        ):
            build.commit({"kind": "evaluation"})
        messages.append(str(full.value))
    api, cli = messages
    assert "Free space there (or give out= another disk) and evaluate again" in api
    _no_flag(api)
    assert "Free space there (or give --out another disk) and evaluate again" in cli


# --- the command line: its flags, as before


def test_the_command_lines_messages_name_its_flags_as_before(
    local_server: ServerThread, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = _mapping(tmp_path, **REFUSED, base_url=local_server.base_url)
    refused = _toml(tmp_path, mapping, "refused")
    assert main(["run", str(refused), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "Fix the endpoint(s) named, or skip this check with --no-preflight.\n" in err

    config = _toml(tmp_path, _mapping(tmp_path))
    assert main(["run", str(config), "--quiet", "--no-preflight", "--shard", "0/2"]) == 0
    capsys.readouterr()
    assert main(["run", str(config), "--quiet", "--no-preflight"]) == 2
    err = capsys.readouterr().err
    assert (
        "this run directory was run with shard 0/2, this run with no --shard (the whole plan). "
        "Resume with the same --shard as before, or use one run directory per shard.\n"
    ) in err
    assert main(["run", str(config), "--quiet", "--no-preflight", "--shard", "1/2"]) == 2
    assert "this run with --shard 1/2. Resume" in capsys.readouterr().err
    assert main(["run", str(config), "--quiet", "--no-preflight", "--shard", "2/2"]) == 2
    assert "--shard: bad shard '2/2'. Use i/N with 0 <= i < N, e.g. --shard 0/4." in (
        capsys.readouterr().err
    )

    other = _toml(tmp_path, {**_mapping(tmp_path), "run_dir": str(config)}, "into-a-file")
    assert main(["run", str(other), "--quiet", "--no-preflight"]) == 2
    assert (
        "Choose a run directory (run_dir or --run-dir) that is a directory or does not exist yet.\n"
    ) in capsys.readouterr().err
    (tmp_path / "bad-cache").mkdir()
    (tmp_path / "bad-cache" / "cache.db").write_bytes(b"not a database, just bytes\n" * 100)
    fresh = _toml(
        tmp_path,
        {
            **_mapping(tmp_path),
            "run_dir": str(tmp_path / "fresh"),
            "cache_dir": str(tmp_path / "bad-cache"),
        },
        "bad-cache",
    )
    assert main(["run", str(fresh), "--quiet", "--no-preflight"]) == 2
    assert (
        "point cache_dir at another directory, or run without a cache (cotaudit run "
        "--no-cache: every request is sent, no answer is stored). Nothing was sent or written."
    ) in capsys.readouterr().err.replace("\n", " ")


def test_the_command_lines_other_run_directory_advice_is_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(_toml(tmp_path, _mapping(tmp_path))), "--quiet", "--no-preflight"]) == 0
    changed = _toml(tmp_path, _mapping(tmp_path, seed=1))
    assert main(["run", str(changed), "--quiet", "--no-preflight"]) == 2
    assert "Start a new run directory (run_dir, or --run-dir DIR) for the changed config: " in (
        capsys.readouterr().err
    )
    message = str(CacheError("/cache", OSError("database is locked")))
    assert "or run without one (cotaudit run --no-cache), and rerun the same command" in message


# --- the vocabulary itself


def test_the_terms_are_the_command_lines_unless_an_api_call_sets_its_own() -> None:
    assert caller_terms.option("no_preflight") == "--no-preflight"
    with caller_terms.api_terms():
        assert caller_terms.option("no_preflight") == "preflight=False"
        assert caller_terms.option("shard", "0/4") == 'shard="0/4"'
        assert caller_terms.label("shard") == "shard"
        # A thread starts with an empty context; one run in a copy of this one carries it.
        seen: list[str] = []
        context = contextvars.copy_context()
        bare = threading.Thread(target=lambda: seen.append(caller_terms.option("out")))
        carried = threading.Thread(
            target=context.run, args=(lambda: seen.append(caller_terms.option("out")),)
        )
        for thread in (bare, carried):
            thread.start()
            thread.join()
        assert seen == ["--out", "out="]
    assert caller_terms.option("shard", "0/4") == "--shard 0/4"
    assert caller_terms.without("shard") == "no --shard"
    assert caller_terms.key_or_option("run_dir", "run_dir") == "run_dir or --run-dir"


def test_an_api_call_leaves_the_command_lines_terms_behind(tmp_path: Path) -> None:
    summary: RunSummary = cotaudit.run(_mapping(tmp_path), preflight=False)
    assert summary.errors == 0
    assert caller_terms.current() is caller_terms.CLI


def test_verify_of_an_eval_dir_that_is_none_names_eval_dir(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.jsonl").write_bytes(b"")
    with pytest.raises(UsageError) as raised:
        cotaudit.verify(run, eval_dir=tmp_path / "missing")
    message = str(raised.value)
    assert "Give eval_dir= the directory" in message and "--eval-dir" not in message
