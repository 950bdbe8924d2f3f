"""The ``run`` and ``plan`` commands as a user calls them (a subprocess): malformed configs
exit 2 naming the field and write nothing; dry run, plan and a real run over loopback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from cotaudit.schema import read_records
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig

REPO = Path(__file__).resolve().parents[2]

GOOD = """\
run_dir = "run"
cache_dir = "cache"
[task]
kind = "prompts"
path = "prompts.jsonl"
samples = 2
[[endpoints]]
name = "local"
provider = "local"
model = "echo"
base_url = "BASE_URL"
requests_per_minute = 600
tokens_per_minute = 1000000
max_concurrency = 4
max_tokens = 50
price_input_per_mtok = 1.0
price_output_per_mtok = 4.0
"""


def cotaudit(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cotaudit", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def setup(tmp_path: Path, text: str, base_url: str = "http://127.0.0.1:9/v1") -> Path:
    with (tmp_path / "prompts.jsonl").open("wb") as f:
        for i in range(10):
            f.write(orjson.dumps({"id": f"q{i}", "prompt": f"Say {i}."}) + b"\n")
    path = tmp_path / "sweep.toml"
    path.write_text(text.replace("BASE_URL", base_url))
    return path


MALFORMED = [
    ("unknown key", ("max_tokens = 50", "max_tokens = 50\nmax_token = 5"), "max_token"),
    ("bad provider", ('provider = "local"', 'provider = "localhost"'), "provider"),
    (
        "rate as text",
        ("requests_per_minute = 600", 'requests_per_minute = "fast"'),
        "requests_per_minute",
    ),
    ("no endpoints", ("[[endpoints]]", "[[nothing]]"), "endpoints"),
    ("bad task", ('kind = "prompts"', 'kind = "qa"'), "kind"),
    ("bad samples", ("samples = 2", "samples = 0"), "samples"),
]


@pytest.mark.parametrize(("label", "change", "field"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_config_exits_2_naming_the_field_and_writes_nothing(
    tmp_path: Path, label: str, change: tuple[str, str], field: str
) -> None:
    config = setup(tmp_path, GOOD.replace(*change))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    result = cotaudit("run", str(config), "--no-progress")
    assert result.returncode == 2, result.stderr
    assert field in result.stderr and "sweep.toml" in result.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_bad_prompt_line_is_named_with_file_and_line(tmp_path: Path) -> None:
    config = setup(tmp_path, GOOD)
    with (tmp_path / "prompts.jsonl").open("ab") as f:
        f.write(b'{"id": "q99", "promt": "typo"}\n')
    result = cotaudit("run", str(config), "--no-progress")
    assert result.returncode == 2
    assert "prompts.jsonl:11" in result.stderr and "promt" in result.stderr


def test_missing_key_variable_exits_2_naming_it(tmp_path: Path) -> None:
    text = GOOD.replace('model = "echo"', 'model = "echo"\napi_key_env = "COTAUDIT_NOT_SET_KEY"')
    config = setup(tmp_path, text)
    env = {k: v for k, v in os.environ.items() if k != "COTAUDIT_NOT_SET_KEY"}
    result = subprocess.run(
        [sys.executable, "-m", "cotaudit", "run", str(config), "--no-progress"],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "COTAUDIT_NOT_SET_KEY" in result.stderr
    assert not (tmp_path / "run").exists()


def test_dry_run_reports_and_sends_nothing(tmp_path: Path) -> None:
    config = setup(tmp_path, GOOD)
    result = cotaudit("run", str(config), "--dry-run")
    assert result.returncode == 0, result.stderr
    # 20 requests at 600/min -> at least 2 s; 1000 output tokens at 4/Mtok.
    assert "local: 20 requests" in result.stdout and "<= 1000 output tokens" in result.stdout
    assert ">= 2 s" in result.stdout and "cost <=" in result.stdout
    assert not (tmp_path / "run").exists()


def test_a_dry_run_of_a_run_directory_estimates_what_is_left_and_refuses_another_config(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    server = make_server(ServerConfig())
    config = setup(tmp_path, GOOD.replace("600", "60000"), server.base_url)
    first = cotaudit("run", str(config), "--no-progress", "--limit", "3")
    assert first.returncode == 0, first.stderr
    sent = server.stats()["requests_total"]
    run_dir = tmp_path / "run"
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}

    # The whole plan (10 prompts, 2 samples): 6 of its 20 requests are in the stream.
    left = cotaudit("run", str(config), "--dry-run")
    assert left.returncode == 0, left.stderr
    assert "local: 14 requests left (6 of 20 planned already in the stream)" in left.stdout
    assert "<= 700 output tokens" in left.stdout  # 14 x max_tokens 50

    # Another config's run directory is refused as the run would refuse it, before a send.
    config.write_text(config.read_text().replace("max_tokens = 50", "max_tokens = 60"))
    refused = cotaudit("run", str(config), "--dry-run")
    assert refused.returncode == 2, refused.stderr
    assert "endpoints[local].params.max_tokens: 50 -> 60" in refused.stderr
    assert not refused.stdout
    assert server.stats()["requests_total"] == sent
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before


def test_plan_command_writes_every_request(tmp_path: Path) -> None:
    config = setup(tmp_path, GOOD)
    out = tmp_path / "plan.jsonl"
    result = cotaudit("plan", str(config), "--out", str(out))
    assert result.returncode == 0, result.stderr
    kinds = [r["kind"] for r in read_records(out)]
    assert kinds.count("problem") == 10 and kinds.count("request") == 20
    assert not (tmp_path / "run").exists()


def test_run_and_resume_through_the_cli(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    server = make_server(ServerConfig())
    config = setup(tmp_path, GOOD.replace("600", "60000"), server.base_url)
    first = cotaudit("run", str(config), "--no-progress")
    assert first.returncode == 0, first.stderr
    assert "20 written" in first.stderr
    again = cotaudit("run", str(config), "--no-progress")
    assert again.returncode == 0 and "20 already done" in again.stderr
    changed = config.read_text().replace("max_tokens = 50", "max_tokens = 60")
    config.write_text(changed)
    refused = cotaudit("run", str(config), "--no-progress")
    assert refused.returncode == 2
    assert "endpoints[local].params.max_tokens: 50 -> 60" in refused.stderr


def test_preflight_failure_exits_2_with_advice(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    server = make_server(ServerConfig())
    config = setup(tmp_path, GOOD.replace('model = "echo"', 'model = "gpt-17"'), server.base_url)
    result = cotaudit("run", str(config), "--no-progress")
    assert result.returncode == 2
    assert "gpt-17" in result.stderr and "--no-preflight" in result.stderr
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_a_full_disk_gets_one_line_naming_the_stream_and_a_resume_completes(
    tmp_path: Path,
    make_server: Callable[[ServerConfig], ServerThread],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # In-process, so the writer can be made to fail as a full disk does (ENOSPC from write).
    import errno

    from cotaudit.cli import main
    from runner.writer import RecordWriter

    real_write = RecordWriter._write_buffered

    def disk_full_after_a_few(self: RecordWriter) -> None:
        if self.written >= 5:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(self)

    server = make_server(ServerConfig())
    config = setup(tmp_path, GOOD.replace("600", "60000"), server.base_url)
    monkeypatch.setattr(RecordWriter, "_write_buffered", disk_full_after_a_few)
    assert main(["run", str(config), "--no-progress"]) == 1
    err = capsys.readouterr().err
    stream = tmp_path / "run" / "results.jsonl"
    assert f"error: No space left on device: {stream}" in err
    assert "rerun the same command" in err and "Traceback" not in err
    written = list(read_records(stream))
    assert 5 <= len(written) < 30  # 10 problems + 20 responses planned
    monkeypatch.setattr(RecordWriter, "_write_buffered", real_write)
    assert main(["run", str(config), "--no-progress"]) == 0
    responses = [r for r in read_records(stream) if r["kind"] == "response"]
    assert sorted(r["request_id"] for r in responses) == sorted(
        {r["request_id"] for r in responses}
    )
    assert len(responses) == 20


def test_a_corrupt_cache_exits_2_naming_it_before_writing_anything(tmp_path: Path) -> None:
    config = setup(tmp_path, GOOD)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "cache.db").write_bytes(b"garbage\n" * 100)
    result = cotaudit("run", str(config), "--no-progress", "--no-preflight")
    assert result.returncode == 2, result.stderr
    assert f"{tmp_path / 'cache'}: the response cache cannot be opened" in result.stderr
    assert "file is not a database" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_a_second_run_into_a_busy_run_dir_is_refused_and_writes_nothing(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    from runner.run_lock import run_dir_lock

    server = make_server(ServerConfig())
    config = setup(tmp_path, GOOD.replace("600", "60000"), server.base_url)
    assert cotaudit("run", str(config), "--no-progress").returncode == 0
    stream = tmp_path / "run" / "results.jsonl"
    before = stream.read_bytes()
    with run_dir_lock(tmp_path / "run"):  # another run (this process) holds the directory
        refused = cotaudit("run", str(config), "--no-progress")
    assert refused.returncode == 2, refused.stderr
    assert f"another cotaudit run is using this run directory (pid {os.getpid()})" in (
        refused.stderr
    )
    assert stream.read_bytes() == before


def _cut_run(tmp_path: Path, server: ServerThread) -> tuple[Path, Path, list[bytes]]:
    """A finished run of GOOD cut to its 10 problems and first 5 responses (lines 11-15), as
    an interrupted run leaves it; with ``--no-cache``, a resume sends the other 15 again.
    Returns the config, the stream and the finished run's lines, problems first."""
    config = setup(tmp_path, GOOD.replace("600", "60000"), server.base_url)
    assert cotaudit("run", str(config), "--no-progress").returncode == 0
    stream = tmp_path / "run" / "results.jsonl"
    # Problems first, in their order: a run writes each before its responses, not all of
    # them before any response.
    lines = sorted(
        stream.read_bytes().splitlines(keepends=True), key=lambda line: b'"response"' in line
    )
    assert len(lines) == 30 and b'"response"' in lines[10] and b'"response"' not in lines[9]
    stream.write_bytes(b"".join(lines[:15]))
    return config, stream, lines


def _without_text(line: bytes) -> bytes:
    record = orjson.loads(line)
    del record["text"]
    return orjson.dumps(record) + b"\n"


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (_without_text, ":13: missing field 'text'"),
        (lambda _: b'{"problem_id": "q1"}\n', ":13: line is not a record"),
        (lambda line: line[:40] + b"\n", ":13: line is not valid JSON"),
    ],
    ids=["a response without its text", "an object without a kind", "not JSON"],
)
def test_a_resume_refuses_a_bad_complete_line_mid_stream_before_writing_or_sending(
    tmp_path: Path,
    make_server: Callable[[ServerConfig], ServerThread],
    spoil: Callable[[bytes], bytes],
    message: str,
) -> None:
    # Appending after the line would leave it mid-stream, where an evaluation refuses it.
    server = make_server(ServerConfig())
    config, stream, lines = _cut_run(tmp_path, server)
    spoilt = [*lines[:12], spoil(lines[12]), *lines[13:15]]
    stream.write_bytes(b"".join(spoilt))
    manifest = tmp_path / "run" / "manifest.json"
    before, manifest_before = stream.read_bytes(), manifest.read_bytes()
    sent_before = server.stats()["requests_total"]
    refused = cotaudit("run", str(config), "--no-progress", "--no-cache")
    assert refused.returncode == 2, refused.stderr
    assert f"{stream}{message}" in refused.stderr, refused.stderr
    assert "cut results.jsonl just before it" in refused.stderr
    assert "move results.jsonl aside" in refused.stderr and "Traceback" not in refused.stderr
    assert stream.read_bytes() == before and manifest.read_bytes() == manifest_before
    assert server.stats()["requests_total"] == sent_before  # not even the preflight's


def test_a_resume_cuts_a_torn_last_line_and_completes_the_run(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    # A crash mid-write leaves a last line without its newline: not damage, cut and resumed.
    server = make_server(ServerConfig())
    config, stream, lines = _cut_run(tmp_path, server)
    kept = b"".join(lines[:15])
    stream.write_bytes(kept + lines[15][:40])
    resumed = cotaudit("run", str(config), "--no-progress", "--no-cache")
    assert resumed.returncode == 0, resumed.stderr
    assert "15 written" in resumed.stderr and "5 already done" in resumed.stderr
    after = stream.read_bytes()
    assert after.startswith(kept) and after.endswith(b"\n")
    responses = [r for r in read_records(stream) if r["kind"] == "response"]
    assert len(responses) == len({r["request_id"] for r in responses}) == 20
