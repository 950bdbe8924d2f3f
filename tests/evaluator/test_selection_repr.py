"""A ``SelectionReport``'s repr, what a notebook cell shows: each deployment's headline and the
pooled odds ratio, short however many strata the run has; the full data stays in the fields."""

from __future__ import annotations

from pathlib import Path

import cotaudit

# seed 003, Table 7, and a ceiling control
COUNTS = {
    "GLM-5.3": (299, 216, 208, 277),
    "deepseek-v4-flash": (85, 60, 73, 82),
    "top": (10, 5, 0, 0),
}


def test_the_repr_is_each_deployments_headline_and_the_pooled_odds_ratio() -> None:
    report = cotaudit.selection(COUNTS, n_boot=0)
    text = repr(report)
    assert text == (
        "SelectionReport(deployments={"
        "'GLM-5.3': <n=1000 f_pop=0.507 f_sel=0.581 delta=+0.074 "
        "delta_ci=[+0.043, +0.104] p=1.6e-06>, "
        "'deepseek-v4-flash': <n=300 f_pop=0.527 f_sel=0.586 delta=+0.060 "
        "delta_ci=[+0.001, +0.118] p=0.046>, "
        "'top': <n=15 f_pop=0.667 f_sel=0.667 delta=+0.000 delta_ci=None p=None ceiling>}, "
        "pooled=<cmh_or=1.78 cmh_or_ci=[1.43, 2.22] p=2.4e-07 over 2 deployments, n=1300>)"
    )
    # The repr rounds; the fields keep every digit.
    assert report.deployments["GLM-5.3"].delta == (299 / 515) - (507 / 1000)
    assert report.pooled.cmh_or is not None and repr(report.pooled.cmh_or) not in text


def test_undefined_numbers_read_none_and_many_deployments_are_counted() -> None:
    counts = {f"m{i}": (30 + i, 20, 10, 40) for i in range(11)}
    counts["empty"] = (0, 0, 0, 0)
    text = repr(cotaudit.selection(counts, n_boot=0))
    assert text.count("<n=") == 8 and "... 4 more" in text
    assert "'m7'" in text and "'m8'" not in text and "'empty'" not in text
    only_empty = repr(cotaudit.selection({"empty": (0, 0, 0, 0)}, n_boot=0))
    assert "'empty': <n=0 f_pop=None f_sel=None delta=None delta_ci=None p=None>" in only_empty
    assert "pooled=<cmh_or=None cmh_or_ci=None p=None over 0 deployments, n=0>" in only_empty


def test_a_runs_report_stays_short_with_its_strata(tmp_path: Path) -> None:
    """From a real procedural run (the embedded local reasoners): strata, families and
    preserving counts are in the fields, counted in the repr, not dumped in it."""
    endpoints = [
        {
            "name": name,
            "provider": "local",
            "model": model,
            "requests_per_minute": 600_000,
            "tokens_per_minute": 1e10,
        }
        for name, model in (
            ("careful", "rule_mix:p_r=0.7,eps=0.02,q=0.3,qd=0.8"),
            ("sloppy", "rule_mix:p_r=0.8,eps=0.1,q=0.2,qd=0.7"),
        )
    ]
    config = {
        "run_dir": str(tmp_path / "run"),
        "cache_dir": str(tmp_path / "cache"),
        "task": {"kind": "procedural", "families": ["arith"], "per_stratum": 4, "seed": 0},
        "endpoints": endpoints,
    }
    summary = cotaudit.run(config, preflight=False, progress=False)
    assert summary.errors == 0
    report = cotaudit.selection(summary.run_dir, n_boot=50)
    assert len(report.strata["careful"].strata) > 1 and report.extra["families"]
    text = repr(report)
    assert len(text) < 500, text
    assert text.startswith("SelectionReport(deployments={'careful': <n=")
    assert "'sloppy': <n=" in text and "pooled=<cmh_or=" in text
    assert text.endswith(", strata=<2 decompositions>)")
    assert "DeploymentStats(" not in text and "reasons" not in text and "families" not in text
