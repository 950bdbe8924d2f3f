"""Grouping a stream's responses per (endpoint, problem), last record winning.

Records of one ``request_id`` may repeat: a resume with ``--retry-errors`` appends a new record
for a request whose earlier record was an error, and the *last* record wins.
:class:`GroupCollector` applies that rule while grouping responses per (endpoint, problem),
and releases a group as soon as it is complete so that memory stays bounded by the number of
groups in flight, not by the length of the stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from cotaudit.schema import JSONDict

GroupKey = tuple[str, str]  # (endpoint, problem_id)


@dataclass(slots=True)
class ResponseGroup:
    """All records of one (endpoint, problem): responses by request id, last record winning.

    Counters kept on the way in (errors, samples, probe slots filled) make the completeness
    check O(1) per record.
    """

    endpoint: str
    problem_id: str
    model: JSONDict = field(default_factory=dict)
    responses: dict[str, JSONDict] = field(default_factory=dict)
    summaries: list[JSONDict] = field(default_factory=list)
    superseded: int = 0
    n_errors: int = 0
    n_samples: int = 0
    # (condition, target premise) -> sample indices answered successfully (probe repeats)
    slots: dict[tuple[str, str | None], set[int]] = field(default_factory=dict)
    filled: int = 0  # probe slots of the problem's premises holding all their repeats

    def add(self, record: JSONDict) -> None:
        if record.get("kind") == "sample_summary":
            self.summaries.append(record)
            return
        request_id = str(record.get("request_id"))
        previous = self.responses.get(request_id)
        if previous is not None:
            self.superseded += 1
            self._count(previous, -1)
        self.responses[request_id] = record
        self._count(record, +1)
        if not self.model and isinstance(record.get("model"), dict):
            self.model = record["model"]

    def _count(self, record: JSONDict, sign: int) -> None:
        if record.get("error") is not None:
            self.n_errors += sign
        elif record.get("condition") == "sample":
            self.n_samples += sign
        elif sign > 0:
            slot = (str(record.get("condition")), record.get("target_premise"))
            self.slots.setdefault(slot, set()).add(int(record.get("sample_index") or 0))

    def ok(self, condition: str) -> list[JSONDict]:
        """Successful responses of one condition, ordered by (target premise, sample index)."""
        found = [
            r
            for r in self.responses.values()
            if r.get("condition") == condition and r.get("error") is None
        ]
        found.sort(
            key=lambda r: (str(r.get("target_premise") or ""), int(r.get("sample_index") or 0))
        )
        return found

    def ok_by_target(self) -> dict[tuple[str, str | None], list[JSONDict]]:
        """Successful responses keyed by (condition, target premise), sample index order."""
        out: dict[tuple[str, str | None], list[JSONDict]] = {}
        for r in self.responses.values():
            if r.get("error") is None:
                out.setdefault((str(r.get("condition")), r.get("target_premise")), []).append(r)
        for records in out.values():
            records.sort(key=lambda r: int(r.get("sample_index") or 0))
        return out

    def errors(self) -> list[JSONDict]:
        return [r for r in self.responses.values() if r.get("error") is not None]


def group_key(record: JSONDict) -> GroupKey:
    return (str(record.get("endpoint")), str(record.get("problem_id")))


@dataclass(frozen=True, slots=True)
class Expected:
    """What makes one problem's group complete, per endpoint.

    From the problem record's ``extra.plan`` (written by the runner's task: ``samples``,
    ``probe_repeats``, and ``sample_summary`` for imported packs); streams without it fall back
    to the evaluator's ``samples`` option and one output per probe.
    """

    premise_ids: tuple[str, ...]
    samples: int
    probe_repeats: int = 1
    sample_summary: bool = False

    @property
    def probe_slots(self) -> frozenset[tuple[str, str]]:
        """The (condition, premise) slots a complete group fills."""
        return frozenset(
            (condition, pid)
            for pid in self.premise_ids
            for condition in ("consistent", "local", "surface")
        )


@dataclass(slots=True)
class GroupCollector:
    """Group response records per (endpoint, problem) and release complete groups early.

    A group is complete when it holds a successful original, ``probe_repeats`` successful
    outputs of the consistent, local and surface probe of every premise, and its samples (or
    its ``sample_summary``), as the problem's :class:`Expected` says. Incomplete groups are
    released at the end of the stream. Records of a group already released, and records of a
    request that already has a successful record, are counted in ``late`` and otherwise
    ignored: the runner never writes a second record for a request that succeeded, so either
    one is a stream joined twice (a shard's concatenated twice, or overlapping runs) however
    far apart the copies are.
    """

    samples: int
    expected: dict[str, Expected] = field(default_factory=dict)
    _slots: dict[str, frozenset[tuple[str, str]]] = field(default_factory=dict)
    open: dict[GroupKey, ResponseGroup] = field(default_factory=dict)
    released: set[GroupKey] = field(default_factory=set)
    late: int = 0
    # Groups released at the end of the stream without all their records and with no error
    # record for them: a run still writing, one interrupted, or one shard of several.
    short: int = 0

    def set_problem(
        self,
        problem_id: str,
        premise_ids: Iterable[str],
        plan: Mapping[str, Any] | None = None,
    ) -> None:
        if problem_id in self.expected:
            return
        plan = plan or {}
        expected = self.expected[problem_id] = Expected(
            premise_ids=tuple(premise_ids),
            samples=int(plan.get("samples", self.samples)),
            probe_repeats=max(1, int(plan.get("probe_repeats", 1))),
            sample_summary=bool(plan.get("sample_summary", False)),
        )
        self._slots[problem_id] = expected.probe_slots

    def add(self, record: JSONDict) -> ResponseGroup | None:
        """Add a response or summary record; return its group if that made it complete."""
        key = group_key(record)
        if key in self.released:
            self.late += 1
            return None
        group = self.open.get(key)
        if group is None:
            group = ResponseGroup(endpoint=key[0], problem_id=key[1])
            self.open[key] = group
        elif record.get("kind") == "response":
            previous = group.responses.get(str(record.get("request_id")))
            if previous is not None and previous.get("error") is None:
                self.late += 1
                return None
        expected = self.expected.get(group.problem_id)
        slot = None
        if expected is not None and record.get("error") is None:
            slot = (str(record.get("condition")), record.get("target_premise"))
            if slot not in self._slots[group.problem_id]:
                slot = None
        before = len(group.slots.get(slot, ())) if slot is not None else 0
        group.add(record)
        # Counted as it fills, so that completeness is checked in constant time.
        if (
            slot is not None
            and expected is not None
            and before < expected.probe_repeats <= len(group.slots.get(slot, ()))
        ):
            group.filled += 1
        if self._complete(group):
            del self.open[key]
            self.released.add(key)
            return group
        return None

    def drain(self) -> Iterator[ResponseGroup]:
        """Release every group still open (end of stream), in first-seen order."""
        for key in list(self.open):
            self.released.add(key)
            group = self.open.pop(key)
            if not group.n_errors:  # one with errors waited for a retry that may not come
                self.short += 1
            yield group

    def _complete(self, group: ResponseGroup) -> bool:
        expected = self.expected.get(group.problem_id)
        if expected is None or group.n_errors:
            return False  # an error may still be superseded by a retried record
        if expected.sample_summary and not group.summaries:
            return False
        if group.n_samples < expected.samples and not group.summaries:
            return False
        if ("original", None) not in group.slots:
            return False
        return group.filled >= len(self._slots[group.problem_id])
