"""What the study notebooks call: one function per notebook, each taking the notebook's parameters.

- :func:`run_setting` (notebooks 10 and 20): every grid cell x seed of one setting at the full
  budget; returns the setting's frontier (cell means with 95% CIs).
- :func:`run_race_pilots` (notebook 30): one setting's grid at each RACE pilot budget on the
  profile's pilot seeds, then RACE's pick (the first pilot budget's best cell), RACE+'s pick (the
  cell whose pilot compute curve predicts the best native reward at the full budget) and TRL's
  default allocation at the full budget on its fresh seeds; returns the pilot frontiers, the picks,
  RACE+'s predictions and that check.
- Notebook 40 calls :func:`paper_repro.analysis.analyse`.
- :func:`own_cells` and :func:`own_specs` (``paper-repro cells --recipe/--rho``): allocations of your own,
  a recipe given literally or a target rho the planner realises, and their runs.

A setting is named alone (``M``, ``dense``, ``prm``): the profile knows its stage. Runs go through
:func:`paper_repro.run.runner.run_specs`: a rerun skips every finished run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro.common.results import RUN_COLUMNS, quick_dir, results_dir
from paper_repro.config import Profile, load_profile
from paper_repro.run import runner
from paper_repro.run.spec import (
    RunSpec,
    budget_of,
    default_cell_spec,
    pilot_specs,
    race_check_specs,
    seed_list,
    setting_specs,
    spec_for,
)
from paper_repro.run.study_design import check_named


def prepare(profile: str | Profile, quick: bool = False) -> Profile:
    """A profile (loaded by name or path; its quick variant with ``quick``), with its environment set:
    an offline profile never touches the network, and no library progress bar or known library
    warning fills a notebook."""
    from paper_repro.common.quiet import quiet_libraries, quiet_warnings

    quiet_warnings()  # first: loading a profile imports transformers (its GPUs' peak), and so tqdm.auto
    if not isinstance(profile, Profile):
        profile = load_profile(profile)
    if quick:
        profile = profile.quick_variant()
    if profile.offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["HF_DATASETS_OFFLINE"] = "1"
    quiet_libraries()
    return profile


def announce_quick(profile: str | Profile) -> None:
    """Say at the top of a quick notebook's output that it is a smoke run, not the study
    (:meth:`paper_repro.config.Profile.quick_note` of the full ``profile``): as Markdown in a notebook,
    else printed."""
    from paper_repro.common.quiet import quiet_warnings

    # as prepare does: a notebook announces before it prepares, and loading a profile imports tqdm.auto
    quiet_warnings()
    note = (profile if isinstance(profile, Profile) else load_profile(profile)).quick_note()
    ipython = sys.modules.get("IPython")
    if ipython is not None and ipython.get_ipython() is not None:
        from IPython.display import Markdown, display

        display(Markdown(note))
    else:
        print(note)


def results_root_for(
    profile: str | Profile, quick: bool, results_root: str | Path | None
) -> str | Path | None:
    """Where a notebook's runs go: ``results_root`` when given; else a quick run's own folder
    (:func:`paper_repro.common.results.quick_dir`, which git ignores), or None (the committed tables).
    Exploring never writes into the committed study: :func:`paper_repro.run.study_design.check_committed`
    refuses there any run that is not of the profile's design."""
    if results_root is not None or not quick:
        return results_root
    return quick_dir(profile.name if isinstance(profile, Profile) else load_profile(profile).name)


def check_parameters(seeds=None, cells=None, quick=False, threads=None, results_root=None) -> None:
    """Refuse a notebook parameter of the wrong type in one line that says what was expected.
    papermill's ``-p name value`` passes numbers and booleans as such and anything else as text;
    a list is passed with ``-y``, as YAML."""
    example = "papermill notebooks/10_stage_A_model_size.ipynb out.ipynb -p setting S -y"
    if cells is not None and (
        isinstance(cells, str)
        or not isinstance(cells, Sequence)
        or not all(isinstance(c, str) for c in cells)
    ):
        raise TypeError(
            f"cells: expected a list of cell labels such as ['r40', 'r66'], got {cells!r} "
            f"({type(cells).__name__}); pass a list with -y: {example} 'cells: [r40, r66]'"
        )
    integer = lambda v: isinstance(v, int | np.integer) and not isinstance(v, bool)  # noqa: E731
    if seeds is not None and not (
        integer(seeds)
        or (not isinstance(seeds, str) and isinstance(seeds, Sequence) and all(map(integer, seeds)))
    ):
        raise TypeError(
            f"seeds: expected a number of seeds (an integer, e.g. -p seeds 3) or a list of integer seeds, "
            f"got {seeds!r} ({type(seeds).__name__}); pass a list with -y: {example} 'seeds: [0, 1, 2]'"
        )
    if not isinstance(quick, bool):
        raise TypeError(
            f"quick: expected True or False (-p quick True), got {quick!r} ({type(quick).__name__})"
        )
    if threads is not None and not (integer(threads) and threads > 0):
        raise TypeError(f"threads: expected a positive integer or None (-p threads 2), got {threads!r}")
    if results_root is not None and not isinstance(results_root, str | Path):
        raise TypeError(
            f"results_root: expected a folder path (-p results_root out/explore), got {results_root!r}"
        )


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
    """Run one setting's full-budget grid (skipping finished runs); return its frontier table.
    ``quick``: a smoke run (:meth:`~paper_repro.config.Profile.quick_variant`, which the output says
    first: :func:`announce_quick`) into the quick folder unless ``results_root`` says otherwise."""
    check_parameters(seeds, cells, quick, threads, results_root)
    prof = prepare(profile, quick)
    if quick:
        announce_quick(profile)
    results_root = results_root_for(profile, quick, results_root)
    check_named(prof, results_root)
    specs = setting_specs(prof, setting, seeds, "full", cells, quick)
    print(grid_line(prof, setting, specs))
    return _frontier_of(specs, len(specs), results_root, threads, executed_notebook, prof.budget_flops)


def grid_line(profile: Profile, setting: str, specs: Sequence[RunSpec]) -> str:
    """One line on what a setting's notebook runs: the cells of the setting's grid (the labels
    ``cells`` takes, with an example of the ``-y`` form) and those ``specs`` run, on which seeds."""
    grid = list(dict.fromkeys(s.cell for s in setting_specs(profile, setting, seeds=1, extend=False)))
    chosen = list(dict.fromkeys(s.cell for s in specs))
    seeds = list(dict.fromkeys(s.seed for s in specs))
    plain = [c for c in grid if c[-1].isdigit()] or grid  # not a second recipe's (r50b)
    example = ", ".join(dict.fromkeys([plain[1 % len(plain)], plain[-2 if len(plain) > 2 else -1]]))
    runs = "every one" if chosen == grid else ", ".join(chosen) or "none"
    on = f"seed{'s' * (len(seeds) != 1)} {', '.join(map(str, seeds))}" if seeds else "no seed"
    return (
        f"{setting} ({profile.name}): the grid's cells are {', '.join(grid)}; this runs {runs} on {on} "
        f"({len(specs)} run{'s' * (len(specs) != 1)}). To run some cells only: -y 'cells: [{example}]'"
    )


def recipe_label(P: int, G: int, K: int, mu: int) -> str:
    """How a recipe given literally is labelled in the ``cell`` column: ``P8G8K4mu2``."""
    return f"P{P}G{G}K{K}mu{mu}"


def own_cells(
    profile: Profile,
    setting: str,
    recipes: Sequence[tuple[int, int, int, int]] = (),
    rhos: Sequence[float] = (),
    budget_kind: str = "full",
):
    """Allocations of your own for ``setting`` at its full (or first pilot) budget, priced by the
    planner like the grid's: each recipe (P, G, K, mu) as given (:meth:`~paper_repro.run.allocation.Planner.explicit`,
    labelled :func:`recipe_label`), each target rho as the planner realises it
    (:meth:`~paper_repro.run.allocation.Planner.cell`, labelled ``r60``). Returns the planner's cells;
    raises ValueError, with the planner's reason, for a target it cannot realise, a recipe whose
    round the budget cannot buy (or K > G), and, under the ``ceiling`` budget stop, a cell whose
    costliest round the budget cannot surely buy."""
    from paper_repro.run.allocation import ceiling_problem, planner_for

    s = profile.setting(setting)
    budget = budget_of(profile, budget_kind)
    planner = planner_for(profile, s)
    asked = [(recipe_label(*r), lambda r=r: _literal(planner, r, budget)) for r in recipes]
    asked += [(f"rho {rho:g}", lambda rho=rho: planner.cell(rho, budget)) for rho in rhos]
    cells = []
    for name, plan in asked:
        try:
            cell = plan()
        except ValueError as err:  # InfeasibleTarget is one: a target no allowed cell predicts
            raise ValueError(f"refused: {name} for setting {s.name}: {err}") from err
        problem = ceiling_problem(profile, s, cell)
        if problem:
            raise ValueError(f"refused: {name} for setting {s.name}: {problem}")
        cells.append(cell)
    return cells


def _literal(planner, recipe: tuple[int, int, int, int], budget: float):
    """A recipe given literally, priced by the planner. Its target rho is the rho the planner predicts
    for it (to 2 decimals): the analysis files a row with a target among its folder's grid cells, and
    leaves one without (TRL's default cell) out of the grid."""
    from dataclasses import replace

    cell = planner.explicit(*recipe, budget, label=recipe_label(*recipe))
    return replace(cell, target_rho=round(cell.predicted_rho, 2))


def own_specs(
    profile: Profile, setting: str, cells, seeds: int | Sequence[int] | None = None, budget_kind: str = "full"
) -> list[RunSpec]:
    """The runs of your own ``cells`` (:func:`own_cells`) of ``setting`` x ``seeds`` (a count from 0,
    or the seeds; None: the profile's count), at the cells' budget with the profile's ladder below it."""
    s = profile.setting(setting)
    return [spec_for(profile, s, c, seed, budget_kind) for c in cells for seed in seed_list(profile, seeds)]


@dataclass(frozen=True)
class RacePilots:
    """What notebook 30 shows: the pilot frontiers (one per pilot fraction), the cells the first
    fraction's pilots pick (RACE's: the best mean; RACE+'s: the best prediction at the full budget of
    the pilots' compute curves, with the predictions behind it), and both picks beside TRL's default
    at the full budget on fresh seeds."""

    frontier: pd.DataFrame  # per pilot fraction and cell, with a ``pilot_fraction`` column
    pick: str | None  # RACE's; None: no pilot finished ok
    check: pd.DataFrame  # per fresh seed: the default's, RACE's pick's and RACE+'s pick's native reward
    plus_pick: str | None = None  # RACE+'s; None: no pilot cell's curve could be fitted
    # per first-fraction pilot cell: its curve's prediction at C (paper_repro.analysis.tables.race_plus.plus_pick)
    predictions: pd.DataFrame = field(default_factory=pd.DataFrame)


def run_race_pilots(
    profile: str | Profile,
    setting: str,
    quick: bool = False,
    results_root: str | Path | None = None,
    threads: int | None = None,
    executed_notebook: str = "",
) -> RacePilots:
    """Run one setting's RACE pilots (every pilot fraction x the profile's pilot seeds, each evaluated
    along its ladder), then TRL's default allocation, RACE's pick and RACE+'s pick (both from the
    first fraction's pilots, :func:`race_picks`) at the full budget on the fresh seeds.
    ``quick``: into the quick folder unless ``results_root`` says otherwise."""
    from paper_repro.analysis.tables.frontiers import frontier_table

    check_parameters(quick=quick, threads=threads, results_root=results_root)
    prof = prepare(profile, quick)
    if quick:
        announce_quick(profile)
    results_root = results_root_for(profile, quick, results_root)
    check_named(prof, results_root)
    s = prof.setting(setting)
    run = lambda specs: _rows_of(specs, results_root, threads, executed_notebook)  # noqa: E731
    pilots = run(pilot_specs(prof, s, quick))
    pilots["pilot_fraction"] = pilots["budget_flops"] / prof.budget_flops
    frontiers = [
        frontier_table(rows).assign(pilot_fraction=fraction)
        for fraction, rows in pilots.groupby("pilot_fraction", sort=False)
    ]
    first = pilots[np.isclose(pilots["pilot_fraction"], prof.pilot_fraction)]
    pick, plus, predictions = race_picks(prof, first, _curves_of(prof, first, results_root))
    fresh = run(race_check_specs(prof, s, pick, plus)).drop_duplicates("run_id").set_index("run_id")
    reward = lambda spec: fresh["native_reward"].get(spec.run_id, np.nan) if spec else np.nan  # noqa: E731
    roles = {"default": "default", f"pick ({pick})": pick, f"RACE+ pick ({plus})": plus}
    check = pd.DataFrame(
        {name: [reward(spec) for spec in _fresh_runs(prof, s, cell)] for name, cell in roles.items()},
        index=pd.Index(prof.fresh_seeds, name="seed"),
    )
    return RacePilots(pd.concat(frontiers, ignore_index=True), pick, check, plus, predictions)


def _fresh_runs(profile: Profile, setting, cell: str | None) -> list[RunSpec | None]:
    """Per fresh seed, the run of ``cell`` (``"default"``: TRL's default allocation) at the full budget
    (None where there is none: no pick, or a cell that does not surely buy a round)."""
    if cell is None:
        return [None] * len(profile.fresh_seeds)
    if cell == "default":
        return [default_cell_spec(profile, setting, seed) for seed in profile.fresh_seeds]
    by_seed = {
        spec.seed: spec
        for spec in setting_specs(profile, setting, profile.fresh_seeds, "full", cells=[cell], extend=False)
    }
    return [by_seed.get(seed) for seed in profile.fresh_seeds]


def race_picks(
    profile: Profile, pilot_rows: pd.DataFrame, pilot_curves: pd.DataFrame
) -> tuple[str | None, str | None, pd.DataFrame]:
    """RACE's pick and RACE+'s (:func:`paper_repro.analysis.tables.race_plus.picks`) from one setting's
    first-fraction pilot rows (the ok ones count) and their ``curves.csv`` rows, with RACE+'s
    predictions per cell. The notebook and :func:`race_specs` both name the picks here, and the
    analysis scores the same, so a rerun names the same."""
    from paper_repro.analysis.tables.race_plus import picks

    ok = pilot_rows[pilot_rows["status"] == "ok"] if "status" in pilot_rows else pilot_rows
    return picks(ok, pilot_curves, profile.budget_flops)


def _curves_of(profile: Profile, rows: pd.DataFrame, results_root) -> pd.DataFrame:
    """The ``curves.csv`` rows of the runs in ``rows`` (numbers parsed)."""
    from paper_repro.analysis.tables.frontiers import load_curves

    return load_curves(results_dir(profile.name, results_root) / "curves.csv", rows)


def race_specs(
    profile: Profile, setting, results_root: str | Path | None = None, quick: bool = False
) -> tuple[list[RunSpec], int]:
    """Every run of one setting's RACE notebook as far as the tables say: its pilots, TRL's default on
    the fresh seeds, and RACE's and RACE+'s picks' fresh runs once every first-budget pilot has a row
    in ``runs.csv`` and every ok one its curve's points in ``curves.csv`` (:func:`race_picks`); with
    the number of pick runs not yet known (up to two cells per fresh seed; 0 once they are)."""
    from paper_repro.analysis.tables.frontiers import numeric
    from paper_repro.run.ladder import curves_table, missing_points

    pilots = pilot_specs(profile, setting, quick)
    first = [p for p in pilots if np.isclose(p.budget_flops, profile.pilot_budget_flops)]
    rows = runner.rows_for(first, results_root)
    ok = {r["run_id"] for r in rows if r["status"] == "ok"}
    recorded = curves_table(results_dir(profile.name, results_root)).keys() if ok else set()
    complete = bool(first) and len(rows) == len(first)
    if complete and any(missing_points(p, recorded) for p in first if p.run_id in ok):
        complete = False  # a pilot killed between its row and its curve's last point: it runs again
    if not complete:
        return pilots + race_check_specs(profile, setting, None), 2 * len(profile.fresh_seeds)
    frame = numeric(pd.DataFrame(rows, columns=RUN_COLUMNS))
    frame = frame[frame["status"] == "ok"]
    pick, plus, _ = race_picks(profile, frame, _curves_of(profile, frame, results_root))
    return pilots + race_check_specs(profile, setting, pick, plus), 0


def _rows_of(specs: list[RunSpec], results_root, threads, executed_notebook) -> pd.DataFrame:
    """Run ``specs`` (skipping finished ones); their ok rows, numbers parsed."""
    from paper_repro.analysis.tables.frontiers import numeric

    rows = runner.run_specs(specs, results_root, threads=threads, executed_notebook=executed_notebook)
    frame = numeric(pd.DataFrame(rows, columns=RUN_COLUMNS))
    return frame[frame["status"] == "ok"]


def _frontier_of(
    specs: list[RunSpec], n_frontier: int, results_root, threads, executed_notebook, budget_flops: float
) -> pd.DataFrame:
    """Run ``specs``; the frontier at the full budget ``budget_flops`` of the first ``n_frontier`` of
    them (the others are run only): a run that goes on past it counts by its point there."""
    from paper_repro.analysis.tables.frontiers import at_full_budget, frontier_table, load_curves, numeric
    from paper_repro.common.results import results_dir

    rows = runner.run_specs(specs, results_root, threads=threads, executed_notebook=executed_notebook)
    frame = numeric(pd.DataFrame(rows[:n_frontier]))
    frame = frame[frame["status"] == "ok"]
    if specs:
        curves = load_curves(results_dir(specs[0].profile, results_root) / "curves.csv", frame)
        frame = at_full_budget(frame, curves, budget_flops)
    return frontier_table(frame)
