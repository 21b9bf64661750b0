"""Frontiers: each target against realised rho, per setting, with confidence intervals over seeds.

Reads only result rows (``runs.csv``). A *setting* is one (policy, reward system) pair of a stage;
its rows are the ``ok`` runs with that policy and reward system at the full budget, whichever stage
first asked for them (a run serves every stage that asks for the same experiment).

- :func:`frontier_table`: per setting and cell, the mean of every target over seeds with a 95%
  Student-t interval, the mean realised rho (FLOP and wall-time based) and the number of seeds.
- :func:`optimum_table`: per setting and target, the argmax cell, rho* (its mean realised rho), a
  bootstrap 95% interval on rho* (seeds resampled within each cell), that interval widened half-way
  to the neighbouring cells (the grid's resolution: a grid with cells at 0.50 and 0.70 cannot tell
  0.70 from 0.72), and whether rho* sits at the edge of the setting's grid (a boundary optimum, not
  an interior preference).
- :func:`fit_table`: per setting and target, the constant, log-linear (``a + b log rho``) and
  quadratic (``a + b rho + c rho^2``) fits over the cell means: in-sample RMSE and leave-one-cell-out
  RMSE, and the quadratic's vertex (its estimate of the regime boundary).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from paper_repro.results import METRICS

TARGETS: tuple[str, ...] = METRICS
TARGET_LABELS = {
    "native_reward": "native reward (held-out)",
    "gsm_pass1": "gsm pass@1",
    "math_pass1": "math pass@1",
    "judge_score": "judge score",
}
NUMERIC = (
    "seed", "budget_flops", "target_rho", "predicted_rho", "rho", "rho_time", "C_search", "C_learning",
    "C_reward", "C_total", "P", "G", "K", "mu", "rounds", "steps", *TARGETS,
    *(f"base_{t}" for t in TARGETS), "seconds_search", "seconds_learning", "seconds_reward",
    "seconds_train", "seconds_eval", "seconds_total",
)  # fmt: skip


def numeric(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its number columns parsed (a table's cells are read as text)."""
    frame = frame.copy()
    for column in NUMERIC:
        if column in frame:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def load_runs(path) -> pd.DataFrame:
    """The ``ok`` rows of a runs table, numbers parsed (the table is checked first)."""
    from paper_repro.results import RUN_COLUMNS, ResultTable

    frame = ResultTable(path, RUN_COLUMNS).frame()
    return numeric(frame[frame["status"] == "ok"])


def setting_rows(
    runs: pd.DataFrame, settings: Sequence, budget_kind: str, budget_flops: float
) -> pd.DataFrame:
    """The grid rows of every setting at one budget, labelled with the setting's stage and name (a
    run serves every setting with its policy and reward system, whichever asked for it first).

    A row's cell is the label it was recorded with. A run first asked for as TRL's default cell
    (``cell == "default"``, no target rho) counts as the grid cell with its P, G, K, mu when the
    setting's grid has one, and is left out of the grid otherwise."""
    parts = []
    at_budget = runs[(runs["budget_kind"] == budget_kind) & np.isclose(runs["budget_flops"], budget_flops)]
    for s in settings:
        rows = at_budget[
            (at_budget["model"] == s.policy) & (at_budget["reward_system"] == s.reward_system)
        ].copy()
        rows["stage"], rows["setting"] = s.stage, s.name
        alloc = list(zip(*(rows[k].astype(int) for k in ("P", "G", "K", "mu")), strict=True))
        rows["alloc"] = alloc
        grid = rows[rows["target_rho"].notna()]
        label = dict(zip(grid["alloc"], zip(grid["cell"], grid["target_rho"], strict=True), strict=False))
        rows = rows.loc[np.array([a in label for a in rows["alloc"]], dtype=bool)].copy()
        rows["cell"] = [label[a][0] for a in rows["alloc"]]
        rows["target_rho"] = [label[a][1] for a in rows["alloc"]]
        parts.append(rows.drop(columns="alloc"))
    return pd.concat(parts, ignore_index=True) if parts else runs.iloc[0:0]


# Two-sided 95% Student-t quantiles t(0.975, df) for df = 1..30 (beyond: the normal 1.96).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
         2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
         2.052, 2.048, 2.045, 2.042)  # fmt: skip


def t975(df: int) -> float:
    return _T975[df - 1] if df <= len(_T975) else 1.96


def _ci(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95% Student-t interval; the interval is NaN with fewer than two values."""
    values = values[~np.isnan(values)]
    if len(values) == 0:
        return float("nan"), float("nan"), float("nan")
    mean = float(values.mean())
    if len(values) < 2:
        return mean, float("nan"), float("nan")
    half = t975(len(values) - 1) * float(values.std(ddof=1)) / np.sqrt(len(values))
    return mean, mean - half, mean + half


def frontier_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (stage, setting, cell): allocation, seeds, and mean / CI of every target."""
    out = []
    for (stage, setting, cell), g in rows.groupby(["stage", "setting", "cell"], sort=False):
        rec = {
            "stage": stage,
            "setting": setting,
            "cell": cell,
            "model": g["model"].iloc[0],
            "reward_system": g["reward_system"].iloc[0],
            "P": int(g["P"].iloc[0]),
            "G": int(g["G"].iloc[0]),
            "K": int(g["K"].iloc[0]),
            "mu": int(g["mu"].iloc[0]),
            "target_rho": g["target_rho"].iloc[0],
            "rho": g["rho"].mean(),
            "rho_time": g["rho_time"].mean(),
            "reward_share": (g["C_reward"] / g["C_total"]).mean(),
            "rounds": g["rounds"].mean(),
            "seconds_train": g["seconds_train"].mean(),
            "seeds": int(g["seed"].nunique()),
            "run_ids": " ".join(g["run_id"]),
        }
        for t in TARGETS:
            mean, lo, hi = _ci(g[t].to_numpy(dtype=float))
            rec[t], rec[f"{t}_ci_low"], rec[f"{t}_ci_high"] = mean, lo, hi
            rec[f"{t}_sd"] = float(g[t].std(ddof=1)) if len(g) > 1 else float("nan")
            rec[f"base_{t}"] = g[f"base_{t}"].mean()
        out.append(rec)
    frame = pd.DataFrame(out)
    return frame.sort_values(["stage", "setting", "rho"], kind="stable").reset_index(drop=True)


def bootstrap_rho_star(rows: pd.DataFrame, target: str, n: int = 1000, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of rho* for one setting: resample seeds within each cell, take the
    argmax cell of the resampled means, read its mean realised rho."""
    rng = np.random.default_rng(seed)
    cells = [(g[target].to_numpy(float), g["rho"].mean()) for _, g in rows.groupby("cell")]
    picks = []
    for _ in range(n):
        means = [v[rng.integers(0, len(v), len(v))].mean() for v, _ in cells]
        picks.append(cells[int(np.nanargmax(means))][1])
    return float(np.percentile(picks, 2.5)), float(np.percentile(picks, 97.5))


def optimum_table(rows: pd.DataFrame, frontier: pd.DataFrame, n_boot: int = 1000) -> pd.DataFrame:
    """Per setting and target: the argmax cell, rho* with a bootstrap CI, and boundary flags."""
    out = []
    for (stage, setting), f in frontier.groupby(["stage", "setting"], sort=False):
        r = rows[(rows["stage"] == stage) & (rows["setting"] == setting)]
        for t in TARGETS:
            if f[t].isna().all():
                continue
            best = f.loc[f[t].idxmax()]
            lo, hi = bootstrap_rho_star(r, t, n_boot)
            rhos = np.sort(f["rho"].to_numpy(float))
            below, above = rhos[rhos < lo], rhos[rhos > hi]
            out.append(
                {
                    "stage": stage,
                    "setting": setting,
                    "target": t,
                    "best_cell": best["cell"],
                    "rho_star": best["rho"],
                    "rho_star_ci_low": lo,
                    "rho_star_ci_high": hi,
                    # the grid cannot place rho* closer than half-way to the neighbouring cells
                    "rho_star_grid_low": (lo + below[-1]) / 2 if len(below) else lo,
                    "rho_star_grid_high": (hi + above[0]) / 2 if len(above) else hi,
                    "rho_time_star": best["rho_time"],
                    "best_value": best[t],
                    "base_value": best[f"base_{t}"],
                    "gain": best[t] - best[f"base_{t}"],
                    "reward_share_at_star": best["reward_share"],
                    "boundary": best["rho"] in (f["rho"].min(), f["rho"].max()),
                    "grid_rho_min": f["rho"].min(),
                    "grid_rho_max": f["rho"].max(),
                    "range": f[t].max() - f[t].min(),
                    "mean_seed_sd": f[f"{t}_sd"].mean(),
                }
            )
    return pd.DataFrame(out)


def _fits(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    def design(kind: str, xs: np.ndarray) -> np.ndarray:
        cols = {"constant": [np.ones_like(xs)], "loglinear": [np.ones_like(xs), np.log(xs)],
                "quadratic": [np.ones_like(xs), xs, xs**2]}[kind]  # fmt: skip
        return np.column_stack(cols)

    out: dict[str, float] = {}
    for kind in ("constant", "loglinear", "quadratic"):
        X = design(kind, x)
        coef, *_ = np.linalg.lstsq(X, y, rcond=None)
        out[f"rmse_{kind}"] = float(np.sqrt(np.mean((X @ coef - y) ** 2)))
        errors = []
        for i in range(len(x)):  # leave one cell out
            keep = np.arange(len(x)) != i
            if keep.sum() < X.shape[1]:
                errors = []
                break
            c, *_ = np.linalg.lstsq(design(kind, x[keep]), y[keep], rcond=None)
            errors.append(float((design(kind, x[i : i + 1]) @ c)[0] - y[i]))
        out[f"loo_rmse_{kind}"] = float(np.sqrt(np.mean(np.square(errors)))) if errors else float("nan")
        if kind == "quadratic":
            out["quadratic_vertex"] = float(-coef[1] / (2 * coef[2])) if coef[2] != 0 else float("nan")
            out["quadratic_curvature"] = float(coef[2])
    return out


def fit_table(frontier: pd.DataFrame) -> pd.DataFrame:
    """Per setting and target: constant / log-linear / quadratic fits of the cell means on rho."""
    out = []
    for (stage, setting), f in frontier.groupby(["stage", "setting"], sort=False):
        f = f.dropna(subset=["rho"])
        for t in TARGETS:
            g = f.dropna(subset=[t])
            if len(g) < 3:
                continue
            fits = _fits(g["rho"].to_numpy(float), g[t].to_numpy(float))
            best = min(("loglinear", "quadratic"), key=lambda k: fits[f"loo_rmse_{k}"])
            out.append({"stage": stage, "setting": setting, "target": t, "cells": len(g), **fits,
                        "best_nontrivial_fit": best})  # fmt: skip
    return pd.DataFrame(out)
