"""The Python API as a researcher meets it: each mistake a notebook or a script can make is a
``UsageError`` that names the argument, a report's repr stays short, ``selection`` computes
what its command does, and an interrupted ``run`` (a notebook's interrupt, Ctrl-C) or a
cancelled ``arun`` stops the sweep whole, with nothing left running, and the next call
resumes it. Everything runs against the project's local server over loopback."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cotaudit
from cotaudit.errors import UsageError
from cotaudit.schema import read_records
from evaluator.commands.selection import evaluate_run
from runner.engine import RunSummary
from runner.server.latency import LatencySpec
from runner.server.lifecycle import ServerThread
from runner.server.settings import ServerConfig

ENDPOINT = {
    "name": "faithful",
    "provider": "local",
    "model": "faithful",
    "requests_per_minute": 600_000,
    "tokens_per_minute": 1e10,
}


def _mapping(tmp: Path, *, n: int = 2, **endpoint: Any) -> dict[str, Any]:
    return {
        "run_dir": str(tmp / "run"),
        "cache_dir": str(tmp / "cache"),
        "task": {"kind": "prontoqa", "source": "generate", "n": n, "seed": 0},
        "endpoints": [{**ENDPOINT, **endpoint}],
    }


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    summary = cotaudit.run(_mapping(tmp_path_factory.mktemp("review")), preflight=False)
    assert summary.errors == 0 and summary.written == summary.planned > 0
    return summary.run_dir


# --- bad input: a UsageError naming what was wrong, never a traceback from deep inside


def test_load_config_checks_the_task_table_not_only_the_top_level(tmp_path: Path) -> None:
    mapping = _mapping(tmp_path)
    mapping["task"]["nn"] = 3  # a typo of n: accepted until the run before
    with pytest.raises(UsageError, match=r"\[task\]\.nn: unknown key 'nn'"):
        cotaudit.load_config(mapping)
    mapping["task"] = {"kind": "prontoqa", "source": "generate", "n": "3"}
    with pytest.raises(UsageError, match=r"\[task\]\.n: 'n' must be an integer"):
        cotaudit.load_config(mapping)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("source", [None, 3, ["run_dir", "x"]])
def test_a_config_that_is_neither_a_path_nor_a_mapping_is_refused(source: Any) -> None:
    with pytest.raises(UsageError, match="a config is a path or a mapping"):
        cotaudit.load_config(source)
    with pytest.raises(UsageError, match="a config is a path or a mapping"):
        cotaudit.run(source)


@pytest.mark.parametrize("shard", ["3/2", (0, 2)])
def test_a_bad_shard_is_named_as_the_argument(shard: Any, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r'^shard: .*shard="0/4"'):
        cotaudit.run(_mapping(tmp_path), shard=shard, preflight=False)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"n_boot": -1}, r"n_boot must be an integer in \[0, "),
        ({"n_boot": 1.5}, r"n_boot must be an integer"),
        ({"n_boot": True}, r"n_boot must be an integer"),
        ({"seed": -1}, r"seed must be an integer >= 0"),
        ({"cascade_mode": "parent"}, r"cascade_mode must be one of previous_cot_step"),
    ],
)
def test_evaluate_checks_its_options_as_the_command_checks_its_flags(
    finished_run: Path, tmp_path: Path, option: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError, match=f"^evaluate: {message}"):
        cotaudit.evaluate(finished_run, out=tmp_path / "eval", **option)
    assert not (tmp_path / "eval").exists()


def test_numpy_integers_are_integers_for_n_boot_and_seed(
    finished_run: Path, tmp_path: Path
) -> None:
    # A notebook's ``for seed in np.arange(3)`` gives np.int64, as selection's counts take.
    seeds = [
        cotaudit.evaluate(finished_run, out=tmp_path / str(s), n_boot=np.int64(20), seed=s)
        for s in np.arange(2)
    ]
    plain = cotaudit.evaluate(finished_run, out=tmp_path / "plain", n_boot=20, seed=1)
    assert seeds[1].raw["models"] == plain.raw["models"]
    counts = {"x": (30, 20, 10, 40)}
    assert cotaudit.selection(counts, seed=np.int64(1), resamples=np.int32(50)) == (
        cotaudit.selection(counts, seed=1, resamples=50)
    )
    with pytest.raises(UsageError, match=r"^evaluate: n_boot must be an integer"):
        cotaudit.evaluate(finished_run, out=tmp_path / "b", n_boot=np.bool_(True))


@pytest.mark.parametrize("given", ["", 3])
def test_out_and_eval_dir_are_paths(finished_run: Path, given: Any) -> None:
    with pytest.raises(UsageError, match=r"^evaluate: out is a directory's path, not an"):
        cotaudit.evaluate(finished_run, out=given, n_boot=0)
    with pytest.raises(UsageError, match=r"^verify: eval_dir is a directory's path, not an"):
        cotaudit.verify(finished_run, eval_dir=given)


def test_an_out_that_holds_something_else_is_named_as_the_api_names_it(
    finished_run: Path, tmp_path: Path
) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("kept", encoding="utf-8")
    with pytest.raises(UsageError, match=r"holds files that are no evaluation") as refused:
        cotaudit.evaluate(finished_run, out=tmp_path / "notes", n_boot=0)
    # A notebook has no --out: the advice names the argument it passed.
    assert "Give out= a new or empty directory" in str(refused.value)
    assert "--out" not in str(refused.value)
    assert (tmp_path / "notes" / "mine.txt").read_text(encoding="utf-8") == "kept"


@pytest.mark.parametrize("given", ["no", 0, None])
def test_figures_is_a_bool(finished_run: Path, tmp_path: Path, given: Any) -> None:
    # figures="no" was truthy: the evaluation drew every figure it was told not to.
    with pytest.raises(UsageError, match=r"^evaluate: figures is True or False, not (a |an |None)"):
        cotaudit.evaluate(finished_run, out=tmp_path / "e", n_boot=0, figures=given)
    assert not (tmp_path / "e").exists()


def test_records_that_are_not_records_are_named_by_their_index(finished_run: Path) -> None:
    records = list(read_records(finished_run / "results.jsonl"))
    cases: list[tuple[list[Any], str]] = [
        ([records[0], 7], r"^records\[1\]: 7 is not a record"),
        ([records[0], {"k": 1}], r"^records\[1\]: line is not a record"),
        ([records[0], {**records[1], "x": np.int64(3)}], r"^records\[1\]: .*cannot be .*JSON"),
        ([], r"^records: the stream holds no problem records"),
    ]
    for given, message in cases:
        with pytest.raises(UsageError, match=message) as caught:
            cotaudit.evaluate(given, n_boot=0)
        assert "cotaudit-evaluate-" not in str(caught.value)  # no scratch file named


@pytest.mark.parametrize("source", [{"kind": "problem"}, b"runs/x", 5])
def test_evaluate_refuses_one_record_bytes_or_a_number_as_its_source(source: Any) -> None:
    with pytest.raises(UsageError, match=r"^evaluate: evaluate takes a run directory"):
        cotaudit.evaluate(source)


def test_dash_is_not_standard_input_in_the_api(
    finished_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kernel's stdin is a pipe of its own: reading it blocks or reads garbage. Here it holds
    # a real stream, so an API that read it would evaluate it (into ./eval) and not refuse.
    stdin = io.TextIOWrapper(io.BytesIO((finished_run / "results.jsonl").read_bytes()))
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.chdir(tmp_path)
    calls: list[Callable[[], object]] = [
        lambda: cotaudit.evaluate("-", n_boot=0),
        lambda: cotaudit.evaluate(Path("-"), n_boot=0),
        lambda: cotaudit.selection("-", resamples=0),
        lambda: cotaudit.verify("-"),
    ]
    for call in calls:
        with pytest.raises(UsageError, match=r'^\w+: "-" means standard input .* reads no'):
            call()
    assert stdin.buffer.tell() == 0
    assert list(tmp_path.iterdir()) == []


def test_a_missing_or_empty_path_is_refused_with_the_apis_own_advice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "runs" / "typo"
    for call, instead in [
        (cotaudit.evaluate, "or the records as a list of dicts"),
        (cotaudit.selection, 'or counts as {"name"'),
        (cotaudit.verify, "results.jsonl path."),
    ]:
        with pytest.raises(UsageError, match=f"^{missing}: no such run directory") as caught:
            call(missing)
        assert instead in str(caught.value) and "'-'" not in str(caught.value)
    # An unset variable gives "": the command line would take the current directory.
    (tmp_path / "results.jsonl").write_bytes(b"")  # the current directory is a stream's
    monkeypatch.chdir(tmp_path)
    for call in (cotaudit.evaluate, cotaudit.selection, cotaudit.verify):
        with pytest.raises(UsageError, match=r"^\w+: the path is empty\. .* directory as '\.'"):
            call("")
    with pytest.raises(UsageError, match=r"^verify: verify takes a run directory, not an int"):
        cotaudit.verify(3)  # type: ignore[arg-type]


def test_selection_takes_numpy_counts_and_refuses_what_is_not_four_counts() -> None:
    table7 = cotaudit.selection({"GLM-5.3": (299, 216, 208, 277)}, resamples=0)
    from_numpy = cotaudit.selection({"GLM-5.3": tuple(np.array([299, 216, 208, 277]))})
    assert from_numpy.deployments == table7.deployments
    for counts in [(True, 1, 1, 1), 5, "1234", (1, 2, 3, -4)]:
        with pytest.raises(UsageError, match="must be four non-negative integers"):
            cotaudit.selection({"x": counts})  # type: ignore[dict-item]
    with pytest.raises(UsageError, match=r"^selection: resamples must be an integer in \[0, "):
        cotaudit.selection({"x": (1, 2, 3, 4)}, resamples=-1)
    with pytest.raises(UsageError, match=r"^selection: seed must be an integer >= 0"):
        cotaudit.selection({"x": (1, 2, 3, 4)}, seed=-1)
    with pytest.raises(UsageError, match=r"^selection: selection takes a run directory"):
        cotaudit.selection(None)  # type: ignore[arg-type]


def test_selection_of_a_run_computes_what_cotaudit_selection_does(tmp_path: Path) -> None:
    config = {
        "run_dir": str(tmp_path / "run"),
        "cache_dir": str(tmp_path / "cache"),
        "task": {"kind": "procedural", "families": ["arith"], "per_stratum": 4, "seed": 0},
        "endpoints": [
            {**ENDPOINT, "name": "careful", "model": "rule_mix:p_r=0.7,eps=0.02,q=0.3,qd=0.8"}
        ],
    }
    summary = cotaudit.run(config, preflight=False)
    # evaluate_run with its defaults is what the command computes (its --n-boot default):
    # the between-stratum intervals depend on the number of resamples.
    assert cotaudit.selection(summary.run_dir) == evaluate_run(summary.run_dir)


# --- what a notebook shows


def test_a_report_reads_its_certificates_after_a_change_of_directory(
    finished_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    report = cotaudit.evaluate(finished_run, n_boot=0, out="eval")  # relative, as typed
    total = sum(m.certificates_total for m in report.models.values())
    assert total > 0
    monkeypatch.chdir(finished_run)  # a notebook's %cd between cells
    assert report.out_dir == tmp_path / "eval"
    assert sum(1 for _ in report.certificates()) == total
    (tmp_path / "eval" / "certificates.jsonl").unlink()
    with pytest.raises(UsageError, match=r"eval/certificates\.jsonl: .* is gone\. Evaluate"):
        next(report.certificates())


def test_a_reports_repr_stays_short_however_many_problems(finished_run: Path) -> None:
    report = cotaudit.evaluate(finished_run, n_boot=0)
    model = report.models["faithful"]
    assert model.rawr is not None
    many = dataclasses.replace(model.rawr, problems=tuple(f"g0-{i:05d}" for i in range(10_000)))
    big = dataclasses.replace(report, models={"faithful": dataclasses.replace(model, rawr=many)})
    text = repr(big)
    assert len(text) < 1_000, text[:300]
    assert "'faithful'" in text and "9997 more" in text and "rows=<" in text
    assert str(report.out_dir) in repr(report)


# --- interrupting a run


class _Interrupter:
    """The local server's latency sleep, which does ``action`` (an interrupt) once, when
    the ``at``-th request is being answered: the run is then surely under way."""

    def __init__(self) -> None:
        self.calls = 0
        self.at = 10
        self.action: Callable[[], None] = lambda: None
        self.fired = threading.Event()

    async def sleep(self, seconds: float) -> None:
        self.calls += 1
        if self.calls == self.at:
            self.fired.set()
            self.action()
        await asyncio.sleep(seconds)


@pytest.fixture
def interrupter(
    make_server: Callable[[ServerConfig], ServerThread],
) -> Iterator[tuple[_Interrupter, str]]:
    hook = _Interrupter()
    # A small latency keeps the sweep going long enough for the interrupt to arrive.
    server = make_server(ServerConfig(latency=LatencySpec.parse("fixed:0.01"), sleep=hook.sleep))
    yield hook, server.base_url


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt, as in a Jupyter cell (the kernel sets it so), even
    where this test process inherited it ignored (a background job)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _sigint_to_the_main_thread() -> None:
    main = threading.main_thread().ident
    assert main is not None
    signal.pthread_kill(main, signal.SIGINT)


def _assert_stopped_then_resumed(config: dict[str, Any]) -> None:
    """After the interrupt: nothing of the sweep runs on; the next call resumes it and each
    request has one record."""
    assert not any(t.name == "cotaudit-run" for t in threading.enumerate())
    stream = Path(config["run_dir"]) / "results.jsonl"
    before = sum(1 for r in read_records(stream) if r["kind"] == "response")
    resumed = cotaudit.run(config, preflight=False)
    assert 0 < before == resumed.skipped < resumed.planned
    assert resumed.skipped + resumed.written == resumed.planned and resumed.errors == 0
    ids = [r["request_id"] for r in read_records(stream) if r["kind"] == "response"]
    assert len(ids) == len(set(ids)) == resumed.planned


@pytest.mark.usefixtures("default_sigint")
def test_interrupting_run_in_a_notebooks_loop_stops_the_sweep_and_the_next_call_resumes(
    interrupter: tuple[_Interrupter, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hook, url = interrupter
    hook.action = _sigint_to_the_main_thread
    config = _mapping(tmp_path, n=6, base_url=url, max_concurrency=2)

    async def cell() -> RunSummary:  # a Jupyter cell: its loop is running
        return cotaudit.run(config, preflight=False)

    loop = asyncio.new_event_loop()  # as the kernel's: no SIGINT handler of asyncio's own
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(cell())
    finally:
        loop.close()
    assert hook.fired.is_set()
    assert "the same call resumes it" in capsys.readouterr().err
    _assert_stopped_then_resumed(config)


@pytest.mark.usefixtures("default_sigint")
def test_interrupting_run_called_inside_asyncio_run_stops_the_sweep(
    interrupter: tuple[_Interrupter, str], tmp_path: Path
) -> None:
    hook, url = interrupter
    hook.action = _sigint_to_the_main_thread
    config = _mapping(tmp_path, n=6, base_url=url, max_concurrency=2)

    async def script() -> RunSummary:
        return cotaudit.run(config, preflight=False)

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(script())
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    _assert_stopped_then_resumed(config)


@pytest.mark.usefixtures("default_sigint")
def test_interrupting_run_in_a_script_stops_the_sweep_and_the_next_call_resumes(
    interrupter: tuple[_Interrupter, str], tmp_path: Path
) -> None:
    hook, url = interrupter
    hook.action = _sigint_to_the_main_thread
    config = _mapping(tmp_path, n=6, base_url=url, max_concurrency=2)
    with pytest.raises(KeyboardInterrupt):
        cotaudit.run(config, preflight=False)
    _assert_stopped_then_resumed(config)


def test_cancelling_arun_stops_the_sweep_and_leaves_no_task_running(
    interrupter: tuple[_Interrupter, str], tmp_path: Path
) -> None:
    hook, url = interrupter
    config = _mapping(tmp_path, n=6, base_url=url, max_concurrency=2)

    async def notebook() -> set[str]:
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(cotaudit.arun(config, preflight=False))
        hook.action = lambda: loop.call_soon_threadsafe(task.cancel)
        with pytest.raises(asyncio.CancelledError):
            await task
        # The notebook's loop goes on running: whatever of the sweep is left would too.
        return {t.get_name() for t in asyncio.all_tasks() if t is not asyncio.current_task()}

    loop = asyncio.new_event_loop()
    try:
        left = loop.run_until_complete(notebook())
    finally:
        loop.close()
    assert hook.fired.is_set()
    assert left == set()
    _assert_stopped_then_resumed(config)


def test_run_from_a_thread_of_its_own(tmp_path: Path) -> None:
    done: list[RunSummary] = []
    worker = threading.Thread(target=lambda: done.append(cotaudit.run(_mapping(tmp_path))))
    worker.start()
    worker.join()
    (summary,) = done
    assert summary.errors == 0 and summary.written == summary.planned > 0
