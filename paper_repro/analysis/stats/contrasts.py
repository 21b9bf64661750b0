"""Contrasts of cell means, paired by seed, with degrees of freedom from the whole variance.

A contrast is a weighted sum of cell means, ``L = sum_s w_s sum_c a[s, c] mu[s, c]``: per setting
``s`` the cell weights ``a[s, .]`` (e.g. +1/|A| on the cells of one window, -1/|B| on another's) and
the setting's weight ``w_s`` (1/S for a class mean; of both signs for an interaction).

It is estimated at two levels, each labelled on every row that reads it:

- **these recipes** (:data:`THESE`): the cells as they are, fixed; the only noise is the seeds'.
  Within a setting the cells share their seeds, and a seed is a block (its data order and sampling
  are shared by every cell of the setting), so each seed gives one paired value
  ``d[s, k] = sum_c a[s, c] y[s, c, k]`` and the setting's part of the variance is
  ``var_k(d[s, k]) / n_s``. Cells without a common seed fall back to the unpaired sum
  ``sum_c a^2 s_c^2 / n_c`` (Welch).
- **any recipe at this rho** (:data:`ANY`): the cells as draws of the recipes that realise their rho,
  so each cell also carries a recipe effect of variance ``tau^2`` (:mod:`paper_repro.analysis.stats.mixed`):
  the variance gains ``tau^2 sum_s w_s^2 sum_c a[s, c]^2``.

The degrees of freedom are Satterthwaite's over every part of the variance (each setting's seed part
with ``n_s - 1``, the recipe part with the REML fit's own df), never the seed part's alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from paper_repro.analysis.stats.verdict import NAN

THESE = "these recipes"
ANY = "any recipe at this rho"
LEVELS = (THESE, ANY)


@dataclass(frozen=True)
class Estimate:
    """A contrast's estimate, its standard error and Satterthwaite df, at one level."""

    value: float = NAN
    se: float = NAN
    df: float = NAN
    level: str = THESE
    paired: bool = True

    def interval(self, confidence: float) -> tuple[float, float]:
        """The two-sided t interval at ``confidence``."""
        if not (np.isfinite(self.value) and np.isfinite(self.se)):
            return NAN, NAN
        from scipy.stats import t as student

        q = float(student.ppf(0.5 + confidence / 2, self.df)) if np.isfinite(self.df) else 1.959963984540054
        return self.value - q * self.se, self.value + q * self.se


Weights = Mapping[str, Mapping[str, float]]  # setting -> cell -> weight (the setting's weight included)


@dataclass(frozen=True)
class Grid:
    """One setting's runs of one target as seeds x cells: the sums, squares and counts of its runs
    (a cell may lack a seed, or have two runs of one)."""

    cells: tuple[str, ...]
    total: np.ndarray
    squares: np.ndarray
    count: np.ndarray

    @classmethod
    def of(cls, rows: pd.DataFrame, target: str) -> Grid:
        y = rows[target].to_numpy(float) if target in rows else np.full(len(rows), np.nan)
        keep = np.isfinite(y)
        cell_codes, cells = pd.factorize(rows["cell"].astype(str).to_numpy()[keep], sort=True)
        seed_codes, seeds = pd.factorize(rows["seed"].to_numpy()[keep], sort=True)
        shape = (len(seeds), len(cells))
        total, squares, count = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        np.add.at(total, (seed_codes, cell_codes), y[keep])
        np.add.at(squares, (seed_codes, cell_codes), y[keep] ** 2)
        np.add.at(count, (seed_codes, cell_codes), 1.0)
        return cls(tuple(map(str, cells)), total, squares, count)

    def columns(self, cells) -> np.ndarray | None:
        """The column of each of ``cells``, or None when one is missing."""
        index = {c: i for i, c in enumerate(self.cells)}
        at = [index.get(c) for c in cells]
        return None if any(i is None for i in at) else np.array(at, dtype=int)

    def paired(self, at: np.ndarray) -> np.ndarray | None:
        """The seeds x cells means of the columns ``at`` on the seeds every one of them ran (None when
        some seed lacks one of them)."""
        count = self.count[:, at]
        ran = (count > 0).any(axis=1)
        if not (count[ran] > 0).all():
            return None
        return self.total[ran][:, at] / count[ran]


def _setting_part(grid: Grid, a: Mapping[str, float]) -> tuple[float, float, float, bool]:
    """One setting's contrast ``sum_c a_c mean_c``: (value, variance, df, paired)."""
    cells = [c for c, w in a.items() if w != 0]
    at = grid.columns(cells)
    if at is None:
        return NAN, NAN, NAN, False
    weights = np.array([a[c] for c in cells])
    means = grid.paired(at)
    if means is not None and len(means) >= 2:
        d = means @ weights
        return float(d.mean()), float(d.var(ddof=1) / len(d)), float(len(d) - 1), True
    n = grid.count[:, at].sum(axis=0)
    if (n < 2).any():
        return NAN, NAN, NAN, False
    mean = grid.total[:, at].sum(axis=0) / n
    var = np.maximum(grid.squares[:, at].sum(axis=0) - n * mean**2, 0.0) / (n - 1)
    parts = weights**2 * var / n
    value, total_var = float(weights @ mean), float(parts.sum())
    df = total_var**2 / float(np.sum(parts**2 / (n - 1))) if total_var > 0 else np.inf
    return value, total_var, df, False


def grids(rows: pd.DataFrame | Mapping[str, pd.DataFrame], target: str) -> dict[str, Grid]:
    """Per setting, its runs of ``target`` as a :class:`Grid`."""
    split = rows if isinstance(rows, Mapping) else {s: g for s, g in rows.groupby("setting", sort=False)}
    return {str(s): Grid.of(g, target) for s, g in split.items()}


def contrast(
    rows: pd.DataFrame | Mapping[str, Grid],
    target: str,
    weights: Weights,
    tau: float = 0.0,
    tau_df: float = np.inf,
) -> dict[str, Estimate]:
    """The contrast ``weights`` of ``rows``' cell means of ``target``, at both levels (by level):
    ``tau``/``tau_df``, the recipe SD and its df (the :data:`ANY` level's recipe part). ``rows``: a
    runs table, or its settings' grids of ``target`` (:func:`grids`, built once by a study). A
    setting whose cells are missing makes the estimate NaN."""
    split = rows if isinstance(rows, Mapping) else grids(rows, target)
    value, seed_var, terms, paired, recipe_q = 0.0, 0.0, [], True, 0.0
    for setting, a in weights.items():
        if setting not in split:
            return {level: Estimate(level=level) for level in LEVELS}
        v, var, df, was_paired = _setting_part(split[setting], a)
        if not np.isfinite(v):
            return {level: Estimate(level=level) for level in LEVELS}
        value += v
        seed_var += var
        terms.append((var, df))
        paired &= was_paired
        recipe_q += float(sum(w * w for w in a.values()))
    seed_df = _satterthwaite(terms)
    recipe = tau * tau * recipe_q
    return {
        THESE: Estimate(value, float(np.sqrt(seed_var)), seed_df, THESE, paired),
        ANY: Estimate(
            value, float(np.sqrt(seed_var + recipe)), _satterthwaite([*terms, (recipe, tau_df)]), ANY, paired
        ),
    }


def _satterthwaite(terms: list[tuple[float, float]]) -> float:
    """Satterthwaite's df of a sum of independent variance estimates ``(variance, df)``."""
    total = sum(v for v, _ in terms)
    denom = sum(v * v / df for v, df in terms if v > 0 and np.isfinite(df) and df > 0)
    return float(total * total / denom) if denom > 0 else np.inf


def window_weights(
    cells: Mapping[str, float], upper: tuple[float, float], lower: tuple[float, float]
) -> dict:
    """One setting's cell weights for "the cells with rho in ``upper`` minus those in ``lower``"
    (``cells``: cell -> realised rho; each window's cells averaged), or {} when a window is empty."""
    up = [c for c, r in cells.items() if upper[0] <= r <= upper[1]]
    low = [c for c, r in cells.items() if lower[0] <= r <= lower[1]]
    if not up or not low:
        return {}
    return {**{c: 1.0 / len(up) for c in up}, **{c: -1.0 / len(low) for c in low}}


def directional_verdict(
    estimate: Estimate, margin: float, confidence: float = 0.90
) -> tuple[str, float, float]:
    """A claim that the contrast is positive, against ``margin``, from its two-sided ``confidence``
    interval ``[L, U]`` (each side a one-sided test at ``(1 - confidence) / 2``): **held** when
    ``L > 0`` (the paper's direction established), **not held** when ``U < margin`` (no advantage as
    large as the margin left open), **inconclusive** otherwise. With no noise it is held exactly when
    the contrast is positive. Returns (verdict, L, U)."""
    low, high = estimate.interval(confidence)
    if not np.isfinite(low):
        return "inconclusive", low, high
    if low > 0:
        return "held", low, high
    if high < margin:
        return "not held", low, high
    return "inconclusive", low, high
