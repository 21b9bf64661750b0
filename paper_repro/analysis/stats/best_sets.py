"""Each setting's cells that could be best: the decision every rho* claim reads
(:mod:`paper_repro.analysis.claims.frontier`), never a fitted curve.

:class:`Frontiers` summarises a runs table's (setting, target) frontiers once (the claim tests read it
many times per table, the design simulator thousands of times); :func:`setting_best` takes one
setting's best set from it (:func:`paper_repro.analysis.stats.optima.best_set`, Bonferroni over the sets a
claim reads together) with, where asked, its unimodal rho* and interval; :func:`contradict` names the
settings whose sets lie more than one grid step apart. The margins default to the profile's defaults
(:data:`DEFAULT`, :class:`paper_repro.config.Margins`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from paper_repro.analysis.stats.mixed import RecipeSD, recipe_reml
from paper_repro.analysis.stats.optima import ALPHA, Cells, best_set, fit_optimum
from paper_repro.analysis.stats.verdict import NAN
from paper_repro.common.results import METRICS
from paper_repro.config import Margins

DEFAULT = Margins()


def rows_of(runs: pd.DataFrame, names) -> pd.DataFrame:
    """The rows of ``runs`` of the settings ``names``."""
    return runs[runs["setting"].isin(list(names))]


@dataclass(frozen=True)
class SettingBest:
    """One setting's frontier of one target: the realised rhos of its cells that could be best, and
    (when estimated) rho* with its interval."""

    setting: str
    cells: str  # the best set's cells, in order of rho
    rhos: np.ndarray  # their realised rho
    star: float = NAN
    low: float = NAN
    high: float = NAN
    status: str = ""
    grid_step: float = 0.0  # the widest gap between two neighbouring cells of the setting, in rho

    @property
    def span(self) -> tuple[float, float]:
        return (float(self.rhos.min()), float(self.rhos.max())) if len(self.rhos) else (NAN, NAN)

    def words(self) -> str:
        return f"{self.setting} {{{self.cells}}}"


class Frontiers:
    """A runs table with each (setting, target) frontier summarised once (:class:`Cells`): the claim
    tests read it many times per table, and the design simulator thousands of times."""

    def __init__(self, runs: pd.DataFrame) -> None:
        self.runs = runs
        self._cells: dict[tuple[str, str], Cells] | None = None
        self._recipe: dict[str, RecipeSD] = {}

    @classmethod
    def of(cls, runs: pd.DataFrame | Frontiers) -> Frontiers:
        return runs if isinstance(runs, Frontiers) else cls(runs)

    def cells(self, setting: str, target: str) -> Cells:
        if self._cells is None:
            self._cells = self._summarise()
        return self._cells.get((setting, target), Cells((), *(np.zeros(0),) * 3, np.zeros(0, dtype=int)))

    def recipe(self, target: str = "native_reward") -> RecipeSD:
        """The recipe SD of ``target`` this table's runs show, by REML over every setting in it
        (:func:`paper_repro.analysis.stats.mixed.recipe_reml`, no interval: the simulator calls it per study)."""
        if target not in self._recipe:
            self._recipe[target] = recipe_reml(self.runs, target, interval=False)
        return self._recipe[target]

    def recipe_sd(self, m: Margins, target: str = "native_reward") -> float:
        """The recipe effect the best sets and contrasts allow for: the margins' when given, else the one
        this table's runs show for ``target`` (:meth:`recipe`; 0 where it cannot be separated)."""
        if m.recipe_sd is not None:
            return m.recipe_sd
        tau = self.recipe(target).tau
        return float(tau) if np.isfinite(tau) else 0.0

    def recipe_df(self, m: Margins, target: str = "native_reward") -> float:
        """The df of :meth:`recipe_sd`'s square (inf when the margins fix it)."""
        if m.recipe_sd is not None:
            return np.inf
        df = self.recipe(target).df
        return float(df) if np.isfinite(df) else np.inf

    def _summarise(self) -> dict[tuple[str, str], Cells]:
        targets = [t for t in METRICS if t in self.runs]
        if self.runs.empty or not targets:
            return {}
        g = self.runs.groupby(["setting", "cell"], sort=False)
        mean, var, count = g[targets].mean(), g[targets].var(ddof=1), g[targets].count()
        rho = g["rho"].mean()
        out = {}
        for setting in dict.fromkeys(mean.index.get_level_values(0)):
            order = rho.loc[setting].sort_values(kind="stable")
            names = tuple(map(str, order.index))
            for t in targets:
                n = count.loc[setting, t].reindex(order.index).to_numpy(int)
                has = n > 0
                out[(setting, t)] = Cells(
                    tuple(np.array(names, dtype=object)[has]),
                    order.to_numpy(float)[has],
                    mean.loc[setting, t].reindex(order.index).to_numpy(float)[has],
                    var.loc[setting, t].reindex(order.index).to_numpy(float)[has],
                    n[has],
                )
        return out


def setting_best(
    runs: pd.DataFrame | Frontiers, name: str, target: str, m: Margins, estimate: bool = True, family: int = 1
) -> SettingBest:
    """The cells of setting ``name`` that could be best for ``target`` (the decision; at level
    ``1 - ALPHA / family``, Bonferroni over the ``family`` sets a claim reads together), and with
    ``estimate`` its unimodal rho* with the seed-bootstrap interval (a description)."""
    frontiers = Frontiers.of(runs)
    cells = frontiers.cells(name, target)
    tau = frontiers.recipe_sd(m, target)
    keep = best_set(cells, tau, ALPHA / family, frontiers.recipe_df(m, target))
    names = " ".join(np.array(cells.names, dtype=object)[keep])
    step = float(np.diff(cells.rho).max()) if cells.k >= 2 else 0.0
    if not estimate:
        return SettingBest(name, names, cells.rho[keep], grid_step=step)
    opt = fit_optimum(rows_of(frontiers.runs, [name]), target, tau, describe=False)
    return SettingBest(
        name, names, cells.rho[keep], opt.rho_star, opt.ci95_low, opt.ci95_high, opt.status, step
    )


def gap(a: SettingBest, b: SettingBest) -> float:
    """How far apart two best sets lie in rho (0 when their spans overlap)."""
    return max(a.span[0] - b.span[1], b.span[0] - a.span[1], 0.0)


def contradict(bests: list[SettingBest]) -> list[tuple[str, str]]:
    """The pairs of settings whose best sets lie more than one grid step apart (the wider of the two
    settings' widest gap between neighbouring cells): sets one step apart may be neighbouring cells
    of one true optimum between them, so the rule is at least one grid step wide."""
    return [
        (a.setting, b.setting)
        for i, a in enumerate(bests)
        for b in bests[i + 1 :]
        if len(a.rhos) and len(b.rhos) and gap(a, b) > max(a.grid_step, b.grid_step) + 1e-12
    ]
