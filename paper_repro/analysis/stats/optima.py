"""rho* of one frontier: the cells that could be best decide, a shape-free fit estimates.

Per (setting, target), over every run of the setting (one point per seed and cell), the rule below
is fixed in code before any table is read.

**The decision: the cells that could be best** (:func:`best_set`). Gupta's subset selection at 95%:
a cell stays in the set when its mean is within ``d * se`` of the best observed mean, with

- ``se = sqrt(s_i^2 / n_i + s_best^2 / n_best + 2 tau^2)``: each cell's own SD over its seeds (the
  committed cells' SDs differ up to tenfold within a frontier, so one pooled SD would make the noisy
  cells look precise), ``tau`` the **recipe-effect SD**.
  Each cell is its own recipe (P, G, K, mu), not only a rho: a cell's mean moves by its recipe's
  luck, which no number of seeds removes, so "could this cell be the best *allocation*" allows for
  it. ``tau`` is the profile's (``margins.recipe_sd``) or, where the profile leaves it open, the one
  the study's own runs show (the REML recipe SD, :mod:`paper_repro.analysis.stats.mixed`); 0 gives
  the textbook rule on seed noise alone;
- ``d = t(1 - alpha / (k - 1), df)``: the Bonferroni critical value for the ``k - 1`` one-sided
  comparisons with the best (Satterthwaite's degrees of freedom per comparison, over its whole
  variance: both cells' seed parts and the recipe part on the REML fit's df), a little wider
  than Dunnett's exact constant (tested against ``scipy.stats.dunnett``), so the set covers the
  best cell at least 95% of the time.

Without seed replication there is no noise estimate and every cell could be best. A claim "rho* ~ x"
is then decided by :func:`window_verdict`: **held** when every cell of the set lies inside
``[x - margin, x + margin]``, **not held** when none does, **inconclusive** otherwise.

**The estimate: unimodal regression** (:func:`unimodal`). The best up-then-down fit of the cell means
(weighted by seeds) over cells in order of realised rho; rho* is the mean rho of the cells at the
fit's maximum. Its 95% interval: percentiles of the same estimate over :data:`BOOTSTRAP` resamples of
the seeds within cells, each resample's cell means shifted by a draw of the recipe effect (the same
``tau``; fixed RNG seed). A maximum that reaches the lowest or the highest cell is a **boundary**
optimum: "at the edge of what this setting can reach", reported at that edge's rho, never beyond the
grid. When every cell could be best, rho* is **not identified**.

**Descriptions only**: the quadratic in rho by OLS and Fieller's interval for its vertex (where its
curvature is significant), and the one-way F test of the cells against no cell effect. They decide
nothing; no lack-of-fit gate, no half-line fallback.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

ALPHA = 0.05  # the best set's level (95%) and the flatness description's
BOOTSTRAP = 400  # seed resamples for the interval of rho*; percentiles to about +-0.01 in rho
NAN = float("nan")
SAME_RHO = 0.05  # two cells' realised rho closer than this are the same allocation (grid tolerance 0.03)


# ---------------------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class Cells:
    """One frontier's cells in order of realised rho: the target's mean, variance and count over
    seeds, and the cell's mean realised rho."""

    names: tuple[str, ...]
    rho: np.ndarray
    mean: np.ndarray
    var: np.ndarray  # over seeds (ddof 1; NaN with one seed)
    n: np.ndarray

    @classmethod
    def of(cls, rows: pd.DataFrame, target: str) -> Cells:
        """The cells of ``rows`` (columns ``cell``, ``rho`` and ``target``; rows missing either
        number are left out)."""
        data = rows[["cell", "rho", target]].dropna()
        g = data.groupby("cell", sort=False)
        stats = pd.DataFrame(
            {
                "rho": g["rho"].mean(),
                "mean": g[target].mean(),
                "var": g[target].var(ddof=1),
                "n": g[target].count(),
            }
        ).sort_values("rho", kind="stable")
        return cls(
            tuple(map(str, stats.index)),
            stats["rho"].to_numpy(float),
            stats["mean"].to_numpy(float),
            stats["var"].to_numpy(float),
            stats["n"].to_numpy(int),
        )

    @property
    def k(self) -> int:
        return len(self.names)

    def pooled(self) -> tuple[float, int]:
        """The pooled within-cell variance over seeds and its degrees of freedom (NaN, 0 without
        replication)."""
        replicated = self.n >= 2
        df = int((self.n[replicated] - 1).sum())
        if df == 0:
            return NAN, 0
        return float(((self.n - 1) * self.var)[replicated].sum() / df), df


def best_set(
    cells: Cells, recipe_sd: float = 0.0, alpha: float = ALPHA, recipe_df: float = np.inf
) -> np.ndarray:
    """Which of ``cells`` could be the best at ``1 - alpha`` (Gupta's subset, Bonferroni, each cell
    with its own seed variance, the recipe effect ``recipe_sd`` allowed for, its square estimated on
    ``recipe_df`` degrees of freedom): a boolean mask in ``cells``' order. Each comparison's df are
    Satterthwaite's over its whole variance, the recipe part included."""
    from scipy import stats

    if cells.k < 2:
        return np.ones(cells.k, dtype=bool)
    pooled, df = cells.pooled()
    if df == 0:
        return np.ones(cells.k, dtype=bool)
    var = np.where(cells.n >= 2, cells.var, pooled) / cells.n  # a cell mean's seed variance
    top = int(np.argmax(cells.mean))
    seed_part = var + var[top]
    recipe = 2 * recipe_sd**2
    se = np.sqrt(seed_part + recipe)
    recipe_term = recipe**2 / recipe_df if recipe > 0 and np.isfinite(recipe_df) and recipe_df > 0 else 0.0
    with np.errstate(
        divide="ignore", invalid="ignore"
    ):  # Satterthwaite per comparison, over its whole variance
        dof = (seed_part + recipe) ** 2 / (
            var**2 / np.maximum(cells.n - 1, 1) + var[top] ** 2 / max(cells.n[top] - 1, 1) + recipe_term
        )
    dof = np.where(np.isfinite(dof) & (dof > 0), dof, df)
    d = stats.t.ppf(1 - alpha / (cells.k - 1), dof)
    return cells.mean >= cells.mean[top] - d * se


def window_verdict(rhos: np.ndarray, x: float, margin: float) -> str:
    """ "rho* ~ x" from the realised rhos of the cells that could be best: held when every one lies in
    ``[x - margin, x + margin]``, not held when none does, inconclusive otherwise."""
    inside = np.abs(np.asarray(rhos, float) - x) <= margin + 1e-12
    if inside.all():
        return "held"
    if not inside.any():
        return "not held"
    return "inconclusive"


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two rho spans ``(low, high)`` of best sets share an allocation (within :data:`SAME_RHO`)."""
    return a[0] <= b[1] + SAME_RHO and b[0] <= a[1] + SAME_RHO


# ---------------------------------------------------------------------------------------- unimodal fit


def isotonic(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The weighted non-decreasing least-squares fit of each row of ``y`` (batch x k), by the max-min
    formula ``fit_i = max_{j <= i} min_{l >= i} mean(y[j..l])`` (vectorised over the batch; k small)."""
    k = y.shape[-1]
    if k == 0:
        return y.copy()
    cy = np.concatenate([np.zeros((*y.shape[:-1], 1)), np.cumsum(y * w, axis=-1)], axis=-1)
    cw = np.concatenate([[0.0], np.cumsum(w)])
    start, end = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    valid = start <= end
    span = np.where(valid, cw[end + 1] - cw[start], 1.0)
    means = (cy[..., end + 1] - cy[..., start]) / span  # batch x start x end
    means = np.where(valid, means, np.inf)
    inner = np.flip(np.minimum.accumulate(np.flip(means, -1), axis=-1), -1)  # min over end >= i
    inner = np.where(valid, inner, -np.inf)  # only start <= i
    return inner.max(axis=-2)


def unimodal(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The weighted up-then-down least-squares fit of each row of ``y`` (batch x k): the best over
    every split of a non-decreasing fit of the cells before it and a non-increasing one after."""
    y = np.atleast_2d(np.asarray(y, float))
    w = np.asarray(w, float)
    k = y.shape[-1]
    best, best_sse = None, None
    for split in range(k + 1):
        up = isotonic(y[:, :split], w[:split])
        down = isotonic(y[:, split:][:, ::-1], w[split:][::-1])[:, ::-1]  # non-increasing
        fit = np.concatenate([up, down], axis=-1)
        sse = ((y - fit) ** 2 * w).sum(axis=-1)
        if best is None:
            best, best_sse = fit, sse
        else:
            better = sse < best_sse - 1e-15
            best = np.where(better[:, None], fit, best)
            best_sse = np.where(better, sse, best_sse)
    return best


def peak_rho(fit: np.ndarray, rho: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a fit (batch x k): rho* (the weighted mean rho of the cells at its maximum) and
    which edge that maximum reaches: -1 the lowest cell, 1 the highest, 0 neither (both: 0 too; the
    fit is flat)."""
    top = fit >= fit.max(axis=-1, keepdims=True) - 1e-12
    weight = top * w
    star = (weight * rho).sum(axis=-1) / weight.sum(axis=-1)
    return star, top[:, -1].astype(int) - top[:, 0].astype(int)


# ---------------------------------------------------------------------------------------- the optimum


@dataclass(frozen=True)
class Optimum:
    """rho* of one frontier: the cells that could be best (the decision) and the unimodal estimate
    with its bootstrap interval (a description), in realised rho."""

    status: str  # interior | boundary | not identified
    reason: str
    rho_star: float = NAN
    ci95_low: float = NAN
    ci95_high: float = NAN
    feasible_low: float = NAN
    feasible_high: float = NAN
    best_cells: str = ""  # the cells that could be best at 95%, in order of rho
    best_low: float = NAN  # their realised rho span
    best_high: float = NAN
    recipe_sd: float = NAN  # the recipe effect the set allowed for
    p_flat: float = NAN  # description: the cells against no cell effect (one-way F)
    quad_vertex: float = NAN  # description: the quadratic's vertex and Fieller's 95% interval
    quad_ci95_low: float = NAN
    quad_ci95_high: float = NAN
    n_runs: int = 0
    n_cells: int = 0

    @property
    def identified(self) -> bool:
        return self.status in ("interior", "boundary")

    def as_dict(self) -> dict:
        return asdict(self)


def fit_optimum(
    rows: pd.DataFrame,
    target: str,
    recipe_sd: float = 0.0,
    bootstrap: int = BOOTSTRAP,
    seed: int = 0,
    describe: bool = True,
) -> Optimum:
    """rho* of ``target`` over ``rows`` (columns ``cell``, ``rho``, ``seed`` and ``target``), by the rule
    in the module docstring. ``bootstrap=0`` skips the interval; ``describe=False`` the quadratic and
    F test (the simulations decide from the set alone)."""
    cells = Cells.of(rows, target)
    base = {"n_runs": int(cells.n.sum()), "n_cells": cells.k, "recipe_sd": recipe_sd}
    if cells.k == 0:
        return Optimum("not identified", "no runs", **base)
    base.update(feasible_low=float(cells.rho[0]), feasible_high=float(cells.rho[-1]))
    keep = best_set(cells, recipe_sd)
    base.update(
        best_cells=" ".join(np.array(cells.names)[keep]),
        best_low=float(cells.rho[keep].min()),
        best_high=float(cells.rho[keep].max()),
    )
    if describe:
        base.update(_descriptions(rows, target, cells))
    if cells.k < 3:
        return Optimum("not identified", "fewer than three cells", **base)
    if cells.pooled()[1] == 0:
        return Optimum("not identified", "no seed replication: every cell could be best", **base)
    if keep.all():
        return Optimum("not identified", "every cell could be the best", **base)
    star, edge = peak_rho(unimodal(cells.mean, cells.n), cells.rho, cells.n)
    where = "boundary" if edge[0] else "interior"
    reason = (
        "the fitted maximum lies inside the cells"
        if where == "interior"
        else (
            "at the edge of what this setting can reach (the fitted maximum reaches its "
            + ("lowest" if edge[0] < 0 else "highest")
            + " cell)"
        )
    )
    low = high = NAN
    if bootstrap:
        draws = _bootstrap_peaks(rows, target, cells, recipe_sd, bootstrap, seed)
        low, high = (float(v) for v in np.percentile(draws, [2.5, 97.5]))
    return Optimum(where, reason, float(star[0]), low, high, **base)


def _bootstrap_peaks(rows, target, cells: Cells, recipe_sd: float, b: int, seed: int) -> np.ndarray:
    """rho* of ``b`` resamples: seeds drawn with replacement within each cell, each resampled cell
    mean shifted by a draw of the recipe effect."""
    rng = np.random.default_rng(seed)
    data = rows[["cell", target]].dropna()
    means = np.empty((b, cells.k))
    for i, name in enumerate(cells.names):
        values = data.loc[data["cell"].astype(str) == name, target].to_numpy(float)
        picks = rng.integers(0, len(values), size=(b, len(values)))
        means[:, i] = values[picks].mean(axis=1)
    means += rng.normal(0.0, recipe_sd, size=means.shape) if recipe_sd > 0 else 0.0
    return peak_rho(unimodal(means, cells.n), cells.rho, cells.n)[0]


def cells_f_test(cells: pd.Series, values: pd.Series) -> float:
    """The one-way F test (:func:`scipy.stats.f_oneway`) of ``values`` grouped by ``cells`` (the cells
    in sorted order, each its runs in order, as a groupby gives them), split by the cells' codes: the
    fits claim's simulation calls it thousands of times. NaN unless there are two cells, each with two
    runs, and the runs differ."""
    from scipy import stats

    codes, names = pd.factorize(cells, sort=True)
    y = np.asarray(values, float)
    counts = np.bincount(codes, minlength=len(names))
    if len(names) < 2 or counts.min() < 2 or np.ptp(y) <= 0:
        return NAN
    groups = np.split(y[np.argsort(codes, kind="stable")], np.cumsum(counts)[:-1])
    return float(stats.f_oneway(*groups).pvalue)


def _descriptions(rows: pd.DataFrame, target: str, cells: Cells) -> dict:
    """The one-way F test of the cells and the quadratic's vertex with Fieller's 95% interval."""
    from scipy import stats

    data = rows[["cell", "rho", target]].dropna()
    out = {}
    if np.isfinite(p := cells_f_test(data["cell"], data[target])):
        out["p_flat"] = p
    if cells.k >= 3 and len(data) > 3:
        x, y = data["rho"].to_numpy(float), data[target].to_numpy(float)
        fit = OLS.fit(np.column_stack([np.ones_like(x), x, x**2]), y)
        b1, b2 = float(fit.params[1]), float(fit.params[2])
        if b2 < 0 and fit.df_resid > 0:
            out["quad_vertex"] = -b1 / (2 * b2)
            ci = fieller(
                b1, b2, fit.cov[1, 1], fit.cov[1, 2], fit.cov[2, 2], stats.t.ppf(0.975, fit.df_resid)
            )
            if ci is not None:
                out["quad_ci95_low"], out["quad_ci95_high"] = ci
    return out


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


def standardised(rows: pd.DataFrame, target: str, group: str) -> pd.Series:
    """``target`` standardised within each ``group`` (mean 0, SD 1; a constant group is 0)."""
    g = rows.groupby(group)[target]
    sd = g.transform("std").replace(0, np.nan)
    return ((rows[target] - g.transform("mean")) / sd).fillna(0.0)


def optimum_table(
    rows: pd.DataFrame, frontier: pd.DataFrame, shared: dict[str, str], recipe_sd: float = 0.0
) -> pd.DataFrame:
    """Per setting and target: the cells that could be best, rho* with its status and interval (with
    the quadratic as a description), and the argmax cell with its value, the base policy's and the
    gain. ``same_runs_as`` names the setting whose runs a setting reuses."""
    from paper_repro.common.results import METRICS

    out = []
    for (stage, setting), f in frontier.groupby(["stage", "setting"], sort=False):
        r = rows[(rows["stage"] == stage) & (rows["setting"] == setting)]
        for t in METRICS:
            if f[t].isna().all():
                continue
            opt = fit_optimum(r, t, recipe_sd)
            best = f.loc[f[t].idxmax()]
            out.append(
                {
                    "stage": stage,
                    "setting": setting,
                    "target": t,
                    **opt.as_dict(),
                    "best_cell": best["cell"],
                    "best_cell_rho": best["rho"],
                    "best_cell_rho_time": best["rho_time"],
                    "best_value": best[t],
                    "base_value": best[f"base_{t}"],
                    "gain": best[t] - best[f"base_{t}"],
                    "reward_share_at_best": best["reward_share"],
                    "range": f[t].max() - f[t].min(),
                    "mean_seed_sd": f[f"{t}_sd"].mean(),
                    "same_runs_as": shared.get(setting, ""),
                }
            )
    return pd.DataFrame(out)
