"""The compute-curve claims (our addition), declared in the registry: does the best allocation move
with the budget, and does the best policy grow with it? Both read the grid runs' points on their
budget ladders (``curves.csv``: :mod:`paper_repro.analysis.tables.curves`) at the ladder's two ends,
and each simulates its own ends under its truths and decides them with the same rule.

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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.columns import NO_OC
from paper_repro.analysis.claims.registry import OwnSimulation, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.optima import ALPHA, Cells, best_set
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.analysis.tables.curves import ok, pairs, prepared, size_order

REPLICATES = 200  # simulated studies per truth for a claim's operating characteristic
RNG_SEED = 0

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


# ---------------------------------------------------------------------------------------- declarations

TARGET = "native_reward"


def _size_order(study: Study) -> list[str]:
    """Stage A's policy labels, smallest first (the profile's, then any other the curves name)."""
    grid = pairs(study.curve_rows)
    found = size_order(grid["size"]) if len(grid) else []
    sizes = study.classes.sizes
    return [*sizes, *(s for s in found if s not in sizes)]


def _replicates(study: Study) -> dict:
    return {} if study.replicates is None else {"replicates": study.replicates}


def _moves_ends(study: Study):
    return setting_ends(study.curve_rows, TARGET, study.classes.shared)


def _moves_operating(study: Study) -> dict:
    return moves_operating(_moves_ends(study), study.curve_tau, **_replicates(study))


def _grows_operating(study: Study) -> dict:
    ends = size_ends(study.curve_rows, TARGET)
    return grows_operating(ends, _size_order(study), study.curve_tau, **_replicates(study))


def _moves_words(study: Study) -> str:
    return moves_test(TARGET, study.curve_tau)


def _grows_words(study: Study) -> str:
    return grows_test(TARGET, study.curve_tau)


@register_claim("curves.moves", sentence="the best allocation moves with the budget", kind="our addition",
                paper="not tested", reads=("curves",), margins=("recipe_sd",), words=_moves_words,
                simulation=OwnSimulation(_moves_operating, "observed, static, moving"))  # fmt: skip
def _curves_moves(study: Study) -> Result:
    return moves_decide(_moves_ends(study), study.curve_tau)


@register_claim("curves.grows", sentence="as the budget grows, the best policy gets bigger", kind="our addition",
                paper="not tested", reads=("curves",), margins=("recipe_sd",), words=_grows_words,
                simulation=OwnSimulation(_grows_operating, "observed, static, growing"))  # fmt: skip
def _curves_grows(study: Study) -> Result:
    return grows_decide(size_ends(study.curve_rows, TARGET), _size_order(study), study.curve_tau)
