"""report.md of an evaluated evidence pack: Table 2 shows the published interval of an ablation
row that is a main row's measurement again, and an audit the pack lacks an output of is said
as the pack's gap, not as a run still writing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from evaluator.report import load_published, short_of_plan_note
from tests.runner.test_evidence_pack import make_pack

PACK = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "grounding-audit-gpt4o"
STILL_WRITING = "a run still writing"


def _counts(tp: int, fp: int, fn: int, tn: int) -> dict[str, float | int]:
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "precision": 0.6, "recall": 0.9, "f1": 0.72}


def _ci(low: float, high: float) -> dict[str, object]:
    bounds = {"mean": 0.7, "std": 0.03, "ci_lower": low, "ci_upper": high}
    return {"point": {}, "ci": {"precision": bounds, "recall": bounds, "f1": bounds}}


def _published_pack(root: Path) -> Path:
    """A one-problem pack with the published report's layout: the ablation's A+A' has the
    counts of the main A+A' combined, its A+A'+cascade not those of the main one (and its A
    alone is another measurement than the main A consistent, as in the GPT-4o pack)."""
    pack = make_pack(root)
    evidence = pack / "evidence" / "gpt-4o"
    final = {
        "main": {
            "A_consistent_full": _counts(150, 39, 33, 674),
            "A_Ap_combined_full": _counts(172, 113, 18, 612),
            "A_Ap_cascade_full": _counts(170, 55, 20, 670),
        },
        "ablation": {
            "A_consistent_only": _counts(150, 39, 35, 683),
            "A+A'_combined": _counts(172, 113, 18, 612),
            "A+A'_cascade_filter": _counts(170, 55, 21, 670),
        },
    }
    (evidence / "final_report.json").write_text(json.dumps(final))
    cis = {
        "A_consistent_full": _ci(0.7599, 0.8518),
        "A_Ap_combined_full": _ci(0.6713, 0.7818),
        "A_Ap_cascade_full": _ci(0.7688, 0.8711),
    }
    (evidence / "bootstrap_ci.json").write_text(json.dumps(cis))
    return pack


def _evaluate(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """Evaluate ``run``; its report.md and what evaluate said on stderr."""
    capsys.readouterr()
    assert main(["evaluate", str(run), "--n-boot", "0", "--no-figures", "--quiet"]) == 0
    err = capsys.readouterr().err
    return (run.parent / "eval" / "report.md").read_text(encoding="utf-8"), err


def _row_of(markdown: str, label: str) -> str:
    lines = [line for line in markdown.splitlines() if line.startswith(f"| {label} |")]
    assert len(lines) == 1, (label, lines)
    return lines[0]


def test_table2_shows_the_published_ci_of_the_main_row_it_measures_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = _published_pack(tmp_path / "pack")
    run = tmp_path / "run"
    assert main(["import-evidence", str(pack), "--model", "gpt-4o", "--out", str(run)]) == 0
    markdown, _ = _evaluate(run / "results.jsonl", capsys)
    # published F1 | published CI | published tp/fp/fn/tn are the last three cells.
    combined = _row_of(markdown, "A+A'").split(" | ")
    assert combined[-3:] == ["0.720", "[0.671, 0.782]", "172/113/18/612 |"], combined
    # Counts that differ by one are another measurement: its interval is not shown.
    cascade = _row_of(markdown, "A+A'+cascade").split(" | ")
    assert cascade[-2:] == ["n/a", "170/55/21/670 |"], cascade
    alone = _row_of(markdown, "A alone (UNSTABLE negative) †").split(" | ")
    assert alone[-2:] == ["n/a", "150/39/35/683 |"], alone
    # Table 1's rows keep their own intervals.
    assert "[0.769, 0.871]" in _row_of(markdown, "A+A'+cascade, full")


def test_the_gpt4o_packs_ablation_rows_take_the_intervals_of_their_main_rows() -> None:
    if not PACK.is_dir():
        pytest.skip(f"the GPT-4o evidence pack is not at {PACK}")
    rows = load_published(PACK, "gpt-4o")
    assert rows is not None
    assert rows["A+A'_combined"]["ci"] == rows["A_Ap_combined_full"]["ci"]
    assert rows["A+A'_combined"]["ci"] == pytest.approx([0.6713, 0.7818])
    assert rows["A+A'_cascade_filter"]["ci"] == pytest.approx([0.7688, 0.8711])
    # The pack has no interval for the string diff, and its A alone is not A consistent.
    assert "ci" not in rows["string_diff_baseline"] and "ci" not in rows["string_diff_full"]
    assert "ci" not in rows["A_consistent_only"]


def test_an_output_the_pack_lacks_is_said_as_the_packs_not_as_a_run_still_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = make_pack(tmp_path / "pack")
    (pack / "evidence" / "gpt-4o" / "p001" / "probes" / "local_P2.json").unlink()
    run = tmp_path / "run"
    assert main(["import-evidence", str(pack), "--out", str(run)]) == 0
    markdown, err = _evaluate(run / "results.jsonl", capsys)
    said = (
        "the records of 1 audits (a model on a problem) are incomplete and no error was "
        "recorded for them (the run is an import of an evidence pack that lacks these probe "
        "outputs, which import-evidence named on import; report.json: "
        "alignment.probe_outputs_absent): their missing outputs count as absent. Restore the "
        "pack's files and import into a new directory to have every probe."
    )
    assert f"cotaudit evaluate: note: {said}" in err, err
    assert f"**Incomplete run:** {said[0].upper()}{said[1:]}" in markdown
    assert STILL_WRITING not in err and STILL_WRITING not in markdown
    report = orjson.loads((run / "eval" / "report.json").read_bytes())
    assert report["stream"]["incomplete_groups"] == 1
    assert report["stream"]["run_source"] == "import-evidence"
    assert main(["verify", str(run)]) == 0  # the recorded provenance is recomputed the same

    # The same stream with no manifest beside it may be a run still writing: said so.
    bare = tmp_path / "bare" / "results.jsonl"
    bare.parent.mkdir()
    shutil.copyfile(run / "results.jsonl", bare)
    markdown, err = _evaluate(bare, capsys)
    assert STILL_WRITING in err and "Evaluate again once the run is complete." in markdown
    report = orjson.loads((bare.parent / "eval" / "report.json").read_bytes())
    assert "run_source" not in report["stream"]


def test_a_source_the_note_does_not_know_gets_the_runs_advice() -> None:
    stream = {"incomplete_groups": 2, "run_source": "some-future-importer"}
    note = short_of_plan_note({"stream": stream})
    assert note is not None and STILL_WRITING in note
