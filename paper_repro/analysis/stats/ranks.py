"""The permutation test of rank agreement over settings (RACE's pilots against the full grid:
:mod:`paper_repro.analysis.claims.race`)."""

from __future__ import annotations

from collections import defaultdict
from itertools import permutations

import numpy as np

PERMUTATIONS = 10_000  # Monte Carlo draws of the permutation test where exact enumeration is not cheap
EXACT_CELLS = 7  # settings of at most this many cells are enumerated exactly (7! = 5040 orders)


def _rank_correlations(pilots: np.ndarray, full: np.ndarray) -> np.ndarray:
    """Spearman's correlation of each row of ``pilots`` (orders of one setting's pilot means) with
    ``full``: the Pearson correlation of their (mid-)ranks."""
    from scipy import stats

    a = stats.rankdata(pilots, axis=-1)
    b = stats.rankdata(full)
    a, b = a - a.mean(axis=-1, keepdims=True), b - b.mean()
    return (a @ b) / np.sqrt((a * a).sum(axis=-1) * (b @ b))


def permutation_p(pairs, draws: int = PERMUTATIONS, seed: int = 0) -> float:
    """One-sided p of the summed (so the mean) Spearman correlation over ``pairs`` (pilot, full cell
    means per setting) when the pilot means are shuffled within each setting: exact, by convolving
    each setting's distribution over every order, when each has at most :data:`EXACT_CELLS` cells;
    else ``draws`` Monte Carlo shuffles (fixed RNG ``seed``)."""
    observed = sum(float(_rank_correlations(p[None, :], f)[0]) for p, f in pairs)
    if all(len(p) <= EXACT_CELLS for p, _ in pairs):
        sums = {0.0: 1.0}
        for p, f in pairs:
            values, counts = np.unique(
                np.round(_rank_correlations(np.array(list(permutations(p))), f), 9), return_counts=True
            )
            grown = defaultdict(float)
            for total, weight in sums.items():
                for v, c in zip(values, counts / counts.sum(), strict=True):
                    grown[round(total + v, 9)] += weight * c
            sums = grown
        return float(min(1.0, sum(w for total, w in sums.items() if total >= observed - 1e-6)))
    rng = np.random.default_rng(seed)
    null = sum(_rank_correlations(rng.permuted(np.tile(p, (draws, 1)), axis=1), f) for p, f in pairs)
    return float((1 + np.sum(null >= observed - 1e-9)) / (1 + draws))
