"""Sweep configuration: a TOML file (or a mapping built in code) -> frozen, validated objects.

``load_config(path)`` parses the file with ``tomllib`` and hands the table to
``config_from_mapping``, the single validator, which the demo command also calls with a
mapping it builds itself. Every error is a ``UsageError`` naming the file, the key and what is
accepted; nothing touches the disk on error. Keys are never read here: an endpoint names the
environment variable that holds its key, and only the provider reads it.
"""

from __future__ import annotations

import codecs
import dataclasses
import ipaddress
import itertools
import os
import re
import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from cotaudit.constants import (
    ANTHROPIC_BATCH_MAX_REQUESTS,
    ANTHROPIC_MAX_TEMPERATURE,
    BATCH_DISCOUNT,
    BATCH_POLL_S,
    DEFAULT_MAX_TOKENS,
    DEFAULT_RPM,
    DEFAULT_TPM,
    LOCAL_HOST,
    OPENAI_BATCH_MAX_REQUESTS,
    OUTAGE_BUDGET_S,
    READ_TIMEOUT_S,
    REQUEST_TIME_BUDGET_S,
    RETRY_BASE_DELAY_S,
    RETRY_MAX_ATTEMPTS,
    RETRY_MAX_DELAY_S,
)
from cotaudit.errors import UsageError
from cotaudit.schema import canonical_json, sha256_hex
from cotaudit.values import expected_integer, expected_number, integer, nearest, number, shown
from runner.request_spec import EndpointIdentity
from runner.tasks.registry import Task, TaskTemperature, build_task

PROVIDERS: tuple[str, ...] = ("openai", "anthropic", "local")
DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1",
}
# OpenAI's own API: its chat completions never return a trace's text (PROVIDERS.md), so an
# inline <think> there is the answer's own text (inline_think = "auto").
OPENAI_API_HOST = "api.openai.com"
_TOP_KEYS = frozenset({"run_dir", "cache_dir", "task", "endpoints", "retry", "limit"})
_ENDPOINT_KEYS = frozenset(
    {
        "name",
        "provider",
        "base_url",
        "model",
        "api_key_env",
        "requests_per_minute",
        "tokens_per_minute",
        "max_concurrency",
        "timeout_s",
        "max_tokens",
        "top_p",
        "seed",
        "stop",
        "price_input_per_mtok",
        "price_output_per_mtok",
        "headers",
        "headers_env",
        "outage_budget_s",
        "revision",
        "max_tokens_param",
        "reasoning_effort",
        "omit_sampling",
        "thinking_budget",
        "extra_body",
        "inline_think",
        "mode",
        "batch_discount",
        "batch_poll_s",
        "batch_max_requests",
    }
)
MODES: tuple[str, ...] = ("online", "batch")
# Endpoint keys that only the batch runner reads (runner/batch/runner.py).
BATCH_ONLY_KEYS: tuple[str, ...] = ("batch_poll_s", "batch_max_requests")
# Requests one batch may hold, by provider (PROVIDERS.md); "local" speaks OpenAI Batch.
BATCH_MAX_REQUESTS: dict[str, int] = {
    "openai": OPENAI_BATCH_MAX_REQUESTS,
    "anthropic": ANTHROPIC_BATCH_MAX_REQUESTS,
    "local": OPENAI_BATCH_MAX_REQUESTS,
}
# seconds: the shortest batch_poll_s at a provider's API. Each open batch is looked at once a
# wait, and a batch takes minutes to hours (up to 24 h), so a shorter wait buys seconds and
# spends the key's request budget; a server on this machine or at an http:// URL (one's own,
# the tests' local server) may be polled as often as its user likes.
BATCH_MIN_POLL_S = 10.0
MAX_TOKENS_PARAMS: tuple[str, ...] = ("max_tokens", "max_completion_tokens")
# OpenAI's list as its SDK has it (docs/servers.md); "none" turns reasoning off.
REASONING_EFFORTS: tuple[str, ...] = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
# Body fields the runner sets itself: extra_body may not override them (each has its key).
_RUNNER_BODY_FIELDS = frozenset(
    {
        "model",
        "messages",
        "system",
        "stream",
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "seed",
        "stop",
        "stop_sequences",
        "metadata",
        "reasoning_effort",
        "thinking",
    }
)
# Sampling fields Anthropic's thinking refuses (PROVIDERS.md): extra_body may not send them.
_THINKING_REFUSES = frozenset({"temperature", "top_p", "top_k"})
AUTO: Literal["auto"] = "auto"  # max_concurrency that adapts to the server (runner/concurrency.py)
_RETRY_KEYS = frozenset({"max_attempts", "base_delay_s", "max_delay_s", "time_budget_s"})
# Headers that carry credentials must come from api_key_env, never from the config file.
_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization"})


@dataclass(frozen=True, slots=True)
class RetrySettings:
    """Retry policy of a sweep (operational: never part of the plan hash)."""

    max_attempts: int = RETRY_MAX_ATTEMPTS  # attempts per request, the first included
    base_delay_s: float = RETRY_BASE_DELAY_S  # seconds: first backoff ceiling
    max_delay_s: float = RETRY_MAX_DELAY_S  # seconds: ceiling of one sleep, hints included
    time_budget_s: float = REQUEST_TIME_BUDGET_S  # seconds: all attempts of one request


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """One endpoint of a sweep: where to send, which model, how fast, with which parameters."""

    name: str
    provider: str  # "openai" | "anthropic" | "local"
    model: str
    base_url: str | None = None  # None: provider default; for "local", the embedded server
    api_key_env: str | None = None  # the NAME of the environment variable holding the key
    requests_per_minute: float = DEFAULT_RPM
    tokens_per_minute: float = DEFAULT_TPM
    max_concurrency: int | Literal["auto"] = AUTO  # in-flight requests; "auto" adapts
    timeout_s: float = READ_TIMEOUT_S  # seconds, per attempt
    max_tokens: int = DEFAULT_MAX_TOKENS
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None
    price_input_per_mtok: float | None = None  # currency units per million input tokens
    price_output_per_mtok: float | None = None
    headers: tuple[tuple[str, str], ...] = ()  # extra, non-secret HTTP headers
    # Extra headers whose values are secrets (a gateway's own key): header -> the NAME of the
    # environment variable holding its value, read as api_key_env's is; never the value.
    headers_env: tuple[tuple[str, str], ...] = ()
    outage_budget_s: float = OUTAGE_BUDGET_S  # seconds down in all before the run stops it
    revision: str | None = None  # the user's name for what is loaded behind the URL
    max_tokens_param: str = "max_tokens"  # or "max_completion_tokens" (reasoning models)
    reasoning_effort: str | None = None  # OpenAI protocol
    omit_sampling: bool = False  # send no temperature/top_p (models that reject them)
    thinking_budget: int | None = None  # Anthropic extended thinking: budget_tokens
    extra_body: Mapping[str, Any] = field(default_factory=dict, hash=False)  # sent verbatim
    # Whether a <think> block in the answer text is cut out as the trace: True, False, or
    # "auto" (only where a server without a reasoning parser may leave one: auto_inline_think).
    inline_think: bool | Literal["auto"] = "auto"
    mode: str = "online"  # or "batch": the provider's batch API
    batch_discount: float = BATCH_DISCOUNT  # share of the online price a batch saves
    batch_poll_s: float = BATCH_POLL_S  # seconds between looks at a pending batch
    batch_max_requests: int | None = None  # None: the provider's limit

    @property
    def batch(self) -> bool:
        """True when this endpoint's requests go through the provider's batch API."""
        return self.mode == "batch"

    @property
    def sends_sampling(self) -> bool:
        """True when requests carry the task's temperature (and ``top_p``): not with
        ``omit_sampling``, nor with Anthropic thinking, which refuses modified ones."""
        return not (self.omit_sampling or self.thinking_budget is not None)

    @property
    def unsent_params(self) -> tuple[str, ...]:
        """The request params (``RequestSpec.params``) this endpoint's requests do not carry,
        recorded as null: ``temperature`` and ``top_p`` without :attr:`sends_sampling`, and
        ``seed`` on Anthropic (the Messages API has none). The providers send by it."""
        unsent = () if self.sends_sampling else ("temperature", "top_p")
        return (*unsent, "seed") if self.provider == "anthropic" else unsent

    def auto_inline_think(self) -> bool:
        """What ``inline_think = "auto"`` means here: never on Anthropic (its thinking comes in
        blocks), never at OpenAI's own API (it returns no trace text), else on: the
        OpenAI-compatible servers (vLLM, llama.cpp, Ollama, the local server) that leave a
        trace inline when they run without a reasoning parser."""
        if self.provider == "anthropic":
            return False
        base = self.effective_base_url()
        return base is None or urlsplit(base).hostname != OPENAI_API_HOST

    @property
    def reads_inline_think(self) -> bool:
        """Whether an answer's inline ``<think>`` block is read as its trace."""
        return self.auto_inline_think() if self.inline_think == AUTO else bool(self.inline_think)

    def output_options(self) -> dict[str, Any]:
        """The settings beyond sampling params that change the output, those set only."""
        options: dict[str, Any] = {}
        if self.revision is not None:
            options["revision"] = self.revision
        if self.reasoning_effort is not None:
            options["reasoning_effort"] = self.reasoning_effort
        if self.thinking_budget is not None:
            options["thinking_budget"] = self.thinking_budget
        if self.omit_sampling:
            options["omit_sampling"] = True
        if self.extra_body:
            options["extra_body"] = _jsonable(self.extra_body)
        # The cache keeps answers as read (text and trace apart), so a reading other than the
        # one "auto" gives this endpoint must not share its entries. "auto" depends only on
        # the provider and the base URL, which the key holds already: it adds nothing, and
        # neither does an explicit value equal to it.
        if self.inline_think != AUTO and self.inline_think != self.auto_inline_think():
            options["inline_think"] = self.inline_think
        return options

    @property
    def embedded(self) -> bool:
        """True when the run starts the project's own server for this endpoint."""
        return self.provider == "local" and self.base_url is None

    def effective_base_url(self) -> str | None:
        """The configured base URL, or the provider's public default (None when embedded)."""
        if self.base_url is not None:
            return self.base_url.rstrip("/")
        return DEFAULT_BASE_URLS.get(self.provider)

    def identity(self) -> EndpointIdentity:
        """What tasks need to build requests; ``cache_identity`` is ``"local"`` for local."""
        base = self.effective_base_url()
        host = urlsplit(base).netloc if base else LOCAL_HOST
        params: dict[str, Any] = {
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            "seed": self.seed,
            "stop": list(self.stop) if self.stop is not None else None,
        }
        cache_identity = "local" if self.provider == "local" else (base or "")
        return EndpointIdentity(
            self.name,
            self.provider,
            self.model,
            host,
            cache_identity,
            params,
            output_options=self.output_options(),
            unsent=self.unsent_params,
        )

    def output_identity(self) -> dict[str, Any]:
        """The output-affecting part of this endpoint (what the plan hash covers)."""
        ident = self.identity()
        out: dict[str, Any] = {
            "name": self.name,
            "provider": self.provider,
            "server": ident.cache_identity,
            "model": self.model,
            "params": dict(ident.params),
        }
        if ident.output_options:  # absent when none is set: old run dirs keep their hash
            out["options"] = dict(ident.output_options)
        return out

    def to_mapping(self) -> dict[str, Any]:
        """The endpoint as a config table (key env var NAME only, never a key)."""
        out: dict[str, Any] = {}
        for key in sorted(_ENDPOINT_KEYS):
            value = getattr(self, key)
            if value is None:
                continue
            if key == "stop":
                value = list(value)
            elif key in ("headers", "headers_env", "extra_body"):
                value = _jsonable(dict(value))
            out[key] = value
        return out


@dataclass(frozen=True, slots=True)
class SweepConfig:
    """A validated sweep: run and cache directories, the task table, the endpoints."""

    run_dir: Path
    cache_dir: Path
    task: Mapping[str, Any]
    endpoints: tuple[EndpointConfig, ...]
    config_dir: Path
    source: str  # the config file, or "<programmatic config>": used in messages
    retry: RetrySettings = field(default_factory=RetrySettings)
    limit: int | None = None  # the task's first N problems only (None: all of them)

    def build_task(self) -> Task:
        """Build the ``[task]`` through the task registry (raises ``UsageError``), and check
        its temperatures against what each endpoint's API takes."""
        task = build_task(self.task, config_dir=self.config_dir, where=self.source)
        self._check_temperature(task.highest_temperature())
        return task if self.limit is None else LimitedTask(task, self.limit)

    def _check_temperature(self, hottest: TaskTemperature) -> None:
        """Anthropic's Messages API refuses a temperature above 1 (tasks allow up to 2, as
        OpenAI does): every request at it would be a 400, so the config is refused first."""
        if hottest.value <= ANTHROPIC_MAX_TEMPERATURE:
            return
        for i, ep in enumerate(self.endpoints):
            if ep.provider != "anthropic" or not ep.sends_sampling:
                continue
            key = hottest.name
            # A task file's line is named in ``where``; the endpoint's key is the config's.
            config = f"{self.source}: " if hottest.file else ""
            raise UsageError(
                f"{key} is {hottest.value:g}, above {ANTHROPIC_MAX_TEMPERATURE:g}, the highest "
                f"temperature Anthropic's Messages API takes; endpoint {ep.name!r} "
                f'({config}endpoints[{i}].provider = "anthropic") would have every such '
                "request refused",
                where=f"{hottest.file}: {key}" if hottest.file else f"{self.source}: [task].{key}",
                fix=f"Lower {key} to {ANTHROPIC_MAX_TEMPERATURE:g} or less, or set "
                f"omit_sampling = true on endpoint {ep.name!r} (no temperature is then sent: "
                "its samples are the API's own draws at its default).",
            )

    def warnings(self) -> list[str]:
        """What the config sets that no request will carry, one line per setting: ``seed`` on
        an Anthropic endpoint (the Messages API has none; ``EndpointConfig.unsent_params``).
        Accepted (a config may serve several providers), but a user who set it believes the
        samples are seeded, so a run says so when it starts."""
        return [
            f"cotaudit: warning: endpoint {ep.name!r} ({self.source}: endpoints[{i}].seed = "
            f"{ep.seed}): the seed is not sent, since Anthropic's Messages API has no seed "
            "parameter; repeated samples are not reproducible by seed, and the records' "
            "params.seed is null. Remove seed from this endpoint to silence this warning."
            for i, ep in enumerate(self.endpoints)
            if ep.seed is not None and "seed" in ep.unsent_params
        ]

    def endpoint(self, name: str) -> EndpointConfig:
        for ep in self.endpoints:
            if ep.name == name:
                return ep
        raise KeyError(name)

    def output_config(self) -> dict[str, Any]:
        """What determines the records' content: the task (and ``limit``, when set) and each
        endpoint's identity."""
        out: dict[str, Any] = {
            "task": _jsonable(self.task),
            "endpoints": [ep.output_identity() for ep in self.endpoints],
        }
        if self.limit is not None:
            out["limit"] = self.limit
        return out

    def plan_hash(self) -> str:
        """SHA-256 of :meth:`output_config`; a run directory belongs to exactly one."""
        return sha256_hex(canonical_json(self.output_config()))

    def to_mapping(self) -> dict[str, Any]:
        """The config as a table, as stored in the manifest (no key values anywhere)."""
        return {
            "run_dir": str(self.run_dir),
            "cache_dir": str(self.cache_dir),
            **({"limit": self.limit} if self.limit is not None else {}),
            "task": _jsonable(self.task),
            "endpoints": [ep.to_mapping() for ep in self.endpoints],
            "retry": {
                "max_attempts": self.retry.max_attempts,
                "base_delay_s": self.retry.base_delay_s,
                "max_delay_s": self.retry.max_delay_s,
                "time_budget_s": self.retry.time_budget_s,
            },
        }


class LimitedTask:
    """A task restricted to its first ``limit`` problems (``limit``, ``--limit N``)."""

    def __init__(self, task: Task, limit: int) -> None:
        self.task = task
        self.limit = limit
        self.name = task.name

    def problems(self) -> Iterator[Any]:
        return itertools.islice(self.task.problems(), self.limit)

    def requests(self, problem: Any, endpoint: EndpointIdentity) -> Iterator[Any]:
        return self.task.requests(problem, endpoint)

    def endpoint_records(self, problem: Any, endpoint: EndpointIdentity) -> Iterator[Any]:
        return self.task.endpoint_records(problem, endpoint)

    def highest_temperature(self) -> TaskTemperature:
        return self.task.highest_temperature()


def with_overrides(
    config: SweepConfig,
    *,
    run_dir: Path | None = None,
    limit: int | None = None,
    max_concurrency: int | None = None,
) -> SweepConfig:
    """``config`` with the command line's overrides (``docs/configuration.md``, "Overrides").

    ``limit`` changes the plan (it is in the plan hash); ``run_dir`` and ``max_concurrency``
    (every endpoint's) are operational.
    """
    out = config
    if run_dir is not None:
        out = dataclasses.replace(out, run_dir=run_dir)
    if limit is not None:
        out = dataclasses.replace(out, limit=_positive_int(limit, "--limit"))
    if max_concurrency is not None:
        value = _positive_int(max_concurrency, "--max-concurrency")
        out = dataclasses.replace(
            out,
            endpoints=tuple(dataclasses.replace(ep, max_concurrency=value) for ep in out.endpoints),
        )
    return out


def _positive_int(value: Any, where: str) -> int:
    return integer(value, name=None, where=where, fix="Give e.g. 5.", low=1)


def default_cache_dir() -> Path:
    """The platform's user cache directory for cotaudit (shared by runs)."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "cotaudit"
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA")
        return (Path(base) if base else Path.home() / "AppData" / "Local") / "cotaudit" / "cache"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "cotaudit"


def load_config(path: str | Path) -> SweepConfig:
    """Read and validate a sweep config file; raises ``UsageError`` naming file and key."""
    file = Path(path)
    where = str(file)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise UsageError(
            f"cannot read the config file ({exc.strerror})",
            where=where,
            fix="Pass the path of an existing TOML sweep config.",
        ) from exc
    try:
        # "utf-8-sig": a byte-order mark (Windows editors write one) is no TOML error.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # The decoder's offset is past the mark; the column counts characters, as tomllib's.
        bom = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
        bad = exc.start + bom
        start = max(raw.rfind(b"\n", 0, bad) + 1, bom)
        line = raw.count(b"\n", 0, bad) + 1
        column = len(raw[start:bad].decode("utf-8", errors="replace")) + 1
        raise UsageError(
            f"not UTF-8 text (byte 0x{raw[bad]:02x})",
            where=f"{where}:{line}:{column}",
            fix="Save the config as UTF-8 (TOML files are UTF-8).",
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(exc, where) from None
    return config_from_mapping(data, config_dir=file.resolve().parent, where=where)


def _toml_error(exc: tomllib.TOMLDecodeError, where: str) -> UsageError:
    """The parser's message with its place as ``FILE:LINE:COLUMN`` (as compilers name one);
    tomllib of Python 3.11 gives the place only inside its message."""
    message = str(exc)
    found = re.fullmatch(r"(.*) \(at line (\d+), column (\d+)\)", message, flags=re.DOTALL)
    if found is not None:
        what, line, column = found.groups()
        where = f"{where}:{line}:{column}"
    else:  # "(at end of document)": an unclosed string, table or array
        what = message.replace(" (at end of document)", ", at the end of the file")
    return UsageError(
        f"not valid TOML: {what[:1].lower()}{what[1:]}",
        where=where,
        fix="Fix the syntax there (https://toml.io); a string needs its quotes, a table "
        "header its brackets.",
    )


def config_from_mapping(
    data: Mapping[str, Any],
    *,
    config_dir: Path,
    where: str = "<programmatic config>",
    recorded: bool = False,
) -> SweepConfig:
    """Validate a config table (as read from TOML, or built in code) into a ``SweepConfig``.

    Relative ``run_dir``/``cache_dir`` are resolved against ``config_dir``. ``recorded``: the
    table is a run's own, read back from its manifest to rebuild its plan (``verify``); limits
    on how a run is operated that a later cotaudit added (``batch_poll_s``'s floor, a
    ``batch_max_requests`` above the provider's) are not applied to it, so that a run made
    before them still verifies.
    """
    _reject_unknown(
        data,
        _TOP_KEYS,
        where,
        "top level",
        sep=": ",
        tables={"each [[endpoints]] table": _ENDPOINT_KEYS, "[retry]": _RETRY_KEYS},
    )
    run_dir = _path(data, "run_dir", config_dir, where, required=True)
    assert run_dir is not None
    cache_dir = _path(data, "cache_dir", config_dir, where, required=False) or default_cache_dir()
    _check_cache_dir(
        cache_dir, f"{where}: cache_dir" + ("" if "cache_dir" in data else " (default)")
    )
    task = data.get("task")
    if not isinstance(task, Mapping):
        raise UsageError(
            "missing or invalid [task] table",
            where=f"{where}: [task]",
            fix='Add a [task] table with kind = "prompts" | "prontoqa" | "procedural".',
        )
    endpoints_raw = data.get("endpoints")
    if not isinstance(endpoints_raw, list) or not endpoints_raw:
        raise UsageError(
            "no [[endpoints]] given",
            where=f"{where}: [[endpoints]]",
            fix="Add at least one [[endpoints]] table with name, provider and model.",
        )
    endpoints: list[EndpointConfig] = []
    seen: set[str] = set()
    for i, table in enumerate(endpoints_raw):
        ep = _endpoint(table, f"{where}: endpoints[{i}]", recorded=recorded)
        if ep.name in seen:
            raise UsageError(
                f"duplicate endpoint name {ep.name!r}",
                where=f"{where}: endpoints[{i}].name",
                fix="Give every endpoint a distinct name (it prefixes request ids).",
            )
        seen.add(ep.name)
        endpoints.append(ep)
    retry = _retry(data.get("retry", {}), f"{where}: [retry]")
    limit = data.get("limit")
    if limit is not None:
        limit = integer(
            limit,
            name="'limit'",
            where=f"{where}: limit",
            fix="Set limit = N to audit the task's first N problems, or leave it out.",
            low=1,
        )
    return SweepConfig(
        run_dir=run_dir,
        cache_dir=cache_dir,
        task=dict(task),
        endpoints=tuple(endpoints),
        config_dir=config_dir,
        source=where,
        retry=retry,
        limit=limit,
    )


def _reject_unknown(
    table: Mapping[str, Any],
    allowed: frozenset[str],
    where: str,
    what: str,
    *,
    sep: str = ".",
    tables: Mapping[str, frozenset[str]] | None = None,
) -> None:
    """Refuse a key ``allowed`` lacks, naming the nearest accepted one (a typo), or the table
    of ``tables`` it belongs in (an endpoint's key written at the top level); a key meant to
    hold a credential gets the way keys are given instead. The value is never shown: it may
    be a key."""
    unknown = sorted(set(table) - allowed, key=str)  # a Python mapping: any keys
    if not unknown:
        return
    key = unknown[0]
    accepted = f"Accepted keys: {', '.join(sorted(allowed))}."
    close = nearest(key, allowed)
    normalised = str(key).lower().replace("-", "_")
    if normalised in _CREDENTIAL_KEYS or normalised.endswith(("_api_key", "_secret")):
        fix = (
            "A key is never written in the config (config files are copied and shared): "
            "remove it, export it as an environment variable, and give that variable's NAME, "
            'e.g. api_key_env = "OPENAI_API_KEY".'
            if "api_key_env" in allowed
            else "A key is never written in the config: remove it, and name its environment "
            "variable in the endpoint's api_key_env."
        )
    elif close:
        fix = f"Did you mean {close!r}? {accepted}"
    elif found := next(
        (
            (home, spelling)
            for home, keys in (tables or {}).items()
            if (spelling := nearest(key, keys))
        ),
        None,
    ):
        home, spelling = found
        spelled = "" if spelling == key else f" (spelled {spelling!r})"
        fix = f"It is a key of {home}{spelled}: move it into that table. {accepted}"
    else:
        fix = accepted
    raise UsageError(f"unknown key {key!r} at {what}", where=f"{where}{sep}{key}", fix=fix)


def _path(
    data: Mapping[str, Any], key: str, config_dir: Path, where: str, *, required: bool
) -> Path | None:
    value = data.get(key)
    if value is None:
        if required:
            raise UsageError(
                f"missing {key!r}",
                where=f"{where}: {key}",
                fix=f'Set {key} = "some/dir" (relative to the config file).',
            )
        return None
    if not isinstance(value, str) or not value.strip():
        raise UsageError(
            f"{key!r} must be a non-empty path string, got {shown(value)}",
            where=f"{where}: {key}",
            fix=f'Set {key} = "some/dir".',
        )
    path = Path(value).expanduser()
    return path if path.is_absolute() else (config_dir / path)


def _check_cache_dir(path: Path, where: str) -> None:
    """Refuse a cache directory that a file stands in the way of (at the path or above it),
    before anything is written: the cache would fail to open only once the run has begun."""
    for candidate in (path, *path.parents):
        try:
            if not candidate.exists():
                continue
            is_dir = candidate.is_dir()
        except OSError:  # unreadable: opening the cache reports it, naming the file
            return
        if is_dir:
            return
        what = (
            f"the cache directory {path} is a file"
            if candidate == path
            else f"the cache directory {path} is under {candidate}, which is a file"
        )
        raise UsageError(
            what,
            where=where,
            fix="Point cache_dir at a directory (it is created if missing), or move the file away.",
        )


def _endpoint(table: Any, where: str, *, recorded: bool = False) -> EndpointConfig:
    if not isinstance(table, Mapping):
        raise UsageError("an endpoint must be a table", where=where, fix="Use [[endpoints]].")
    _reject_unknown(table, _ENDPOINT_KEYS, where, "an endpoint")
    name = _str(table, "name", where, required=True)
    provider = _str(table, "provider", where, required=True)
    if provider not in PROVIDERS:
        raise UsageError(
            f"unknown provider {provider!r}",
            where=f"{where}.provider",
            fix=f"Use one of: {', '.join(PROVIDERS)}.",
        )
    model = _str(table, "model", where, required=True)
    assert name is not None and provider is not None and model is not None
    if not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise UsageError(
            f"endpoint name {name!r} has characters other than letters, digits, '-', '_', '.'",
            where=f"{where}.name",
            fix="Use a short identifier such as gpt4o or local-faithful.",
        )
    base_url = _str(table, "base_url", where, required=False)
    if base_url is not None:
        # First: the message below shows the URL, which must not carry a key.
        _check_base_url_secrets(base_url, f"{where}.base_url")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(
                f"base_url {base_url!r} is not an http(s) URL",
                where=f"{where}.base_url",
                fix='Use e.g. "https://api.openai.com/v1" or "http://127.0.0.1:8000/v1".',
            )
    api_key_env = _str(table, "api_key_env", where, required=False)
    if api_key_env is None and provider != "local" and not _self_hosted(base_url):
        raise UsageError(
            "missing 'api_key_env'",
            where=f"{where}.api_key_env",
            fix='Name the environment variable holding the key, e.g. "OPENAI_API_KEY" '
            "(only a loopback or http:// base_url may go without one).",
        )
    if api_key_env is not None and not _variable_name(api_key_env):
        # Not shown: what is here instead of a name is most often the key itself.
        raise UsageError(
            "api_key_env holds what looks like a key, not the NAME of an environment variable "
            "(the value is not repeated here)"
            if _looks_like_key(api_key_env)
            else "api_key_env is not an environment variable name: letters, digits and '_', "
            "not starting with a digit (the value is not repeated here, in case it is a key)",
            where=f"{where}.api_key_env",
            fix="Put the key in a variable and give its name: export OPENAI_API_KEY=<your key>, "
            'and api_key_env = "OPENAI_API_KEY"; remove any key written in this file.',
        )
    stop = table.get("stop")
    if stop is not None:
        if isinstance(stop, str):
            stop = [stop]
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise UsageError(
                f"'stop' must be a string or a list of strings, got {shown(table.get('stop'))}",
                where=f"{where}.stop",
                fix='Use e.g. stop = ["\\n\\n"].',
            )
    headers = _string_table(
        table,
        "headers",
        where,
        "string values",
        fix='Use headers = { "OpenAI-Organization" = "org-..." }.',
    )
    for key, value in headers.items():
        if any(c in key + value for c in "\r\n"):
            raise UsageError(
                f"header {key!r} contains a line break",
                where=f"{where}.headers.{key}",
                fix="Put each header on its own key, with a one-line value.",
            )
        if key.lower() in _SECRET_HEADERS:
            raise UsageError(
                f"header {key!r} carries a credential",
                where=f"{where}.headers.{key}",
                fix="Remove it: the key comes from the variable named in api_key_env.",
            )
    _refuse_pasted_keys(headers, f"{where}.headers")
    headers_env = _headers_env(table, where, headers)
    max_tokens = _int(table, "max_tokens", where, DEFAULT_MAX_TOKENS)
    reasoning = _reasoning_keys(table, where, provider, max_tokens)
    top_p = _optional_number(table, "top_p", where, low=0.0, high=1.0)
    if top_p is not None and (reasoning["omit_sampling"] or reasoning["thinking_budget"]):
        raise UsageError(
            "'top_p' is set, but this endpoint sends no sampling parameters "
            "(omit_sampling or thinking_budget)",
            where=f"{where}.top_p",
            fix="Remove top_p: reasoning models and Anthropic thinking reject a modified one.",
        )
    return EndpointConfig(
        name=name,
        provider=provider,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        requests_per_minute=_number(table, "requests_per_minute", where, DEFAULT_RPM),
        tokens_per_minute=_number(table, "tokens_per_minute", where, DEFAULT_TPM),
        max_concurrency=_concurrency(table, where),
        timeout_s=_number(table, "timeout_s", where, READ_TIMEOUT_S),
        max_tokens=max_tokens,
        top_p=top_p,
        seed=_optional_int(table, "seed", where),
        stop=tuple(stop) if stop is not None else None,
        price_input_per_mtok=_optional_number(table, "price_input_per_mtok", where, low=0.0),
        price_output_per_mtok=_optional_number(table, "price_output_per_mtok", where, low=0.0),
        headers=tuple(sorted(headers.items())),
        headers_env=tuple(sorted(headers_env.items())),
        outage_budget_s=_number(table, "outage_budget_s", where, OUTAGE_BUDGET_S),
        revision=_str(table, "revision", where, required=False),
        inline_think=_inline_think(table, where),
        **reasoning,
        **_batch_keys(table, where, name, provider, base_url, recorded=recorded),
    )


# Query parameters that carry a credential (Azure's "api-key", Google's "key", signed URLs).
_SECRET_QUERY_NAMES = ("key", "token", "secret", "password", "auth", "sig", "credential")


def _check_base_url_secrets(base_url: str, where: str) -> None:
    """A base_url never carries a credential: not in its user-info part, not in its query.

    Any query or fragment is refused: the providers append their route (``/chat/completions``)
    to base_url, so a query would end up before the path anyway; one whose parameter names a
    credential is called that, so the message says why it matters.
    """
    parts = urlsplit(base_url)
    if parts.username or parts.password:
        raise UsageError(
            "base_url must not carry credentials",
            where=where,
            fix="Put the key in an environment variable and name it in api_key_env.",
        )
    if parts.query or parts.fragment:
        names = [name.lower() for name, _ in parse_qsl(parts.query, keep_blank_values=True)]
        secret = next((n for n in names if any(m in n for m in _SECRET_QUERY_NAMES)), None)
        what = (
            f"base_url carries a credential in its query string (parameter {secret})"
            if secret is not None
            else "base_url must not have a query string or fragment"
        )
        raise UsageError(
            what,
            where=where,
            fix="Give the URL up to where the API's routes start (e.g. http://host:8000/v1), "
            "and put any key in an environment variable named in api_key_env.",
        )


# Prefixes of API keys as the providers issue them (OpenAI, Anthropic, Groq, xAI, Hugging
# Face, Google, GitHub, Replicate, OpenRouter).
_KEY_PREFIXES = ("sk-", "sk_", "gsk_", "xai-", "hf_", "AIza", "ghp_", "r8_", "pk-", "key-")
# Keys a user may write in place of api_key_env (refused as unknown, with how keys are given).
_CREDENTIAL_KEYS = frozenset(
    {"api_key", "apikey", "key", "token", "api_token", "secret", "password", "authorization"}
)


def _variable_name(text: str) -> bool:
    """A portable environment variable name that is not a key: POSIX's shape (letters, digits,
    '_', no leading digit), and not what a pasted key looks like."""
    shape = text.isascii() and text.replace("_", "").isalnum() and not text[0].isdigit()
    return shape and not _looks_like_key(text)


def _looks_like_key(text: str) -> bool:
    """What a provider's key looks like, not a variable's name: 20 characters or more with a
    known key prefix, or 32 letters and digits or more of mixed case with digits (Mistral's,
    Cohere's keys; names are of one case, OPENAI_API_KEY, hf_token, and shorter), or 32 hex
    digits or more (Azure's keys)."""
    body = "".join(c for c in text if c.isalnum())
    mixed = any(c.islower() for c in body) and any(c.isupper() for c in body)
    digits = any(c.isdigit() for c in body)
    hexadecimal = len(body) >= 32 and all(c in "0123456789abcdefABCDEF" for c in body)
    prefixed = len(text) >= 20 and text.startswith(_KEY_PREFIXES)
    return hexadecimal or prefixed or (len(body) >= 32 and mixed and digits)


def _string_table(
    table: Mapping[str, Any], key: str, where: str, of_what: str, *, fix: str
) -> Mapping[str, str]:
    """``table[key]``, a table of strings (empty where absent), else ``UsageError``."""
    value = table.get(key, {})
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise UsageError(f"'{key}' must be a table of {of_what}", where=f"{where}.{key}", fix=fix)
    return value


def _headers_env(
    table: Mapping[str, Any], where: str, headers: Mapping[str, str]
) -> dict[str, str]:
    """``headers_env``: header name -> the NAME of the environment variable holding its value
    (a gateway's key in a header of its own, e.g. ``Helicone-Auth``), validated as
    ``api_key_env`` is; the values are read when the endpoint is built, never stored."""
    given = _string_table(
        table,
        "headers_env",
        where,
        "environment variable names",
        fix='Use headers_env = { "Helicone-Auth" = "HELICONE_AUTH" }, with the value '
        'exported: export HELICONE_AUTH="Bearer <your key>".',
    )
    written = {k.lower() for k in headers}
    for header, variable in given.items():
        at = f"{where}.headers_env.{header}"
        if not header or any(c in header for c in "\r\n:") or header != header.strip():
            raise UsageError(
                f"{header!r} is not a header name", where=at, fix="Give the header's name alone."
            )
        if header.lower() in _SECRET_HEADERS:
            raise UsageError(
                f"header {header!r} is the endpoint's own credential",
                where=at,
                fix="Give the endpoint's key through api_key_env; headers_env is for the other "
                "headers a gateway reads a key from.",
            )
        if header.lower() in written:
            raise UsageError(
                f"header {header!r} is in both headers and headers_env",
                where=at,
                fix="Keep it in one of them: headers_env for a secret value, headers otherwise.",
            )
        if not _variable_name(variable):
            raise UsageError(
                "headers_env holds what looks like a key, not the NAME of an environment "
                "variable (the value is not repeated here)"
                if _looks_like_key(variable) or _pasted_key(variable)
                else "headers_env's value is not an environment variable name: letters, digits "
                "and '_', not starting with a digit (the value is not repeated here)",
                where=at,
                fix=f"Put the value in a variable and give its name: export NAME=<value>, and "
                f'headers_env = {{ "{header}" = "NAME" }}; remove any key written in this file.',
            )
    return dict(given)


def _pasted_key(text: str) -> bool:
    """A value with a provider's key prefix (``_KEY_PREFIXES``, 20 characters or more) or a
    ``Bearer``/``Basic`` credential."""
    text = text.strip()
    scheme, _, rest = text.partition(" ")
    return (len(text) >= 20 and text.startswith(_KEY_PREFIXES)) or (
        scheme.lower() in ("bearer", "basic") and bool(rest.strip())
    )


def _refuse_pasted_keys(value: Any, where: str) -> None:
    """Refuse a key pasted into ``headers`` or ``extra_body``: what they hold is sent as it
    is and copied into the run's manifest.json, so a key there would be in every copy of the
    run directory. A value with a provider's key prefix (``_KEY_PREFIXES``, 20 characters or
    more) or a ``Bearer``/``Basic`` credential is refused, at any depth; the value is never
    shown. (Not the other shapes ``_looks_like_key`` knows: 32 hex digits is a commit too.)"""
    if isinstance(value, Mapping):
        for key, item in value.items():
            _refuse_pasted_keys(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_pasted_keys(item, f"{where}[{i}]")
    elif isinstance(value, str) and _pasted_key(value):
        raise UsageError(
            "this value looks like an API key or a credential (it is not shown here)",
            where=where,
            fix="A key is never written in the config: it would be sent with every request as "
            "written and copied into the run's manifest.json. Remove it; give the endpoint's "
            "key through the variable named in api_key_env, and a header's (a gateway's key) "
            "through headers_env, which names the variable holding it.",
        )


def _self_hosted(base_url: str | None) -> bool:
    """A server of the user's own: one on loopback, or any plain-http one. It needs no key,
    and it has no provider's request budget to spare (``batch_poll_s``)."""
    if base_url is None:
        return False
    parts = urlsplit(base_url)
    if parts.scheme == "http":
        return True
    host = (parts.hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _choice(
    table: Mapping[str, Any], key: str, where: str, choices: tuple[str, ...], default: str | None
) -> str | None:
    value = table.get(key, default)
    if value is not None and value not in choices:
        # The first choice is no advice to one who misspelt another (mode = "Batch").
        close = nearest(value.lower(), choices) if isinstance(value, str) else None
        unset = f' (default "{default}")' if default is not None else ""
        raise UsageError(
            f"{key!r} must be one of {', '.join(choices)}, got {shown(value)}",
            where=f"{where}.{key}",
            fix=f'Did you mean {key} = "{close}"?'
            if close is not None
            else f"Set {key} to one of them, or leave it out{unset}.",
        )
    return None if value is None else str(value)


def _reasoning_keys(
    table: Mapping[str, Any], where: str, provider: str, max_tokens: int
) -> dict[str, Any]:
    """``max_tokens_param``, ``reasoning_effort``, ``omit_sampling``, ``thinking_budget``,
    ``extra_body``: each checked against the protocol that has it."""
    openai_side = provider != "anthropic"
    max_tokens_param = _choice(table, "max_tokens_param", where, MAX_TOKENS_PARAMS, "max_tokens")
    effort = _choice(table, "reasoning_effort", where, REASONING_EFFORTS, None)
    # The default spelling is no setting: a run manifest's config writes every endpoint's
    # max_tokens_param, and reading that config back (verify) must give the same endpoint.
    for key, value in (
        ("max_tokens_param", None if max_tokens_param == "max_tokens" else max_tokens_param),
        ("reasoning_effort", effort),
    ):
        if value is not None and not openai_side:
            raise UsageError(
                f"{key!r} is an OpenAI-protocol setting; this endpoint speaks Anthropic's",
                where=f"{where}.{key}",
                fix="Use thinking_budget for Anthropic extended thinking, or remove the key.",
            )
    omit = table.get("omit_sampling", False)
    if not isinstance(omit, bool):
        raise UsageError(
            f"'omit_sampling' must be true or false, got {shown(omit)}",
            where=f"{where}.omit_sampling",
            fix="Set omit_sampling = true for models that reject temperature and top_p.",
        )
    budget = table.get("thinking_budget")
    if budget is not None:
        if provider != "anthropic":
            raise UsageError(
                "'thinking_budget' is an Anthropic setting",
                where=f"{where}.thinking_budget",
                fix="Use reasoning_effort on an OpenAI-protocol endpoint, or remove the key.",
            )
        fix = "Raise max_tokens above the budget (it covers thinking and answer)."
        budget = integer(
            budget, name="'thinking_budget'", where=f"{where}.thinking_budget", fix=fix, low=1024
        )
        if budget >= max_tokens:
            raise UsageError(
                f"'thinking_budget' must be below max_tokens ({max_tokens}), got {budget}",
                where=f"{where}.thinking_budget",
                fix=fix,
            )
    extra = table.get("extra_body", {})
    if not isinstance(extra, Mapping) or not all(isinstance(k, str) for k in extra):
        example = (
            'Use a table of body fields, e.g. extra_body = { name = "value" } (with '
            "thinking_budget, no temperature, top_p or top_k: thinking refuses them)."
            if budget is not None
            else "Use e.g. extra_body = { top_k = 20, chat_template_kwargs = "
            "{ enable_thinking = false } }."
        )
        raise UsageError("'extra_body' must be a table", where=f"{where}.extra_body", fix=example)
    if budget is not None:
        # Every request would be a 400: said at load, before (or without) preflight.
        refused = sorted(set(extra) & _THINKING_REFUSES)
        if refused:
            raise UsageError(
                f"extra_body sets {refused[0]!r}, which Anthropic refuses with thinking on "
                "(thinking_budget): every request would be a 400",
                where=f"{where}.extra_body.{refused[0]}",
                fix=f"Remove {refused[0]} from extra_body, or remove thinking_budget: thinking "
                "is not compatible with a modified temperature, top_p or top_k.",
            )
    _refuse_pasted_keys(extra, f"{where}.extra_body")
    clash = sorted(set(extra) & _RUNNER_BODY_FIELDS)
    if clash:
        raise UsageError(
            f"extra_body sets {clash[0]!r}, which the runner sends itself",
            where=f"{where}.extra_body.{clash[0]}",
            fix="Use the endpoint's own key for it (max_tokens, top_p, seed, stop, "
            "reasoning_effort, thinking_budget, omit_sampling), or remove it.",
        )
    return {
        "max_tokens_param": max_tokens_param,
        "reasoning_effort": effort,
        "omit_sampling": omit,
        "thinking_budget": budget,
        "extra_body": _jsonable(dict(extra)),
    }


def _inline_think(table: Mapping[str, Any], where: str) -> bool | Literal["auto"]:
    value = table.get("inline_think", AUTO)
    if isinstance(value, bool):
        return value
    if value == AUTO:
        return AUTO
    raise UsageError(
        f"'inline_think' must be \"auto\", true or false, got {shown(value)}",
        where=f"{where}.inline_think",
        fix='Leave it out (or set "auto"): a leading <think> block is read as the trace on '
        "self-hosted OpenAI-compatible servers only; true or false to decide yourself.",
    )


def _batch_keys(
    table: Mapping[str, Any],
    where: str,
    name: str,
    provider: str,
    base_url: str | None,
    *,
    recorded: bool = False,
) -> dict[str, Any]:
    """``mode`` and the batch settings, each within what the provider's batch API does: a
    batch larger than it takes, or a poll faster than a provider should be asked, is refused
    rather than quietly changed (the run would not do what the config says)."""
    mode = _choice(table, "mode", where, MODES, "online")
    # A batch-only key with no mode written means the user expects batches and forgot to ask
    # for them: the run would send every request online, at the online price. A mode written
    # "online" is a choice, and the keys may stay set for switching back (as the online-only
    # keys may on a batch endpoint). batch_discount is not batch-only: a dry run of an online
    # endpoint prices it at batch rates too.
    stray = next((key for key in BATCH_ONLY_KEYS if key in table), None)
    if stray is not None and "mode" not in table:
        raise UsageError(
            f"{stray!r} is set, but endpoint {name!r} runs online (mode is not set; the "
            'default is "online"), where it does nothing',
            where=f"{where}.{stray}",
            fix=f'Set mode = "batch" to send this endpoint\'s requests as batches, or remove '
            f'{stray} (or write mode = "online" to keep it set for switching back).',
        )
    discount = _optional_number(table, "batch_discount", where, low=0.0, high=1.0)
    poll = _number(table, "batch_poll_s", where, BATCH_POLL_S)
    # None is the embedded server (provider "local" without a base_url): on this machine.
    own = _self_hosted(base_url) or (provider == "local" and base_url is None)
    if poll < BATCH_MIN_POLL_S and not own and not recorded:
        raise UsageError(
            f"'batch_poll_s' is {poll:g}, below {BATCH_MIN_POLL_S:g} s, the shortest wait "
            "between looks at a batch on a provider's API: every open batch is polled that "
            "often, and a batch takes minutes to hours",
            where=f"{where}.batch_poll_s",
            fix=f"Set batch_poll_s to {BATCH_MIN_POLL_S:g} or more (default {BATCH_POLL_S:g}), "
            "or leave it out. Shorter waits are taken for a server on this machine or at an "
            "http:// URL.",
        )
    most = BATCH_MAX_REQUESTS[provider]
    limit = table.get("batch_max_requests")
    if limit is not None:
        limit = integer(
            limit,
            name="'batch_max_requests'",
            where=f"{where}.batch_max_requests",
            fix=f"Leave it out for the provider's limit ({most}), or set e.g. 10000.",
            low=1,
        )
        if limit > most and not recorded:
            api = "Anthropic Message Batches" if provider == "anthropic" else "OpenAI Batch"
            speaks = f' (provider = "{provider}" speaks {api})' if provider == "local" else ""
            raise UsageError(
                f"'batch_max_requests' is {limit}, above {most}, the most requests "
                f"{api} takes in one batch{speaks}",
                where=f"{where}.batch_max_requests",
                fix=f"Set batch_max_requests to {most} or less, or leave it out (the "
                "provider's limit): a larger sweep is split into several batches.",
            )
    return {
        "mode": mode,
        "batch_discount": BATCH_DISCOUNT if discount is None else discount,
        "batch_poll_s": poll,
        "batch_max_requests": limit,
    }


def _concurrency(table: Mapping[str, Any], where: str) -> int | Literal["auto"]:
    value = table.get("max_concurrency", AUTO)
    if value == AUTO:
        return AUTO
    return integer(
        value,
        name="'max_concurrency'",
        where=f"{where}.max_concurrency",
        fix='Leave it out (or set "auto") to adapt to the server, or set e.g. 32.',
        low=1,
        alternative='"auto"',
    )


def _retry(table: Any, where: str) -> RetrySettings:
    if not isinstance(table, Mapping):
        raise UsageError("[retry] must be a table", where=where, fix="Use a [retry] table.")
    _reject_unknown(table, _RETRY_KEYS, where, "[retry]")
    d = RetrySettings()
    return RetrySettings(
        max_attempts=_int(table, "max_attempts", where, d.max_attempts),
        base_delay_s=_number(table, "base_delay_s", where, d.base_delay_s, allow_zero=True),
        max_delay_s=_number(table, "max_delay_s", where, d.max_delay_s, allow_zero=True),
        time_budget_s=_number(table, "time_budget_s", where, d.time_budget_s),
    )


def _str(table: Mapping[str, Any], key: str, where: str, *, required: bool) -> str | None:
    value = table.get(key)
    if value is None:
        if required:
            raise UsageError(f"missing {key!r}", where=f"{where}.{key}", fix=f'Set {key} = "...".')
        return None
    if not isinstance(value, str) or not value.strip():
        raise UsageError(
            f"{key!r} must be a non-empty string, got {shown(value)}",
            where=f"{where}.{key}",
            fix=f'Set {key} = "...".',
        )
    return value


def _number(
    table: Mapping[str, Any],
    key: str,
    where: str,
    default: float,
    *,
    allow_zero: bool = False,
) -> float:
    """A finite number > 0 (``allow_zero``: >= 0), ``default`` when the key is absent."""
    low = 0.0 if allow_zero else None
    expected = expected_number(low=low, positive=not allow_zero)
    return number(
        table.get(key, default),
        name=repr(key),
        where=f"{where}.{key}",
        fix=f"Set {key} to {expected} (default {default}).",
        low=low,
        positive=not allow_zero,
    )


def _int(table: Mapping[str, Any], key: str, where: str, default: int) -> int:
    """An integer >= 1, ``default`` when the key is absent."""
    return integer(
        table.get(key, default),
        name=repr(key),
        where=f"{where}.{key}",
        fix=f"Set {key} to {expected_integer(low=1)} (default {default}).",
        low=1,
    )


def _optional_number(
    table: Mapping[str, Any], key: str, where: str, *, low: float, high: float | None = None
) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    expected = expected_number(low=low, high=high)
    return number(
        value,
        name=repr(key),
        where=f"{where}.{key}",
        fix=f"Set {key} to {expected} or leave it out.",
        low=low,
        high=high,
    )


def _optional_int(table: Mapping[str, Any], key: str, where: str) -> int | None:
    value = table.get(key)
    if value is None:
        return None
    return integer(
        value,
        name=repr(key),
        where=f"{where}.{key}",
        fix=f"Set {key} to an integer or leave it out.",
    )


def _jsonable(value: Any) -> Any:
    """Turn TOML values (which may hold dates) into plain JSON types for hashing/storing."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)
