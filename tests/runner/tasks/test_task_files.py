"""A task file a researcher got wrong: another format than the source declares, a directory
where one file is read, an empty file or source, a prompts file for ProntoQA and the other
way round, fresh words that name nothing. Each is a ``UsageError`` (exit 2) that says what
the file is and which setting reads it, before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.cli import main
from cotaudit.errors import UsageError
from runner.tasks.registry import Task, build_task

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"
FILES = {
    "paper50": DATA / "grounding-audit-gpt4o" / "data" / "prontoqa_50" / "p001.json",
    "logiclm": DATA / "prontoqa-500" / "dev.json",
    "native": DATA / "prontoqa-native" / "1hop.json",
}
DIRS = {
    "paper50": DATA / "grounding-audit-gpt4o" / "data" / "prontoqa_50",
    "native": DATA / "prontoqa-native",
}


@pytest.fixture(autouse=True)
def _shared_data() -> None:
    if not all(path.exists() for path in (*FILES.values(), *DIRS.values())):
        pytest.skip(f"the ProntoQA files are not all under {DATA} (../shared/data)")


def _task(tmp_path: Path, **table: Any) -> Task:
    return build_task({"kind": "prontoqa", **table}, config_dir=tmp_path, where="sweep.toml")


def _prompts(tmp_path: Path, lines: int = 2) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_bytes(
        b"".join(orjson.dumps({"id": f"q{i}", "prompt": f"Say {i}."}) + b"\n" for i in range(lines))
    )
    return path


@pytest.mark.parametrize("declared", sorted(FILES))
@pytest.mark.parametrize("actual", sorted(FILES))
def test_a_file_of_another_source_is_named_with_the_source_that_reads_it(
    tmp_path: Path, declared: str, actual: str
) -> None:
    table = {"source": declared, "path": str(FILES[actual])}
    if declared == actual:
        assert next(iter(_task(tmp_path, **table).problems())) is not None
        return
    with pytest.raises(UsageError) as info:
        _task(tmp_path, **table)
    message = str(info.value)
    assert message.startswith(f"{FILES[actual]}: this is ")
    assert f'Set source = "{actual}" to read it' in message


@pytest.mark.parametrize(
    ("declared", "holds", "expected"),
    [
        ("logiclm", "paper50", 'source = "logiclm" reads one file, and this is a directory'),
        ("logiclm", "native", 'source = "logiclm" reads one file, and this is a directory'),
        ("paper50", "native", "no problem files p<number>.json in this directory"),
        ("native", "paper50", "no <N>hop.json files in this directory"),
    ],
)
def test_a_directory_the_source_cannot_read_says_which_source_reads_it(
    tmp_path: Path, declared: str, holds: str, expected: str
) -> None:
    # A directory given to logiclm was an IsADirectoryError: exit 1, as if the machine failed.
    with pytest.raises(UsageError) as info:
        _task(tmp_path, source=declared, path=str(DIRS[holds]))
    message = str(info.value)
    assert expected in message and f'set source = "{holds}" to read them' in message


@pytest.mark.parametrize("source", sorted(FILES))
def test_an_empty_file_is_called_empty(tmp_path: Path, source: str) -> None:
    (tmp_path / "empty.json").write_bytes(b"\n")
    with pytest.raises(UsageError, match=r"empty\.json: the file is empty\. Point path at"):
        _task(tmp_path, source=source, path="empty.json")


@pytest.mark.parametrize(("source", "text"), [("logiclm", "[]"), ("native", "{}")])
def test_a_source_without_problems_is_refused(tmp_path: Path, source: str, text: str) -> None:
    # It planned nothing and "succeeded": an empty plan, an empty run directory.
    (tmp_path / "none.json").write_text(text)
    with pytest.raises(UsageError, match=r"\[task\]\.path: no problems in .*none\.json"):
        _task(tmp_path, source=source, path="none.json")


@pytest.mark.parametrize("source", sorted(FILES))
@pytest.mark.parametrize("lines", [1, 3])
def test_a_prompts_file_given_to_prontoqa_is_named(tmp_path: Path, source: str, lines: int) -> None:
    path = _prompts(tmp_path, lines)
    with pytest.raises(
        UsageError, match=r'this is a prompts file .* Read it with kind = "prompts"'
    ):
        _task(tmp_path, source=source, path=str(path))


@pytest.mark.parametrize("source", sorted(FILES))
def test_a_prontoqa_file_given_as_prompts_is_named(tmp_path: Path, source: str) -> None:
    table = {"kind": "prompts", "path": str(FILES[source])}
    with pytest.raises(UsageError) as info:
        build_task(table, config_dir=tmp_path, where="sweep.toml")
    message = str(info.value)
    assert message.startswith(f"{FILES[source]}: this is ")
    assert "not a prompts file (JSON Lines: one object per line)" in message
    assert f'Read it with kind = "prontoqa" and source = "{source}"' in message


@pytest.mark.parametrize(
    "text", ['[{"id": "a", "prompt": "x"}]\n', '[\n  {"id": "a", "prompt": "x"}\n]\n']
)
def test_a_json_array_of_prompts_is_not_json_lines(tmp_path: Path, text: str) -> None:
    (tmp_path / "p.jsonl").write_text(text)
    with pytest.raises(UsageError, match="this is a single JSON document, not a prompts file"):
        build_task({"kind": "prompts", "path": "p.jsonl"}, config_dir=tmp_path, where="s.toml")


def test_a_bad_line_further_down_is_still_named_by_its_line(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text('{"id": "a", "prompt": "x"}\n[1]\n{"id": "b",\n')
    with pytest.raises(UsageError, match=r"p\.jsonl:2: not a JSON object"):
        build_task({"kind": "prompts", "path": "p.jsonl"}, config_dir=tmp_path, where="s.toml")


@pytest.mark.parametrize("where", ["", "data/prontoqa_50/p001.json"])
def test_fresh_words_from_a_folder_without_probe_files_is_refused(
    tmp_path: Path, where: str
) -> None:
    # The pack's root instead of its evidence/gpt-4o: the probes silently kept zq + name.
    evidence = DATA / "grounding-audit-gpt4o" / where
    with pytest.raises(UsageError, match=r"no probe files <problem_id>/probes/\*\.json"):
        _task(tmp_path, source="paper50", path=str(DIRS["paper50"]), fresh_words_from=str(evidence))


def test_fresh_words_for_a_problem_the_source_lacks_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"fresh_words names 'p19', which is not a problem of"):
        _task(
            tmp_path,
            source="paper50",
            path=str(DIRS["paper50"]),
            fresh_words={"p19": {"clempus": "frondus"}},
        )
    task = _task(
        tmp_path,
        source="paper50",
        path=str(DIRS["paper50"]),
        fresh_words={"p019": {"clempus": "frondus"}},
    )
    assert task is not None


@pytest.mark.parametrize("command", ["plan", "run"])
def test_the_commands_refuse_a_file_of_another_format_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        f'run_dir = "run"\ncache_dir = "cache"\n[task]\nkind = "prontoqa"\nsource = "paper50"\n'
        f'path = "{FILES["logiclm"]}"\n[[endpoints]]\nname = "e"\nprovider = "local"\n'
        'model = "faithful"\n',
        encoding="utf-8",
    )
    out = ["--out", str(tmp_path / "plan.jsonl")] if command == "plan" else ["--quiet"]
    assert main([command, str(config), *out]) == 2
    err = capsys.readouterr().err
    assert f"cotaudit {command}: error: {FILES['logiclm']}: this is Logic-LM's ProntoQA file" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]
