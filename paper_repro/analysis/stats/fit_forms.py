"""The fitted forms of a frontier: constant, log-linear (a + b log rho) and quadratic in rho, each
scored by AICc (:func:`aicc_by_form`): the fits table's, and the fits claim's
(:mod:`paper_repro.analysis.claims.tables`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from paper_repro.analysis.stats.verdict import NAN


def aicc(rss: float, n: int, k: int) -> float:
    """AICc of a Gaussian least-squares fit with ``k`` coefficients (the variance adds one)."""
    p = k + 1
    if n - p - 1 <= 0 or rss <= 0:
        return NAN
    return n * np.log(rss / n) + 2 * p + 2 * p * (p + 1) / (n - p - 1)


def aicc_by_form(rows: pd.DataFrame, target: str) -> dict[str, float]:
    """AICc of the constant, log-linear and quadratic fits of ``target`` on rho over ``rows``."""
    return {kind: aicc(*_rss(rows, target, kind)) for kind in ("constant", "loglinear", "quadratic")}


def form_matrix(rho: np.ndarray, kind: str) -> np.ndarray:
    """The design matrix of the form ``kind`` ("constant", "loglinear", "quadratic") at ``rho``."""
    x = np.asarray(rho, float)
    cols = {
        "constant": [np.ones_like(x)],
        "loglinear": [np.ones_like(x), np.log(x)],
        "quadratic": [np.ones_like(x), x, x**2],
    }[kind]
    return np.column_stack(cols)


def _rss(rows: pd.DataFrame, target: str, kind: str) -> tuple[float, int, int]:
    X = form_matrix(rows["rho"].to_numpy(float), kind)
    y = rows[target].to_numpy(float)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    return float(np.sum((X @ coef - y) ** 2)), len(y), X.shape[1]
