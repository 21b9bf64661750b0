"""Power by simulation: how many seeds per cell would make a claim decidable.

Each frontier (setting x target) is taken to be its fitted quadratic in realised rho, with Gaussian
seed noise of the fit's residual SD, at the cells and realised rhos the grid ran. A simulated study
draws ``n`` seeds per cell (one run gives every target; the targets' noises are drawn independently,
which ignores their correlation within a run). The claim's own test (the same function that gave
the verdict) runs on each of ``REPLICATES`` studies; the power at ``n`` is the share in which it
decides (held or not held). :func:`seeds_needed` is the smallest ``n`` of :data:`SEEDS` with power
>= ``TARGET_POWER``, or None when even the largest does not reach it. The RNG seed is fixed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from paper_repro.results import METRICS

SEEDS: tuple[int, ...] = (3, 5, 10, 20, 40)
REPLICATES = 50  # power to about +-0.07 (binomial SE at 0.8); the whole analysis stays near a minute
TARGET_POWER = 0.8


@dataclass(frozen=True)
class Frontier:
    """A fitted frontier used as the truth of a simulation."""

    setting: str
    target: str
    coef: tuple[float, float, float]  # b0 + b1 rho + b2 rho^2
    sd: float  # residual SD
    cells: tuple[tuple[str, float], ...]  # (cell, mean realised rho)


def fitted_frontiers(runs: pd.DataFrame, names: Sequence[str]) -> list[Frontier]:
    out = []
    for name in names:
        rows = runs[runs["setting"] == name]
        cells = tuple((str(c), float(g["rho"].mean())) for c, g in rows.groupby("cell", sort=False))
        for target in METRICS:
            data = rows.dropna(subset=[target, "rho"])
            if data["cell"].nunique() < 3:
                continue
            x, y = data["rho"].to_numpy(float), data[target].to_numpy(float)
            X = np.column_stack([np.ones_like(x), x, x**2])
            coef, *_ = np.linalg.lstsq(X, y, rcond=None)
            dof = max(len(y) - 3, 1)
            sd = float(np.sqrt(np.sum((X @ coef - y) ** 2) / dof))
            out.append(Frontier(name, target, tuple(map(float, coef)), sd, cells))
    return out


def simulate(frontiers: Sequence[Frontier], n: int, rng: np.random.Generator) -> pd.DataFrame:
    """One study of ``n`` seeds per cell drawn from ``frontiers``."""
    runs: dict[tuple[str, str, int], dict] = {}
    for f in frontiers:
        b0, b1, b2 = f.coef
        for cell, rho in f.cells:
            values = b0 + b1 * rho + b2 * rho**2 + rng.normal(0.0, f.sd, size=n)
            for seed, value in enumerate(values):
                row = runs.setdefault((f.setting, cell, seed), {
                    "run_id": f"{f.setting}-{cell}-{seed}", "setting": f.setting, "cell": cell,
                    "seed": seed, "rho": rho,
                })  # fmt: skip
                row[f.target] = float(value)
    return pd.DataFrame(list(runs.values()))


def power(
    test: Callable[[pd.DataFrame], str],
    frontiers: Sequence[Frontier],
    seeds: Sequence[int] = SEEDS,
    replicates: int = REPLICATES,
    seed: int = 0,
    through: int = 0,
) -> dict[int, float]:
    """The share of simulated studies in which ``test`` (runs -> verdict) decides, per seed count;
    stops at the first count that reaches :data:`TARGET_POWER` and is at least ``through`` (the
    study's own count, whose power is always reported)."""
    rng = np.random.default_rng(seed)
    out: dict[int, float] = {}
    for n in seeds:
        decided = sum(test(simulate(frontiers, n, rng)) in ("held", "not held") for _ in range(replicates))
        out[n] = decided / replicates
        if out[n] >= TARGET_POWER and n >= through:
            break
    return out


def seeds_needed(powers: dict[int, float]) -> int | None:
    return next((n for n, p in sorted(powers.items()) if p >= TARGET_POWER), None)
