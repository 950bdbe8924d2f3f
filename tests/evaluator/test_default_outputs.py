"""A command's default output place that cannot be written is named as that default, not as an
``--out`` the user never typed: ``evaluate RUN`` (``RUN/eval``) and ``view RUN``
(``RUN/eval/view.html``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotaudit.cli import main
from tests.evaluator.test_pipeline import records, write_stream


def _refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(list(args)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("error:") == 1, err
    return err


def test_evaluate_names_its_default_output_when_a_file_stands_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", records())
    (run / "eval").write_bytes(b"notes\n")
    err = _refused(capsys, "evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet")
    assert f"the default output for RUN_DIR {run}; --out chooses another" in err
    assert "--out:" not in err
    assert (run / "eval").read_bytes() == b"notes\n"


def test_view_names_its_default_page_when_another_programs_file_stands_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    write_stream(run / "results.jsonl", records())
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    page = run / "eval" / "view.html"
    page.write_text("<html>my own page</html>\n")
    capsys.readouterr()
    err = _refused(capsys, "view", str(run))
    assert f"the default output for RUN {run}; --out chooses another" in err
    assert "--out:" not in err
    assert page.read_text() == "<html>my own page</html>\n"
