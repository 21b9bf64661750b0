"""**RACE+** (our addition; :func:`plus_pick`). The same first-fraction pilots, read along their budget
ladders: each is evaluated at the ladder's points below its budget (on cpu-tiny a pilot at C/2 at C/8
and C/4) as well as at its own. Per cell, the saturating compute curve of
:mod:`paper_repro.analysis.tables.curves` (R0 fixed at the base policy's native reward) is fitted to every
pilot seed's points and evaluated at the full budget C; RACE+ picks the cell of the largest
prediction. A cell whose curve cannot be fitted is no candidate; with none, RACE+ has no pick. Both
picks run at C on the fresh seeds beside TRL's default. :func:`plus_table` scores the three against
the full grid, per distinct setting: the **regret** (the full grid's best cell's mean over the grid
seeds minus the pick's mean over the fresh seeds) with a seed-bootstrap interval
(:func:`regret_interval`), whether the pick lies in the full grid's best set, the pilots' share of the
grid's FLOPs, and each cell's prediction at C beside the grid's observed mean there; and one row
across the settings (:func:`plus_summary`). Descriptions: no claim is decided from them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from paper_repro.analysis.stats.verdict import NAN
from paper_repro.analysis.tables.race import (
    BOOTSTRAP,
    DEFAULT_THRESHOLDS,
    RegimeThresholds,
    best_cell,
    cell_means,
    full_side,
    means_text,
    spearman,
)

PREDICTION_COLUMNS = [
    "cell",
    "rho",
    "n_points",
    "n_seeds",
    "pilot_point",
    "pilot_mean",
    "predicted",
    "pred_lo",
    "pred_hi",
    "A",
    "C_mid",
    "B",
    "R0",
    "candidate",
    "status",
]
POINT_COLUMNS = ["run_id", "point", "point_flops", "native_reward", "status"]


def pilot_points(pilot_rows: pd.DataFrame, pilot_curves: pd.DataFrame, full_flops: float) -> pd.DataFrame:
    """The points of each pilot run's compute curve, as ``curves.csv`` rows (``point`` a multiple of the
    full budget ``full_flops``): its rows there whose run is one of ``pilot_rows`` (the ladder's points
    below the pilot budget and the pilot budget itself), and its row of ``pilot_rows`` as its point at
    its own budget where ``curves.csv`` has none (a run recorded without its curve). Each labelled with
    its run's ``cell`` and ``seed`` as ``pilot_rows`` name them (a run may serve two settings)."""
    from paper_repro.analysis.tables.curve_rows import prepared

    rows = pilot_rows
    if "status" in rows:
        rows = rows[rows["status"].astype(str) == "ok"]
    labels = rows[["run_id", "cell", "seed"]].drop_duplicates("run_id")
    budget = pd.to_numeric(rows["budget_flops"], errors="coerce")
    own = pd.DataFrame(
        {
            "run_id": rows["run_id"],
            "point": budget / full_flops,
            "point_flops": budget,
            "native_reward": rows["native_reward"],
            "status": "ok",
        }
    )
    parts = [own]
    if len(pilot_curves) and set(POINT_COLUMNS) <= set(pilot_curves.columns):
        curves = pilot_curves[pilot_curves["run_id"].isin(set(labels["run_id"]))]
        parts.insert(0, curves[POINT_COLUMNS])
    points = prepared(pd.concat(parts, ignore_index=True))
    points = points.drop_duplicates(["run_id", "point"], keep="first")  # curves.csv's own rows first
    return points.merge(labels, on="run_id", how="inner")


def plus_pick(
    pilot_rows: pd.DataFrame,
    pilot_curves: pd.DataFrame,
    base: float,
    full_flops: float,
    bootstrap: int | None = None,
    seed: int = 0,
) -> tuple[str | None, pd.DataFrame]:
    """RACE+'s pick from one setting's pilots at one pilot budget (``pilot_rows``: their ok rows of
    ``runs.csv``; ``pilot_curves``: rows of ``curves.csv``, any runs'), and the predictions behind it.

    Per cell, the saturating curve of :mod:`paper_repro.analysis.tables.curves` (:func:`~paper_repro.analysis.stats.saturating.fit_saturating`,
    on the per-point seed means weighted by their seed counts; R0 fixed to ``base``, the base
    policy's native reward, or free where it is NaN) is fitted to every pilot seed's points
    (:func:`pilot_points`: the ladder's points below the pilot budget and the pilot budget) and
    evaluated at the full budget ``full_flops`` (C, the multiple 1.0). The pick is the cell of the
    largest prediction. A cell whose fit fails (fewer distinct points than free parameters, the
    optimiser failed, a non-finite prediction) is **not a candidate**: it keeps its row with the
    reason in ``status`` and is never picked. No candidate: no pick (None).

    The table (:data:`PREDICTION_COLUMNS`, cells in order of realised rho): the points and seeds
    fitted, the pilot budget's point and mean, the prediction at C with a 95% percentile interval
    over ``bootstrap`` resamples of the pilot seeds (:data:`paper_repro.analysis.stats.saturating.BOOTSTRAP`
    when None; 0: none; NaN with one seed), the fitted parameters, and ``candidate``."""
    from paper_repro.analysis.stats import saturating as sat

    bootstrap = sat.BOOTSTRAP if bootstrap is None else bootstrap
    points = pilot_points(pilot_rows, pilot_curves, full_flops).assign(base_native_reward=base)
    x_full = float(np.log10(full_flops))
    rho = pilot_rows.groupby("cell")["rho"].mean() if "rho" in pilot_rows else pd.Series(dtype=float)
    out = []
    for cell, rows in points.groupby("cell", sort=False):
        out.append(
            {
                "cell": str(cell),
                "rho": float(rho.get(cell, NAN)),
                **_predict_cell(sat.Curve.of(rows, "native_reward"), x_full, bootstrap, seed),
            }
        )
    table = pd.DataFrame(out, columns=PREDICTION_COLUMNS)
    table = table.sort_values("rho", kind="stable", na_position="last").reset_index(drop=True)
    table["candidate"] = table["candidate"].astype(bool)
    candidates = table[table["candidate"]]
    pick = str(candidates.loc[candidates["predicted"].idxmax(), "cell"]) if len(candidates) else None
    return pick, table


def _predict_cell(curve, x_full: float, bootstrap: int, seed: int) -> dict:
    """One cell's pilot curve (a :class:`paper_repro.analysis.stats.saturating.Curve`) fitted and evaluated at
    ``x_full = log10 C``: the columns of :data:`PREDICTION_COLUMNS` but the cell's."""
    from paper_repro.analysis.stats import saturating as sat

    mean, _ = curve.summary()
    measured = np.isfinite(mean)
    top = int(np.flatnonzero(measured)[-1]) if measured.any() else None
    out = {
        "n_points": int(measured.sum()),
        "n_seeds": curve.n_seeds,
        "pilot_point": float(curve.points[top]) if top is not None else NAN,
        "pilot_mean": float(mean[top]) if top is not None else NAN,
        "predicted": NAN,
        "pred_lo": NAN,
        "pred_hi": NAN,
        "A": NAN,
        "C_mid": NAN,
        "B": NAN,
        "R0": NAN,
        "candidate": False,
    }
    needed = sat.free_parameters(curve.r0())
    if out["n_points"] < needed:
        r0 = "R0 fixed to the base policy's" if curve.r0() is not None else "R0 free: no base policy value"
        return {**out, "status": f"no fit: {out['n_points']} point(s), the fit needs {needed} ({r0})"}
    fit = curve.fit()
    predicted = float(fit(x_full)) if fit is not None else NAN
    if not np.isfinite(predicted):
        return {**out, "status": "no fit: the optimiser failed"}
    out.update(predicted=predicted, A=fit.A, C_mid=fit.C_mid, B=fit.B, R0=fit.R0, candidate=True)
    picks = curve.resamples(bootstrap, seed)
    if len(picks) == 0:
        return {**out, "status": "ok; no interval: one seed" if bootstrap else "ok"}
    draws = sat.saturating(x_full, *curve.refits(picks).T)
    good = draws[np.isfinite(draws)]
    if len(good) < sat.MIN_CONVERGED * len(draws):
        return {**out, "status": "ok; no interval: refits failed"}
    low, high = np.percentile(good, [2.5, 97.5])
    return {**out, "pred_lo": float(low), "pred_hi": float(high), "status": "ok"}


def regret_interval(
    best: np.ndarray, pick: np.ndarray, draws: int = BOOTSTRAP, seed: int = 0
) -> tuple[float, float, float, str]:
    """The regret of a pick, ``mean(best) - mean(pick)`` (``best``: the full grid's best cell's native
    reward on the grid seeds; ``pick``: the pick's on the fresh seeds), with its 95% percentile
    bootstrap interval (``draws`` resamples of each side's seeds, independently; fixed RNG ``seed``)
    and a note: NaNs and why with fewer than two seeds on a side (the value alone with one each)."""
    best, pick = (np.asarray(v, float) for v in (best, pick))
    best, pick = best[np.isfinite(best)], pick[np.isfinite(pick)]
    if len(pick) == 0:
        return NAN, NAN, NAN, "no fresh-seed result of the pick"
    if len(best) == 0:
        return NAN, NAN, NAN, "no grid result of the best cell"
    value = float(best.mean() - pick.mean())
    if len(best) < 2 or len(pick) < 2:
        return (
            value,
            NAN,
            NAN,
            (
                f"no interval: {len(best)} grid seed(s) of the best cell and {len(pick)} fresh "
                "seed(s) of the pick; the bootstrap needs 2 on each side"
            ),
        )
    rng = np.random.default_rng(seed)
    diffs = _resampled_means(best, draws, rng) - _resampled_means(pick, draws, rng)
    low, high = np.percentile(diffs, [2.5, 97.5])
    return value, float(low), float(high), ""


def _resampled_means(values: np.ndarray, draws: int, rng: np.random.Generator, shape=()) -> np.ndarray:
    """Means of ``values`` resampled with replacement, ``(draws, *shape)`` of them."""
    return values[rng.integers(0, len(values), size=(draws, *shape, len(values)))].mean(axis=-1)


PLUS_METHODS = {"race": "RACE's pick", "plus": "RACE+'s pick", "default": "TRL's default allocation"}


@dataclass(frozen=True)
class PlusTables:
    """RACE+ beside RACE and TRL's default (:func:`plus_table`): ``settings``, one row per distinct
    setting (``race_plus.csv``); ``cells``, each pilot cell's prediction at C beside the full grid's
    observed mean there (``race_plus_cells.csv``); ``summary``, one row across the settings
    (``race_plus_summary.csv``)."""

    settings: pd.DataFrame
    cells: pd.DataFrame
    summary: pd.DataFrame


def picks(
    pilot_rows: pd.DataFrame, pilot_curves: pd.DataFrame, full_flops: float, seed: int = 0
) -> tuple[str | None, str | None, pd.DataFrame]:
    """RACE's pick (the cell of the best pilot mean, :func:`best_cell`) and RACE+'s (:func:`plus_pick`,
    R0 fixed at the base policy's native reward the pilot rows carry, fitted where they carry none),
    with RACE+'s predictions, from one setting's first-fraction pilot rows (those with a native reward
    count). The study names the cells it runs on the fresh seeds here and the analysis scores the
    same, so the two cannot disagree. No pilot with a native reward: no picks."""
    rows = pilot_rows.dropna(subset=["native_reward"])
    if rows.empty:
        return None, None, pd.DataFrame(columns=PREDICTION_COLUMNS)
    plus, predictions = plus_pick(rows, pilot_curves, pilot_base(rows), full_flops, seed=seed)
    return str(best_cell(rows).name), plus, predictions


def pilot_base(pilot_rows: pd.DataFrame) -> float:
    """The base policy's native reward the pilot rows carry (RACE+'s R0), NaN where they carry none."""
    column = "base_native_reward"
    if column not in pilot_rows:
        return NAN
    base = pd.to_numeric(pilot_rows[column], errors="coerce").dropna()
    return float(base.iloc[0]) if len(base) else NAN


def plus_table(
    full_rows: pd.DataFrame,
    pilots: dict[float, pd.DataFrame],
    curves: pd.DataFrame,
    fresh_rows: pd.DataFrame,
    fresh_defaults: pd.DataFrame,
    shared: dict[str, str],
    full_flops: float,
    recipe_sd: float = 0.0,
    thresholds: RegimeThresholds = DEFAULT_THRESHOLDS,
    draws: int = BOOTSTRAP,
    seed: int = 0,
) -> PlusTables:
    """RACE's pick (the pilots' best mean), RACE+'s pick (:func:`plus_pick`: the best prediction at C
    of the pilots' curves) and TRL's default, each against the full grid, per distinct setting (a
    setting in ``shared``, another's runs, is left out).

    ``full_rows``: the full grid at C on the grid seeds; ``pilots``: pilot fraction -> its pilot rows,
    as :func:`race_table` takes them (both picks are made from the first fraction's; every fraction's
    FLOPs count in ``all_pilot_flops_fraction``); ``curves``: ``curves.csv`` rows (the pilots' among
    them, found by run id); ``fresh_rows``/``fresh_defaults``: the grid's cells and TRL's default at C
    on the fresh seeds; ``full_flops``: C.

    The **regret** of a method is the full grid's best cell's mean native reward over the grid seeds
    (the best cell named by its mean over them, :func:`best_cell`) minus the method's pick's mean over
    the fresh seeds, with a 95% bootstrap interval (:func:`regret_interval`: both sides' seeds resampled
    independently, ``draws`` times, fixed ``seed``). The best cell is chosen on the same seeds its mean
    is taken over, so that mean is biased up (the winner's curse) and a regret tends to read high by
    the same amount for every method: compare methods, not the level. ``*_in_best_set``: the pick is
    one of the cells that could be best on the full grid at 95% (``full_best_cells``, as
    :func:`race_table`'s); TRL's default counts as the grid cell of its allocation (P, G, K, mu), if any."""
    out, cells, samples = [], [], []
    pilot_rows = next(iter(pilots.values()), full_rows.iloc[0:0])
    all_pilot_rows = pd.concat(list(pilots.values())) if pilots else pilot_rows
    for (stage, setting), fr in full_rows.groupby(["stage", "setting"], sort=False):
        if setting in shared or fr["native_reward"].isna().all():
            continue
        mine = _of_setting(stage, setting)
        pr = mine(pilot_rows).dropna(subset=["native_reward"])
        if pr.empty:
            continue
        full = full_side(fr, thresholds, recipe_sd)
        race_pick, plus, predictions = picks(pr, curves, full_flops, seed)  # as the study named them
        observed = cell_means(fr)
        predicted = predictions.set_index("cell")["predicted"].dropna()
        f, d = mine(fresh_rows), mine(fresh_defaults)
        default_cell = _default_cell(d, fr)
        best_values = fr.loc[fr["cell"].astype(str) == str(full["full_best_cell"]), "native_reward"]
        fresh = {
            "race": f.loc[f["cell"].astype(str) == race_pick].groupby("seed")["native_reward"].mean(),
            "plus": f.loc[f["cell"].astype(str) == str(plus)].groupby("seed")["native_reward"].mean(),
            "default": d.groupby("seed")["native_reward"].mean(),
        }
        best_set = str(full["full_best_cells"]).split()
        rec = {
            "stage": stage,
            "setting": setting,
            "pilot_fraction": _fraction(pr, full_flops),
            "pilot_seeds": int(pr["seed"].nunique()),
            "base_native_reward": pilot_base(pr),
            "race_pick": race_pick,
            "plus_pick": plus or "",
            "plus_candidates": int(predictions["candidate"].sum()),
            "plus_no_fit": " ".join(predictions.loc[~predictions["candidate"], "cell"]),
            "default_cell": default_cell,
            "full_best_cell": full["full_best_cell"],
            "full_best_native_reward": full["oracle_native_reward"],
            "full_best_cells": full["full_best_cells"],
            "full_seeds": full["full_seeds"],
        }
        picked = {"race": race_pick, "plus": plus, "default": default_cell}
        rec.update(_regrets(best_values.to_numpy(float), fresh, picked, best_set, draws, seed))
        samples += [
            (setting, key, best_values.to_numpy(float), v.to_numpy(float)) for key, v in fresh.items()
        ]
        rec.update(_pilot_columns(pr, fr, mine(all_pilot_rows), predicted, observed))
        rec["recipe_sd"] = recipe_sd
        out.append(rec)
        cells += _cell_rows(stage, setting, fr, predictions, observed, picked, best_set)
    settings = pd.DataFrame(out)
    return PlusTables(settings, pd.DataFrame(cells), plus_summary(settings, samples, draws, seed))


def _regrets(
    best: np.ndarray,
    fresh: dict[str, pd.Series],
    picked: dict[str, str | None],
    best_set: list[str],
    draws: int,
    seed: int,
) -> dict:
    """Per method (``fresh``: its mean native reward per fresh seed; ``picked``: its cell), its fresh
    seeds and mean, its regret against the full grid's best cell's values ``best`` with the 95%
    interval and note (:func:`regret_interval`), and whether its pick is in the full grid's best set."""
    rec = {}
    for key, values in fresh.items():
        v, low, high, note = regret_interval(best, values.to_numpy(float), draws, seed)
        if key == "plus" and picked["plus"] is None:
            note = "RACE+ has no pick: no pilot cell's curve could be fitted"
        rec.update(
            {
                f"{key}_fresh_seeds": int(values.notna().sum()),
                f"{key}_fresh_native_reward": float(values.mean()) if values.notna().any() else NAN,
                f"{key}_regret": v,
                f"{key}_regret_low": low,
                f"{key}_regret_high": high,
                f"{key}_regret_note": note,
                f"{key}_in_best_set": bool(picked[key]) and str(picked[key]) in best_set,
            }
        )
    return rec


def _pilot_columns(
    pilot: pd.DataFrame,
    full: pd.DataFrame,
    all_pilots: pd.DataFrame,
    predicted: pd.Series,
    observed: pd.Series,
) -> dict:
    """One setting's predictions beside the full grid's cell means (texts, rank correlations, the median
    extrapolation error) and the pilots' FLOPs: the first fraction's (``pilot``) and every fraction's
    (``all_pilots``), as shares of the full grid's (``full``)."""
    errors = (predicted - observed.reindex(predicted.index)).dropna()
    grid_flops = full["C_total"].sum()
    return {
        "plus_predictions": means_text(predicted),
        "full_cell_means": means_text(observed),
        "race_spearman": spearman(cell_means(pilot), observed),
        "plus_spearman": spearman(predicted, observed),
        "median_abs_extrapolation_error": float(errors.abs().median()) if len(errors) else NAN,
        "pilot_flops": pilot["C_total"].sum(),
        "full_grid_flops": grid_flops,
        "pilot_flops_fraction": _share(pilot["C_total"].sum(), grid_flops),
        "all_pilot_flops_fraction": _share(all_pilots["C_total"].sum(), grid_flops),
    }


def _cell_rows(
    stage: str,
    setting: str,
    full: pd.DataFrame,
    predictions: pd.DataFrame,
    observed: pd.Series,
    picked: dict[str, str | None],
    best_set: list[str],
) -> list[dict]:
    """One row per cell of one setting: RACE+'s prediction at C beside the full grid's mean and SD
    there, the errors, and whether the cell is RACE's pick, RACE+'s, and in the full grid's best set."""
    full_sd = full.groupby("cell")["native_reward"].std(ddof=1)
    rows = []
    for p in predictions.itertuples(index=False):
        obs = float(observed.get(p.cell, NAN))
        rows.append(
            {
                "stage": stage,
                "setting": setting,
                **p._asdict(),
                "full_mean": obs,
                "full_sd": float(full_sd.get(p.cell, NAN)),
                "error": p.predicted - obs,
                "abs_error": abs(p.predicted - obs),
                "pilot_error": p.pilot_mean - obs,
                "race_pick": p.cell == picked["race"],
                "plus_pick": p.cell == picked["plus"],
                "in_full_best_set": p.cell in best_set,
            }
        )
    return rows


def _of_setting(stage: str, setting: str):
    """A filter of a table's rows to one (stage, setting)."""
    return lambda rows: rows[(rows["stage"] == stage) & (rows["setting"] == setting)]


def _share(part: float, whole: float) -> float:
    return float(part / whole) if whole else NAN


def _fraction(pilot_rows: pd.DataFrame, full_flops: float) -> float:
    """The pilots' budget as a fraction of the full one (NaN when their rows say none)."""
    if "budget_flops" not in pilot_rows:
        return NAN
    budget = pd.to_numeric(pilot_rows["budget_flops"], errors="coerce")
    return float(budget.median() / full_flops) if budget.notna().any() else NAN


def _default_cell(defaults: pd.DataFrame, grid: pd.DataFrame) -> str:
    """The full grid's cell with TRL's default allocation (its P, G, K, mu), or "" when the grid has none."""
    keys = ["P", "G", "K", "mu"]
    if defaults.empty:
        return ""
    if all(k in defaults and k in grid for k in keys):
        alloc = defaults[keys].iloc[0].astype(int)
        match = grid[np.logical_and.reduce([grid[k].astype(int) == alloc[k] for k in keys])]
        return str(match["cell"].iloc[0]) if len(match) else ""
    label = str(defaults["cell"].iloc[0])
    return label if label in set(grid["cell"].astype(str)) else ""


def plus_summary(settings: pd.DataFrame, samples, draws: int = BOOTSTRAP, seed: int = 0) -> pd.DataFrame:
    """One row across the distinct settings of :func:`plus_table`: per method (RACE, RACE+, TRL's
    default), the mean regret over the settings where it has one, with a 95% percentile interval from
    a two-level bootstrap (``draws`` resamples of the settings with replacement, and within each drawn
    setting of the best cell's grid seeds and the pick's fresh seeds; fixed ``seed``; NaN with fewer
    than two settings), and the share of settings whose pick lies in the full grid's 95% best set."""
    rec: dict = {"settings": len(settings)}
    rng = np.random.default_rng(seed)
    for key, words in PLUS_METHODS.items():
        mine = [(b[np.isfinite(b)], p[np.isfinite(p)]) for _, k, b, p in samples if k == key]
        mine = [(b, p) for b, p in mine if len(b) and len(p)]
        value = float(np.mean([b.mean() - p.mean() for b, p in mine])) if mine else NAN
        low = high = NAN
        note = f"{words}: {len(mine)} of {len(settings)} settings with a regret"
        if len(mine) >= 2:
            k = len(mine)
            # each setting's regret on its own resamples, one per (replicate, slot) it may fill
            regrets = np.stack(
                [
                    _resampled_means(b, draws, rng, (k,)) - _resampled_means(p, draws, rng, (k,))
                    for b, p in mine
                ]
            )
            chosen = rng.integers(0, k, size=(draws, k))
            means = regrets[chosen, np.arange(draws)[:, None], np.arange(k)[None, :]].mean(axis=1)
            low, high = (float(v) for v in np.percentile(means, [2.5, 97.5]))
        elif mine:
            note += "; no interval: the bootstrap over settings needs 2"
        # over the settings where the method names a cell (RACE+ may have none; TRL's default is a cell
        # of the grid or lies outside it, and then outside its best set)
        picked = (
            settings[settings["plus_pick"].astype(str) != ""] if key == "plus" and len(settings) else settings
        )
        inside = picked[f"{key}_in_best_set"].astype(bool) if len(picked) else pd.Series(dtype=bool)
        rec.update(
            {
                f"{key}_mean_regret": value,
                f"{key}_regret_low": low,
                f"{key}_regret_high": high,
                f"{key}_settings": len(mine),
                f"{key}_in_best_set_share": float(inside.mean()) if len(inside) else NAN,
                f"{key}_note": note,
            }
        )
    return pd.DataFrame([rec])


def _count(n, noun: str) -> str:
    return f"{int(n)} {noun}{'s' * (int(n) != 1)}"


def plus_sentence(race) -> str:
    """One sentence on RACE+ in one setting (a :class:`paper_repro.drivers.study.RacePilots`): its pick and
    prediction at the full budget beside RACE's pick's, and the cells left out for want of a fit (the
    fresh seeds' scores are in the notebook's own table)."""
    from paper_repro.analysis.wording import fraction_words

    table = race.predictions
    if table is None or table.empty:
        return "No pilot has finished with a native reward: RACE+ has no pick yet."
    fitted = table[table["candidate"].astype(bool)]
    left = table[~table["candidate"].astype(bool)]
    point = fraction_words(float(table["pilot_point"].max()))
    left_words = (
        f"; {len(left)} cell(s) without a fit are not candidates ({', '.join(left['cell'])}: "
        f"{left['status'].iloc[0]})"
        if len(left)
        else ""
    )
    if race.plus_pick is None:
        return f"RACE+ has no pick: no pilot cell's curve up to {point} of the budget could be fitted{left_words}."
    row = fitted.set_index("cell").loc[race.plus_pick]
    interval = (
        f" (95% interval over the pilot seeds {row['pred_lo']:.3f} to {row['pred_hi']:.3f})"
        if np.isfinite(row["pred_lo"])
        else ""
    )
    text = (
        f"RACE+ picks cell {race.plus_pick}: its pilots' curve up to {point} of the budget "
        f"({_count(row['n_points'], 'point')}, {_count(row['n_seeds'], 'seed')}) predicts a native reward of "
        f"{row['predicted']:.3f} at the full budget{interval}"
    )
    if race.pick is not None and race.pick != race.plus_pick:
        other = table.set_index("cell")["predicted"].get(race.pick, NAN)
        text += f", against {other:.3f} for RACE's pick {race.pick}" if np.isfinite(other) else ""
    elif race.pick == race.plus_pick:
        text += ": the same cell as RACE's pick"
    return text + left_words + "."
