"""The evidence pack as a researcher's copy of it may be: a problem file lost (its outputs
would vanish from the table without a word), a probe output lost (imported, and said so)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cotaudit.cli import main
from tests.runner.test_evidence_pack import make_pack


def test_outputs_without_their_problem_file_are_refused_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = make_pack(tmp_path / "pack")
    (pack / "data" / "prontoqa_50" / "p001.json").unlink()
    out = tmp_path / "run"
    assert main(["import-evidence", str(pack), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    missing = pack / "data" / "prontoqa_50" / "p001.json"
    assert err.startswith(f"cotaudit import-evidence: error: {missing}: "), err
    assert "outputs for problem p001" in err and "Restore the file from the pack" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_reproduce_refuses_outputs_without_their_problem_before_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before, the replayed sweep ran on the other problems and the evaluation then stopped on
    # the lone problem's self-consistency summary, with the sweep's stream left behind.
    pack = make_pack(tmp_path / "pack")
    (pack / "data" / "prontoqa_50" / "p001.json").unlink()
    out = tmp_path / "repro"
    assert main(["reproduce", str(pack), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "no problem file for it" in err and "p001.json" in err, err
    assert not out.exists()


def test_an_absent_probe_output_is_imported_as_absent_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = make_pack(tmp_path / "pack")
    (pack / "evidence" / "gpt-4o" / "p001" / "probes" / "local_P2.json").unlink()
    out = tmp_path / "run"
    assert main(["import-evidence", str(pack), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "imported 1 problems, 6 responses" in captured.out
    assert (
        "cotaudit import-evidence: 1 probe output absent from the pack (p001 local P2); "
        "the evaluation counts it absent (report.json: alignment.probe_outputs_absent)"
    ) in captured.err, captured.err
    assert (out / "results.jsonl").is_file()


def test_a_whole_pack_imports_without_a_word_on_absent_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = make_pack(tmp_path / "pack")
    assert main(["import-evidence", str(pack), "--out", str(tmp_path / "run")]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("damage", [b'{"main": {"A_consistent_full": ', b"[1, 2]"])
def test_evaluating_an_import_whose_published_report_is_damaged_is_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: bytes
) -> None:
    # evaluate reads the pack's final_report.json to show it beside our table: a truncated
    # or odd-shaped one was a traceback after the audits.

    pack = make_pack(tmp_path / "pack")
    run = tmp_path / "run"
    assert main(["import-evidence", str(pack), "--model", "gpt-4o", "--out", str(run)]) == 0
    final = pack / "evidence" / "gpt-4o" / "final_report.json"
    final.write_bytes(damage)
    capsys.readouterr()
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{final}: " in err and "Restore the file from the pack." in err, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert not (run / "eval").exists()
