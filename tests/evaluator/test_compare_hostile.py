"""``cotaudit compare`` on what an expert plausibly hands it by mistake: ``--out`` into an
evaluation (refused before anything is computed, the evaluation left byte for byte and still
verifiable), and an evaluation whose files are not one (certificates cut short, a report
edited): one message, exit 2, no traceback, no differences printed from part of the data."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main


@pytest.fixture(scope="module")
def evaluated(swept_run: Callable[..., Path]) -> Path:
    run = swept_run(3, 0)
    if not (run / "eval" / "evaluation.json").is_file():
        assert main(["evaluate", str(run), "--n-boot", "20", "--no-figures", "--quiet"]) == 0
    return run


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("out", ["eval", "eval/cmp", "eval/../eval"])
def test_out_into_an_evaluation_is_refused_and_it_still_verifies(
    evaluated: Path, capsys: pytest.CaptureFixture[str], out: str
) -> None:
    # A file added to an evaluation fails `cotaudit verify` ("added since") and is deleted when
    # the run is evaluated again: compare used to write comparison.md and .json there.
    before = _files(evaluated / "eval")
    target = evaluated / out
    code = main(["compare", str(evaluated), str(evaluated), "--n-boot", "0", "--out", str(target)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err.startswith(f"cotaudit compare: error: --out: {target} is ")
    assert "evaluation" in captured.err and "cotaudit verify" in captured.err
    assert f"--out {(evaluated / 'comparison').resolve()}" in captured.err or (
        f"--out {evaluated / 'comparison'}" in captured.err
    )
    assert _files(evaluated / "eval") == before
    assert main(["verify", str(evaluated)]) == 0


def test_out_beside_the_evaluation_is_written(
    evaluated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    assert (
        main(["compare", str(evaluated), str(evaluated), "--n-boot", "0", "--out", str(out)]) == 0
    )
    assert sorted(p.name for p in out.iterdir()) == ["comparison.json", "comparison.md"]


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


def test_certificates_cut_at_a_line_are_refused_not_counted(
    evaluated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Cut where a line ends, the file reads as certificates; compare used to pair the models on
    # what was left and print differences computed from part of the evaluation.
    other = _copy(evaluated, tmp_path / "cut")
    certificates = other / "eval" / "certificates.jsonl"
    lines = certificates.read_bytes().splitlines(keepends=True)
    certificates.write_bytes(b"".join(lines[: len(lines) // 2]))
    code = main(["compare", str(evaluated), str(other), "--n-boot", "0"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert f"{certificates}: the certificates of " in captured.err
    assert "do not add up to its report.json row" in captured.err
    assert f"cotaudit verify {other}" in captured.err


def test_a_line_that_is_no_certificate_is_named(
    evaluated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = _copy(evaluated, tmp_path / "torn")
    certificates = other / "eval" / "certificates.jsonl"
    lines = certificates.read_bytes().count(b"\n")
    certificates.write_bytes(certificates.read_bytes() + b'{"endpoint": "faith\xff')
    assert main(["compare", str(evaluated), str(other), "--n-boot", "0"]) == 2
    assert f"{certificates}:{lines + 1}: not a certificate" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("report", "what"),
    [
        ({"models": {"x": 5}}, "model x is not an object"),
        (
            {"models": {"x": {"headline": {"found": {}, "problem_ids": 5}}}},
            "the headline of x has no list of problem_ids",
        ),
        (
            {"models": {"x": {"headline": {"found": {}, "problem_ids": []}}}, "options": 3},
            "its options are not an object",
        ),
    ],
)
def test_a_report_of_another_shape_is_one_message(
    evaluated: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    report: dict[str, object],
    what: str,
) -> None:
    other = _copy(evaluated, tmp_path / "edited")
    (other / "eval" / "report.json").write_bytes(orjson.dumps(report))
    assert main(["compare", str(evaluated), str(other), "--n-boot", "0"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"{other / 'eval' / 'report.json'}: not a report of cotaudit evaluate: {what}" in err
