"""Whether small budgets predict the full one (the extrapolation check of the compute curves,
:mod:`paper_repro.analysis.tables.curves`).

**Extrapolation check** (:func:`extrapolation_table`): per (setting, cell) whose ladder reaches C,
the saturating fit on the points <= C / 2 predicts C. **Covered**: 0 lies inside the seed-bootstrap
95% interval of the error (predicted minus the observed mean over seeds at C, both recomputed on each
resample of the seeds, so the observed mean's own seed noise counts); ``inside`` (a description):
the observed mean lies inside the prediction's own interval. NaN with one seed.
:func:`extrapolation_summary` gives per target the median absolute error and the shares.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from paper_repro.analysis.stats.saturating import BOOTSTRAP, RNG_SEED, Curve, interval, ok, saturating
from paper_repro.analysis.stats.verdict import NAN
from paper_repro.analysis.tables.curve_rows import FULL, prepared, targets_of

PILOT_TOP = 0.5  # the extrapolation check fits the points up to C / 2


EXTRAPOLATION_COLUMNS = [
    "stage",
    "setting",
    "cell",
    "target_rho",
    "target",
    "n_points",
    "n_seeds",
    "predicted",
    "pred_lo",
    "pred_hi",
    "observed",
    "error",
    "error_lo",
    "error_hi",
    "abs_error",
    "inside",
    "covered",
    "status",
]


def extrapolate_cell(
    rows: pd.DataFrame, target: str, bootstrap: int = BOOTSTRAP, seed: int = RNG_SEED
) -> dict | None:
    """One (setting, cell): the fit on the points <= :data:`PILOT_TOP` predicting :data:`FULL` (None
    when its ladder does not measure C). ``inside``: the observed mean lies in the prediction's
    interval; ``covered``: 0 lies in the error's interval (both recomputed on each resample of seeds,
    so the observed mean's own seed noise counts too)."""
    curve = Curve.of(rows, target)
    at_full = np.isclose(curve.points, FULL)
    if not at_full.any() or curve.n_seeds == 0:
        return None
    column = curve.values[:, np.flatnonzero(at_full)[0]]
    observed = float(np.nanmean(column))
    x_full = float(curve.x[at_full][0])
    pilot = curve.upto(PILOT_TOP)
    out = {
        "n_points": int(np.isfinite(pilot.summary()[0]).sum()),
        "n_seeds": curve.n_seeds,
        "predicted": NAN,
        "pred_lo": NAN,
        "pred_hi": NAN,
        "observed": observed,
        "error": NAN,
        "error_lo": NAN,
        "error_hi": NAN,
        "abs_error": NAN,
        "inside": NAN,
        "covered": NAN,
    }
    fit = pilot.fit()
    if fit is None:
        return {**out, "status": "no fit: too few points up to C/2"}
    predicted = float(fit(x_full))
    out.update(predicted=predicted, error=predicted - observed, abs_error=abs(predicted - observed))
    picks = pilot.resamples(bootstrap, seed)
    if len(picks) == 0:
        return {**out, "status": "no interval: one seed"}
    draws = pilot.refits(picks)
    predictions = saturating(x_full, *draws.T)
    with np.errstate(invalid="ignore"):
        observed_draws = np.nanmean(column[picks], axis=1)
    low, high = interval(predictions)
    e_low, e_high = interval(predictions - observed_draws)
    out.update(pred_lo=low, pred_hi=high, error_lo=e_low, error_hi=e_high)
    if not (np.isfinite(low) and np.isfinite(e_low)):
        return {**out, "status": "no interval: refits failed"}
    out.update(inside=bool(low <= observed <= high), covered=bool(e_low <= 0 <= e_high))
    return {**out, "status": "ok"}


def extrapolation_table(
    curves: pd.DataFrame,
    targets: Sequence[str] | None = None,
    bootstrap: int = BOOTSTRAP,
    seed: int = RNG_SEED,
) -> pd.DataFrame:
    """Per (setting, cell, target) whose ladder reaches C: the prediction of C from the points <= C/2
    with its seed-bootstrap 95% interval, the observed mean over seeds at C, the error (predicted -
    observed) with its paired interval, ``inside`` (the observed mean in the prediction's interval)
    and ``covered`` (0 in the error's interval); NaN without an interval."""
    curves = prepared(curves)
    out = []
    if not curves.empty:
        for (setting, cell), rows in curves.groupby(["setting", "cell"], sort=False):
            for t in targets_of(ok(rows), targets):
                check = extrapolate_cell(rows, t, bootstrap, seed)
                if check is not None:
                    out.append(
                        {
                            "stage": rows["stage"].iloc[0] if "stage" in rows else "",
                            "setting": setting,
                            "cell": cell,
                            "target_rho": float(rows["target_rho"].mean()),
                            "target": t,
                            **check,
                        }
                    )
    return pd.DataFrame(out, columns=EXTRAPOLATION_COLUMNS)


def extrapolation_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per target: how many cells were checked and predicted, the median absolute error, and over the
    cells with an interval the share covered (0 in the error's paired interval: the rule) and the share
    inside (the observed mean in the prediction's interval, which ignores the observed mean's noise)."""
    columns = [
        "target",
        "n_cells",
        "n_predicted",
        "median_abs_error",
        "n_intervals",
        "share_covered",
        "share_inside",
        "note",
    ]
    out = []
    for t, g in table.groupby("target", sort=False) if len(table) else []:
        predicted = g["abs_error"].dropna()
        covered = g["covered"].dropna().astype(bool)
        inside = g["inside"].dropna().astype(bool)
        statuses = g.loc[g["status"] != "ok", "status"].value_counts()
        note = (
            ""
            if len(covered)
            else "coverage not assessed: " + ", ".join(f"{k} ({v} of {len(g)})" for k, v in statuses.items())
        )
        out.append(
            {
                "target": t,
                "n_cells": len(g),
                "n_predicted": len(predicted),
                "median_abs_error": float(predicted.median()) if len(predicted) else NAN,
                "n_intervals": len(covered),
                "share_covered": float(covered.mean()) if len(covered) else NAN,
                "share_inside": float(inside.mean()) if len(inside) else NAN,
                "note": note,
            }
        )
    return pd.DataFrame(out, columns=columns)
