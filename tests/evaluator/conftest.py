"""Fixtures of the evaluator's command tests: real swept runs, not yet evaluated.

- ``swept_run(problems, seed=0)`` (session): the demo's sweep (four simulated reasoners on
  generated ProntoQA problems, through the local server over loopback) into a run directory,
  made once per (problems, seed); returns a fresh copy each call, so a test may change it.
- ``drawn``: the matplotlib figures the figure functions draw, in order (and ``by_png``, by
  their PNG's name), kept after they are written (``save_figure`` closes them).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def swept_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    from cotaudit.commands.demo import demo_config
    from runner.engine import run_sweep
    from runner.server.lifecycle import running_server

    made: dict[tuple[int, int], Path] = {}

    async def sweep(out: Path, problems: int, seed: int) -> Path:
        config = demo_config(out, problems=problems, seed=seed)
        async with running_server() as server:
            urls = {ep.name: server.base_url for ep in config.endpoints}
            summary = await run_sweep(config, progress=False, base_urls=urls)
        assert summary.errors == 0
        return config.run_dir

    def make(problems: int, seed: int = 0) -> Path:
        key = (problems, seed)
        if key not in made:
            out = tmp_path_factory.mktemp(f"swept-{problems}-{seed}")
            made[key] = asyncio.run(sweep(out, problems, seed))
        copy = tmp_path_factory.mktemp(f"run-{problems}-{seed}") / "run"
        shutil.copytree(made[key], copy)
        return copy

    return make


class Drawn(list[Any]):
    """The figures drawn, in order; ``by_png`` the same by their PNG's name."""

    def __init__(self) -> None:
        super().__init__()
        self.by_png: dict[str, Any] = {}


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> Iterator[Drawn]:
    """The matplotlib figures the figure functions draw, kept after they are written."""
    import evaluator.figures as figures

    kept = Drawn()
    save = figures.save_figure

    def keep(fig: Any, out_dir: Path, stem: str) -> str:
        kept.append(fig)
        kept.by_png[f"{stem}.png"] = fig
        return save(fig, out_dir, stem)

    monkeypatch.setattr(figures, "save_figure", keep)
    yield kept
