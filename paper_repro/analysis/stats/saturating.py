"""The saturating compute curve: ScaleRL's form, its global fit and the rules that say whether its
asymptote is identified. The tables that fit it per cell: :mod:`paper_repro.analysis.tables.curves`.

**The saturating fit** (:func:`fit_table`, :func:`fit_saturating`): per (setting, cell, target), over
all seeds' rows, ScaleRL's form (arXiv 2510.13786) in ``x = log10 C`` (C the point's FLOPs)::

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

``A`` the asymptote, ``C_mid`` the compute at half the gain, ``B > 0`` the efficiency exponent, ``R0``
the start: fixed to the base policy's value where the rows carry ``base_<target>`` (the analysis
merges it from ``runs.csv``), else a free parameter. Least squares on the per-point seed means
weighted by their seed counts (the same fit as on every row), bounded: ``B`` in
:data:`B_BOUNDS`, ``log10 C_mid`` within :data:`MID_DECADES` decades of the points, ``A`` and ``R0``
within :data:`VALUE_SPAN` of the data. The search is global: a grid over ``(log10 C_mid, B)`` with
``A`` (and a free ``R0``) solved exactly at each node, the curve being linear in them
(:func:`grid_fits`), then refined by bounded least squares (analytic Jacobian, run to
:data:`TOLERANCES`) and its parameters rounded to :data:`PARAMETER_DECIMALS` decimals: a rerun on a
CPU with other SIMD or BLAS kernels gives the same fit. A fit needs at least as many distinct
points as free parameters. **Intervals**: percentiles (95%) of :data:`BOOTSTRAP` refits (on the
grid) on the run seeds resampled with replacement within the cell (a seed's whole curve at once;
fixed RNG seed); none with one seed (NaN, never 0), and none when fewer than :data:`MIN_CONVERGED`
of the refits have enough points.

**Not identified** (the asymptote ``A`` is reported as a number only when all hold, else ``A`` is NaN,
``status`` is "not identified" and ``reason`` lists every rule that failed; ``A_fit`` keeps the fitted
value as a description):

1. the curve has more distinct points than free parameters (an exact interpolation checks nothing);
2. the fitted ``C_mid`` is no larger than the largest observed point: the curve has bent by the
   ladder's top (a ``C_mid`` beyond it is a curve still rising: its asymptote is a guess). A
   ``C_mid`` below the smallest point (the gain came before the ladder, the points lie on the
   plateau) passes, and ``reason`` says that only ``A`` is pinned there;
3. ``B`` is not at its lower bound (:data:`B_BOUNDS`: a rise spread over some twenty decades);
4. the bootstrap interval of ``A`` exists (two seeds or more, refits converged) and lies inside the
   metrics' range :data:`METRIC_RANGE` ([0, 1]: every metric is a share or a score);
5. it is no wider than :data:`MAX_A_WIDTH` (a quarter of that range);
6. the form fits: the lack-of-fit F test of the per-point seed means against the curve (pure error:
   the seeds' spread within points) does not reject at :data:`LACK_OF_FIT` (1%, so only a clear
   failure counts; simulated true curves at five seeds still failed it 3 times in 100). With R0
   fixed to the base policy, a curve that dips below it first, or that turns down, fails here.

"no fit": too few points, or the optimiser failed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from paper_repro.analysis.stats.verdict import NAN

BOOTSTRAP = 200  # seed resamples per fit's intervals
RNG_SEED = 0
DECIMALS = 6  # points are compared rounded to this
METRIC_RANGE = (0.0, 1.0)  # every metric is a share or a score
MAX_A_WIDTH = 0.25  # widest bootstrap interval of A that still names an asymptote
LACK_OF_FIT = 0.01  # the lack-of-fit test's level: an asymptote is withheld when the form clearly fails
MIN_CONVERGED = 0.9  # share of bootstrap refits that must converge for an interval
B_BOUNDS = (0.1, 10.0)  # the efficiency exponent's range
MID_DECADES = 3.0  # log10 C_mid within this many decades beyond the observed points
MID_STEP = 0.05  # the grid's step in log10 C_mid (decades)
B_STEPS = 40  # the grid's exponents, log-spaced over B_BOUNDS
VALUE_SPAN = 2.0  # A and a free R0 within this far outside the data's range
TOLERANCES = {"ftol": 1e-12, "xtol": 1e-12, "gtol": 1e-12}  # the refinement runs to convergence, not near it
PARAMETER_DECIMALS = 6  # a fit's A, R0 (metric units), log10 C_mid (decades) and B, rounded to 1e-6
LN10 = float(np.log(10.0))


def saturating(x, A, log_mid, B, R0) -> np.ndarray:
    """ScaleRL's curve at ``x = log10 C``: ``R0 + (A - R0) / (1 + (C_mid / C)^B)`` (parameters may be
    arrays of one length: one curve each)."""
    from scipy.special import expit

    return R0 + (A - R0) * expit(B * np.log(10.0) * (x - log_mid))


def saturating_gradient(x, A, log_mid, B, R0) -> np.ndarray:
    """The derivatives of :func:`saturating` at the points ``x`` (one float per parameter): rows per
    point, columns ``d/dA, d/d log10 C_mid, d/dB, d/dR0``."""
    from scipy.special import expit

    s = expit(B * LN10 * (x - log_mid))
    slope = (A - R0) * s * (1 - s) * LN10
    return np.column_stack([s, -slope * B, slope * (x - log_mid), 1 - s])


@dataclass(frozen=True)
class Fit:
    """A fitted saturating curve (``log_mid = log10 C_mid``); ``fixed_r0``: R0 was given."""

    A: float
    log_mid: float
    B: float
    R0: float
    fixed_r0: bool

    def __call__(self, x) -> np.ndarray:
        return saturating(np.asarray(x, float), self.A, self.log_mid, self.B, self.R0)

    @property
    def C_mid(self) -> float:
        return float(10.0**self.log_mid)

    @property
    def params(self) -> np.ndarray:
        return np.array([self.A, self.log_mid, self.B, self.R0])


def _fixed(r0: float | None) -> bool:
    return r0 is not None and bool(np.isfinite(r0))


def free_parameters(r0: float | None) -> int:
    """The saturating fit's free parameters: A, C_mid, B, and R0 unless it is given."""
    return 3 if _fixed(r0) else 4


@dataclass(frozen=True)
class Bounds:
    """Where the fit may look: ``log10 C_mid`` within :data:`MID_DECADES` decades of the points, ``A``
    and a free ``R0`` within :data:`VALUE_SPAN` of the data (and the given R0)."""

    mid: tuple[float, float]
    value: tuple[float, float]

    @classmethod
    def of(cls, x: np.ndarray, y: np.ndarray, r0: float | None) -> Bounds:
        values = np.concatenate([y[np.isfinite(y)], [r0] if _fixed(r0) else []])
        return cls(
            (float(x.min()) - MID_DECADES, float(x.max()) + MID_DECADES),
            (float(values.min()) - VALUE_SPAN, float(values.max()) + VALUE_SPAN),
        )


def grid_fits(x: np.ndarray, y: np.ndarray, w: np.ndarray, r0: float | None, bounds: Bounds) -> np.ndarray:
    """The least-squares saturating fit of each row of ``y`` (replicates x points, NaN: not measured;
    weights ``w``, seeds per point) over a grid of ``(log10 C_mid, B)`` (:data:`MID_STEP` decades,
    :data:`B_STEPS` exponents log-spaced over :data:`B_BOUNDS`), with ``A`` (and a free ``R0``) solved
    exactly at each grid node (the curve is linear in them). Rows of ``(A, log10 C_mid, B, R0)``; NaN
    where a row has fewer points than free parameters."""
    from scipy.special import expit

    y, w = np.atleast_2d(np.asarray(y, float)), np.atleast_2d(np.asarray(w, float))
    w = np.where(np.isfinite(y), np.broadcast_to(w, y.shape), 0.0)
    y = np.where(w > 0, y, 0.0)
    mids = np.arange(bounds.mid[0], bounds.mid[1] + 1e-9, MID_STEP)
    m, b = (g.ravel() for g in np.meshgrid(mids, np.geomspace(*B_BOUNDS, B_STEPS), indexing="ij"))
    s = expit(b[:, None] * np.log(10.0) * (x[None, :] - m[:, None]))  # nodes x points
    with np.errstate(divide="ignore", invalid="ignore"):
        if _fixed(r0):
            z = y - r0
            num, den = (w * z) @ s.T, w @ (s * s).T
            gain = num / den
            sse = (w * z * z).sum(axis=1, keepdims=True) - num * gain
            start, top = np.full_like(gain, r0), r0 + gain
        else:
            sw, ss, sss = w.sum(axis=1, keepdims=True), w @ s.T, w @ (s * s).T
            sy, ssy, syy = (
                (w * y).sum(axis=1, keepdims=True),
                (w * y) @ s.T,
                (w * y * y).sum(axis=1, keepdims=True),
            )
            gain = (sw * ssy - ss * sy) / (sw * sss - ss * ss)
            start = (sy - gain * ss) / sw
            sse = syy - start * sy - gain * ssy
            top = start + gain
    lo, hi = bounds.value
    valid = np.isfinite(sse) & (top >= lo) & (top <= hi) & (start >= lo) & (start <= hi)
    sse = np.where(valid, sse, np.inf)
    best = np.argmin(sse, axis=1)
    rows = np.arange(len(y))
    out = np.column_stack([top[rows, best], m[best], b[best], start[rows, best]])
    enough = ((w > 0).sum(axis=1) >= free_parameters(r0)) & np.isfinite(sse[rows, best])
    out[~enough] = NAN
    return out


def fit_saturating(
    x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None, r0: float | None = None
) -> Fit | None:
    """The weighted least-squares saturating fit of ``y`` at ``x = log10 C`` (weights ``w``: seeds per
    point), ``R0`` fixed to ``r0`` where given: the grid's best (:func:`grid_fits`) refined by bounded
    least squares, to :data:`PARAMETER_DECIMALS` decimals. None with fewer distinct points than free
    parameters."""
    from scipy.optimize import least_squares

    x, y = np.asarray(x, float), np.asarray(y, float)
    w = np.ones_like(y) if w is None else np.asarray(w, float)
    use = np.isfinite(x) & np.isfinite(y) & (w > 0)
    x, y, w = x[use], y[use], w[use]
    fixed = _fixed(r0)
    if len(np.unique(x)) < free_parameters(r0):
        return None
    bounds = Bounds.of(x, y, r0)
    p0 = grid_fits(x, y, w, r0, bounds)[0]
    if not np.all(np.isfinite(p0)):
        return None
    lower = [bounds.value[0], bounds.mid[0], B_BOUNDS[0], bounds.value[0]]
    upper = [bounds.value[1], bounds.mid[1], B_BOUNDS[1], bounds.value[1]]
    n = 3 if fixed else 4
    sw = np.sqrt(w)

    def residuals(p):
        return sw * (saturating(x, p[0], p[1], p[2], r0 if fixed else p[3]) - y)

    def jacobian(p):
        # analytic: a finite-difference Jacobian magnifies the residuals' last-bit noise (which differs
        # between CPUs' SIMD and BLAS kernels) 1e8-fold, and the fit's last digits with it
        return sw[:, None] * saturating_gradient(x, p[0], p[1], p[2], r0 if fixed else p[3])[:, :n]

    try:
        res = least_squares(
            residuals, p0[:n], jac=jacobian, bounds=(lower[:n], upper[:n]), method="trf", **TOLERANCES
        )
        p = (
            res.x
            if np.all(np.isfinite(res.x)) and res.cost <= 0.5 * np.sum(residuals(p0[:n]) ** 2)
            else p0[:n]
        )
    except (ValueError, np.linalg.LinAlgError):
        p = p0[:n]
    # where the fit is ill-conditioned its last digits still differ between CPUs (4e-9 seen): kept to
    # PARAMETER_DECIMALS, so that a rerun elsewhere writes the same tables and figures
    p = np.round(p, PARAMETER_DECIMALS)
    return Fit(float(p[0]), float(p[1]), float(p[2]), float(r0 if fixed else p[3]), fixed)


@dataclass(frozen=True)
class Curve:
    """One cell's curve of one target: ``values`` per seed (rows) and point (columns, ascending),
    NaN where a seed was not measured; ``x`` the points' log10 FLOPs."""

    points: np.ndarray
    x: np.ndarray
    values: np.ndarray
    seeds: np.ndarray
    base: float  # the base policy's value (NaN: not given)

    @classmethod
    def of(cls, rows: pd.DataFrame, target: str) -> Curve:
        data = ok(rows).dropna(subset=[target, "point"])
        if data.empty:
            return cls(*(np.zeros(0),) * 2, np.zeros((0, 0)), np.zeros(0), NAN)
        table = data.pivot_table(index="seed", columns="point", values=target, aggfunc="mean", sort=True)
        flops = data.groupby("point")["point_flops"].mean().reindex(table.columns).to_numpy(float)
        points = table.columns.to_numpy(float)
        flops = np.where(np.isfinite(flops) & (flops > 0), flops, points)
        column = f"base_{target}"
        base = float(rows[column].mean()) if column in rows and rows[column].notna().any() else NAN
        return cls(points, np.log10(flops), table.to_numpy(float), table.index.to_numpy(), base)

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)

    def summary(self, picks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The per-point mean and count over the seeds ``picks`` (indices, or replicates x indices;
        default all)."""
        values = self.values if picks is None else self.values[picks]
        count = np.isfinite(values).sum(axis=-2)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.nansum(values, axis=-2) / count
        return mean, count

    def upto(self, point: float) -> Curve:
        """The curve on its points up to ``point``."""
        keep = self.points <= point + 10**-DECIMALS
        return Curve(self.points[keep], self.x[keep], self.values[:, keep], self.seeds, self.base)

    def r0(self) -> float | None:
        return None if np.isnan(self.base) else self.base

    def fit(self) -> Fit | None:
        mean, count = self.summary()
        return fit_saturating(self.x, mean, count, self.r0())

    def resamples(self, b: int = BOOTSTRAP, seed: int = RNG_SEED) -> np.ndarray:
        """``b`` resamples of the seeds with replacement (replicates x seeds, indices); none with one
        seed."""
        if self.n_seeds < 2 or b <= 0:
            return np.zeros((0, self.n_seeds), dtype=int)
        return np.random.default_rng(seed).integers(0, self.n_seeds, size=(b, self.n_seeds))

    def refits(self, picks: np.ndarray) -> np.ndarray:
        """The parameters ``(A, log10 C_mid, B, R0)`` refitted on each resample of ``picks`` (on the
        grid of :func:`grid_fits`; the bootstrap's)."""
        if len(picks) == 0:
            return np.zeros((0, 4))
        mean, count = self.summary(picks)
        full = self.summary()[0]
        bounds = Bounds.of(self.x[np.isfinite(full)], full, self.r0())
        return grid_fits(self.x, mean, count, self.r0(), bounds)


def ok(rows: pd.DataFrame) -> pd.DataFrame:
    """The measured rows of a curves table (``status == "ok"``)."""
    return rows[rows["status"].astype(str) == "ok"]


def interval(draws: np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval of the converged draws (NaN when too few converged)."""
    good = draws[np.isfinite(draws)]
    if len(draws) == 0 or len(good) < MIN_CONVERGED * len(draws):
        return NAN, NAN
    low, high = np.percentile(good, [2.5, 97.5])
    return float(low), float(high)


def lack_of_fit(fit: Fit, curve: Curve) -> float:
    """The p-value of the lack-of-fit F test of the per-point seed means against ``fit`` (pure error:
    the seeds' spread within points); NaN without the degrees of freedom for it."""
    from scipy import stats

    mean, count = curve.summary()
    has = np.isfinite(mean)
    df_lack = int(has.sum()) - free_parameters(curve.r0())
    df_pure = int(count[has].sum()) - int(has.sum())
    if df_lack <= 0 or df_pure <= 0:
        return NAN
    lack = float(np.sum(count[has] * (mean[has] - fit(curve.x[has])) ** 2)) / df_lack
    pure = float(np.nansum((curve.values[:, has] - mean[has]) ** 2)) / df_pure
    if pure <= 0:
        return 0.0 if lack > 0 else 1.0
    return float(stats.f.sf(lack / pure, df_lack, df_pure))


def identification(fit: Fit, curve: Curve, a_low: float, a_high: float, p_lack: float = NAN) -> list[str]:
    """The rules of the module docstring that ``fit`` fails (empty: the asymptote is identified)."""
    why = []
    x = curve.x[np.isfinite(curve.summary()[0])]
    if len(np.unique(x)) <= free_parameters(curve.r0()):
        why.append("no more points than free parameters")
    if fit.log_mid > x.max():
        why.append("C_mid beyond the largest point: the curve has not bent")
    if fit.B - B_BOUNDS[0] <= 0.01 * B_BOUNDS[0]:
        why.append(f"B at its lower bound {B_BOUNDS[0]:g}: no asymptote in sight")
    if curve.n_seeds < 2:
        why.append("one seed: no bootstrap interval")
    elif not (np.isfinite(a_low) and np.isfinite(a_high)):
        why.append(f"more than {1 - MIN_CONVERGED:.0%} of the bootstrap refits lack points")
    else:
        if a_low < METRIC_RANGE[0] - 1e-9 or a_high > METRIC_RANGE[1] + 1e-9:
            why.append(f"interval of A leaves [{METRIC_RANGE[0]:g}, {METRIC_RANGE[1]:g}]")
        if a_high - a_low > MAX_A_WIDTH:
            why.append(f"interval of A wider than {MAX_A_WIDTH:g}")
    if p_lack < LACK_OF_FIT:
        why.append(f"the form does not fit (lack of fit p = {p_lack:.2g})")
    return why
