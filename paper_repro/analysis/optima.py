"""rho* from a fitted frontier: the quadratic in realised rho over all runs, its vertex and Fieller's
interval, a flatness test, a lack-of-fit test, and the cells that could be best.

Per (setting, target), over every run (one point per seed and cell, never cell means), the rule
below is fixed in code before any table is read; :func:`fit_optimum` returns the status it reaches:

1. fewer than three cells, or no seed replication: **not identified**;
2. **flatness**: the F test of the cell means against no effect of the cell (a one-way ANOVA over
   cells; pooled over settings, within settings). p >= ``ALPHA``: the frontier is statistically
   flat, rho* is **not identified (flat)**;
3. the quadratic ``y = b0 + b1 rho + b2 rho^2`` by OLS, and its **lack of fit** against the
   cell-means model (the nested F test of ``anova_lm``; written with numpy and ``scipy.stats`` here
   because the power simulation refits it thousands of times). p < ``LACK_OF_FIT_ALPHA``: the quadratic does not describe
   the cells, **not identified (lack of fit)**;
4. a maximum with a bounded **Fieller interval** (b2 < 0 and the curvature significantly non-zero at
   the interval's level): rho* is the vertex ``-b1 / (2 b2)``; **interior** when it lies inside the
   feasible range, else a **boundary** optimum at the nearest edge. The interval is Fieller's, not
   clipped (the claims test it against the paper's value; the figures clip it to the range);
5. no bounded interval, but a significant linear slope: the frontier rises (falls) across the whole
   feasible range, a **boundary** optimum at the top (bottom) edge, with the half-line interval
   ``[edge, inf)`` (``(-inf, edge]``): the data say only that rho* is at least (at most) the edge;
6. otherwise **not identified (no curvature or slope)**.

Pooled over several settings (``group="setting"``), each setting's target is standardised (its own
mean and SD) and keeps its own intercept; the curvature and vertex are shared: the class's rho*.

The feasible range is the range of realised rho the grid reached (its cells' mean rho): nothing
outside it was run, so nothing outside it is known. The argmax cell is kept as a description;
beside it, the cells that could be the best at 95% (Gupta's subset selection, with the Bonferroni
critical value ``d = t(1 - 0.05 / (k - 1), df)`` on the pooled within-cell SD: a cell stays when its
mean is within ``d s sqrt(1/n_i + 1/n_best)`` of the best mean).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

ALPHA = 0.05  # flatness, slope and subset selection
LACK_OF_FIT_ALPHA = 0.01  # the quadratic is refused only on strong evidence that it misfits
INF = float("inf")
NAN = float("nan")


@dataclass(frozen=True)
class Optimum:
    """rho* of one frontier and how it was reached (intervals in realised rho)."""

    status: str  # interior | boundary | not identified
    reason: str  # what the rule saw
    rho_star: float = NAN
    ci90_low: float = NAN
    ci90_high: float = NAN
    ci95_low: float = NAN
    ci95_high: float = NAN
    feasible_low: float = NAN
    feasible_high: float = NAN
    p_flat: float = NAN  # cells against no cell effect
    p_lack_of_fit: float = NAN  # the quadratic against the cell means
    curvature: float = NAN  # b2
    curvature_p: float = NAN
    slope_p: float = NAN  # the linear fit's slope (read when there is no bounded vertex)
    residual_sd: float = NAN  # of the quadratic fit
    n_runs: int = 0
    n_cells: int = 0

    @property
    def identified(self) -> bool:
        return self.status in ("interior", "boundary")

    def as_dict(self) -> dict:
        return asdict(self)


def fieller(b1: float, b2: float, v11: float, v12: float, v22: float, t: float) -> tuple[float, float] | None:
    """Fieller's interval for the vertex ``-b1 / (2 b2)`` at critical value ``t``; None when the set
    is unbounded (the curvature is not significantly non-zero at that level)."""
    a_ = b2 * b2 - t * t * v22
    b_ = b1 * b2 - t * t * v12
    c_ = b1 * b1 - t * t * v11
    disc = b_ * b_ - a_ * c_
    if a_ <= 0 or disc < 0:
        return None
    lo, hi = (b_ - math.sqrt(disc)) / a_, (b_ + math.sqrt(disc)) / a_  # bounds of theta = b1 / b2
    return -hi / 2, -lo / 2  # v = -theta / 2 flips the order


def standardised(rows: pd.DataFrame, target: str, group: str) -> pd.Series:
    """``target`` standardised within each ``group`` (mean 0, SD 1; a constant group is 0)."""
    g = rows.groupby(group)[target]
    sd = g.transform("std").replace(0, np.nan)
    return ((rows[target] - g.transform("mean")) / sd).fillna(0.0)


@dataclass(frozen=True)
class OLS:
    """An ordinary least-squares fit: coefficients, their covariance, residual SS and dof."""

    params: np.ndarray
    cov: np.ndarray
    rss: float
    df_resid: int

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray) -> OLS:
        params, _, rank, _ = np.linalg.lstsq(X, y, rcond=None)
        rss = float(np.sum((y - X @ params) ** 2))
        df = len(y) - rank
        scale = rss / df if df > 0 else NAN
        return cls(params, scale * np.linalg.pinv(X.T @ X), rss, df)

    def t_p(self, i: int) -> float:
        """Two-sided p of coefficient ``i`` being zero."""
        from scipy import stats

        se = math.sqrt(self.cov[i, i]) if self.cov[i, i] > 0 else NAN
        return float(2 * stats.t.sf(abs(self.params[i] / se), self.df_resid)) if se == se else NAN


def f_test(reduced: OLS, full: OLS) -> float:
    """p of the nested F test of ``reduced`` inside ``full`` (as statsmodels' ``anova_lm``)."""
    from scipy import stats

    extra = reduced.df_resid - full.df_resid
    if extra <= 0 or full.df_resid <= 0:
        return NAN
    if full.rss <= 0:
        return 0.0 if reduced.rss > 0 else 1.0
    f = ((reduced.rss - full.rss) / extra) / (full.rss / full.df_resid)
    return float(stats.f.sf(f, extra, full.df_resid))


def fit_optimum(rows: pd.DataFrame, target: str, group: str | None = None) -> Optimum:
    """rho* of ``target`` over ``rows`` (columns ``cell``, ``rho``, ``target``; and ``group`` when
    pooling settings), by the rule in the module docstring."""
    from scipy import stats

    cols = ["cell", "rho", target] + ([group] if group else [])
    data = rows[cols].dropna()
    cell_codes, cell_names = pd.factorize(data["cell"])
    group_codes = pd.factorize(data[group])[0] if group else np.zeros(len(data), dtype=int)
    key_codes, _ = pd.factorize(group_codes * max(len(cell_names), 1) + cell_codes)
    rho = data["rho"].to_numpy(float)
    counts = np.bincount(key_codes)
    base = {"n_runs": len(data), "n_cells": len(counts)}
    if len(cell_names) < 3:
        return Optimum("not identified", "too few cells", **base)
    cell_rho = np.bincount(key_codes, weights=rho) / counts
    lo, hi = float(cell_rho.min()), float(cell_rho.max())
    base.update(feasible_low=lo, feasible_high=hi)
    if (counts < 2).all():
        return Optimum("not identified", "no seed replication", **base)
    y = (standardised(data, target, group) if group else data[target]).to_numpy(float)
    if np.ptp(y) == 0:
        return Optimum("not identified", "flat (no variation at all)", **base)
    intercepts = np.eye(group_codes.max() + 1)[group_codes]
    cells = np.eye(len(counts))[key_codes]
    by_cell = OLS.fit(cells, y)
    p_flat = f_test(OLS.fit(intercepts, y), by_cell)
    base["p_flat"] = p_flat
    if not p_flat < ALPHA:
        return Optimum("not identified", f"flat (cells against no cell effect, p = {p_flat:.2g})", **base)
    X = np.column_stack([intercepts, rho, rho**2])
    quad = OLS.fit(X, y)
    p_lof = f_test(quad, by_cell)
    b1, b2 = float(quad.params[-2]), float(quad.params[-1])
    cov = quad.cov[-2:, -2:]
    base.update(
        p_lack_of_fit=p_lof, curvature=b2, curvature_p=quad.t_p(X.shape[1] - 1),
        residual_sd=math.sqrt(quad.rss / quad.df_resid) if quad.df_resid > 0 else NAN,
    )  # fmt: skip
    if p_lof < LACK_OF_FIT_ALPHA:
        return Optimum(
            "not identified", f"the quadratic misfits the cells (lack of fit p = {p_lof:.2g})", **base
        )
    interval = {
        level: fieller(b1, b2, cov[0, 0], cov[0, 1], cov[1, 1], stats.t.ppf(level, quad.df_resid))
        if b2 < 0
        else None
        for level in (0.95, 0.975)
    }
    if interval[0.95] is not None and interval[0.975] is not None:
        vertex = -b1 / (2 * b2)
        where = "interior" if lo < vertex < hi else "boundary"
        reason = (
            "vertex inside the feasible range"
            if where == "interior"
            else f"vertex {vertex:.3f} beyond the feasible range {lo:.3f}-{hi:.3f}"
        )
        star = float(min(max(vertex, lo), hi))
        return Optimum(where, reason, star, *map(float, interval[0.95]), *map(float, interval[0.975]), **base)
    linear = OLS.fit(X[:, :-1], y)
    slope, slope_p = float(linear.params[-1]), linear.t_p(X.shape[1] - 2)
    base["slope_p"] = slope_p
    if slope_p < ALPHA:
        if slope > 0:
            return Optimum("boundary", "rises across the feasible range", hi, hi, INF, hi, INF, **base)
        return Optimum("boundary", "falls across the feasible range", lo, -INF, lo, -INF, lo, **base)
    return Optimum("not identified", "no significant curvature or slope", **base)


def best_cells(rows: pd.DataFrame, target: str, alpha: float = ALPHA) -> list[str]:
    """The cells that could be the best at ``1 - alpha`` (Gupta's subset selection, Bonferroni)."""
    from scipy import stats

    data = rows[["cell", target]].dropna()
    g = data.groupby("cell", sort=False)[target]
    means, counts = g.mean(), g.count()
    if len(means) < 2 or (counts < 2).any():
        return list(means.index[means == means.max()])
    df = int((counts - 1).sum())
    pooled = math.sqrt(float((g.var(ddof=1) * (counts - 1)).sum()) / df)
    d = stats.t.ppf(1 - alpha / (len(means) - 1), df)
    top = means.idxmax()
    keep = means >= means[top] - d * pooled * np.sqrt(1 / counts + 1 / counts[top])
    return [c for c in means.index if keep[c]]


def equivalence_verdict(opt: Optimum, x: float, margin: float) -> str:
    """ "rho* ~ x": held when the 90% interval lies inside ``[x - margin, x + margin]``; not held when
    the 95% interval excludes ``x``; inconclusive otherwise, and whenever rho* is not identified."""
    if not opt.identified:
        return "inconclusive"
    if x - margin <= opt.ci90_low and opt.ci90_high <= x + margin:
        return "held"
    if not opt.ci95_low <= x <= opt.ci95_high:
        return "not held"
    return "inconclusive"


def optimum_table(rows: pd.DataFrame, frontier: pd.DataFrame, shared: dict[str, str]) -> pd.DataFrame:
    """Per setting and target: the fitted rho* (:func:`fit_optimum`) with its status, intervals and
    tests; the cells that could be best; and, as a description only, the argmax cell with its value,
    the base policy's and the gain. ``same_runs_as`` names the setting whose runs a setting reuses."""
    from paper_repro.results import METRICS

    out = []
    for (stage, setting), f in frontier.groupby(["stage", "setting"], sort=False):
        r = rows[(rows["stage"] == stage) & (rows["setting"] == setting)]
        for t in METRICS:
            if f[t].isna().all():
                continue
            opt = fit_optimum(r, t)
            best = f.loc[f[t].idxmax()]
            out.append({
                "stage": stage, "setting": setting, "target": t, **opt.as_dict(),
                "best_cells_95": " ".join(best_cells(r, t)),
                "best_cell": best["cell"], "best_cell_rho": best["rho"], "best_cell_rho_time": best["rho_time"],
                "best_value": best[t], "base_value": best[f"base_{t}"], "gain": best[t] - best[f"base_{t}"],
                "reward_share_at_best": best["reward_share"], "range": f[t].max() - f[t].min(),
                "mean_seed_sd": f[f"{t}_sd"].mean(), "same_runs_as": shared.get(setting, ""),
            })  # fmt: skip
    return pd.DataFrame(out)
