"""The Python API end to end through the real local server: config, run (also inside a running
event loop, as in Jupyter), evaluate (a run directory or records in memory), verify, selection."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

import cotaudit
from cotaudit.errors import UsageError
from cotaudit.schema import read_records


def _mapping(tmp: Path, *, n: int = 3) -> dict[str, Any]:
    return {
        "run_dir": str(tmp / "run"),
        "cache_dir": str(tmp / "cache"),
        "task": {"kind": "prontoqa", "source": "generate", "n": n, "seed": 0},
        "endpoints": [
            {
                "name": "faithful",
                "provider": "local",
                "model": "faithful",
                "requests_per_minute": 600_000,
                "tokens_per_minute": 1e10,
            }
        ],
    }


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("api")
    summary = cotaudit.run(_mapping(tmp), preflight=False)
    assert summary.errors == 0 and summary.written == summary.planned > 0
    return summary.run_dir


def test_load_config_takes_a_path_or_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "sweep.toml"
    path.write_text(
        'run_dir = "run"\n[task]\nkind = "prontoqa"\nsource = "generate"\nn = 2\n'
        '[[endpoints]]\nname = "f"\nprovider = "local"\nmodel = "faithful"\n',
        encoding="utf-8",
    )
    from_file = cotaudit.load_config(path)
    from_mapping = cotaudit.load_config(
        {**_mapping(tmp_path, n=2), "run_dir": "run"}, base_dir=tmp_path
    )
    assert from_file.run_dir == from_mapping.run_dir == (tmp_path / "run").resolve()
    with pytest.raises(UsageError, match="endpoints"):
        cotaudit.load_config({"run_dir": "x", "task": {"kind": "prontoqa"}}, base_dir=tmp_path)


async def test_run_inside_a_running_event_loop_does_not_fail(tmp_path: Path) -> None:
    # What a Jupyter cell does: the loop is running, and the user calls the blocking run().
    asyncio.get_running_loop()
    summary = cotaudit.run(_mapping(tmp_path, n=2), preflight=False)
    assert summary.errors == 0 and summary.written == summary.planned > 0
    again = await cotaudit.arun(_mapping(tmp_path, n=2), preflight=False)
    assert again.skipped == summary.planned and again.http_requests == 0


def test_evaluate_a_run_directory_gives_typed_rows_equal_to_report_json(
    finished_run: Path,
) -> None:
    report = cotaudit.evaluate(finished_run, n_boot=50)
    assert report.out_dir == finished_run / "eval"
    stored = orjson.loads((finished_run / "eval" / "report.json").read_bytes())
    (model,) = report.models.values()
    assert model.name == "faithful"
    for key, row in model.rows.items():
        data = stored["models"]["faithful"]["rows"][key]
        assert (row.tp, row.fp, row.fn, row.tn) == (data["tp"], data["fp"], data["fn"], data["tn"])
        assert row.f1 == data["f1"]
        assert row.ci is not None and row.ci[0] <= row.ci[1]
    assert model.accuracy == 1.0
    assert model.rawr is not None and model.rawr.correct == 3
    # The headline's RAWR (A+A'), as `cotaudit evaluate` prints it: the faithful reasoner
    # ignores no premise. The paper's, under A alone, is blind to entity premises and counts
    # its correct answers; both are the report's own figures.
    found = stored["models"]["faithful"]["headline"]["found"]["A+A'"]
    assert (model.rawr.count, model.rawr.rate) == (found["rawr"], found["rawr_rate"]) == (0, 0.0)
    paper = stored["models"]["faithful"]["rawr"]
    assert model.rawr_consistent is not None
    assert (model.rawr_consistent.count, model.rawr_consistent.correct) == (
        paper["rawr"],
        paper["correct"],
    )
    assert set(model.parse_rates) >= {"original", "consistent", "local", "surface"}
    assert model.certificates_total == sum(1 for _ in report.certificates()) > 0


def test_evaluate_records_in_memory_writes_nothing_and_keeps_the_certificates(
    finished_run: Path, tmp_path: Path
) -> None:
    records = list(read_records(finished_run / "results.jsonl"))
    on_disk = cotaudit.evaluate(finished_run, n_boot=0)
    in_memory = cotaudit.evaluate(records, n_boot=0)
    assert in_memory.out_dir is None
    assert list(in_memory.certificates()) == list(on_disk.certificates())
    assert in_memory.models["faithful"].rows == on_disk.models["faithful"].rows
    written = cotaudit.evaluate(records, out=tmp_path / "elsewhere", n_boot=0)
    assert (tmp_path / "elsewhere" / "report.json").is_file() and written.out_dir is not None


def test_report_to_frame_needs_pandas_and_says_so(
    finished_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = cotaudit.evaluate(finished_run, n_boot=0)
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    with pytest.raises(ModuleNotFoundError, match=r"cotaudit\[pandas\]"):
        report.to_frame()


def test_report_to_frame_with_pandas(finished_run: Path) -> None:
    pytest.importorskip("pandas", reason="pandas is an optional extra: cotaudit[pandas]")
    report = cotaudit.evaluate(finished_run, n_boot=0)
    frame = report.to_frame()
    rows = report.models["faithful"].rows
    assert len(frame) == len(rows)
    line = frame[frame["row"] == "A_consistent_full"].iloc[0]
    assert line["tp"] == rows["A_consistent_full"].tp and line["model"] == "faithful"


def test_verify_holds_then_fails_on_a_changed_certificate(finished_run: Path) -> None:
    cotaudit.evaluate(finished_run, n_boot=0)
    assert cotaudit.verify(finished_run).ok
    path = finished_run / "eval" / "certificates.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    cert = orjson.loads(lines[0])
    cert["verdict"] = "GROUNDED" if cert["verdict"] != "GROUNDED" else "INSENSITIVE"
    path.write_bytes(orjson.dumps(cert) + b"\n" + b"".join(lines[1:]))
    result = cotaudit.verify(finished_run)
    assert not result.ok and any(cert["id"] in failure for failure in result.failures)


def test_selection_from_counts_and_from_a_procedural_run(tmp_path: Path) -> None:
    counts = {"GLM-5.3": (299, 216, 208, 277), "deepseek-v4-flash": (85, 60, 73, 82)}
    report = cotaudit.selection(counts, resamples=0)
    assert report.deployments["GLM-5.3"].delta == pytest.approx(0.074, abs=0.001)  # Table 7
    with pytest.raises(UsageError, match="four non-negative integers"):
        cotaudit.selection({"x": (1, 2, 3)}, resamples=0)  # type: ignore[dict-item]

    config = {
        "run_dir": str(tmp_path / "run"),
        "cache_dir": str(tmp_path / "cache"),
        "task": {"kind": "procedural", "families": ["arith"], "per_stratum": 4, "seed": 0},
        "endpoints": [
            {
                "name": "careful",
                "provider": "local",
                "model": "rule_mix:p_r=0.7,eps=0.02,q=0.3,qd=0.8",
                "requests_per_minute": 600_000,
                "tokens_per_minute": 1e10,
            }
        ],
    }
    summary = cotaudit.run(config, preflight=False)
    assert summary.errors == 0
    from_run = cotaudit.selection(summary.run_dir, resamples=0)
    assert list(from_run.deployments) == ["careful"]
    assert from_run.deployments["careful"].counts.n == summary.planned // 3
