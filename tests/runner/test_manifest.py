"""A run directory belongs to one plan hash; a different config is refused by name."""

from __future__ import annotations

import errno
from pathlib import Path

import orjson
import pytest

from cotaudit.errors import UsageError
from runner.config import SweepConfig, config_from_mapping
from runner.manifest import Shard, check_manifest, record_planned_requests, write_manifest
from tests.stream_records import response_record


def _config(tmp_path: Path, **endpoint: object) -> SweepConfig:
    (tmp_path / "p.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
    ep = {"name": "e", "provider": "local", "model": "echo", **endpoint}
    return config_from_mapping(
        {
            "run_dir": "run",
            "cache_dir": "c",
            "task": {"kind": "prompts", "path": "p.jsonl"},
            "endpoints": [ep],
        },
        config_dir=tmp_path,
    )


def test_fresh_dir_has_no_manifest_then_resume_is_accepted(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert check_manifest(tmp_path / "run", config, None) is None
    first = write_manifest(tmp_path / "run", config, None, None)
    again = check_manifest(tmp_path / "run", config, None)
    assert again is not None and again["plan_hash"] == first["plan_hash"]
    faster = _config(tmp_path, requests_per_minute=5, max_concurrency="auto", outage_budget_s=9)
    assert check_manifest(tmp_path / "run", faster, None) is not None
    second = write_manifest(tmp_path / "run", faster, None, again)
    assert second["created_at"] == first["created_at"]


def test_a_manifest_write_that_fails_leaves_no_temp_file_and_the_old_manifest_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    config = _config(tmp_path)
    write_manifest(run_dir, config, None, None)
    old = (run_dir / "manifest.json").read_bytes()
    import cotaudit.output_file

    def disk_fills(fd: int) -> None:
        # The new manifest's bytes were written but cannot all reach the disk.
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cotaudit.output_file.os, "fsync", disk_fills)
    faster = _config(tmp_path, requests_per_minute=5)  # a manifest with something new to write
    with pytest.raises(OSError, match="No space left on device"):
        write_manifest(run_dir, faster, None, orjson.loads(old))
    assert sorted(p.name for p in run_dir.iterdir()) == ["manifest.json"]
    assert (run_dir / "manifest.json").read_bytes() == old


def _stream_of(config: SweepConfig) -> None:
    """A stream holding every planned request of ``config`` (as answered records would)."""
    from runner.engine import iter_plan

    lines = []
    for ep in config.endpoints:
        for _, spec in iter_plan(config.build_task(), ep.identity()):
            lines.append(orjson.dumps(response_record(**{**spec.to_record(), "kind": "response"})))
    (config.run_dir / "results.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def test_changed_output_config_is_refused_naming_the_difference(tmp_path: Path) -> None:
    config = _config(tmp_path)
    write_manifest(tmp_path / "run", config, None, None)
    _stream_of(config)
    other = _config(tmp_path, model="faithful")
    with pytest.raises(UsageError) as info:
        check_manifest(tmp_path / "run", other, None)
    message = str(info.value)
    assert 'endpoints[e].model: "echo" -> "faithful"' in message
    assert "request e/a/prompt/-/0 would be sent differently" in message
    assert "Start a new run directory" in message and "cache" in message
    assert "None" not in message and "[{" not in message  # no Python reprs


def test_a_record_that_breaks_the_schema_is_named_before_the_plans_are_compared(
    tmp_path: Path,
) -> None:
    # Without a cache_key, any changed config would read as "sent differently"; the line
    # itself is what a user must repair, and a resume would refuse it anyway.
    config = _config(tmp_path)
    write_manifest(tmp_path / "run", config, None, None)
    _stream_of(config)
    stream = tmp_path / "run" / "results.jsonl"
    record = orjson.loads(stream.read_bytes())
    del record["cache_key"]
    stream.write_bytes(orjson.dumps(record) + b"\n")
    before = stream.read_bytes()
    with pytest.raises(UsageError) as info:
        check_manifest(tmp_path / "run", _config(tmp_path, model="faithful"), None)
    message = str(info.value)
    assert f"{stream}:1: missing field 'cache_key'" in message, message
    assert "sent differently" not in message and "Nothing was written" in message
    assert stream.read_bytes() == before


def test_a_changed_config_over_an_empty_stream_is_accepted(tmp_path: Path) -> None:
    # Nothing was written: no existing request can be altered.
    write_manifest(tmp_path / "run", _config(tmp_path), None, None)
    assert check_manifest(tmp_path / "run", _config(tmp_path, model="faithful"), None)


def test_shard_messages_name_shards_as_flags_not_reprs(tmp_path: Path) -> None:
    config = _config(tmp_path)
    write_manifest(tmp_path / "run", config, None, None)
    with pytest.raises(UsageError) as info:
        check_manifest(tmp_path / "run", config, Shard(0, 2))
    assert "None" not in str(info.value)
    assert "no --shard" in str(info.value) and "--shard 0/2" in str(info.value)


@pytest.mark.parametrize("name", ["results.jsonl", "manifest.json"])
def test_a_symlinked_stream_or_manifest_is_refused_before_anything_is_touched(
    tmp_path: Path, name: str
) -> None:
    config = _config(tmp_path)
    write_manifest(tmp_path / "run", config, None, None)
    _stream_of(config)
    target = tmp_path / "elsewhere.jsonl"
    original = (tmp_path / "run" / name).read_bytes() + b'{"torn'  # a torn tail, too
    target.write_bytes(original)
    (tmp_path / "run" / name).unlink()
    (tmp_path / "run" / name).symlink_to(target)
    with pytest.raises(UsageError, match="symlink"):
        check_manifest(tmp_path / "run", config, None)
    assert target.read_bytes() == original


def test_a_run_directory_under_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    with pytest.raises(UsageError, match=r"under .*afile, a file"):
        check_manifest(tmp_path / "afile" / "run", _config(tmp_path), None)


def test_other_shard_is_refused(tmp_path: Path) -> None:
    config = _config(tmp_path)
    write_manifest(tmp_path / "run", config, Shard(0, 2), None)
    with pytest.raises(UsageError, match="shard"):
        check_manifest(tmp_path / "run", config, Shard(1, 2))


def test_manifest_stores_key_names_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANARY_KEY_VAR", "sk-canary-manifest")
    config = _config(tmp_path, api_key_env="CANARY_KEY_VAR")
    write_manifest(tmp_path / "run", config, None, None)
    raw = (tmp_path / "run" / "manifest.json").read_bytes()
    assert b"CANARY_KEY_VAR" in raw and b"sk-canary-manifest" not in raw
    assert orjson.loads(raw)["versions"]["cotaudit"]


def test_stream_without_manifest_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.jsonl").write_text("")
    with pytest.raises(UsageError, match="manifest"):
        check_manifest(tmp_path / "run", _config(tmp_path), None)


@pytest.mark.parametrize("text", ["1", "2/2", "-1/3", "a/b", "0/0"])
def test_bad_shards(text: str) -> None:
    with pytest.raises(UsageError, match="--shard"):
        Shard.parse(text)


def test_good_shard() -> None:
    assert Shard.parse("1/4") == Shard(1, 4) and str(Shard(1, 4)) == "1/4"


def test_planned_requests_are_recorded_for_a_new_plan_and_kept_by_its_reruns(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    config = _config(tmp_path)
    first = write_manifest(run, config, None, None, planned={"e": 7})
    assert first["planned_requests"] == {"e": 7}
    # A rerun that did not count its plan (--no-progress --no-preflight) keeps the count.
    again = write_manifest(run, config, None, check_manifest(run, config, None))
    assert again["planned_requests"] == {"e": 7}
    # A grown plan records its own count, or none if it was not counted.
    grown = _config(tmp_path, max_tokens=64)
    assert grown.plan_hash() != config.plan_hash()
    existing = orjson.loads((run / "manifest.json").read_bytes())
    assert "planned_requests" not in write_manifest(run, grown, None, existing)


def test_a_plan_counted_after_the_sweep_is_recorded_only_for_a_new_or_grown_plan(
    tmp_path: Path,
) -> None:
    # A run without a planning pass (--quiet --no-preflight) learns its plan's size only
    # once its dispatchers have walked it, after the manifest was written.
    run = tmp_path / "run"
    config = _config(tmp_path)
    first = write_manifest(run, config, None, None)
    assert "planned_requests" not in first
    recorded = record_planned_requests(run, config, None, first, {"e": 7})
    on_disk = orjson.loads((run / "manifest.json").read_bytes())
    assert recorded == on_disk and on_disk["planned_requests"] == {"e": 7}
    unchanged = {k: v for k, v in first.items() if k != "updated_at"}
    assert {k: v for k, v in on_disk.items() if k not in ("planned_requests", "updated_at")} == (
        unchanged
    )
    # A rerun of the same plan keeps what its manifest holds: a count, or its absence (a
    # manifest written before the field existed, which an evaluation recorded as it is).
    rerun = write_manifest(run, config, None, recorded)
    assert record_planned_requests(run, config, recorded, rerun, {"e": 9}) == rerun
    old = {k: v for k, v in on_disk.items() if k != "planned_requests"}
    (run / "manifest.json").write_bytes(orjson.dumps(old))
    before = (run / "manifest.json").read_bytes()
    record_planned_requests(run, config, old, write_manifest(run, config, None, old), {"e": 7})
    assert (run / "manifest.json").read_bytes() == before
    # A grown plan records its own count.
    grown = _config(tmp_path, max_tokens=64)
    written = write_manifest(run, grown, None, old)
    assert "planned_requests" not in written
    record_planned_requests(run, grown, old, written, {"e": 11})
    assert orjson.loads((run / "manifest.json").read_bytes())["planned_requests"] == {"e": 11}


def test_a_manifest_without_planned_requests_is_not_rewritten_to_add_them(
    tmp_path: Path,
) -> None:
    # A manifest written before the field existed: a rerun of the same plan leaves the file
    # as it was, so that an evaluation of the run still verifies.
    run = tmp_path / "run"
    config = _config(tmp_path)
    write_manifest(run, config, None, None)
    before = (run / "manifest.json").read_bytes()
    write_manifest(run, config, None, check_manifest(run, config, None), planned={"e": 7})
    assert (run / "manifest.json").read_bytes() == before


@pytest.mark.parametrize(("first", "then"), [(Shard(0, 1), None), (None, Shard(0, 1))])
def test_shard_0_of_1_is_recorded_as_the_whole_plan(
    tmp_path: Path, first: Shard | None, then: Shard | None
) -> None:
    # --shard 0/1 plans every request, as no --shard does: their run directories are one.
    config = _config(tmp_path)
    written = write_manifest(tmp_path / "run", config, first, None)
    assert written["shard"] is None
    assert check_manifest(tmp_path / "run", config, then) is not None


def test_a_manifest_that_recorded_0_of_1_resumes_either_way_and_is_left_as_it_is(
    tmp_path: Path,
) -> None:
    # Before 0/1 was recorded as the whole plan, a manifest held "0/1": it is the whole plan
    # too, and a resume that changes nothing else leaves its bytes (an evaluation's hash).
    config = _config(tmp_path)
    old = write_manifest(tmp_path / "run", config, None, None)
    path = tmp_path / "run" / "manifest.json"
    path.write_bytes(
        orjson.dumps({**old, "shard": "0/1"}, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    )
    before = path.read_bytes()
    for shard in (None, Shard(0, 1)):
        existing = check_manifest(tmp_path / "run", config, shard)
        assert existing is not None
        write_manifest(tmp_path / "run", config, shard, existing)
        assert path.read_bytes() == before
    with pytest.raises(
        UsageError, match=r"run with no --shard \(the whole plan\), this run with --shard 0/2"
    ):
        check_manifest(tmp_path / "run", config, Shard(0, 2))
