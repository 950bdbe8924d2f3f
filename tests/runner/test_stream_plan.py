"""Which records of a stream its plan would not have written (``runner.stream_plan``): streams
built from the plan itself, then altered one way each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from cotaudit.schema import JSONDict
from runner.config import SweepConfig, config_from_mapping
from runner.engine import iter_plan
from runner.manifest import Shard, write_manifest
from runner.stream_plan import ForeignRecord, RunPlan, plan_check, plan_of_run


def _config(tmp_path: Path, n: int = 3, seed: int = 3) -> SweepConfig:
    task = {"kind": "prontoqa", "source": "generate", "n": n, "seed": seed}
    endpoints = [{"name": "e", "provider": "local", "model": "faithful"}]
    return config_from_mapping(
        {"run_dir": "run", "task": task, "endpoints": endpoints}, config_dir=tmp_path
    )


def _stream(config: SweepConfig, shard: Shard | None = None) -> list[JSONDict]:
    """Problem records and (answered) responses as a run of ``config`` writes them."""
    task = config.build_task()
    ident = config.endpoints[0].identity()
    out: list[JSONDict] = []
    declared: set[str] = set()
    for problem, spec in iter_plan(task, ident, shard):
        if problem.problem_id not in declared:
            declared.add(problem.problem_id)
            out.append(problem.to_record())
            out.extend(task.endpoint_records(problem, ident))
        out.append({**spec.to_record(), "kind": "response", "text": "", "error": None})
    return out


def _first_foreign(
    config: SweepConfig, records: list[JSONDict], shard: Shard | None = None
) -> ForeignRecord | None:
    check = plan_check(config, shard)
    for line, record in enumerate(records, start=1):
        check.watch(line, record)
    return check.finish()


def _line(records: list[JSONDict], kind: str, nth: int = 0) -> int:
    return [i for i, r in enumerate(records, start=1) if r["kind"] == kind][nth]


def test_a_stream_of_the_plan_belongs_to_it_and_so_does_a_part_of_it(tmp_path: Path) -> None:
    config = _config(tmp_path)
    records = _stream(config)
    assert _first_foreign(config, records) is None
    assert _first_foreign(config, records[: len(records) // 2]) is None
    assert _first_foreign(config, []) is None
    # A smaller plan's stream (the same seed, fewer problems) is a part of this one's.
    assert _first_foreign(config, _stream(_config(tmp_path, n=1))) is None


def test_a_problem_of_a_larger_plan_is_named_at_its_line(tmp_path: Path) -> None:
    config = _config(tmp_path, n=1)
    records = _stream(_config(tmp_path, n=2))
    line = next(i for i, r in enumerate(records, 1) if r.get("problem_id") == "g3-00002")
    foreign = _first_foreign(config, records)
    assert foreign == ForeignRecord(
        line, "problem g3-00002", "is not one of the problems this config plans"
    )


def test_a_problem_of_that_id_with_other_content_is_foreign(tmp_path: Path) -> None:
    config = _config(tmp_path)
    records = _stream(config)
    records[0] = {**records[0], "question": "Is Nova a bompus?"}
    foreign = _first_foreign(config, records)
    assert foreign is not None and (foreign.line, foreign.record) == (1, "problem g3-00001")
    assert "has other content than this config's problem of that id" in foreign.why


def test_a_problem_record_of_an_older_version_without_extra_plan_still_belongs(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    records = _stream(config)
    for i, record in enumerate(records):
        if record["kind"] == "problem":
            extra = {k: v for k, v in record["extra"].items() if k != "plan"}
            records[i] = {**record, "schema": 1, "extra": extra}
    assert _first_foreign(config, records) is None


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"endpoint": "f"}, "is of endpoint 'f', which this config does not have (it has 'e')"),
        (
            {"model": {"provider": "local", "model": "noisy", "host": "127.0.0.1"}},
            "was answered by local/noisy; this config's endpoint 'e' is local/faithful",
        ),
        ({"task": "prompts"}, "is of task 'prompts'; this run's task is 'prontoqa'"),
        ({"problem_id": "g9-00001"}, "belongs to a problem the stream does not declare"),
    ],
)
def test_a_response_of_another_endpoint_model_task_or_problem_is_foreign(
    tmp_path: Path, change: dict[str, Any], why: str
) -> None:
    config = _config(tmp_path)
    records = _stream(config)
    line = _line(records, "response", 4)
    records[line - 1] = {**records[line - 1], **change}
    foreign = _first_foreign(config, records)
    assert foreign is not None and foreign.line == line and why in foreign.why


def test_a_response_sent_with_other_parameters_is_foreign(tmp_path: Path) -> None:
    config = _config(tmp_path)
    records = _stream(config)
    line = _line(records, "response", 2)
    record = records[line - 1]
    records[line - 1] = {**record, "params": {**record["params"], "max_tokens": 64}}
    foreign = _first_foreign(config, records)
    assert foreign is not None and foreign.line == line
    assert foreign.why == "was sent with max_tokens 64; endpoint 'e' sends 512"


def test_a_request_of_the_first_problem_is_checked_by_its_cache_key(tmp_path: Path) -> None:
    config = _config(tmp_path)
    records = _stream(config)
    line = _line(records, "response", 1)
    records[line - 1] = {**records[line - 1], "cache_key": "0" * 64}
    foreign = _first_foreign(config, records)
    assert foreign is not None and foreign.line == line
    assert "sent as another request than this config's plan makes" in foreign.why
    extra = {**records[line - 1], "request_id": "e/g3-00001/original/-/9", "sample_index": 9}
    records[line - 1] = extra
    foreign = _first_foreign(config, records)
    assert foreign is not None and foreign.why == "is not a request this config's plan makes"


def test_a_truth_record_of_another_endpoint_is_foreign(tmp_path: Path) -> None:
    config = _config(tmp_path)
    records = _stream(config)
    line = _line(records, "truth", 1)
    records[line - 1] = {**records[line - 1], "endpoint": "f"}
    foreign = _first_foreign(config, records)
    assert foreign is not None and foreign.line == line
    assert foreign.record.startswith("truth record of ")


def test_a_response_of_another_shard_is_foreign(tmp_path: Path) -> None:
    config = _config(tmp_path)
    shard = Shard(0, 2)
    assert _first_foreign(config, _stream(config, shard), shard) is None
    other = _stream(config, Shard(1, 2))
    foreign = _first_foreign(config, other, shard)
    assert foreign is not None and foreign.line == _line(other, "response")
    assert foreign.why == "is not in shard 0/2, this run directory's"


def test_the_first_of_several_foreign_records_is_named(tmp_path: Path) -> None:
    """A foreign problem is found only once the task's problems are walked, after the
    stream: the earlier of it and a foreign response found while reading is named."""
    config = _config(tmp_path, n=1)
    records = _stream(_config(tmp_path, n=2))
    late = len(records)
    records[late - 1] = {**records[late - 1], "endpoint": "f"}
    foreign = _first_foreign(config, records)
    assert foreign is not None and foreign.record == "problem g3-00002" and foreign.line < late


def _prompts_run(tmp_path: Path) -> Path:
    """A run directory's manifest; its config's relative path is found from the config file."""
    (tmp_path / "p.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
    (tmp_path / "sweep.toml").write_text("# the manifest records what it held\n")
    config = config_from_mapping(
        {
            "run_dir": "run",
            "task": {"kind": "prompts", "path": "p.jsonl"},
            "endpoints": [{"name": "e", "provider": "local", "model": "echo"}],
        },
        config_dir=tmp_path,
        where=str(tmp_path / "sweep.toml"),
    )
    write_manifest(config.run_dir, config, None, None)
    return config.run_dir


def test_the_plan_of_a_run_is_rebuilt_from_its_manifest(tmp_path: Path) -> None:
    run_dir = _prompts_run(tmp_path)
    plan = plan_of_run(run_dir)
    assert plan.check is not None and (plan.note, plan.failure) == (None, None)
    assert plan_of_run(tmp_path / "nowhere") == RunPlan()  # a stream on its own


def test_a_manifest_that_records_no_plan_is_not_checked(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_bytes(
        orjson.dumps({"kind": "manifest", "source": "import-evidence", "pack": "p"})
    )
    assert plan_of_run(tmp_path) == RunPlan()


def test_a_plan_whose_task_file_is_gone_is_a_note(tmp_path: Path) -> None:
    run_dir = _prompts_run(tmp_path)
    (tmp_path / "p.jsonl").unlink()
    plan = plan_of_run(run_dir)
    assert plan.check is None and plan.failure is None
    assert plan.note is not None and "the run's plan cannot be rebuilt from it" in plan.note


def test_a_manifest_whose_config_says_another_task_than_its_output_config_fails(
    tmp_path: Path,
) -> None:
    run_dir = _prompts_run(tmp_path)
    manifest = run_dir / "manifest.json"
    data = orjson.loads(manifest.read_bytes())
    data["config"]["task"]["path"] = "other.jsonl"  # not there either: refused all the same
    manifest.write_bytes(orjson.dumps(data))
    plan = plan_of_run(run_dir)
    assert plan.check is None and plan.failure is not None
    assert "its config plans another run than its output_config" in plan.failure
