"""The compute-curve claims (our addition), declared in the registry: does the best allocation move
with the budget, does the largest policy beat the smallest at the ladder's top, and does its
advantage grow with the budget? All read the grid runs' points on their budget ladders
(``curves.csv``: :mod:`paper_repro.analysis.tables.curves`), never a point where the cells still sit
at the base policy, and each simulates its own data under its truths and decides them with the same
rule (the verdict words of :data:`paper_repro.analysis.stats.verdict.VERDICTS`).

**The two points.** The **top** is the largest point of the ladder that measures every cell (of a
setting; of both policies, for the sizes). The **low end** is the smallest point below it where every
one of those cells has left the base policy (:func:`paper_repro.analysis.tables.curves.left_base`:
every run took an optimizer step, and each cell's mean change from the base policy is at least
``margins.gain``, 0.02, and beyond its seed noise). Below it the cells are the base policy, so all
equal: a comparison there compares the base policy with itself. No such point: inconclusive, and
the note says which cells had not left at the point just below the top.

- "the best allocation moves with the budget" (:func:`moves_decide`): per distinct setting, the cells
  that could be best at each end (at ``1 - 0.05 / (2 S)``, Bonferroni over the two ends of the ``S``
  settings): the setting **moves** if the two sets share no cell, **stays** if both are the same
  single cell, is undecided otherwise (and when it has no low end). Over settings: held if more than
  half move, not held if more than half stay, heterogeneous if some move and some stay (and neither
  is a majority), inconclusive otherwise.
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

**Operating characteristics.** "moves" (:func:`moves_operating`): :data:`REPLICATES` simulated
studies per truth, each cell's seed values drawn normal around the truth's mean with the seed SD the
data show (pooled where a cell has one seed) at the data's seed counts, the two ends drawn
independently, decided by the same rule; wrong = a decided verdict (held, not held, heterogeneous)
other than the truth's, which reads each end's best-mean cell. The truths: the data's own means
("observed"); "static" (the top's means at both ends); "moving" (the top's means, reversed in rho
order at the low end; a best cell in the middle is swapped with the cell farthest from it instead).
The size contrasts (:func:`sizes_operating`): studies drawn from the contrast's cell means with
each cell's recipe effect N(0, tau^2) and the seed SD left after the seed block (the additive
model's residual), decided by a vectorised path of the same contrast and verdict
(:func:`paired_estimates`, :func:`directional_codes`, tested against them); truths "observed",
"equal sizes" (0), "reversed" and "two margins"; wrong = held where the truth is at or below 0, not
held where it is at or above the margin. ``oc_held_when_true``/``oc_not_held_when_false``: the
smallest held (not held) share over truths whose verdict is held (not held); ``power_now``: the
decided share under "observed" (for the sizes also over :data:`POWER_SEEDS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.columns import NO_OC
from paper_repro.analysis.claims.registry import OwnSimulation, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.best_sets import DEFAULT
from paper_repro.analysis.stats.contrasts import ANY, THESE, Estimate, contrast, directional_verdict
from paper_repro.analysis.stats.optima import ALPHA, Cells, best_set
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.analysis.tables.curves import left_base, ok, pairs, prepared, size_order

REPLICATES = 200  # simulated studies per truth for a claim's operating characteristic
RNG_SEED = 0
POWER_SEEDS = (2, 3, 5, 8, 10, 20, 40)  # seed counts the size contrasts' power column tries
LEVEL = 0.90  # the size contrasts' two-sided interval: each side a one-sided test at 5%

# ---------------------------------------------------------------------------------------- the claims


@dataclass(frozen=True)
class Ends:
    """A setting's frontier at the ladder's two ends: the smallest point where every one of its cells
    is measured and has left the base policy, and the largest where every one is measured."""

    name: str
    low_point: float
    high_point: float
    low: Cells
    high: Cells


def ends_of(rows: pd.DataFrame, target: str, name: str, margin: float = DEFAULT.gain) -> Ends | str:
    """``rows``' frontier at its two ends for ``target``: the top, the largest point that measures
    every cell; the low end, the smallest point below it where every cell has left the base policy
    (:func:`paper_repro.analysis.tables.curves.left_base`, by ``margin``). The reason why not, as a
    string, when there is no such pair of points."""
    everyone = set(rows["cell"].astype(str))
    measured = ok(rows).dropna(subset=[target, "rho"])
    full = [p for p, at in measured.groupby("point", sort=True) if set(at["cell"].astype(str)) >= everyone]
    if len(full) < 2:
        return f"{name}: fewer than two points measure every cell"
    why = {}
    for p in full[:-1]:
        left, why[p] = left_base(rows[rows["point"] == p], target, margin)
        if left:
            low, high = (Cells.of(measured[measured["point"] == q], target) for q in (p, full[-1]))
            return Ends(name, float(p), float(full[-1]), low, high)
    last = full[-2]
    return (f"{name}: no point below the top ({full[-1]:g}C) where every cell has left the base policy "
            f"(at {last:g}C: {why[last]})")  # fmt: skip


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


def moves_decide(
    ends: Sequence[Ends], tau: float = 0.0, alpha: float = ALPHA, skipped: Sequence[str] = ()
) -> Result:
    """The claim "the best allocation moves with the budget" over settings' :class:`Ends` (rule in the
    module docstring; the sets at ``1 - alpha / (2 S)``). ``skipped``: why each setting without two
    such ends has none; each counts as undecided."""
    if not ends:
        reasons = "; ".join(skipped)
        return Result(note=f"no setting with two budget points to compare{': ' + reasons if reasons else ''}")
    level = alpha / (2 * len(ends))
    per = [(e, *move_verdict(e, tau, level)) for e in ends]
    verdicts = [v for _, v, _, _ in per] + ["inconclusive"] * len(skipped)
    words = {"held": "moves", "not held": "stays", "inconclusive": "undecided"}
    note = "; ".join([*(f"{e.name} {e.low_point:g}C -> {e.high_point:g}C: {words[v]}" for e, v, _, _ in per),
                      *(f"undecided, {why}" for why in skipped)])  # fmt: skip
    sets = "; ".join(f"{e.name} {e.low_point:g}C {{{' '.join(lo)}}} -> {e.high_point:g}C {{{' '.join(hi)}}}"
                     for e, _, lo, hi in per)  # fmt: skip
    return Result(verdicts.count("held") / len(verdicts), verdict=aggregate_moves(verdicts), note=note,
                  best_cells=sets)  # fmt: skip


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
    wrong, agreement, held_when_true, not_held_when_false, power = {}, {}, [], [], NAN
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
        if truly == "not held":
            not_held_when_false.append(share.get("not held", 0.0))
        if name == "observed":
            power = 1.0 - share.get("inconclusive", 0.0)
    worst = max(wrong, key=wrong.get)
    seeds = sorted({int(n) for e in truths["observed"] for n in e.low.n})
    return {
        "oc_wrong_max": wrong[worst], "oc_wrong_truth": worst if wrong[worst] > 0 else "",
        "oc_agreement_min": min(agreement.values()),
        "oc_held_when_true": min(held_when_true) if held_when_true else NAN,
        "oc_not_held_when_false": min(not_held_when_false) if not_held_when_false else NAN,
        "oc_note": (f"{len(truths)} truths ({', '.join(truths)}), {replicates} simulated studies each, at the data's "
                    f"seeds ({' '.join(map(str, seeds))} per cell) and seed SDs; wrong: "
                    + ", ".join(f"{k} {v:.2f}" for k, v in wrong.items())),
        "power_now": power, "seeds_for_80pct_power": NAN,
        "power_note": "share of simulated studies around the data's own means that decide (not simulated over seed counts)",
    }  # fmt: skip


def _no_oc(reason: str) -> dict:
    return {**NO_OC, "oc_not_held_when_false": NAN, "oc_note": f"not simulated: {reason}", "power_now": NAN, "seeds_for_80pct_power": NAN,
            "power_note": f"not simulated: {reason}"}  # fmt: skip


def moves_operating(
    ends: Sequence[Ends], tau: float = 0.0, replicates: int = REPLICATES, seed: int = RNG_SEED,
    skipped: Sequence[str] = (),
) -> dict:  # fmt: skip
    """How often "the best allocation moves with the budget" is wrong, by simulation (module
    docstring): the claims table's ``oc_*`` and power columns."""
    ends = list(ends)
    if not ends:
        return _no_oc("no setting with two budget points")
    if any(_noise_sd(c) is None for e in ends for c in (e.low, e.high)):
        return _no_oc("one seed per cell: no seed SD to simulate with")

    def truly(truth: list[Ends]) -> str:
        moved = ["held" if _top(e.low) != _top(e.high) else "not held" for e in truth]
        return aggregate_moves(moved + ["inconclusive"] * len(skipped))

    return _operating(move_truths(ends), lambda d: moves_decide(d, tau, skipped=skipped).verdict, truly,
                      replicates, seed)  # fmt: skip


# ---------------------------------------------------------------------------------------- size*(C): contrasts of sizes

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
    by_point = {p: set(at.loc[at["size"] == small, "bare"]) & set(at.loc[at["size"] == big, "bare"])
                for p, at in rows.groupby("point", sort=True)}  # fmt: skip
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
    weights = {f"{size}:{c}@{p:g}": sign * s / len(cells)
               for p, s in points.items() for size, sign in ((big, 1.0), (small, -1.0)) for c in cells}  # fmt: skip
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
    words = (f"{ANY}: {_interval_words(est[ANY])}; {THESE}: {_interval_words(est[THESE])}"
             f"{'' if est[THESE].paired else ' (unpaired: the seeds differ)'}")  # fmt: skip
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
    truths = {"observed": observed, "equal sizes": 0.0, "reversed": -abs(observed) if observed else -2 * margin,
              "two margins": 2 * margin}  # fmt: skip
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
    decided = {n: float(np.mean(simulate_sizes(world.at(observed, n), margin, replicates, rng) != 2))
               for n in POWER_SEEDS}  # fmt: skip
    needed = next((n for n, p in decided.items() if p >= 0.8), None)
    worst = max(wrong, key=wrong.get)
    return {
        "oc_wrong_max": wrong[worst], "oc_wrong_truth": worst if wrong[worst] > 0 else "",
        "oc_agreement_min": min(agreement.values()), "oc_held_when_true": min(held) if held else NAN,
        "oc_not_held_when_false": min(refuted) if refuted else NAN,
        "oc_note": (f"{len(truths)} truths ({', '.join(f'{k} {v:+.3f}' for k, v in truths.items())}), {replicates} "
                    f"simulated studies each at {world.seeds} seeds, seed SD {world.sd:.3f} after the seed block, "
                    f"recipe SD {world.tau:.3f} per cell; wrong: " + ", ".join(f"{k} {v:.2f}" for k, v in wrong.items())),
        "power_now": power, "seeds_for_80pct_power": float(needed or NAN),
        "power_note": "decided share at the observed means: " + ", ".join(f"{n} seeds {p:.2f}" for n, p in decided.items()),
    }  # fmt: skip


# ---------------------------------------------------------------------------------------- the claims rows


def _target_words(target: str) -> str:
    from paper_repro.results import TARGET_WORDS

    return TARGET_WORDS.get(target, target)


def _recipe_words(tau: float) -> str:
    return f"a recipe effect of SD {tau:.3g}"


def moves_test(target: str = "native_reward", tau: float = 0.0, margin: float = DEFAULT.gain) -> str:
    return (
        f"per distinct setting, the cells that could be best for {_target_words(target)} at 95% (Gupta's subset, "
        f"Bonferroni over the two ends of every setting, seed noise plus {_recipe_words(tau)}) at the budget "
        "ladder's two ends: the smallest point where every cell of the setting is measured and has left the base "
        f"policy (every run took an optimizer step, and each cell's mean change from the base policy is at least "
        f"{margin:g} and beyond its seed noise, t test at 5%), and the largest point where every cell is measured; "
        "a setting moves if the two sets share no cell, stays if both are the same single cell, is undecided "
        "otherwise (and when no point below the top qualifies); held if more than half of the settings move, not "
        "held if more than half stay, heterogeneous if some move and some stay, inconclusive otherwise (our_value: "
        "share of settings that move)"
    )


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


def frontier_ends(
    curves: pd.DataFrame, target: str, shared: Mapping[str, str] | None = None, margin: float = DEFAULT.gain
) -> tuple[list[Ends], list[str]]:
    """Every distinct setting's :class:`Ends` (settings in ``shared``, another's runs, left out), and
    for each setting without two such ends, why."""
    curves = prepared(curves)
    out, skipped = [], []
    if curves.empty or target not in curves:
        return out, skipped
    for setting, rows in curves.groupby("setting", sort=False):
        if shared and setting in shared:
            continue
        e = ends_of(rows, target, str(setting), margin)
        (out if isinstance(e, Ends) else skipped).append(e)
    return out, skipped


def setting_ends(
    curves: pd.DataFrame, target: str, shared: Mapping[str, str] | None = None, margin: float = DEFAULT.gain
) -> list[Ends]:
    """The settings' :class:`Ends` of :func:`frontier_ends`."""
    return frontier_ends(curves, target, shared, margin)[0]


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
            note += (f"; at {low_point:g}C, the lowest point where every pair has left the base policy: "
                     f"{contrast_decide(low, target, tau, tau_df, margin)[1]}")  # fmt: skip
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

TARGET = "native_reward"


def _size_order(study: Study) -> list[str]:
    """Stage A's policy labels, smallest first (the profile's, then any other the curves name)."""
    grid = pairs(study.curve_rows)
    found = size_order(grid["size"]) if len(grid) else []
    sizes = [s for s in study.classes.sizes if s in set(found)] if len(found) else list(study.classes.sizes)
    return [*sizes, *(s for s in found if s not in sizes)]


def _replicates(study: Study) -> dict:
    return {} if study.replicates is None else {"replicates": study.replicates}


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


def _moves_ends(study: Study) -> tuple[list[Ends], list[str]]:
    return frontier_ends(study.curve_rows, TARGET, study.classes.shared, study.margins.gain)


def _moves_operating(study: Study) -> dict:
    ends, skipped = _moves_ends(study)
    return moves_operating(ends, study.curve_tau, skipped=skipped, **_replicates(study))


def _top_operating(study: Study) -> dict:
    return sizes_operating(sizes_world(*_sizes(study, False)), study.margins.gain, **_replicates(study))


def _grows_operating(study: Study) -> dict:
    return sizes_operating(sizes_world(*_sizes(study, True)), study.margins.gain, **_replicates(study))


@register_claim("curves.moves", sentence="the best allocation moves with the budget", kind="our addition",
                paper="not tested", reads=("curves",), margins=("recipe_sd", "gain"),
                words=lambda s: moves_test(TARGET, s.curve_tau, s.margins.gain),
                simulation=OwnSimulation(_moves_operating, "observed, static, moving"))  # fmt: skip
def _curves_moves(study: Study) -> Result:
    ends, skipped = _moves_ends(study)
    return moves_decide(ends, study.curve_tau, skipped=skipped)


SIZE_TRUTHS = "observed, equal sizes, reversed, two margins"


@register_claim("curves.grows", sentence="as the budget grows, the best policy gets bigger", kind="our addition",
                paper="not tested", reads=("curves", "grid"), margins=("recipe_sd", "gain"),
                words=lambda s: grows_test(TARGET, s.margins.gain),
                simulation=OwnSimulation(_grows_operating, SIZE_TRUTHS))  # fmt: skip
def _curves_grows(study: Study) -> Result:
    return sizes_decide(*_sizes(study, True))


@register_claim("size_star.top", sentence="at the ladder's top, the largest policy beats the smallest",
                kind="our addition", paper="not tested", reads=("curves", "grid"), margins=("recipe_sd", "gain"),
                words=lambda s: top_test(TARGET, s.margins.gain),
                simulation=OwnSimulation(_top_operating, SIZE_TRUTHS))  # fmt: skip
def _size_star_top(study: Study) -> Result:
    return sizes_decide(*_sizes(study, False))
