"""``cotaudit reproduce`` as a paper's reader meets it: the printed table names both sides,
their denominators and every row of docs/reproduction.md's table; a published report that
cannot be read is refused before anything is written; Ctrl-C during the sweep resumes."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cotaudit import cli
from cotaudit.commands.reproduce import COMPARED_ROWS
from tests.ctrl_c import sigint_as_a_terminal_sends_it

DOC = Path(__file__).resolve().parents[2] / "docs" / "reproduction.md"


def _table_rows(printed: str) -> dict[str, str]:
    labels = [label for _, label in COMPARED_ROWS]
    return {
        label: line
        for line in printed.splitlines()
        for label in labels
        if line.startswith(label + "  ")
    }


def test_the_table_names_both_sides_their_denominators_and_the_docs_rows(
    pack_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A terminal wide enough for one table and the header in a line (narrower: split and
    # wrapped, test_reproduce_width.py).
    monkeypatch.setenv("COLUMNS", "1000")
    out = tmp_path / "repro"
    argv = ["reproduce", str(pack_dir), "--out", str(out), "--quiet", "--no-figures"]
    assert cli.main(argv) == 0
    first = capsys.readouterr().out
    assert (
        "reproduce gpt-4o: 890 recorded outputs replayed through the engine (890 sent now, "
        "0 already in the stream), 50 problems; 1,060 of 1,127 certificates evaluable "
        "(the paper's: 1,031 of 1,127)"
    ) in first, first
    assert "ours: our parser and content alignment on the replayed outputs" in first
    assert "paper: the pack's evidence/gpt-4o/final_report.json and bootstrap_ci.json" in first
    assert "dF1          ours minus the paper's F1" in first
    assert "B=10,000, seed 20260710" in first
    rows = _table_rows(first)
    assert len(rows) == len(COMPARED_ROWS)
    # Every row of the doc's table is printed, with the doc's counts on both sides.
    doc = DOC.read_text(encoding="utf-8")
    doc_row = re.compile(
        r"^\| ((?:A|self|string)[^|]*) \| [^|]*\| ([\d/]+) \| ([\d.]+) \| ([^|]+) \|$"
    )
    matched = [m for m in map(doc_row.match, doc.splitlines()) if m]
    assert sorted(m.group(1) for m in matched) == sorted(rows)
    for m in matched:
        printed = rows[m.group(1)]
        # ours tp/fp/fn/tn, the paper's F1 and (where published) its counts
        assert m.group(2) in printed and m.group(3) in printed, printed
        assert m.group(4).strip() == "-" or m.group(4).strip() in printed, printed
    # Equal F1s differ by nothing, not by "-0.000".
    assert "-0.000" not in first
    assert rows["self-consistency, full"].endswith(" 0")
    assert "0.721   " in rows["A' local, full"]  # a published F1 without a published CI

    # Run twice: nothing is sent again, and the table is the same.
    assert cli.main(argv) == 0
    second = capsys.readouterr().out
    assert "(0 sent now, 890 already in the stream)" in second
    assert _table_rows(second) == rows


def test_a_published_report_that_cannot_be_read_is_refused_before_the_sweep(
    pack_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pack = tmp_path / "pack"
    shutil.copytree(pack_dir, pack)
    final = pack / "evidence" / "gpt-4o" / "final_report.json"
    final.write_bytes(final.read_bytes()[:300])  # a copy cut short
    out = tmp_path / "repro"
    assert cli.main(["reproduce", str(pack), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cotaudit reproduce: error: {final}: not valid JSON"), err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.slow
def test_ctrl_c_during_the_replayed_sweep_exits_130_and_a_rerun_completes(
    pack_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "repro"
    command = [
        sys.executable,
        "-m",
        "cotaudit",
        "reproduce",
        str(pack_dir),
        "--out",
        str(out),
        "--quiet",
        "--no-figures",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    stream = out / "run" / "results.jsonl"
    child = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_a_terminal_sends_it,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.poll() is None:
            if stream.is_file() and stream.stat().st_size > 100_000:
                break
            time.sleep(0.01)  # polling a child process: no clock to inject
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 130, err
    assert "Traceback" not in err
    assert re.search(
        r"^cotaudit reproduce: interrupted (with [\d,]+ of 890 planned requests pending; "
        r"rerun the same command to resume|during the evaluation; the sweep is complete)",
        err,
        re.M,
    ), err
    assert not (out / "run" / "eval" / "report.json").exists()

    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "890 recorded outputs replayed through the engine" in again.stdout
    assert (out / "run" / "eval" / "report.md").is_file()


def test_the_rows_of_the_consistent_probe_carry_its_blind_spot(
    pack_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # report.md marks A consistent, full and its lower bound with † and says why; the table
    # reproduce prints beside the paper's showed them bare, ours 0.881 against the paper's
    # 0.806 with nothing telling the reader that A cannot see an entity premise used.
    out = tmp_path / "repro"
    argv = ["reproduce", str(pack_dir), "--out", str(out), "--quiet", "--no-figures"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    rows = _table_rows(printed)
    assert "A consistent, full †" in rows and "A consistent, lower bound †" in rows
    assert "A consistent, pred" in rows  # its gold has no entity dependency: no mark
    legend = " ".join(printed.split())
    assert "† A, the consistent probe alone: blind to entity-introduction premises" in legend
