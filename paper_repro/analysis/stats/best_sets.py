"""Each setting's cells that could be best: the decision every rho* claim reads
(:mod:`paper_repro.analysis.claims.frontier`), never a fitted curve.

:class:`Frontiers` summarises a runs table's (setting, target) frontiers once (the claim tests read it
many times per table, the design simulator thousands of times); :func:`setting_best` takes one
setting's best set from it (:func:`paper_repro.analysis.stats.optima.best_set`, Bonferroni over the sets a
claim reads together) with, where asked, its unimodal rho* and interval; :func:`contradict` names the
settings whose sets share no allocation. The margins default to the profile's defaults
(:data:`DEFAULT`, :class:`paper_repro.config.Margins`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from paper_repro.analysis.stats.optima import (
    ALPHA,
    Cells,
    best_set,
    fit_optimum,
    overlap,
    recipe_sd_estimate,
)
from paper_repro.analysis.stats.verdict import NAN
from paper_repro.config import Margins
from paper_repro.results import METRICS

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
        self._recipe_sd: float | None = None

    @classmethod
    def of(cls, runs: pd.DataFrame | Frontiers) -> Frontiers:
        return runs if isinstance(runs, Frontiers) else cls(runs)

    def cells(self, setting: str, target: str) -> Cells:
        if self._cells is None:
            self._cells = self._summarise()
        return self._cells.get((setting, target), Cells((), *(np.zeros(0),) * 3, np.zeros(0, dtype=int)))

    def recipe_sd(self, m: Margins) -> float:
        """The recipe effect the best sets allow for: the margins' when given, else the one this
        table's frontiers show (:func:`paper_repro.analysis.stats.optima.recipe_sd_estimate`, over every
        setting and target in it)."""
        if m.recipe_sd is not None:
            return m.recipe_sd
        if self._recipe_sd is None:
            if self._cells is None:
                self._cells = self._summarise()
            self._recipe_sd = recipe_sd_estimate(list(self._cells.values()))
        return self._recipe_sd

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
                    tuple(np.array(names, dtype=object)[has]), order.to_numpy(float)[has],
                    mean.loc[setting, t].reindex(order.index).to_numpy(float)[has],
                    var.loc[setting, t].reindex(order.index).to_numpy(float)[has], n[has],
                )  # fmt: skip
        return out


def setting_best(
    runs: pd.DataFrame | Frontiers, name: str, target: str, m: Margins, estimate: bool = True, family: int = 1
) -> SettingBest:
    """The cells of setting ``name`` that could be best for ``target`` (the decision; at level
    ``1 - ALPHA / family``, Bonferroni over the ``family`` sets a claim reads together), and with
    ``estimate`` its unimodal rho* with the seed-bootstrap interval (a description)."""
    frontiers = Frontiers.of(runs)
    cells = frontiers.cells(name, target)
    tau = frontiers.recipe_sd(m)
    keep = best_set(cells, tau, ALPHA / family)
    names = " ".join(np.array(cells.names, dtype=object)[keep])
    if not estimate:
        return SettingBest(name, names, cells.rho[keep])
    opt = fit_optimum(rows_of(frontiers.runs, [name]), target, tau, describe=False)
    return SettingBest(name, names, cells.rho[keep], opt.rho_star, opt.ci95_low, opt.ci95_high, opt.status)


def contradict(bests: list[SettingBest]) -> list[tuple[str, str]]:
    """The pairs of settings whose best sets share no allocation (one lies wholly beyond the other)."""
    return [
        (a.setting, b.setting)
        for i, a in enumerate(bests)
        for b in bests[i + 1 :]
        if len(a.rhos) and len(b.rhos) and not overlap(a.span, b.span)
    ]
