"""Auditing complete groups here or in worker processes, results in the order of the groups.

The pipeline hands every complete group to an *auditor* (:func:`auditor`) and merges what
comes back in the order it handed them over, so the certificates and the report are the same
byte for byte whichever auditor ran (``tests/evaluator/test_parallel.py``):

- :class:`InlineAuditor` audits each group at once, in the reading process;
- :class:`PoolAuditor` sends groups, batched, to worker processes (``multiprocessing``,
  spawned: fresh interpreters, which never inherit the reading process's threads or locks,
  and whose CPU time is the reading process's children's) and
  yields their results in submission order. It keeps a bounded number of batches in flight:
  the reader waits rather than queueing the whole stream, so memory stays bounded by the
  open groups and the batches in flight. A batch carries the groups' raw lines (bytes),
  never parsed records, and comes back as the per-problem summaries
  (``evaluator.jobs.AuditSummary``), never per-pair objects. Neither the batch nor its
  certificate lines cross the pipe: the batch goes to the worker as a file, and the worker
  writes the certificate lines to a *spool file*, both named by the batch's place in the
  submission order; the reading process takes each spool file's bytes in that order (one
  read, no unpickling) and deletes it. Only paths travel through the pipe, so the pool's task
  thread is never left blocked mid-message (``Pool.terminate`` could wait for it forever).
  The files live in a directory of their own (in the evaluation's staging directory for
  ``evaluate``, the system's temporary directory for ``verify``), removed when the auditor
  closes: on success, on an error, on Ctrl-C or SIGTERM.

Workers ignore SIGINT from their first instruction (they start with it blocked:
``evaluator.child_call``) and SIGTERM's default is kept: the reading process owns the
evaluation, and on any failure or signal it terminates them before it cleans up.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import pickle
import shutil
import signal
import tempfile
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing.pool import AsyncResult, Pool
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import TracebackType

from cotaudit.flags import integer_flag
from evaluator.child_call import children_start_with_sigint_blocked, ignore_sigint
from evaluator.cpus import usable_cpus
from evaluator.jobs import AuditJob, JobSettings, run_job
from evaluator.orphans import exit_with_parent
from evaluator.tally import ModelTally

BATCH_JOBS = 64  # groups per batch sent to a worker
BATCH_BYTES = 1 << 20  # ... or fewer, once their raw lines reach this size
IN_FLIGHT_PER_WORKER = 3  # batches queued or running per worker
PARALLEL_MIN_BYTES = 32 << 20  # streams smaller than this are audited in one process
TERMINATE_WAIT_S = 10.0  # how long a stopped evaluation waits for its pool to terminate

_SETTINGS: list[JobSettings] = []  # the worker's settings, set once by its initializer


@dataclass(slots=True)
class BatchResult:
    """What a batch of groups adds to an evaluation: their certificates as lines, in order,
    and one tally per report section (in the order the sections first appear), merged
    where the groups were audited so that few objects travel back."""

    certificate_lines: bytes
    tallies: list[tuple[str, ModelTally]]
    audits: int  # the groups (one model on one problem) of the batch
    spool: str | None = None  # the file holding ``certificate_lines`` instead (a worker's)


def run_batch(
    jobs: Sequence[AuditJob], settings: JobSettings, spool: str | None = None
) -> BatchResult:
    """Audit a batch of groups, in order; their summaries merged per section. With ``spool``
    (a file path), the certificate lines go to that file rather than into the result."""
    lines: list[bytes] = []
    tallies: dict[str, ModelTally] = {}
    for job in jobs:
        for summary in run_job(job, settings):
            lines.append(summary.certificate_lines)
            tally = tallies.get(summary.section)
            if tally is None:
                tally = tallies[summary.section] = ModelTally()
            tally.add(summary)
    if spool is not None:
        with open(spool, "wb") as handle:
            handle.writelines(lines)
        return BatchResult(b"", list(tallies.items()), len(jobs), spool)
    return BatchResult(b"".join(lines), list(tallies.items()), len(jobs))


def _taken(path: str) -> bytes:
    """The bytes of a file handed over between the processes, which is then deleted."""
    data = Path(path).read_bytes()
    Path(path).unlink()
    return data


def _unspooled(result: BatchResult) -> BatchResult:
    """``result`` with its certificate lines read back from its spool file (then deleted)."""
    if result.spool is None:
        return result
    return replace(result, certificate_lines=_taken(result.spool), spool=None)


def default_workers(stream_bytes: int | None) -> int:
    """Worker processes for a stream of ``stream_bytes`` (None: unknown, e.g. stdin): one per
    usable CPU for a large stream, none (audit in the reading process) otherwise."""
    cpus = usable_cpus()
    if cpus < 2 or stream_bytes is None or stream_bytes < PARALLEL_MIN_BYTES:
        return 0
    return cpus


class InlineAuditor:
    """Audit groups in this process, in the same batches as the pool."""

    def __init__(self, settings: JobSettings) -> None:
        self._settings = settings
        self._batch: list[AuditJob] = []
        self._batch_bytes = 0

    def submit(self, job: AuditJob) -> None:
        self._batch.append(job)
        self._batch_bytes += len(job.lines)

    def ready(self) -> Iterator[BatchResult]:
        """The batch, once full, audited."""
        if len(self._batch) >= BATCH_JOBS or self._batch_bytes >= BATCH_BYTES:
            yield from self.drain()

    def drain(self) -> Iterator[BatchResult]:
        """Every group submitted, audited."""
        if self._batch:
            batch, self._batch, self._batch_bytes = self._batch, [], 0
            yield run_batch(batch, self._settings)

    def __enter__(self) -> InlineAuditor:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._batch.clear()


def _init_worker(settings: JobSettings) -> None:
    ignore_sigint()  # Ctrl-C is the reading process's to handle
    exit_with_parent()
    _SETTINGS[:] = [settings]


def _run_batch(batch: str, spool: str) -> BatchResult:
    """The worker's side: the batch's jobs from their file (deleted once read)."""
    jobs: list[AuditJob] = pickle.loads(_taken(batch))
    return run_batch(jobs, _SETTINGS[0], spool)


def _new_children(before: set[int | None]) -> list[BaseProcess]:
    return [p for p in multiprocessing.active_children() if p.pid not in before]


class PoolAuditor:
    """Audit groups in ``workers`` processes; results come back in submission order, their
    certificates through spool files in a new directory under ``spool_dir`` (None: the
    system's temporary directory), removed on close."""

    def __init__(self, settings: JobSettings, workers: int, spool_dir: Path | None = None) -> None:
        self._spool = Path(tempfile.mkdtemp(prefix="cotaudit-spool-", dir=spool_dir))
        self._batches = 0
        context = multiprocessing.get_context("spawn")
        before = {p.pid for p in multiprocessing.active_children()}
        pool: Pool | None = None
        try:
            # The workers start with SIGINT blocked until their initializer ignores it: a
            # Ctrl-C while they start (importing) would print a traceback from each.
            with children_start_with_sigint_blocked():
                pool = context.Pool(workers, initializer=_init_worker, initargs=(settings,))
        except BaseException:
            # A Ctrl-C that came while the pool started is raised once it has: stop it.
            if pool is not None:
                self._pool = pool
                self._workers = _new_children(before)
                self._terminate()
            shutil.rmtree(self._spool, ignore_errors=True)
            raise
        self._pool = pool
        self._workers = _new_children(before)
        self._limit = max(2, workers * IN_FLIGHT_PER_WORKER)
        self._in_flight: deque[AsyncResult[BatchResult]] = deque()
        self._batch: list[AuditJob] = []
        self._batch_bytes = 0

    def submit(self, job: AuditJob) -> None:
        # Raw lines only: the worker parses them again rather than unpickling the records.
        self._batch.append(replace(job, records=None))
        self._batch_bytes += len(job.lines)
        if len(self._batch) >= BATCH_JOBS or self._batch_bytes >= BATCH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self._batch:
            # The batch goes to the worker as a file too, so only two paths cross the pipe.
            # A megabyte batch sent through it would leave the pool's task thread blocked
            # mid-message whenever the workers are busy, and Pool.terminate (on an error or
            # Ctrl-C) can then wait for that thread forever once it has stopped the workers.
            name = self._spool / f"{self._batches:09d}"
            self._batches += 1
            batch = name.with_suffix(".batch")
            batch.write_bytes(pickle.dumps(self._batch, protocol=pickle.HIGHEST_PROTOCOL))
            task = (str(batch), str(name.with_suffix(".jsonl")))
            self._in_flight.append(self._pool.apply_async(_run_batch, task))
            self._batch, self._batch_bytes = [], 0

    def ready(self) -> Iterator[BatchResult]:
        """Results that are done, in submission order; waits while too many are in flight."""
        while self._in_flight and (
            len(self._in_flight) >= self._limit or self._in_flight[0].ready()
        ):
            yield _unspooled(self._in_flight.popleft().get())

    def _terminate(self) -> None:
        """Stop the workers at once (an error or a signal ends the evaluation).

        ``Pool.terminate`` can wait forever: a worker killed while it put a result on the
        pool's queue leaves that queue's lock taken, and the pool's task thread then blocks on
        it, with ``terminate`` joining that thread. So it runs in a thread of its own, waited
        for at most ``TERMINATE_WAIT_S``; past that the workers are killed (they are the
        evaluation's: nothing of theirs is kept) and the pool's threads are left behind.
        """
        pool = self._pool

        def stop() -> None:
            pool.terminate()
            pool.join()

        stopping = threading.Thread(target=stop, name="cotaudit-pool-stop", daemon=True)
        stopping.start()
        stopping.join(TERMINATE_WAIT_S)
        if stopping.is_alive():
            for worker in self._workers:
                with contextlib.suppress(OSError):  # one already gone
                    worker.kill()

    def drain(self) -> Iterator[BatchResult]:
        """Every result still owed, in submission order."""
        self._flush()
        while self._in_flight:
            yield _unspooled(self._in_flight.popleft().get())

    def __enter__(self) -> PoolAuditor:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            if kind is None:
                self._pool.close()
                self._pool.join()
            else:
                self._terminate()
        finally:
            # After the join: no worker is left to write a spool file.
            shutil.rmtree(self._spool, ignore_errors=True)


Auditor = InlineAuditor | PoolAuditor


def auditor(settings: JobSettings, workers: int, spool_dir: Path | None = None) -> Auditor:
    """An auditor with ``workers`` processes (0: in this process); ``spool_dir``: where the
    workers' spool directory is made (None: the system's temporary directory)."""
    if workers <= 0:
        return InlineAuditor(settings)
    return PoolAuditor(settings, workers, spool_dir)


def add_workers_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--workers N`` option of ``evaluate`` and ``verify``."""
    most = max_workers()
    parser.add_argument(
        "--workers",
        type=integer_flag(
            low=0,
            high=most,
            fix=f"give at most {most} (4 per CPU of this machine), or 0 for none",
        ),
        default=None,
        metavar="N",
        help="worker processes auditing problems in parallel (default: one per CPU for "
        f"streams of {PARALLEL_MIN_BYTES >> 20} MiB or more, none below; 0: audit in this "
        "process); the results do not depend on it",
    )


WORKERS_PER_CPU = 4  # more buys nothing (the audit is CPU-bound) and costs a process each


def max_workers() -> int:
    """The most ``--workers`` accepts: a bound from this machine's CPUs, so that a typo is
    refused rather than spawning processes until memory runs out."""
    return WORKERS_PER_CPU * max(usable_cpus(), 1)


class Terminated(SystemExit):
    """SIGTERM, raised in the main thread so that what was half-written is cleaned up."""


@contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` (exit status 143) instead of
    ending the process where it stands, so that cleanup (``finally``, context managers)
    runs: an evaluation leaves no partial directory or temporary file behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Terminated(128 + signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
