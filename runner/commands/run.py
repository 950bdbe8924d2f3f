"""``cotaudit run CONFIG`` (or ``--model PROVIDER/MODEL``): run or resume a sweep;
``--dry-run`` only estimates it.

Exit status: 0 when every planned request has a successful record; 3 when requests failed
for good (their error records are in the stream; the summary counts them by type and prints
the command that retries them); 1 when an endpoint was stopped (authentication failures, an
outage past its budget: its requests stay pending); 130 after Ctrl-C; 2 for bad input,
before anything is written (``docs/command-line.md``, "Exit status").
"""

from __future__ import annotations

import argparse
import itertools
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cotaudit.errors import UsageError
from cotaudit.flags import add_alias, integer_flag
from cotaudit.schema import RESULTS_NAME
from runner.batch.store import BatchStore
from runner.commands.one_line import FORMS, config_for_model
from runner.config import EndpointConfig, SweepConfig, load_config, with_overrides
from runner.engine import RunSummary, check_open_batches, iter_plan, run_sweep_sync
from runner.manifest import Shard, check_manifest
from runner.redaction import redact
from runner.resume import DigestSet, StreamState, scan_stream

HELP = (
    "Run (or resume) a sweep described by a TOML config, or the default audit of one model "
    "(--model); writes RUN_DIR/manifest.json and RUN_DIR/results.jsonl."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_or_model(parser, "run the default ProntoQA audit of one model, without a config")
    add_overrides(parser)
    parser.add_argument(
        "--retry-errors",
        action="store_true",
        help="re-send requests whose record is an error (the new record supersedes it)",
    )
    parser.add_argument(
        "--shard", metavar="i/N", help="run only requests with sha256(request_id) %% N == i"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    add_alias(parser, "--no-progress", "--quiet", dest="quiet", flag=True)
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print planned requests, tokens, minimum time and cost per endpoint; send nothing",
    )
    parser.add_argument(
        "--no-preflight", action="store_true", help="skip the one-request check per endpoint"
    )
    parser.add_argument(
        "--cancel-batches",
        action="store_true",
        help="cancel this run's open batches at the provider and write what they return "
        "(unrun requests as BatchCancelled errors); send nothing new",
    )


def add_config_or_model(parser: argparse.ArgumentParser, model_help: str) -> None:
    """The sweep config, or ``--model`` (``model_help`` says what the command does with it)."""
    parser.add_argument(
        "config", nargs="?", help="the sweep config (TOML); or give --model instead"
    )
    parser.add_argument("--model", metavar="PROVIDER/MODEL", help=f"{model_help}: {FORMS}")


# The overrides that change how a run is carried out, not what it plans ("operational" in
# docs/command-line.md, "Overrides"): no planned request depends on them.
OPERATIONAL_OVERRIDES = ("--max-concurrency", "--run-dir", "--no-cache")


def add_overrides(parser: argparse.ArgumentParser, *, operational: bool = True) -> None:
    """The options that override a config on any run (``docs/configuration.md``).

    ``operational=False`` (``cotaudit plan``) parses the operational ones as a run does but
    does not offer them in the help: they change nothing a plan holds, and the command
    refuses them (:func:`operational_overrides_given`) rather than ignore them.
    """
    parser.add_argument(
        "--limit",
        type=integer_flag(low=1, fix="give the number of problems to audit, e.g. --limit 5"),
        metavar="N",
        help="audit only the task's first N problems (changes the plan; raising it later "
        "grows the run)",
    )

    def shown(text: str) -> str:
        return text if operational else argparse.SUPPRESS

    parser.add_argument(
        "--max-concurrency",
        type=integer_flag(low=1, fix="give e.g. --max-concurrency 32"),
        metavar="N",
        help=shown("requests in flight per endpoint, for every endpoint (default: the config's)"),
    )
    parser.add_argument(
        "--run-dir",
        metavar="DIR",
        help=shown(
            "where the run is written (default: the config's run_dir; for --model, "
            "runs/PROVIDER-MODEL)"
        ),
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help=shown("neither read nor write the response cache (every request is sent)"),
    )


def operational_overrides_given(args: argparse.Namespace) -> list[str]:
    """The operational overrides (``OPERATIONAL_OVERRIDES``) on this command line."""
    given = (args.max_concurrency is not None, args.run_dir is not None, args.no_cache)
    return [flag for flag, on in zip(OPERATIONAL_OVERRIDES, given, strict=True) if on]


def config_from_args(args: argparse.Namespace) -> SweepConfig:
    """The config a command line describes: CONFIG or --model, then the overrides."""
    if (args.config is None) == (getattr(args, "model", None) is None):
        raise UsageError(
            "give a config file or --model, not both" if args.config else "nothing to run",
            fix="Pass a TOML config (cotaudit run examples/audit-openai.toml) or one model "
            "(cotaudit run --model local/faithful).",
        )
    if args.config is not None:
        config = load_config(args.config)
    else:
        config = config_for_model(args.model, cwd=Path.cwd())
    if args.run_dir is not None and not args.run_dir.strip():
        # An unset shell variable (--run-dir "$DIR") must not fall back to the config's
        # run_dir: the run would go into a directory the user did not name.
        raise UsageError(
            "--run-dir is empty",
            where="--run-dir",
            fix="Give the run directory (e.g. --run-dir runs/retry), or leave the option out "
            "for the config's run_dir.",
        )
    return with_overrides(
        config,
        run_dir=Path(args.run_dir).expanduser().absolute() if args.run_dir is not None else None,
        limit=args.limit,
        max_concurrency=args.max_concurrency,
    )


def check_local_models(config: SweepConfig) -> None:
    """Refuse an embedded-server model the server does not have, listing those it has.

    Checked before anything is started or written, with or without the preflight: the
    server's own answer names them too, but a 404 excerpt is cut short.
    """
    embedded = [ep for ep in config.endpoints if ep.embedded]
    if not embedded:
        return
    from runner.server.faults import fault_for_model
    from runner.server.models import known_models, load_builtin_models, resolve_model

    load_builtin_models()
    for ep in embedded:
        if fault_for_model(ep.model) is not None:
            continue
        where = f"{config.source}: endpoint {ep.name}: model"
        try:
            found = resolve_model(ep.model)
        except ValueError as exc:
            raise UsageError(str(exc), where=where, fix="Fix the model's options.") from None
        if found is None:
            raise UsageError(
                f"the local server has no model {ep.model!r}",
                where=where,
                fix=f"Use one of: {', '.join(known_models())} (docs/reasoners.md).",
            )


def warn_unsent_settings(config: SweepConfig) -> None:
    """Say on stderr, once as the command starts, what the config sets that no request will
    carry (``SweepConfig.warnings``). Even under ``--quiet``, which silences progress, not
    warnings: the preflight's warnings are printed under it too."""
    for line in config.warnings():
        print(line, file=sys.stderr, flush=True)


def retry_command(args: argparse.Namespace) -> str:
    """The command that re-sends this run's failed requests: this one, with --retry-errors."""
    return _rerun(args, "--retry-errors")


def cancel_command(args: argparse.Namespace) -> str:
    """The command that cancels this run's open batches: this one, with --cancel-batches."""
    return _rerun(args, "--cancel-batches")


def _rerun(args: argparse.Namespace, flag: str) -> str:
    """This command again (its config or model and the flags that select its run and its
    requests), with ``flag``."""
    words = ["cotaudit", "run"]
    words += [args.config] if args.config is not None else ["--model", args.model]
    for name, value in (
        ("--run-dir", args.run_dir),
        ("--limit", args.limit),
        ("--max-concurrency", args.max_concurrency),
        ("--shard", args.shard),
    ):
        if value is not None:
            words += [name, str(value)]
    switches = (
        ("--no-cache", args.no_cache),
        ("--no-preflight", getattr(args, "no_preflight", False)),
        ("--quiet", getattr(args, "quiet", False)),
    )
    words += [name for name, on in switches if on]
    return shlex.join([*words, flag])


def _by_type(types: Mapping[str, int]) -> str:
    return ", ".join(f"{n:,} {name}" for name, n in sorted(types.items(), key=lambda t: -t[1]))


def report(summary: RunSummary, args: argparse.Namespace) -> list[str]:
    """What ``cotaudit run`` says at the end (stderr), one line each."""
    # The run directory ends the first line, what the stream holds: the second says how the
    # run got there, so that each fits a terminal.
    first, *rest = summary.lines()
    lines = [f"cotaudit run: {first} -> {summary.run_dir}", *(f"cotaudit run: {li}" for li in rest)]
    retry = retry_command(args)
    new = sum(summary.error_types.values())
    if new:
        lines.append(
            f"cotaudit run: {new:,} request{'s' if new != 1 else ''} failed for good "
            f"({_by_type(summary.error_types)}); their error records are in the stream. "
            f"Retry them with: {retry}"
        )
    if summary.stored_errors:
        n = summary.stored_errors
        lines.append(
            f"cotaudit run: the stream holds {n:,} request{'s' if n != 1 else ''} that failed "
            f"for good in an earlier run, not re-sent now. Retry them with: {retry}"
        )
    if summary.uncached:
        # Said again at the end (the warning may have scrolled away), though the exit status
        # stays the stream's: the run is complete, and a rerun would not store them either.
        n = summary.uncached
        lines.append(
            f"cotaudit run: {n:,} answer{'s' if n != 1 else ''} could not be stored in the "
            "response cache (the warning above says why); they are in the stream, but another "
            "run directory would send them again. Fix the cache for the next run."
        )
    if summary.interrupted:
        lines.append(f"cotaudit run: {summary.interrupted_line()}")
    elif summary.stopped_endpoints:
        pending = (
            f"{summary.pending:,} requests"
            if summary.counted
            else "the rest of the plan (not counted: --quiet)"
        )
        lines.append(
            f"cotaudit run: stopped sending to {', '.join(summary.stopped_endpoints)}; "
            f"{pending} pending: fix what the message above says and rerun the same command "
            "to resume"
        )
    if summary.batches_open and (summary.interrupted or summary.stopped_endpoints):
        # Stopping the run does not stop its batches (docs/engine.md, "Batch mode"): whoever
        # pressed Ctrl-C to stop spending must read that they still run, and how to stop them.
        n = summary.batches_open
        batches, are, them = ("batches", "are", "them") if n != 1 else ("batch", "is", "it")
        lines.append(
            f"cotaudit run: {n:,} {batches} at the provider {are} not collected: stopping the "
            f"run does not stop {them}, and the provider runs and bills {them} all the same. "
            f"Rerun the same command to collect the results, or cancel {them} with: "
            f"{cancel_command(args)}"
        )
    return [redact(line) for line in lines]


def exit_status(summary: RunSummary) -> int:
    """130 interrupted, 1 an endpoint stopped, 3 requests failed for good, else 0."""
    if summary.interrupted:
        return 130
    if summary.stopped_endpoints:
        return 1
    if summary.failed:
        return 3
    return 0


@dataclass(frozen=True, slots=True)
class EndpointEstimate:
    """What a dry run reports for one endpoint."""

    endpoint: str
    requests: int
    input_tokens: int  # estimated, ~4 characters per token
    output_tokens: int  # upper bound: max_tokens per request
    min_seconds: float  # the least time the RPM/TPM limits allow
    cost: float | None  # in the price's currency, None without prices
    batch_cost: float | None = None  # the same at the endpoint's batch rate
    batch_discount: float = 0.5  # the share a batch saves
    batch: bool = False  # the endpoint runs in batch mode
    done: int = 0  # planned requests the run directory's stream already holds (not counted)
    in_batches: int = 0  # planned requests in batches an earlier run sent (not counted)

    def line(self) -> str:
        cost = ""
        if self.cost is not None and self.batch_cost is not None:
            off = f"{self.batch_discount:.0%} off"
            if self.batch:
                cost = (
                    f", cost <= {self.batch_cost:.2f} at batch rates ({off}; "
                    f"online {self.cost:.2f})"
                )
            else:
                cost = (
                    f", cost <= {self.cost:.2f} online ({self.batch_cost:.2f} at batch "
                    f"rates, {off})"
                )
        when = (
            "within the provider's 24 h batch window"
            if self.batch
            else f">= {self.min_seconds:.0f} s at the configured limits"
        )
        planned = self.requests + self.done + self.in_batches
        held = []
        if self.done:
            held.append(f"{self.done} of {planned} planned already in the stream")
        if self.in_batches:
            held.append(f"{self.in_batches} in open batches an earlier run sent: it waits for them")
        left = f" left ({'; '.join(held)})" if held else ""
        return (
            f"{self.endpoint}: {self.requests} requests{left}, ~{self.input_tokens} input "
            f"tokens, <= {self.output_tokens} output tokens, {when}{cost}"
        )


ESTIMATE_CHUNK = 4096  # planned requests looked up in the stream's ids at once


def estimate(
    config: SweepConfig, shard: Shard | None, *, retry_errors: bool = False
) -> list[EndpointEstimate]:
    """Walk each endpoint's plan without sending anything: what a run of ``config`` would
    send, which for a run directory that already holds a stream is what it has left.

    The run directory is checked as the run checks it (one of another config is refused, a
    record that breaks the schema is named, an online endpoint with open batches is refused),
    reading only: a dry run writes nothing. A request in a batch an earlier run sent and did
    not finish is not counted either: the run waits for that batch's result, already paid for.
    A request whose answer the response cache holds is counted as one to send: a dry run
    does not open the cache."""
    task = config.build_task()
    state = StreamState()
    if check_manifest(config.run_dir, config, shard) is not None:
        state = scan_stream(config.run_dir / RESULTS_NAME)
    check_open_batches(config)
    batches = [b for b in BatchStore(config.run_dir).load() if b.open]
    out = []
    for ep in config.endpoints:
        n = tin = tout = done = in_batches = 0
        claimed = DigestSet.of(
            request_id for b in batches if b.endpoint == ep.name for request_id in b.request_ids()
        )
        plan = iter_plan(task, ep.identity(), shard)
        while chunk := list(itertools.islice(plan, ESTIMATE_CHUNK)):
            ids = [spec.request_id for _, spec in chunk]
            held = state.succeeded.contains_many(ids)
            if not retry_errors:
                held |= state.failed.contains_many(ids)
            sent = claimed.contains_many(ids) if ep.batch and len(claimed) else None
            for i, ((_, spec), in_stream) in enumerate(zip(chunk, held.tolist(), strict=True)):
                if in_stream:
                    done += 1
                elif sent is not None and sent[i]:
                    in_batches += 1
                else:
                    n += 1
                    tin += spec.estimated_input_tokens()
                    tout += int(spec.params.get("max_tokens") or 0)
        out.append(_estimate(ep, n, tin, tout, done, in_batches))
    return out


def _estimate(
    ep: EndpointConfig, n: int, tin: int, tout: int, done: int, in_batches: int = 0
) -> EndpointEstimate:
    minutes = (
        0.0 if ep.batch else max(n / ep.requests_per_minute, (tin + tout) / ep.tokens_per_minute)
    )
    cost = batch_cost = None
    if ep.price_input_per_mtok is not None or ep.price_output_per_mtok is not None:
        cost = tin * (ep.price_input_per_mtok or 0.0) + tout * (ep.price_output_per_mtok or 0.0)
        cost /= 1e6
        batch_cost = cost * (1.0 - ep.batch_discount)
    return EndpointEstimate(
        ep.name,
        n,
        tin,
        tout,
        minutes * 60.0,
        cost,
        batch_cost=batch_cost,
        batch_discount=ep.batch_discount,
        batch=ep.batch,
        done=done,
        in_batches=in_batches,
    )


def _any_open_batch(config: SweepConfig) -> bool:
    """For ``--cancel-batches``: whether the run directory holds an open batch of the config's
    batch endpoints. A directory that never sent one is refused (``UsageError``), before it
    is made: the batches to cancel were sent from another one (a run_dir or --run-dir not
    given as then), and a run that ended with "0 written", exit 0, let its user believe
    they were cancelled while they ran on, billed. One whose batches are all collected says
    there is nothing to cancel (False)."""
    names = [ep.name for ep in config.endpoints if ep.batch]
    batches = [b for b in BatchStore(config.run_dir).load() if b.endpoint in names]
    if not batches:
        raise UsageError(
            f"{config.run_dir} holds no batch of endpoint{'s' if len(names) > 1 else ''} "
            f"{', '.join(map(repr, names))}: no run into this directory sent one, so there is "
            "nothing here to cancel",
            where="--cancel-batches",
            fix="Cancel from the run directory that sent the batches: the run_dir (or "
            "--run-dir) and the endpoint names they were sent with",
        )
    if any(b.open for b in batches):
        return True
    print(
        f"cotaudit run: every batch in {config.run_dir / 'batches'} is collected already: "
        "nothing to cancel",
        file=sys.stderr,
        flush=True,
    )
    return False


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    shard = Shard.parse(args.shard) if args.shard else None
    check_local_models(config)
    clash = [
        flag
        for flag, on in (("--retry-errors", args.retry_errors), ("--dry-run", args.dry_run))
        if on
    ]
    if args.cancel_batches and clash:
        raise UsageError(
            f"--cancel-batches and {clash[0]} contradict each other",
            where="cotaudit run",
            fix="Cancel on its own (--cancel-batches); then re-send with --retry-errors if "
            "you want the cancelled requests after all.",
        )
    if args.cancel_batches and not any(ep.batch for ep in config.endpoints):
        # Refused here, before the engine makes the run directory and writes a manifest for
        # a run that could only cancel nothing.
        raise UsageError(
            f"no endpoint of {config.source} is in batch mode, so this run has no batch to cancel",
            where="--cancel-batches",
            fix='To cancel the batches an earlier run sent, rerun with mode = "batch" on '
            "their endpoint, as when it sent them; an online run has nothing to cancel "
            "(Ctrl-C stops it).",
        )
    if args.cancel_batches and not _any_open_batch(config):
        return 0
    warn_unsent_settings(config)
    if args.dry_run:
        for est in estimate(config, shard, retry_errors=args.retry_errors):
            print(est.line())
        return 0
    summary = run_sweep_sync(
        config,
        retry_errors=args.retry_errors,
        shard=shard,
        progress=not args.quiet,
        # The ping is an online completion, billed as any other: --cancel-batches sends
        # nothing new, and a refused key shows as the cancel call's refusal instead.
        preflight=not args.no_preflight and not args.cancel_batches,
        use_cache=not args.no_cache,
        cancel_batches=args.cancel_batches,
    )
    for line in report(summary, args):
        print(line, file=sys.stderr)
    return exit_status(summary)
