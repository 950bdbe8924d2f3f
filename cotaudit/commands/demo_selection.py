"""The selection study end to end on simulated deployments (``cotaudit demo --study selection``).

:func:`run_selection_demo` generates the procedural tasks, starts the local model server in
this process, sweeps three ``rule_mix`` deployments and a ``ceiling`` control through the real
engine (original, intervened and preserving prompt per problem), evaluates the stream with
``cotaudit selection``'s code, writes ``OUT/run/eval/selection.{json,md}`` and the figures,
and prints the table with each deployment's closed-form prediction beside it. Everything it
writes is under ``out_dir`` (the response cache too), so repeated demos are independent.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cotaudit import terminal
from cotaudit.commands.demo import demo_advice
from cotaudit.commands.interrupts import evaluation_interrupts, sweep_interrupted
from cotaudit.commands.local_sweep import sweep_in_process
from cotaudit.terminal import Group
from runner.config import SweepConfig, config_from_mapping
from runner.server.deployments import DeploymentParams, closed_form, closed_form_accuracy, mix_of
from runner.tasks.procedural.task import ProceduralTask

if TYPE_CHECKING:
    pass

# Three sub-ceiling deployments with distinct mixtures, and a ceiling control that is always
# right on the original task and follows 60% of interventions (like seed 003's qwen3.8-max).
DEMO_DEPLOYMENTS: dict[str, DeploymentParams] = {
    "sim-careful": DeploymentParams(p_r=0.7, eps=0.02, q=0.3, qd=0.8),
    "sim-sloppy": DeploymentParams(p_r=0.8, eps=0.1, q=0.2, qd=0.7),
    "sim-shortcut": DeploymentParams(p_r=0.5, eps=0.03, q=0.7, qd=0.85),
    "sim-ceiling": DeploymentParams(p_r=0.6, ceiling=True),
}
DEMO_TASK: dict[str, object] = {
    "kind": "procedural",
    "families": ["arith", "circuit", "reachability"],
    "min_stratum": 1,
    "max_stratum": 5,
    "per_stratum": 20,  # 300 problems: 900 requests per deployment
    "seed": 0,
}


def demo_config(out_dir: Path) -> SweepConfig:
    """The demo's sweep: run and cache directories under ``out_dir``, local endpoints."""
    out_dir = out_dir.resolve()  # the config resolves relative paths against out_dir itself
    endpoints = [
        {
            "name": name,
            "provider": "local",
            "model": params.model_name(),
            "max_concurrency": 64,
            "requests_per_minute": 6_000_000,
            "tokens_per_minute": 1e12,
        }
        for name, params in DEMO_DEPLOYMENTS.items()
    ]
    return config_from_mapping(
        {
            "run_dir": str(out_dir / "run"),
            "cache_dir": str(out_dir / "cache"),
            "task": dict(DEMO_TASK),
            "endpoints": endpoints,
        },
        config_dir=out_dir,
        where="<selection demo>",
    )


def predictions_table(task: ProceduralTask, *, width: int | None = None) -> str:
    """Closed-form accuracy, F_pop, F_sel and Delta of each demo deployment on ``task``, in
    lines of at most ``width`` characters (the terminal's by default), under the names the
    measured table above gives its columns."""
    width = terminal.terminal_width() if width is None else width
    mix = mix_of(task.problems())
    rows = [["deployment", "model", "acc", "F_pop", "F_sel", "delta_pp"]]
    for name, params in DEMO_DEPLOYMENTS.items():
        cf = closed_form(params, mix)
        acc = closed_form_accuracy(params, mix)
        rows.append(
            [
                name,
                params.model_name(),
                f"{acc * 100:.1f}%",
                f"{cf.f_pop:.3f}",
                f"{cf.f_sel:.3f}",
                f"{cf.delta * 100:+.1f}",
            ]
        )
    # The model's parameters, then the figures, which stay together where they fit.
    groups = [Group([1]), Group(range(2, len(rows[0])))]
    lines = terminal.wrapped("Closed-form predictions on this task mix:", width)
    lines += terminal.fitted(rows, groups, width, left={0, 1}, rule=False)
    return "\n".join(lines)


def run_selection_demo(out_dir: Path, *, quiet: bool = False, figures: bool = True) -> int:
    """Run the whole selection study into ``out_dir`` and print its table (``quiet``: without
    the progress).

    Returns the process exit status (0 on success). Raises ``UsageError`` when ``out_dir``
    already holds a run of a different demo configuration.
    """
    from evaluator.commands.selection import evaluate_run, outputs_lines, write_outputs
    from evaluator.selection_report import render_table

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = demo_config(out_dir)
    with demo_advice(out_dir, config.run_dir):
        summary, _ = sweep_in_process(config, progress=not quiet)
        interrupted = sweep_interrupted("demo", summary)
        if interrupted is not None:
            return interrupted
        eval_dir = config.run_dir / "eval"
        with evaluation_interrupts("demo"):
            report = evaluate_run(config.run_dir)
            written, removed = write_outputs(report, eval_dir, None, figures=figures)
    # --quiet drops the progress only, as in the grounding demo: the results still print.
    task = config.build_task()
    assert isinstance(task, ProceduralTask)
    width = terminal.terminal_width()
    print(render_table(report, width=width))
    print()
    print(predictions_table(task, width=width))
    for line in outputs_lines(written, removed, width=width):
        print(line)
    return 0
