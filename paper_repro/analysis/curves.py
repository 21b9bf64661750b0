"""Compute curves (``curves.csv``): each cell's metric against log C, the best allocation and the best
policy size at each budget, and whether small budgets predict the full one.

A row of ``curves.csv`` is one run at one point of the budget ladder (a multiple of the profile's full
budget C; :data:`paper_repro.results.CURVE_COLUMNS`). Only ``ok`` rows are measurements; an
``infeasible`` point (a budget that cannot buy one round) is named, never imputed. Every rule below is
fixed in code before any table is read.

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

**rho*(C)** (:func:`rho_star_table`): per setting, budget point and target, the cells that could be
best at 95% among the cells measured there: the study's own decision
(:func:`paper_repro.analysis.stats.optima.best_set`: Gupta's subset, Bonferroni, each cell's seed variance,
the recipe effect ``recipe_sd`` allowed for), with ``best_rhos`` each best cell's **measured** mean rho
spent up to that point (``best_target_rhos`` its recipe's target). A cell infeasible at the point is
left out and named (``infeasible_cells``).

**size*(C)** (:func:`size_star_table`): per point and target, over stage A's (policy, cell) pairs at
equal FLOPs, each pair one "cell" of the same decision; ``best_sizes`` the policies among the pairs
that could be best (smallest first).

**The claims** (our addition, declared in :mod:`paper_repro.analysis.claims.curves`; the verdict words of
:data:`paper_repro.analysis.stats.verdict.VERDICTS`). The ladder's two **ends** of a setting (or of stage
A's pairs) are the smallest point where every one of its cells (pairs) is measured and the largest
such point; fewer than two such points: inconclusive.

- "the best allocation moves with the budget" (:func:`moves_decide`): per distinct setting, the cells
  that could be best at each end (at ``1 - 0.05 / (2 S)``, Bonferroni over the two ends of the ``S``
  settings): the setting **moves** if the two sets share no cell, **stays** if both are the same
  single cell, is undecided otherwise. Over settings: held if more than half move, not held if more
  than half stay, heterogeneous if some move and some stay (and neither is a majority),
  inconclusive otherwise.
- "as the budget grows, the best policy gets bigger" (:func:`grows_decide`): the policy sizes among
  stage A's pairs that could be best at each end (at ``1 - 0.05 / 2``): held if every size at the top
  end is larger than every size at the low end; not held if every size at the top end is no larger
  than every size at the low end; inconclusive otherwise.

Each claim's **operating characteristic** (:func:`moves_operating`, :func:`grows_operating`):
:data:`REPLICATES` simulated studies per truth, each cell's seed values drawn normal around the
truth's mean with the seed SD the data show (pooled where a cell has one seed) at the data's seed
counts, the two ends drawn independently, decided by the same rule; wrong = a decided verdict
(held, not held, heterogeneous) other than the truth's, which reads each end's best-mean cell (a
setting moves when they differ; the policy grows when the top end's is larger). The truths: the
data's own means ("observed"); "static" (the top end's means at both ends); "moving" (the top end's
means, reversed in rho order at the low end; a best cell in the middle is swapped with the cell
farthest from it instead); "growing" (the top end's means with the policies' blocks of pairs, one
value per cell, re-assigned by their best pair: at the top end the best block to the largest
policy, the next to the next; at the low end the best block to the smallest). ``oc_wrong_max``: the
largest wrong share over the truths; ``oc_held_when_true``: the held share where the truth is held;
``power_now``: the decided share under "observed".

**Extrapolation check** (:func:`extrapolation_table`): per (setting, cell) whose ladder reaches C,
the saturating fit on the points <= C / 2 predicts C. **Covered**: 0 lies inside the seed-bootstrap
95% interval of the error (predicted minus the observed mean over seeds at C, both recomputed on each
resample of the seeds, so the observed mean's own seed noise counts); ``inside`` (a description):
the observed mean lies inside the prediction's own interval. NaN with one seed.
:func:`extrapolation_summary` gives per target the median absolute error and the shares.

The figures (:func:`curves_figure`, :func:`rho_star_figure`, :func:`envelope_figure`) follow
:mod:`paper_repro.analysis.figures`. :func:`curve_analysis` runs everything, on the grid's curves
(:func:`grid_curves`: the grid runs' rows, labelled per setting, with the base policy's values).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.columns import NO_OC
from paper_repro.analysis.stats.best_sets import DEFAULT
from paper_repro.analysis.stats.optima import ALPHA, Cells, best_set, recipe_sd_estimate
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.config import Margins
from paper_repro.results import METRICS, POLICY_SIZES

BOOTSTRAP = 200  # seed resamples per fit's intervals
REPLICATES = 200  # simulated studies per truth for a claim's operating characteristic
RNG_SEED = 0
METRIC_RANGE = (0.0, 1.0)  # every metric is a share or a score
MAX_A_WIDTH = 0.25  # widest bootstrap interval of A that still names an asymptote
LACK_OF_FIT = 0.01  # the lack-of-fit test's level: an asymptote is withheld when the form clearly fails
MIN_CONVERGED = 0.9  # share of bootstrap refits that must converge for an interval
B_BOUNDS = (0.1, 10.0)  # the efficiency exponent's range
MID_DECADES = 3.0  # log10 C_mid within this many decades beyond the observed points
MID_STEP = 0.05  # the grid's step in log10 C_mid (decades)
B_STEPS = 40  # the grid's exponents, log-spaced over B_BOUNDS
VALUE_SPAN = 2.0  # A and a free R0 within this far outside the data's range
FULL = 1.0  # the full budget's point
PILOT_TOP = 0.5  # the extrapolation check fits the points up to C / 2
TOLERANCES = {"ftol": 1e-12, "xtol": 1e-12, "gtol": 1e-12}  # the refinement runs to convergence, not near it
PARAMETER_DECIMALS = 6  # a fit's A, R0 (metric units), log10 C_mid (decades) and B, rounded to 1e-6
LN10 = float(np.log(10.0))
DECIMALS = 6  # points are compared rounded to this
NUMBERS = ("seed", "point", "point_flops", "target_rho", "rho", *METRICS, *(f"base_{t}" for t in METRICS))


# ---------------------------------------------------------------------------------------- rows


def prepared(curves: pd.DataFrame) -> pd.DataFrame:
    """``curves`` with the numbers this module reads parsed and ``point`` rounded (a CSV's cells are
    text; ``point`` and ``point_flops`` are not among :data:`paper_repro.analysis.tables.frontiers.NUMERIC`)."""
    frame = curves.copy()
    for column in [c for c in NUMBERS if c in frame]:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    if "point" in frame:
        frame["point"] = frame["point"].round(DECIMALS)
    if "status" not in frame:
        frame["status"] = "ok"
    return frame


LABELS = ("stage", "setting", "cell", "target_rho", *(f"base_{t}" for t in METRICS))


def grid_curves(curves: pd.DataFrame, grid: pd.DataFrame) -> pd.DataFrame:
    """The curve rows of the runs in ``grid`` (the analysis' full-budget grid rows, labelled per
    setting as :func:`paper_repro.analysis.tables.frontiers.setting_rows` does), each labelled as its run is
    there (stage, setting, cell, target rho) with its run's ``base_<metric>``: a run that serves two
    settings (stage B's sparse is stage A's M) gives its curve to both; a run not in ``grid`` (a pilot,
    a fresh seed, TRL's default) is left out."""
    if curves.empty or grid.empty:
        return curves.iloc[0:0]
    labels = grid[["run_id", *(c for c in LABELS if c in grid)]].drop_duplicates()
    mine = curves.drop(columns=[c for c in labels.columns if c != "run_id" and c in curves])
    return mine.merge(labels, on="run_id", how="inner")


def ok(rows: pd.DataFrame) -> pd.DataFrame:
    """The measured rows (``status == "ok"``)."""
    return rows[rows["status"].astype(str) == "ok"]


def targets_of(curves: pd.DataFrame, targets: Sequence[str] | None = None) -> list[str]:
    """The targets (of ``targets``, default every metric) that ``curves`` measures somewhere."""
    wanted = METRICS if targets is None else targets
    return [t for t in wanted if t in curves and curves[t].notna().any()]


def size_order(labels) -> list[str]:
    """Policy labels smallest first: letters by :data:`POLICY_SIZES` ("S" < "M" < "L"), else by the
    number in the label ("1.5B" < "3B" < "7B"), else in the order given."""
    labels = list(dict.fromkeys(map(str, labels)))
    if all(s in POLICY_SIZES for s in labels):
        return sorted(labels, key=POLICY_SIZES.index)
    numbers = [re.search(r"\d+(\.\d+)?", s) for s in labels]
    if all(numbers):
        return [s for _, s in sorted(zip([float(m.group()) for m in numbers], labels, strict=True))]
    return labels


# ---------------------------------------------------------------------------------------- the fit


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
        return cls((float(x.min()) - MID_DECADES, float(x.max()) + MID_DECADES),
                   (float(values.min()) - VALUE_SPAN, float(values.max()) + VALUE_SPAN))  # fmt: skip


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
        res = least_squares(residuals, p0[:n], jac=jacobian, bounds=(lower[:n], upper[:n]), method="trf",
                            **TOLERANCES)  # fmt: skip
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


def _interval(draws: np.ndarray) -> tuple[float, float]:
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


def fit_cell(rows: pd.DataFrame, target: str, bootstrap: int = BOOTSTRAP, seed: int = RNG_SEED) -> dict:
    """One (setting, cell)'s fit of ``target`` over ``rows``: the fit table's columns after the
    identity (see :func:`fit_table`)."""
    curve = Curve.of(rows, target)
    mean = curve.summary()[0]
    out = {
        "A": NAN, "A_lo": NAN, "A_hi": NAN, "C_mid": NAN, "C_mid_lo": NAN, "C_mid_hi": NAN, "B": NAN,
        "status": "no fit", "reason": "", "A_fit": NAN, "R0": curve.base, "R0_fixed": bool(np.isfinite(curve.base)),
        "C_mid_point": NAN, "rmse": NAN, "p_lack_of_fit": NAN, "n_points": int(np.isfinite(mean).sum()),
        "n_seeds": curve.n_seeds,
    }  # fmt: skip
    fit = curve.fit() if curve.n_seeds else None
    if fit is None:
        need = free_parameters(curve.r0())
        out["reason"] = f"fewer than {need} points (the free parameters)" if out["n_points"] < need else (
            "the optimiser did not converge")  # fmt: skip
        return out
    draws = curve.refits(curve.resamples(bootstrap, seed))
    a_low, a_high = _interval(draws[:, 0]) if len(draws) else (NAN, NAN)
    m_low, m_high = _interval(draws[:, 1]) if len(draws) else (NAN, NAN)
    flops_per_point = 10**curve.x / curve.points
    p_lack = lack_of_fit(fit, curve)
    why = identification(fit, curve, a_low, a_high, p_lack)
    has = np.isfinite(mean)
    out.update(
        A_lo=a_low, A_hi=a_high, C_mid=fit.C_mid, C_mid_lo=10**m_low, C_mid_hi=10**m_high, B=fit.B,
        A_fit=fit.A, R0=fit.R0, C_mid_point=fit.C_mid / float(np.median(flops_per_point)),
        rmse=float(np.sqrt(np.mean((fit(curve.x[has]) - mean[has]) ** 2))), p_lack_of_fit=p_lack,
        status="not identified" if why else "identified", reason="; ".join(why),
    )  # fmt: skip
    if fit.log_mid < curve.x[has].min():
        early = "C_mid below the smallest point: the gain came before the ladder"
        out["reason"] = "; ".join([*why, early + ("" if why else ", only A is pinned")])
    if not why:
        out["A"] = fit.A
    return out


def fit_table(
    curves: pd.DataFrame,
    targets: Sequence[str] | None = None,
    bootstrap: int = BOOTSTRAP,
    seed: int = RNG_SEED,
) -> pd.DataFrame:
    """Per (setting, cell, target): the saturating fit over all seeds' ok rows and its status by the
    rule in the module docstring. Columns: ``stage, setting, cell, target_rho, target, A, A_lo, A_hi,
    C_mid, C_mid_lo, C_mid_hi`` (FLOPs), ``B, status`` (identified, not identified, no fit),
    ``reason, A_fit`` (the fitted asymptote, a description), ``R0, R0_fixed`` (the base policy's value
    given, or fitted), ``C_mid_point`` (C_mid over the full budget), ``rmse`` (of the point means),
    ``p_lack_of_fit, n_points, n_seeds``."""
    columns = ["stage", "setting", "cell", "target_rho", "target", "A", "A_lo", "A_hi", "C_mid", "C_mid_lo",
               "C_mid_hi", "B", "status", "reason", "A_fit", "R0", "R0_fixed", "C_mid_point", "rmse",
               "p_lack_of_fit", "n_points", "n_seeds"]  # fmt: skip
    curves = prepared(curves)
    out = []
    if not curves.empty:
        for (setting, cell), rows in curves.groupby(["setting", "cell"], sort=False):
            for t in targets_of(ok(rows), targets):
                out.append({
                    "stage": rows["stage"].iloc[0] if "stage" in rows else "", "setting": setting, "cell": cell,
                    "target_rho": float(rows["target_rho"].mean()), "target": t, **fit_cell(rows, t, bootstrap, seed),
                })  # fmt: skip
    return pd.DataFrame(out, columns=columns)


# ---------------------------------------------------------------------------------------- best sets per point


def _rhos_words(values) -> str:
    return " ".join(f"{v:.3f}" for v in values)


def _best_row(rows: pd.DataFrame, target: str, tau: float, alpha: float, noun: str = "cell") -> dict | None:
    """The cells of ``rows`` (one point, any status) that could be best for ``target`` among the
    measured ones, and the ones infeasible there."""
    cells = Cells.of(ok(rows), target)
    if cells.k == 0:
        return None
    keep = best_set(cells, tau, alpha)
    names = np.array(cells.names, dtype=object)
    targets = ok(rows).groupby("cell")["target_rho"].mean()
    infeasible = sorted(
        set(rows.loc[rows["status"].astype(str) == "infeasible", "cell"].astype(str)) - set(names)
    )
    top = int(np.argmax(cells.mean))
    notes = []
    if infeasible:
        notes.append(f"the feasible {noun}s only ({' '.join(infeasible)} infeasible)")
    if cells.pooled()[1] == 0:
        notes.append(f"no seed replication: every {noun} could be best")
    return {
        "best_cells": " ".join(names[keep]), "best_rhos": _rhos_words(cells.rho[keep]),
        "best_target_rhos": _rhos_words(targets.reindex(names[keep]).to_numpy(float)),
        "argmax_cell": names[top], "argmax_mean": float(cells.mean[top]), "n_cells": cells.k,
        "n_seeds": int(ok(rows)["seed"].nunique()), "cells": " ".join(names), "cell_rhos": _rhos_words(cells.rho),
        "infeasible_cells": " ".join(infeasible), "note": "; ".join(notes),
    }  # fmt: skip


RHO_STAR_COLUMNS = ["stage", "setting", "point", "point_flops", "target", "best_cells", "best_rhos",
                    "best_target_rhos", "argmax_cell", "argmax_mean", "n_cells", "n_seeds", "cells", "cell_rhos",
                    "infeasible_cells", "note"]  # fmt: skip


def rho_star_table(
    curves: pd.DataFrame,
    recipe_sd: float = 0.0,
    targets: Sequence[str] | None = None,
    alpha: float = ALPHA,
) -> pd.DataFrame:
    """rho*(C): per setting, point and target, the cells that could be best at ``1 - alpha``.
    ``best_rhos``: their measured mean rho spent up to the point (``best_target_rhos``: their recipes'
    targets); ``cells``, ``cell_rhos``: every cell measured there; ``infeasible_cells``: left out."""
    curves = prepared(curves)
    out = []
    if not curves.empty:
        for setting, rows in curves.groupby("setting", sort=False):
            for point, at in rows.groupby("point", sort=True):
                for t in targets_of(ok(at), targets):
                    best = _best_row(at, t, recipe_sd, alpha)
                    if best is not None:
                        out.append({"stage": at["stage"].iloc[0] if "stage" in at else "", "setting": setting,
                                    "point": point, "point_flops": float(at["point_flops"].mean()), "target": t,
                                    **best})  # fmt: skip
    return pd.DataFrame(out, columns=RHO_STAR_COLUMNS)


def pairs(curves: pd.DataFrame) -> pd.DataFrame:
    """Stage A's rows with each (policy, cell) pair as its own ``cell`` ("M:r50") and ``size`` its
    policy."""
    if not {"stage", "model", "cell"} <= set(curves.columns):
        return curves.iloc[0:0].assign(size=pd.Series(dtype=object))
    rows = curves[curves["stage"].astype(str) == "A"]
    return rows.assign(
        size=rows["model"].astype(str), cell=rows["model"].astype(str) + ":" + rows["cell"].astype(str)
    )


SIZE_STAR_COLUMNS = ["point", "point_flops", "target", "best_pairs", "best_sizes", "argmax_pair", "argmax_size",
                     "argmax_mean", "n_pairs", "n_seeds", "infeasible_pairs", "note"]  # fmt: skip


def size_star_table(
    curves: pd.DataFrame,
    recipe_sd: float = 0.0,
    targets: Sequence[str] | None = None,
    sizes: Sequence[str] | None = None,
    alpha: float = ALPHA,
) -> pd.DataFrame:
    """size*(C): per point and target, stage A's (policy, cell) pairs that could be best at equal
    FLOPs (each pair one cell of :func:`best_set`) and the policy sizes among them, smallest first
    (``sizes``: the labels in order; default :func:`size_order`)."""
    rows = pairs(prepared(curves))
    out = []
    if not rows.empty:
        found = size_order(rows["size"])
        order = [*sizes, *(s for s in found if s not in sizes)] if sizes is not None else found
        for point, at in rows.groupby("point", sort=True):
            for t in targets_of(ok(at), targets):
                best = _best_row(at, t, recipe_sd, alpha, "pair")
                if best is None:
                    continue
                chosen = best["best_cells"].split()
                found = {c.split(":")[0] for c in chosen}
                out.append({
                    "point": point, "point_flops": float(at["point_flops"].mean()), "target": t,
                    "best_pairs": best["best_cells"], "best_sizes": " ".join(s for s in order if s in found),
                    "argmax_pair": best["argmax_cell"], "argmax_size": best["argmax_cell"].split(":")[0],
                    "argmax_mean": best["argmax_mean"], "n_pairs": best["n_cells"], "n_seeds": best["n_seeds"],
                    "infeasible_pairs": best["infeasible_cells"],
                    "note": best["note"],
                })  # fmt: skip
    return pd.DataFrame(out, columns=SIZE_STAR_COLUMNS)


# ---------------------------------------------------------------------------------------- the claims


@dataclass(frozen=True)
class Ends:
    """A frontier (a setting's cells, or stage A's pairs) at the ladder's two ends: the smallest point
    where every one of its cells is measured and the largest."""

    name: str
    low_point: float
    high_point: float
    low: Cells
    high: Cells


def ends_of(rows: pd.DataFrame, target: str, name: str) -> Ends | str:
    """``rows``' frontier at its two ends for ``target`` (the reason why not, as a string, when fewer
    than two points measure every cell)."""
    everyone = set(rows["cell"].astype(str))
    measured = ok(rows).dropna(subset=[target, "rho"])
    full = [p for p, at in measured.groupby("point", sort=True) if set(at["cell"].astype(str)) >= everyone]
    if len(full) < 2:
        return f"{name}: fewer than two points measure every cell"
    low, high = (Cells.of(measured[measured["point"] == p], target) for p in (full[0], full[-1]))
    return Ends(name, float(full[0]), float(full[-1]), low, high)


def _best_names(cells: Cells, tau: float, alpha: float) -> list[str]:
    return [n for n, k in zip(cells.names, best_set(cells, tau, alpha), strict=True) if k]


def move_verdict(ends: Ends, tau: float, alpha: float) -> tuple[str, list[str], list[str]]:
    """One setting: "held" (moves: its two ends' best sets share no cell), "not held" (stays: both are
    the same single cell) or "inconclusive", with the two sets."""
    low, high = _best_names(ends.low, tau, alpha), _best_names(ends.high, tau, alpha)
    if not set(low) & set(high):
        return "held", low, high
    if len(low) == 1 and low == high:
        return "not held", low, high
    return "inconclusive", low, high


def aggregate_moves(verdicts: Sequence[str]) -> str:
    """Over settings: held if more than half move, not held if more than half stay, heterogeneous if
    some move and some stay, inconclusive otherwise."""
    n, moved, stayed = len(verdicts), list(verdicts).count("held"), list(verdicts).count("not held")
    if n and moved > n / 2:
        return "held"
    if n and stayed > n / 2:
        return "not held"
    return "heterogeneous" if moved and stayed else "inconclusive"


def moves_decide(ends: Sequence[Ends], tau: float = 0.0, alpha: float = ALPHA) -> Result:
    """The claim "the best allocation moves with the budget" over settings' :class:`Ends` (rule in the
    module docstring; the sets at ``1 - alpha / (2 S)``)."""
    if not ends:
        return Result(note="no setting with two budget points that measure every cell")
    level = alpha / (2 * len(ends))
    per = [(e, *move_verdict(e, tau, level)) for e in ends]
    verdicts = [v for _, v, _, _ in per]
    words = {"held": "moves", "not held": "stays", "inconclusive": "undecided"}
    note = "; ".join(f"{e.name}: {words[v]}" for e, v, _, _ in per)
    sets = "; ".join(f"{e.name} {e.low_point:g}C {{{' '.join(lo)}}} -> {e.high_point:g}C {{{' '.join(hi)}}}"
                     for e, _, lo, hi in per)  # fmt: skip
    return Result(verdicts.count("held") / len(verdicts), verdict=aggregate_moves(verdicts), note=note,
                  best_cells=sets)  # fmt: skip


def grow_verdict(low_sizes: Sequence[str], high_sizes: Sequence[str], order: Sequence[str]) -> str:
    """held if every size at the top end is larger than every size at the low end; not held if every
    one at the top end is no larger than every one at the low end; inconclusive otherwise."""
    rank = {s: i for i, s in enumerate(order)}
    low, high = [rank[s] for s in low_sizes], [rank[s] for s in high_sizes]
    if min(high) > max(low):
        return "held"
    if max(high) <= min(low):
        return "not held"
    return "inconclusive"


def _sizes(names: Sequence[str], order: Sequence[str]) -> list[str]:
    found = {n.split(":")[0] for n in names}
    return [s for s in order if s in found]


def grows_decide(ends: Ends | None, order: Sequence[str], tau: float = 0.0, alpha: float = ALPHA) -> Result:
    """The claim "as the budget grows, the best policy gets bigger" from stage A's pairs at the two ends
    (rule in the module docstring; the sets at ``1 - alpha / 2``). ``our_value``: size steps from the
    low end's best-mean pair's policy to the top end's."""
    if ends is None:
        return Result(note="no stage A pairs at two budget points")
    low, high = _best_names(ends.low, tau, alpha / 2), _best_names(ends.high, tau, alpha / 2)
    low_sizes, high_sizes = _sizes(low, order), _sizes(high, order)
    verdict = grow_verdict(low_sizes, high_sizes, order)
    rank = {s: i for i, s in enumerate(order)}
    argmax = [_top(c).split(":")[0] for c in (ends.low, ends.high)]
    note = (f"sizes that could be best: {ends.low_point:g}C {{{' '.join(low_sizes)}}}, "
            f"{ends.high_point:g}C {{{' '.join(high_sizes)}}}")  # fmt: skip
    if verdict == "not held" and high_sizes == low_sizes == [order[-1]]:
        note += "; the largest policy is best at both ends: the ladder cannot show it grow"
    sets = f"{ends.low_point:g}C {{{' '.join(low)}}} -> {ends.high_point:g}C {{{' '.join(high)}}}"
    return Result(float(rank[argmax[1]] - rank[argmax[0]]), verdict=verdict, note=note, best_cells=sets)


# ---------------------------------------------------------------------------------------- operating characteristics


def _noise_sd(cells: Cells) -> np.ndarray | None:
    """Each cell's seed SD (the pooled one where a cell has one seed); None without replication."""
    pooled, df = cells.pooled()
    if df == 0:
        return None
    return np.sqrt(np.where(cells.n >= 2, cells.var, pooled))


def _truth(cells: Cells, mean: np.ndarray) -> Cells:
    """``cells`` with true means ``mean`` and its seed SDs as the variance to simulate with."""
    sd = _noise_sd(cells)
    return Cells(cells.names, cells.rho, np.asarray(mean, float), sd**2, cells.n)


def _draw(truth: Cells, rng: np.random.Generator) -> Cells:
    """One simulated frontier: each cell's ``n`` seed values normal around its true mean."""
    values = [
        rng.normal(m, np.sqrt(v), size=int(k)) for m, v, k in zip(truth.mean, truth.var, truth.n, strict=True)
    ]
    var = np.array([v.var(ddof=1) if len(v) > 1 else NAN for v in values])
    return Cells(truth.names, truth.rho, np.array([v.mean() for v in values]), var, truth.n)


def _swapped(mean: np.ndarray, i: int, j: int) -> np.ndarray:
    out = np.array(mean, float)
    out[i], out[j] = out[j], out[i]
    return out


def _means_in(source: Cells, order: Cells) -> np.ndarray:
    """``source``'s means in ``order``'s cell order (the two ends hold the same cells)."""
    where = {n: i for i, n in enumerate(source.names)}
    return np.array([source.mean[where[n]] for n in order.names])


def _top(cells: Cells) -> str:
    return cells.names[int(np.argmax(cells.mean))]


def _mirrored(cells: Cells, mean: np.ndarray) -> np.ndarray:
    """``mean`` (in ``cells``' order of rho) reversed in rho, so that its best cell moves to the other
    side; a best cell in the middle is swapped with the cell farthest from it instead."""
    out = np.array(mean, float)[::-1].copy()
    top = int(np.argmax(mean))
    if int(np.argmax(out)) == top:
        out = _swapped(mean, top, int(np.argmax(np.abs(cells.rho - cells.rho[top]))))
    return out


def move_truths(ends: Sequence[Ends]) -> dict[str, list[Ends]]:
    """The truths :func:`moves_operating` simulates (module docstring): observed, static, moving."""
    out: dict[str, list[Ends]] = {"observed": [], "static": [], "moving": []}
    for e in ends:
        high = _truth(e.high, e.high.mean)
        static = _means_in(e.high, e.low)
        for name, low in (("observed", e.low.mean), ("static", static), ("moving", _mirrored(e.low, static))):
            out[name].append(Ends(e.name, e.low_point, e.high_point, _truth(e.low, low), high))
    return out


def _operating(
    truths: Mapping[str, list[Ends]],
    decide: Callable[[list[Ends]], str],
    true_verdict: Callable[[list[Ends]], str],
    replicates: int,
    seed: int,
) -> dict:
    """The claims table's ``oc_*`` and power columns from ``replicates`` simulated studies per truth."""
    rng = np.random.default_rng(seed)
    wrong, agreement, held_when_true, power = {}, {}, [], NAN
    for name, truth in truths.items():
        truly = true_verdict(truth)
        counts: dict[str, int] = {}
        for _ in range(replicates):
            drawn = [
                Ends(e.name, e.low_point, e.high_point, _draw(e.low, rng), _draw(e.high, rng)) for e in truth
            ]
            v = decide(drawn)
            counts[v] = counts.get(v, 0) + 1
        share = {v: c / replicates for v, c in counts.items()}
        wrong[name] = sum(p for v, p in share.items() if v != "inconclusive" and v != truly)
        agreement[name] = sum(p * p for p in share.values())
        if truly == "held":
            held_when_true.append(share.get("held", 0.0))
        if name == "observed":
            power = 1.0 - share.get("inconclusive", 0.0)
    worst = max(wrong, key=wrong.get)
    seeds = sorted({int(n) for e in truths["observed"] for n in e.low.n})
    return {
        "oc_wrong_max": wrong[worst], "oc_wrong_truth": worst if wrong[worst] > 0 else "",
        "oc_agreement_min": min(agreement.values()),
        "oc_held_when_true": min(held_when_true) if held_when_true else NAN,
        "oc_note": (f"{len(truths)} truths ({', '.join(truths)}), {replicates} simulated studies each, at the data's "
                    f"seeds ({' '.join(map(str, seeds))} per cell) and seed SDs; wrong: "
                    + ", ".join(f"{k} {v:.2f}" for k, v in wrong.items())),
        "power_now": power, "seeds_for_80pct_power": NAN,
        "power_note": "share of simulated studies around the data's own means that decide (not simulated over seed counts)",
    }  # fmt: skip


def _no_oc(reason: str) -> dict:
    return {**NO_OC, "oc_note": f"not simulated: {reason}", "power_now": NAN, "seeds_for_80pct_power": NAN,
            "power_note": f"not simulated: {reason}"}  # fmt: skip


def moves_operating(
    ends: Sequence[Ends], tau: float = 0.0, replicates: int = REPLICATES, seed: int = RNG_SEED
) -> dict:
    """How often "the best allocation moves with the budget" is wrong, by simulation (module
    docstring): the claims table's ``oc_*`` and power columns."""
    ends = list(ends)
    if not ends:
        return _no_oc("no setting with two budget points")
    if any(_noise_sd(c) is None for e in ends for c in (e.low, e.high)):
        return _no_oc("one seed per cell: no seed SD to simulate with")

    def truly(truth: list[Ends]) -> str:
        return aggregate_moves(["held" if _top(e.low) != _top(e.high) else "not held" for e in truth])

    return _operating(move_truths(ends), lambda d: moves_decide(d, tau).verdict, truly, replicates, seed)


def _sizes_ranked(cells: Cells, mean: np.ndarray, order: Sequence[str], best_first: bool) -> np.ndarray:
    """``mean`` with the sizes' blocks of pairs (one value per cell) permuted so that the size whose
    best pair is highest becomes the largest size (``best_first``: the smallest), the next the next,
    and so on; a size missing a pair keeps its own."""
    value = dict(zip(cells.names, mean, strict=True))
    present = [s for s in order if any(n.startswith(f"{s}:") for n in cells.names)]
    block = {s: max(v for n, v in value.items() if n.startswith(f"{s}:")) for s in present}
    ranked = sorted(present, key=block.get, reverse=True)
    targets = present if best_first else present[::-1]
    source = dict(zip(targets, ranked, strict=True))
    out = []
    for n in cells.names:
        size, cell = n.split(":", 1)
        moved = f"{source[size]}:{cell}"
        out.append(value.get(moved, value[n]))
    return np.array(out)


def grow_truths(ends: Ends, order: Sequence[str]) -> dict[str, list[Ends]]:
    """The truths :func:`grows_operating` simulates (module docstring): observed, static, growing."""
    static = _means_in(ends.high, ends.low)
    grown_high = _sizes_ranked(ends.high, ends.high.mean, order, best_first=False)
    grown_low = _sizes_ranked(ends.low, static, order, best_first=True)

    def make(low: np.ndarray, high: np.ndarray) -> list[Ends]:
        return [
            Ends(ends.name, ends.low_point, ends.high_point, _truth(ends.low, low), _truth(ends.high, high))
        ]

    return {"observed": make(ends.low.mean, ends.high.mean), "static": make(static, ends.high.mean),
            "growing": make(grown_low, grown_high)}  # fmt: skip


def grows_operating(
    ends: Ends | None,
    order: Sequence[str],
    tau: float = 0.0,
    replicates: int = REPLICATES,
    seed: int = RNG_SEED,
) -> dict:
    """How often "as the budget grows, the best policy gets bigger" is wrong, by simulation (module
    docstring): the claims table's ``oc_*`` and power columns."""
    if ends is None:
        return _no_oc("no stage A pairs at two budget points")
    if _noise_sd(ends.low) is None or _noise_sd(ends.high) is None:
        return _no_oc("one seed per pair: no seed SD to simulate with")
    rank = {s: i for i, s in enumerate(order)}

    def truly(truth: list[Ends]) -> str:
        e = truth[0]
        low, high = (rank[_top(c).split(":")[0]] for c in (e.low, e.high))
        return "held" if high > low else "not held"

    return _operating(grow_truths(ends, order), lambda d: grows_decide(d[0], order, tau).verdict, truly,
                      replicates, seed)  # fmt: skip


# ---------------------------------------------------------------------------------------- the claims rows


def _target_words(target: str) -> str:
    from paper_repro.results import TARGET_WORDS

    return TARGET_WORDS.get(target, target)


def _recipe_words(tau: float) -> str:
    return f"a recipe effect of SD {tau:.3g}"


def moves_test(target: str = "native_reward", tau: float = 0.0) -> str:
    return (
        f"per distinct setting, the cells that could be best for {_target_words(target)} at 95% (Gupta's subset, "
        f"Bonferroni over the two ends of every setting, seed noise plus {_recipe_words(tau)}) at the budget "
        "ladder's two ends (the smallest point where every cell of the setting is measured, and the largest): "
        "a setting moves if the two sets share no cell, stays if both are the same single cell, is undecided "
        "otherwise; held if more than half of the settings move, not held if more than half stay, heterogeneous "
        "if some move and some stay, inconclusive otherwise (our_value: share of settings that move)"
    )


def grows_test(target: str = "native_reward", tau: float = 0.0) -> str:
    return (
        f"stage A's (policy, cell) pairs at equal FLOPs, each its own cell: the pairs that could be best for "
        f"{_target_words(target)} at 95% (as for the allocation, Bonferroni over the two ends, seed noise plus "
        f"{_recipe_words(tau)}) at the ladder's two ends (the smallest point where every pair is measured, and "
        "the largest), and the policy sizes among them: held if every size at the top end is larger than every "
        "size at the low end; not held if every size at the top end is no larger than every size at the low "
        "end; inconclusive otherwise (our_value: size steps from the low end's best-mean pair's policy to the "
        "top end's)"
    )


def setting_ends(curves: pd.DataFrame, target: str, shared: Mapping[str, str] | None = None) -> list[Ends]:
    """Every distinct setting's :class:`Ends` (settings in ``shared``, another's runs, left out)."""
    curves = prepared(curves)
    out = []
    if curves.empty or target not in curves:
        return out
    for setting, rows in curves.groupby("setting", sort=False):
        if shared and setting in shared:
            continue
        e = ends_of(rows, target, str(setting))
        if isinstance(e, Ends):
            out.append(e)
    return out


def size_ends(curves: pd.DataFrame, target: str) -> Ends | None:
    """Stage A's pairs at the two ends (None when fewer than two points measure every pair)."""
    rows = pairs(prepared(curves))
    if rows.empty or target not in rows or rows["size"].nunique() < 2:
        return None
    e = ends_of(rows, target, "stage A")
    return e if isinstance(e, Ends) else None


# ---------------------------------------------------------------------------------------- extrapolation


EXTRAPOLATION_COLUMNS = ["stage", "setting", "cell", "target_rho", "target", "n_points", "n_seeds", "predicted",
                         "pred_lo", "pred_hi", "observed", "error", "error_lo", "error_hi", "abs_error", "inside",
                         "covered", "status"]  # fmt: skip


def extrapolate_cell(
    rows: pd.DataFrame, target: str, bootstrap: int = BOOTSTRAP, seed: int = RNG_SEED
) -> dict | None:
    """One (setting, cell): the fit on the points <= :data:`PILOT_TOP` predicting :data:`FULL` (None
    when its ladder does not measure C). ``inside``: the observed mean lies in the prediction's
    interval; ``covered``: 0 lies in the error's interval (both recomputed on each resample of seeds,
    so the observed mean's own seed noise counts too)."""
    curve = Curve.of(rows, target)
    at_full = np.isclose(curve.points, FULL)
    if not at_full.any() or curve.n_seeds == 0:
        return None
    column = curve.values[:, np.flatnonzero(at_full)[0]]
    observed = float(np.nanmean(column))
    x_full = float(curve.x[at_full][0])
    pilot = curve.upto(PILOT_TOP)
    out = {"n_points": int(np.isfinite(pilot.summary()[0]).sum()), "n_seeds": curve.n_seeds, "predicted": NAN,
           "pred_lo": NAN, "pred_hi": NAN, "observed": observed, "error": NAN, "error_lo": NAN, "error_hi": NAN,
           "abs_error": NAN, "inside": NAN, "covered": NAN}  # fmt: skip
    fit = pilot.fit()
    if fit is None:
        return {**out, "status": "no fit: too few points up to C/2"}
    predicted = float(fit(x_full))
    out.update(predicted=predicted, error=predicted - observed, abs_error=abs(predicted - observed))
    picks = pilot.resamples(bootstrap, seed)
    if len(picks) == 0:
        return {**out, "status": "no interval: one seed"}
    draws = pilot.refits(picks)
    predictions = saturating(x_full, *draws.T)
    with np.errstate(invalid="ignore"):
        observed_draws = np.nanmean(column[picks], axis=1)
    low, high = _interval(predictions)
    e_low, e_high = _interval(predictions - observed_draws)
    out.update(pred_lo=low, pred_hi=high, error_lo=e_low, error_hi=e_high)
    if not (np.isfinite(low) and np.isfinite(e_low)):
        return {**out, "status": "no interval: refits failed"}
    out.update(inside=bool(low <= observed <= high), covered=bool(e_low <= 0 <= e_high))
    return {**out, "status": "ok"}


def extrapolation_table(
    curves: pd.DataFrame,
    targets: Sequence[str] | None = None,
    bootstrap: int = BOOTSTRAP,
    seed: int = RNG_SEED,
) -> pd.DataFrame:
    """Per (setting, cell, target) whose ladder reaches C: the prediction of C from the points <= C/2
    with its seed-bootstrap 95% interval, the observed mean over seeds at C, the error (predicted -
    observed) with its paired interval, ``inside`` (the observed mean in the prediction's interval)
    and ``covered`` (0 in the error's interval); NaN without an interval."""
    curves = prepared(curves)
    out = []
    if not curves.empty:
        for (setting, cell), rows in curves.groupby(["setting", "cell"], sort=False):
            for t in targets_of(ok(rows), targets):
                check = extrapolate_cell(rows, t, bootstrap, seed)
                if check is not None:
                    out.append({"stage": rows["stage"].iloc[0] if "stage" in rows else "", "setting": setting,
                                "cell": cell, "target_rho": float(rows["target_rho"].mean()), "target": t,
                                **check})  # fmt: skip
    return pd.DataFrame(out, columns=EXTRAPOLATION_COLUMNS)


def extrapolation_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per target: how many cells were checked and predicted, the median absolute error, and over the
    cells with an interval the share covered (0 in the error's paired interval: the rule) and the share
    inside (the observed mean in the prediction's interval, which ignores the observed mean's noise)."""
    columns = ["target", "n_cells", "n_predicted", "median_abs_error", "n_intervals", "share_covered",
               "share_inside", "note"]  # fmt: skip
    out = []
    for t, g in table.groupby("target", sort=False) if len(table) else []:
        predicted = g["abs_error"].dropna()
        covered = g["covered"].dropna().astype(bool)
        inside = g["inside"].dropna().astype(bool)
        statuses = g.loc[g["status"] != "ok", "status"].value_counts()
        note = (
            ""
            if len(covered)
            else "coverage not assessed: " + ", ".join(f"{k} ({v} of {len(g)})" for k, v in statuses.items())
        )
        out.append({"target": t, "n_cells": len(g), "n_predicted": len(predicted),
                    "median_abs_error": float(predicted.median()) if len(predicted) else NAN,
                    "n_intervals": len(covered), "share_covered": float(covered.mean()) if len(covered) else NAN,
                    "share_inside": float(inside.mean()) if len(inside) else NAN, "note": note})  # fmt: skip
    return pd.DataFrame(out, columns=columns)


# ---------------------------------------------------------------------------------------- figures


def _setup():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from paper_repro.analysis.figures.style import theme

    return plt, theme()


def _save(fig, out_dir: str | Path, name: str) -> Path:
    """``fig`` as PNG and PDF in ``out_dir`` (fixed metadata, as :mod:`paper_repro.analysis.figures`);
    the PNG's path."""
    import matplotlib.pyplot as plt

    from paper_repro.analysis.figures.style import file_metadata

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for ext in ("png", "pdf"):
        fig.savefig(out / f"{name}.{ext}", dpi=150, bbox_inches="tight", metadata=file_metadata(ext))
    plt.close(fig)
    return out / f"{name}.png"


def _line(label: str, **style):
    from matplotlib.lines import Line2D

    style.setdefault("color", "grey")
    return Line2D([], [], label=label, **style)


def _panels(plt, n: int, width: float = 4.4, height: float = 3.0):
    from paper_repro.analysis.figures.style import panel_grid

    rows, cols = panel_grid(n)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols + 1.8, height * rows + 0.8), squeeze=False,
                             layout="constrained")  # fmt: skip
    flat = axes.ravel()
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _mean_ci(values: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its 95% t interval (NaN with one value)."""
    from scipy import stats

    values = values[np.isfinite(values)]
    if len(values) < 2:
        return float(values.mean()) if len(values) else NAN, NAN
    return float(values.mean()), float(
        stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    )


def _cell_palette(sns, rows: pd.DataFrame) -> dict[str, tuple]:
    order = rows.groupby("cell")["target_rho"].mean().sort_values(kind="stable").index.astype(str)
    return dict(zip(order, sns.color_palette("viridis", len(order)), strict=False))


def curves_figure(curves: pd.DataFrame, fits: pd.DataFrame, target: str, out_dir) -> Path | None:
    """``target`` against log C per cell (colour, by target rho), one panel per setting: seed means with
    95% intervals (points) and the saturating fits (lines: solid where the asymptote is identified,
    dashed where not)."""
    data = ok(prepared(curves)).dropna(subset=[target])
    if data.empty:
        return None
    plt, sns = _setup()
    settings = list(dict.fromkeys(data["setting"]))
    palette = _cell_palette(sns, data)
    fig, axes = _panels(plt, len(settings))
    for ax, setting in zip(axes, settings, strict=True):
        rows = data[data["setting"] == setting]
        for cell, g in rows.groupby("cell", sort=False):
            color = palette[str(cell)]
            stats = [
                (_mean_ci(p[target].to_numpy(float)), p["point_flops"].mean()) for _, p in g.groupby("point")
            ]
            flops = np.array([f for _, f in stats])
            mean, half = np.array([m for (m, _), _ in stats]), np.array([h for (_, h), _ in stats])
            ax.errorbar(flops, mean, yerr=np.nan_to_num(half, nan=0.0), ls="none", marker="o", ms=3.5, capsize=2,
                        color=color)  # fmt: skip
            fit = fits[(fits["setting"] == setting) & (fits["cell"] == cell) & (fits["target"] == target)]
            if len(fit) and np.isfinite(fit["A_fit"].iloc[0]):
                r = fit.iloc[0]
                grid = np.linspace(np.log10(flops.min()), np.log10(flops.max()), 100)  # no extrapolation
                y = saturating(grid, r["A_fit"], np.log10(r["C_mid"]), r["B"], r["R0"])
                ax.plot(10**grid, y, color=color, lw=1.3, ls="-" if r["status"] == "identified" else "--")
        ax.set_xscale("log")
        ax.set_title(f"{setting}", fontsize=9)
        ax.set_xlabel("compute C (FLOPs, log scale)")
        ax.set_ylabel(f"{_target_words(target)} (mean over seeds)")
    handles = [_line(c, color=col, marker="o", ms=4) for c, col in palette.items()]
    handles += [_line("fit: asymptote identified", lw=1.3), _line("fit: not identified", lw=1.3, ls="--"),
                _line("95% interval over seeds", marker="|", ms=8, ls="none")]  # fmt: skip
    fig.legend(handles=handles, title="cell", loc="outside right upper", fontsize=7)
    fig.suptitle(f"{_target_words(target)} against compute, per cell: R0 + (A - R0) / (1 + (C_mid/C)^B)",
                 fontsize=10)  # fmt: skip
    return _save(fig, out_dir, f"curves_{target}")


def rho_star_figure(rho_star: pd.DataFrame, target: str, out_dir) -> Path | None:
    """rho*(C) per setting: at each budget point every measured cell at its measured rho (open grey),
    the cells that could be best at 95% (filled) and the best-mean cell (a star)."""
    data = rho_star[rho_star["target"] == target]
    if data.empty:
        return None
    plt, _ = _setup()
    settings = list(dict.fromkeys(data["setting"]))
    fig, axes = _panels(plt, len(settings), height=2.8)
    for ax, setting in zip(axes, settings, strict=True):
        marks: dict[str, list[tuple[float, float]]] = {"best": [], "other": [], "argmax": []}
        for r in data[data["setting"] == setting].itertuples():
            best = set(str(r.best_cells).split())
            for cell, rho in zip(str(r.cells).split(), map(float, str(r.cell_rhos).split()), strict=True):
                marks["best" if cell in best else "other"].append((r.point_flops, rho))
                if cell == r.argmax_cell:
                    marks["argmax"].append((r.point_flops, rho))
        for kind, style in (("other", {"marker": "o", "mfc": "none", "color": "grey", "ms": 5}),
                            ("best", {"marker": "o", "color": "C0", "ms": 6}),
                            ("argmax", {"marker": "*", "color": "black", "ms": 7})):  # fmt: skip
            if marks[kind]:
                ax.plot(*zip(*marks[kind], strict=True), ls="none", **style)
        ax.set_xscale("log")
        ax.set_ylim(0, 1)
        ax.set_title(setting, fontsize=9)
        ax.set_xlabel("compute C (FLOPs, log scale)")
        ax.set_ylabel("measured rho of the cell")
    handles = [_line("could be best at 95%", color="C0", marker="o", ls="none", ms=6),
               _line("measured, not in the set", marker="o", mfc="none", ls="none", ms=5),
               _line("best-mean cell", color="black", marker="*", ls="none", ms=7)]  # fmt: skip
    fig.legend(handles=handles, loc="outside right upper", fontsize=7)
    fig.suptitle(
        f"rho*(C): the cells that could be best for {_target_words(target)} at each budget", fontsize=10
    )
    return _save(fig, out_dir, f"rho_star_vs_budget_{target}")


def envelope_figure(
    curves: pd.DataFrame, size_star: pd.DataFrame, target: str, out_dir, sizes: Sequence[str] | None = None
) -> Path | None:
    """The compute-optimal envelope: per stage A policy size, its best cell's mean against C (a line),
    the envelope (the maximum over sizes, dashed) and, at each point, the sizes that could be best
    (size*(C), ringed and named)."""
    rows = ok(pairs(prepared(curves))).dropna(subset=[target])
    if rows.empty:
        return None
    from paper_repro.analysis.figures.style import colors

    plt, _sns = _setup()
    order = list(sizes) if sizes is not None else size_order(rows["size"])
    palette = colors(order)  # one colour per policy size, as in every figure
    means = rows.groupby(["size", "point", "cell"])[target].mean()
    flops = rows.groupby("point")["point_flops"].mean()
    best = means.groupby(level=["size", "point"]).max()
    fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
    for size in order:
        if size not in best.index.get_level_values(0):
            continue
        line = best.loc[size]
        ax.plot(flops.reindex(line.index), line.to_numpy(), "o-", color=palette[size], ms=4, label=size)
    envelope = best.groupby(level="point").max()
    ax.plot(flops.reindex(envelope.index), envelope.to_numpy(), "--", color="black", lw=1.2)
    stars = size_star[size_star["target"] == target]
    for r in stars.itertuples():
        for size in str(r.best_sizes).split():
            if (size, r.point) in best.index:
                ax.plot(r.point_flops, best.loc[(size, r.point)], "o", mfc="none", mec=palette.get(size, "grey"),
                        ms=10, mew=1.4)  # fmt: skip
        if r.point in envelope.index:
            ax.annotate(str(r.best_sizes), (r.point_flops, envelope.loc[r.point]), textcoords="offset points",
                        xytext=(0, 8), ha="center", fontsize=7)  # fmt: skip
    ax.set_xscale("log")
    ax.margins(y=0.12)  # room for the size names above the envelope
    ax.set_xlabel("compute C (FLOPs, log scale)")
    ax.set_ylabel(f"{_target_words(target)}\n(the size's best cell, mean over seeds)")
    handles = [
        _line(s, color=palette[s], marker="o", ms=4) for s in order if s in best.index.get_level_values(0)
    ]
    handles += [_line("envelope: the best over sizes and allocations", ls="--", color="black", lw=1.2),
                _line("ringed and named: the sizes that could be best (size*(C))", marker="o", mfc="none",
                      ls="none", ms=9)]  # fmt: skip
    ax.legend(handles=handles, title="policy", fontsize=7, title_fontsize=7, loc="center left",
              bbox_to_anchor=(1.02, 0.5))  # fmt: skip
    ax.set_title("The compute-optimal envelope\nover policy sizes and allocations (stage A)", fontsize=9)
    return _save(fig, out_dir, f"compute_optimal_envelope_{target}")


# ---------------------------------------------------------------------------------------- entry point


@dataclass
class CurveAnalysis:
    """The curve analysis' tables and the figures' paths."""

    fits: pd.DataFrame
    rho_star: pd.DataFrame
    size_star: pd.DataFrame
    extrapolation: pd.DataFrame
    extrapolation_summary: pd.DataFrame
    recipe_sd: float = NAN
    figures: list[Path] = field(default_factory=list)


def curve_recipe_sd(
    curves: pd.DataFrame, margins: Margins = DEFAULT, recipe_sd: float | None = None
) -> float:
    """The recipe effect the best sets allow for: ``recipe_sd`` when given, else the margins', else the
    one the curves' full-budget frontiers show (:func:`paper_repro.analysis.stats.optima.recipe_sd_estimate`
    over every setting and target at point 1)."""
    if recipe_sd is not None:
        return float(recipe_sd)
    if margins.recipe_sd is not None:
        return float(margins.recipe_sd)
    rows = ok(prepared(curves))
    if rows.empty or "point" not in rows:
        return 0.0
    full = rows[np.isclose(rows["point"], FULL)]
    frontiers = [Cells.of(g, t) for _, g in full.groupby("setting") for t in targets_of(g)]
    return recipe_sd_estimate(frontiers)


def curve_analysis(
    curves: pd.DataFrame,
    margins: Margins = DEFAULT,
    recipe_sd: float | None = None,
    out_dir: str | Path | None = None,
    *,
    shared: Mapping[str, str] | None = None,
    sizes: Sequence[str] | None = None,
    targets: Sequence[str] | None = None,
    figure_targets: Sequence[str] = ("native_reward",),
    bootstrap: int = BOOTSTRAP,
    seed: int = RNG_SEED,
) -> CurveAnalysis:
    """Every table of the curve analysis of ``curves`` (rows of ``curves.csv``; numbers may be text),
    and with ``out_dir`` its figures for ``figure_targets``. ``recipe_sd``: the recipe effect the best
    sets allow for (:func:`curve_recipe_sd`); ``shared``: settings that are another's runs (counted
    once by the claims); ``sizes``: stage A's policy labels smallest first. Empty ``curves``: empty
    tables, the claims inconclusive, no figures."""
    curves = prepared(curves)
    distinct = curves[~curves["setting"].isin(list(shared or {}))] if "setting" in curves else curves
    tau = curve_recipe_sd(distinct, margins, recipe_sd)
    fits = fit_table(curves, targets, bootstrap, seed)
    rho_star = rho_star_table(curves, tau, targets)
    size_star = size_star_table(curves, tau, targets, sizes)
    extrapolation = extrapolation_table(curves, targets, bootstrap, seed)
    written: list[Path] = []
    if out_dir is not None and not curves.empty:
        for t in figure_targets:
            # a setting that is another's runs (stage B's sparse) is drawn once, as that setting
            drawn = rho_star[~rho_star["setting"].isin(list(shared or {}))] if len(rho_star) else rho_star
            for path in (curves_figure(distinct, fits, t, out_dir), rho_star_figure(drawn, t, out_dir),
                         envelope_figure(curves, size_star, t, out_dir, sizes)):  # fmt: skip
                if path is not None:
                    written.append(path)
    return CurveAnalysis(fits, rho_star, size_star, extrapolation, extrapolation_summary(extrapolation),
                         tau, written)  # fmt: skip
