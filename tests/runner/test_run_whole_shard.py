"""``--shard 0/1`` plans every request, as no ``--shard`` does: a run started with one resumes
with the other (``cotaudit run``, a real local server over loopback)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from cotaudit.schema import read_records
from runner.server.lifecycle import ServerThread


def _config(tmp_path: Path, base_url: str) -> Path:
    (tmp_path / "p.jsonl").write_bytes(
        b"".join(orjson.dumps({"id": f"q{i}", "prompt": f"Say {i}."}) + b"\n" for i in range(4))
    )
    path = tmp_path / "c.toml"
    path.write_text(
        'run_dir = "run"\ncache_dir = "cache"\n\n[task]\nkind = "prompts"\npath = "p.jsonl"\n'
        f'\n[[endpoints]]\nname = "ep"\nprovider = "openai"\nmodel = "echo"\n'
        f'base_url = "{base_url}"\nrequests_per_minute = 1e7\ntokens_per_minute = 1e10\n',
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("first", "then"),
    [(["--shard", "0/1"], []), ([], ["--shard", "0/1"])],
    ids=["0/1-then-none", "none-then-0/1"],
)
def test_a_run_with_shard_0_of_1_resumes_without_it_and_the_other_way_round(
    tmp_path: Path,
    local_server: ServerThread,
    capsys: pytest.CaptureFixture[str],
    first: list[str],
    then: list[str],
) -> None:
    config = _config(tmp_path, local_server.base_url)
    assert main(["run", str(config), "--quiet", "--no-preflight", "--limit", "2", *first]) == 0
    results = tmp_path / "run" / "results.jsonl"
    responses = [r["request_id"] for r in read_records(results) if r["kind"] == "response"]
    capsys.readouterr()
    # The resume grows the run (--limit raised): it is this run directory's plan, extended.
    grown = ["--limit", "4"]
    assert main(["run", str(config), "--quiet", "--no-preflight", *then, *grown]) == 0
    err = capsys.readouterr().err
    assert "4 planned, 2 written, 2 already done" in err
    after = [r["request_id"] for r in read_records(results) if r["kind"] == "response"]
    assert after[: len(responses)] == responses and len(after) == 2 * len(responses)
    manifest = orjson.loads((tmp_path / "run" / "manifest.json").read_bytes())
    assert manifest["shard"] is None
