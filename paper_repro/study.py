"""What the study notebooks call: one function per notebook, each taking the notebook's parameters.

- :func:`run_setting` (notebooks 10 and 20): every grid cell x seed of one setting at the full
  budget; returns the setting's frontier (cell means with 95% CIs).
- :func:`run_race_pilots` (notebook 30): one setting's grid at the RACE pilot budget (one seed by
  default), plus TRL's default allocation at the full budget (the fixed cell RACE is compared with);
  returns the pilot frontier.
- Notebook 40 calls :func:`paper_repro.analysis.analyse`.

A setting is named alone (``M``, ``dense``, ``prm``): the profile knows its stage. Runs go through
:func:`paper_repro.runner.run_specs`: a rerun skips every finished run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from paper_repro import runner
from paper_repro.config import Profile, load_profile
from paper_repro.spec import RunSpec, default_cell_spec, seed_list, setting_specs


def prepare(profile: str | Profile, quick: bool = False) -> Profile:
    """A profile (loaded by name or path; its quick variant with ``quick``), with its environment set:
    an offline profile never touches the network, and no library progress bar or known library
    warning fills a notebook."""
    from paper_repro.quiet import quiet_libraries

    if not isinstance(profile, Profile):
        profile = load_profile(profile)
    if quick:
        profile = profile.quick_variant()
    if profile.offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["HF_DATASETS_OFFLINE"] = "1"
    quiet_libraries()
    return profile


def run_setting(
    profile: str | Profile,
    setting: str,
    seeds: int | Sequence[int] | None = None,
    cells: Sequence[str] | None = None,
    quick: bool = False,
    results_root: str | Path | None = None,
    threads: int | None = None,
    executed_notebook: str = "",
) -> pd.DataFrame:
    """Run one setting's full-budget grid (skipping finished runs); return its frontier table."""
    prof = prepare(profile, quick)
    specs = setting_specs(prof, setting, seeds, "full", cells, quick)
    return _frontier_of(specs, len(specs), results_root, threads, executed_notebook)


def run_race_pilots(
    profile: str | Profile,
    setting: str,
    pilot_seeds: int | Sequence[int] = 1,
    default_seeds: int | Sequence[int] | None = None,
    quick: bool = False,
    results_root: str | Path | None = None,
    threads: int | None = None,
    executed_notebook: str = "",
) -> pd.DataFrame:
    """Run one setting's pilot grid and its default-allocation runs; return the pilot frontier."""
    prof = prepare(profile, quick)
    s = prof.setting(setting)
    pilots = setting_specs(prof, s, pilot_seeds, "pilot", quick=quick)
    defaults = [default_cell_spec(prof, s, seed) for seed in seed_list(prof, default_seeds)]
    return _frontier_of(pilots + defaults, len(pilots), results_root, threads, executed_notebook)


def _frontier_of(
    specs: list[RunSpec], n_frontier: int, results_root, threads, executed_notebook
) -> pd.DataFrame:
    """Run ``specs``; the frontier of the first ``n_frontier`` of them (the others are run only)."""
    from paper_repro.analysis.frontiers import frontier_table, numeric

    rows = runner.run_specs(specs, results_root, threads=threads, executed_notebook=executed_notebook)
    frame = numeric(pd.DataFrame(rows[:n_frontier]))
    return frontier_table(frame[frame["status"] == "ok"])
