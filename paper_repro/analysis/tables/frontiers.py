"""Frontiers: each target against realised rho, per setting, with confidence intervals over seeds.

Reads only result rows (``runs.csv``). A *setting* is one (policy, reward system) pair of a stage;
its rows are the ``ok`` runs with that policy and reward system at the full budget, whichever stage
first asked for them (a run serves every stage that asks for the same experiment).

- :func:`frontier_table`: per setting and cell, the mean of every target over seeds with a 95%
  Student-t interval, the mean realised rho (FLOP and wall-time based) and the number of seeds.
- :func:`shared_runs`: the settings that are another setting's runs (counted once by the claims).

rho* from the fitted frontier is :mod:`paper_repro.analysis.stats.optima`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from paper_repro.common.results import METRICS

if TYPE_CHECKING:
    from paper_repro.config import Profile

TARGETS: tuple[str, ...] = METRICS
NUMERIC = (
    "seed",
    "budget_flops",
    "target_rho",
    "predicted_rho",
    "rho",
    "rho_time",
    "C_search",
    "C_learning",
    "C_reward",
    "C_total",
    "P",
    "G",
    "K",
    "mu",
    "rounds",
    "steps",
    *TARGETS,
    *(f"base_{t}" for t in TARGETS),
    "seconds_search",
    "seconds_learning",
    "seconds_reward",
    "seconds_train",
    "seconds_eval",
    "seconds_total",
    "rho_executed",
    "C_total_executed",
    "point",
    "point_flops",
)
# What a run's row at C takes from its point at C when the run went on past C (the rest is the run's).
AT_POINT = (
    "rho",
    "C_search",
    "C_learning",
    "C_reward",
    "C_total",
    "rho_executed",
    "C_total_executed",
    "rho_time",
    "rounds",
    "steps",
    *TARGETS,
    "seconds_train",
    "seconds_eval",
)


def numeric(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its number columns parsed (a table's cells are read as text)."""
    frame = frame.copy()
    for column in NUMERIC:
        if column in frame:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame


def load_runs(path, profile, any_seed: bool = False) -> pd.DataFrame:
    """The ``ok`` rows of ``profile``'s design in a runs table (:func:`of_design`; ``any_seed``: on
    any seed), numbers parsed (the table is checked first)."""
    from paper_repro.common.results import RUN_COLUMNS, ResultTable

    frame = ResultTable(path, RUN_COLUMNS).frame()
    return numeric(of_design(frame[frame["status"] == "ok"], profile, where=str(path), any_seed=any_seed))


HISTORY = "an earlier generation's (older than the design's first run)"


def design_problems(runs: pd.DataFrame, profile, any_seed: bool = False, history: bool = True) -> pd.Series:
    """Per row of ``runs``, why it is not a run of ``profile``'s design (None: it is one;
    :meth:`paper_repro.run.study_design.Design.problem`, ``any_seed`` as there); with ``history``, a row older
    than the design's first run that is not of it: :data:`HISTORY`."""
    from paper_repro.run.study_design import Design

    design = Design(profile)
    problems = pd.Series([design.problem(s, any_seed) for s in runs["spec"]], index=runs.index, dtype=object)
    mine = problems.isna()
    if not history:
        return problems
    first = runs.loc[mine, "created_at"].min() if mine.any() else None
    older = ~mine & (runs["created_at"] <= first) if first is not None else pd.Series(False, index=runs.index)
    problems[older] = HISTORY
    return problems


def of_design(
    runs: pd.DataFrame, profile, where: str = "the runs table", any_seed: bool = False
) -> pd.DataFrame:
    """The rows of ``runs`` that are runs of ``profile``'s design (:class:`paper_repro.run.study_design.Design`:
    its weights, training recipe, data and evaluation, at its budgets, on its seeds; ``any_seed``:
    on any seed).

    The committed ``runs.csv`` holds the design's rows alone (``paper-repro split-history`` moves an
    earlier generation's to ``runs_history.csv``). A folder that still holds them (the table is
    append-only, so a rebuilt model or a changed training recipe leaves the earlier generation's
    rows in place, under other run ids): rows older than the design's first run are that history,
    and leave the analysis quietly. Any other row that is not of the design (a quick run, another
    seed, a hand-made recipe written into the committed table) leaves it with a warning that names
    it: exploring never changes which runs the analysis reads."""
    if runs.empty:
        return runs
    problems = design_problems(runs, profile, any_seed)
    strays = runs[problems.notna() & (problems != HISTORY) & problems.isna().any()]  # none: no design row
    if not strays.empty:
        listed = [
            f"{r.run_id} ({r.setting} {r.cell} seed {r.seed}: {problems[i]})"
            for i, r in strays.head(STRAYS_NAMED).iterrows()
        ]
        more = f"; and {len(strays) - STRAYS_NAMED} more" if len(strays) > STRAYS_NAMED else ""
        warnings.warn(
            f"{len(strays)} rows of {where} are not runs of the {profile.name} design and are left out "
            f"of the analysis: {'; '.join(listed)}{more}. Exploratory runs belong in their own results "
            f"folder (results_root, or quick=True).",
            UserWarning,
            stacklevel=2,
        )
    return runs[problems.isna()]


STRAYS_NAMED = 5  # rows a warning names, of those left out


def load_curves(path, runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of a ``curves.csv`` (:data:`paper_repro.common.results.CURVE_COLUMNS`) whose run is one of
    ``runs`` (the design's ok runs, :func:`load_runs`), numbers parsed; empty when there is none.
    A point of a run killed before its row (no run row yet) is left out."""
    from pathlib import Path

    from paper_repro.common.results import CURVE_COLUMNS, ResultTable

    if not Path(path).exists():
        return pd.DataFrame(columns=list(CURVE_COLUMNS))
    frame = ResultTable(path, CURVE_COLUMNS, key="curve_id").frame()
    frame = numeric(frame[frame["run_id"].isin(set(runs["run_id"]))])
    frame["final"] = frame["final"].astype(str) == "True"
    return frame


def at_full_budget(runs: pd.DataFrame, curves: pd.DataFrame, budget_flops: float) -> pd.DataFrame:
    """``runs`` with every full-budget run that went on past C (a stage whose grid runs past C: stage A's, to 2C) in its
    state at C: its point at C on the ladder (:data:`AT_POINT` from ``curves``; the point is a run of
    budget C row for row, :mod:`paper_repro.run.ladder`), at budget C. A run past C without its point at C
    is left out. Where a run of budget C and the C point of a longer run are the same experiment
    (the same policy, reward, recipe and seed), the one recorded later stays."""
    past = (runs["budget_kind"] == "full") & (runs["budget_flops"] > budget_flops * (1 + 1e-9))
    if not past.any():
        return runs
    at_c = curves[np.isclose(curves["point_flops"], budget_flops) & (curves["status"] == "ok")]
    at_c = at_c.set_index("run_id")
    longer = runs[past & runs["run_id"].isin(at_c.index)].copy()
    lost = runs.loc[past & ~runs["run_id"].isin(at_c.index), "run_id"]
    if len(lost):
        warnings.warn(
            f"{len(lost)} full-budget run(s) past C have no point at C in curves.csv and are left out "
            f"(is curves.csv beside runs.csv?): {', '.join(lost.head(5))}{' ...' if len(lost) > 5 else ''}",
            stacklevel=2,
        )
    for column in AT_POINT:
        longer[column] = at_c.loc[longer["run_id"], column].to_numpy()
    longer["budget_flops"] = budget_flops
    out = pd.concat([runs[~past], longer]).sort_values("created_at", kind="stable")
    same = ["model", "reward_system", "P", "G", "K", "mu", "seed", "budget_kind", "budget_flops"]
    return out.drop_duplicates(subset=same, keep="last").sort_index()


def runs_of(runs: pd.DataFrame, setting, budget_kind: str, budget_flops: float) -> pd.DataFrame:
    """Every run of ``setting``'s policy and reward system at one budget, labelled with the
    setting's stage and name (a run serves every setting that asks for the same experiment)."""
    at_budget = (runs["budget_kind"] == budget_kind) & np.isclose(runs["budget_flops"], budget_flops)
    mine = (runs["model"] == setting.policy) & (runs["reward_system"] == setting.reward_system)
    rows = runs[at_budget & mine].copy()
    rows["stage"], rows["setting"] = setting.stage, setting.name
    return rows


def setting_rows(
    runs: pd.DataFrame, settings: Sequence, budget_kind: str, budget_flops: float
) -> pd.DataFrame:
    """The grid rows of every setting at one budget, labelled with the setting's stage and name (a
    run serves every setting with its policy and reward system, whichever asked for it first).

    A row's cell is the label it was recorded with. A run first asked for as TRL's default cell
    (``cell == "default"``, no target rho) counts as the grid cell with its P, G, K, mu when the
    setting's grid has one, and is left out of the grid otherwise."""
    parts = []
    for s in settings:
        rows = runs_of(runs, s, budget_kind, budget_flops)
        alloc = list(zip(*(rows[k].astype(int) for k in ("P", "G", "K", "mu")), strict=True))
        rows["alloc"] = alloc
        grid = rows[rows["target_rho"].notna()]
        label = dict(zip(grid["alloc"], zip(grid["cell"], grid["target_rho"], strict=True), strict=False))
        rows = rows.loc[np.array([a in label for a in rows["alloc"]], dtype=bool)].copy()
        rows["cell"] = [label[a][0] for a in rows["alloc"]]
        rows["target_rho"] = [label[a][1] for a in rows["alloc"]]
        parts.append(rows.drop(columns="alloc"))
    return pd.concat(parts, ignore_index=True) if parts else runs.iloc[0:0]


def _ci(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95% Student-t interval; the interval is NaN with fewer than two values."""
    from scipy import stats

    values = values[~np.isnan(values)]
    if len(values) == 0:
        return float("nan"), float("nan"), float("nan")
    mean = float(values.mean())
    if len(values) < 2:
        return mean, float("nan"), float("nan")
    half = float(stats.t.ppf(0.975, len(values) - 1)) * float(values.std(ddof=1)) / np.sqrt(len(values))
    return mean, mean - half, mean + half


def shared_runs(rows: pd.DataFrame, order: Sequence[str]) -> dict[str, str]:
    """Settings whose runs are exactly an earlier setting's (in ``order``): {later: earlier}. They are
    one experiment asked for twice (stage B's ``sparse`` is stage A's middle policy) and count once."""
    ids = {s: frozenset(g["run_id"]) for s, g in rows.groupby("setting")}
    seen: dict[frozenset, str] = {}
    shared = {}
    for name in order:
        if name not in ids or not ids[name]:
            continue
        if ids[name] in seen:
            shared[name] = seen[ids[name]]
        else:
            seen[ids[name]] = name
    return shared


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
    if frame.empty:  # no ok run (all failed, or none yet): an empty frontier, not an error
        return pd.DataFrame(columns=["stage", "setting", "cell", "rho", *TARGETS])
    return frame.sort_values(["stage", "setting", "rho"], kind="stable").reset_index(drop=True)


def default_rows(profile: Profile, runs: pd.DataFrame) -> pd.DataFrame:
    """Full-budget rows of TRL's default allocation (K = G = preferred G, mu = 1, the grid's largest
    P) per setting."""
    g, p = profile.grid.preferred_G, max(profile.grid.P)
    parts = []
    for s in profile.all_settings():
        rows = runs_of(runs, s, "full", profile.budget_flops)
        parts.append(rows[(rows["P"] == p) & (rows["G"] == g) & (rows["K"] == g) & (rows["mu"] == 1)])
    return pd.concat(parts, ignore_index=True) if parts else runs.iloc[0:0]


@dataclass(frozen=True)
class Roles:
    """Which seeds play which role: the grid's (full budget), the fresh seeds (RACE's check at the full
    budget) and the pilots'. A profile's design (:meth:`of`) or the seeds a folder holds (:meth:`held`)."""

    grid: frozenset[int]
    fresh: frozenset[int]
    pilot: frozenset[int]

    @classmethod
    def of(cls, profile: Profile) -> Roles:
        """The design's: the grid on ``0 .. seeds-1``, its fresh seeds and its pilot seeds."""
        return cls(
            frozenset(range(profile.seeds)), frozenset(profile.fresh_seeds), frozenset(profile.pilot_seeds)
        )

    @classmethod
    def held(cls, profile: Profile, runs: pd.DataFrame) -> Roles:
        """The seeds ``runs`` hold: every full-budget seed outside the profile's fresh seeds is a grid
        seed (all of them when that leaves none), every pilot-budget seed a pilot seed."""
        seeds = pd.to_numeric(runs["seed"], errors="coerce")
        full = {int(s) for s in seeds[runs["budget_kind"] == "full"].dropna()}
        pilot = {int(s) for s in seeds[runs["budget_kind"] == "pilot"].dropna()}
        fresh = full & set(profile.fresh_seeds)
        grid = (full - fresh) or full
        return cls(frozenset(grid), frozenset(fresh - grid), frozenset(pilot))


def study_rows(profile: Profile, runs: pd.DataFrame, roles: Roles | None = None) -> dict[str, pd.DataFrame]:
    """The study's rows by role, each labelled with its setting: ``grid`` (the full budget on the grid
    seeds), ``fresh`` (full-budget grid cells on the fresh seeds: RACE's and RACE+'s picks), ``fresh_default``
    (TRL's default on the fresh seeds), and ``pilot <fraction>`` (each pilot grid on the pilot seeds).
    ``roles``: which seeds play which role (None: the design's, :meth:`Roles.of`). A run on a seed of
    no role (an earlier design's) is left out."""
    roles = roles or Roles.of(profile)
    settings = profile.all_settings()
    full = setting_rows(runs, settings, "full", profile.budget_flops)
    defaults = default_rows(profile, runs)
    out = {
        "grid": full[full["seed"].isin(roles.grid)],
        "fresh": full[full["seed"].isin(roles.fresh)],
        "fresh_default": defaults[defaults["seed"].isin(roles.fresh)],
    }
    for fraction, budget in profile.pilot_budgets().items():
        pilot = setting_rows(runs, settings, "pilot", budget)
        out[f"pilot {fraction}"] = pilot[pilot["seed"].isin(roles.pilot)]
    return out
