"""The compute-curve claim "the best allocation moves with the budget" (our addition), declared in
the registry, and what the size contrasts share with it (:mod:`paper_repro.analysis.claims.sizes`:
does the largest policy beat the smallest at the ladder's top, and does its advantage grow with the
budget?). All read the grid runs' points on their budget ladders (``curves.csv``:
:mod:`paper_repro.analysis.tables.curves`), never a point where the cells still sit at the base
policy, and each simulates its own data under its truths and decides them with the same rule (the
verdict words of :data:`paper_repro.analysis.stats.verdict.VERDICTS`).

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

**Operating characteristics.** "moves" (:func:`moves_operating`): :data:`REPLICATES` simulated
studies per truth, each cell's seed values drawn normal around the truth's mean with the seed SD the
data show (pooled where a cell has one seed) at the data's seed counts, the two ends drawn
independently, decided by the same rule; wrong = a decided verdict (held, not held, heterogeneous)
other than the truth's, which reads each end's best-mean cell. The truths: the data's own means
("observed"); "static" (the top's means at both ends); "moving" (the top's means, reversed in rho
order at the low end; a best cell in the middle is swapped with the cell farthest from it instead).
``oc_held_when_true``/``oc_not_held_when_false``: the smallest held (not held) share over truths
whose verdict is held (not held); ``power_now``: the decided share under "observed".
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
from paper_repro.analysis.stats.optima import ALPHA, Cells, best_set
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.analysis.tables.curve_rows import prepared
from paper_repro.analysis.tables.curves import left_base, ok

REPLICATES = 200  # simulated studies per truth for a claim's operating characteristic
RNG_SEED = 0

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
    return (
        f"{name}: no point below the top ({full[-1]:g}C) where every cell has left the base policy "
        f"(at {last:g}C: {why[last]})"
    )


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
    note = "; ".join(
        [
            *(f"{e.name} {e.low_point:g}C -> {e.high_point:g}C: {words[v]}" for e, v, _, _ in per),
            *(f"undecided, {why}" for why in skipped),
        ]
    )
    sets = "; ".join(
        f"{e.name} {e.low_point:g}C {{{' '.join(lo)}}} -> {e.high_point:g}C {{{' '.join(hi)}}}"
        for e, _, lo, hi in per
    )
    return Result(
        verdicts.count("held") / len(verdicts), verdict=aggregate_moves(verdicts), note=note, best_cells=sets
    )


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
        "oc_wrong_max": wrong[worst],
        "oc_wrong_truth": worst if wrong[worst] > 0 else "",
        "oc_agreement_min": min(agreement.values()),
        "oc_held_when_true": min(held_when_true) if held_when_true else NAN,
        "oc_not_held_when_false": min(not_held_when_false) if not_held_when_false else NAN,
        "oc_note": (
            f"{len(truths)} truths ({', '.join(truths)}), {replicates} simulated studies each, at the data's "
            f"seeds ({' '.join(map(str, seeds))} per cell) and seed SDs; wrong: "
            + ", ".join(f"{k} {v:.2f}" for k, v in wrong.items())
        ),
        "power_now": power,
        "seeds_for_80pct_power": NAN,
        "power_note": "share of simulated studies around the data's own means that decide (not simulated over seed counts)",
    }


def _no_oc(reason: str) -> dict:
    return {
        **NO_OC,
        "oc_not_held_when_false": NAN,
        "oc_note": f"not simulated: {reason}",
        "power_now": NAN,
        "seeds_for_80pct_power": NAN,
        "power_note": f"not simulated: {reason}",
    }


def moves_operating(
    ends: Sequence[Ends],
    tau: float = 0.0,
    replicates: int = REPLICATES,
    seed: int = RNG_SEED,
    skipped: Sequence[str] = (),
) -> dict:
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

    return _operating(
        move_truths(ends), lambda d: moves_decide(d, tau, skipped=skipped).verdict, truly, replicates, seed
    )


# ---------------------------------------------------------------------------------------- the claims rows


def _target_words(target: str) -> str:
    from paper_repro.common.results import TARGET_WORDS

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


# ---------------------------------------------------------------------------------------- declarations

TARGET = "native_reward"
MOVES = "curves.moves"  # the claim's id (the answer's as-the-budget-grows line names it)


def _replicates(study: Study) -> dict:
    return {} if study.replicates is None else {"replicates": study.replicates}


def _moves_ends(study: Study) -> tuple[list[Ends], list[str]]:
    return frontier_ends(study.curve_rows, TARGET, study.classes.shared, study.margins.gain)


def _moves_operating(study: Study) -> dict:
    ends, skipped = _moves_ends(study)
    return moves_operating(ends, study.curve_tau, skipped=skipped, **_replicates(study))


@register_claim(
    MOVES,
    sentence="the best allocation moves with the budget",
    kind="our addition",
    paper="not tested",
    reads=("curves",),
    margins=("recipe_sd", "gain"),
    words=lambda s: moves_test(TARGET, s.curve_tau, s.margins.gain),
    unit="share of settings whose best cells at the ladder's top exclude those at its foot",
    simulation=OwnSimulation(_moves_operating, "observed, static, moving"),
)
def _curves_moves(study: Study) -> Result:
    ends, skipped = _moves_ends(study)
    return moves_decide(ends, study.curve_tau, skipped=skipped)
