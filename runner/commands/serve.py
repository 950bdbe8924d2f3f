"""``cotaudit serve``: run the local model server in the foreground until Ctrl-C.

The first line printed is the base URL (``http://127.0.0.1:PORT/v1``) so that scripts and
tests starting it as a subprocess (``--port 0``) can read where it listens; the known
models follow (only ``--model`` when it is given), then, with ``--replay``, the models the
recordings hold. The API key for ``--require-api-key`` is read from an environment variable,
never from the command line (where ``ps`` would show it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from cotaudit.constants import (
    LOCAL_HOST,
    SERVER_DEFAULT_PORT,
    SERVER_FAULT_RETRY_AFTER_S,
    SERVER_HANG_LIMIT_S,
)
from cotaudit.errors import UsageError
from cotaudit.flags import integer_flag, number_flag
from runner.server import replay
from runner.server.batch_jobs import BatchSpec
from runner.server.faults import FaultKind, FaultSpec, parse_fault_kind
from runner.server.latency import LatencySpec
from runner.server.lifecycle import running_server
from runner.server.models import UnknownModel, known_models, resolve_model
from runner.server.server_limits import LIMIT_HEADERS, RateLimitSpec
from runner.server.settings import ServerConfig

HELP = (
    "Run the local model server (OpenAI and Anthropic protocols) on loopback (default: "
    f"127.0.0.1:{SERVER_DEFAULT_PORT}) until Ctrl-C; writes nothing."
)

_RATE = number_flag(low=0.0, high=1.0, fix="give a probability per request, e.g. 0.05")
_SECONDS = number_flag(low=0.0, fix="give seconds, e.g. 0.5 (0: none)")
# What FaultSpec allows above 1 for rates whose decimal sum rounds above it (0.1 + 0.2 + 0.7).
FAULT_RATE_SLACK = 1e-9
_PER_MINUTE = number_flag(positive=True, fix="give e.g. 600, or leave the flag out for no limit")


def _port(text: str) -> int:
    """A TCP port for ``--port`` (argparse turns the error into a usage message, exit 2)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"port {port} is out of range; give 0 to 65535 (0: any free port)"
        )
    return port


def _latency(text: str) -> LatencySpec:
    """A ``--latency`` spec; a bad one is a usage message (exit 2), not a traceback."""
    try:
        return LatencySpec.parse(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(
            f"{exc.what}; {exc.fix}" if exc.fix else exc.what
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default=LOCAL_HOST, help="loopback address to bind (default: %(default)s)"
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=SERVER_DEFAULT_PORT,
        help="TCP port; 0: any free port (default: %(default)s)",
    )
    parser.add_argument(
        "--latency",
        type=_latency,
        default=LatencySpec(),
        metavar="SPEC",
        help="fixed:S | uniform:LOW,HIGH | lognormal:MEDIAN,SIGMA (seconds; default 0)",
    )
    parser.add_argument(
        "--seed",
        # random.Random seeds with the absolute value: --seed -5 would draw what --seed 5 does.
        type=integer_flag(low=0, fix="give e.g. --seed 1"),
        default=0,
        help="seed (>= 0) of latency and fault draws (default: %(default)s)",
    )
    faults = parser.add_argument_group("fault injection (rates are per-request probabilities)")
    for kind in FaultKind:
        faults.add_argument(
            f"--fault-{kind.value}",
            dest=f"fault_{kind.value}",
            type=_RATE,
            default=0.0,
            metavar="RATE",
            help=f"fraction of requests answered with fault {kind.value} (default: %(default)s)",
        )
    faults.add_argument(
        "--fault-first",
        default="",
        metavar="KINDS",
        help="comma-separated faults for the first requests, in order; 'ok' answers normally "
        "(e.g. 503,ok,reset; default: none)",
    )
    faults.add_argument(
        "--fault-echo-credentials",
        action="store_true",
        help="injected error bodies repeat the request's Authorization / x-api-key headers, "
        "as a careless proxy does (to test that clients redact keys)",
    )
    faults.add_argument(
        "--retry-after",
        type=number_flag(low=0.0, fix="give whole or fractional seconds, e.g. 1"),
        default=SERVER_FAULT_RETRY_AFTER_S,
        metavar="SECONDS",
        help="seconds advertised by injected 429s (default: %(default)s)",
    )
    faults.add_argument(
        "--hang-limit",
        # 0 would reset a hung request at once: --fault-reset already is that fault.
        type=number_flag(
            positive=True, fix="give e.g. 30; for a connection reset at once use --fault-reset"
        ),
        default=SERVER_HANG_LIMIT_S,
        metavar="SECONDS",
        help="seconds (> 0) a hung request is held before its connection is reset "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--per-token",
        type=_SECONDS,
        default=0.0,
        metavar="SECONDS",
        help="seconds per output token added to each answer's latency (default: %(default)s)",
    )
    limits = parser.add_argument_group(
        "provider mode: per-key budgets (any of these turns it on; docs/server.md)"
    )
    limits.add_argument(
        "--rpm", type=_PER_MINUTE, default=None, help="requests per minute (default: no limit)"
    )
    limits.add_argument(
        "--tpm",
        type=_PER_MINUTE,
        default=None,
        help="tokens per minute, prompt + max_tokens (default: no limit)",
    )
    limits.add_argument(
        "--itpm",
        type=_PER_MINUTE,
        default=None,
        help="input tokens per minute (default: no limit)",
    )
    limits.add_argument(
        "--otpm",
        type=_PER_MINUTE,
        default=None,
        help="output tokens per minute, settled on answer (default: no limit)",
    )
    limits.add_argument(
        "--limit-headers",
        choices=LIMIT_HEADERS,
        default="route",
        help="rate-limit headers on every answer: route (each protocol its own family, as "
        "the providers send them), both (both families on every route), or none (only "
        "retry-after on a 429) (default: %(default)s)",
    )
    limits.add_argument(
        "--no-limit-headers",
        dest="limit_headers",
        action="store_const",
        const="none",
        help="the same as --limit-headers none",
    )
    limits.add_argument(
        "--retry-after-ms",
        action="store_true",
        help="a 429 also carries retry-after-ms, the exact wait (as some OpenAI-compatible "
        "servers send it; the providers send whole seconds only)",
    )
    parser.add_argument(
        "--require-api-key-env",
        metavar="VAR",
        default=None,
        help="answer 401 unless requests carry the key held in environment variable VAR "
        "(default: no key needed)",
    )
    batches = parser.add_argument_group("batch APIs (docs/server.md, 'Batch APIs')")
    batches.add_argument(
        "--batch-processing",
        type=_SECONDS,
        default=BatchSpec.processing_s,
        metavar="SECONDS",
        help="seconds a batch takes from validation to its last item (default: %(default)s)",
    )
    batches.add_argument(
        "--batch-error-rate",
        type=number_flag(low=0.0, high=1.0, fix="give the share of items, e.g. 0.1"),
        default=BatchSpec.error_rate,
        metavar="RATE",
        help="fraction of batch items answered with a server error (default: %(default)s)",
    )
    batches.add_argument(
        "--batch-expire",
        type=_SECONDS,
        default=BatchSpec.expire_s,
        metavar="SECONDS",
        help="seconds after which an unfinished batch expires (default 24 h)",
    )
    batches.add_argument(
        "--batch-enqueued-tokens",
        type=integer_flag(low=1, fix="give tokens per model, e.g. 90000"),
        default=None,
        metavar="TOKENS",
        help="OpenAI's enqueued-token limit per model: a batch that would pass it, with the "
        "model's batches queued or running, fails as a whole (token_limit_exceeded; "
        "default: no limit)",
    )
    parser.add_argument(
        "--replay",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help="recorded outputs replay models answer from (repeatable; default: none)",
    )
    parser.add_argument(
        "--model",
        metavar="NAME",
        default=None,
        help="answer every completion with this one model, whatever model the request names, "
        "as llama.cpp's server does (e.g. replay:model=gpt-4o; default: each request's own)",
    )


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """The ServerConfig the parsed flags describe."""
    rates = {k: getattr(args, f"fault_{k.value}") for k in FaultKind}
    given = {k: r for k, r in rates.items() if r > 0}
    if sum(given.values()) > 1.0 + FAULT_RATE_SLACK:
        # FaultSpec refuses it too, but as "fault spec": name the flags as they were typed.
        flags = ", ".join(f"--fault-{k.value} {r:g}" for k, r in given.items())
        raise UsageError(
            f"the fault rates sum to {sum(given.values()):g} > 1",
            where=flags,
            fix="Lower them to a sum of at most 1: each is the share of requests given that fault.",
        )
    script = tuple(
        None if name.strip() == "ok" else parse_fault_kind(name, where="--fault-first")
        for name in args.fault_first.split(",")
        if name.strip()
    )
    key = None
    if args.require_api_key_env is not None:
        key = os.environ.get(args.require_api_key_env)
        if not key:
            raise UsageError(
                f"environment variable {args.require_api_key_env} is unset or empty",
                where="--require-api-key-env",
                fix="export the key in that variable before starting the server",
            )
    for path in args.replay:
        replay.check_source(path, where=f"--replay {path}")
    try:
        batches = BatchSpec(
            processing_s=args.batch_processing,
            error_rate=args.batch_error_rate,
            expire_s=args.batch_expire,
            openai_enqueued_tokens=args.batch_enqueued_tokens,
        )
    except ValueError as exc:
        raise UsageError(
            str(exc),
            where="--batch-processing / --batch-error-rate / --batch-expire / "
            "--batch-enqueued-tokens",
            fix="give seconds >= 0 and a rate between 0 and 1",
        ) from exc
    return ServerConfig(
        host=args.host,
        port=args.port,
        latency=args.latency,
        latency_seed=args.seed,
        per_output_token_s=args.per_token,
        faults=FaultSpec(
            rates=given,
            script=script,
            seed=args.seed,
            retry_after_s=args.retry_after,
            hang_s=args.hang_limit,
            echo_credentials=args.fault_echo_credentials,
        ),
        rate_limit=RateLimitSpec(
            requests_per_minute=args.rpm,
            tokens_per_minute=args.tpm,
            input_tokens_per_minute=args.itpm,
            output_tokens_per_minute=args.otpm,
            limit_headers=args.limit_headers,
            retry_after_ms=args.retry_after_ms,
        ),
        require_api_key=key,
        replay=tuple(args.replay),
        batches=batches,
        loaded_model=args.model,
    )


def _index_replay(config: ServerConfig) -> None:
    """Read the replay sources now, before the URL is printed: a stream with a corrupt line
    would otherwise answer every replay request with a 500, and sources without a single
    recording (a plan, another tool's JSONL) every one with a 404 that blames the prompt."""
    index = replay.active_index()
    if not config.replay or index is None:
        return
    if len(index) == 0:
        raise UsageError(
            "no recordings: no response record with text, no evidence-pack output",
            where=f"--replay {', '.join(str(p) for p in config.replay)}",
            fix="Give an evidence pack (its root, its evidence/ or one model's directory) or "
            "a results.jsonl of a run that has answers.",
        )


def _check_loaded_model(config: ServerConfig) -> None:
    """Refuse a ``--model`` that would answer every request with an error, naming what would
    answer instead (after :func:`_index_replay`: a replay model is checked against what the
    sources hold)."""
    name = config.loaded_model
    if name is None:
        return
    index = replay.active_index()
    held = [] if index is None else index.held_models()
    try:
        model = resolve_model(name)
    except UnknownModel as exc:
        raise UsageError(
            str(exc), where=f"--model {name}", fix="Name a model the recordings hold."
        ) from None
    except ValueError as exc:
        raise UsageError(
            str(exc), where=f"--model {name}", fix="Fix the model's options."
        ) from None
    if model is None:
        raise UsageError(
            f"no model {name!r}",
            where=f"--model {name}",
            fix=f"Use one of: {', '.join(known_models())} (docs/reasoners.md).",
        )
    if isinstance(model, replay.ReplayModel):
        if index is None:
            raise UsageError(
                "a replay model with no recordings to answer from",
                where=f"--model {name}",
                fix="Give the recordings with --replay PATH.",
            )
        if model.model is None and len(held) > 1:
            raise UsageError(
                f"the replay sources hold several models: {replay.held_models(held)}",
                where=f"--model {name}",
                fix="Name one, e.g. --model replay:model=NAME.",
            )


def _print_models(config: ServerConfig) -> None:
    if config.loaded_model is not None:
        print(f"models: {config.loaded_model} (answers every model name)", flush=True)
    else:
        print(f"models: {', '.join(known_models())}", flush=True)
    index = replay.active_index()
    if config.replay and index is not None:
        # The names clients must ask for: a replay model of another name answers nothing.
        print(f"replay: {replay.held_models(index.held_models())}", flush=True)


async def _serve(config: ServerConfig) -> None:
    try:
        async with running_server(config) as server:
            _index_replay(config)
            _check_loaded_model(config)
            print(server.base_url, flush=True)
            _print_models(config)
            print("(Ctrl-C to stop)", file=sys.stderr, flush=True)
            stop = asyncio.Event()
            # SIGTERM (how test harnesses stop a subprocess) shuts down as cleanly as Ctrl-C.
            with contextlib.suppress(NotImplementedError):
                asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
            await stop.wait()
    finally:
        if config.replay:
            replay.configure([])  # the sources are process-wide: leave none behind


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(config))
    return 0
