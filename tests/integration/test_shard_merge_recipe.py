"""Shards merged into the whole run (docs/engine.md, "Sharding"): ``merge_shards`` writes a run
directory of the whole plan that ``cotaudit evaluate``, ``verify`` and ``view`` take as one run
and ``cotaudit run`` resumes as one; a shard missing, given twice, of another split or of
another config is refused naming it, nothing written; a shard's torn last line is left out,
where ``cat`` puts it in the middle of the merged stream. A shard's stream concatenated twice
is refused by ``cotaudit evaluate`` wherever the copy stands.

Real runs through the embedded local model, four problems, four shards."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from cotaudit.cli import main
from cotaudit.errors import UsageError
from runner.shard_merge import merge_shards

CONFIG = """\
run_dir = "whole"
cache_dir = "cache"
[task]
kind = "prontoqa"
source = "generate"
n = 4
seed = SEED
[[endpoints]]
name = "faithful"
provider = "local"
model = "faithful"
requests_per_minute = 600000
tokens_per_minute = 1e10
"""
EVALUATE = ["--quiet", "--no-figures", "--n-boot", "50"]
SHARDS = 4


def _run(config: Path, run_dir: Path, *extra: str) -> int:
    return main(["run", str(config), "--run-dir", str(run_dir), "--quiet", *extra])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``whole`` (the plan unsharded), ``s0`` .. ``s3`` (``--shard i/4``), ``half0``
    (``--shard 0/2``) and ``other0`` (shard 0/4 of another seed), swept once."""
    root = tmp_path_factory.mktemp("runs")
    config = root / "audit.toml"
    config.write_text(CONFIG.replace("SEED", "3"))
    other = root / "other.toml"
    other.write_text(CONFIG.replace("SEED", "5"))
    assert _run(config, root / "whole") == 0
    for i in range(SHARDS):
        assert _run(config, root / f"s{i}", "--shard", f"{i}/{SHARDS}") == 0
    assert _run(config, root / "half0", "--shard", "0/2") == 0
    assert _run(other, root / "other0", "--shard", f"0/{SHARDS}") == 0
    return root


def _manifest(run_dir: Path) -> dict[str, object]:
    data = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert isinstance(data, dict)
    return data


def _report(run_dir: Path) -> dict[str, object]:
    data = orjson.loads((run_dir / "eval" / "report.json").read_bytes())
    assert isinstance(data, dict)
    return data


def _shards(runs: Path, *order: int) -> list[Path]:
    return [runs / f"s{i}" for i in order]


def test_merged_shards_are_the_whole_run_to_evaluate_verify_view_and_resume(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    merged = tmp_path / "merged"
    # As a user merges them: `cotaudit merge OUT SHARD_DIR...`, in any order.
    assert main(["merge", str(merged), *map(str, _shards(runs, 2, 0, 3, 1))]) == 0
    said = capsys.readouterr().err
    assert "4 shards (0/4, 1/4, 2/4, 3/4)" in said and str(merged) in said
    assert "torn" not in said
    manifest, whole = _manifest(merged), _manifest(runs / "whole")
    assert manifest["shard"] is None and manifest["plan_hash"] == whole["plan_hash"]
    assert manifest["planned_requests"] == whole["planned_requests"]
    # In shard order, whatever order the directories were given in.
    stream = (merged / "results.jsonl").read_bytes()
    assert stream == b"".join((d / "results.jsonl").read_bytes() for d in _shards(runs, 0, 1, 2, 3))

    assert main(["evaluate", str(merged), *EVALUATE]) == 0
    assert main(["evaluate", str(runs / "whole"), *EVALUATE]) == 0
    report, alone = _report(merged), _report(runs / "whole")
    assert report["models"] == alone["models"]
    stream_part = report["stream"]
    assert isinstance(stream_part, dict)
    assert stream_part["planned_requests"] == stream_part["responses"] == whole["planned_requests"]
    assert stream_part["incomplete_groups"] == 0
    capsys.readouterr()
    assert main(["verify", str(merged)]) == 0
    assert "holds" in capsys.readouterr().out
    assert main(["view", str(merged), "--out", str(tmp_path / "view.html")]) == 0
    assert (tmp_path / "view.html").stat().st_size > 0

    # A run of the whole plan: resuming it finds every request done and sends nothing.
    capsys.readouterr()
    assert _run(runs / "audit.toml", merged) == 0
    assert "0 written" in capsys.readouterr().err
    assert (merged / "results.jsonl").read_bytes() == stream


@pytest.mark.parametrize(
    ("dirs", "said", "where"),
    [
        (["s0", "s1", "s3"], "shard 2/4 is missing", "s0"),
        (["s0", "s1", "s2", "s3", "s1"], "shard 1/4 is given twice", "s1"),
        (["s0", "s1", "s2", "s3", "half0"], "is shard 0/2", "half0"),
        (["s0", "s1", "s2", "whole"], "this run is the whole plan", "whole"),
        (["s1", "other0", "s2", "s3"], "the shards are of different runs", "other0"),
    ],
)
def test_a_merge_that_would_not_make_the_whole_run_is_refused_and_writes_nothing(
    runs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    dirs: list[str],
    said: str,
    where: str,
) -> None:
    out = tmp_path / "merged"
    with pytest.raises(UsageError) as caught:
        merge_shards(out, [runs / d for d in dirs])
    assert said in caught.value.what, caught.value.what
    assert where in (caught.value.where or "")
    assert not out.exists()
    # The command says the same, exit 2.
    assert main(["merge", str(out), *(str(runs / d) for d in dirs)]) == 2
    assert said in capsys.readouterr().err
    assert not out.exists()


def test_a_merge_into_a_run_directory_leaves_that_run_as_it_was(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "whole"
    shutil.copytree(runs / "whole", out)
    before = (out / "results.jsonl").read_bytes(), (out / "manifest.json").read_bytes()
    with pytest.raises(UsageError, match="holds a run already"):
        merge_shards(out, _shards(runs, 0, 1, 2, 3))
    assert ((out / "results.jsonl").read_bytes(), (out / "manifest.json").read_bytes()) == before


def test_a_shards_torn_last_line_is_left_out_where_cat_would_break_the_stream(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shards = tmp_path / "shards"
    for d in _shards(runs, 0, 1, 2, 3):
        shutil.copytree(d, shards / d.name)
    torn = b'{"kind": "response", "request_id": "faith'  # a shard killed mid-write
    with (shards / "s1" / "results.jsonl").open("ab") as f:
        f.write(torn)

    cat = tmp_path / "cat"
    cat.mkdir()
    (cat / "results.jsonl").write_bytes(
        b"".join((shards / f"s{i}" / "results.jsonl").read_bytes() for i in range(SHARDS))
    )
    capsys.readouterr()
    assert main(["evaluate", str(cat), *EVALUATE]) == 2
    assert "is not valid JSON" in capsys.readouterr().err

    merged = tmp_path / "merged"
    assert merge_shards(merged, sorted(shards.iterdir())).torn_bytes == len(torn)
    assert main(["evaluate", str(merged), *EVALUATE]) == 0
    assert main(["evaluate", str(runs / "whole"), *EVALUATE]) == 0
    assert _report(merged)["models"] == _report(runs / "whole")["models"]


@pytest.mark.parametrize("twice", ["first", "last"])
def test_a_shards_stream_concatenated_twice_is_refused_wherever_the_copy_stands(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], twice: str
) -> None:
    order = [0, 0, 1, 2, 3] if twice == "first" else [0, 1, 2, 3, 0]
    cat = tmp_path / "cat"
    cat.mkdir()
    (cat / "results.jsonl").write_bytes(
        b"".join((d / "results.jsonl").read_bytes() for d in _shards(runs, *order))
    )
    capsys.readouterr()
    assert main(["evaluate", str(cat), *EVALUATE]) == 2
    err = capsys.readouterr().err
    assert "repeat requests that had already succeeded" in err
    assert "holds a shard's stream twice" in err and '"Sharding"' in err
    assert not (cat / "eval").exists()


def test_a_merge_with_an_interrupted_shard_says_so_and_resumes_as_the_whole_plan(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shards = tmp_path / "shards"
    for d in _shards(runs, 0, 1, 2, 3):
        shutil.copytree(d, shards / d.name)
    stream = shards / "s2" / "results.jsonl"
    lines = stream.read_bytes().splitlines(keepends=True)
    stream.write_bytes(b"".join(lines[: len(lines) // 2]))  # killed halfway

    merged = tmp_path / "merged"
    merge_shards(merged, sorted(shards.iterdir()))
    assert main(["evaluate", str(merged), *EVALUATE]) == 0
    part = _report(merged)["stream"]
    assert isinstance(part, dict)
    planned = _manifest(runs / "whole")["planned_requests"]
    assert isinstance(planned, dict)
    assert part["planned_requests"] == planned
    assert part["responses"]["faithful"] < planned["faithful"]
    assert "Incomplete run" in (merged / "eval" / "report.md").read_text()

    capsys.readouterr()
    assert _run(runs / "audit.toml", merged) == 0
    assert " 0 written" not in capsys.readouterr().err
    assert main(["evaluate", str(merged), *EVALUATE]) == 0
    assert main(["evaluate", str(runs / "whole"), *EVALUATE]) == 0
    assert _report(merged)["models"] == _report(runs / "whole")["models"]
    part = _report(merged)["stream"]
    assert isinstance(part, dict)
    assert part["responses"] == planned


def test_shards_joined_by_cat_beside_one_shards_manifest_are_said_to_be_over_its_plan(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What a user does without `cotaudit merge`: the report must not read as shard 0's run.
    joined = tmp_path / "joined"
    joined.mkdir()
    (joined / "results.jsonl").write_bytes(
        b"".join((d / "results.jsonl").read_bytes() for d in _shards(runs, 0, 1, 2, 3))
    )
    shutil.copy(runs / "s0" / "manifest.json", joined / "manifest.json")
    capsys.readouterr()
    assert main(["evaluate", str(joined), *EVALUATE]) == 0
    assert "more responses than its manifest plans" in capsys.readouterr().err
    report_md = (joined / "eval" / "report.md").read_text(encoding="utf-8")
    said = "**Not this stream's manifest:** The stream holds more responses than its manifest"
    assert said in report_md
    assert "cotaudit merge OUT SHARD_DIR" in report_md


def test_a_merge_cut_off_between_its_two_files_is_finished_by_the_same_merge(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A crash between the stream's rename and the manifest's leaves OUT with the merged stream
    and no manifest: ``cotaudit run`` refuses it and says to rerun the merge, which recognises
    its own stream and writes both files; a stream that is not the merge's stays refused."""
    out = tmp_path / "merged"
    shards = _shards(runs, 0, 1, 2, 3)
    merge_shards(out, shards)
    whole = (out / "results.jsonl").read_bytes()
    (out / "manifest.json").unlink()  # as the cut-off merge leaves OUT

    config = runs / "audit.toml"
    assert _run(config, out) == 2
    assert "running the same merge again" in capsys.readouterr().err
    assert (out / "results.jsonl").read_bytes() == whole

    merged = merge_shards(out, shards)
    assert merged.records == whole.count(b"\n")
    assert (out / "results.jsonl").read_bytes() == whole
    assert _manifest(out)["shard"] is None
    assert _run(config, out) == 0  # the whole plan, resumed as one run: nothing left to send
    assert (out / "results.jsonl").read_bytes() == whole

    other = tmp_path / "other"
    merge_shards(other, shards)
    (other / "manifest.json").unlink()
    with (other / "results.jsonl").open("ab") as f:
        f.write(b"\n")  # one byte more than the merge writes: not this merge's stream
    with pytest.raises(UsageError, match=r"results\.jsonl exists: the directory holds a run"):
        merge_shards(other, shards)
    assert not (other / "manifest.json").exists()
