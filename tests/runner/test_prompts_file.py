"""The ``prompts`` task: validated once before anything is written, parsed once per run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import orjson
import pytest

import runner.tasks.prompts_file as prompts_file
from cotaudit.errors import UsageError
from runner.config import config_from_mapping
from runner.engine import run_sweep
from runner.tasks.prompts_file import PromptsTask, from_config


def write_prompts(path: Path, lines: list[dict[str, object]], *, extra: bytes = b"") -> Path:
    with path.open("wb") as f:
        for line in lines:
            f.write(orjson.dumps(line) + b"\n")
        f.write(extra)
    return path


LINES: list[dict[str, object]] = [
    {"id": "a", "prompt": "one"},
    {"id": "b", "prompt": "two", "samples": 3, "temperature": 0.7},
    {"id": "c", "prompt": "three", "system": "be brief"},
]


def build(tmp_path: Path, **table: object) -> PromptsTask:
    return from_config(
        {"kind": "prompts", "path": "prompts.jsonl", **table},
        config_dir=tmp_path,
        where="sweep.toml",
    )


def test_small_file_keeps_the_validated_prompts_and_plans_the_same(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", LINES)
    task = build(tmp_path, system="default")
    assert task.parsed is not None and len(task.parsed) == 3
    lazy = replace(task, parsed=None)
    assert list(task.problems()) == list(lazy.problems())
    assert [p.problem_id for p in task.problems()] == ["a", "b", "c"]
    assert [(p.system, p.samples) for p in task.problems()] == [
        ("default", 1),
        ("default", 3),
        ("be brief", 1),
    ]


def test_kept_prompts_do_not_reread_the_file(tmp_path: Path) -> None:
    path = write_prompts(tmp_path / "prompts.jsonl", LINES)
    task = build(tmp_path)
    path.unlink()  # planning must not need the file again
    assert [p.problem_id for p in task.problems()] == ["a", "b", "c"]


def test_large_file_is_read_lazily(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prompts_file, "KEEP_PARSED_MAX_BYTES", 0)
    path = write_prompts(tmp_path / "prompts.jsonl", LINES)
    task = build(tmp_path)
    assert task.parsed is None
    assert [p.problem_id for p in task.problems()] == ["a", "b", "c"]
    path.unlink()
    with pytest.raises(FileNotFoundError):
        list(task.problems())


@pytest.mark.parametrize("keep_bytes", [0, 2**20], ids=["lazy", "kept"])
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (b'{"id": "x", "promt": "typo"}\n', "promt"),
        (b"{not json\n", "not valid JSON"),
        (b'{"id": "a", "prompt": "again"}\n', "duplicate id 'a'"),
        (b'{"id": "y", "prompt": "p", "samples": 0}\n', "samples"),
        # orjson reads up to 2**64 - 1 as an integer: past the 64-bit signed range
        (b'{"id": "y", "prompt": "p", "samples": 18446744073709551615}\n', r"\(64 bits\)"),
        (b'{"id": "y", "prompt": "p", "system": {"a": 1}}\n', "'system' must be a string, got an"),
        (b'{"id": "y", "prompt": "p", "temperature": [1]}\n', r"got the list \[1\]"),
        (b'{"id": ["y"], "prompt": "p"}\n', r'got the list \["y"\]'),
    ],
)
def test_bad_line_is_refused_naming_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_bytes: int, bad: bytes, message: str
) -> None:
    monkeypatch.setattr(prompts_file, "KEEP_PARSED_MAX_BYTES", keep_bytes)
    write_prompts(tmp_path / "prompts.jsonl", LINES, extra=bad)
    with pytest.raises(UsageError, match=message) as info:
        build(tmp_path)
    assert "prompts.jsonl:4" in str(info.value)


@pytest.mark.parametrize("keep_bytes", [0, 2**20], ids=["lazy", "kept"])
def test_a_duplicate_after_blank_lines_is_named_by_its_line_in_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_bytes: int
) -> None:
    # Blank lines are skipped, but they still count: the message names the file's line.
    monkeypatch.setattr(prompts_file, "KEEP_PARSED_MAX_BYTES", keep_bytes)
    (tmp_path / "prompts.jsonl").write_bytes(
        b'{"id": "a", "prompt": "p"}\n\n\n{"id": "b", "prompt": "q"}\n{"id": "a", "prompt": "r"}\n'
    )
    with pytest.raises(UsageError, match="duplicate id 'a'") as info:
        build(tmp_path)
    assert "prompts.jsonl:5" in str(info.value)


def test_empty_file_is_refused(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", [], extra=b"\n\n")
    with pytest.raises(UsageError, match="no prompts"):
        build(tmp_path)


async def test_bad_prompt_line_stops_the_run_before_anything_is_written(tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", LINES, extra=b'{"id": "z", "prompt": 5}\n')
    config = config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "cache",
            "task": {"kind": "prompts", "path": "prompts.jsonl"},
            "endpoints": [
                {
                    "name": "local",
                    "provider": "local",
                    "model": "echo",
                    "base_url": "http://127.0.0.1:9/v1",  # never contacted
                }
            ],
        },
        config_dir=tmp_path,
    )
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(UsageError, match="prompt"):
        await run_sweep(config, progress=False)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
