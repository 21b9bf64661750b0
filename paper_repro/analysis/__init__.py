"""The final analysis: every table and figure from the result tables alone.

:func:`analyse` reads ``data/results/<profile>/runs.csv`` and writes, beside it, ``frontiers.csv``,
``optima.csv``, ``fits.csv``, ``disagreement.csv``, ``race.csv`` and ``claims.csv``, and the figures to
``figures/<profile>/``. Deleting every output and rerunning rebuilds them from the committed runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro.analysis import figures
from paper_repro.analysis.claims import claims_table
from paper_repro.analysis.frontiers import (
    fit_table,
    frontier_table,
    load_runs,
    optimum_table,
    setting_rows,
)
from paper_repro.analysis.race import RegimeThresholds, disagreement_table, race_table
from paper_repro.config import Profile
from paper_repro.paths import repo_root
from paper_repro.results import results_dir, write_table


@dataclass
class Analysis:
    frontiers: pd.DataFrame
    optima: pd.DataFrame
    fits: pd.DataFrame
    disagreement: pd.DataFrame
    disagreement_share: float
    race: pd.DataFrame
    same_regime_rate: float
    claims: pd.DataFrame
    figures: list[str]


def default_rows(profile: Profile, runs: pd.DataFrame) -> pd.DataFrame:
    """Full-budget rows of TRL's default allocation (K = G = preferred G, mu = 1) per setting."""
    g = profile.grid.preferred_G
    full = runs[(runs["budget_kind"] == "full") & np.isclose(runs["budget_flops"], profile.budget_flops)]
    parts = []
    for s in profile.all_settings():
        rows = full[(full["model"] == s.policy) & (full["reward_system"] == s.reward_system)].copy()
        rows["stage"], rows["setting"] = s.stage, s.name
        parts.append(rows[(rows["G"] == g) & (rows["K"] == g) & (rows["mu"] == 1)])
    return pd.concat(parts, ignore_index=True) if parts else runs.iloc[0:0]


def analyse(
    profile: Profile,
    results_root: str | Path | None = None,
    figures_dir: str | Path | None = None,
    thresholds: RegimeThresholds | None = None,
    n_boot: int = 1000,
) -> Analysis:
    thresholds = thresholds or RegimeThresholds()
    root = results_dir(profile.name, results_root)
    fig_dir = Path(figures_dir) if figures_dir is not None else repo_root() / "figures" / profile.name
    runs = load_runs(root / "runs.csv")
    settings = profile.all_settings()
    full_rows = setting_rows(runs, settings, "full", profile.budget_flops)
    pilot_rows = setting_rows(runs, settings, "pilot", profile.pilot_budget_flops)
    if full_rows.empty:
        raise ValueError(
            f"{root / 'runs.csv'} holds no full-budget run of the {profile.name} grid at budget "
            f"{profile.budget_flops:.3g} ({len(runs)} ok rows in all). Runs of a quick study are analysed "
            f"with quick=True (paper-repro run --quick does this)."
        )
    frontier = frontier_table(full_rows)
    pilot = frontier_table(pilot_rows) if len(pilot_rows) else frontier.iloc[0:0]
    optima = optimum_table(full_rows, frontier, n_boot)
    fits = fit_table(frontier)
    disagreement, share = disagreement_table(frontier)
    race, rate = race_table(frontier, pilot, full_rows, pilot_rows, default_rows(profile, runs), thresholds)
    claims = claims_table(optima, frontier, fits, share, race, rate, profile)
    for name, table in (("frontiers", frontier), ("optima", optima), ("fits", fits),
                        ("disagreement", disagreement), ("race", race), ("claims", claims)):  # fmt: skip
        write_table(root / f"{name}.csv", table)
    written = []
    stages = [st for st in ("A", "BD") if frontier["stage"].isin(list(st)).any()]
    for st in stages:
        for x in ("rho", "rho_time"):
            figures.target_vs_rho_by_setting(frontier, st, fig_dir, x=x)
            written.append(f"targets_vs_rho{'_time' if x == 'rho_time' else ''}_stage_{st}")
    if len(disagreement):
        figures.argmax_cell_by_target(disagreement, fig_dir)
        written.append("argmax_cell_by_target")
    if len(race):
        figures.race_pilot_vs_full_rho_star(race, fig_dir)
        written.append("race_pilot_vs_full_rho_star")
    return Analysis(frontier, optima, fits, disagreement, share, race, rate, claims, written)
