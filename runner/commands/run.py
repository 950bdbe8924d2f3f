"""``cotaudit run CONFIG``: run or resume a sweep; ``--dry-run`` only estimates it."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from runner.config import EndpointConfig, SweepConfig, load_config
from runner.engine import iter_plan, run_sweep_sync
from runner.manifest import Shard

HELP = "Run (or resume) a sweep described by a TOML config; writes RUN/results.jsonl."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="the sweep config (TOML)")
    parser.add_argument(
        "--retry-errors",
        action="store_true",
        help="re-send requests whose record is an error (the new record supersedes it)",
    )
    parser.add_argument(
        "--shard", metavar="i/N", help="run only requests with sha256(request_id) %% N == i"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress display")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print planned requests, tokens, minimum time and cost per endpoint; send nothing",
    )
    parser.add_argument(
        "--no-preflight", action="store_true", help="skip the one-request check per endpoint"
    )


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
        return (
            f"{self.endpoint}: {self.requests} requests, ~{self.input_tokens} input tokens, "
            f"<= {self.output_tokens} output tokens, {when}{cost}"
        )


def estimate(config: SweepConfig, shard: Shard | None) -> list[EndpointEstimate]:
    """Walk each endpoint's plan without sending anything."""
    task = config.build_task()
    out = []
    for ep in config.endpoints:
        n = tin = tout = 0
        for _, spec in iter_plan(task, ep.identity(), shard):
            n += 1
            tin += spec.estimated_input_tokens()
            tout += int(spec.params.get("max_tokens") or 0)
        out.append(_estimate(ep, n, tin, tout))
    return out


def _estimate(ep: EndpointConfig, n: int, tin: int, tout: int) -> EndpointEstimate:
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
    )


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    shard = Shard.parse(args.shard) if args.shard else None
    if args.dry_run:
        for est in estimate(config, shard):
            print(est.line())
        return 0
    summary = run_sweep_sync(
        config,
        retry_errors=args.retry_errors,
        shard=shard,
        progress=not args.no_progress,
        preflight=not args.no_preflight,
    )
    print(f"cotaudit run: {summary.line()} -> {summary.run_dir}", file=sys.stderr)
    if summary.interrupted:
        print("cotaudit run: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    if summary.stopped_endpoints:
        return 1
    return 0
