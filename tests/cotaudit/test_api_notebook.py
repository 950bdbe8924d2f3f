"""The Python API as a researcher in a notebook meets it: every option that is a switch is
True or False (truthiness would read "no" as yes), ``verify`` returns what
``cotaudit verify`` prints (the root hash, the certificates checked, its notes), a model's
headline figures are fields, not keys of ``raw``, and ``selection`` names its resamples as
``evaluate`` does. Everything runs against the project's embedded local model."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

import cotaudit
from cotaudit.errors import UsageError
from tests.cotaudit.test_api_review import _mapping


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    summary = cotaudit.run(_mapping(tmp_path_factory.mktemp("notebook")), preflight=False)
    assert summary.errors == 0 and summary.written == summary.planned > 0
    cotaudit.evaluate(summary.run_dir, n_boot=50)
    return summary.run_dir


# --- switches


@pytest.mark.parametrize(
    ("switch", "given"),
    [("progress", "no"), ("retry_errors", "no"), ("preflight", None), ("preflight", 0)],
)
def test_run_and_arun_take_their_switches_as_true_or_false(
    tmp_path: Path, switch: str, given: Any
) -> None:
    # progress="no" showed the bar, retry_errors="no" sent the failed requests again.
    message = rf"^run: {switch} is True or False, not (a |an |None)"
    with pytest.raises(UsageError, match=message):
        cotaudit.run(_mapping(tmp_path), **{switch: given})
    with pytest.raises(UsageError, match=message.replace("run", "arun", 1)):
        asyncio.run(cotaudit.arun(_mapping(tmp_path), **{switch: given}))
    assert not (tmp_path / "run").exists()


# --- what verify found


def test_verify_returns_the_root_the_certificates_and_the_notes(
    evaluated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(evaluated.parent)
    result = cotaudit.verify(evaluated.name)  # relative, as typed in a notebook
    assert result.ok and result.notes == ()
    manifest = evaluated / "eval" / "evaluation.json"
    assert result.root == hashlib.sha256(manifest.read_bytes()).hexdigest()
    report = orjson.loads((evaluated / "eval" / "report.json").read_bytes())
    assert result.certificates == report["models"]["faithful"]["certificates"]["total"] > 0
    monkeypatch.chdir(tmp_path)  # a %cd between cells
    assert result.run_dir == evaluated and result.eval_dir == evaluated / "eval"

    # A blank line changes no number, and verify holds; the command prints it as a note.
    blank = tmp_path / "blank"
    shutil.copytree(evaluated, blank, ignore=shutil.ignore_patterns("eval", ".lock"))
    stream = blank / "results.jsonl"
    lines = stream.read_bytes().splitlines(keepends=True)
    stream.write_bytes(b"".join(lines[:3]) + b"\n" + b"".join(lines[3:]))
    cotaudit.evaluate(blank, n_boot=0, out=tmp_path / "blank-eval")
    noted = cotaudit.verify(blank, eval_dir=tmp_path / "blank-eval")
    assert noted.ok and noted.eval_dir == tmp_path / "blank-eval"
    (note,) = noted.notes
    assert "results.jsonl:4: a blank line" in note


def test_a_verifications_repr_stays_short_however_many_failures(evaluated: Path) -> None:
    result = cotaudit.verify(evaluated)
    many = dataclasses.replace(result, failures=tuple(f"line {i}: changed" for i in range(5000)))
    text = repr(many)
    assert len(text) < 1_000, text[:300]
    assert "ok=False" in text and "4997 more" in text and result.root in text
    assert "ok=True" in repr(result)


# --- a model's figures


def test_a_models_headline_figures_and_intervals_are_fields(evaluated: Path) -> None:
    report = cotaudit.evaluate(evaluated, n_boot=50, out=evaluated / "eval")
    model = report.models["faithful"]
    stored = orjson.loads((evaluated / "eval" / "report.json").read_bytes())["models"]["faithful"]
    found = stored["headline"]["found"]["A+A'"]
    assert (model.judged, model.ignored, model.grounded_share) == (
        found["judged"],
        found["ignored"],
        found["grounded_share"],
    )
    assert model.judged > 0
    assert f"ignored={model.ignored}" in repr(model)
    row = model.rows["A_consistent_full"]
    data = stored["rows"]["A_consistent_full"]
    assert row.ci_recall == tuple(data["ci_recall"]) and row.ci_precision == tuple(
        data["ci_precision"]
    )


def test_to_frame_has_float_intervals_also_without_bootstrap(evaluated: Path) -> None:
    pytest.importorskip("pandas", reason="pandas is an optional extra: cotaudit[pandas]")
    without = cotaudit.evaluate(evaluated, n_boot=0, out=evaluated.parent / "no-boot").to_frame()
    # A column of None is of objects: it neither plots nor compares as numbers do.
    for column in ("f1_low", "f1_high", "recall_low", "precision_high"):
        assert without[column].dtype == "float64" and without[column].isna().all()
    frame = cotaudit.evaluate(evaluated, n_boot=50, out=evaluated.parent / "boot").to_frame()
    assert (frame["recall_low"] <= frame["recall"]).all()
    assert (frame["recall"] <= frame["recall_high"]).all()


# --- names shared between the functions


def test_selection_names_its_resamples_n_boot_as_evaluate_does() -> None:
    counts = {"GLM-5.3": (299, 216, 208, 277)}
    assert cotaudit.selection(counts, n_boot=50) == cotaudit.selection(counts, resamples=50)
    with pytest.raises(UsageError, match=r"^selection: n_boot must be an integer in \[0, "):
        cotaudit.selection(counts, n_boot=-1)
    with pytest.raises(UsageError, match=r"^selection: n_boot and resamples are two names"):
        cotaudit.selection(counts, n_boot=50, resamples=50)


@pytest.mark.parametrize("base_dir", [3, ""])
def test_load_configs_base_dir_is_a_path(tmp_path: Path, base_dir: Any) -> None:
    with pytest.raises(UsageError, match=r"^load_config: base_dir is a directory's path, not an"):
        cotaudit.load_config(_mapping(tmp_path), base_dir=base_dir)
