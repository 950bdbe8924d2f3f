"""PNG figures of one model's report: F1 with CI bars per method, F1 by chain length, and the
verdict mix per evaluator. matplotlib with the Agg backend (no display, deterministic files)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use("Agg"): the backend must be chosen first

METHOD_ROWS: tuple[tuple[str, str], ...] = (
    ("A_consistent_full", "A"),
    ("A_local_full", "A'"),
    ("A_Ap_combined_full", "A+A'"),
    ("A_Ap_no_surface_full", "A+A' no surf."),
    ("A_Ap_cascade_full", "A+A'+casc."),
    ("string_diff_full", "string diff"),
    ("self_consistency_full", "self-cons."),
    ("A_consistent_lower_bound_full", "A lower b."),
)
VERDICTS = ("GROUNDED", "INPUT-SENSITIVE", "INSENSITIVE", "CASCADE", "UNSTABLE", "UNPARSEABLE")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def f1_with_ci(model: Mapping[str, Any], path: Path, title: str) -> Path | None:
    rows = model.get("rows") or {}
    present = [(k, label) for k, label in METHOD_ROWS if isinstance(rows.get(k), Mapping)]
    present = [(k, lab) for k, lab in present if rows[k].get("f1") is not None]
    if not present:
        return None
    f1 = [float(rows[k]["f1"]) for k, _ in present]
    lows, highs = [], []
    for (k, _), value in zip(present, f1, strict=True):
        ci = rows[k].get("ci") or [value, value]
        lo = value if ci[0] is None else float(ci[0])
        hi = value if ci[1] is None else float(ci[1])
        lows.append(max(0.0, value - lo))
        highs.append(max(0.0, hi - value))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(range(len(f1)), f1, yerr=[lows, highs], capsize=4, color="#4c72b0")
    ax.set_xticks(range(len(f1)), [lab for _, lab in present], rotation=30, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel("F1 (95% bootstrap CI)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def f1_by_hops(model: Mapping[str, Any], path: Path, title: str) -> Path | None:
    by_hops = model.get("by_hops") or {}
    points = []
    for hops, value in by_hops.items():
        f1 = value.get("f1") if isinstance(value, Mapping) else value
        if f1 is not None:
            points.append((int(hops), float(f1)))
    if not points:
        return None
    points.sort()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot([h for h, _ in points], [f for _, f in points], marker="o")
    ax.set_xticks([h for h, _ in points])
    ax.set_ylim(0, 1)
    ax.set_xlabel("chain length (hops)")
    ax.set_ylabel("F1, A consistent, full")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def verdict_mix(model: Mapping[str, Any], path: Path, title: str) -> Path | None:
    mix = model.get("verdict_mix") or {}
    evaluators = [e for e, counts in mix.items() if isinstance(counts, Mapping) and counts]
    if not evaluators:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.5))
    bottoms = [0.0] * len(evaluators)
    for verdict in VERDICTS:
        shares = []
        for e in evaluators:
            total = sum(int(v) for v in mix[e].values()) or 1
            shares.append(int(mix[e].get(verdict, 0)) / total)
        ax.bar(range(len(evaluators)), shares, bottom=bottoms, label=verdict)
        bottoms = [b + s for b, s in zip(bottoms, shares, strict=True)]
    ax.set_xticks(range(len(evaluators)), evaluators)
    ax.set_ylabel("share of certificates")
    ax.set_title(title)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_figures(name: str, model: Mapping[str, Any], out_dir: Path) -> list[str]:
    """Write the model's figures into ``out_dir``; return their file names (relative)."""
    stem = _safe(name)
    made = [
        f1_with_ci(model, out_dir / f"{stem}_f1_ci.png", f"{name}: F1 per method"),
        f1_by_hops(model, out_dir / f"{stem}_f1_by_hops.png", f"{name}: F1 by chain length"),
        verdict_mix(model, out_dir / f"{stem}_verdict_mix.png", f"{name}: verdict mix"),
    ]
    return [p.name for p in made if p is not None]


COMPARISON_ROWS: tuple[tuple[str, str], ...] = (
    ("A_consistent_full", "A, full"),
    ("A_consistent_pred", "A, pred"),
    ("A_Ap_cascade_full", "A+A'+cascade"),
    ("self_consistency_full", "self-consistency"),
)


def models_side_by_side(models: Mapping[str, Mapping[str, Any]], path: Path) -> Path | None:
    """Grouped bars: F1 with its CI for each model on the headline rows (several models)."""
    if len(models) < 2:
        return None
    names = list(models)
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(max(6.0, 2.2 * len(COMPARISON_ROWS)), 4))
    for i, name in enumerate(names):
        rows = models[name].get("rows") or {}
        xs, f1s, lows, highs = [], [], [], []
        for j, (key, _) in enumerate(COMPARISON_ROWS):
            row = rows.get(key)
            if not isinstance(row, Mapping) or row.get("f1") is None:
                continue
            value = float(row["f1"])
            ci = row.get("ci") or [value, value]
            xs.append(j + (i - (len(names) - 1) / 2) * width)
            f1s.append(value)
            lows.append(max(0.0, value - (value if ci[0] is None else float(ci[0]))))
            highs.append(max(0.0, (value if ci[1] is None else float(ci[1])) - value))
        ax.bar(xs, f1s, width=width, yerr=[lows, highs], capsize=3, label=name)
    ax.set_xticks(range(len(COMPARISON_ROWS)), [label for _, label in COMPARISON_ROWS])
    ax.set_ylim(0, 1)
    ax.set_ylabel("F1 (95% bootstrap CI)")
    ax.set_title("Models side by side")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
