"""Correctness conditioning as selection (docs/selection.md): the statistics.

Per trace, ``C`` = the original task was answered correctly and ``A`` = the answer to the
intervened task equals the counterfactual oracle. A deployment's joint counts are
``a`` = (A1, C1), ``b`` = (A0, C1), ``c`` = (A1, C0), ``d`` = (A0, C0), and

- ``f_pop = (a + c) / n`` (all traces), ``f_sel = a / (a + b)`` (correct traces only),
- ``delta = f_sel - f_pop``, which equals ``Cov(A, C) / P(C=1)`` exactly,
- ``delta_ci``: Wald interval from the delta method over the multinomial cell proportions,
- ``p``: Pearson chi-square test of independence of A and C (no continuity correction),
- ``odds_ratio = ad / bc``; when a cell is zero, Haldane-Anscombe: +0.5 in every cell; none
  when a margin is zero (every trace correct, none correct, every trace or none following):
  the ratio is then 0/0, and +0.5 would only turn it into the odds of the other variable.

A *ceiling* deployment (``P(C=1) = 1``, i.e. ``c = d = 0``) makes the filter vacuous:
``delta`` is exactly 0, the test and the interval are undefined (null), and it is kept out of
every pooled statistic. Pooled: the Cochran-Mantel-Haenszel odds ratio and test (no
continuity correction, signed ``z``) over non-ceiling deployments, and the same test with each
deployment left out in turn. Where a stratum is known, ``Cov(A, C)`` splits exactly into a
within-stratum and a between-stratum part; the between share gets a percentile bootstrap
interval (multinomial resampling of the traces, strata sizes free).

Degenerate inputs never raise and never produce NaN: an undefined number is ``None`` and the
result's ``reasons`` maps the field to why (e.g. ``"f_sel": "no correct traces (a+b=0)"``).

Every public statistic follows the same shape: validation, pure numpy/scipy helpers, and a
frozen result dataclass with a ``to_json()`` that is safe for ``orjson``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from numbers import Integral
from typing import Any

import numpy as np
from scipy import stats

ALPHA = 0.05  # two-sided level of every test and interval
POWER_TARGET = 0.80  # power for n_for_80_power
HALDANE = 0.5  # added to every cell of a table with a zero cell, for the odds ratio
BOOTSTRAP_RESAMPLES = 2000  # default resamples of the between-stratum share
_Z = float(stats.norm.ppf(1.0 - ALPHA / 2.0))
_Z_POWER = float(stats.norm.ppf(POWER_TARGET))


@dataclass(frozen=True, slots=True)
class JointCounts:
    """Joint outcome counts of one deployment (or one stratum of it)."""

    a: int  # A=1, C=1: correct and followed the intervention
    b: int  # A=0, C=1: correct, did not follow
    c: int  # A=1, C=0: wrong, followed
    d: int  # A=0, C=0: wrong, did not follow

    def __post_init__(self) -> None:
        for name in ("a", "b", "c", "d"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
                raise ValueError(
                    f"JointCounts.{name} must be a non-negative integer, got {value!r}"
                )
            object.__setattr__(self, name, int(value))  # numpy integers -> int (JSON-safe)

    @property
    def n(self) -> int:
        return self.a + self.b + self.c + self.d

    @property
    def ceiling(self) -> bool:
        """P(C=1) = 1: every trace is correct, so correctness selects nothing."""
        return self.n > 0 and self.c == 0 and self.d == 0

    def __add__(self, other: JointCounts) -> JointCounts:
        return JointCounts(self.a + other.a, self.b + other.b, self.c + other.c, self.d + other.d)

    def as_array(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        return np.array([self.a, self.b, self.c, self.d], dtype=np.float64)


ZERO = JointCounts(0, 0, 0, 0)


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class DeploymentStats:
    """Selection statistics of one deployment; ``None`` fields are explained in ``reasons``.

    ``delta`` and ``delta_ci`` are proportions (multiply by 100 for percentage points).
    ``chi2`` is Pearson's statistic on the 2x2 table; ``p`` its upper-tail p value with one
    degree of freedom. ``odds_ratio_ci`` is Woolf's log interval on the same (possibly
    Haldane-corrected) cells; ``haldane`` says whether the correction was applied.
    ``n_for_80_power`` is the number of traces at which the Wald test of ``delta = 0`` reaches
    80% power at alpha = 0.05 if this ``delta`` (as a pilot estimate) and its per-trace
    variance hold; ``power`` is that test's power at the observed ``n`` under the same
    assumption (seed 003's Table 5 "power at n").
    """

    counts: JointCounts
    accuracy: float | None
    f_pop: float | None
    f_sel: float | None
    delta: float | None
    delta_se: float | None
    delta_ci: tuple[float, float] | None
    cov_ac: float | None
    chi2: float | None
    p: float | None
    odds_ratio: float | None
    odds_ratio_ci: tuple[float, float] | None
    haldane: bool
    ceiling: bool
    n_for_80_power: int | None
    power: float | None = None
    reasons: Mapping[str, str] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.counts.n

    def to_json(self) -> dict[str, Any]:
        c = self.counts
        return {
            "n": c.n,
            "a": c.a,
            "b": c.b,
            "c": c.c,
            "d": c.d,
            "accuracy": self.accuracy,
            "f_pop": self.f_pop,
            "f_sel": self.f_sel,
            "delta": self.delta,
            "delta_se": self.delta_se,
            "delta_ci": list(self.delta_ci) if self.delta_ci is not None else None,
            "cov_ac": self.cov_ac,
            "chi2": self.chi2,
            "p": self.p,
            "odds_ratio": self.odds_ratio,
            "odds_ratio_ci": list(self.odds_ratio_ci) if self.odds_ratio_ci else None,
            "haldane": self.haldane,
            "ceiling": self.ceiling,
            "n_for_80_power": self.n_for_80_power,
            "power": self.power,
            "reasons": dict(self.reasons),
        }


def delta_variance(counts: JointCounts) -> float | None:
    """Delta-method variance of ``f_sel - f_pop`` under multinomial sampling of the cells.

    With cell proportions ``p = (pa, pb, pc, pd)`` and ``s = pa + pb``, the gradient of
    ``pa/s - (pa + pc)`` is ``(pb/s^2 - 1, -pa/s^2, -1, 0)`` and the covariance of ``p`` is
    ``(diag(p) - p p^T) / n``. ``None`` when ``n = 0`` or ``a + b = 0``.
    """
    n = counts.n
    if n == 0 or counts.a + counts.b == 0:
        return None
    p = counts.as_array() / n
    s = p[0] + p[1]
    grad = np.array([p[1] / s**2 - 1.0, -p[0] / s**2, -1.0, 0.0])
    cov = (np.diag(p) - np.outer(p, p)) / n
    return max(float(grad @ cov @ grad), 0.0)


def _chi_square(counts: JointCounts) -> tuple[float | None, float | None, str | None]:
    a, b, c, d = counts.a, counts.b, counts.c, counts.d
    n = counts.n
    margins = (a + b, c + d, a + c, b + d)
    if n == 0 or min(margins) == 0:
        return None, None, "a margin of the 2x2 table is zero: independence is untestable"
    chi2 = n * (a * d - b * c) ** 2 / (margins[0] * margins[1] * margins[2] * margins[3])
    return float(chi2), float(stats.chi2.sf(chi2, 1)), None


ZERO_MARGIN_ODDS = "a margin of the 2x2 table is zero: the odds ratio is 0/0, undefined"


def odds_ratio(counts: JointCounts) -> tuple[float | None, tuple[float, float] | None, bool]:
    """``ad/bc`` with Woolf's 95% interval; Haldane-Anscombe +0.5 when any cell is zero.

    Returns ``(None, None, False)`` for an empty table and for one with a zero margin: where
    no trace followed the intervention (``a + c = 0``), say, the ratio is 0/0 whatever the
    association, and the corrected ``(0.5 (d + 0.5)) / ((b + 0.5) 0.5)`` would be the odds of
    C among the traces, reported as an association of A and C that was never observed.
    """
    a, b, c, d = counts.a, counts.b, counts.c, counts.d
    if counts.n == 0 or min(a + b, c + d, a + c, b + d) == 0:
        return None, None, False
    cells = counts.as_array()
    haldane = bool((cells == 0).any())
    if haldane:
        cells = cells + HALDANE
    a, b, c, d = cells
    log_or = math.log(a * d / (b * c))
    se = math.sqrt(1 / a + 1 / b + 1 / c + 1 / d)
    return (
        math.exp(log_or),
        (math.exp(log_or - _Z * se), math.exp(log_or + _Z * se)),
        haldane,
    )


def n_for_power(delta: float, per_trace_sd: float) -> int | None:
    """Traces needed for ``POWER_TARGET`` power of the two-sided Wald test of ``delta = 0``.

    ``n = ceil(((z_{1-alpha/2} + z_{power}) * sd / |delta|)^2)`` with ``sd`` the per-trace
    standard deviation of the estimator (``se * sqrt(n)`` of the pilot). ``None`` when
    ``delta`` is zero or ``sd`` is not positive.
    """
    if delta == 0 or not per_trace_sd > 0:
        return None
    return math.ceil(((_Z + _Z_POWER) * per_trace_sd / abs(delta)) ** 2)


def deployment_stats(counts: JointCounts) -> DeploymentStats:
    """All per-deployment statistics of one set of joint counts (never raises, never NaN)."""
    reasons: dict[str, str] = {}
    n = counts.n
    a, b, c = counts.a, counts.b, counts.c
    ceiling = counts.ceiling
    if n == 0:
        why = "no traces (n=0)"
        for key in ("accuracy", "f_pop", "f_sel", "delta", "delta_ci", "p", "odds_ratio"):
            reasons[key] = why
        reasons["n_for_80_power"] = reasons["power"] = why
        return DeploymentStats(
            counts=counts,
            accuracy=None,
            f_pop=None,
            f_sel=None,
            delta=None,
            delta_se=None,
            delta_ci=None,
            cov_ac=None,
            chi2=None,
            p=None,
            odds_ratio=None,
            odds_ratio_ci=None,
            haldane=False,
            ceiling=False,
            n_for_80_power=None,
            power=None,
            reasons=reasons,
        )
    accuracy = (a + b) / n
    f_pop = (a + c) / n
    cov_ac = a / n - f_pop * accuracy
    f_sel: float | None = None
    delta: float | None = None
    if a + b == 0:
        reasons["f_sel"] = reasons["delta"] = "no correct traces (a+b=0)"
    elif ceiling:
        # f_sel equals f_pop exactly; computing both by division would leave a rounding
        # residue where the identity says 0.
        f_sel, delta = f_pop, 0.0
    else:
        f_sel = a / (a + b)
        delta = f_sel - f_pop
    se: float | None = None
    ci: tuple[float, float] | None = None
    if ceiling:
        reasons["delta_ci"] = "ceiling: P(C=1)=1, the filter is vacuous"
    elif delta is not None:
        var = delta_variance(counts)
        if var is None or var == 0.0:
            reasons["delta_ci"] = "zero estimated variance (degenerate table)"
        else:
            se = math.sqrt(var)
            ci = (delta - _Z * se, delta + _Z * se)
    elif "delta_ci" not in reasons:
        reasons["delta_ci"] = reasons["delta"]
    chi2, p, why_p = _chi_square(counts)
    if why_p is not None:
        reasons["p"] = "ceiling: P(C=1)=1, the filter is vacuous" if ceiling else why_p
    or_value, or_ci, haldane = odds_ratio(counts)
    if ceiling:
        reasons["odds_ratio"] = "ceiling: P(C=1)=1, no incorrect traces to compare"
    elif or_value is None:
        reasons["odds_ratio"] = ZERO_MARGIN_ODDS
    n_power: int | None = None
    power: float | None = None
    if delta is None or se is None:
        reasons["n_for_80_power"] = reasons["power"] = "no interval for delta"
    else:
        n_power = n_for_power(delta, se * math.sqrt(n))
        power = float(stats.norm.cdf(abs(delta) / se - _Z))
        if n_power is None:
            reasons["n_for_80_power"] = "delta is exactly 0: no effect to power for"
    return DeploymentStats(
        counts=counts,
        accuracy=accuracy,
        f_pop=f_pop,
        f_sel=f_sel,
        delta=delta,
        delta_se=_finite(se),
        delta_ci=ci,
        cov_ac=cov_ac,
        chi2=_finite(chi2),
        p=_finite(p),
        odds_ratio=_finite(or_value),
        odds_ratio_ci=or_ci,
        haldane=haldane,
        ceiling=ceiling,
        n_for_80_power=n_power,
        power=_finite(power),
        reasons=reasons,
    )


@dataclass(frozen=True, slots=True)
class PooledStats:
    """Cochran-Mantel-Haenszel pooled odds ratio and test over deployments (strata).

    ``z`` is signed: ``(sum a - sum E[a]) / sqrt(sum Var[a])`` under the null of conditional
    independence, so ``z**2`` is the CMH statistic without continuity correction. ``cmh_or_ci``
    uses the Robins-Breslow-Greenland variance of the log pooled odds ratio.
    """

    deployments: tuple[str, ...]
    n: int
    cmh_or: float | None
    cmh_or_ci: tuple[float, float] | None
    z: float | None
    p: float | None
    reasons: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "deployments": list(self.deployments),
            "n": self.n,
            "cmh_or": self.cmh_or,
            "cmh_or_ci": list(self.cmh_or_ci) if self.cmh_or_ci is not None else None,
            "z": self.z,
            "p": self.p,
            "reasons": dict(self.reasons),
        }


def cmh(tables: Mapping[str, JointCounts]) -> PooledStats:
    """CMH odds ratio and test over ``tables`` as given (the caller drops ceilings).

    Tables with fewer than two traces carry no information and are ignored by the formulas
    (their weights are zero). Undefined quantities are ``None`` with a reason.
    """
    names = tuple(tables)
    arr = np.array([tables[k].as_array() for k in names], dtype=np.float64).reshape(-1, 4)
    total = int(arr.sum())
    reasons: dict[str, str] = {}
    if arr.shape[0] == 0 or total == 0:
        why = "no non-ceiling deployment with traces to pool"
        return PooledStats(names, total, None, None, None, None, {"cmh_or": why, "z": why})
    a, b, c, d = arr.T
    n = a + b + c + d
    use = n > 1
    a, b, c, d, n = a[use], b[use], c[use], d[use], n[use]
    r = a * d / n
    s = b * c / n
    cmh_or: float | None = None
    or_ci: tuple[float, float] | None = None
    if s.sum() > 0 and r.sum() > 0:
        cmh_or = float(r.sum() / s.sum())
        # Robins, Breslow and Greenland (1986) variance of log OR_MH.
        pp = (a + d) / n
        qq = (b + c) / n
        var = (
            (pp * r).sum() / (2 * r.sum() ** 2)
            + (pp * s + qq * r).sum() / (2 * r.sum() * s.sum())
            + (qq * s).sum() / (2 * s.sum() ** 2)
        )
        half = _Z * math.sqrt(var)
        or_ci = (math.exp(math.log(cmh_or) - half), math.exp(math.log(cmh_or) + half))
    else:
        reasons["cmh_or"] = "sum of ad/n or bc/n is zero: the pooled odds ratio is 0 or infinite"
    expected = (a + b) * (a + c) / n
    variance = (a + b) * (c + d) * (a + c) * (b + d) / (n**2 * (n - 1))
    z: float | None = None
    p: float | None = None
    if variance.sum() > 0:
        z = float((a.sum() - expected.sum()) / math.sqrt(variance.sum()))
        p = float(2.0 * stats.norm.sf(abs(z)))
    else:
        reasons["z"] = reasons["p"] = "zero null variance: every table has an empty margin"
    return PooledStats(names, total, _finite(cmh_or), or_ci, _finite(z), _finite(p), reasons)


@dataclass(frozen=True, slots=True)
class StratumRow:
    stratum: str
    counts: JointCounts
    stats: DeploymentStats


@dataclass(frozen=True, slots=True)
class Decomposition:
    """``Cov(A, C) = within + between`` over strata, and the between share.

    ``within = sum_s w_s Cov_s(A, C)``, ``between = sum_s w_s (pA_s - pA)(pC_s - pC)`` with
    ``w_s = n_s / n``. ``between_share = between / Cov(A, C)`` (``None`` when the covariance is
    0). ``between_share_ci`` is a percentile bootstrap interval: the ``n`` traces are redrawn
    from the observed (stratum, cell) proportions; resamples whose covariance is 0 are dropped
    and counted in ``bootstrap_dropped``.
    """

    strata: tuple[StratumRow, ...]
    cov: float | None
    within: float | None
    between: float | None
    between_share: float | None
    between_share_ci: tuple[float, float] | None
    bootstrap_resamples: int
    bootstrap_dropped: int
    reasons: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "strata": {
                row.stratum: {
                    "n": row.counts.n,
                    "a": row.counts.a,
                    "b": row.counts.b,
                    "c": row.counts.c,
                    "d": row.counts.d,
                    "accuracy": row.stats.accuracy,
                    "f_pop": row.stats.f_pop,
                    "f_sel": row.stats.f_sel,
                    "delta": row.stats.delta,
                }
                for row in self.strata
            },
            "cov": self.cov,
            "within": self.within,
            "between": self.between,
            "between_share": self.between_share,
            "within_share": (1.0 - self.between_share if self.between_share is not None else None),
            "between_share_ci": (
                list(self.between_share_ci) if self.between_share_ci is not None else None
            ),
            "bootstrap_resamples": self.bootstrap_resamples,
            "bootstrap_dropped": self.bootstrap_dropped,
            "reasons": dict(self.reasons),
        }


def _decompose(cells: np.ndarray[Any, np.dtype[np.float64]]) -> np.ndarray[Any, Any]:
    """Vectorised split; ``cells`` has shape (B, S, 4). Returns (B, 3): cov, within, between."""
    n_s = cells.sum(axis=2)
    n = n_s.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = n_s / n[:, None]
        pa_s = np.where(n_s > 0, (cells[..., 0] + cells[..., 2]) / n_s, 0.0)
        pc_s = np.where(n_s > 0, (cells[..., 0] + cells[..., 1]) / n_s, 0.0)
        p11_s = np.where(n_s > 0, cells[..., 0] / n_s, 0.0)
        pa = (w * pa_s).sum(axis=1)
        pc = (w * pc_s).sum(axis=1)
        p11 = (w * p11_s).sum(axis=1)
    cov = p11 - pa * pc
    within = (w * (p11_s - pa_s * pc_s)).sum(axis=1)
    between = (w * (pa_s - pa[:, None]) * (pc_s - pc[:, None])).sum(axis=1)
    return np.stack([cov, within, between], axis=1)


def decompose(
    strata: Mapping[str, JointCounts],
    *,
    rng: np.random.Generator | int | None = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
    level: float = 0.95,
) -> Decomposition:
    """Within/between-stratum covariance decomposition of one deployment.

    ``rng`` seeds the bootstrap (keyword-only, as in scipy); ``resamples`` must be >= 0
    (0 skips the interval).
    """
    if resamples < 0:
        raise ValueError(f"resamples must be a non-negative integer, got {resamples!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    rows = tuple(
        StratumRow(str(k), v, deployment_stats(v)) for k, v in sorted(strata.items(), key=_skey)
    )
    cells = np.array([r.counts.as_array() for r in rows], dtype=np.float64).reshape(1, -1, 4)
    reasons: dict[str, str] = {}
    n = int(cells.sum())
    if n == 0:
        why = "no traces"
        return Decomposition(rows, None, None, None, None, None, 0, 0, {"cov": why})
    cov, within, between = (float(x) for x in _decompose(cells)[0])
    share: float | None = None
    if abs(cov) < 1e-15:
        reasons["between_share"] = "Cov(A,C) is 0: there is no gap to split"
    else:
        share = between / cov
    ci: tuple[float, float] | None = None
    dropped = 0
    if share is not None and resamples > 0:
        generator = np.random.default_rng(rng)
        flat = cells.reshape(-1) / n
        draws = generator.multinomial(n, flat, size=resamples).astype(np.float64)
        parts = _decompose(draws.reshape(resamples, -1, 4))
        ok = np.abs(parts[:, 0]) > 1e-15
        dropped = int((~ok).sum())
        shares = parts[ok, 2] / parts[ok, 0]
        if shares.size:
            tail = (1 - level) / 2 * 100
            lo, hi = np.percentile(shares, [tail, 100 - tail])
            ci = (float(lo), float(hi))
        else:
            reasons["between_share_ci"] = "every resample had Cov(A,C) = 0"
    elif share is not None:
        reasons["between_share_ci"] = "bootstrap disabled (resamples=0)"
    else:
        reasons["between_share_ci"] = reasons["between_share"]
    return Decomposition(
        rows,
        cov,
        within,
        between,
        share,
        ci,
        resamples if share is not None else 0,
        dropped,
        reasons,
    )


def _skey(item: tuple[str, JointCounts]) -> tuple[int, float | str]:
    """Numeric strata in numeric order, then the rest alphabetically."""
    try:
        return (0, float(item[0]))
    except ValueError:
        return (1, item[0])


@dataclass(frozen=True, slots=True)
class LeaveOneOut:
    removed: str
    pooled: PooledStats

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.pooled.n,
            "z": self.pooled.z,
            "p": self.pooled.p,
            "cmh_or": self.pooled.cmh_or,
            "reasons": dict(self.pooled.reasons),
        }


@dataclass(frozen=True, slots=True)
class SelectionReport:
    """Everything ``cotaudit selection`` reports, in input order of deployments."""

    deployments: Mapping[str, DeploymentStats]
    pooled: PooledStats
    leave_one_out: Mapping[str, LeaveOneOut]
    strata: Mapping[str, Decomposition]
    excluded: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ceilings(self) -> tuple[str, ...]:
        return tuple(k for k, v in self.deployments.items() if v.ceiling)

    def __repr__(self) -> str:
        # What a notebook cell shows: each deployment's headline and the pooled odds ratio,
        # under the names of the fields that hold them in full; not every stratum's numbers.
        shown = list(self.deployments.items())[:_REPR_DEPLOYMENTS]
        rows = [f"{name!r}: {_repr_deployment(v)}" for name, v in shown]
        more = len(self.deployments) - len(shown)
        if more > 0:
            rows.append(f"... {more} more")
        pooled = self.pooled
        parts = [
            f"deployments={{{', '.join(rows)}}}",
            f"pooled=<cmh_or={_num(pooled.cmh_or, 2)} cmh_or_ci={_interval(pooled.cmh_or_ci, 2)} "
            f"p={_p(pooled.p)} over {len(pooled.deployments)} deployments, n={pooled.n}>",
        ]
        if self.strata:
            parts.append(f"strata=<{len(self.strata)} decompositions>")
        excluded = sum(sum(per.values()) for per in self.excluded.values())
        if excluded:
            parts.append(f"excluded=<{excluded} traces>")
        return f"SelectionReport({', '.join(parts)})"

    def to_json(self) -> dict[str, Any]:
        return {
            "deployments": {k: v.to_json() for k, v in self.deployments.items()},
            "ceiling": list(self.ceilings),
            "pooled": self.pooled.to_json(),
            "leave_one_out": {k: v.to_json() for k, v in self.leave_one_out.items()},
            "strata": {k: v.to_json() for k, v in self.strata.items()},
            "excluded": {k: dict(v) for k, v in self.excluded.items()},
            **dict(self.extra),
        }


_REPR_DEPLOYMENTS = 8  # deployments a SelectionReport's repr shows before it counts the rest


def _num(value: float | None, digits: int, *, sign: bool = False) -> str:
    return "None" if value is None else f"{value:{'+' if sign else ''}.{digits}f}"


def _interval(ci: tuple[float, float] | None, digits: int, *, sign: bool = False) -> str:
    if ci is None:
        return "None"
    return f"[{_num(ci[0], digits, sign=sign)}, {_num(ci[1], digits, sign=sign)}]"


def _p(value: float | None) -> str:
    return "None" if value is None else f"{value:.2g}"


def _repr_deployment(v: DeploymentStats) -> str:
    # Proportions to 3 decimals, as the table's points to one; a ceiling says why it has no
    # interval and is not pooled.
    text = (
        f"<n={v.n} f_pop={_num(v.f_pop, 3)} f_sel={_num(v.f_sel, 3)} "
        f"delta={_num(v.delta, 3, sign=True)} delta_ci={_interval(v.delta_ci, 3, sign=True)} "
        f"p={_p(v.p)}"
    )
    return text + (" ceiling>" if v.ceiling else ">")


def analyse(
    deployments: Mapping[str, JointCounts],
    *,
    strata: Mapping[str, Mapping[str, JointCounts]] | None = None,
    rng: np.random.Generator | int | None = 0,
    resamples: int = BOOTSTRAP_RESAMPLES,
    excluded: Mapping[str, Mapping[str, int]] | None = None,
) -> SelectionReport:
    """Per-deployment statistics, pooled CMH, leave-one-out and stratum decompositions.

    Pooling and leave-one-out use non-ceiling deployments with at least one trace; a
    leave-one-out entry exists for each of them. ``strata`` maps a deployment to its
    per-stratum counts (deployments absent from it get no decomposition).
    """
    per = {name: deployment_stats(counts) for name, counts in deployments.items()}
    poolable = {k: deployments[k] for k, v in per.items() if not v.ceiling and v.n > 0}
    pooled = cmh(poolable)
    loo = {
        name: LeaveOneOut(name, cmh({k: v for k, v in poolable.items() if k != name}))
        for name in poolable
    }
    generator = np.random.default_rng(rng)
    decompositions = {
        name: decompose(per_stratum, rng=generator, resamples=resamples)
        for name, per_stratum in (strata or {}).items()
    }
    return SelectionReport(per, pooled, loo, decompositions, dict(excluded or {}))


@dataclass(frozen=True, slots=True)
class TraceCounts:
    """Joint counts read from a run's stream, per deployment (endpoint).

    ``strata`` and ``families`` split the same traces by the problem's stratum and family.
    ``excluded`` counts traces left out per deployment and reason (``"error"`` for a request
    that failed for good, ``"missing"`` when the original or intervened response is absent,
    ``"original: no answer line"`` and the like when an answer could not be read - such
    traces are never guessed into a cell). ``preserving`` counts, per deployment, readable
    preserving answers (``n``) and those equal to the unchanged oracle (``agree``).
    """

    deployments: Mapping[str, JointCounts]
    strata: Mapping[str, Mapping[str, JointCounts]]
    families: Mapping[str, Mapping[str, JointCounts]]
    excluded: Mapping[str, Mapping[str, int]]
    preserving: Mapping[str, Mapping[str, int]]


def _cell(a_ok: bool, c_ok: bool) -> JointCounts:
    return JointCounts(
        int(a_ok and c_ok),
        int(c_ok and not a_ok),
        int(a_ok and not c_ok),
        int(not a_ok and not c_ok),
    )


def score_traces(records: Iterable[Mapping[str, Any]], *, order: Iterable[str] = ()) -> TraceCounts:
    """Score a stream's procedural records: ``C`` and ``A`` per (endpoint, problem).

    Problem records of task ``procedural`` give the oracles; for each endpoint and problem
    the last ``original``, ``intervened`` and ``preserving`` response records are read with
    :func:`cotaudit.domain.procedural_answers.extract_procedural_answer`. Records of other tasks are
    ignored. Deployments are reported in ``order`` (the run's config order), then by name.
    """
    from cotaudit.domain.procedural_answers import extract_procedural_answer
    from evaluator.source import ordered_by_run

    problems: dict[str, Mapping[str, Any]] = {}
    latest: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    seen: dict[str, None] = {}
    for record in records:
        if record.get("task") != "procedural":
            continue
        kind = record.get("kind")
        if kind == "problem":
            problems[str(record.get("problem_id"))] = record
        elif kind == "response":
            endpoint = str(record.get("endpoint"))
            seen.setdefault(endpoint)
            key = (endpoint, str(record.get("problem_id")))
            # Keep only what scoring reads: a long stream must not hold every message.
            slim = {"text": record.get("text"), "error": record.get("error")}
            latest.setdefault(key, {})[str(record.get("condition"))] = slim
    names = list(ordered_by_run(seen, order))
    deployments: dict[str, JointCounts] = {name: ZERO for name in names}
    strata: dict[str, dict[str, JointCounts]] = {name: {} for name in names}
    families: dict[str, dict[str, JointCounts]] = {name: {} for name in names}
    excluded: dict[str, dict[str, int]] = {name: {} for name in names}
    preserving: dict[str, dict[str, int]] = {name: {"n": 0, "agree": 0} for name in names}
    for (endpoint, problem_id), by_condition in latest.items():
        skip = excluded[endpoint]
        problem = problems.get(problem_id)
        if problem is None:
            skip["no problem record"] = skip.get("no problem record", 0) + 1
            continue
        family = str(problem.get("family"))
        answers: dict[str, Any] = {}
        reason: str | None = None
        for condition in ("original", "intervened", "preserving"):
            response = by_condition.get(condition)
            if response is None:
                reason = reason or (None if condition == "preserving" else "missing")
                continue
            if response.get("error") is not None:
                reason = reason or (None if condition == "preserving" else "error")
                continue
            found = extract_procedural_answer(response.get("text"), family)
            if found.failure is not None:
                if condition != "preserving":
                    reason = reason or f"{condition}: {found.failure}"
                continue
            answers[condition] = found.value
        if "preserving" in answers:
            preserving[endpoint]["n"] += 1
            oracle = problem["preserving"]["answer"]
            preserving[endpoint]["agree"] += int(answers["preserving"] == oracle)
        if reason is not None:
            skip[reason] = skip.get(reason, 0) + 1
            continue
        cell = _cell(
            answers["intervened"] == problem["intervened"]["answer"],
            answers["original"] == problem["original"]["answer"],
        )
        deployments[endpoint] = deployments[endpoint] + cell
        stratum = str(problem.get("stratum"))
        strata[endpoint][stratum] = strata[endpoint].get(stratum, ZERO) + cell
        families[endpoint][family] = families[endpoint].get(family, ZERO) + cell
    # Strata and families in a fixed order, not in the order their traces completed.
    strata = {name: dict(sorted(per.items(), key=_skey)) for name, per in strata.items()}
    families = {name: dict(sorted(per.items())) for name, per in families.items()}
    excluded = {name: dict(sorted(per.items())) for name, per in excluded.items()}
    return TraceCounts(deployments, strata, families, excluded, preserving)
