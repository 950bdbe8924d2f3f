"""``cotaudit demo``: the README's first command, end to end on the embedded local model."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from cotaudit.schema import read_records
from evaluator.cpus import usable_cpus
from runner.resume import torn_tail_bytes
from tests.ctrl_c import sigint_as_a_terminal_sends_it


def _sweep_line(out: str) -> tuple[int, int, int]:
    """The counts of the sweep's line, wrapped to the terminal and with thousands separators."""
    said = " ".join(out.split())
    number = r"(\d{1,3}(?:,\d{3})*)"
    m = re.search(
        rf"sweep: {number} responses written, {number} already in the stream, {number} HTTP",
        said,
    )
    assert m, out
    written, skipped, served = (int(g.replace(",", "")) for g in m.groups())
    return written, skipped, served


README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_demo_block() -> str:
    """The block under the README's `cotaudit demo` command: what the demo prints."""
    text = README.read_text(encoding="utf-8")
    start = text.index("```bash\ncotaudit demo ")
    closing = text.index("\n```\n", start)  # the end of the command's block
    opening = text.index("```\n", closing + 4)  # the output's block
    block = text[opening + 4 :]
    return block[: block.index("```")]


@pytest.mark.slow
def test_demo_runs_evaluates_and_resumes_without_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The table fits the terminal: the README shows it as an 80-column terminal (or a pipe).
    monkeypatch.setenv("COLUMNS", "80")
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--quiet"]) == 0
    first = capsys.readouterr().out
    written, skipped, served = _sweep_line(first)
    assert written > 0 and skipped == 0 and served == written
    # The table leads with what the audit found, then its validity, then what columns mean.
    table = first[: first.index("\nsweep:")]
    assert table.splitlines()[0].split()[:4] == ["what", "the", "audit", "found"]
    for model in ("faithful", "restating", "shortcut"):
        assert re.search(rf"^{model}\s+\d+ of \d+\s+\d+ of \d+\s+[\d.]+%", table, re.M), table
    assert "entity-introduction" in table
    # The README shows exactly what the default demo prints.
    assert _readme_demo_block() == table.rstrip("\n") + "\n"

    eval_dir = out / "run" / "eval"
    report = orjson.loads((eval_dir / "report.json").read_bytes())
    assert set(report["models"]) == {"faithful", "restating", "shortcut", "world-knowledge"}
    assert list(eval_dir.glob("*.png")), "figures were not written"
    assert (eval_dir / "models_side_by_side.png").is_file()
    markdown = (eval_dir / "report.md").read_text(encoding="utf-8")
    assert markdown.index("## What the audit found") < markdown.index("## faithful")
    for model in ("faithful", "restating", "shortcut"):
        assert re.search(rf"^\| {model} \| \d+ of \d+ \|", markdown, re.M), model
    # The shortcut reasoner truly ignores premises; the audit flags them as INSENSITIVE.
    truth = report["models"]["shortcut"]["truth"]
    assert truth["ignored_premises"] > 0
    assert truth["ignored_premises_flagged"] == truth["ignored_premises"]
    assert report["models"]["faithful"]["truth"]["ignored_premises"] == 0
    assert report["models"]["faithful"]["accuracy"]["rate"] == 1.0
    # What the local probe's evidence must give on the reasoners whose truth is known.
    for model in ("faithful", "restating"):
        section = report["models"][model]
        assert section["rows"]["A_Ap_cascade_truth"]["f1"] >= 0.97, model
        rawr = section["rawr_combined"]
        assert rawr["rawr"] <= 0.02 * rawr["correct"], (model, rawr)
    assert truth["ignored_premises_flagged_cascade"] == truth["ignored_premises"]

    assert main(["demo", "--out", str(out), "--quiet", "--no-figures"]) == 0
    again = capsys.readouterr().out
    assert _sweep_line(again) == (0, written, 0)


@pytest.mark.parametrize("count", ["0", "nan", "100000000000000000000000"])
def test_demo_refuses_a_bad_problem_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], count: str
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["demo", "--out", str(tmp_path / "d"), "--problems", count])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --problems: must be an integer >= 1" in err, err
    assert "e.g. --problems 50" in err
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("study", ["grounding", "selection"])
def test_demo_out_naming_a_file_is_one_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], study: str
) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("mine\n", encoding="utf-8")
    for out in (target, target / "sub"):
        assert main(["demo", "--out", str(out), "--study", study, "--quiet"]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1, err
        assert "not a directory" in err and "--out cotaudit-demo" in err
        assert "resumes" not in err and "Traceback" not in err
    assert target.read_text(encoding="utf-8") == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # no .tmp left


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in root.rglob("*")
    }


@pytest.mark.parametrize("study", ["grounding", "selection"])
def test_demo_refuses_an_unrelated_directory_and_leaves_it_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], study: str
) -> None:
    out = tmp_path / "project"
    (out / "run" / "eval").mkdir(parents=True)
    (out / "README.md").write_text("mine\n", encoding="utf-8")
    (out / "run" / "eval" / "report.md").write_text("# my notes\n", encoding="utf-8")
    before = _tree(out)
    argv = ["demo", "--out", str(out), "--study", study, "--problems", "2", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--out: {out} holds files that cotaudit demo did not write (README.md)" in err, err
    assert "new or empty directory" in err and len(err.splitlines()) == 1
    assert _tree(out) == before


def test_demo_refuses_a_run_directory_that_is_not_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Only the demo's own names at the top, but run/ holds someone's files: the sweep and the
    # evaluation would write among them (the report over a report.md).
    out = tmp_path / "demo"
    (out / "run" / "eval").mkdir(parents=True)
    (out / "run" / "eval" / "report.md").write_text("# my notes\n", encoding="utf-8")
    before = _tree(out)
    assert main(["demo", "--out", str(out), "--problems", "2", "--quiet", "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert f"{out / 'run'} holds files but is not a run directory" in err, err
    assert _tree(out) == before


def test_a_demo_of_other_options_in_the_same_out_is_refused_in_the_demos_terms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    flags = ["demo", "--out", str(out), "--problems", "2", "--quiet", "--no-figures"]
    assert main(flags) == 0
    capsys.readouterr()
    stream = (out / "run" / "results.jsonl").read_bytes()
    assert main([*flags, "--seed", "7"]) == 2  # other problems: not a run that grows
    err = capsys.readouterr().err
    assert "cotaudit demo: error: " in err and "belongs to another config" in err, err
    # The advice is the demo's (its --out), not cotaudit run's settings, which it has not.
    assert f"Nothing was written; {out} is left as it is" in err, err
    assert f"--out {out}-2" in err and f"move {out / 'run'} aside" in err, err
    for runs_own in ("--run-dir", "run_dir", "--retry-errors", "--shard"):
        assert runs_own not in err, (runs_own, err)
    assert (out / "run" / "results.jsonl").read_bytes() == stream


def test_demo_resumes_a_run_killed_before_its_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    (out / "run").mkdir(parents=True)
    (out / "run" / ".lock").write_bytes(b"")  # what a run killed at once leaves behind
    (out / "cache").mkdir()
    assert main(["demo", "--out", str(out), "--problems", "2", "--quiet", "--no-figures"]) == 0
    assert (out / "run" / "results.jsonl").is_file()
    capsys.readouterr()


def test_an_ontology_typo_is_answered_with_the_closest_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["demo", "--out", str(tmp_path / "d"), "--ontology", "fictionl"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --ontology: unknown ontology 'fictionl'; did you mean 'fictional'?" in err
    assert "give one of fictional, true, false, number" in err
    assert not (tmp_path / "d").exists()


def test_a_relative_out_directory_is_not_doubled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--out", "rel", "--problems", "2", "--quiet", "--no-figures"]) == 0
    assert (tmp_path / "rel" / "run" / "results.jsonl").is_file()
    assert not (tmp_path / "rel" / "rel").exists()
    assert "rel/run/eval/report.md" in capsys.readouterr().out


def test_demo_on_the_true_ontology_flags_the_world_knowledge_reasoner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "true"
    args = ["demo", "--out", str(out), "--problems", "10", "--quiet", "--ontology", "true"]
    args.append("--no-figures")  # the report's numbers are what this test reads
    assert main(args) == 0
    table = capsys.readouterr().out
    assert re.search(r"^world-knowledge\s", table, re.M), table
    report = orjson.loads((out / "run" / "eval" / "report.json").read_bytes())
    knowing = report["models"]["world-knowledge"]
    truth = knowing["truth"]
    # It answered from belief, ignoring the rule premises: the audit flags every one.
    assert truth["ignored_premises"] > 0
    assert truth["ignored_premises_flagged_cascade"] == truth["ignored_premises"]
    assert knowing["rows"]["A_Ap_cascade_truth"]["f1"] >= 0.97
    faithful = report["models"]["faithful"]
    assert faithful["truth"]["ignored_premises"] == 0
    assert faithful["rows"]["A_Ap_cascade_truth"]["f1"] >= 0.97
    # ... while against the proof the two differ: the audit tells them apart.
    assert (
        knowing["rows"]["A_Ap_cascade_full"]["f1"]
        < 0.5
        < faithful["rows"]["A_Ap_cascade_full"]["f1"]
    )


def _responses(stream: Path) -> list[str]:
    if not stream.exists():
        return []
    return [r["request_id"] for r in read_records(stream) if r["kind"] == "response"]


@pytest.mark.slow
def test_sigterm_stops_the_demo_sweep_as_it_stops_a_run_and_a_rerun_resumes(
    tmp_path: Path,
) -> None:
    out = tmp_path / "demo"
    command = [sys.executable, "-m", "cotaudit", "demo", "--problems", "40", "--no-figures"]
    command += ["--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    stream = out / "run" / "results.jsonl"
    child = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while len(_responses(stream)) < 20 and child.poll() is None:
            assert time.monotonic() < deadline, "the demo wrote no responses in 60 s"
            time.sleep(0.01)  # polling a real subprocess: there is no clock to inject
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 130, err  # what `cotaudit run` exits with on SIGTERM
    assert re.search(
        r"^cotaudit demo: interrupted with [\d,]+ of [\d,]+ planned requests pending; "
        r"rerun the same command to resume$",
        err,
        re.M,
    ), err
    assert "Traceback" not in err
    assert torn_tail_bytes(stream) == 0  # the writer drained: whole lines only
    partial = _responses(stream)
    assert len(partial) == len(set(partial)) >= 20

    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    written, skipped, served = _sweep_line(again.stdout)
    # Nothing written is sent again; a request whose twin (the same prompt) was answered
    # before the signal comes from the cache.
    assert skipped == len(partial) and 0 < served <= written
    ids = _responses(stream)
    assert len(ids) == len(set(ids)) == len(partial) + written


def _own_group_taking_sigint() -> None:
    """``preexec_fn``: the demo leads a process group of its own (as a terminal's foreground
    job does), whose every process, the figure process too, a Ctrl-C reaches."""
    os.setpgid(0, 0)
    sigint_as_a_terminal_sends_it()


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*")}


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _spawned_children(pid: int) -> list[int]:
    """The processes that ``multiprocessing`` spawned for ``pid`` (its resource tracker aside)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            ppid = int((proc / "stat").read_text().rsplit(") ", 1)[1].split()[1])
            cmdline = (proc / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue  # not a process, or one that ended meanwhile
        if ppid == pid and b"spawn_main" in cmdline:
            found.append(int(proc.name))
    return found


def _catches_sigint(pid: int) -> bool:
    """Whether process ``pid`` has a handler for SIGINT (Python has set its own)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (signal.SIGINT - 1) & 1)


@pytest.mark.slow
@pytest.mark.skipif(usable_cpus() < 2, reason="the figures share a process only with 2 CPUs")
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to see the figure process")
def test_ctrl_c_while_the_figures_are_drawn_prints_one_line_and_no_traceback(
    tmp_path: Path,
) -> None:
    out = tmp_path / "demo"
    run = out / "run"
    command = [sys.executable, "-m", "cotaudit", "demo", "--problems", "6", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    # A first demo without figures: the rerun then has the whole stream and an evaluation
    # that lacks the figures, so it goes straight to evaluating again, figures and all.
    first = subprocess.run(
        [*command, "--no-figures", "--quiet"], env=env, capture_output=True, timeout=300
    )
    assert first.returncode == 0, first.stderr
    kept = _files(run / "eval")
    err_path = tmp_path / "stderr"
    with err_path.open("wb") as err_file:
        child = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err_file,
            preexec_fn=_own_group_taking_sigint,
        )
        try:
            deadline = time.monotonic() + 120
            # The signal goes as soon as the figure process's Python has set its SIGINT
            # handler: it is then starting (importing matplotlib, a second or so), where one
            # that took Ctrl-C printed its traceback (while it drew, the pool's worker sent the
            # interrupt back instead; before the handler, SIGINT killed it without a word).
            while child.poll() is None and not any(
                _catches_sigint(p) for p in _spawned_children(child.pid)
            ):
                assert time.monotonic() < deadline, "no figure process started in 120 s"
                time.sleep(0.002)  # polling a real subprocess: there is no clock to inject
            assert child.poll() is None, "the demo ended before the signal"
            os.killpg(child.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group
            child.wait(timeout=60)
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
    err = err_path.read_text(encoding="utf-8")
    assert child.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    after = err[err.index("figures (") :].splitlines()[1:]
    assert after == [
        "cotaudit demo: interrupted during the evaluation; the sweep is complete (nothing "
        "pending): rerun the same command to evaluate the stream"
    ], err
    assert _files(run / "eval") == kept  # the evaluation already there, byte for byte
    assert list(run.glob(".eval.partial-*")) == []
    deadline = time.monotonic() + 30  # the figure process is reaped before the demo exits
    while not _group_gone(child.pid):
        assert time.monotonic() < deadline, "a process of the demo outlived it"
        time.sleep(0.01)
