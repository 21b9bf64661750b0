"""The cost model checked on the study it was measured on (``design_cost.csv``, written by ``paper-repro
design --candidates``): per setting and run kind (grid, pilot, fresh), the committed runs' measured
seconds beside the cost model's prediction (:func:`paper_repro.run.cost_model.predicted_seconds`)
fitted on every run, and beside the prediction of the model fitted without that setting's runs (leave
one setting out: the setting is then priced as a setting the study never ran, as a candidate's new
settings are), each with its relative error; and per candidate, those errors weighted by its own
job-seconds (:func:`candidate_errors`), reported beside its minutes in ``design_choices.csv``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from paper_repro.run.cost_model import CostModel, Job, predicted_seconds

ALL = "all"  # the row of every setting's runs together


def cost_check(rows: pd.DataFrame, curves: pd.DataFrame | None, overhead: float) -> pd.DataFrame:
    """Per (setting, role) of the committed ``rows`` (:func:`paper_repro.run.cost_model.committed_rows`),
    and for all of them together: runs, measured job-seconds, the fitted model's and the
    leave-one-setting-out model's predictions and their relative errors (prediction / measured - 1);
    the last row, ``wall``, the study's wall minutes (runs over the model's parallelism, plus
    ``overhead``) as each model prices them, beside the runs' own span plus ``overhead``."""
    model = CostModel.from_runs(rows, curves)
    fitted = predicted_seconds(rows, model, curves)
    left_out = pd.Series(np.nan, index=rows.index)
    for setting in rows["setting"].unique():
        mine = rows["setting"] == setting
        other = CostModel.from_runs(rows[~mine], _without(curves, rows[mine]))
        left_out[mine] = predicted_seconds(rows[mine], other, curves)
    table = rows.assign(fitted=fitted, left_out=left_out)
    parts = []
    for (setting, role), g in table.groupby(["setting", "role"], sort=False):
        parts.append(_row(setting, role, g))
    parts.append(_row(ALL, ALL, table))
    out = pd.DataFrame(parts)
    span = float(rows["seconds_total"].sum()) / model.parallel / 60
    wall = {
        "setting": "wall minutes",
        "role": ALL,
        "runs": len(rows),
        "measured": span + overhead,
        "fitted": float(fitted.sum()) / model.parallel / 60 + overhead,
        "left_out": float(left_out.sum()) / model.parallel / 60 + overhead,
    }
    out = pd.concat([out, pd.DataFrame([wall])], ignore_index=True)
    out["fitted_error"] = out["fitted"] / out["measured"] - 1
    out["left_out_error"] = out["left_out"] / out["measured"] - 1
    return out


def _row(setting: str, role: str, g: pd.DataFrame) -> dict:
    return {
        "setting": setting,
        "role": role,
        "runs": len(g),
        "measured": float(g["seconds_total"].sum()),
        "fitted": float(g["fitted"].sum()),
        "left_out": float(g["left_out"].sum()),
    }


def _without(curves: pd.DataFrame | None, rows: pd.DataFrame) -> pd.DataFrame | None:
    if curves is None:
        return None
    return curves[~curves["run_id"].isin(rows["run_id"])]


ROLES = ("grid", "pilot", "fresh")  # the run kinds a candidate's minutes are split by (its minutes_<role>)


def candidate_errors(
    jobs: Sequence[Job],
    model: CostModel,
    check: pd.DataFrame,
    names: dict[tuple[str, str], str],
    problems: int,
) -> dict[str, float]:
    """A candidate's expected relative error of its minutes: each (setting, role)'s fitted and
    leave-one-setting-out errors of :func:`cost_check`, weighted by the candidate's job-seconds there
    (``jobs`` priced at ``problems`` held-out and gsm problems), over all its runs
    (``minutes_error_fitted``, ``minutes_error_left_out``) and per run kind of :data:`ROLES`
    (``minutes_<role>_error_left_out``, beside its ``minutes_<role>``; NaN where it runs none). A
    setting the study never ran (``names``: (policy, reward system) -> setting name lacks it) takes its
    reward system's leave-one-setting-out error for both: it is priced as that one would be without
    its runs. Each a fraction (prediction / measured - 1)."""
    errors = check.set_index(["setting", "role"])
    sums = {key: np.zeros(3) for key in ("all", *ROLES)}  # job-seconds, x fitted error, x left-out error
    for job in jobs:
        seconds = job.count * model.seconds(job, problems, problems)
        name = names.get((job.policy, job.reward_system))
        if name is not None and (name, job.role) in errors.index:
            row = errors.loc[(name, job.role)]
            f, lo = row["fitted_error"], row["left_out_error"]
        else:
            same = [s for (p, r), s in names.items() if r == job.reward_system]
            rows = [errors.loc[(s, job.role)] for s in same if (s, job.role) in errors.index]
            lo = float(np.mean([r["left_out_error"] for r in rows])) if rows else np.nan
            f = lo
        for key in ("all", job.role):
            if key in sums:
                sums[key] += seconds * np.array([1.0, f, lo])
    out = {
        "minutes_error_fitted": _share(sums["all"], 1),
        "minutes_error_left_out": _share(sums["all"], 2),
    }
    return out | {f"minutes_{role}_error_left_out": _share(sums[role], 2) for role in ROLES}


def _share(sums: np.ndarray, at: int) -> float:
    """The job-seconds-weighted mean error of ``sums`` (seconds, seconds x fitted, seconds x left out)."""
    return float(sums[at] / sums[0]) if sums[0] > 0 else np.nan
