"""Crash-safe evaluation (issue 18): ``eval/`` is one atomic unit.

A reader sees the old evaluation or the new one, never a mix: a SIGKILL mid-evaluate leaves the
old one whole (its files hash as its manifest says, verify passes) and a partial build beside it
that the next evaluation recognises and removes; SIGTERM, a write that fails for want of space
(a real one: a file-size limit on the evaluating process) and a refused stream leave nothing
behind; a full disk at the manifest write (injected: the one place a real full disk cannot be
staged without root) names the manifest and leaves nothing either.
"""

from __future__ import annotations

import errno
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.cli import main
from evaluator.evaldir import EVALUATION_NAME, DiskFull, EvalBuild, file_digest
from tests.evaluator.test_pipeline import records, write_stream

ROOT = Path(__file__).resolve().parents[2]


def _many(n_problems: int) -> list[dict[str, Any]]:
    """``n_problems`` copies of the faithful problem under distinct ids, each with the plan
    the runner writes (so that each is audited as soon as its responses are in)."""
    out: list[dict[str, Any]] = []
    for i in range(n_problems):
        pid = f"q{i}"
        for r in records():
            clone = dict(r, problem_id=pid)
            if r["kind"] == "problem":
                clone["extra"] = {**r.get("extra", {}), "plan": {"samples": 0, "probe_repeats": 1}}
            if "request_id" in clone:
                clone["request_id"] = str(clone["request_id"]).replace("/q1/", f"/{pid}/")
            out.append(clone)
    return out


def _hashes(eval_dir: Path) -> dict[str, str]:
    return {p.name: file_digest(p)[0] for p in sorted(eval_dir.iterdir())}


def _leftovers(run: Path) -> list[str]:
    """Anything an interrupted evaluation might leave: partial builds, locks, temp files."""
    return sorted(
        str(p.relative_to(run))
        for p in run.rglob("*")
        if ".partial-" in p.name or p.name.endswith((".tmp", ".lock"))
    )


@pytest.fixture
def evaluated(tmp_path: Path) -> Path:
    """A run of 600 problems with a complete earlier evaluation of its first 10."""
    run = tmp_path / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", _many(10))
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    write_stream(run / "results.jsonl", _many(600))
    return run


def _start(run: Path, *args: str, **popen: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "cotaudit.cli", "evaluate", str(run), "--n-boot", "2000", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        **popen,
    )


def _wait_for_partial(run: Path, child: subprocess.Popen[bytes]) -> Path:
    """The partial build once its certificates are being written (well before it commits)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for partial in run.glob(".eval.partial-*"):
            certificates = partial / "certificates.jsonl"
            if partial.is_dir() and certificates.is_file() and certificates.stat().st_size:
                return partial
        if child.poll() is not None:
            raise AssertionError(f"evaluate ended first: {child.stderr.read()!r}")  # type: ignore[union-attr]
        time.sleep(0.01)
    raise AssertionError("no partial build appeared")


def test_sigkill_mid_evaluate_leaves_the_old_evaluation_whole_and_the_next_run_cleans_up(
    evaluated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _hashes(evaluated / "eval")
    with _start(evaluated) as child:
        partial = _wait_for_partial(evaluated, child)
        child.kill()
    assert _hashes(evaluated / "eval") == before  # not one byte of the old one changed
    assert partial.is_dir()  # the half-built one is left, recognisable by its name
    write_stream(evaluated / "results.jsonl", _many(10))
    assert main(["verify", str(evaluated)]) == 0  # ... and the old evaluation still verifies
    assert main(["evaluate", str(evaluated), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    assert not partial.exists() and _leftovers(evaluated) == []


@pytest.mark.parametrize("workers", ["0", "2"])
def test_sigterm_mid_evaluate_leaves_nothing_behind(evaluated: Path, workers: str) -> None:
    before = _hashes(evaluated / "eval")
    with _start(evaluated, "--workers", workers) as child:
        _wait_for_partial(evaluated, child)
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=60) == 128 + signal.SIGTERM
    assert _leftovers(evaluated) == []
    assert _hashes(evaluated / "eval") == before


def _limit_file_size() -> None:
    # A real failed write (EFBIG, as ENOSPC would be) without root or a small filesystem.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


def test_a_write_that_does_not_fit_names_the_file_and_leaves_nothing(evaluated: Path) -> None:
    before = _hashes(evaluated / "eval")
    with _start(evaluated, preexec_fn=_limit_file_size) as child:
        _, err = child.communicate(timeout=120)
    message = err.decode()
    assert child.returncode == 1, message
    assert "while writing certificates.jsonl of the evaluation" in message
    assert "Traceback" not in message
    assert _leftovers(evaluated) == []
    assert _hashes(evaluated / "eval") == before


def test_a_refused_stream_leaves_the_old_evaluation_and_nothing_else(evaluated: Path) -> None:
    before = _hashes(evaluated / "eval")
    with (evaluated / "results.jsonl").open("ab") as handle:
        handle.write(b'{"kind": "response", "schema": 1, "text": 3}\n')
    assert main(["evaluate", str(evaluated), "--n-boot", "0", "--no-figures", "--quiet"]) == 2
    assert _leftovers(evaluated) == []
    assert _hashes(evaluated / "eval") == before


def test_a_full_disk_at_the_manifest_write_names_it_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "eval"
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(EVALUATION_NAME):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd to tell the manifest's descriptor")
    monkeypatch.setattr("evaluator.evaldir.os.fsync", fsync)
    with pytest.raises(DiskFull) as caught, EvalBuild(out) as build:
        build.path("report.json").write_bytes(orjson.dumps({"kind": "report"}))
        build.commit({"kind": "evaluation"})
    assert f"while writing {EVALUATION_NAME}" in str(caught.value)
    assert caught.value.where == str(out.absolute() / EVALUATION_NAME)
    assert not out.exists() and list(tmp_path.iterdir()) == []
