"""Commands that write one file never destroy a user's data (``cotaudit/output_file.py``).

``plan --out``, ``view --out``, ``rescore --json`` and ``selection --json`` refuse, exit 2,
naming the flag and leaving every byte as it was: a directory, a missing parent (not created),
a path under a file, a run's ``results.jsonl`` or ``manifest.json``, and any existing file that
is not their own output (a stream under another name, a config, an evaluation's report, the
other commands' outputs, a text). A rerun onto their own earlier output, or onto an empty
file, replaces it. The output directories of ``evaluate``, ``compare``, ``selection --out`` and
``import-evidence`` at or under a file exit 2 too.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cotaudit import output_file
from cotaudit.cli import main
from cotaudit.constants import OUTPUT_IDENTIFY_BYTES
from cotaudit.errors import UsageError
from cotaudit.output_file import check_output_file, identify, replacing, replacing_together
from tests.evaluator.test_rescore import certificate, write_pack

CONFIG = """\
run_dir = "run"
[task]
kind = "prontoqa"
source = "generate"
n = 2
[[endpoints]]
name = "local"
provider = "local"
model = "faithful"
"""
COUNTS = "deployment,a,b,c,d\nx,10,5,3,2\ny,4,6,2,8\n"


@dataclass(frozen=True)
class Inputs:
    """What the four commands read: an evaluated run, a pack, a counts CSV."""

    run: Path
    pack: Path
    counts: Path


@dataclass(frozen=True)
class Command:
    name: str
    flag: str
    kind: output_file.FileKind
    args: Callable[[Inputs], list[str]]

    def argv(self, inputs: Inputs, out: Path) -> list[str]:
        return [self.name, *self.args(inputs), self.flag, str(out)]


COMMANDS = (
    Command(
        "plan", "--out", output_file.PLAN, lambda i: ["--model", "local/faithful", "--limit", "1"]
    ),
    Command("view", "--out", output_file.VIEW_PAGE, lambda i: [str(i.run)]),
    Command(
        "rescore",
        "--json",
        output_file.RESCORE_REPORT,
        lambda i: [str(i.pack), "--model", "m", "--n-boot", "0"],
    ),
    Command(
        "selection",
        "--json",
        output_file.SELECTION_REPORT,
        lambda i: ["--counts", str(i.counts), "--n-boot", "0"],
    ),
)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Inputs, dict[str, Path]]:
    """The inputs, made once, and one real output of each command (to point the others at)."""
    root = tmp_path_factory.mktemp("output-file")
    code = main(["demo", "--out", str(root / "demo"), "--problems", "2", "--quiet", "--no-figures"])
    assert code == 0
    counts = root / "counts.csv"
    counts.write_text(COUNTS, encoding="utf-8")
    inputs = Inputs(root / "demo" / "run", write_pack(root / "pack", certificate()), counts)
    outputs = {}
    for command in COMMANDS:
        out = root / "outputs" / command.kind.example
        out.parent.mkdir(exist_ok=True)
        assert main(command.argv(inputs, out)) == 0, command.name
        outputs[command.name] = out
    return inputs, outputs


@pytest.fixture
def inputs(made: tuple[Inputs, dict[str, Path]], tmp_path: Path) -> Inputs:
    """A copy of the inputs of one test (a refused command must leave them as they were)."""
    shared = made[0]
    run = tmp_path / "in" / "run"
    shutil.copytree(shared.run, run)
    return Inputs(run, shared.pack, shared.counts)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` and the bytes of each file (``None`` for a directory)."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# A refused target: made in tmp_path from the inputs; returns the path given to the flag.
def a_directory(tmp: Path, i: Inputs) -> Path:
    write(tmp / "adir" / "kept.txt", b"kept\n")
    return tmp / "adir"


def a_missing_parent(tmp: Path, i: Inputs) -> Path:
    return tmp / "missing" / "deeper" / "out"


def under_a_file(tmp: Path, i: Inputs) -> Path:
    return write(tmp / "afile", b"a file\n") / "out"


def the_runs_stream(tmp: Path, i: Inputs) -> Path:
    return i.run / "results.jsonl"


def the_runs_manifest(tmp: Path, i: Inputs) -> Path:
    return i.run / "manifest.json"


def an_empty_stream_of_a_run(tmp: Path, i: Inputs) -> Path:
    (i.run / "results.jsonl").write_bytes(b"")
    return i.run / "results.jsonl"


def a_stream_not_yet_written(tmp: Path, i: Inputs) -> Path:
    (i.run / "results.jsonl").unlink()  # the manifest alone makes it a run directory
    return i.run / "results.jsonl"


def a_stream_under_another_name(tmp: Path, i: Inputs) -> Path:
    return write(tmp / "backup.jsonl", (i.run / "results.jsonl").read_bytes())


def a_config(tmp: Path, i: Inputs) -> Path:
    return write(tmp / "audit.toml", CONFIG.encode())


def an_evaluation_report(tmp: Path, i: Inputs) -> Path:
    return i.run / "eval" / "report.json"


def a_text(tmp: Path, i: Inputs) -> Path:
    return write(tmp / "notes.md", b"# my notes\n")


REFUSED = (
    (a_directory, "is a directory"),
    (a_missing_parent, "does not exist"),
    (under_a_file, "which is a file, not a directory"),
    (the_runs_stream, "is the stream of the run directory"),
    (the_runs_manifest, "is the manifest of the run directory"),
    (an_empty_stream_of_a_run, "is the stream of the run directory"),
    (a_stream_not_yet_written, "is the stream of the run directory"),
    (a_stream_under_another_name, "is a run's stream (results.jsonl), not"),
    (a_config, "is a sweep config (TOML), not"),
    (an_evaluation_report, "is an evaluation's report (report.json of cotaudit evaluate), not"),
    (a_text, "exists and is not"),
)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
@pytest.mark.parametrize(("target", "message"), REFUSED, ids=[t.__name__ for t, _ in REFUSED])
def test_a_refused_output_exits_2_naming_the_flag_and_leaves_every_byte(
    command: Command,
    target: Callable[[Path, Inputs], Path],
    message: str,
    inputs: Inputs,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = target(tmp_path / "work", inputs)
    before = snapshot(tmp_path)
    assert main(command.argv(inputs, out)) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"cotaudit {command.name}: error: {command.flag}: ")
    assert message in captured.err and captured.err.count("\n") == 1
    assert captured.out == ""  # refused before any work: not even the table
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
@pytest.mark.parametrize("other", COMMANDS, ids=lambda c: f"onto-{c.name}")
def test_a_command_writes_over_its_own_output_and_refuses_the_others(
    command: Command,
    other: Command,
    made: tuple[Inputs, dict[str, Path]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    inputs, outputs = made
    out = tmp_path / "earlier"
    shutil.copy(outputs[other.name], out)
    earlier, inode = out.read_bytes(), out.stat().st_ino
    code = main(command.argv(inputs, out))
    err = capsys.readouterr().err
    if command is other:  # a rerun: the file is replaced by a new one, and no temporary left
        assert code == 0, err
        assert identify(out.read_bytes(), whole=True) == command.kind
        assert out.stat().st_ino != inode
    else:
        assert code == 2
        assert f"{command.flag}: {out} is {other.kind.description}, not " in err
        assert out.read_bytes() == earlier
    assert [p.name for p in tmp_path.iterdir()] == ["earlier"]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_an_empty_file_and_a_new_file_are_written(
    command: Command, inputs: Inputs, tmp_path: Path
) -> None:
    empty = write(tmp_path / "empty", b"")
    assert main(command.argv(inputs, empty)) == 0
    assert identify(empty.read_bytes(), whole=True) == command.kind
    new = tmp_path / command.kind.example
    assert main(command.argv(inputs, new)) == 0
    assert main(command.argv(inputs, new)) == 0  # and again: a rerun
    assert identify(new.read_bytes(), whole=True) == command.kind
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["empty", new.name, "in"])


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(lambda i, out: ["evaluate", str(i.run), "--out", str(out)], id="evaluate"),
        pytest.param(
            lambda i, out: ["compare", str(i.run), str(i.run), "--out", str(out)], id="compare"
        ),
        pytest.param(
            lambda i, out: ["selection", "--counts", str(i.counts), "--out", str(out)],
            id="selection",
        ),
        pytest.param(
            lambda i, out: ["import-evidence", str(i.pack), "--model", "m", "--out", str(out)],
            id="import-evidence",
        ),
    ],
)
def test_an_output_directory_under_a_file_exits_2(
    args: Callable[[Inputs, Path], list[str]],
    inputs: Inputs,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    afile = write(tmp_path / "afile", b"a file\n")
    before = snapshot(tmp_path)
    for out in (afile / "eval", afile):
        assert main(args(inputs, out)) == 2
        err = capsys.readouterr().err
        assert f"error: --out: {out} is " in err and "not a directory" in err
        assert "Traceback" not in err and err.count("\n") == 1
    assert snapshot(tmp_path) == before


def test_output_directories_are_still_created_with_their_parents(
    inputs: Inputs, tmp_path: Path
) -> None:
    out = tmp_path / "new" / "deeper"
    assert (
        main(["selection", "--counts", str(inputs.counts), "--out", str(out), "--no-figures"]) == 0
    )
    assert sorted(p.name for p in out.iterdir()) == ["selection.json", "selection.md"]


def test_selection_refuses_a_foreign_selection_json_in_its_directory(
    inputs: Inputs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    foreign = write(tmp_path / "out" / "selection.json", b'{"mine": true}\n')
    args = ["selection", "--counts", str(inputs.counts), "--out", str(foreign.parent)]
    assert main(args) == 2
    assert f"--out: {foreign} exists and is not a report written by" in capsys.readouterr().err
    assert foreign.read_bytes() == b'{"mine": true}\n'
    assert [p.name for p in foreign.parent.iterdir()] == ["selection.json"]


def test_compare_outputs_are_its_own_kind_and_the_other_commands_refuse_them(
    made: tuple[Inputs, dict[str, Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inputs = made[0]
    out = tmp_path / "cmp"
    args = ["compare", str(inputs.run), str(inputs.run), "--n-boot", "0", "--out", str(out)]
    assert main(args) == 0
    kinds = {
        "comparison.json": output_file.COMPARISON_JSON,
        "comparison.md": output_file.COMPARISON_PAGE,
    }
    for name, kind in kinds.items():
        assert identify((out / name).read_bytes(), whole=True) == kind, name
    capsys.readouterr()
    for command in COMMANDS:
        for name, kind in kinds.items():
            target = tmp_path / f"{command.name}-{name}"
            shutil.copy(out / name, target)
            earlier = target.read_bytes()
            assert main(command.argv(inputs, target)) == 2, (command.name, name)
            err = capsys.readouterr().err
            assert f"{command.flag}: {target} is {kind.description}, not " in err
            assert target.read_bytes() == earlier


def test_a_default_path_is_named_by_what_the_user_gave_not_by_the_flag(tmp_path: Path) -> None:
    afile = write(tmp_path / "run" / "eval", b"a file\n")
    with pytest.raises(UsageError) as caught:
        output_file.check_output_dir(afile, flag="--out", holds="x", default_of="RUN_DIR run")
    assert caught.value.where is None
    assert "(the default output for RUN_DIR run; --out chooses another)" in caught.value.what
    foreign = write(tmp_path / "out" / "selection.json", b"# notes\n")
    with pytest.raises(UsageError) as caught:
        check_output_file(
            foreign, output_file.SELECTION_REPORT, flag="--out", in_dir=True, default_of="RUN_DIR r"
        )
    assert caught.value.where is None and caught.value.fix is not None
    assert "another directory" in caught.value.fix and "e.g." not in caught.value.fix
    with pytest.raises(UsageError) as caught:
        check_output_file(foreign, output_file.SELECTION_REPORT, flag="--json")
    assert caught.value.where == "--json"  # a typed flag is named as before


# The pieces, one function at a time.


def test_identify_names_every_file_of_a_run(made: tuple[Inputs, dict[str, Path]]) -> None:
    run = made[0].run
    expected = {
        "results.jsonl": output_file.STREAM,
        "manifest.json": output_file.RUN_MANIFEST,
        "eval/report.json": output_file.EVALUATION_REPORT,
        "eval/evaluation.json": output_file.EVALUATION_MANIFEST,
        "eval/certificates.jsonl": output_file.CERTIFICATES,
    }
    for name, kind in expected.items():
        assert identify((run / name).read_bytes(), whole=True) == kind, name


def test_identify_reads_a_plan_and_a_stream_from_their_first_lines(
    made: tuple[Inputs, dict[str, Path]],
) -> None:
    plan = made[1]["plan"].read_bytes()
    first_request = plan.index(b"\n", plan.index(b'"kind":"request"'))
    cut = plan[: first_request + 100]  # mid-line, as the read limit leaves a long plan
    assert identify(cut, whole=False) == output_file.PLAN
    stream = (made[0].run / "results.jsonl").read_bytes()
    assert identify(stream + b'{"kind": "resp', whole=True) == output_file.STREAM  # torn tail
    assert identify(plan.replace(b'"kind":"request"', b'"kind":"response"'), whole=True) == (
        output_file.STREAM
    )
    assert identify(b"<!DOCTYPE html><p>a page</p>", whole=True) == output_file.HTML_PAGE
    assert identify(b"deployment,a,b,c,d\n", whole=True) is None
    assert identify(b'{"models": {"m": {}}}', whole=True) is None  # no published_comparison
    assert identify(b"\xff\xfe binary", whole=True) is None


def test_a_file_larger_than_the_read_limit_is_judged_by_its_head(tmp_path: Path) -> None:
    big = write(
        tmp_path / "big.json", b'{"deployments": {}, "pooled": {}' + b" " * OUTPUT_IDENTIFY_BYTES
    )
    with pytest.raises(UsageError, match="exists and is not a report"):
        check_output_file(big, output_file.SELECTION_REPORT, flag="--json")


def test_a_non_regular_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="is not a regular file"):
        check_output_file(fifo, output_file.PLAN, flag="--out")


def test_replacing_leaves_the_old_file_whole_when_the_write_fails(tmp_path: Path) -> None:
    path = write(tmp_path / "plan.jsonl", b"the earlier plan\n")
    user_tmp = write(tmp_path / "plan.jsonl.tmp", b"a user's file of that name\n")
    with pytest.raises(OSError, match="No space"), replacing(path) as handle:
        handle.write(b"half of the new")
        raise OSError(28, "No space left on device")
    assert path.read_bytes() == b"the earlier plan\n"
    assert user_tmp.read_bytes() == b"a user's file of that name\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.jsonl", "plan.jsonl.tmp"]
    with replacing(path) as handle:
        handle.write(b"the new plan\n")
    assert path.read_bytes() == b"the new plan\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.jsonl", "plan.jsonl.tmp"]


def test_a_plan_that_fails_mid_write_leaves_the_earlier_plan(
    made: tuple[Inputs, dict[str, Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.commands import plan as plan_module
    from runner.commands.one_line import config_for_model

    out = tmp_path / "plan.jsonl"
    shutil.copy(made[1]["plan"], out)
    earlier = out.read_bytes()
    real = plan_module.iter_plan

    def failing(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for n, item in enumerate(real(*args, **kwargs)):
            if n == 3:
                raise OSError(28, "No space left on device")
            yield item

    monkeypatch.setattr(plan_module, "iter_plan", failing)
    config = config_for_model("local/faithful", cwd=tmp_path)
    with pytest.raises(OSError):
        plan_module.write_plan(config, out)
    assert out.read_bytes() == earlier
    assert [p.name for p in tmp_path.iterdir()] == ["plan.jsonl"]


def test_replacing_together_undoes_a_rename_when_a_later_one_fails(tmp_path: Path) -> None:
    first, second = tmp_path / "comparison.json", tmp_path / "comparison.md"
    first.write_bytes(b"earlier json\n")
    second.mkdir()  # a directory put where the page goes, after the paths were checked
    (second / "notes.txt").write_bytes(b"a user's notes\n")
    with pytest.raises(OSError), replacing_together(first, second) as (data, page):
        data.write(b"later json\n")
        page.write(b"later page\n")
    assert first.read_bytes() == b"earlier json\n"
    assert (second / "notes.txt").read_bytes() == b"a user's notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["comparison.json", "comparison.md"]
    # A path that did not exist before is removed again, not left holding the new file.
    first.unlink()
    with pytest.raises(OSError), replacing_together(first, second) as (data, page):
        data.write(b"later json\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["comparison.md"]
    second.rename(tmp_path / "moved")
    with replacing_together(first, second) as (data, page):
        data.write(b"later json\n")
        page.write(b"later page\n")
    assert (first.read_bytes(), second.read_bytes()) == (b"later json\n", b"later page\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "comparison.json",
        "comparison.md",
        "moved",
    ]
