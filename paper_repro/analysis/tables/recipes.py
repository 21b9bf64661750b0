"""Recipe vs rho (our addition): at equal rho, does the recipe matter?

The paper's advice is to report rho beside total FLOPs, which presumes that rho describes an
allocation: two recipes (P, G, K, mu) that spend the budget in the same proportions should train
alike. The grid cannot test that, since each of its cells is one recipe. So the profile's
``grid.recipes`` runs some targets twice in one setting: the planner's cell and a **second recipe**
of the same target rho (:meth:`paper_repro.run.allocation.Planner.second_cell`, labelled with a ``b``:
another group size G, and another kept share K/G or another mu). Each such pair is compared on the
same seeds' grid runs, paired by seed (a seed is a block: its data order and sampling are shared
by both recipes, so ``d_k = y_second,k - y_first,k`` removes it).

Its rule, its truths and how often it errs are the claim's: :mod:`paper_repro.analysis.claims.recipes`.
Here: each pair's seed values and their differences on the seeds both ran (:func:`pairs_of`), the
paired difference (:func:`paired`, Welch's :func:`welch` where fewer than two seeds are shared), a
pair's verdict against the margin on one difference (:func:`pair_verdict`: equivalent, different or
open, a description) and the per-pair table (``recipe_pairs.csv``, :func:`pair_table`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from paper_repro.analysis.stats.verdict import NAN
from paper_repro.run.allocation import SECOND_SUFFIX

ALPHA = 0.05
PAIR_COLUMNS = [
    "setting",
    "first",
    "second",
    "target",
    "first_recipe",
    "second_recipe",
    "first_rho",
    "second_rho",
    "first_mean",
    "second_mean",
    "n_first",
    "n_second",
    "difference",
    "se",
    "df",
    "ci90_low",
    "ci90_high",
    "ci95_low",
    "ci95_high",
    "p_tost",
    "margin",
    "pair_verdict",
    "paired",
]


@dataclass(frozen=True)
class Pair:
    """One target run by two recipes in one setting: each cell's seed values of ``target``, and ``d``
    the second minus the first on each seed both ran (in seed order)."""

    setting: str
    first: str
    second: str
    a: np.ndarray
    b: np.ndarray
    d: np.ndarray = field(default_factory=lambda: np.zeros(0))


def pairs_of(runs: pd.DataFrame, target: str = "native_reward") -> list[Pair]:
    """Every (cell, cell + ``b``) pair of the runs' settings with ok values of ``target``."""
    out = []
    for setting, rows in runs.groupby("setting", sort=False):
        cells = set(rows["cell"])
        for second in sorted(
            c for c in cells if c.endswith(SECOND_SUFFIX) and c[: -len(SECOND_SUFFIX)] in cells
        ):
            first = second[: -len(SECOND_SUFFIX)]
            values = [rows.loc[rows["cell"] == c, target].dropna().to_numpy(float) for c in (first, second)]
            wide = rows[rows["cell"].isin([first, second])].pivot_table(
                index="seed", columns="cell", values=target, aggfunc="mean"
            )
            both = wide.dropna() if {first, second} <= set(wide.columns) else wide.iloc[0:0]
            d = (both[second] - both[first]).to_numpy(float) if len(both) else np.zeros(0)
            out.append(Pair(str(setting), first, second, *values, d))
    return out


def paired(p: Pair) -> tuple[float, float, float, bool]:
    """A pair's difference (second - first), its standard error and df: paired by seed when both ran
    at least two seeds in common (the seed block removed; df ``n - 1``), else Welch's; and whether
    paired."""
    if len(p.d) >= 2:
        return float(p.d.mean()), float(p.d.std(ddof=1) / np.sqrt(len(p.d))), float(len(p.d) - 1), True
    return (*welch(p.a, p.b), False)


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Difference of means (b - a), Welch's standard error and degrees of freedom."""
    d, se, df = welch_rows(a[None, :], b[None, :])
    return float(d[0]), float(se[0]), float(df[0])


def welch_rows(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`welch` of each row of ``a`` against the same row of ``b`` (studies x seeds)."""
    na, nb = a.shape[1], b.shape[1]
    va, vb = a.var(axis=1, ddof=1) / na, b.var(axis=1, ddof=1) / nb
    se = np.sqrt(va + vb)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(se > 0, (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1)), np.inf)
    return b.mean(axis=1) - a.mean(axis=1), se, df


VERDICTS = ("equivalent", "different", "open")  # a pair's, as codes 0, 1, 2 of pair_verdicts


def pair_verdicts(d, se, df, margin: float, k: int, alpha: float = ALPHA) -> np.ndarray:
    """:func:`pair_verdict` of arrays: the index in :data:`VERDICTS` of each pair's verdict."""
    t90 = stats.t.ppf(1 - alpha, df)
    t95 = stats.t.ppf(1 - alpha / (2 * k), df)
    equivalent = (d - t90 * se > -margin) & (d + t90 * se < margin)
    different = (d - t95 * se > margin) | (d + t95 * se < -margin)
    return np.where(equivalent, 0, np.where(different, 1, 2))


def pair_verdict(d: float, se: float, df: float, margin: float, k: int, alpha: float = ALPHA) -> str:
    """``equivalent`` when the 90% interval of the difference lies inside ± ``margin`` (TOST at
    ``alpha``), ``different`` when its 95% interval, Bonferroni over ``k`` pairs, lies beyond it,
    ``open`` otherwise."""
    return VERDICTS[int(pair_verdicts(np.array([d]), np.array([se]), np.array([df]), margin, k, alpha)[0])]


def pair_table(
    pairs: Sequence[Pair], margin: float, target: str = "native_reward", recipes: pd.DataFrame | None = None
) -> pd.DataFrame:
    """One row per pair: both cells' means, the difference (paired by seed where the seeds are
    shared: :func:`paired`) with its 90% and 95% (Bonferroni) intervals, the TOST p value and the
    pair's verdict against ``margin`` on one difference (a description; the claim's rule reads the
    recipe SD: :mod:`paper_repro.analysis.claims.recipes`). ``recipes``: per (setting, cell) the columns
    P, G, K, mu and rho (a frontier table) for the recipe and rho columns."""
    rows = []
    usable = [len(p.a) >= 2 and len(p.b) >= 2 for p in pairs]  # each side has a seed variance
    tested = sum(usable)
    for p, ok in zip(pairs, usable, strict=True):
        row = {
            "setting": p.setting,
            "first": p.first,
            "second": p.second,
            "target": target,
            "first_mean": p.a.mean() if len(p.a) else NAN,
            "second_mean": p.b.mean() if len(p.b) else NAN,
            "n_first": len(p.a),
            "n_second": len(p.b),
            "margin": margin,
        }
        for side, cell in (("first", p.first), ("second", p.second)):
            row[f"{side}_recipe"], row[f"{side}_rho"] = _recipe(recipes, p.setting, cell)
        if ok:
            d, se, df, was_paired = paired(p)
            t90, t95 = stats.t.ppf(1 - ALPHA, df), stats.t.ppf(1 - ALPHA / (2 * tested), df)
            p_tost = (
                max(stats.t.sf((d + margin) / se, df), stats.t.cdf((d - margin) / se, df)) if se > 0 else NAN
            )
            row |= {
                "difference": d,
                "se": se,
                "df": df,
                "ci90_low": d - t90 * se,
                "ci90_high": d + t90 * se,
                "ci95_low": d - t95 * se,
                "ci95_high": d + t95 * se,
                "p_tost": p_tost,
                "pair_verdict": pair_verdict(d, se, df, margin, tested),
                "paired": was_paired,
            }
        else:
            row["pair_verdict"] = f"not tested: {min(len(p.a), len(p.b))} seeds (needs 2)"
        rows.append(row)
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def _recipe(recipes: pd.DataFrame | None, setting: str, cell: str) -> tuple[str, float]:
    if recipes is None or recipes.empty:
        return "", NAN
    row = recipes[(recipes["setting"] == setting) & (recipes["cell"] == cell)]
    if row.empty:
        return "", NAN
    r = row.iloc[0]
    return f"P{int(r['P'])} G{int(r['G'])} K{int(r['K'])} mu{int(r['mu'])}", float(r["rho"])
