"""The size contrasts of the compute curves, size*(C) (our addition), declared in the registry: at
the ladder's top, does stage A's largest policy beat its smallest (``size_star.top``), and does its
advantage grow with the budget (``curves.grows``)? They read the grid runs' points on their budget
ladders (``curves.csv``: :mod:`paper_repro.analysis.tables.curves`) at the two points of
:mod:`paper_repro.analysis.claims.curves` (the top, where both policies measure a cell in common, and
the low end, where every pair of those cells has left the base policy), and simulate their own data
under their truths.

- "at the ladder's top, the largest policy beats the smallest" (``size_star.top``,
  :func:`sizes_decide`): stage A's largest policy minus its smallest, each the mean over the cells
  both share, at the top, as a contrast of cell means paired by seed
  (:func:`paper_repro.analysis.stats.contrasts.contrast`: the (policy, cell, point) triples are the
  cells of one pseudo-setting, so a seed's runs pair across policies and points) at the level *any
  recipe at this rho* (each cell's recipe effect, the grid's REML recipe SD, in the se; Satterthwaite
  df); :func:`paper_repro.analysis.stats.contrasts.directional_verdict` against ``margins.gain``:
  held when its 90% interval lies above 0, not held when it lies below the margin. The note gives the
  same contrast at the low end, and both levels.
- "as the budget grows, the best policy gets bigger" (``curves.grows``), read as: the largest
  policy's advantage grows from the low end to the top: the contrast at the top minus the same
  contrast at the low end, decided the same way.

**Operating characteristics** (:func:`sizes_operating`): studies drawn from the contrast's cell
means with each cell's recipe effect N(0, tau^2) and the seed SD left after the seed block (the
additive model's residual), decided by a vectorised path of the same contrast and verdict
(:func:`paired_estimates`, :func:`directional_codes`, tested against them); truths "observed",
"equal sizes" (0), "reversed" and "two margins"; wrong = held where the truth is at or below 0, not
held where it is at or above the margin. ``oc_held_when_true``/``oc_not_held_when_false``: the
smallest held (not held) share over truths whose verdict is held (not held); ``power_now``: the
decided share under "observed", also over :data:`POWER_SEEDS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.curves import (
    REPLICATES,
    RNG_SEED,
    TARGET,
    _no_oc,
    _replicates,
    _target_words,
)
from paper_repro.analysis.claims.registry import OwnSimulation, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.best_sets import DEFAULT
from paper_repro.analysis.stats.contrasts import ANY, THESE, Estimate, contrast, directional_verdict
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.analysis.tables.curve_rows import prepared, size_order
from paper_repro.analysis.tables.curves import left_base, ok, pairs

POWER_SEEDS = (2, 3, 5, 8, 10, 20, 40)  # seed counts the size contrasts' power column tries
LEVEL = 0.90  # the size contrasts' two-sided interval: each side a one-sided test at 5%


# ---------------------------------------------------------------------------------------- the contrasts

STAGE_A = "stage A"  # the one pseudo-setting the size contrasts read: every (size, cell, point) a cell of it


@dataclass(frozen=True)
class SizeContrast:
    """A contrast of stage A's policies on the curves: ``rows`` (setting :data:`STAGE_A`, each cell
    "L:r50@2" a (size, cell, point), ``seed``, the target) and its cell ``weights``; ``points``: each
    point read and its sign; ``cells``: the cells both sizes share."""

    rows: pd.DataFrame
    weights: dict[str, float]
    points: dict[float, float]
    cells: tuple[str, ...]
    small: str
    big: str

    def estimate(self, target: str, tau: float, tau_df: float) -> dict[str, Estimate]:
        return contrast(self.rows, target, {STAGE_A: self.weights}, tau, tau_df)


def size_rows(curves: pd.DataFrame, sizes: Sequence[str]) -> pd.DataFrame:
    """Stage A's ok rows of the policies ``sizes`` with ``pair`` (size:cell) and ``bare`` (the cell)."""
    rows = ok(pairs(prepared(curves)))
    rows = rows[rows["size"].isin(list(sizes))]
    return rows.assign(pair=rows["cell"], bare=rows["cell"].str.split(":", n=1).str[1])


def size_points(
    curves: pd.DataFrame, target: str, small: str, big: str, margin: float = DEFAULT.gain
) -> tuple[float, float | None, tuple[str, ...], str]:
    """The points a size contrast reads: the top, the largest point where both policies measure a
    cell in common; the low point, the smallest below it where every pair of those cells has left
    the base policy (:func:`paper_repro.analysis.tables.curves.left_base`; None, and why, when none
    has); and the cells both share at the top."""
    rows = size_rows(curves, (small, big)).dropna(subset=[target])
    by_point = {
        p: set(at.loc[at["size"] == small, "bare"]) & set(at.loc[at["size"] == big, "bare"])
        for p, at in rows.groupby("point", sort=True)
    }
    shared = [p for p, cells in by_point.items() if cells]
    if not shared:
        return NAN, None, (), f"{small} and {big} share no measured cell at any point"
    top = shared[-1]
    cells = tuple(sorted(by_point[top]))
    why = "no point below the top"
    everyone = rows[rows["bare"].isin(cells)]
    for p in [p for p in shared if p < top]:
        at = everyone[everyone["point"] == p]
        if set(at["bare"]) >= set(cells):
            left, why = left_base(at, target, margin)
            if left:
                return top, p, cells, ""
            why = f"at {p:g}C: {why}"
    return top, None, cells, why


def size_contrast(
    curves: pd.DataFrame,
    target: str,
    small: str,
    big: str,
    points: Mapping[float, float],
    cells: Sequence[str],
) -> SizeContrast:
    """``big`` minus ``small``, each the mean over ``cells``, summed over ``points`` with their signs."""
    rows = size_rows(curves, (small, big))
    rows = rows[rows["bare"].isin(list(cells)) & rows["point"].isin(list(points))]
    label = rows["pair"] + "@" + rows["point"].map(lambda p: f"{p:g}")
    frame = pd.DataFrame({"setting": STAGE_A, "cell": label, "seed": rows["seed"], target: rows[target]})
    weights = {
        f"{size}:{c}@{p:g}": sign * s / len(cells)
        for p, s in points.items()
        for size, sign in ((big, 1.0), (small, -1.0))
        for c in cells
    }
    return SizeContrast(frame, weights, dict(points), tuple(cells), small, big)


def _interval_words(e: Estimate) -> str:
    low, high = e.interval(LEVEL)
    return f"{e.value:+.3f} (90% {low:+.3f} to {high:+.3f}, df {e.df:.3g})"


def contrast_decide(
    sc: SizeContrast, target: str, tau: float, tau_df: float, margin: float
) -> tuple[Result, str]:
    """A size contrast's verdict (:func:`paper_repro.analysis.stats.contrasts.directional_verdict` at the
    *any recipe at this rho* level: held when its 90% interval lies above 0, not held when below
    ``margin``) and its words at both levels."""
    est = sc.estimate(target, tau, tau_df)
    verdict, low, high = directional_verdict(est[ANY], margin, LEVEL)
    words = (
        f"{ANY}: {_interval_words(est[ANY])}; {THESE}: {_interval_words(est[THESE])}"
        f"{'' if est[THESE].paired else ' (unpaired: the seeds differ)'}"
    )
    return Result(est[ANY].value, low, high, verdict), words


# -- the size contrasts' operating characteristics: a vectorised fast path of contrast() and
# -- directional_verdict() on fully paired rows (tests/test_curves_sizes.py checks it against them)


@dataclass(frozen=True)
class SizeWorld:
    """A size contrast's truth to simulate: its cells' means, their weights, the seed SD left after
    the seed block (the additive model's residual: pairing removes the block), the seeds, and the
    recipe SD ``tau`` (each cell's recipe effect, drawn per study) with its df."""

    mean: np.ndarray
    weights: np.ndarray
    sd: float
    seeds: int
    tau: float
    tau_df: float

    @classmethod
    def of(cls, sc: SizeContrast, target: str, tau: float, tau_df: float) -> SizeWorld | None:
        """The world the data show (None with fewer than two complete seeds)."""
        names = list(sc.weights)
        wide = sc.rows.pivot_table(index="seed", columns="cell", values=target, aggfunc="mean")
        wide = wide.reindex(columns=names).dropna()
        if len(wide) < 2:
            return None
        y = wide.to_numpy(float)
        resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0) + y.mean()
        sd = float(np.sqrt(np.sum(resid**2) / ((len(y) - 1) * (y.shape[1] - 1))))
        return cls(y.mean(axis=0), np.array([sc.weights[n] for n in names]), sd, len(y), tau, tau_df)

    @property
    def value(self) -> float:
        return float(self.weights @ self.mean)

    def at(self, value: float, seeds: int | None = None) -> SizeWorld:
        """This world with its contrast moved to ``value`` (the weighted cells shifted along the weights)."""
        a = self.weights
        mean = self.mean + (value - self.value) * a / float(a @ a)
        return SizeWorld(mean, a, self.sd, seeds or self.seeds, self.tau, self.tau_df)


def paired_estimates(d: np.ndarray, recipe_var: float, tau_df: float) -> tuple[np.ndarray, ...]:
    """:func:`contrast`'s *any recipe* estimate of studies x seeds paired values ``d``: (value, se, df)."""
    n = d.shape[1]
    seed_var = d.var(axis=1, ddof=1) / n
    total = seed_var + recipe_var
    denom = seed_var**2 / (n - 1) + (
        recipe_var**2 / tau_df if np.isfinite(tau_df) and recipe_var > 0 else 0.0
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(denom > 0, total**2 / denom, np.inf)
    return d.mean(axis=1), np.sqrt(total), df


def directional_codes(value: np.ndarray, se: np.ndarray, df: np.ndarray, margin: float) -> np.ndarray:
    """:func:`directional_verdict` of arrays at :data:`LEVEL`: 0 held, 1 not held, 2 inconclusive."""
    from scipy import stats

    q = stats.t.ppf(0.5 + LEVEL / 2, df)
    low, high = value - q * se, value + q * se
    return np.where(low > 0, 0, np.where(high < margin, 1, 2))


CODES = ("held", "not held", "inconclusive")


def simulate_sizes(world: SizeWorld, margin: float, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """The contrast's verdict codes on ``replicates`` studies drawn from ``world``: each cell's recipe
    effect N(0, tau^2), each run's seed noise N(0, sd^2)."""
    k = len(world.mean)
    u = rng.normal(0.0, world.tau, (replicates, 1, k)) if world.tau > 0 else 0.0
    y = world.mean + u + rng.normal(0.0, world.sd, (replicates, world.seeds, k))
    d = y @ world.weights
    recipe_var = world.tau**2 * float(world.weights @ world.weights)
    return directional_codes(*paired_estimates(d, recipe_var, world.tau_df), margin)


def _size_truth(value: float, margin: float) -> str:
    """The verdict a contrast of true ``value`` should get: held at or above the margin, not held at
    or below 0, either in between ("")."""
    return "held" if value >= margin else "not held" if value <= 0 else ""


def sizes_operating(
    world: SizeWorld | None, margin: float, replicates: int = REPLICATES, seed: int = RNG_SEED
) -> dict:
    """How often a size contrast's verdict is wrong, by simulation: the truths "observed" (the data's
    means), "equal sizes" (contrast 0), "reversed" (minus the observed one, or minus two margins when
    that is not below 0) and "two margins"; the claims table's ``oc_*`` and power columns (the power
    at the observed truth, and over :data:`POWER_SEEDS`)."""
    if world is None:
        return _no_oc("fewer than two seeds that measure every cell of the contrast")
    rng = np.random.default_rng(seed)
    observed = world.value
    truths = {
        "observed": observed,
        "equal sizes": 0.0,
        "reversed": -abs(observed) if observed else -2 * margin,
        "two margins": 2 * margin,
    }
    wrong, agreement, held, refuted, power = {}, {}, [], [], NAN
    for name, value in truths.items():
        codes = simulate_sizes(world.at(value), margin, replicates, rng)
        share = {v: float(np.mean(codes == i)) for i, v in enumerate(CODES)}
        truly = _size_truth(value, margin)
        wrong[name] = share["not held"] if truly == "held" else share["held"] if truly == "not held" else 0.0
        agreement[name] = sum(p * p for p in share.values())
        if truly == "held":
            held.append(share["held"])
        elif truly == "not held":
            refuted.append(share["not held"])
        if name == "observed":
            power = 1.0 - share["inconclusive"]
    decided = {
        n: float(np.mean(simulate_sizes(world.at(observed, n), margin, replicates, rng) != 2))
        for n in POWER_SEEDS
    }
    needed = next((n for n, p in decided.items() if p >= 0.8), None)
    worst = max(wrong, key=wrong.get)
    return {
        "oc_wrong_max": wrong[worst],
        "oc_wrong_truth": worst if wrong[worst] > 0 else "",
        "oc_agreement_min": min(agreement.values()),
        "oc_held_when_true": min(held) if held else NAN,
        "oc_not_held_when_false": min(refuted) if refuted else NAN,
        "oc_note": (
            f"{len(truths)} truths ({', '.join(f'{k} {v:+.3f}' for k, v in truths.items())}), {replicates} "
            f"simulated studies each at {world.seeds} seeds, seed SD {world.sd:.3f} after the seed block, "
            f"recipe SD {world.tau:.3f} per cell; wrong: "
            + ", ".join(f"{k} {v:.2f}" for k, v in wrong.items())
        ),
        "power_now": power,
        "seeds_for_80pct_power": float(needed or NAN),
        "power_note": "decided share at the observed means: "
        + ", ".join(f"{n} seeds {p:.2f}" for n, p in decided.items()),
    }


# ---------------------------------------------------------------------------------------- the claims rows


def _size_words(target: str, margin: float) -> str:
    return (
        f"stage A's largest policy minus its smallest in {_target_words(target)}, each the mean over the cells "
        "both share, paired by seed (one pseudo-setting: each (policy, cell, point) a cell; seeds as blocks), at "
        "the level 'any recipe at this rho' (each cell's recipe effect, the grid's REML recipe SD, in the se; "
        "Satterthwaite df); held when its 90% interval lies above 0, not held when it lies below "
        f"{margin:g} (margins.gain), inconclusive otherwise"
    )


def top_test(target: str = "native_reward", margin: float = DEFAULT.gain) -> str:
    return (
        _size_words(target, margin) + ", at the ladder's top (the largest point where both measure a cell in "
        "common); the note gives the same contrast at the lowest point where every pair of them has left the "
        "base policy, and both levels (our_value: the contrast)"
    )


def grows_test(target: str = "native_reward", margin: float = DEFAULT.gain) -> str:
    return (
        "read as: the largest policy's advantage over the smallest grows with the budget. "
        + _size_words(target, margin)
        + ", at the ladder's top minus the same at the lowest point where every pair of them has left the base "
        "policy (a difference of differences, paired by seed: the two points are one run's); inconclusive when no "
        "point below the top qualifies (our_value: the change of the advantage)"
    )


def size_claim(
    curves: pd.DataFrame, target: str, order: Sequence[str], margin: float, growth: bool
) -> SizeContrast | str:
    """The largest minus the smallest of ``order`` at the top (``growth``: at the top minus at the low
    point), or why not (a string)."""
    if len(order) < 2:
        return "fewer than two policy sizes in stage A's curves"
    small, big = order[0], order[-1]
    top, low, cells, why = size_points(curves, target, small, big, margin)
    if not cells:
        return why
    if growth and low is None:
        return f"{big} - {small}: {why}"
    return size_contrast(curves, target, small, big, {top: 1.0, low: -1.0} if growth else {top: 1.0}, cells)


def sizes_decide(
    curves: pd.DataFrame,
    target: str,
    order: Sequence[str],
    tau: float,
    tau_df: float,
    margin: float,
    growth: bool,
) -> Result:
    """``size_star.top`` (``growth`` False) or ``curves.grows`` (True): the contrast's verdict with
    its words at both levels; the top's note adds the contrast at the low point."""
    sc = size_claim(curves, target, order, margin, growth)
    if isinstance(sc, str):
        return Result(note=sc)
    result, words = contrast_decide(sc, target, tau, tau_df, margin)
    points = " minus at ".join(f"{p:g}C" for p in sc.points)
    note = f"{sc.big} - {sc.small} at {points} over {len(sc.cells)} cells ({' '.join(sc.cells)}): {words}"
    if not growth:
        _, low_point, cells, why = size_points(curves, target, sc.small, sc.big, margin)
        if low_point is None:
            note += f"; no lower point where every pair has left the base policy ({why})"
        else:
            low = size_contrast(curves, target, sc.small, sc.big, {low_point: 1.0}, cells)
            note += (
                f"; at {low_point:g}C, the lowest point where every pair has left the base policy: "
                f"{contrast_decide(low, target, tau, tau_df, margin)[1]}"
            )
    return Result(result.value, result.low, result.high, result.verdict, note)


def sizes_world(
    curves: pd.DataFrame,
    target: str,
    order: Sequence[str],
    tau: float,
    tau_df: float,
    margin: float,
    growth: bool,
) -> SizeWorld | None:
    sc = size_claim(curves, target, order, margin, growth)
    return None if isinstance(sc, str) else SizeWorld.of(sc, target, tau, tau_df)


# ---------------------------------------------------------------------------------------- declarations

GROWS = "curves.grows"  # the claim's id (the answer's as-the-budget-grows line names it)


def _size_order(study: Study) -> list[str]:
    """Stage A's policy labels, smallest first (the profile's, then any other the curves name)."""
    grid = pairs(study.curve_rows)
    found = size_order(grid["size"]) if len(grid) else []
    sizes = [s for s in study.classes.sizes if s in set(found)] if len(found) else list(study.classes.sizes)
    return [*sizes, *(s for s in found if s not in sizes)]


def _recipe(study: Study) -> tuple[float, float]:
    """The recipe SD the size contrasts' *any recipe* level allows for (the curves' claims' own) and
    its df: the grid's REML fit's, infinite when the margins fix it or there is no grid."""
    tau = study.curve_tau
    if study.margins.recipe_sd is not None or study.distinct.empty:
        return tau, np.inf
    from paper_repro.analysis.stats.mixed import recipe_reml

    df = recipe_reml(study.distinct, TARGET).df
    return tau, float(df) if np.isfinite(df) else np.inf


def _sizes(study: Study, growth: bool) -> tuple:
    return (study.curve_rows, TARGET, _size_order(study), *_recipe(study), study.margins.gain, growth)


def _top_operating(study: Study) -> dict:
    return sizes_operating(sizes_world(*_sizes(study, False)), study.margins.gain, **_replicates(study))


def _grows_operating(study: Study) -> dict:
    return sizes_operating(sizes_world(*_sizes(study, True)), study.margins.gain, **_replicates(study))


SIZE_TRUTHS = "observed, equal sizes, reversed, two margins"


@register_claim(
    GROWS,
    question="as the budget grows, does the best policy get bigger?",
    headline="check",
    sentence="as the budget grows, the best policy gets bigger",
    kind="our addition",
    paper="not tested",
    reads=("curves", "grid"),
    margins=("recipe_sd", "gain"),
    words=lambda s: grows_test(TARGET, s.margins.gain),
    unit="native reward: the largest policy minus the smallest at the ladder's top, minus the same at its lowest point",
    simulation=OwnSimulation(_grows_operating, SIZE_TRUTHS),
)
def _curves_grows(study: Study) -> Result:
    return sizes_decide(*_sizes(study, True))


@register_claim(
    "size_star.top",
    question="at the largest budget, does the largest policy beat the smallest?",
    headline="check",
    sentence="at the ladder's top, the largest policy beats the smallest",
    kind="our addition",
    paper="not tested",
    reads=("curves", "grid"),
    margins=("recipe_sd", "gain"),
    words=lambda s: top_test(TARGET, s.margins.gain),
    unit="native reward: the largest policy minus the smallest at the ladder's top",
    simulation=OwnSimulation(_top_operating, SIZE_TRUTHS),
)
def _size_star_top(study: Study) -> Result:
    return sizes_decide(*_sizes(study, False))
