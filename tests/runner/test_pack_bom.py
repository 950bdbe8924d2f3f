"""An evidence pack whose JSON files start with a UTF-8 byte order mark (a Windows editor
writes one on saving) reads as the same pack: ``import-evidence`` imports the same records
and ``serve --replay`` answers the same recordings, and ``rescore`` rescores it alike
(``cotaudit.domain.pack_layout.pack_json``)."""

from __future__ import annotations

import codecs
import shutil
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.cli import main
from evaluator.source import iter_records
from runner.evidence_pack import import_evidence
from runner.server import replay
from runner.server.lifecycle import ServerThread
from runner.server.replay import ReplayIndex, ReplayModel, check_source, configure
from runner.server.settings import ServerConfig
from tests.runner.server.helpers import openai_body
from tests.runner.test_evidence_pack import PROMPT, TEXT, make_pack


@pytest.fixture(autouse=True)
def _no_replay_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(replay.ENV_VAR, raising=False)
    configure([])
    yield
    configure([])


def _with_boms(pack: Path) -> Path:
    """``pack`` with a byte order mark written before every JSON file's first byte."""
    files = sorted(pack.rglob("*.json"))
    assert len(files) > 8
    for path in files:
        path.write_bytes(codecs.BOM_UTF8 + path.read_bytes())
    return pack


def _records(stream: Path) -> list[dict[str, Any]]:
    # A summary's source_sha256 is the hash of its file's bytes, the mark included.
    return [{k: v for k, v in r.items() if k != "source_sha256"} for r in iter_records(stream)]


def test_import_evidence_reads_a_pack_saved_with_byte_order_marks_as_the_same_pack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = make_pack(tmp_path / "plain")
    marked = _with_boms(make_pack(tmp_path / "marked"))
    import_evidence(plain, "gpt-4o", tmp_path / "plain-run")
    argv = ["import-evidence", str(marked), "--model", "gpt-4o", "--out", str(tmp_path / "run")]
    assert main(argv) == 0, capsys.readouterr().err
    imported = _records(tmp_path / "run" / "results.jsonl")
    assert imported == _records(tmp_path / "plain-run" / "results.jsonl")
    assert [r["kind"] for r in imported] == ["problem"] + ["response"] * 7 + ["sample_summary"]
    assert imported[1]["text"] == TEXT


def test_the_replay_server_answers_from_a_pack_saved_with_byte_order_marks(
    tmp_path: Path, make_server: Callable[[ServerConfig], ServerThread]
) -> None:
    pack = _with_boms(make_pack(tmp_path / "pack"))
    original = pack / "evidence" / "gpt-4o" / "p001" / "original_cot.json"
    check_source(original, where="--replay")  # one output given as the source
    assert len(ReplayIndex([pack])) == 7
    configure([original])
    assert ReplayModel("replay").complete([{"role": "user", "content": PROMPT}], {}).text == TEXT
    configure([])

    server = make_server(ServerConfig(replay=(pack,)))
    body = openai_body("replay:model=gpt-4o", PROMPT, temperature=0, condition="original")
    request = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=orjson.dumps(body),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer = orjson.loads(response.read())
    assert answer["choices"][0]["message"]["content"] == TEXT


def test_rescore_reads_the_real_pack_saved_with_byte_order_marks_as_the_same_pack(
    pack_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The authors' certificates, reports and problem files (the evaluator's readers of a pack)
    skip the mark as the runner's do."""
    marked = tmp_path / "marked"
    shutil.copytree(pack_dir, marked)
    _with_boms(marked)
    argv = ["rescore", "--n-boot", "100"]
    assert main([*argv, str(pack_dir)]) == 0
    plain = capsys.readouterr().out.replace(str(pack_dir), "PACK")
    assert main([*argv, str(marked)]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.replace(str(marked), "PACK") == plain
