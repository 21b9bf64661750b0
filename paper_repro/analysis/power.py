"""Power by simulation: how many seeds per cell would make a claim decidable.

Each frontier (setting x target) is taken to be its fitted quadratic in realised rho, with Gaussian
seed noise of the fit's residual SD, at the cells and realised rhos the grid ran. A simulated study
draws ``n`` seeds per cell; one run gives every target, so a run's noises across the targets are
drawn together from the covariance of the fits' residuals within the runs
(:func:`noise_covariances`): a test that pairs the targets within a run sees the noise they share.
The claim's own test (the same function that gave
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


def noise_covariances(runs: pd.DataFrame, frontiers: Sequence[Frontier]) -> dict[str, np.ndarray]:
    """Per setting, the covariance across its frontiers' targets (in ``frontiers``' order) of the
    fitted quadratics' residuals over the runs that have every one of them; its diagonal is close to
    each fit's residual variance."""
    out = {}
    for setting in dict.fromkeys(f.setting for f in frontiers):
        mine = [f for f in frontiers if f.setting == setting]
        rows = runs[runs["setting"] == setting].dropna(subset=[*(f.target for f in mine), "rho"])
        x = rows["rho"].to_numpy(float)
        residuals = np.column_stack(
            [rows[f.target].to_numpy(float) - (f.coef[0] + f.coef[1] * x + f.coef[2] * x**2) for f in mine]
        )
        out[setting] = residuals.T @ residuals / max(len(rows) - 3, 1)
    return out


def simulate(
    frontiers: Sequence[Frontier],
    n: int,
    rng: np.random.Generator,
    covariances: dict[str, np.ndarray] | None = None,
) -> pd.DataFrame:
    """One study of ``n`` seeds per cell drawn from ``frontiers``: each run's noises across a
    setting's targets drawn jointly from ``covariances[setting]`` (None: independently, each with
    its frontier's residual SD)."""
    runs: dict[tuple[str, str, int], dict] = {}
    for setting in dict.fromkeys(f.setting for f in frontiers):
        mine = [f for f in frontiers if f.setting == setting]
        for cell, rho in mine[0].cells:
            if covariances is not None:
                noise = rng.multivariate_normal(
                    np.zeros(len(mine)), covariances[setting], size=n, method="svd"
                )
            else:
                noise = np.column_stack([rng.normal(0.0, f.sd, size=n) for f in mine])
            for seed in range(n):
                row = runs.setdefault((setting, cell, seed), {
                    "run_id": f"{setting}-{cell}-{seed}", "setting": setting, "cell": cell,
                    "seed": seed, "rho": rho,
                })  # fmt: skip
                for k, f in enumerate(mine):
                    b0, b1, b2 = f.coef
                    row[f.target] = float(b0 + b1 * rho + b2 * rho**2 + noise[seed, k])
    return pd.DataFrame(list(runs.values()))


def power(
    test: Callable[[pd.DataFrame], str],
    frontiers: Sequence[Frontier],
    seeds: Sequence[int] = SEEDS,
    replicates: int = REPLICATES,
    seed: int = 0,
    through: int = 0,
    covariances: dict[str, np.ndarray] | None = None,
) -> dict[int, float]:
    """The share of simulated studies in which ``test`` (runs -> verdict) decides, per seed count;
    stops at the first count that reaches :data:`TARGET_POWER` and is at least ``through`` (the
    study's own count, whose power is always reported)."""
    rng = np.random.default_rng(seed)
    out: dict[int, float] = {}
    for n in seeds:
        decided = sum(
            test(simulate(frontiers, n, rng, covariances)) in ("held", "not held") for _ in range(replicates)
        )
        out[n] = decided / replicates
        if out[n] >= TARGET_POWER and n >= through:
            break
    return out


def seeds_needed(powers: dict[int, float]) -> int | None:
    return next((n for n, p in sorted(powers.items()) if p >= TARGET_POWER), None)
