"""Selection statistics: seed 003's published figures, theory, references and degenerate input."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from scipy import stats

from cotaudit.cli import main
from evaluator.selection import (
    JointCounts,
    analyse,
    cmh,
    decompose,
    delta_variance,
    deployment_stats,
    n_for_power,
)

TABLE_7 = {
    "GLM-5.3": (299, 216, 208, 277),
    "deepseek-v4-flash": (85, 60, 73, 82),
    "deepseek-v4-pro": (77, 56, 34, 33),
    "glm-5.2": (36, 43, 8, 13),
}
CEILING = ("qwen3.8-max", (12, 8, 0, 0))


def _write_csv(path: Path, rows: dict[str, tuple[int, int, int, int]]) -> Path:
    lines = ["deployment,a,b,c,d", *(f"{k},{a},{b},{c},{d}" for k, (a, b, c, d) in rows.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _no_nan(value: Any, where: str = "$") -> None:
    if isinstance(value, float):
        assert math.isfinite(value), f"non-finite number at {where}"
    elif isinstance(value, dict):
        for k, v in value.items():
            _no_nan(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _no_nan(v, f"{where}[{i}]")


def test_table7_reproduces_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = dict(TABLE_7)
    rows[CEILING[0]] = CEILING[1]
    csv = _write_csv(tmp_path / "table7.csv", rows)
    out = tmp_path / "sel.json"
    assert main(["selection", "--counts", str(csv), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    data = orjson.loads(out.read_bytes())
    dep = data["deployments"]
    published_delta = {
        "GLM-5.3": 7.4,
        "deepseek-v4-flash": 6.0,
        "deepseek-v4-pro": 2.4,
        "glm-5.2": 1.6,
    }
    for name, pp in published_delta.items():
        assert round(dep[name]["delta"] * 100, 1) == pp
    lo, hi = dep["GLM-5.3"]["delta_ci"]
    assert (round(lo * 100, 1), round(hi * 100, 1)) == (4.3, 10.4)
    assert dep["GLM-5.3"]["p"] < 1e-4
    assert round(dep["deepseek-v4-flash"]["p"], 3) == 0.046
    assert round(dep["deepseek-v4-pro"]["p"], 3) == 0.337
    assert round(dep["glm-5.2"]["p"], 3) == 0.540
    published_or = {
        "GLM-5.3": 1.84,
        "deepseek-v4-flash": 1.59,
        "deepseek-v4-pro": 1.33,
        "glm-5.2": 1.36,
    }
    for name, value in published_or.items():
        assert round(dep[name]["odds_ratio"], 2) == value
    assert round(data["pooled"]["cmh_or"], 2) == 1.70
    assert data["pooled"]["p"] < 1e-6
    assert data["pooled"]["deployments"] == list(TABLE_7)
    loo = data["leave_one_out"]
    assert [round(loo[k]["z"], 2) for k in TABLE_7] == [2.24, 4.80, 5.17, 5.17]
    assert [loo[k]["n"] for k in TABLE_7] == [600, 1300, 1400, 1500]
    assert CEILING[0] not in loo and data["ceiling"] == [CEILING[0]]
    ceiling = dep[CEILING[0]]
    assert ceiling["ceiling"] is True and ceiling["delta"] == 0.0 and ceiling["p"] is None
    assert ceiling["reasons"]["p"].startswith("ceiling")
    # The printed table carries the same figures at the published precision.
    for text in ("+7.4", "[+4.3, +10.4]", "<0.0001", "0.046", "0.337", "0.540", "OR = 1.70"):
        assert text in printed
    for z in ("z = 2.24", "z = 4.80", "z = 5.17"):
        assert z in printed
    _no_nan(data)


def test_delta_equals_cov_over_p_c_on_random_tables() -> None:
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(800):
        cells = rng.integers(0, 6, size=4) * rng.integers(0, 50, size=4)
        s = deployment_stats(JointCounts(*map(int, cells)))
        if s.delta is None:
            assert s.counts.a + s.counts.b == 0 or s.n == 0
            continue
        assert s.cov_ac is not None and s.accuracy is not None
        assert abs(s.delta - s.cov_ac / s.accuracy) < 1e-12
        checked += 1
    assert checked > 600


def test_chi_square_matches_scipy_without_correction() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        a, b, c, d = map(int, rng.integers(1, 80, size=4))
        ours = deployment_stats(JointCounts(a, b, c, d))
        ref = stats.chi2_contingency([[a, b], [c, d]], correction=False)
        assert ours.chi2 == pytest.approx(ref.statistic, rel=1e-10)
        assert ours.p == pytest.approx(ref.pvalue, rel=1e-9)


def test_delta_variance_matches_numerical_gradient() -> None:
    counts = JointCounts(40, 25, 18, 17)
    n = counts.n
    p = counts.as_array() / n

    def g(q: np.ndarray[Any, Any]) -> float:
        return float(q[0] / (q[0] + q[1]) - (q[0] + q[2]))

    h = 1e-7
    grad = np.array([(g(p + h * e) - g(p - h * e)) / (2 * h) for e in np.eye(4)])
    expected = grad @ ((np.diag(p) - np.outer(p, p)) / n) @ grad
    assert delta_variance(counts) == pytest.approx(expected, rel=1e-6)


def test_cmh_matches_statsmodels_on_random_tables() -> None:
    from statsmodels.stats.contingency_tables import StratifiedTable

    rng = np.random.default_rng(11)
    for _ in range(50):
        k = int(rng.integers(2, 7))
        tables = {f"d{i}": JointCounts(*map(int, rng.integers(1, 120, size=4))) for i in range(k)}
        ours = cmh(tables)
        ref = StratifiedTable([np.array([[t.a, t.b], [t.c, t.d]]) for t in tables.values()])
        test = ref.test_null_odds(correction=False)
        assert ours.cmh_or == pytest.approx(ref.oddsratio_pooled, rel=1e-10)
        assert ours.z is not None and ours.z**2 == pytest.approx(test.statistic, rel=1e-10)
        assert ours.p == pytest.approx(test.pvalue, rel=1e-8)
        lo, hi = ref.oddsratio_pooled_confint()
        assert ours.cmh_or_ci == pytest.approx((lo, hi), rel=1e-8)


def test_cmh_z_sign_follows_the_association() -> None:
    positive = cmh({"x": JointCounts(40, 10, 10, 40), "y": JointCounts(30, 20, 20, 30)})
    negative = cmh({"x": JointCounts(10, 40, 40, 10)})
    assert positive.z is not None and positive.z > 0
    assert negative.z is not None and negative.z < 0


@pytest.mark.parametrize(
    ("cells", "null_fields"),
    [
        ((0, 0, 0, 0), {"accuracy", "f_pop", "f_sel", "delta", "delta_ci", "p", "odds_ratio"}),
        ((0, 0, 7, 9), {"f_sel", "delta", "delta_ci", "p", "n_for_80_power"}),
        ((12, 8, 0, 0), {"delta_ci", "p", "odds_ratio", "n_for_80_power"}),
        ((5, 0, 0, 0), {"delta_ci", "p", "odds_ratio", "n_for_80_power"}),
        ((0, 10, 10, 0), set()),
        ((10, 0, 3, 7), set()),
    ],
)
def test_degenerate_inputs_give_nulls_with_reasons(
    cells: tuple[int, int, int, int], null_fields: set[str]
) -> None:
    s = deployment_stats(JointCounts(*cells))
    data = s.to_json()
    _no_nan(data)
    orjson.dumps(data)
    for name in null_fields:
        assert data[name] is None, name
        assert name in data["reasons"], name
    for name, value in data.items():
        if value is None:
            assert name in data["reasons"] or name in (
                "delta_se",
                "cov_ac",
                "chi2",
                "odds_ratio_ci",
            ), name


@pytest.mark.parametrize(
    "cells",
    [(0, 0, 7, 9), (80, 0, 20, 0), (0, 70, 0, 30), (5, 5, 0, 0), (0, 4, 0, 6)],
    ids=["none-correct", "all-follow", "none-follow", "ceiling", "none-follow-2"],
)
def test_a_zero_margin_has_no_odds_ratio(cells: tuple[int, int, int, int]) -> None:
    # A margin zero makes ad/bc 0/0: Haldane's +0.5 gave a number (0.67 for (0, 0, 30, 20),
    # the odds of A among incorrect traces), and an interval, for an association never seen.
    s = deployment_stats(JointCounts(*cells))
    assert s.odds_ratio is None and s.odds_ratio_ci is None
    assert not s.haldane
    assert "odds_ratio" in s.reasons


def test_the_tables_mark_a_haldane_odds_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = _write_csv(tmp_path / "c.csv", {"zero-cell": (50, 0, 10, 40), "plain": (10, 10, 10, 10)})
    assert main(["selection", "--counts", str(csv), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    page = (tmp_path / "out" / "selection.md").read_text(encoding="utf-8")
    for text in (printed, page):
        assert "389.57 (H)" in text and "1.00 (H)" not in text
        assert "Haldane-Anscombe" in " ".join(text.split())
    assert "| zero-cell | 100 |" in page and "Haldane-Anscombe's, +0.5 in every cell" in page


def test_zero_cell_odds_ratio_uses_haldane() -> None:
    s = deployment_stats(JointCounts(10, 0, 3, 7))
    assert s.haldane
    assert s.odds_ratio == pytest.approx((10.5 * 7.5) / (0.5 * 3.5))
    assert not deployment_stats(JointCounts(10, 1, 3, 7)).haldane


def test_ceiling_is_reported_apart_and_never_pooled() -> None:
    report = analyse({"real": JointCounts(30, 20, 20, 30), "ceil": JointCounts(12, 8, 0, 0)})
    assert report.ceilings == ("ceil",)
    assert report.pooled.deployments == ("real",)
    assert set(report.leave_one_out) == {"real"}
    only = report.leave_one_out["real"].pooled
    assert only.z is None and only.reasons
    _no_nan(report.to_json())


def test_all_ceilings_pool_to_nulls() -> None:
    report = analyse({"c1": JointCounts(3, 2, 0, 0), "c2": JointCounts(0, 4, 0, 0)})
    data = report.to_json()
    assert data["pooled"]["cmh_or"] is None and data["pooled"]["z"] is None
    assert data["pooled"]["reasons"]
    _no_nan(data)


def test_n_for_power_is_the_smallest_n_reaching_80_percent() -> None:
    z = stats.norm.ppf(0.975)
    for delta, sd in [(0.074, 0.49), (0.016, 0.25), (-0.06, 0.5)]:
        n = n_for_power(delta, sd)
        assert n is not None

        def power(m: int, delta: float = delta, sd: float = sd) -> float:
            return float(stats.norm.cdf(abs(delta) / (sd / math.sqrt(m)) - z))

        assert power(n) >= 0.8 > power(n - 1)
    assert n_for_power(0.0, 0.3) is None


def test_decomposition_is_exact_and_reproducible() -> None:
    rng = np.random.default_rng(5)
    for _ in range(50):
        strata = {str(s): JointCounts(*map(int, rng.integers(0, 40, size=4))) for s in range(4)}
        dec = decompose(strata, rng=1, resamples=200)
        total = deployment_stats(JointCounts(*map(int, sum(t.as_array() for t in strata.values()))))
        assert dec.cov is not None and total.cov_ac is not None
        assert dec.cov == pytest.approx(total.cov_ac, abs=1e-12)
        assert dec.within is not None and dec.between is not None
        assert abs(dec.within + dec.between - dec.cov) < 1e-12
    strata = {"1": JointCounts(81, 5, 25, 4), "2": JointCounts(51, 18, 27, 8)}
    first, second = decompose(strata, rng=9), decompose(strata, rng=9)
    assert first.between_share_ci == second.between_share_ci
    assert first.between_share_ci is not None
    lo, hi = first.between_share_ci
    assert first.between_share is not None and lo < first.between_share < hi


def test_between_share_is_zero_when_strata_do_not_differ() -> None:
    same = {"1": JointCounts(20, 10, 10, 20), "2": JointCounts(40, 20, 20, 40)}
    dec = decompose(same, resamples=0)
    assert dec.between == pytest.approx(0.0, abs=1e-15)
    assert dec.between_share == pytest.approx(0.0, abs=1e-12)
    assert dec.between_share_ci is None and "between_share_ci" in dec.reasons


def test_decomposition_without_covariance_has_no_share() -> None:
    dec = decompose({"1": JointCounts(3, 2, 0, 0), "2": JointCounts(4, 1, 0, 0)})
    assert dec.between_share is None and "between_share" in dec.reasons
    _no_nan(dec.to_json())


def test_invalid_counts_and_parameters_raise_value_error() -> None:
    with pytest.raises(ValueError, match=r"JointCounts\.b"):
        JointCounts(1, -1, 0, 0)
    with pytest.raises(ValueError, match="resamples"):
        decompose({"1": JointCounts(1, 1, 1, 1)}, resamples=-1)


def test_power_at_n_agrees_with_n_for_power() -> None:
    s = deployment_stats(JointCounts(*TABLE_7["deepseek-v4-pro"]))
    assert s.power is not None and s.n_for_80_power is not None and s.delta_se is not None
    assert s.power < 0.8 < s.n_for_80_power / s.n * 1.0  # underpowered at n=200
    scaled_se = s.delta_se * math.sqrt(s.n / s.n_for_80_power)
    assert s.delta is not None
    assert stats.norm.cdf(abs(s.delta) / scaled_se - stats.norm.ppf(0.975)) >= 0.8
    big = deployment_stats(JointCounts(*TABLE_7["GLM-5.3"]))
    assert big.power is not None and big.power > 0.99


def test_numpy_integers_are_accepted_and_stored_as_int() -> None:
    counts = JointCounts(*np.array([3, 4, 5, 6], dtype=np.int64))
    assert type(counts.a) is int
    orjson.dumps(deployment_stats(counts).to_json())


def test_the_page_says_what_each_column_is_without_figures(tmp_path: Path) -> None:
    # The definitions of A, C and F were only in the figures' captions: a page written with
    # --no-figures named p, OR and "n for 80% power" nowhere.
    csv = _write_csv(tmp_path / "c.csv", dict(TABLE_7))
    out = tmp_path / "out"
    assert main(["selection", "--counts", str(csv), "--out", str(out), "--no-figures"]) == 0
    page = (out / "selection.md").read_text(encoding="utf-8")
    assert "## Figures" not in page
    legend = page.split("## Pooled")[0]
    for term in (
        "A: the trace followed the intervention",
        "C: it answered the original task correctly",
        "F_sel = P(A = 1 | C = 1)",
        "*p*: Pearson's chi-square test",
        "*OR*: the odds ratio of A and C",
        "*n for 80% power*",
    ):
        assert term in legend, term
    assert "Undefined values" not in page  # nothing is undefined: the legend points nowhere
    assert "*Undefined values*, below" not in legend
