"""What a claim reads: one study's tables, from its runs or simulated (:class:`Study`), and its
settings by class (:class:`Classes`).

A :class:`Study` holds the study's rows (the full-budget grid runs of every setting, the RACE pilots
and fresh seeds, the grid's compute curves) and builds each derived table once, on first use: the
distinct settings' frontiers (:class:`paper_repro.analysis.stats.best_sets.Frontiers`), the recipe effect
the best sets allow for, the per-cell frontier table, the RACE table, the reward-hacking table. The
analysis builds one from the committed runs; leave-one-seed-out builds one per seed left out
(:meth:`Study.without_seed`); the design simulator builds one per simulated study
(:meth:`Study.simulated`), so that every claim decides real and simulated studies by one code path.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
import pandas as pd

from paper_repro import rewards
from paper_repro.analysis.stats.best_sets import Frontiers
from paper_repro.config import Margins, Profile


@dataclass(frozen=True)
class Classes:
    """The distinct settings of a profile, by class (names, in the profile's order)."""

    rule_based: tuple[str, ...]
    prm_style: tuple[str, ...]
    process: tuple[str, ...]
    sizes: tuple[str, ...]  # stage A, smallest policy first
    middle: tuple[str, ...]  # the settings on the policy of stages B and D
    shared: dict[str, str] = field(default_factory=dict)  # a setting -> the one whose runs it reuses

    @classmethod
    def of(cls, profile: Profile, shared: dict[str, str]) -> Classes:
        settings = [s for s in profile.all_settings() if s.name not in shared]
        prm = tuple(s.name for s in settings if rewards.is_prm_based(s.reward_system))
        middle_policy = next((s.policy for s in profile.settings("B") + profile.settings("D")), None)
        return cls(
            rule_based=tuple(s.name for s in settings if s.name not in prm),
            prm_style=prm,
            process=tuple(s.name for s in settings if rewards.get(s.reward_system).reads != "answer"),
            sizes=tuple(s.name for s in profile.settings("A")),
            middle=tuple(s.name for s in settings if s.policy == middle_policy),
            shared=dict(shared),
        )

    @property
    def distinct(self) -> tuple[str, ...]:
        """The settings the frontier claims read, rule-based first."""
        return (*self.rule_based, *self.prm_style)

    @property
    def middle_rule(self) -> tuple[str, ...]:
        return tuple(s for s in self.middle if s in self.rule_based)

    @property
    def middle_prm(self) -> tuple[str, ...]:
        return tuple(s for s in self.middle if s in self.prm_style)


@dataclass
class Study:
    """One study's tables, as the claims read them. ``grid_rows``: the full-budget runs on the grid
    seeds of every setting (a setting that is another's runs included; the claims read the distinct
    ones); ``estimate``: whether the claims bootstrap their rho* intervals (the simulator does not);
    ``pilots``: pilot fraction -> its pilot grid's rows; ``fresh``/``fresh_default``: RACE's picks and
    TRL's default on the fresh seeds; ``curves``: the grid runs' points on their budget ladders;
    ``thresholds``: RACE's regime rule (:class:`paper_repro.analysis.tables.race.RegimeThresholds`);
    ``replicates``: simulated studies per truth where a claim simulates its own table; ``test_time``:
    stage E's per-problem rows (None: it has not run)."""

    grid_rows: pd.DataFrame
    classes: Classes
    margins: Margins
    estimate: bool = True
    pilots: dict[float, pd.DataFrame] = field(default_factory=dict)
    fresh: pd.DataFrame | None = None
    fresh_default: pd.DataFrame | None = None
    curves: pd.DataFrame | None = None
    thresholds: object | None = None
    replicates: int | None = (
        None  # studies per truth of the claims' own simulations (None: each one's default)
    )
    # stage E's per-problem rows (paper_repro.analysis.tables.test_time.problems); None: not run
    test_time: pd.DataFrame | None = None

    @classmethod
    def simulated(cls, runs: pd.DataFrame, classes: Classes, margins: Margins) -> Study:
        """A simulated study: grid runs only, no bootstrap."""
        return cls(runs, classes, margins, estimate=False)

    @cached_property
    def distinct(self) -> pd.DataFrame:
        """The grid runs of the distinct settings (stage B's sparse is stage A's middle policy)."""
        rows = self.grid_rows
        return rows[~rows["setting"].isin(list(self.classes.shared))] if self.classes.shared else rows

    @cached_property
    def by_setting(self) -> dict[str, pd.DataFrame]:
        """The distinct settings' grid runs, split by setting once."""
        return {str(s): g for s, g in self.distinct.groupby("setting", sort=False)}

    def grids(self, target: str) -> dict:
        """Per distinct setting, its runs of ``target`` as seeds x cells
        (:class:`paper_repro.analysis.stats.contrasts.Grid`), built once per target."""
        from paper_repro.analysis.stats.contrasts import grids

        cache = self.__dict__.setdefault("_grids", {})
        if target not in cache:
            cache[target] = grids(self.by_setting, target)
        return cache[target]

    @cached_property
    def cell_rho(self) -> dict[str, dict[str, float]]:
        """Per distinct setting, each cell's mean realised rho."""
        return {s: g.groupby("cell")["rho"].mean().to_dict() for s, g in self.by_setting.items()}

    @cached_property
    def grid(self) -> Frontiers:
        """The distinct settings' frontiers, summarised once."""
        return Frontiers(self.distinct)

    @cached_property
    def tau(self) -> float:
        """The recipe effect the best sets allow for (the margins', else the study's own estimate)."""
        return self.grid.recipe_sd(self.margins)

    @cached_property
    def first_run(self) -> str | None:
        """When the study's first grid run was made (ISO 8601), or None when its runs carry no time."""
        if "created_at" not in self.grid_rows or self.grid_rows.empty:
            return None
        times = pd.to_datetime(self.grid_rows["created_at"], utc=True, errors="coerce").dropna()
        return times.min().isoformat() if len(times) else None

    @cached_property
    def seeds_per_cell(self) -> int:
        rows = self.distinct
        return int(rows.groupby(["setting", "cell"])["seed"].nunique().median()) if len(rows) else 0

    @cached_property
    def frontier(self) -> pd.DataFrame:
        """Per setting and cell, every target's mean over seeds (every setting)."""
        from paper_repro.analysis.tables.frontiers import frontier_table

        return frontier_table(self.grid_rows)

    @cached_property
    def _race(self) -> tuple[pd.DataFrame, np.ndarray]:
        from paper_repro.analysis.tables.race import RegimeThresholds, race_table

        empty = self.grid_rows.iloc[0:0]
        return race_table(
            self.grid_rows,
            self.pilots,
            self.fresh if self.fresh is not None else empty,
            self.fresh_default if self.fresh_default is not None else empty,
            self.classes.shared,
            self.thresholds or RegimeThresholds(),
            self.tau,
        )

    @property
    def race(self) -> pd.DataFrame:
        """One row per setting and pilot fraction (:func:`paper_repro.analysis.tables.race.race_table`)."""
        return self._race[0]

    @property
    def gains(self) -> np.ndarray:
        """RACE's pick minus TRL's default on the fresh seeds, per distinct setting and seed."""
        return self._race[1]

    @cached_property
    def hacking(self) -> pd.DataFrame:
        """Per distinct run, its change from base and whether it games its reward."""
        from paper_repro.analysis.tables.hacking import hacking_table

        return hacking_table(self.distinct)

    @cached_property
    def curve_rows(self) -> pd.DataFrame:
        """The grid's compute curves, their numbers parsed."""
        from paper_repro.analysis.tables.curve_rows import prepared

        return prepared(self.curves if self.curves is not None else pd.DataFrame())

    @cached_property
    def curve_tau(self) -> float:
        """The recipe effect the curve claims' best sets allow for: the grid's (:attr:`tau`), or with no
        grid runs the one the curves' full-budget points show."""
        from paper_repro.analysis.tables.curves import curve_recipe_sd

        if len(self.distinct):
            return self.tau
        rows = self.curve_rows
        distinct = rows[~rows["setting"].isin(list(self.classes.shared))] if "setting" in rows else rows
        return curve_recipe_sd(distinct, self.margins)

    def without_seed(self, seed: int) -> Study:
        """The study with one grid seed left out (its curves' points too)."""
        curves = self.curves
        if curves is not None and "seed" in curves:
            curves = curves[pd.to_numeric(curves["seed"], errors="coerce") != seed]
        test_time = self.test_time
        if test_time is not None:  # the seed's retrained RL policy goes with it; the base has no seed
            test_time = test_time[pd.to_numeric(test_time["seed"], errors="coerce") != seed]
        return replace(
            self, grid_rows=self.grid_rows[self.grid_rows["seed"] != seed], curves=curves, test_time=test_time
        )

    def with_margins(self, margins: Margins) -> Study:
        return replace(self, margins=margins)
