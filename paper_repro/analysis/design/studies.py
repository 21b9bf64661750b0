"""Simulated studies: the known truths (:func:`truths`: each a function of setting, target and rho)
and a study drawn from one (:func:`simulate`): a runs table in the shape the analysis reads, with
each cell's recipe effect (:func:`recipe_draw`) and each run's seed noise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.paper import paper_world
from paper_repro.analysis.design.noise import Layout, Noise
from paper_repro.analysis.stats.optima import Cells, unimodal
from paper_repro.common.results import METRICS

Truth = Callable[[str, str, np.ndarray], np.ndarray]  # (setting, target, cell rhos) -> true means

# ---------------------------------------------------------------------------------------- truths


def _bump(rho: np.ndarray, centre: float, left: float, right: float) -> np.ndarray:
    width = np.where(rho < centre, left, right)
    return np.exp(-0.5 * ((rho - centre) / width) ** 2)


def _plateau(rho: np.ndarray, low: float, high: float, edge: float = 0.1) -> np.ndarray:
    gap = np.maximum(low - rho, 0) + np.maximum(rho - high, 0)
    return np.exp(-0.5 * (gap / edge) ** 2)


SHAPES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "flat": lambda r: np.zeros_like(r),
    "peak at 0.45, symmetric": lambda r: _bump(r, 0.45, 0.2, 0.2),
    "peak at 0.45, skewed": lambda r: _bump(r, 0.45, 0.35, 0.12),
    "peak at 0.72": lambda r: _bump(r, 0.72, 0.2, 0.2),
    "plateau over 0.3-0.7": lambda r: _plateau(r, 0.3, 0.7),
    "monotone rising": lambda r: (r - 0.15) / 0.7,
    "monotone falling": lambda r: 1 - (r - 0.15) / 0.7,
}


def truths(prm_style: Sequence[str], amplitude: float, base: float = 0.5) -> dict[str, Truth]:
    """The known truths, each a function of (setting, target, rho) scaled to ``amplitude``;
    ``prm_style``: the settings the paper's world gives a PRM-style frontier."""
    out: dict[str, Truth] = {
        name: (lambda s, t, r, f=shape: base + amplitude * f(np.asarray(r, float)))
        for name, shape in SHAPES.items()
    }

    def paper(setting: str, target: str, rho: np.ndarray) -> np.ndarray:
        kind = "PRM-style" if setting in prm_style else "rule-based"
        return base + amplitude * paper_world(kind, target, rho)

    def reversed_world(setting: str, target: str, rho: np.ndarray) -> np.ndarray:
        if target != "native_reward":
            return paper(setting, target, rho)
        other = "rule-based" if setting in prm_style else "PRM-style"  # the other class's optimum
        return base + amplitude * paper_world(other, target, rho)

    out["the paper's world"] = paper
    out["the paper's world, reversed"] = reversed_world
    return out


def fitted_truth(runs: pd.DataFrame, names: Sequence[str]) -> Truth:
    """The committed study as a truth: each frontier's unimodal fit of its cell means, read at the
    fitted cell nearest each rho asked for."""
    table: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    for name in names:
        rows = runs[runs["setting"] == name]
        for target in METRICS:
            cells = Cells.of(rows, target)
            if cells.k:
                table[(name, target)] = (cells.rho, unimodal(cells.mean, cells.n)[0])

    def truth(setting: str, target: str, rho: np.ndarray) -> np.ndarray:
        if (setting, target) not in table:
            return np.full(len(rho), np.nan)
        at, fit = table[(setting, target)]
        return fit[np.abs(np.asarray(rho, float)[:, None] - at[None, :]).argmin(axis=1)]

    return truth


# ---------------------------------------------------------------------------------------- studies


def _normals(noise: Noise, rng: np.random.Generator, rows: int, recipe: bool = False) -> np.ndarray:
    """``rows`` standard normal draws per target (columns in :data:`METRICS`' order), correlated across
    the targets as ``noise.correlation`` says (independent where it says nothing); ``recipe``: as the
    recipe effects' own correlation says where the noise has one. The first target's draws (the native
    reward's) are the same whatever the correlation."""
    z = rng.standard_normal((rows, len(METRICS)))
    correlation = noise.recipe_correlation if recipe and noise.recipe_correlation else noise.correlation
    if correlation is None:
        return z
    return z @ np.linalg.cholesky(np.asarray(correlation, float)).T


def recipe_draw(layout: Layout, noise: Noise, rng: np.random.Generator) -> dict[tuple[str, str, str], float]:
    """One draw of every (setting, cell, target)'s recipe effect (a cell's targets correlated as the
    noise's)."""
    tau = np.array([noise.tau(t) for t in METRICS])
    out = {}
    for s, cells in layout.cells.items():
        z = _normals(noise, rng, len(cells), recipe=True) * tau
        for i, (c, _) in enumerate(cells):
            out.update({(s, c, t): float(z[i, j]) for j, t in enumerate(METRICS)})
    return out


def simulate(
    layout: Layout,
    truth: Truth,
    noise: Noise,
    rng: np.random.Generator,
    recipe: dict[tuple[str, str, str], float] | None = None,
) -> pd.DataFrame:
    """One simulated study: a runs table (run_id, setting, cell, seed, rho and every target). A run's
    score is its cell's truth and recipe effect, its seed's block (one draw per setting and seed,
    shared by the setting's cells) and its own residual (:class:`Noise`)."""
    recipe = recipe or {}
    frames = []
    for setting, cells in layout.cells.items():
        names = [c for c, _ in cells]
        rho = np.array([r for _, r in cells])
        n = layout.seeds
        frame = {
            "run_id": [f"{setting}-{c}-{i}" for c in names for i in range(n)],
            "setting": setting,
            "cell": np.repeat(names, n),
            "seed": np.tile(np.arange(n), len(names)),
            "rho": np.repeat(rho, n),
        }
        blocks = _normals(noise, rng, n)  # per seed, shared by every cell
        own = _normals(noise, rng, n * len(names))  # per run
        for j, target in enumerate(METRICS):
            mean = truth(setting, target, rho) + np.array(
                [recipe.get((setting, c, target), 0.0) for c in names]
            )
            sd = np.array([noise.sd(setting, c, target) for c in names])
            block = np.tile(blocks[:, j], len(names)) * noise.block(setting, target)
            frame[target] = np.repeat(mean, n) + block + own[:, j] * np.repeat(sd, n)
        frames.append(pd.DataFrame(frame))
    return pd.concat(frames, ignore_index=True)


def noiseless(layout: Layout, truth: Truth, recipe: dict | None = None) -> pd.DataFrame:
    """The truth as a study: two identical seeds per cell, no recipe effect (the best set is then
    exactly the truth's best cells), or with ``recipe`` the cells as drawn (a claim about these
    recipes)."""
    quiet = Noise(0.0, 0.0, {})
    return simulate(layout.with_seeds(2), truth, quiet, np.random.default_rng(0), recipe)
