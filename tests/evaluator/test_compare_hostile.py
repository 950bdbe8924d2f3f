"""``cotaudit compare`` on what an expert plausibly hands it by mistake: ``--out`` into an
evaluation (refused before anything is computed, the evaluation left byte for byte and still
verifiable), an evaluation whose files are not one (certificates cut short, a report
edited), a file given for a run, and an ``--out`` holding another program's comparison.json or
comparison.md: one message, exit 2, no traceback, no differences printed from part of the data,
nothing written over. Its own comparison is replaced in one step: a disk that fills mid-write
leaves the earlier files whole."""

from __future__ import annotations

import os
import resource
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from cotaudit.errors import UsageError
from evaluator.run_files import headline_of


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


def _refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["compare", *args, "--n-boot", "0"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert captured.err.count("\n") == 1
    return captured.err


def test_a_file_given_for_a_run_is_named_as_a_file_with_the_directory_to_give(
    evaluated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # It exists: "no such run directory" sent the user looking for a typo.
    stream = evaluated / "results.jsonl"
    err = _refused(capsys, str(evaluated), str(stream))
    assert f"{stream}: a file, not a run directory" in err
    assert f"Give cotaudit compare the directory holding it: {evaluated}." in err
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n", encoding="utf-8")
    err = _refused(capsys, str(evaluated), str(notes))
    assert f"{notes}: a file, not a run directory" in err and "no such" not in err


def test_a_folder_holding_evaluated_runs_names_them(
    evaluated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A demo's --out holds its run in OUT/run: "not a run directory" alone left the user to
    # guess where the run was.
    out = tmp_path / "demo-out"
    _copy(evaluated, out / "run")
    (out / "cache").mkdir()
    err = _refused(capsys, str(out), str(evaluated))
    assert f"{out}: not a run directory" in err
    assert f"It holds evaluated run: give it, as in `cotaudit compare {out / 'run'}`." in err
    assert main(["view", str(out), "--out", str(tmp_path / "v.html")]) == 2
    assert f"as in `cotaudit view {out / 'run'}`" in capsys.readouterr().err


def test_a_missing_stream_is_explained_for_compare_not_for_the_viewer(
    evaluated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An eval directory copied away from its run, whose report names a stream since moved.
    eval_dir = tmp_path / "eval-only" / "eval"
    shutil.copytree(evaluated / "eval", eval_dir)
    report = orjson.loads((eval_dir / "report.json").read_bytes())
    report["source"] = str(tmp_path / "moved" / "results.jsonl")
    (eval_dir / "report.json").write_bytes(orjson.dumps(report))
    err = _refused(capsys, str(eval_dir), str(eval_dir))
    assert "no results.jsonl for this evaluation (compare checks" in err
    assert "viewer" not in err and "view RUN" not in err
    assert "give cotaudit compare the directory holding results.jsonl and eval/" in err


def test_a_run_compared_with_itself_is_labelled_by_its_path(
    evaluated: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["compare", str(evaluated), str(evaluated), "--n-boot", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    resolved = evaluated.resolve()
    said = f"runs: A = {resolved} #1; B = {resolved} #2"  # not "//tmp/..."
    # On one line where it fits the terminal, else one run a line.
    one_a_line = ["runs:", f"  A = {resolved} #1", f"  B = {resolved} #2"]
    expected = [said] if len(said) <= 80 else one_a_line
    assert lines[: len(expected)] == expected


def test_a_model_section_that_is_no_object_is_refused_by_headline_of(tmp_path: Path) -> None:
    report = tmp_path / "run" / "eval" / "report.json"
    for section in (5, [1, 2], None):
        with pytest.raises(UsageError, match="a model's section is not an object"):
            headline_of(section, report)


@pytest.mark.parametrize(
    ("name", "foreign"),
    [("comparison.json", b'{"mine": true}\n'), ("comparison.md", b"# my notes\n")],
)
def test_out_refuses_another_programs_comparison_file(
    evaluated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, foreign: bytes
) -> None:
    # compare used to write over any comparison.json / comparison.md in --out.
    out = tmp_path / "cmp"
    out.mkdir()
    (out / name).write_bytes(foreign)
    err = _refused(capsys, str(evaluated), str(evaluated), "--out", str(out))
    assert err.startswith(f"cotaudit compare: error: --out: {out / name} exists and is not ")
    assert "written by cotaudit compare; it is left as it is" in err
    assert [p.name for p in out.iterdir()] == [name] and (out / name).read_bytes() == foreign


def test_out_replaces_its_own_comparison_in_one_step(
    evaluated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cmp"
    args = ["compare", str(evaluated), str(evaluated), "--out", str(out)]
    assert main([*args, "--n-boot", "0"]) == 0
    earlier = _files(out)
    inodes = {p.name: p.stat().st_ino for p in out.iterdir()}
    # A disk that fills mid-write: writes past the size limit fail (EFBIG), as on a full disk.
    limit = min(len(data) for data in earlier.values()) // 2
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        code = main([*args, "--n-boot", "20"])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert code == 1
    assert _files(out) == earlier  # both files whole, and no temporary file left
    capsys.readouterr()
    assert main([*args, "--n-boot", "20"]) == 0  # a rerun replaces its own files
    assert all(os.stat(out / name).st_ino != inode for name, inode in inodes.items())
    assert orjson.loads((out / "comparison.json").read_bytes())["bootstrap"]["n_boot"] == 20


def test_the_pair_is_kept_whole_when_the_page_cannot_be_written(
    evaluated: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The two files were written one after the other: a page that failed to render or to be
    # written left a new comparison.json beside the earlier comparison.md, disagreeing.
    from evaluator.commands import compare as compare_command

    out = tmp_path / "cmp"
    args = ["compare", str(evaluated), str(evaluated), "--out", str(out)]
    assert main([*args, "--n-boot", "0"]) == 0
    earlier = _files(out)

    def failing(_result: object) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(compare_command, "render_markdown", failing)
    capsys.readouterr()
    assert main([*args, "--n-boot", "20"]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert _files(out) == earlier  # both earlier files, and no temporary file left


def test_a_page_without_resamples_claims_no_intervals(evaluated: Path, tmp_path: Path) -> None:
    # comparison.md said "Bootstrap: B = 0, ..., 95% percentile intervals" over differences
    # that have none (the terminal said "no intervals: --n-boot 0").
    out = tmp_path / "cmp"
    assert (
        main(["compare", str(evaluated), str(evaluated), "--n-boot", "0", "--out", str(out)]) == 0
    )
    page = (out / "comparison.md").read_text(encoding="utf-8")
    assert "No intervals on the differences: --n-boot 0." in page
    assert "B = 0" not in page and "percentile intervals" not in page
    assert (
        main(["compare", str(evaluated), str(evaluated), "--n-boot", "20", "--out", str(out)]) == 0
    )
    page = (out / "comparison.md").read_text(encoding="utf-8")
    assert "Bootstrap: B = 20, seed " in page and "No intervals" not in page


def test_a_stream_cut_short_is_named_not_called_other_problems(
    evaluated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The stream lost its last problems' records after the evaluation: compare said the runs
    # "audit different problem sets: ... name different problems (other premises, question or
    # proof)", sending the user to check their task configs, which were the same.
    other = _copy(evaluated, tmp_path / "cut")
    results = other / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    problems = [k for k, line in enumerate(lines) if b'"kind":"problem"' in line]
    assert len(problems) == 3
    results.write_bytes(b"".join(lines[: problems[-1]]))
    code = main(["compare", str(evaluated), str(other), "--n-boot", "0"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert f"{results}: 1 of the 3 problems the report audited" in captured.err
    assert "changed since the evaluation" in captured.err
    assert "different problem" not in captured.err
    assert f"cotaudit verify {other}" in captured.err
