"""The Python API: what the command line does, as functions a notebook can call.

``load_config`` -> ``run`` / ``arun`` -> ``evaluate`` -> ``verify``; ``selection`` for the
selection study. Each takes the same inputs as its command and raises ``UsageError`` where the
command would exit 2, whose advice names the function's arguments where the command's names
its flags (``cotaudit.caller_terms``). ``run`` is safe inside a running event loop (Jupyter):
it then runs the sweep on a thread of its own. Interrupting ``run`` (Ctrl-C, a notebook's
interrupt) or cancelling ``arun`` stops the sweep as Ctrl-C stops ``cotaudit run``: in-flight
requests get their grace period, what was written stays whole, and the same call resumes it.
``docs/api.md`` shows a session.

The runner and the evaluator are imported only when a function needs them, so
``import cotaudit`` stays light.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import math
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import orjson

from cotaudit.caller_terms import api_terms
from cotaudit.errors import UsageError
from cotaudit.schema import EVAL_DIRNAME, RESULTS_NAME, JSONDict, read_records
from cotaudit.values import integer, shown

if TYPE_CHECKING:
    import pandas

    from evaluator.pipeline import EvaluateOptions
    from evaluator.selection import SelectionReport
    from runner.config import SweepConfig
    from runner.engine import RunSummary
    from runner.manifest import Shard

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _in_api_terms(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function``, whose messages (the runner's and the evaluator's too) name the API's
    arguments where they advise an option (``preflight=False``, not ``--no-preflight``)."""

    @functools.wraps(function)
    def in_api_terms(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with api_terms():
            return function(*args, **kwargs)

    return in_api_terms


@_in_api_terms
def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any], *, base_dir: str | os.PathLike[str] = "."
) -> SweepConfig:
    """A validated sweep config from a TOML file's path, or from a mapping of the same shape.

    Relative paths in a mapping (``run_dir``, ``cache_dir``, a task's ``path``) are resolved
    against ``base_dir`` (the current directory by default); in a file, against the file's
    directory, as ``cotaudit run`` does. The ``[task]`` table is checked too (a misspelt key,
    a value of the wrong type), so a bad config fails here rather than when it is run.
    """
    from runner.config import config_from_mapping
    from runner.config import load_config as load_file

    if not isinstance(base_dir, (str, os.PathLike)) or not os.fspath(base_dir):
        given = "an empty path" if isinstance(base_dir, str) else _a(base_dir)
        raise UsageError(
            f"base_dir is a directory's path, not {given}",
            where="load_config",
            fix="Give base_dir as a str or a Path (the current directory as '.'), or leave it out.",
        )
    if isinstance(source, Mapping):
        config = config_from_mapping(source, config_dir=Path(base_dir).resolve())
    elif isinstance(source, (str, os.PathLike)):
        config = load_file(Path(source))
    else:
        raise UsageError(
            f"a config is a path or a mapping, not {_a(source)}",
            where="load_config",
            fix="Give the path of a TOML sweep config, or a dict of the same shape "
            "(docs/configuration.md).",
        )
    # The runner builds the task only when it runs; building it now (a lazy plan: nothing is
    # generated or read past the table) refuses the table's own mistakes before any run.
    config.build_task()
    return config


def _first_few(items: tuple[str, ...], shown: int) -> str:
    """``items`` for a repr: all of them, or the first ``shown`` and how many more."""
    more = len(items) - shown
    if more <= 0:
        return repr(items)
    return f"({', '.join(repr(item) for item in items[:shown])}, ... {more} more)"


def _a(value: object) -> str:
    """The type of a value given where another was expected, for a message: ``an int``."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _switch(value: object, name: str, where: str, fix: str) -> None:
    """``UsageError`` unless ``value`` is True or False: truthiness would read
    ``progress="no"`` (or ``"false"`` read from a config of the user's) as yes."""
    if not isinstance(value, bool):
        raise UsageError(f"{name} is True or False, not {_a(value)}", where=where, fix=fix)


def _run_switches(
    where: str, *, retry_errors: object, progress: object, preflight: object, use_cache: object
) -> None:
    _switch(
        retry_errors,
        "retry_errors",
        where,
        "Give retry_errors=True to send the failed requests again, or leave it out.",
    )
    _switch(
        progress, "progress", where, "Give progress=True to show it on stderr, or leave it out."
    )
    _switch(preflight, "preflight", where, "Give preflight=False to skip it, or leave it out.")
    _switch(
        use_cache,
        "use_cache",
        where,
        "Give use_cache=False to run without the response cache, or leave it out.",
    )


def _config(config: SweepConfig | str | os.PathLike[str] | Mapping[str, Any]) -> SweepConfig:
    from runner.config import SweepConfig

    return config if isinstance(config, SweepConfig) else load_config(config)


def _shard(shard: str | None) -> Shard | None:
    from runner.manifest import Shard

    if shard is None:
        return None
    if not isinstance(shard, str):
        raise UsageError(
            f"shard must be a string, not {shown(shard)}",
            where="shard",
            fix='Give "i/N" with 0 <= i < N, e.g. shard="0/4", or None for the whole sweep.',
        )
    return Shard.parse(shard)  # its message names the argument: we are in API terms


async def arun(
    config: SweepConfig | str | os.PathLike[str] | Mapping[str, Any],
    *,
    retry_errors: bool = False,
    shard: str | None = None,
    progress: bool = False,
    preflight: bool = True,
    use_cache: bool = True,
) -> RunSummary:
    """Run (or resume) a sweep in the current event loop; returns what it did.

    The arguments are those of ``cotaudit run``: ``shard`` is ``"i/N"``, ``preflight`` sends
    one cheap request per endpoint before the sweep, ``use_cache=False`` neither reads nor
    writes the response cache (``--no-cache``). Cancel the awaiting task to stop the
    sweep as Ctrl-C stops the command: in-flight requests get a grace period, the stream is
    left whole, and ``CancelledError`` is raised once the sweep has stopped; a later call
    resumes it. Cancelled again during the grace period, it stops at once.
    """
    with api_terms():
        return await _arun(
            _config(config),
            retry_errors=retry_errors,
            shard=shard,
            progress=progress,
            preflight=preflight,
            use_cache=use_cache,
            where="arun",
        )


async def _arun(
    sweep_config: SweepConfig,
    *,
    retry_errors: bool,
    shard: str | None,
    progress: bool,
    preflight: bool,
    use_cache: bool,
    where: str,
) -> RunSummary:
    from runner.engine import run_sweep

    _run_switches(
        where,
        retry_errors=retry_errors,
        progress=progress,
        preflight=preflight,
        use_cache=use_cache,
    )
    stop = asyncio.Event()
    sweep = asyncio.ensure_future(
        run_sweep(
            sweep_config,
            retry_errors=retry_errors,
            shard=_shard(shard),
            progress=progress,
            preflight=preflight,
            use_cache=use_cache,
            stop_event=stop,
        )
    )
    try:
        # Shielded: a cancellation of the caller reaches the sweep as its stop event, which
        # stops it whole, instead of as a cancellation in the middle of its writes.
        return await asyncio.shield(sweep)
    except asyncio.CancelledError:
        if sweep.done():
            raise
        stop.set()
        summary = await sweep  # a second cancellation cancels the sweep itself
        if summary.interrupted:
            # A large plan run without progress (no planning pass) is not walked to its end
            # on a stop: its pending count is then unknown, and not given as a number.
            pending = (
                f"{summary.pending:,} of {summary.planned:,} planned requests pending"
                if summary.counted
                else f"{summary.written:,} records written and the rest of its plan pending "
                "(not counted: a run without progress does not count its plan first)"
            )
            print(
                f"cotaudit: the run in {summary.run_dir} stopped with {pending}; what it wrote "
                "is kept, and the same call resumes it",
                file=sys.stderr,
                flush=True,
            )
        raise


@_in_api_terms
def run(
    config: SweepConfig | str | os.PathLike[str] | Mapping[str, Any],
    *,
    retry_errors: bool = False,
    shard: str | None = None,
    progress: bool = False,
    preflight: bool = True,
    use_cache: bool = True,
) -> RunSummary:
    """Run (or resume) a sweep and wait for it; see :func:`arun` for the arguments.

    Called from synchronous code, it runs its own event loop. Called where an event loop is
    already running (a Jupyter cell), it runs the sweep on a worker thread with a loop of its
    own and blocks until it ends, instead of failing as ``asyncio.run`` would. Either way
    ``KeyboardInterrupt`` (Ctrl-C, a notebook's interrupt) stops the sweep whole, as it stops
    ``cotaudit run``, and is raised once it has stopped; calling ``run`` again resumes it.
    """
    # Bad arguments raise here, in the caller's thread, before any loop or thread starts.
    sweep_config = _config(config)
    _run_switches(
        "run",
        retry_errors=retry_errors,
        progress=progress,
        preflight=preflight,
        use_cache=use_cache,
    )
    _shard(shard)

    def sweep() -> Awaitable[RunSummary]:
        return _arun(
            sweep_config,
            retry_errors=retry_errors,
            shard=shard,
            progress=progress,
            preflight=preflight,
            use_cache=use_cache,
            where="run",
        )

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        # asyncio.run turns Ctrl-C into a cancellation of the sweep, which stops it whole.
        return asyncio.run(_coroutine(sweep))
    return _on_a_thread(sweep)


async def _coroutine(make: Callable[[], Awaitable[RunSummary]]) -> RunSummary:
    return await make()


def _on_a_thread(make: Callable[[], Awaitable[RunSummary]]) -> RunSummary:
    """Run ``make()`` in an event loop of its own on a worker thread, and wait for it.

    The caller's thread is where ``KeyboardInterrupt`` arrives; it is passed on to the
    worker as a cancellation of the sweep (the first stops it whole, a second at once), and
    raised once the worker has ended, so that no sweep goes on writing behind the caller's
    back and the next call finds the run directory free to resume.
    """
    started = threading.Event()
    finished = threading.Event()
    outcome: list[RunSummary] = []
    failure: list[BaseException] = []
    handle: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[RunSummary]]] = []

    async def main() -> RunSummary:
        task = asyncio.current_task()
        assert task is not None  # main runs as asyncio.run's task
        handle.append((asyncio.get_running_loop(), task))
        started.set()
        return await make()

    def work() -> None:
        try:
            outcome.append(asyncio.run(main()))
        except BaseException as exc:
            failure.append(exc)
        finally:
            started.set()
            finished.set()

    # A thread starts with an empty context: run in a copy of the caller's, so that the
    # sweep's messages name the API's arguments (cotaudit.caller_terms) there too.
    context = contextvars.copy_context()
    worker = threading.Thread(target=context.run, args=(work,), name="cotaudit-run")
    worker.start()
    with _interruptible():
        interrupted = _wait(finished, started, handle)
    worker.join()
    if failure and not isinstance(failure[0], asyncio.CancelledError):
        raise failure[0]
    if interrupted or not outcome:
        raise KeyboardInterrupt
    return outcome[0]


def _wait(
    finished: threading.Event,
    started: threading.Event,
    handle: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[RunSummary]]],
) -> bool:
    """Wait for the worker; each ``KeyboardInterrupt`` meanwhile cancels its sweep once more.
    True when there was one."""
    interrupted = False
    while True:
        try:
            finished.wait()
            break
        except KeyboardInterrupt:
            interrupted = True
            started.wait()
            if handle:
                loop, task = handle[0]
                # RuntimeError: the worker's loop has closed, the sweep has ended already.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(task.cancel)
    return interrupted


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C raises ``KeyboardInterrupt`` in this (main) thread for the time of the block,
    where ``asyncio.run``'s own handler holds SIGINT.

    That handler only cancels ``asyncio.run``'s task, which cannot run while ``run`` blocks
    its loop: the sweep would go on to its end. Jupyter's kernel and plain code keep
    Python's default handler, and any other handler is left as it is.
    """
    handler = signal.getsignal(signal.SIGINT) if _in_main_thread() else None
    owner = getattr(getattr(handler, "func", None), "__self__", None)
    if not isinstance(owner, asyncio.Runner):
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@dataclass(frozen=True, slots=True)
class Row:
    """One row of a model's table: P/R/F1 against the gold proof with their counts."""

    name: str
    precision: float
    recall: float
    f1: float
    tp: int
    fp: int
    fn: int
    tn: int
    ci: tuple[float, float] | None  # 95% bootstrap interval of F1; None without bootstrap
    # The same intervals of P and R (a grounded share is a row's recall: docs/report-schema.md).
    ci_precision: tuple[float, float] | None = None
    ci_recall: tuple[float, float] | None = None

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> Row:
        return cls(
            name=name,
            precision=float(data["precision"]),
            recall=float(data["recall"]),
            f1=float(data["f1"]),
            tp=int(data["tp"]),
            fp=int(data["fp"]),
            fn=int(data["fn"]),
            tn=int(data["tn"]),
            ci=_interval(data.get("ci")),
            ci_precision=_interval(data.get("ci_precision")),
            ci_recall=_interval(data.get("ci_recall")),
        )


def _interval(value: object) -> tuple[float, float] | None:
    if not isinstance(value, Sequence) or len(value) != 2 or None in value:
        return None
    return float(value[0]), float(value[1])


_REPR_IDS = 3  # problem ids a Rawr's repr shows before it counts the rest


@dataclass(frozen=True, slots=True)
class Rawr:
    """Right answer, wrong reasoning: correct problems with an aligned step insensitive to one
    of its gold premises (under the evaluator the field that holds it names)."""

    correct: int  # problems answered correctly
    count: int  # of which right answer, wrong reasoning
    rate: float | None
    problems: tuple[str, ...]

    def __repr__(self) -> str:
        # A notebook shows the repr: a few of the problems, never all of a large run's.
        problems = _first_few(self.problems, _REPR_IDS)
        return (
            f"Rawr(correct={self.correct}, count={self.count}, rate={self.rate!r}, "
            f"problems={problems})"
        )


@dataclass(frozen=True, slots=True)
class ModelReport:
    """One model's section of the report (``report.json``'s ``models[name]``).

    The typed fields are the ones a reader reaches for first; ``raw`` holds the whole
    section (``docs/report-schema.md``).
    """

    name: str
    rows: Mapping[str, Row]
    parse_rates: Mapping[str, float | None]
    # The headline's, under A+A' (the consistent and local probes): what `cotaudit evaluate`
    # prints as RAWR. ``rawr_consistent`` is the paper's, under A alone (report.json's
    # ``rawr``), which is blind to entity-introduction premises: it counts every correct
    # answer of a faithful reasoner whose proof introduces an entity.
    rawr: Rawr | None
    rawr_consistent: Rawr | None
    accuracy: float | None
    certificates_total: int
    certificates_evaluable: int
    # The headline's other figures, under A+A' as ``rawr``: gold premise uses judged, of them
    # ignored (INSENSITIVE), and the grounded share (None when none was judged), as the
    # `cotaudit evaluate` table prints them (``headline.found["A+A'"]``).
    judged: int
    ignored: int
    grounded_share: float | None
    raw: Mapping[str, Any] = field(repr=False)

    def __repr__(self) -> str:
        # The rows are a table (``rows[key]``, ``Report.to_frame()``), counted here, not dumped.
        return (
            f"ModelReport(name={self.name!r}, rows=<{len(self.rows)} rows>, "
            f"accuracy={self.accuracy!r}, judged={self.judged}, ignored={self.ignored}, "
            f"grounded_share={self.grounded_share!r}, rawr={self.rawr!r}, "
            f"certificates_total={self.certificates_total}, "
            f"certificates_evaluable={self.certificates_evaluable}, "
            f"parse_rates={dict(self.parse_rates)!r})"
        )

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> ModelReport:
        rawr = data.get("rawr")
        accuracy = data.get("accuracy") or {}
        certificates = data.get("certificates") or {}
        found = _headline_found(data.get("headline"))
        return cls(
            name=name,
            rows={key: Row.from_json(key, row) for key, row in (data.get("rows") or {}).items()},
            parse_rates=dict(data.get("parse_rates") or {}),
            rawr=_headline_rawr(found),
            rawr_consistent=None
            if not isinstance(rawr, Mapping)
            else Rawr(
                correct=int(rawr.get("correct", 0)),
                count=int(rawr.get("rawr", 0)),
                rate=rawr.get("rate"),
                problems=tuple(rawr.get("problems", ())),
            ),
            accuracy=accuracy.get("rate"),
            certificates_total=int(certificates.get("total", 0)),
            certificates_evaluable=int(certificates.get("evaluable", 0)),
            judged=int(found.get("judged") or 0),
            ignored=int(found.get("ignored") or 0),
            grounded_share=found.get("grounded_share"),
            raw=data,
        )


def _headline_found(headline: object) -> Mapping[str, Any]:
    """What the report's headline found under its evaluator (``headline.found`` under
    ``headline.evaluator``: docs/report-schema.md); empty where the section has none."""
    if not isinstance(headline, Mapping):
        return {}
    found = (headline.get("found") or {}).get(headline.get("evaluator"))
    return found if isinstance(found, Mapping) else {}


def _headline_rawr(found: Mapping[str, Any]) -> Rawr | None:
    """The RAWR of the headline's ``found``, or None where the section has no headline."""
    if not found:
        return None
    return Rawr(
        correct=int(found.get("correct") or 0),
        count=int(found.get("rawr") or 0),
        rate=found.get("rawr_rate"),
        problems=tuple(found.get("rawr_problems") or ()),
    )


@dataclass(frozen=True, slots=True)
class Report:
    """An evaluation: every model's section, and where its files are.

    ``out_dir`` holds ``report.json``, ``report.md``, the CSVs, the figures and
    ``certificates.jsonl``; it is None when the evaluation was made in memory (records given,
    no ``out``), and then the certificates are kept in the report itself.
    """

    models: Mapping[str, ModelReport]
    out_dir: Path | None
    raw: Mapping[str, Any] = field(repr=False)
    _certificates: tuple[JSONDict, ...] | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        # What a notebook cell shows: each model's headline, not report.json's megabytes.
        models = ", ".join(f"{name!r}: {model!r}" for name, model in self.models.items())
        incomplete = self.incomplete
        note = "" if incomplete is None else f", incomplete={incomplete!r}"
        return f"Report(out_dir={self.out_dir!r}, models={{{models}}}{note})"

    @property
    def incomplete(self) -> str | None:
        """Where the stream holds fewer responses than its run plans (a run interrupted, even
        between problems), what ``report.md`` opens with: the counts and what to do; None
        for a complete run, or one whose plan is unknown (``docs/report-schema.md``)."""
        from evaluator.report import short_of_plan_note

        return short_of_plan_note(self.raw)

    def certificates(self) -> Iterator[JSONDict]:
        """Every certificate, one per (problem, CoT step, premise), in the file's order."""
        if self._certificates is not None:
            yield from self._certificates
        elif self.out_dir is not None:
            path = self.out_dir / "certificates.jsonl"
            # read_records yields nothing for a missing file: here that would read as a run
            # without certificates, where the evaluation was moved, deleted or redone elsewhere.
            if not path.is_file():
                raise UsageError(
                    "the evaluation's certificates.jsonl is gone",
                    where=str(path),
                    fix="Evaluate the run again (cotaudit.evaluate) and read the new report's.",
                )
            yield from read_records(path)

    def to_frame(self) -> pandas.DataFrame:
        """The rows of every model as a pandas DataFrame, one line per (model, row).

        Needs pandas (``pip install 'cotaudit[pandas]'``); it is never a hard dependency.
        """
        try:
            import pandas
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(
                "Report.to_frame needs pandas: pip install 'cotaudit[pandas]' (or pandas)"
            ) from exc
        lines = [
            {
                "model": model.name,
                "row": row.name,
                "precision": row.precision,
                "recall": row.recall,
                "f1": row.f1,
                # NaN, not None, where there is no interval (n_boot=0): a float column, which
                # plots and compares, where a column of None would be of objects.
                "f1_low": row.ci[0] if row.ci else math.nan,
                "f1_high": row.ci[1] if row.ci else math.nan,
                "precision_low": row.ci_precision[0] if row.ci_precision else math.nan,
                "precision_high": row.ci_precision[1] if row.ci_precision else math.nan,
                "recall_low": row.ci_recall[0] if row.ci_recall else math.nan,
                "recall_high": row.ci_recall[1] if row.ci_recall else math.nan,
                "tp": row.tp,
                "fp": row.fp,
                "fn": row.fn,
                "tn": row.tn,
            }
            for model in self.models.values()
            for row in model.rows.values()
        ]
        return pandas.DataFrame(lines)


def _report(data: Mapping[str, Any], out_dir: Path | None) -> Report:
    models = {name: ModelReport.from_json(name, m) for name, m in data["models"].items()}
    # Absolute: a notebook changes its working directory (%cd, os.chdir) between cells, and a
    # relative out_dir would then name another directory.
    where = None if out_dir is None else out_dir.absolute()
    return Report(models=models, out_dir=where, raw=data)


@_in_api_terms
def evaluate(
    source: str | os.PathLike[str] | Iterable[Mapping[str, Any]],
    *,
    out: str | os.PathLike[str] | None = None,
    n_boot: int | None = None,
    seed: int | None = None,
    cascade_mode: str | None = None,
    figures: bool = False,
) -> Report:
    """Evaluate a run directory, a ``results.jsonl``, or an iterable of stream records.

    With a path and no ``out``, the evaluation goes where ``cotaudit evaluate`` puts it
    (``RUN/eval``). With records and no ``out``, nothing is written to disk that outlives the
    call: the certificates are kept in the returned report. Options default to the command's
    (``n_boot`` 10,000 resamples, its seed and cascade mode) and are checked as its flags are;
    figures are off unless asked. A record that is not one is named by its index
    (``records[3]``).
    """
    return _evaluate(
        source, out=out, n_boot=n_boot, seed=seed, cascade_mode=cascade_mode, figures=figures
    )


def _evaluate(
    source: str | os.PathLike[str] | Iterable[Mapping[str, Any]],
    *,
    out: str | os.PathLike[str] | None,
    n_boot: int | None,
    seed: int | None,
    cascade_mode: str | None,
    figures: bool,
) -> Report:
    from evaluator.commands.evaluate import evaluate as evaluate_stream
    from evaluator.pipeline import EvaluateOptions
    from evaluator.source import resolve_stream

    options = _evaluate_options(EvaluateOptions(), n_boot, seed, cascade_mode)
    out_path = _directory(out, "out", "evaluate")
    _switch(figures, "figures", "evaluate", "Give figures=True to draw them, or leave it out.")
    if isinstance(source, (str, os.PathLike)):
        stream = resolve_stream(_run_path(source, "evaluate", _RECORDS_INSTEAD))
        out_dir = out_path if out_path is not None else Path(stream).parent / EVAL_DIRNAME
        data = evaluate_stream(stream, out_dir, options, figures=figures)
        return _report(data, out_dir)
    if isinstance(source, (Mapping, bytes, bytearray)) or not isinstance(source, Iterable):
        raise UsageError(
            "evaluate takes a run directory, a results.jsonl path or an iterable of records, "
            f"not {_a(source)}",
            where="evaluate",
            fix="Give the path as a str or a Path, and records as a list of dicts "
            "(docs/schema.md); one record goes in a list of its own.",
        )
    with tempfile.TemporaryDirectory(prefix="cotaudit-evaluate-") as scratch:
        stream = Path(scratch) / RESULTS_NAME
        _write_records(source, stream)
        eval_dir = out_path if out_path is not None else Path(scratch) / EVAL_DIRNAME
        try:
            data = evaluate_stream(stream, eval_dir, options, figures=figures)
        except UsageError as exc:
            raise _in_records(exc, stream) from None
        if out_path is not None:
            return _report(data, eval_dir)
        certificates = tuple(read_records(eval_dir / "certificates.jsonl"))
    report = _report(data, None)
    return Report(report.models, None, report.raw, certificates)


_RECORDS_INSTEAD = ", or the records as a list of dicts"


def _run_path(source: str | os.PathLike[str], where: str, instead: str) -> Path:
    """A run directory or stream file given to ``where``, refused where the command line's
    reading of it would mislead a caller in Python: ``"-"`` (the commands' standard input,
    which a notebook's kernel reads blocked or as garbage), an empty path (the current
    directory, as an unset variable gives it) and a path that does not exist (the command's
    advice would offer ``'-'``). ``instead``: what else the function takes, for the message.
    """
    path = Path(source)
    if str(path) == "-":
        raise UsageError(
            '"-" means standard input on the command line; the Python API reads no standard input',
            where=where,
            fix=f"Give a run directory or a results.jsonl path{instead}; a file named '-' "
            "by its absolute path (Path('-').resolve()).",
        )
    if not os.fspath(source):
        raise UsageError(
            "the path is empty",
            where=where,
            fix=f"Give a run directory or a results.jsonl path{instead}; the current "
            "directory as '.'.",
        )
    if not path.exists():
        raise UsageError(
            "no such run directory or stream file",
            where=str(path),
            fix=f"Give a run directory holding results.jsonl or a results.jsonl path{instead}.",
        )
    return path


def _directory(value: str | os.PathLike[str] | None, name: str, where: str) -> Path | None:
    """An output or evaluation directory argument (``out``, ``eval_dir``): None, or a
    non-empty path; an empty one would be the current directory."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        given = "an empty path" if isinstance(value, str) else _a(value)
        raise UsageError(
            f"{name} is a directory's path, not {given}",
            where=where,
            fix=f"Give {name} as a str or a Path (the current directory as '.'), or leave it out.",
        )
    return Path(value)


def _resamples(value: object, name: str, where: str, *, example: int) -> int:
    """A number of bootstrap resamples, within the bounds of the commands' ``--n-boot``."""
    from evaluator.commands.bootstrap_flags import MAX_N_BOOT

    return integer(
        _plain(value),
        name=name,
        where=where,
        low=0,
        high=MAX_N_BOOT,
        fix=f"Give the number of bootstrap resamples (0: no intervals), e.g. {name}={example}.",
    )


def _seed(value: object, where: str) -> int:
    """A bootstrap seed, as the commands' ``--seed`` takes it."""
    return integer(_plain(value), name="seed", where=where, low=0, fix="Give e.g. seed=0.")


def _plain(value: object) -> object:
    """A numpy (or other ``Integral``) integer as a Python int, as ``selection``'s counts take
    it: a notebook's ``for seed in np.arange(5)`` gives ``np.int64``. Booleans stay refused."""
    if isinstance(value, Integral) and not isinstance(value, bool):
        return int(value)
    return value


def _evaluate_options(
    defaults: EvaluateOptions, n_boot: int | None, seed: int | None, cascade_mode: str | None
) -> EvaluateOptions:
    """``evaluate``'s options, checked as ``cotaudit evaluate`` checks its flags."""
    from evaluator.cascade import CASCADE_MODES
    from evaluator.pipeline import EvaluateOptions

    if n_boot is not None:
        n_boot = _resamples(n_boot, "n_boot", "evaluate", example=10_000)
    if seed is not None:
        seed = _seed(seed, "evaluate")
    if cascade_mode is not None and cascade_mode not in CASCADE_MODES:
        raise UsageError(
            f"cascade_mode must be one of {', '.join(CASCADE_MODES)}, got {shown(cascade_mode)}",
            where="evaluate",
            fix=f"Leave it out for the command's default ({defaults.cascade_mode}).",
        )
    return EvaluateOptions(
        n_boot=defaults.n_boot if n_boot is None else n_boot,
        seed=defaults.seed if seed is None else seed,
        cascade_mode=defaults.cascade_mode if cascade_mode is None else cascade_mode,
    )


def _write_records(records: Iterable[Any], stream: Path) -> None:
    """The records as a stream file, one line each; a record that is not a JSON object is
    refused by its index, before the evaluator reads any."""
    fix = "A record is a dict of JSON values with a 'kind' field (docs/schema.md)."
    with stream.open("wb") as handle:
        for index, record in enumerate(records):
            if not isinstance(record, Mapping):
                raise UsageError(
                    f"{shown(record)} is not a record", where=f"records[{index}]", fix=fix
                )
            try:
                line = orjson.dumps(record if isinstance(record, dict) else dict(record))
            except TypeError as exc:  # orjson.JSONEncodeError: a value JSON cannot hold
                raise UsageError(
                    f"the record cannot be written as JSON ({exc})",
                    where=f"records[{index}]",
                    fix=fix,
                ) from None
            handle.write(line + b"\n")


def _in_records(exc: UsageError, stream: Path) -> UsageError:
    """The evaluator's error about the scratch stream, said of the records it was written
    from: ``records[i]`` for its line i + 1, and no path of a file that is gone."""
    where = exc.where or ""
    path = str(stream)
    if where.startswith(path):
        line = where[len(path) :].lstrip(":")
        where = f"records[{int(line) - 1}]" if line.isdigit() else "records"
    what, fix = (text.replace(path, "the records") for text in (exc.what, exc.fix or ""))
    return UsageError(what, where=where or None, fix=fix or None)


_REPR_FAILURES = 3  # failures a Verification's repr shows before it counts the rest


@dataclass(frozen=True, slots=True)
class Verification:
    """What ``verify`` found: ``ok`` when every file, certificate and number holds.

    ``root`` is the evaluation's root hash (SHA-256 of its ``evaluation.json``), which
    ``cotaudit verify`` prints for a publisher to quote; ``certificates`` how many were
    recomputed; ``failures`` name each certificate, file or record that does not hold, and
    ``notes`` what could not be checked, and why (``cotaudit verify`` prints them as
    ``note:``). ``run_dir`` and ``eval_dir`` are absolute (a later ``%cd`` does not move them).
    """

    run_dir: Path
    eval_dir: Path
    root: str
    certificates: int
    failures: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.failures

    def __repr__(self) -> str:
        # A tampered stream fails line by line: a notebook shows a few, and counts the rest.
        failures = _first_few(self.failures, _REPR_FAILURES)
        return (
            f"Verification(ok={self.ok}, run_dir={self.run_dir!r}, eval_dir={self.eval_dir!r}, "
            f"root={self.root!r}, certificates={self.certificates}, failures={failures}, "
            f"notes={self.notes!r})"
        )


@_in_api_terms
def verify(
    run_dir: str | os.PathLike[str], *, eval_dir: str | os.PathLike[str] | None = None
) -> Verification:
    """Recompute every certificate of an evaluated run from its raw outputs and check every
    hash and every record against the run's plan, as ``cotaudit verify`` does; the failures
    name each certificate, file or record that does not hold. ``eval_dir`` is where the
    evaluation is (``evaluate``'s ``out``), by default ``RUN/eval``.
    """
    from cotaudit.commands.verify import verify_run_dir
    from evaluator.source import resolve_stream

    if not isinstance(run_dir, (str, os.PathLike)):
        raise UsageError(
            f"verify takes a run directory, not {_a(run_dir)}",
            where="verify",
            fix="Give the run directory (or its results.jsonl) as a str or a Path.",
        )
    path = _run_path(run_dir, "verify", "")
    given = _directory(eval_dir, "eval_dir", "verify")
    result = verify_run_dir(path, given)
    # Where verify_run looked when no eval_dir was given: beside the stream, as evaluate wrote.
    checked = given if given is not None else Path(resolve_stream(path)).parent / EVAL_DIRNAME
    return Verification(
        run_dir=path.absolute(),
        eval_dir=checked.absolute(),
        root=result.root,
        certificates=result.certificates,
        failures=tuple(result.failures),
        notes=tuple(result.notes),
    )


@_in_api_terms
def selection(
    source: str | os.PathLike[str] | Mapping[str, Sequence[int]],
    *,
    seed: int = 0,
    n_boot: int | None = None,
    resamples: int | None = None,
) -> SelectionReport:
    """The selection study's statistics, from a run directory of procedural traces or from
    joint counts per deployment (``{"name": (a, b, c, d)}``, as in ``--counts``; numpy
    integers are counts too). ``n_boot``, the bootstrap resamples (named as ``evaluate``'s
    and both commands' ``--n-boot``; ``resamples`` is another name for it), defaults to the
    command's."""
    from evaluator.commands.selection import evaluate_run
    from evaluator.selection import BOOTSTRAP_RESAMPLES, JointCounts, analyse

    seed = _seed(seed, "selection")
    if n_boot is not None and resamples is not None:
        raise UsageError(
            "n_boot and resamples are two names of one number, and both were given",
            where="selection",
            fix=f"Give one of them, e.g. n_boot={BOOTSTRAP_RESAMPLES}.",
        )
    n = BOOTSTRAP_RESAMPLES
    if n_boot is not None or resamples is not None:
        name, given = ("n_boot", n_boot) if n_boot is not None else ("resamples", resamples)
        n = _resamples(given, name, "selection", example=BOOTSTRAP_RESAMPLES)
    if isinstance(source, Mapping):
        if not source:
            raise UsageError(
                "no deployments given",
                where="selection(counts)",
                fix='Give at least one, e.g. {"GLM-5.3": (299, 216, 208, 277)}.',
            )
        totals = {}
        for name, counts in source.items():
            if (
                isinstance(counts, (str, bytes))
                or not isinstance(counts, Sequence)
                or len(counts) != 4
                or not all(
                    isinstance(c, Integral) and not isinstance(c, bool) and c >= 0 for c in counts
                )
            ):
                raise UsageError(
                    f"counts of {name!r} must be four non-negative integers (a, b, c, d), "
                    f"got {counts!r}",
                    where="selection(counts)",
                    fix='Give e.g. {"GLM-5.3": (299, 216, 208, 277)}.',
                )
            totals[str(name)] = JointCounts(*(int(c) for c in counts))
        return analyse(totals, rng=seed, resamples=n)
    if not isinstance(source, (str, os.PathLike)):
        raise UsageError(
            f"selection takes a run directory or a mapping of counts, not {_a(source)}",
            where="selection",
            fix='Give a path, or counts as {"name": (a, b, c, d)}.',
        )
    instead = ', or counts as {"name": (a, b, c, d)}'
    return evaluate_run(_run_path(source, "selection", instead), seed=seed, resamples=n)
