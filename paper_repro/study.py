"""What the study notebooks call: one function per notebook, each taking the notebook's parameters.

- :func:`run_setting` (notebooks 10 and 20): every grid cell x seed of one setting at the full
  budget; returns the setting's frontier (cell means with 95% CIs).
- :func:`run_race_pilots` (notebook 30): one setting's grid at the RACE pilot budget (one seed by
  default), plus TRL's default allocation at the full budget (the fixed cell RACE is compared with);
  returns the pilot frontier.
- Notebook 40 calls :func:`paper_repro.analysis.analyse`.

Runs go through :func:`paper_repro.sweep.run_specs`: a rerun skips every finished run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from paper_repro import sweep, train
from paper_repro.config import Profile, Setting, load_profile

# quick mode: these three cells (r70 is TRL's default allocation for rule-based rewards, so the
# RACE comparison needs no extra run), one seed, a quarter of the budget, 100 problems per
# evaluation set (Profile.quick_variant)
QUICK_CELLS = ("r15", "r50", "r70")


def prepare(profile_name: str, quick: bool = False) -> Profile:
    """Load a profile (its quick variant with ``quick``) and set its environment (an offline profile
    never touches the network)."""
    from paper_repro.embedded import quiet_progress_bars

    profile = load_profile(profile_name)
    if quick:
        profile = profile.quick_variant()
    if profile.offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["HF_DATASETS_OFFLINE"] = "1"
    quiet_progress_bars()
    return profile


def find_setting(profile: Profile, stage: str, name: str) -> Setting:
    settings = profile.settings(stage)
    for s in settings:
        if s.name == name:
            return s
    raise ValueError(
        f"stage {stage} has no setting {name!r}; its settings: {', '.join(s.name for s in settings)}"
    )


def _select(specs: list[train.RunSpec], cells: Sequence[str] | None, quick: bool) -> list[train.RunSpec]:
    if cells:
        unknown = sorted(set(cells) - {s.cell for s in specs})
        if unknown:
            raise ValueError(
                f"cells {unknown} are not in this setting's grid ({sorted({s.cell for s in specs})})"
            )
        return [s for s in specs if s.cell in cells]
    if quick:
        return [s for s in specs if s.cell in QUICK_CELLS]
    return specs


def setting_specs(
    profile: Profile,
    stage: str,
    setting: str,
    seeds: int | None = None,
    budget_kind: train.BudgetKind = "full",
    cells: Sequence[str] | None = None,
    quick: bool = False,
) -> list[train.RunSpec]:
    """The runs of one setting's grid (all planned cells, or ``cells``, or the quick subset)."""
    s = find_setting(profile, stage, setting)
    budget = profile.budget_flops if budget_kind == "full" else profile.pilot_budget_flops
    from paper_repro.allocation import plan_setting

    planned = plan_setting(profile, s, budget)
    n = profile.seeds if seeds is None else seeds
    specs = [train.spec_for(profile, s, c, seed, budget_kind) for c in planned.cells for seed in range(n)]
    return _select(specs, cells, quick)


def run_setting(
    profile: str,
    stage: str,
    setting: str,
    seeds: int | None = None,
    cells: Sequence[str] | None = None,
    quick: bool = False,
    results_root: str | Path | None = None,
    threads: int | None = None,
    executed_notebook: str = "",
) -> pd.DataFrame:
    """Run one setting's full-budget grid (skipping finished runs); return its frontier table."""
    from paper_repro.analysis.frontiers import frontier_table

    prof = prepare(profile, quick)
    specs = setting_specs(prof, stage, setting, seeds, "full", cells, quick)
    rows = sweep.run_specs(specs, results_root, threads=threads, executed_notebook=executed_notebook)
    return frontier_table(_frame(rows))


def run_race_pilots(
    profile: str,
    stage: str,
    setting: str,
    pilot_seeds: int = 1,
    default_seeds: int | None = None,
    quick: bool = False,
    results_root: str | Path | None = None,
    threads: int | None = None,
    executed_notebook: str = "",
) -> pd.DataFrame:
    """Run one setting's pilot grid and its default-allocation runs; return the pilot frontier."""
    from paper_repro.analysis.frontiers import frontier_table

    prof = prepare(profile, quick)
    s = find_setting(prof, stage, setting)
    pilots = setting_specs(prof, stage, setting, pilot_seeds, "pilot", quick=quick)
    n_default = prof.seeds if default_seeds is None else default_seeds
    defaults = [train.default_cell_spec(prof, s, seed) for seed in range(n_default)]
    rows = sweep.run_specs(
        pilots + defaults, results_root, threads=threads, executed_notebook=executed_notebook
    )
    return frontier_table(_frame(rows[: len(pilots)]))


def _frame(rows: list[dict]) -> pd.DataFrame:
    from paper_repro.analysis.frontiers import NUMERIC

    frame = pd.DataFrame(rows)
    for column in NUMERIC:
        if column in frame:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame[frame["status"] == "ok"]
