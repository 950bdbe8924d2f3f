"""Replay: the local server answers with real, recorded model outputs.

Sources (given to :func:`configure` by the server at start-up, else read from the
``COTAUDIT_REPLAY`` environment variable, paths separated by ``os.pathsep``):

- an evidence-pack directory (the pack root, its ``evidence/`` or one model's directory):
  every ``<model>/pNNN/original_cot.json`` and ``<model>/pNNN/probes/*.json`` under it is a
  recording ``prompt -> raw_response`` at its ``temperature``;
- a ``results.jsonl`` of an earlier run (or a run directory holding one): every ``response``
  record with text is a recording ``last user message -> text`` at its temperature and
  sample index.

A request is answered from the recordings of its exact prompt (the last user message) at its
temperature (samples at T=0.7 are not answered from T=0 outputs). ``replay:model=gpt-4o``
restricts the recordings to one model (the pack's directory name, or the ``model`` a
recording names); without it a prompt recorded for several models is refused. Optional
hints in the request params narrow the choice further: ``condition`` (a consistent and a
local probe share their prompt when the target predicate occurs in one premise only; the pack
recorded both) and ``replicate``/``sample_index`` (that recorded sample). Without hints the
first recording wins (lowest sample index, then source order). Anything else raises
``UnknownPrompt`` (the server answers 404). Sources are indexed once, lazily.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from cotaudit.domain.pack_layout import pack_json, pack_usage
from cotaudit.errors import UsageError
from runner.server.models import (
    Completion,
    UnknownModel,
    UnknownPrompt,
    approx_tokens,
    register_model,
)

ENV_VAR = "COTAUDIT_REPLAY"
# The pack's probe_type -> our condition names.
_PACK_CONDITIONS = {
    "original": "original",
    "semantic": "consistent",
    "local_semantic": "local",
    "surface": "surface",
}
_TEMPERATURE_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class Recording:
    """One recorded output and where it came from."""

    text: str
    model: str  # the model it came from (pack directory, or the record's model id)
    models: frozenset[str]  # names it answers to: pack directory, recorded model id
    temperature: float
    sample_index: int
    source: str  # file (and line) it was read from
    condition: str | None = None  # original / consistent / local / surface / sample, if known
    input_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str = "stop"


@dataclass(frozen=True, slots=True)
class HeldModel:
    """A model recordings are held of: ``replay:model=NAME`` (or one of ``aliases``)."""

    name: str
    recordings: int
    aliases: frozenset[str] = frozenset()

    def __str__(self) -> str:
        also = f"; also {', '.join(sorted(self.aliases))}" if self.aliases else ""
        count = f"{self.recordings} recording{'' if self.recordings == 1 else 's'}"
        return f"replay:model={self.name} ({count}{also})"


class ReplayIndex:
    """Recordings by exact prompt text, built from the sources on first use."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self._by_prompt: dict[str, list[Recording]] | None = None
        self._held: list[HeldModel] | None = None
        self._lock = threading.Lock()

    def recordings(self, prompt: str) -> list[Recording]:
        if self._by_prompt is None:
            with self._lock:
                if self._by_prompt is None:
                    self._by_prompt = _index(self.paths)
        return self._by_prompt.get(prompt, [])

    def __len__(self) -> int:
        return sum(1 for _ in self._all())

    def held_models(self) -> list[HeldModel]:
        """The models the recordings are of (a pack's directory, a record's model id), by
        name, each with its recordings and the other names they answer to."""
        if self._held is None:
            counts: dict[str, int] = {}
            aliases: dict[str, set[str]] = {}
            for recording in self._all():
                counts[recording.model] = counts.get(recording.model, 0) + 1
                aliases.setdefault(recording.model, set()).update(recording.models)
            self._held = [
                HeldModel(name, counts[name], frozenset(aliases[name] - {name, ""}))
                for name in sorted(counts)
                if name
            ]
        return list(self._held)

    def answers_to(self, model: str) -> bool:
        """True when some recording answers to ``replay:model=MODEL``."""
        return any(model == held.name or model in held.aliases for held in self.held_models())

    def longest_output_tokens(self) -> int | None:
        """The most output tokens any recording says it took (``None``: none says)."""
        counts = [r.output_tokens for r in self._all() if r.output_tokens is not None]
        return max(counts, default=None)

    def _all(self) -> Iterator[Recording]:
        self.recordings("")
        assert self._by_prompt is not None
        for recordings in self._by_prompt.values():
            yield from recordings


_configured: ReplayIndex | None = None
_env_index: tuple[str, ReplayIndex] | None = None


def configure(paths: Sequence[Path]) -> None:
    """Set the replay sources (the server calls this at start-up); indexed on first use.

    An empty sequence clears them (``COTAUDIT_REPLAY`` applies again). Raises
    ``UsageError`` naming a path that is no replay source (:func:`check_source`).
    """
    global _configured
    if not paths:
        _configured = None
        return
    for path in paths:
        check_source(Path(path), where=str(path))
    _configured = ReplayIndex(paths)


_SOURCE_FIX = (
    "Give an evidence pack (its root, its evidence/ or one model's directory, or one of its "
    "output .json files), a run's results.jsonl or a run directory holding one."
)
_FIRST_LINE_MAX_BYTES = 1 << 20  # a stream's first record (a problem) is far smaller


def check_source(path: Path, *, where: str) -> None:
    """Refuse a path that holds no recordings, before a server starts on it.

    Cheap, so that the sources can still be indexed lazily: a directory needs a
    ``results.jsonl`` in it or an ``original_cot.json`` below it; a ``.jsonl`` file must start
    with a stream record (an object with a ``kind``); any other file must be one pack output
    (a JSON object with ``prompt`` and ``raw_response`` strings), as :func:`_read_source`
    reads it.
    """
    if not path.exists():
        raise UsageError("replay source does not exist", where=where, fix=_SOURCE_FIX)
    if path.is_dir():
        if (path / "results.jsonl").is_file():
            check_source(path / "results.jsonl", where=f"{where}: results.jsonl")
            return
        if next(iter(path.rglob("original_cot.json")), None) is None:
            raise UsageError(
                "no recordings found (no original_cot.json below it, no results.jsonl in it)",
                where=where,
                fix=_SOURCE_FIX,
            )
        return
    if path.suffix == ".jsonl":
        with path.open("rb") as stream:
            first = b""
            while not first.strip():
                first = stream.readline(_FIRST_LINE_MAX_BYTES)
                if not first:
                    break
        try:
            record = orjson.loads(first) if first.strip() else None
        except orjson.JSONDecodeError:
            record = None
        if not (isinstance(record, dict) and isinstance(record.get("kind"), str)):
            what = "is empty" if not first.strip() else "does not start with a run's record"
            raise UsageError(f"not a results stream: the file {what}", where=where, fix=_SOURCE_FIX)
        return
    try:
        record = pack_json(path.read_bytes())
    except orjson.JSONDecodeError:
        record = None
    if not (
        isinstance(record, dict)
        and isinstance(record.get("prompt"), str)
        and isinstance(record.get("raw_response"), str)
    ):
        raise UsageError(
            "not a replay source: neither a results stream (.jsonl) nor an evidence pack's "
            "output (a JSON object with 'prompt' and 'raw_response')",
            where=where,
            fix=_SOURCE_FIX,
        )


def active_index() -> ReplayIndex | None:
    """The configured index, else one built from ``COTAUDIT_REPLAY``, else None."""
    global _env_index
    if _configured is not None:
        return _configured
    raw = os.environ.get(ENV_VAR, "")
    if not raw.strip():
        return None
    if _env_index is None or _env_index[0] != raw:
        paths = [Path(p) for p in raw.split(os.pathsep) if p.strip()]
        for path in paths:
            check_source(path, where=f"{ENV_VAR}: {path}")
        _env_index = (raw, ReplayIndex(paths))
    return _env_index[1]


def _index(paths: Sequence[Path]) -> dict[str, list[Recording]]:
    by_prompt: dict[str, list[Recording]] = {}
    for path in paths:
        for prompt, recording in _read_source(path):
            by_prompt.setdefault(prompt, []).append(recording)
    for recordings in by_prompt.values():
        recordings.sort(key=lambda r: r.sample_index)
    return by_prompt


def _read_source(path: Path) -> Iterator[tuple[str, Recording]]:
    if path.is_file():
        if path.suffix == ".jsonl":
            yield from _read_results(path)
        else:
            yield from _read_pack_file(path, path.parent.name)
        return
    if (path / "results.jsonl").is_file():
        yield from _read_results(path / "results.jsonl")
        return
    found = False
    for original in sorted(path.rglob("original_cot.json")):
        found = True
        problem_dir = original.parent
        model_dir = problem_dir.parent.name
        yield from _read_pack_file(original, model_dir)
        for probe in sorted((problem_dir / "probes").glob("*.json")):
            yield from _read_pack_file(probe, model_dir)
    if not found:
        raise UsageError(
            "no recordings found (no original_cot.json below it, no results.jsonl in it)",
            where=str(path),
            fix="Point --replay at the evidence pack (or evidence/<model>) or at a results.jsonl.",
        )


def _load_json(path: Path) -> Any:
    try:
        return pack_json(path.read_bytes())  # as import-evidence reads it: a BOM is skipped
    except orjson.JSONDecodeError as exc:
        raise UsageError(
            f"not valid JSON ({exc})", where=str(path), fix="Restore the file from the pack."
        ) from exc


def _read_pack_file(path: Path, model_dir: str) -> Iterator[tuple[str, Recording]]:
    record = _load_json(path)
    for field in ("prompt", "raw_response"):
        if not isinstance(record, dict) or not isinstance(record.get(field), str):
            raise UsageError(
                f"field {field!r} is missing or not a string",
                where=str(path),
                fix="A pack output needs 'prompt' and 'raw_response' strings.",
            )
    # Checked as import-evidence checks it: a count that is not one would be answered as the
    # replayed usage, or stop the server mid-answer.
    usage = pack_usage(record, path) or {}
    models = {model_dir}
    if isinstance(record.get("model"), str):
        models.add(record["model"])
    yield (
        record["prompt"],
        Recording(
            text=record["raw_response"],
            model=model_dir,
            models=frozenset(models),
            condition=_PACK_CONDITIONS.get(str(record.get("probe_type"))),
            temperature=float(record.get("temperature") or 0.0),
            sample_index=0,
            source=str(path),
            input_tokens=usage.get("prompt_tokens"),
            output_tokens=usage.get("completion_tokens"),
        ),
    )


def _read_results(path: Path) -> Iterator[tuple[str, Recording]]:
    lines = path.read_bytes().split(b"\n")
    last = max((n for n, line in enumerate(lines, start=1) if line.strip()), default=0)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if number == last:  # a torn last line: the run was cut mid-write
                continue
            raise UsageError(
                f"line is not valid JSON ({exc})",
                where=f"{path}:{number}",
                fix="Repair or truncate the stream; only its last line may be torn.",
            ) from exc
        if not isinstance(record, dict) or record.get("kind") != "response":
            continue
        text = record.get("text")
        if record.get("error") is not None or not isinstance(text, str):
            continue
        prompt = _last_user_message(record.get("messages") or [])
        if prompt is None:
            continue
        params = record.get("params") or {}
        model = record.get("model") or {}
        usage = record.get("usage") or {}
        name = str(model.get("model", "")) if isinstance(model, dict) else ""
        yield (
            prompt,
            Recording(
                text=text,
                model=name,
                models=frozenset({name}),
                condition=record.get("condition"),
                temperature=float(params.get("temperature") or 0.0),
                sample_index=int(record.get("sample_index") or 0),
                source=f"{path}:{number}",
                input_tokens=usage.get("input_tokens", usage.get("prompt_tokens")),
                output_tokens=usage.get("output_tokens", usage.get("completion_tokens")),
                finish_reason=str(record.get("finish_reason") or "stop"),
            ),
        )


def _last_user_message(messages: Sequence[Mapping[str, Any]]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role", "user") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else None
    return None


@dataclass(frozen=True, slots=True)
class ReplayModel:
    """Serves recorded outputs; ``model`` restricts them to one recorded model."""

    name: str
    model: str | None = None

    def complete(
        self, messages: Sequence[Mapping[str, str]], params: Mapping[str, Any]
    ) -> Completion:
        """The recorded output for this prompt; raises ``UnknownPrompt`` when there is none."""
        recording = self.lookup(_last_user_message(messages) or "", params)
        input_tokens = recording.input_tokens
        if input_tokens is None:
            input_tokens = sum(approx_tokens(m.get("content", "")) for m in messages)
        output_tokens = recording.output_tokens
        if output_tokens is None:
            output_tokens = approx_tokens(recording.text)
        return Completion(
            text=recording.text,
            finish_reason=recording.finish_reason,
            input_tokens=int(input_tokens),
            output_tokens=int(output_tokens),
        )

    def lookup(self, prompt: str, params: Mapping[str, Any]) -> Recording:
        """The recording answering ``prompt`` at these params (see the module docstring)."""
        index = active_index()
        if index is None:
            raise UnknownPrompt(
                f"{self.name!r} has no recordings: start the server with replay sources "
                f"(ServerConfig.replay / --replay) or set {ENV_VAR}"
            )
        recordings = index.recordings(prompt)
        head = prompt[:80].replace("\n", " ")
        if not recordings:
            raise UnknownPrompt(f"no recorded output for the prompt beginning {head!r}")
        if self.model is not None:
            recordings = [r for r in recordings if self.model in r.models]
            if not recordings:
                raise UnknownPrompt(
                    f"the prompt beginning {head!r} is recorded, but not for model {self.model!r}"
                )
        temperature = float(params.get("temperature") or 0.0)
        at_t = [r for r in recordings if abs(r.temperature - temperature) <= _TEMPERATURE_TOLERANCE]
        if not at_t:
            recorded = sorted({r.temperature for r in recordings})
            raise UnknownPrompt(
                f"the prompt beginning {head!r} is recorded at temperature {recorded}, "
                f"not at {temperature}"
            )
        models = {r.model for r in at_t}
        if self.model is None and len(models) > 1:
            raise UnknownPrompt(
                f"the prompt beginning {head!r} is recorded for several models "
                f"({', '.join(sorted(models))}); name one with 'replay:model=NAME'"
            )
        # A consistent and a local probe have the same prompt when the target predicate
        # occurs in one premise only; a condition hint picks the output recorded for it.
        condition = params.get("condition")
        if condition is not None:
            chosen = [r for r in at_t if r.condition == condition]
            at_t = chosen or at_t
        hint = params.get("replicate", params.get("sample_index"))
        if hint is None:
            return at_t[0]
        for recording in at_t:
            if recording.sample_index == int(hint):
                return recording
        raise UnknownPrompt(
            f"the prompt beginning {head!r} has no recorded sample {hint} at temperature "
            f"{temperature} (recorded: {sorted(r.sample_index for r in at_t)})"
        )


def _factory(name: str, options: Mapping[str, str]) -> ReplayModel:
    unknown = sorted(set(options) - {"model"})
    if unknown:
        raise ValueError(
            f"model {name!r}: unknown option(s) {', '.join(unknown)}; replay takes 'model'"
        )
    model = options.get("model") or None
    index = active_index()
    if model is not None and index is not None and not index.answers_to(model):
        # A model the sources hold nothing of is unknown as a whole: one 404 that says what
        # they do hold, not a "no recorded output" per prompt that blames the prompt.
        raise UnknownModel(
            f"the replay sources hold no recordings of model {model!r}; they hold "
            f"{held_models(index.held_models())}"
        )
    return ReplayModel(name, model)


def held_models(held: Sequence[HeldModel]) -> str:
    """What recordings are held of, as a client names it (``replay:model=NAME``)."""
    return ", ".join(str(h) for h in held) or "none"


register_model("replay", _factory)
