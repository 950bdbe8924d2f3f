"""The Python API: what the command line does, as functions a notebook can call.

``load_config`` -> ``run`` / ``arun`` -> ``evaluate`` -> ``verify``; ``selection`` for the
selection study. Each takes the same inputs as its command and raises ``UsageError`` where the
command would exit 2. ``run`` is safe inside a running event loop (Jupyter): it then runs the
sweep on a thread of its own. ``docs/api.md`` shows a session.

The runner and the evaluator are imported only when a function needs them, so
``import cotaudit`` stays light.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from cotaudit.errors import UsageError
from cotaudit.schema import EVAL_DIRNAME, RESULTS_NAME, JSONDict, read_records

if TYPE_CHECKING:
    import pandas

    from evaluator.selection import SelectionReport
    from runner.config import SweepConfig
    from runner.engine import RunSummary


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any], *, base_dir: str | os.PathLike[str] = "."
) -> SweepConfig:
    """A validated sweep config from a TOML file's path, or from a mapping of the same shape.

    Relative paths in a mapping (``run_dir``, ``cache_dir``, a task's ``path``) are resolved
    against ``base_dir`` (the current directory by default); in a file, against the file's
    directory, as ``cotaudit run`` does.
    """
    from runner.config import config_from_mapping
    from runner.config import load_config as load_file

    if isinstance(source, Mapping):
        return config_from_mapping(source, config_dir=Path(base_dir).resolve())
    return load_file(Path(source))


def _config(config: SweepConfig | str | os.PathLike[str] | Mapping[str, Any]) -> SweepConfig:
    from runner.config import SweepConfig

    return config if isinstance(config, SweepConfig) else load_config(config)


async def arun(
    config: SweepConfig | str | os.PathLike[str] | Mapping[str, Any],
    *,
    retry_errors: bool = False,
    shard: str | None = None,
    progress: bool = False,
    preflight: bool = True,
) -> RunSummary:
    """Run (or resume) a sweep in the current event loop; returns what it did.

    The arguments are those of ``cotaudit run``: ``shard`` is ``"i/N"``, ``preflight`` sends
    one cheap request per endpoint before the sweep. Cancel the awaiting task to stop the
    sweep; what was written stays whole and a later run resumes it.
    """
    from runner.engine import run_sweep
    from runner.manifest import Shard

    return await run_sweep(
        _config(config),
        retry_errors=retry_errors,
        shard=Shard.parse(shard) if shard else None,
        progress=progress,
        preflight=preflight,
    )


def run(
    config: SweepConfig | str | os.PathLike[str] | Mapping[str, Any],
    *,
    retry_errors: bool = False,
    shard: str | None = None,
    progress: bool = False,
    preflight: bool = True,
) -> RunSummary:
    """Run (or resume) a sweep and wait for it; see :func:`arun` for the arguments.

    Called from synchronous code, it runs its own event loop. Called where an event loop is
    already running (a Jupyter cell), it runs the sweep on a worker thread with a loop of its
    own and blocks until it ends, instead of failing as ``asyncio.run`` would.
    """
    coroutine = arun(
        config,
        retry_errors=retry_errors,
        shard=shard,
        progress=progress,
        preflight=preflight,
    )
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="cotaudit-run") as pool:
        return pool.submit(asyncio.run, coroutine).result()


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

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> Row:
        ci = data.get("ci")
        return cls(
            name=name,
            precision=float(data["precision"]),
            recall=float(data["recall"]),
            f1=float(data["f1"]),
            tp=int(data["tp"]),
            fp=int(data["fp"]),
            fn=int(data["fn"]),
            tn=int(data["tn"]),
            ci=None if ci is None else (float(ci[0]), float(ci[1])),
        )


@dataclass(frozen=True, slots=True)
class Rawr:
    """Right answer, wrong reasoning: correct problems with an aligned step insensitive to one
    of its gold premises."""

    correct: int  # problems answered correctly
    count: int  # of which right answer, wrong reasoning
    rate: float | None
    problems: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ModelReport:
    """One model's section of the report (``report.json``'s ``models[name]``).

    The typed fields are the ones a reader reaches for first; ``raw`` holds the whole
    section (``docs/report-schema.md``).
    """

    name: str
    rows: Mapping[str, Row]
    parse_rates: Mapping[str, float | None]
    rawr: Rawr | None
    accuracy: float | None
    certificates_total: int
    certificates_evaluable: int
    raw: Mapping[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> ModelReport:
        rawr = data.get("rawr")
        accuracy = data.get("accuracy") or {}
        certificates = data.get("certificates") or {}
        return cls(
            name=name,
            rows={key: Row.from_json(key, row) for key, row in (data.get("rows") or {}).items()},
            parse_rates=dict(data.get("parse_rates") or {}),
            rawr=None
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
            raw=data,
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
            yield from read_records(self.out_dir / "certificates.jsonl")

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
                "f1_low": row.ci[0] if row.ci else None,
                "f1_high": row.ci[1] if row.ci else None,
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
    return Report(models=models, out_dir=out_dir, raw=data)


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
    (``n_boot`` 10,000 resamples, its seed and cascade mode); figures are off unless asked.
    """
    from evaluator.commands.evaluate import evaluate as evaluate_stream
    from evaluator.pipeline import EvaluateOptions
    from evaluator.source import resolve_stream

    defaults = EvaluateOptions()
    options = EvaluateOptions(
        n_boot=defaults.n_boot if n_boot is None else n_boot,
        seed=defaults.seed if seed is None else seed,
        cascade_mode=defaults.cascade_mode if cascade_mode is None else cascade_mode,  # type: ignore[arg-type]
    )
    if isinstance(source, (str, os.PathLike)):
        stream = resolve_stream(Path(source))
        out_dir = Path(out) if out is not None else Path(stream).parent / EVAL_DIRNAME
        data = evaluate_stream(stream, out_dir, options, figures=figures)
        return _report(data, out_dir)
    with tempfile.TemporaryDirectory(prefix="cotaudit-evaluate-") as scratch:
        stream = Path(scratch) / RESULTS_NAME
        with stream.open("wb") as handle:
            for record in source:
                handle.write(orjson.dumps(record) + b"\n")
        if out is not None:
            out_dir = Path(out)
            data = evaluate_stream(stream, out_dir, options, figures=figures)
            return _report(data, out_dir)
        eval_dir = Path(scratch) / EVAL_DIRNAME
        data = evaluate_stream(stream, eval_dir, options, figures=figures)
        certificates = tuple(read_records(eval_dir / "certificates.jsonl"))
    report = _report(data, None)
    return Report(report.models, None, report.raw, certificates)


@dataclass(frozen=True, slots=True)
class Verification:
    """What ``verify`` found: ``ok`` when every certificate holds."""

    run_dir: Path
    failures: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.failures


def verify(
    run_dir: str | os.PathLike[str], *, eval_dir: str | os.PathLike[str] | None = None
) -> Verification:
    """Recompute every certificate of an evaluated run from its raw outputs and check every
    hash and every record against the run's plan, as ``cotaudit verify`` does; the failures
    name each certificate, file or record that does not hold.
    """
    from cotaudit.commands.verify import verify_run_dir

    result = verify_run_dir(Path(run_dir), None if eval_dir is None else Path(eval_dir))
    return Verification(Path(run_dir), tuple(result.failures))


def selection(
    source: str | os.PathLike[str] | Mapping[str, tuple[int, int, int, int]],
    *,
    seed: int = 0,
    resamples: int | None = None,
) -> SelectionReport:
    """The selection study's statistics, from a run directory of procedural traces or from
    joint counts per deployment (``{"name": (a, b, c, d)}``, as in ``--counts``)."""
    from cotaudit.constants import BOOTSTRAP_RESAMPLES
    from evaluator.commands.selection import evaluate_run
    from evaluator.selection import JointCounts, analyse

    n = BOOTSTRAP_RESAMPLES if resamples is None else resamples
    if isinstance(source, Mapping):
        if not source:
            raise UsageError("no deployments given", where="selection(counts)")
        totals = {}
        for name, counts in source.items():
            if len(counts) != 4 or not all(isinstance(c, int) and c >= 0 for c in counts):
                raise UsageError(
                    f"counts of {name!r} must be four non-negative integers (a, b, c, d)",
                    where="selection(counts)",
                )
            totals[str(name)] = JointCounts(*counts)
        return analyse(totals, rng=seed, resamples=n)
    return evaluate_run(Path(source), seed=seed, resamples=n)
