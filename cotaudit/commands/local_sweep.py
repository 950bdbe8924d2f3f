"""A sweep against the local model server started in this process, as ``demo`` and
``reproduce`` run theirs: Ctrl-C and SIGTERM stop it as they stop ``cotaudit run``."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runner.config import SweepConfig
    from runner.engine import RunSummary
    from runner.server.settings import ServerConfig


def sweep_in_process(
    config: SweepConfig, *, progress: bool, server: ServerConfig | None = None
) -> tuple[RunSummary, int]:
    """Sweep ``config`` against a server of ``server``'s settings (the defaults: the embedded
    models) on a free loopback port; the summary, and the HTTP requests the server served."""
    # Loaded before the loop starts: a Ctrl-C while they load (a second or so) is then one
    # before the sweep (cotaudit.commands.interrupts), not a cancellation of the loop's task
    # before the sweep's own signal handlers are set.
    from runner.engine import run_sweep, stop_on_signals
    from runner.server.lifecycle import running_server

    async def sweep() -> tuple[RunSummary, int]:
        with stop_on_signals() as stop:
            async with running_server(server) as local:
                urls = {ep.name: local.base_url for ep in config.endpoints}
                summary = await run_sweep(
                    config, progress=progress, base_urls=urls, stop_event=stop
                )
                return summary, int(local.stats()["requests_total"])

    summary, served = asyncio.run(sweep())
    if summary.errors:
        print(f"warning: {summary.errors} request(s) failed for good", file=sys.stderr)
    return summary, served
