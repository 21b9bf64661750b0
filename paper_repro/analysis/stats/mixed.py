"""The recipe SD by REML: how far a cell's mean sits from a smooth frontier beyond its seeds' noise.

The model, per target, over the grid runs of a set of settings (Bates et al. 2015, section 2; the
random-intercept special case)::

    y[s, c, k] = f_s(rho_c) + b[s, k] + u[s, c] + e[s, c, k]
    u ~ N(0, tau^2)      one recipe effect per cell (setting s, cell c)
    e ~ N(0, sigma^2)    seed noise of one run

``f_s`` is a per-setting quadratic in rho (the smooth trend the recipe effect is measured around),
``b[s, k]`` a fixed effect per setting and seed (a seed is a block: its data order and sampling are
shared by every cell of its setting). ``tau`` is the recipe SD: the spread of cells at equal rho
that no number of seeds removes.

:func:`recipe_reml` fits it by restricted maximum likelihood. With one random intercept per cell
the REML criterion has a closed form in ``lambda = tau^2 / sigma^2`` (Woodbury: each cell's block of
``V^-1`` is ``I - c 11'`` with ``c = lambda / (1 + n lambda)``), so the fit is a one-dimensional
bounded search, a few milliseconds for the study's 200 runs: the design simulator fits it thousands
of times. ``tests/test_mixed.py`` checks it against statsmodels' ``MixedLM`` (REML) on simulated
data. The interval is the profile-likelihood interval in ``tau^2`` (``sigma^2`` maximised out), and
``df`` the Satterthwaite degrees of freedom of ``tau^2`` (``2 tau^4 / var(tau^2)``, the variance from
the profile's curvature) that a contrast's degrees of freedom combine with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from paper_repro.analysis.stats.verdict import NAN

LEVEL = 0.90  # the recipe SD's interval
_LAMBDA_MAX = 1e4  # tau^2 / sigma^2 searched in [0, this]
DIGITS = 6  # sqrt(lambda) and the interval's ends rounded to this many decimals, df to three: the same bytes on every CPU


@dataclass(frozen=True)
class RecipeSD:
    """A recipe-SD fit: ``tau`` with its profile interval at :data:`LEVEL`, the seed SD ``sigma``,
    ``df`` (Satterthwaite, of ``tau^2``), and what it was fitted on."""

    tau: float = NAN
    low: float = NAN
    high: float = NAN
    sigma: float = NAN
    df: float = NAN
    runs: int = 0
    cells: int = 0
    status: str = "no runs"

    def as_dict(self) -> dict:
        return {
            "recipe_sd": self.tau,
            "recipe_sd_low": self.low,
            "recipe_sd_high": self.high,
            "seed_sd": self.sigma,
            "recipe_df": self.df,
            "runs": self.runs,
            "cells": self.cells,
            "status": self.status,
        }


def design_matrix(rows: pd.DataFrame, degree: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """The fixed effects (per setting: a polynomial of ``degree`` in rho, and one column per seed
    but its first) of full rank, and each row's cell index."""
    settings = rows["setting"].astype(str).to_numpy()
    rho = rows["rho"].to_numpy(float) - 0.5
    seeds = rows["seed"].astype(str).to_numpy()
    columns = []
    for s in dict.fromkeys(settings):
        at = (settings == s).astype(float)
        columns += [at * rho**d for d in range(degree + 1)]
        for k in sorted(set(seeds[settings == s]))[1:]:
            columns.append(at * (seeds == k))
    X = np.column_stack(columns) if columns else np.zeros((len(rows), 0))
    X = _full_rank(X)
    key = pd.Series(list(zip(settings, rows["cell"].astype(str).to_numpy(), strict=True)))
    return X, pd.factorize(key)[0]


def _full_rank(X: np.ndarray) -> np.ndarray:
    """``X`` without the columns that are linear in the others (a setting with fewer cells than its
    polynomial's terms)."""
    if X.shape[1] == 0:
        return X
    from scipy.linalg import qr

    _, r, pivot = qr(X, mode="economic", pivoting=True)
    diag = np.abs(np.diag(r))
    rank = int(np.sum(diag > diag[0] * 1e-10)) if len(diag) else 0
    return X[:, np.sort(pivot[:rank])]


class _Reml:
    """The REML criterion of one response in ``lambda`` (and ``sigma^2``), from sufficient sums."""

    def __init__(self, X: np.ndarray, y: np.ndarray, group: np.ndarray) -> None:
        self.N, self.p = X.shape
        self.n = np.bincount(group).astype(float)
        self.G = np.zeros((len(self.n), self.p))
        np.add.at(self.G, group, X)
        self.z = np.bincount(group, weights=y)
        self.XtX, self.Xty, self.yty = X.T @ X, X.T @ y, float(y @ y)

    def parts(self, lam: float) -> tuple[float, float, float]:
        """(log|V_lambda|, log|X' V_lambda^-1 X|, r' V_lambda^-1 r) with ``V_lambda = I + lambda ZZ'``."""
        c = lam / (1.0 + self.n * lam)
        A = self.XtX - self.G.T @ (c[:, None] * self.G)
        b = self.Xty - self.G.T @ (c * self.z)
        sign, logdet = np.linalg.slogdet(A)
        beta = np.linalg.solve(A, b)
        rss = self.yty - float(np.sum(c * self.z**2)) - float(beta @ b)
        return float(np.sum(np.log1p(self.n * lam))), float(logdet) if sign > 0 else np.inf, max(rss, 1e-300)

    def profiled(self, lam: float) -> float:
        """-2 REML log-likelihood with ``sigma^2`` maximised out (constants dropped)."""
        logv, logx, rss = self.parts(lam)
        return (self.N - self.p) * np.log(rss / (self.N - self.p)) + logv + logx

    def full(self, tau2: float, sigma2: float) -> float:
        """-2 REML log-likelihood at (tau^2, sigma^2)."""
        logv, logx, rss = self.parts(tau2 / sigma2)
        return (self.N - self.p) * np.log(sigma2) + logv + logx + rss / sigma2

    def sigma2(self, lam: float) -> float:
        return self.parts(lam)[2] / (self.N - self.p)

    def at_tau2(self, tau2: float) -> tuple[float, float]:
        """The criterion at ``tau^2`` with ``sigma^2`` maximised out, and that ``sigma^2``."""
        from scipy.optimize import minimize_scalar

        s0 = self.sigma2(0.0)
        fit = minimize_scalar(
            lambda ls: self.full(tau2, np.exp(ls)),
            bounds=(np.log(s0) - 8, np.log(s0) + 2),
            method="bounded",
            options={"xatol": 1e-8},
        )
        return float(fit.fun), float(np.exp(fit.x))


def reml_fit(X: np.ndarray, y: np.ndarray, group: np.ndarray) -> tuple[float, float, _Reml]:
    """(tau^2, sigma^2) by REML, and the criterion."""
    from scipy.optimize import minimize_scalar

    crit = _Reml(X, y, group)
    fit = minimize_scalar(
        lambda s: crit.profiled(s * s),
        bounds=(0.0, np.sqrt(_LAMBDA_MAX)),
        method="bounded",
        options={"xatol": 1e-10},
    )
    # rounded to 1e-6 in sqrt(lambda): two CPUs' kernels, whose criteria differ in the last bits, land
    # on the same value (their optima agree to far below that), so every table reads the same bytes
    lam = round(float(fit.x), DIGITS) ** 2
    if crit.profiled(0.0) <= crit.profiled(lam):
        lam = 0.0
    sigma2 = crit.sigma2(lam)
    return lam * sigma2, sigma2, crit


def recipe_reml(
    rows: pd.DataFrame, target: str, interval: bool = True, level: float = LEVEL, degree: int = 2
) -> RecipeSD:
    """The recipe SD of ``target`` over ``rows`` (grid runs of one or more settings) by REML, with
    (``interval``) its profile-likelihood interval at ``level`` and its Satterthwaite df."""
    data = rows.dropna(subset=[target, "rho"])
    if data.empty:
        return RecipeSD()
    if not interval and (fast := balanced_fit(data, target, degree)) is not None:
        return fast
    X, group = design_matrix(data, degree)
    y = data[target].to_numpy(float)
    cells, N, p = int(group.max()) + 1, len(y), X.shape[1]
    if N - p < 2 or cells < 3 or cells == N:
        return RecipeSD(
            runs=N, cells=cells, status="too few runs or cells to separate recipe from seed noise"
        )
    tau2, sigma2, crit = reml_fit(X, y, group)
    df = _tau_df(crit, tau2, sigma2)
    if not interval:
        return RecipeSD(
            float(np.sqrt(tau2)), sigma=float(np.sqrt(sigma2)), df=df, runs=N, cells=cells, status="ok"
        )
    low, high = _profile(crit, tau2, sigma2, level)
    return RecipeSD(float(np.sqrt(tau2)), low, high, float(np.sqrt(sigma2)), df, N, cells, "ok")


def balanced_fit(data: pd.DataFrame, target: str, degree: int = 2) -> RecipeSD | None:
    """The REML fit in closed form where the design is balanced: every setting's cells ran the same
    seeds once each, at one rho per cell, and every setting the same number of seeds. The criterion
    then splits into the seed-and-cell residual (``SSE``, ``(k - 1)(n - 1)`` df per setting: sigma^2)
    and the cell means' lack of fit about each setting's polynomial (``n RSS``, ``k - rank`` df:
    ``n tau^2 + sigma^2``), and REML is the ANOVA estimate, ``tau^2 = max(0, (MS_lack - MS_e) / n)``,
    with Satterthwaite's df of that difference (the design simulator's studies; ``tests/test_mixed.py``
    checks it against the general fit). None where the design is not balanced."""
    sse = rss = dfe = dfl = 0.0
    seeds, cells, runs = set(), 0, 0
    for _, g in data.groupby("setting", sort=False):
        cell = pd.factorize(g["cell"].astype(str).to_numpy(), sort=True)
        seed = pd.factorize(g["seed"].to_numpy(), sort=True)
        k, n = len(cell[1]), len(seed[1])
        if len(g) != k * n or k < 1:
            return None
        Y = np.full((n, k), np.nan)
        Y[seed[0], cell[0]] = g[target].to_numpy(float)
        rho = np.full((n, k), np.nan)
        rho[seed[0], cell[0]] = g["rho"].to_numpy(float)
        if np.isnan(Y).any() or np.ptp(rho, axis=0).max() > 1e-12:
            return None
        R = Y - Y.mean(axis=0) - Y.mean(axis=1, keepdims=True) + Y.mean()
        sse += float(np.sum(R**2))
        dfe += (k - 1) * (n - 1)
        T = np.vander(rho[0] - 0.5, degree + 1, increasing=True)
        rank = int(np.linalg.matrix_rank(T))
        fit, *_ = np.linalg.lstsq(T, Y.mean(axis=0), rcond=None)
        rss += n * float(np.sum((Y.mean(axis=0) - T @ fit) ** 2))
        dfl += k - rank
        seeds.add(n)
        cells += k
        runs += k * n
    if len(seeds) != 1 or dfe < 1 or dfl < 1 or cells < 3:
        return None
    n = seeds.pop()
    ms_e, ms_l = sse / dfe, rss / dfl
    lam = round(float(np.sqrt(max(0.0, (ms_l / ms_e - 1.0) / n))), DIGITS) ** 2  # as reml_fit rounds it
    sigma2 = (sse + rss / (1.0 + n * lam)) / (dfe + dfl)
    tau2 = lam * sigma2
    if tau2 > 0:
        var = (2 * (n * tau2 + sigma2) ** 2 / dfl + 2 * sigma2**2 / dfe) / n**2
        df = round(float(2 * tau2**2 / var), 3)
    else:
        df = NAN
    return RecipeSD(
        float(np.sqrt(tau2)), sigma=float(np.sqrt(sigma2)), df=df, runs=runs, cells=cells, status="ok"
    )


def _tau_df(crit: _Reml, tau2: float, sigma2: float) -> float:
    """Satterthwaite's df of ``tau^2``: ``2 tau^4 / var(tau^2)``, the variance from the observed
    information of (tau^2, sigma^2) (central differences of the -2 REML log-likelihood); NaN at the
    boundary ``tau^2 = 0``."""
    if tau2 <= 0:
        return NAN
    ht, hs = tau2 * 1e-3, sigma2 * 1e-3
    f = crit.full
    h11 = (f(tau2 + ht, sigma2) - 2 * f(tau2, sigma2) + f(tau2 - ht, sigma2)) / ht**2
    h22 = (f(tau2, sigma2 + hs) - 2 * f(tau2, sigma2) + f(tau2, sigma2 - hs)) / hs**2
    h12 = (
        f(tau2 + ht, sigma2 + hs)
        - f(tau2 + ht, sigma2 - hs)
        - f(tau2 - ht, sigma2 + hs)
        + f(tau2 - ht, sigma2 - hs)
    ) / (4 * ht * hs)
    det = h11 * h22 - h12 * h12
    if not det > 0:
        return NAN
    var = 2.0 * h22 / det  # -2 log L: the covariance is 2 H^-1
    return round(float(2 * tau2**2 / var), 3)


def _profile(crit: _Reml, tau2: float, sigma2: float, level: float) -> tuple[float, float]:
    """The profile-likelihood interval of tau (chi-square, 1 df)."""
    from scipy.optimize import brentq
    from scipy.stats import chi2

    best = crit.full(tau2, sigma2)
    cut = float(chi2.ppf(level, 1))

    def gap(t2: float) -> float:
        return crit.at_tau2(t2)[0] - best - cut

    low = 0.0 if tau2 == 0.0 or gap(0.0) <= 0 else brentq(gap, 0.0, tau2, xtol=1e-14)
    top = max(tau2, sigma2) * 4 + 1e-8
    while gap(top) < 0 and top < 1e3:
        top *= 4
    high = brentq(gap, tau2, top, xtol=1e-14)
    return round(float(np.sqrt(low)), DIGITS + 1), round(float(np.sqrt(high)), DIGITS + 1)


def recipe_table(rows: pd.DataFrame, targets: Sequence[str]) -> pd.DataFrame:
    """One row per target: :func:`recipe_reml` over every setting of ``rows``."""
    return pd.DataFrame([{"target": t, **recipe_reml(rows, t).as_dict()} for t in targets])
