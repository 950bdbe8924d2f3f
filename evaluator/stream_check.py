"""Whether a stream can be evaluated as it is: one audit of one problem set, with something to
audit. ``cotaudit evaluate`` refuses, with a message saying why and what to do (exit 2):

- a stream with response records none of which succeeded (every request failed for good);
- a stream of another task (``prompts``, ``procedural``): only ProntoQA grounding audits are
  evaluated (the selection study has ``cotaudit selection``);
- a stream that joins runs: ``cat a/results.jsonl b/results.jsonl | cotaudit evaluate -``.
  Four signs, none of which one run or its merged shards ever shows (docs/schema.md,
  "Reading rules"): a problem id declared twice with different content; a second record of a
  request that had succeeded (sent again by an overlapping run, or a shard's stream given
  twice), wherever it stands; *segments* (a segment starts where a problem the current one
  declared is declared again: one run declares each problem once, a merged shard declares
  them again) whose models do not overlap and whose problem sets differ; and two models
  whose responses share no problem at all. The last two are models that would be reported
  side by side on different problems.

A stream cannot say where one source ended and the next began, so it is refused rather than
split: evaluate each run on its own and compare them with ``cotaudit compare``, which pairs
them on the problems they share (docs/comparison.md).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import orjson

from cotaudit.caller_terms import run_with
from cotaudit.errors import UsageError
from cotaudit.schema import JSONDict

AUDITED_TASK = "prontoqa"
OTHER_TASKS = {
    "prompts": "a prompts run has no premises to audit; its responses are in results.jsonl as "
    "they are",
    "procedural": "it is the selection study's: run `cotaudit selection RUN_DIR` instead",
}
PROBLEM_FIELDS = ("premises", "question", "answer", "proof")  # what makes a problem the same


def problem_digest(record: JSONDict) -> str:
    """A digest of what makes two problem records the same problem (not their ``extra``)."""
    content = {k: record.get(k) for k in PROBLEM_FIELDS}
    return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


@dataclass(slots=True)
class _Segment:
    first_line: int
    last_line: int = 0
    problems: set[str] = field(default_factory=set)
    endpoints: set[str] = field(default_factory=set)


@dataclass(slots=True)
class StreamCheck:
    """Watches the records an evaluation reads (:meth:`records`), then judges (:meth:`finish`)."""

    where: str
    digests: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> (digest, line)
    segments: list[_Segment] = field(default_factory=list)
    answered: dict[str, set[str]] = field(default_factory=dict)  # endpoint -> problems
    tasks: Counter[str] = field(default_factory=Counter)  # problem records per task
    responses: int = 0
    succeeded: int = 0
    errors: Counter[str] = field(default_factory=Counter)  # failed responses by error type

    def records(self, numbered: Iterable[tuple[int, JSONDict]]) -> Iterator[JSONDict]:
        """Pass ``(line, record)`` through as records, watching each; raises ``UsageError`` as
        soon as a problem id is declared twice with different content."""
        for line, record in numbered:
            self.watch(line, record)
            yield record

    def watch(self, line: int, record: JSONDict) -> None:
        """Watch one record (its 1-based ``line``); raises ``UsageError`` as :meth:`records`."""
        kind = record.get("kind")
        if kind == "problem":
            task = str(record.get("task", AUDITED_TASK))
            self.tasks[task] += 1
            pid = str(record.get("problem_id"))
            if not self.segments or pid in self.segments[-1].problems:
                self.segments.append(_Segment(first_line=line))
            self.segments[-1].problems.add(pid)
            self.segments[-1].last_line = line
            digest = problem_digest(record)
            seen = self.digests.setdefault(pid, (digest, line))
            if seen[0] != digest:
                raise UsageError(
                    f"problem {pid} is declared twice with different content (lines {seen[1]} "
                    f"and {line}): the stream joins runs of different problem sets",
                    where=self.where,
                    fix="Evaluate each run on its own, then compare them with "
                    "`cotaudit compare RUN_A RUN_B`.",
                )
        elif kind == "response":
            self.responses += 1
            endpoint = str(record.get("endpoint"))
            self.answered.setdefault(endpoint, set()).add(str(record.get("problem_id")))
            if self.segments:
                self.segments[-1].endpoints.add(endpoint)
                self.segments[-1].last_line = line
            error = record.get("error")
            if error is None:
                self.succeeded += 1
            else:
                kind_of = error.get("type") if isinstance(error, dict) else None
                self.errors[str(kind_of or "error")] += 1

    def finish(self, *, late_records: int, audited: int) -> None:
        """Judge the whole stream; raises ``UsageError`` saying what is wrong and what to do.

        ``late_records``: records of an audit already complete, or of a request that had
        succeeded (``GroupCollector.late``);
        ``audited``: audits the evaluation produced.
        """
        if self.responses and not self.succeeded:
            by_type = ", ".join(f"{n:,} {t}" for t, n in self.errors.most_common())
            raise UsageError(
                f"no successful responses: all {self.responses:,} response records are "
                f"failed requests ({by_type}), so there is nothing to audit",
                where=self.where,
                fix=f"Retry them with `{run_with('retry_errors')}` (the same config and "
                "run directory), then evaluate again.",
                in_run_terms=True,
            )
        if not self.tasks.get(AUDITED_TASK) and self.tasks:
            task, _ = self.tasks.most_common(1)[0]
            why = OTHER_TASKS.get(task, "its problems are not ProntoQA problems")
            raise UsageError(
                f"this is a '{task}' run: cotaudit evaluate audits only ProntoQA grounding "
                f'tasks ([task] kind = "{AUDITED_TASK}"); {why}',
                where=self.where,
                fix='Evaluate a run whose config has [task] kind = "prontoqa".',
            )
        if late_records:
            raise UsageError(
                f"{late_records:,} response records repeat requests that had already "
                "succeeded, which one run (or its merged shards) never writes: the stream "
                "joins overlapping runs, or holds a shard's stream twice",
                where=self.where,
                fix="Merging shards, give each shard's stream once (docs/engine.md, "
                f'"Sharding"). Otherwise: {_FIX}',
            )
        self._check_segments()
        self._check_disjoint_models()
        if self.responses and not audited:
            raise UsageError(
                "no response record belongs to a problem of the stream that could be audited",
                where=self.where,
                fix="Problem records must precede their responses (see docs/schema.md).",
            )

    def _check_segments(self) -> None:
        for i, a in enumerate(self.segments):
            for b in self.segments[i + 1 :]:
                if a.endpoints & b.endpoints or a.problems == b.problems:
                    continue  # merged shards (same models), or runs on the same problems
                if not a.endpoints or not b.endpoints:
                    continue
                raise UsageError(
                    f"the stream joins runs that audit different problem sets: lines "
                    f"{a.first_line}-{a.last_line} ({_names(a.endpoints)}) declare "
                    f"{len(a.problems):,} problems, lines {b.first_line}-{b.last_line} "
                    f"({_names(b.endpoints)}) declare {len(b.problems):,}, "
                    f"{len(a.problems & b.problems):,} of them shared; their models would be "
                    "reported side by side on different problems",
                    where=self.where,
                    fix=_FIX,
                )

    def _check_disjoint_models(self) -> None:
        names = sorted(self.answered)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                if self.answered[a] & self.answered[b]:
                    continue
                raise UsageError(
                    f"models {a} and {b} answered no problem in common ({len(self.answered[a]):,}"
                    f" and {len(self.answered[b]):,} problems): the stream joins runs of "
                    "different problem sets, which would be reported side by side",
                    where=self.where,
                    fix=_FIX,
                )


_FIX = (
    "Evaluate each run on its own, then compare them with `cotaudit compare RUN_A RUN_B` "
    "(paired on the problems they share)."
)


def _names(endpoints: set[str]) -> str:
    names = sorted(endpoints)
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return ("model " if len(names) == 1 else "models ") + shown
