"""A run directory is one run: a resume refuses a stream another config wrote (copied into
the directory, joined to its own with ``cat``, or without a manifest) before it writes
anything, and ``cotaudit verify`` fails such a stream under a manifest it is not the run of.

Real runs through the embedded local model, two problems each (docs/engine.md, "Resume";
docs/certificates.md, "What cotaudit verify checks")."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cotaudit import api
from cotaudit.cli import main

CONFIG = """\
run_dir = "RUN"
cache_dir = "cache"
[task]
kind = "prontoqa"
source = "generate"
n = 2
seed = SEED
EXTRA
[[endpoints]]
name = "e"
provider = "local"
model = "MODEL"
requests_per_minute = 600000
tokens_per_minute = 1e10
"""

# The run every test resumes or verifies, and the configs whose streams are foreign to it.
OTHERS = {
    "another seed": {"SEED": "4"},
    "another model": {"MODEL": "shortcut"},
    "another sample temperature": {"EXTRA": "sample_temperature = 0.9"},
}
EVALUATE = ["--quiet", "--no-figures", "--n-boot", "50"]


def _config(root: Path, name: str, **values: str) -> Path:
    text = CONFIG.replace("RUN", name)
    for key, default in (("SEED", "3"), ("MODEL", "faithful"), ("EXTRA", "")):
        text = text.replace(key, values.get(key, default))
    path = root / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ours`` (seed 3, faithful) and one run per entry of ``OTHERS``, swept once."""
    root = tmp_path_factory.mktemp("runs")
    assert main(["run", str(_config(root, "ours")), "--quiet", "--no-preflight"]) == 0
    for i, values in enumerate(OTHERS.values()):
        config = _config(root, f"other{i}", **values)
        assert main(["run", str(config), "--quiet", "--no-preflight"]) == 0
    return root


def _other(runs: Path, case: str) -> Path:
    return runs / f"other{list(OTHERS).index(case)}"


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (``.lock`` aside: taking it writes a pid)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines())


def _resume(runs: Path, run_dir: Path) -> int:
    return main(["run", str(runs / "ours.toml"), "--run-dir", str(run_dir), "--quiet"])


@pytest.mark.parametrize(
    ("case", "line", "said"),
    [
        ("another seed", 1, "problem g4-00001 is not one of the problems this config plans"),
        (
            "another model",
            None,
            "was answered by local/shortcut; this config's endpoint 'e' is local/faithful",
        ),
        ("another sample temperature", None, "sent as another request than this config's plan"),
    ],
)
def test_a_resume_refuses_a_stream_another_config_wrote_and_leaves_it(
    runs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
    line: int | None,
    said: str,
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(runs / "ours" / "manifest.json", run_dir)
    shutil.copy(_other(runs, case) / "results.jsonl", run_dir)
    before = _files(run_dir)
    capsys.readouterr()

    assert _resume(runs, run_dir) == 2
    err = capsys.readouterr().err
    where = f"{run_dir / 'results.jsonl'}:{line or ''}"
    assert where in err and said in err, err
    assert "Nothing was written" in err and "--run-dir DIR" in err
    assert _files(run_dir) == before


def test_a_resume_refuses_two_streams_joined_naming_the_first_record_of_the_other(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "joined"
    run_dir.mkdir()
    shutil.copy(runs / "ours" / "manifest.json", run_dir)
    ours = (runs / "ours" / "results.jsonl").read_bytes()
    theirs = (_other(runs, "another seed") / "results.jsonl").read_bytes()
    (run_dir / "results.jsonl").write_bytes(ours + theirs)
    before = _files(run_dir)
    capsys.readouterr()

    assert _resume(runs, run_dir) == 2
    first_of_theirs = len(ours.splitlines()) + 1
    err = capsys.readouterr().err
    assert f"results.jsonl:{first_of_theirs}: problem g4-00001 is not one of the problems" in err
    assert _files(run_dir) == before


def test_a_stream_without_a_manifest_is_refused_and_left(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "bare"
    run_dir.mkdir()
    shutil.copy(runs / "ours" / "results.jsonl", run_dir)
    before = _files(run_dir)
    capsys.readouterr()

    assert _resume(runs, run_dir) == 2
    err = capsys.readouterr().err
    assert "results.jsonl exists but manifest.json does not" in err
    assert _files(run_dir) == before


def test_a_resume_of_a_part_of_its_own_stream_completes_it(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check refuses foreign records, not a stream that is this plan's, cut short: the
    stream of the first problem only (as an interrupted run leaves it) is resumed."""
    run_dir = tmp_path / "part"
    shutil.copytree(runs / "ours", run_dir)
    lines = (run_dir / "results.jsonl").read_bytes().splitlines(keepends=True)
    second = next(i for i, x in enumerate(lines) if b'"problem_id":"g3-00002"' in x)
    (run_dir / "results.jsonl").write_bytes(b"".join(lines[:second]))

    assert _resume(runs, run_dir) == 0
    assert _lines(run_dir / "results.jsonl") == len(lines)


def test_verify_fails_two_streams_joined_under_one_manifest_that_evaluate_audits(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same model, different problem sets: ``evaluate`` audits what the stream holds (it does
    not rebuild the plan: docs/certificates.md), ``verify`` refuses to certify it as the run
    its manifest describes, naming the first record of the other run."""
    run_dir = tmp_path / "joined"
    run_dir.mkdir()
    shutil.copy(runs / "ours" / "manifest.json", run_dir)
    ours = (runs / "ours" / "results.jsonl").read_bytes()
    theirs = (_other(runs, "another seed") / "results.jsonl").read_bytes()
    (run_dir / "results.jsonl").write_bytes(ours + theirs)
    assert main(["evaluate", str(run_dir), *EVALUATE]) == 0
    capsys.readouterr()

    assert main(["verify", str(run_dir)]) == 1
    err = capsys.readouterr().err
    first_of_theirs = len(ours.splitlines()) + 1
    assert (
        f"FAIL {run_dir / 'results.jsonl'}:{first_of_theirs}: problem g4-00001 is not one of "
        "the problems this config plans"
    ) in err
    assert f"not (only) the run its manifest {run_dir / 'manifest.json'} plans" in err
    assert "2 of its 4 problems are not the plan's" in err
    assert not api.verify(run_dir).ok


def test_verify_fails_another_runs_stream_under_a_manifest_and_holds_the_run_itself(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs = tmp_path / "theirs"
    shutil.copytree(_other(runs, "another model"), theirs)
    shutil.copy(runs / "ours" / "manifest.json", theirs)
    assert main(["evaluate", str(theirs), *EVALUATE]) == 0
    capsys.readouterr()
    assert main(["verify", str(theirs)]) == 1
    assert "was answered by local/shortcut" in capsys.readouterr().err

    ours = tmp_path / "ours"
    shutil.copytree(runs / "ours", ours)
    assert main(["evaluate", str(ours), *EVALUATE]) == 0
    assert main(["verify", str(ours)]) == 0
