"""Compute curves (``curves.csv``): each cell's metric against log C, the best allocation and the best
policy size at each budget, and whether small budgets predict the full one.

A row of ``curves.csv`` is one run at one point of the budget ladder (a multiple of the profile's full
budget C; :data:`paper_repro.common.results.CURVE_COLUMNS`). Only ``ok`` rows are measurements; an
``infeasible`` point (a budget that cannot buy one round) is named, never imputed. Every rule below is
fixed in code before any table is read.

**The saturating fit** per (setting, cell, target) (:func:`fit_table`; the form, its fit and when its
asymptote is identified: :mod:`paper_repro.analysis.stats.saturating`).

**rho*(C)** (:func:`rho_star_table`): per setting, budget point and target, the cells that could be
best at 95% among the cells measured there: the study's own decision
(:func:`paper_repro.analysis.stats.optima.best_set`: Gupta's subset, Bonferroni, each cell's seed variance,
the recipe effect ``recipe_sd`` allowed for), with ``best_rhos`` each best cell's **measured** mean rho
spent up to that point (``best_target_rhos`` its recipe's target). A cell infeasible at the point is
left out and named (``infeasible_cells``).

**size*(C)** (:func:`size_star_table`): per point and target, over stage A's (policy, cell) pairs at
equal FLOPs, each pair one "cell" of the same decision; ``best_sizes`` the policies among the pairs
that could be best (smallest first).

**Leaving the base policy** (:func:`left_base`): a cell has left the base policy at a point when
every one of its runs there has taken an optimizer step (where ``steps`` is recorded) and its mean
change from the base policy's value (``base_<target>``, per seed) is at least the margin (the
profile's ``margins.gain``, 0.02 native reward: the smallest change the study calls a gain) and
beyond its seed noise (a one-sample t test at 5%, two-sided, where it has two seeds). Below it the
cells still sit at (or within noise of) the base policy, so a comparison of cells there compares
the base policy with itself; the budget claims read no point below it.

**Extrapolation check**: whether the points up to C / 2 predict C
(:mod:`paper_repro.analysis.tables.extrapolation`). The rows as read: :mod:`paper_repro.analysis.tables.curve_rows`.

The claims read from the curves (does the best allocation move: :mod:`paper_repro.analysis.claims.curves`;
does the largest policy win at the top, and by more as the budget grows: :mod:`paper_repro.analysis.claims.sizes`); the figures :mod:`paper_repro.analysis.figures.curves`.
:func:`curve_analysis` builds every table, on the grid's curves (:func:`grid_curves`: the grid runs'
rows, labelled per setting, with the base policy's values).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from paper_repro.analysis.stats.best_sets import DEFAULT
from paper_repro.analysis.stats.optima import ALPHA, Cells, best_set
from paper_repro.analysis.stats.saturating import (
    BOOTSTRAP,
    RNG_SEED,
    Curve,
    free_parameters,
    identification,
    interval,
    lack_of_fit,
    ok,
)
from paper_repro.analysis.stats.verdict import NAN
from paper_repro.analysis.tables.curve_rows import FULL, prepared, size_order, targets_of
from paper_repro.analysis.tables.extrapolation import extrapolation_summary, extrapolation_table
from paper_repro.config import Margins


def fit_cell(rows: pd.DataFrame, target: str, bootstrap: int = BOOTSTRAP, seed: int = RNG_SEED) -> dict:
    """One (setting, cell)'s fit of ``target`` over ``rows``: the fit table's columns after the
    identity (see :func:`fit_table`)."""
    curve = Curve.of(rows, target)
    mean = curve.summary()[0]
    out = {
        "A": NAN,
        "A_lo": NAN,
        "A_hi": NAN,
        "C_mid": NAN,
        "C_mid_lo": NAN,
        "C_mid_hi": NAN,
        "B": NAN,
        "status": "no fit",
        "reason": "",
        "A_fit": NAN,
        "R0": curve.base,
        "R0_fixed": bool(np.isfinite(curve.base)),
        "C_mid_point": NAN,
        "rmse": NAN,
        "p_lack_of_fit": NAN,
        "n_points": int(np.isfinite(mean).sum()),
        "n_seeds": curve.n_seeds,
    }
    fit = curve.fit() if curve.n_seeds else None
    if fit is None:
        need = free_parameters(curve.r0())
        out["reason"] = (
            f"fewer than {need} points (the free parameters)"
            if out["n_points"] < need
            else ("the optimiser did not converge")
        )
        return out
    draws = curve.refits(curve.resamples(bootstrap, seed))
    a_low, a_high = interval(draws[:, 0]) if len(draws) else (NAN, NAN)
    m_low, m_high = interval(draws[:, 1]) if len(draws) else (NAN, NAN)
    flops_per_point = 10**curve.x / curve.points
    p_lack = lack_of_fit(fit, curve)
    why = identification(fit, curve, a_low, a_high, p_lack)
    has = np.isfinite(mean)
    out.update(
        A_lo=a_low,
        A_hi=a_high,
        C_mid=fit.C_mid,
        C_mid_lo=10**m_low,
        C_mid_hi=10**m_high,
        B=fit.B,
        A_fit=fit.A,
        R0=fit.R0,
        C_mid_point=fit.C_mid / float(np.median(flops_per_point)),
        rmse=float(np.sqrt(np.mean((fit(curve.x[has]) - mean[has]) ** 2))),
        p_lack_of_fit=p_lack,
        status="not identified" if why else "identified",
        reason="; ".join(why),
    )
    if fit.log_mid < curve.x[has].min():
        early = "C_mid below the smallest point: the gain came before the ladder"
        out["reason"] = "; ".join([*why, early + ("" if why else ", only A is pinned")])
    if not why:
        out["A"] = fit.A
    return out


def fit_table(
    curves: pd.DataFrame,
    targets: Sequence[str] | None = None,
    bootstrap: int = BOOTSTRAP,
    seed: int = RNG_SEED,
) -> pd.DataFrame:
    """Per (setting, cell, target): the saturating fit over all seeds' ok rows and its status by the
    rule in the module docstring. Columns: ``stage, setting, cell, target_rho, target, A, A_lo, A_hi,
    C_mid, C_mid_lo, C_mid_hi`` (FLOPs), ``B, status`` (identified, not identified, no fit),
    ``reason, A_fit`` (the fitted asymptote, a description), ``R0, R0_fixed`` (the base policy's value
    given, or fitted), ``C_mid_point`` (C_mid over the full budget), ``rmse`` (of the point means),
    ``p_lack_of_fit, n_points, n_seeds``."""
    columns = [
        "stage",
        "setting",
        "cell",
        "target_rho",
        "target",
        "A",
        "A_lo",
        "A_hi",
        "C_mid",
        "C_mid_lo",
        "C_mid_hi",
        "B",
        "status",
        "reason",
        "A_fit",
        "R0",
        "R0_fixed",
        "C_mid_point",
        "rmse",
        "p_lack_of_fit",
        "n_points",
        "n_seeds",
    ]
    curves = prepared(curves)
    out = []
    if not curves.empty:
        for (setting, cell), rows in curves.groupby(["setting", "cell"], sort=False):
            for t in targets_of(ok(rows), targets):
                out.append(
                    {
                        "stage": rows["stage"].iloc[0] if "stage" in rows else "",
                        "setting": setting,
                        "cell": cell,
                        "target_rho": float(rows["target_rho"].mean()),
                        "target": t,
                        **fit_cell(rows, t, bootstrap, seed),
                    }
                )
    return pd.DataFrame(out, columns=columns)


# ---------------------------------------------------------------------------------------- leaving the base policy


def left_base(rows: pd.DataFrame, target: str, margin: float = DEFAULT.gain) -> tuple[bool, str]:
    """Whether every cell of ``rows`` (one frontier at one point, any status) has left the base
    policy for ``target`` (module docstring), and, when not, which cells have not and why."""
    from scipy import stats

    measured = ok(rows).dropna(subset=[target])
    missing = sorted(set(rows["cell"].astype(str)) - set(measured["cell"].astype(str)))
    stuck = [f"{c} not measured" for c in missing]
    for cell, g in measured.groupby("cell", sort=True):
        steps = g["steps"].dropna() if "steps" in g else pd.Series(dtype=float)
        if len(steps) and steps.min() < 1:
            stuck.append(f"{cell} has a run with no optimizer step")
            continue
        base = f"base_{target}"
        change = (g[target] - g[base]).dropna().to_numpy(float) if base in g else np.zeros(0)
        if len(change) == 0:
            stuck.append(f"{cell} has no base-policy value")
            continue
        mean = float(change.mean())
        se = float(change.std(ddof=1) / np.sqrt(len(change))) if len(change) >= 2 else 0.0
        beyond = (
            len(change) < 2
            or (se > 0 and abs(mean) / se > stats.t.ppf(0.975, len(change) - 1))
            or (se == 0 and mean != 0)
        )
        if abs(mean) < margin or not beyond:
            stuck.append(f"{cell} {mean:+.3f} from base")
    return not stuck, ", ".join(stuck)


# ---------------------------------------------------------------------------------------- best sets per point


def _rhos_words(values) -> str:
    return " ".join(f"{v:.3f}" for v in values)


def _best_row(rows: pd.DataFrame, target: str, tau: float, alpha: float, noun: str = "cell") -> dict | None:
    """The cells of ``rows`` (one point, any status) that could be best for ``target`` among the
    measured ones, and the ones infeasible there."""
    cells = Cells.of(ok(rows), target)
    if cells.k == 0:
        return None
    keep = best_set(cells, tau, alpha)
    names = np.array(cells.names, dtype=object)
    targets = ok(rows).groupby("cell")["target_rho"].mean()
    infeasible = sorted(
        set(rows.loc[rows["status"].astype(str) == "infeasible", "cell"].astype(str)) - set(names)
    )
    top = int(np.argmax(cells.mean))
    notes = []
    if infeasible:
        notes.append(f"the feasible {noun}s only ({' '.join(infeasible)} infeasible)")
    if cells.pooled()[1] == 0:
        notes.append(f"no seed replication: every {noun} could be best")
    return {
        "best_cells": " ".join(names[keep]),
        "best_rhos": _rhos_words(cells.rho[keep]),
        "best_target_rhos": _rhos_words(targets.reindex(names[keep]).to_numpy(float)),
        "argmax_cell": names[top],
        "argmax_mean": float(cells.mean[top]),
        "n_cells": cells.k,
        "n_seeds": int(ok(rows)["seed"].nunique()),
        "cells": " ".join(names),
        "cell_rhos": _rhos_words(cells.rho),
        "infeasible_cells": " ".join(infeasible),
        "note": "; ".join(notes),
    }


RHO_STAR_COLUMNS = [
    "stage",
    "setting",
    "point",
    "point_flops",
    "target",
    "best_cells",
    "best_rhos",
    "best_target_rhos",
    "argmax_cell",
    "argmax_mean",
    "n_cells",
    "n_seeds",
    "cells",
    "cell_rhos",
    "infeasible_cells",
    "note",
]


def rho_star_table(
    curves: pd.DataFrame,
    recipe_sd: float = 0.0,
    targets: Sequence[str] | None = None,
    alpha: float = ALPHA,
) -> pd.DataFrame:
    """rho*(C): per setting, point and target, the cells that could be best at ``1 - alpha``.
    ``best_rhos``: their measured mean rho spent up to the point (``best_target_rhos``: their recipes'
    targets); ``cells``, ``cell_rhos``: every cell measured there; ``infeasible_cells``: left out."""
    curves = prepared(curves)
    out = []
    if not curves.empty:
        for setting, rows in curves.groupby("setting", sort=False):
            for point, at in rows.groupby("point", sort=True):
                for t in targets_of(ok(at), targets):
                    best = _best_row(at, t, recipe_sd, alpha)
                    if best is not None:
                        out.append(
                            {
                                "stage": at["stage"].iloc[0] if "stage" in at else "",
                                "setting": setting,
                                "point": point,
                                "point_flops": float(at["point_flops"].mean()),
                                "target": t,
                                **best,
                            }
                        )
    return pd.DataFrame(out, columns=RHO_STAR_COLUMNS)


def pairs(curves: pd.DataFrame) -> pd.DataFrame:
    """Stage A's rows with each (policy, cell) pair as its own ``cell`` ("M:r50") and ``size`` its
    policy."""
    if not {"stage", "model", "cell"} <= set(curves.columns):
        return curves.iloc[0:0].assign(size=pd.Series(dtype=object))
    rows = curves[curves["stage"].astype(str) == "A"]
    return rows.assign(
        size=rows["model"].astype(str), cell=rows["model"].astype(str) + ":" + rows["cell"].astype(str)
    )


SIZE_STAR_COLUMNS = [
    "point",
    "point_flops",
    "target",
    "best_pairs",
    "best_sizes",
    "argmax_pair",
    "argmax_size",
    "argmax_mean",
    "n_pairs",
    "n_seeds",
    "infeasible_pairs",
    "note",
]


def size_star_table(
    curves: pd.DataFrame,
    recipe_sd: float = 0.0,
    targets: Sequence[str] | None = None,
    sizes: Sequence[str] | None = None,
    alpha: float = ALPHA,
) -> pd.DataFrame:
    """size*(C): per point and target, stage A's (policy, cell) pairs that could be best at equal
    FLOPs (each pair one cell of :func:`best_set`) and the policy sizes among them, smallest first
    (``sizes``: the labels in order; default :func:`size_order`)."""
    rows = pairs(prepared(curves))
    out = []
    if not rows.empty:
        found = size_order(rows["size"])
        order = [*sizes, *(s for s in found if s not in sizes)] if sizes is not None else found
        for point, at in rows.groupby("point", sort=True):
            for t in targets_of(ok(at), targets):
                best = _best_row(at, t, recipe_sd, alpha, "pair")
                if best is None:
                    continue
                chosen = best["best_cells"].split()
                found = {c.split(":")[0] for c in chosen}
                out.append(
                    {
                        "point": point,
                        "point_flops": float(at["point_flops"].mean()),
                        "target": t,
                        "best_pairs": best["best_cells"],
                        "best_sizes": " ".join(s for s in order if s in found),
                        "argmax_pair": best["argmax_cell"],
                        "argmax_size": best["argmax_cell"].split(":")[0],
                        "argmax_mean": best["argmax_mean"],
                        "n_pairs": best["n_cells"],
                        "n_seeds": best["n_seeds"],
                        "infeasible_pairs": best["infeasible_cells"],
                        "note": best["note"],
                    }
                )
    return pd.DataFrame(out, columns=SIZE_STAR_COLUMNS)


# ---------------------------------------------------------------------------------------- entry point


@dataclass
class CurveAnalysis:
    """The curve analysis' tables (the figures that draw them: :mod:`paper_repro.analysis.figures.curves`)."""

    fits: pd.DataFrame
    rho_star: pd.DataFrame
    size_star: pd.DataFrame
    extrapolation: pd.DataFrame
    extrapolation_summary: pd.DataFrame
    recipe_sd: float = NAN


def curve_recipe_sd(
    curves: pd.DataFrame, margins: Margins = DEFAULT, recipe_sd: float | None = None
) -> float:
    """The recipe effect the best sets allow for: ``recipe_sd`` when given, else the margins', else the
    one the curves' full-budget points show for the native reward (the REML recipe SD,
    :func:`paper_repro.analysis.stats.mixed.recipe_reml`, over every setting at point 1; 0 where it
    cannot be separated)."""
    if recipe_sd is not None:
        return float(recipe_sd)
    if margins.recipe_sd is not None:
        return float(margins.recipe_sd)
    rows = ok(prepared(curves))
    if rows.empty or "point" not in rows:
        return 0.0
    from paper_repro.analysis.stats.mixed import recipe_reml

    full = rows[np.isclose(rows["point"], FULL)]
    if "native_reward" not in full:
        return 0.0
    tau = recipe_reml(full, "native_reward", interval=False).tau
    return float(tau) if np.isfinite(tau) else 0.0


def curve_analysis(
    curves: pd.DataFrame,
    margins: Margins = DEFAULT,
    recipe_sd: float | None = None,
    *,
    shared: Mapping[str, str] | None = None,
    sizes: Sequence[str] | None = None,
    targets: Sequence[str] | None = None,
    bootstrap: int = BOOTSTRAP,
    seed: int = RNG_SEED,
) -> CurveAnalysis:
    """Every table of the curve analysis of ``curves`` (rows of ``curves.csv``; numbers may be text).
    ``recipe_sd``: the recipe effect the best sets allow for (:func:`curve_recipe_sd`); ``shared``:
    settings that are another's runs (counted once); ``sizes``: stage A's policy labels smallest
    first. Empty ``curves``: empty tables. Its figures: :mod:`paper_repro.analysis.figures.curves`."""
    curves = prepared(curves)
    distinct = curves[~curves["setting"].isin(list(shared or {}))] if "setting" in curves else curves
    tau = curve_recipe_sd(distinct, margins, recipe_sd)
    fits = fit_table(curves, targets, bootstrap, seed)
    rho_star = rho_star_table(curves, tau, targets)
    size_star = size_star_table(curves, tau, targets, sizes)
    extrapolation = extrapolation_table(curves, targets, bootstrap, seed)
    return CurveAnalysis(fits, rho_star, size_star, extrapolation, extrapolation_summary(extrapolation), tau)
