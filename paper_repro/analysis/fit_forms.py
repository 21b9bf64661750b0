"""The fits claim: over the frontiers whose cells differ, which form of ``target`` in rho (constant,
log-linear, quadratic) fits best by AICc (:func:`loglinear`; :func:`aicc_by_form` is also the fits
table's). Its words: :func:`paper_repro.analysis.wording.loglinear_test`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from paper_repro.analysis.best_sets import DEFAULT, rows_of
from paper_repro.analysis.optima import fit_optimum
from paper_repro.analysis.verdict import NAN, Result
from paper_repro.config import Margins
from paper_repro.results import METRICS


def aicc(rss: float, n: int, k: int) -> float:
    """AICc of a Gaussian least-squares fit with ``k`` coefficients (the variance adds one)."""
    p = k + 1
    if n - p - 1 <= 0 or rss <= 0:
        return NAN
    return n * np.log(rss / n) + 2 * p + 2 * p * (p + 1) / (n - p - 1)


def loglinear(runs: pd.DataFrame, names, m: Margins = DEFAULT) -> Result:
    """Over the frontiers (distinct setting x target) whose cells differ (one-way F, p < 0.05):
    constant, log-linear and quadratic in rho by AICc over all runs; a form wins when it beats the
    runner-up by ``m.aicc``."""
    wins: dict[str, int] = {"constant": 0, "loglinear": 0, "quadratic": 0, "tie": 0}
    for name in names:
        for target in METRICS:
            rows = rows_of(runs, [name]).dropna(subset=[target, "rho"])
            if rows["cell"].nunique() < 3 or not fit_optimum(rows, target, bootstrap=0).p_flat < 0.05:
                continue
            scores = aicc_by_form(rows, target)
            ranked = sorted(scores, key=scores.get)
            best, second = ranked[0], ranked[1]
            wins[best if scores[second] - scores[best] >= m.aicc else "tie"] += 1
    n = sum(wins.values())
    if n == 0:
        return Result(note="no frontier that is not flat")
    verdict = (
        "held"
        if wins["loglinear"] > n / 2
        else "not held"
        if n - wins["loglinear"] - wins["tie"] > n / 2
        else "inconclusive"
    )
    return Result(wins["loglinear"] / n, verdict=verdict, note=", ".join(f"{k} {v}" for k, v in wins.items()))


def aicc_by_form(rows: pd.DataFrame, target: str) -> dict[str, float]:
    """AICc of the constant, log-linear and quadratic fits of ``target`` on rho over ``rows``."""
    return {kind: aicc(*_rss(rows, target, kind)) for kind in ("constant", "loglinear", "quadratic")}


def _rss(rows: pd.DataFrame, target: str, kind: str) -> tuple[float, int, int]:
    x = rows["rho"].to_numpy(float)
    y = rows[target].to_numpy(float)
    cols = {"constant": [np.ones_like(x)], "loglinear": [np.ones_like(x), np.log(x)],
            "quadratic": [np.ones_like(x), x, x**2]}[kind]  # fmt: skip
    X = np.column_stack(cols)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    return float(np.sum((X @ coef - y) ** 2)), len(y), X.shape[1]
