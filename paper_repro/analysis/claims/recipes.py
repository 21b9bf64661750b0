"""Our addition "at equal rho, the recipe does not matter" (rho is a sufficient description of an
allocation), declared in the registry: decided from the variance between recipes at equal rho that
the profile's second recipes show (two recipes of one target rho on the same seeds:
:mod:`paper_repro.analysis.tables.recipes`).

**The model.** A cell's recipe effect ``u ~ N(0, tau^2)`` is what its recipe (P, G, K, mu) adds
beyond its rho. A pair ``j`` of recipes of one target rho, run on the same seeds, gives per seed
``d[j, k] = y_second,k - y_first,k = delta_j + e[j, k]`` with ``delta_j ~ N(0, 2 tau^2)`` (two
recipe effects) and seed noise ``e`` (the seed block cancels). So the pair's mean ``dbar_j`` has
variance ``2 tau^2 + v_j``, ``v_j = var(d_j) / n_j``, and
``Q(tau) = sum_j dbar_j^2 / (2 tau^2 + v_j)`` is chi-square with ``J`` (the pairs) df at the true
``tau`` (the mean difference is 0 when rho suffices, so none is estimated).

**The interval** (:func:`pair_sd`): the Q-profile interval (Viechtbauer 2007, Stat. Med. 26:37,
with the mean fixed at 0): ``tau`` at :data:`LEVEL` (90%) runs from the ``tau`` where ``Q`` falls
to the chi-square's upper 5% point to the one where it falls to its lower 5% point (0 where ``Q(0)``
is already below); the estimate is where ``Q = J`` (Paule-Mandel). ``v_j`` is taken as known, which
the operating characteristics below check at the data's seed counts.

**The margin** is the profile's ``margins.recipe`` (0.03 native reward, fixed before the runs), read
as a bound on the **recipe SD** ``tau``, the quantity the model estimates (before 2026-12-03 it was
an equivalence margin on one pair's difference; two recipes of one rho differ by ``sqrt(2) tau`` in
SD, so ``tau < 0.03`` keeps 95% of such differences within about 0.083).

**The rule** (:func:`recipe_decide`): **held** when the interval's upper end is below the margin
(``tau >= margin`` rejected at 5%), **not held** when its lower end is above it (``tau <= margin``
rejected at 5%), **inconclusive** otherwise, and with no pair of two shared seeds.

**How often it errs** (:func:`recipe_operating`): the rule on simulated pairs, each with its own
seed count and the SD of its per-seed differences, under truths ``tau`` = 0 (identical recipes),
half the margin, the margin, twice it, and four times it ("rho not sufficient"); each study draws
each pair's ``delta_j`` and its seeds' ``d``. Wrong: held where ``tau >= margin``, not held where
``tau < margin`` (at the margin itself only "held" is wrong: the test's size);
``oc_held_when_true``: the smallest held share where ``tau < margin``; ``oc_not_held_when_false``:
the smallest not-held share where ``tau > margin``; ``power_now``: the decided share with the
estimate as the truth, and ``seeds_for_80pct_power`` the seeds per cell at which 80% decide there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from paper_repro.analysis.claims.columns import NO_OC
from paper_repro.analysis.claims.registry import OwnSimulation, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.analysis.tables.recipes import Pair, pairs_of

LEVEL = 0.90  # the recipe SD's interval; each end a one-sided test at 5%
REPLICATES = 2000  # simulated studies per truth: a 5% rate to about +-0.5 points
POWER_REPLICATES = 400  # simulated studies per seed count for the power column
POWER_SEEDS = (2, 3, 5, 8, 10, 20, 40, 80)  # seed counts the power column tries
RNG_SEED = 0
CODES = ("held", "not held", "inconclusive")  # the vectorised rule's verdicts, as codes 0, 1, 2
_BISECTIONS = 60  # halvings of the tau^2 bracket: far below any margin's precision


@dataclass(frozen=True)
class PairSD:
    """The recipe SD from the pairs: ``tau`` (Paule-Mandel), its Q-profile interval at :data:`LEVEL`,
    ``Q(0)`` and the pairs it read."""

    tau: float = NAN
    low: float = NAN
    high: float = NAN
    q0: float = NAN
    pairs: int = 0


def usable(pairs: Sequence[Pair]) -> list[Pair]:
    """The pairs with at least two seeds in common and a seed variance (their ``d``)."""
    return [p for p in pairs if len(p.d) >= 2 and p.d.std(ddof=1) > 0]


def _solve(dbar: np.ndarray, v: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Per row, the ``tau`` where ``Q(tau) = level`` (``Q`` decreasing in tau); 0 where ``Q(0)`` is
    already at or below it. ``dbar``, ``v``: studies x pairs; ``level``: per study or scalar."""
    q = lambda t2: np.sum(dbar**2 / (2 * t2[:, None] + v), axis=1)  # noqa: E731
    lo = np.zeros(len(dbar))
    hi = np.maximum(np.max(dbar**2, axis=1) * np.shape(dbar)[1] / np.maximum(level, 1e-12), 1e-12)
    below = q(lo) <= level
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        above = q(mid) > level
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return np.where(below, 0.0, np.sqrt((lo + hi) / 2))


def pair_sd_arrays(dbar: np.ndarray, v: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, ...]:
    """:func:`pair_sd` of many studies at once (studies x pairs): (tau, low, high, Q(0))."""
    k = dbar.shape[1]
    top, bottom = stats.chi2.ppf(0.5 + level / 2, k), stats.chi2.ppf(0.5 - level / 2, k)
    q0 = np.sum(dbar**2 / v, axis=1)
    return _solve(dbar, v, k), _solve(dbar, v, top), _solve(dbar, v, bottom), q0


def _moments(ds: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    dbar = np.array([[d.mean() for d in ds]])
    v = np.array([[d.var(ddof=1) / len(d) for d in ds]])
    return dbar, v


def pair_sd(pairs: Sequence[Pair], level: float = LEVEL) -> PairSD:
    """The recipe SD at equal rho from the pairs' per-seed differences (module docstring)."""
    ds = [p.d for p in usable(pairs)]
    if not ds:
        return PairSD()
    tau, low, high, q0 = (float(x[0]) for x in pair_sd_arrays(*_moments(ds), level))
    return PairSD(tau, low, high, q0, len(ds))


def verdict_codes(low: np.ndarray, high: np.ndarray, margin: float) -> np.ndarray:
    """The rule on intervals: 0 held (``high < margin``), 1 not held (``low > margin``), 2 otherwise."""
    return np.where(high < margin, 0, np.where(low > margin, 1, 2))


def recipe_decide(pairs: Sequence[Pair], margin: float) -> Result:
    """The claim's verdict (the module's rule): the recipe SD at equal rho and its 90% interval."""
    sd = pair_sd(pairs)
    if sd.pairs == 0:
        return Result(note="no recipe pair with two seeds in common (grid.recipes in the profile)")
    verdict = CODES[int(verdict_codes(np.array([sd.low]), np.array([sd.high]), margin)[0])]
    each = "; ".join(
        f"{p.setting} {p.second} - {p.first}: {p.d.mean():+.3f} (se {p.d.std(ddof=1) / np.sqrt(len(p.d)):.3f}, "
        f"{len(p.d)} seeds paired)"
        for p in usable(pairs)
    )
    note = (
        f"recipe SD at equal rho {sd.tau:.3f} (90% {sd.low:.3f} to {sd.high:.3f}) from {sd.pairs} pair"
        f"{'s' if sd.pairs > 1 else ''} against a margin of {margin:g} on the SD; {each}"
    )
    return Result(sd.tau, sd.low, sd.high, verdict, note)


def recipe_test(margin: float, target_words: str = "native reward") -> str:
    return (
        f"the recipe SD at equal rho ({target_words}) from the pairs of recipes of one target rho, each paired "
        "by seed (second minus first): its 90% Q-profile interval from sum_j dbar_j^2 / (2 tau^2 + var_j / n_j) "
        f"~ chi-square(pairs); held when the interval lies below {margin:g} (a margin on the SD), not held when "
        "it lies above it, inconclusive otherwise (our_value: the SD, Paule-Mandel)"
    )


# ---------------------------------------------------------------------------------------- operating characteristics


def _truths(margin: float) -> dict[str, float]:
    return {
        "identical recipes (tau 0)": 0.0,
        "tau 0.5 x margin": 0.5 * margin,
        "tau at the margin": margin,
        "tau 2 x margin": 2 * margin,
        "rho not sufficient (tau 4 x margin)": 4 * margin,
    }


def simulate(
    sds: Sequence[float],
    seeds: Sequence[int],
    tau: float,
    margin: float,
    replicates: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """The rule's verdict codes on ``replicates`` simulated studies: pair ``j`` with ``seeds[j]``
    per-seed differences of SD ``sds[j]`` around ``delta_j ~ N(0, 2 tau^2)``."""
    dbar, v = np.empty((replicates, len(sds))), np.empty((replicates, len(sds)))
    for j, (sd, n) in enumerate(zip(sds, seeds, strict=True)):
        d = rng.normal(0.0, np.sqrt(2) * tau, (replicates, 1)) + rng.normal(0.0, sd, (replicates, int(n)))
        dbar[:, j], v[:, j] = d.mean(axis=1), d.var(axis=1, ddof=1) / n
    _, low, high, _ = pair_sd_arrays(dbar, v)
    return verdict_codes(low, high, margin)


def recipe_operating(
    pairs: Sequence[Pair],
    margin: float,
    replicates: int = REPLICATES,
    seed: int = RNG_SEED,
    power_replicates: int = POWER_REPLICATES,
) -> tuple[pd.DataFrame, dict]:
    """The rule on simulated pairs (each pair's seed count and SD of differences) under known recipe
    SDs: per truth the shares of each verdict and the wrong share; and the claims row's ``oc_*`` and
    power columns (module docstring)."""
    kept = usable(pairs)
    if not kept:
        reason = "not simulated: no recipe pair with two seeds in common"
        return pd.DataFrame(), {
            **NO_OC,
            "oc_not_held_when_false": NAN,
            "oc_note": reason,
            "power_now": NAN,
            "seeds_for_80pct_power": NAN,
            "power_note": reason,
        }
    rng = np.random.default_rng(seed)
    sds, seeds = [float(p.d.std(ddof=1)) for p in kept], [len(p.d) for p in kept]
    rows = []
    for name, tau in _truths(margin).items():
        codes = simulate(sds, seeds, tau, margin, replicates, rng)
        share = {v: float(np.mean(codes == i)) for i, v in enumerate(CODES)}
        truth = "held" if tau < margin else "not held"
        wrong = share["not held"] if truth == "held" else share["held"]
        rows.append(
            {
                "truth": name,
                "tau": tau,
                "true_verdict": truth,
                **{f"share_{k.replace(' ', '_')}": v for k, v in share.items()},
                "agreement": sum(p * p for p in share.values()),
                "wrong": wrong,
                "studies": replicates,
            }
        )
    table = pd.DataFrame(rows)
    worst = table.loc[table["wrong"].idxmax()]
    held = table.loc[table["tau"] < margin, "share_held"]
    refuted = table.loc[table["tau"] > margin, "share_not_held"]
    oc = {
        "oc_wrong_max": float(worst["wrong"]),
        "oc_wrong_truth": str(worst["truth"]) if worst["wrong"] > 0 else "",
        "oc_agreement_min": float(table["agreement"].min()),
        "oc_held_when_true": float(held.min()),
        "oc_not_held_when_false": float(refuted.min()),
        "oc_note": (
            f"{len(table)} truths, {replicates} studies each, with the {len(kept)} pairs' own seeds "
            f"({' '.join(map(str, seeds))}) and SDs of their differences; wrong: "
            + ", ".join(f"{r.truth} {r.wrong:.3f}" for r in table.itertuples())
        ),
        **_power(kept, margin, power_replicates, rng),
    }
    return table, oc


def _power(kept: Sequence[Pair], margin: float, replicates: int, rng: np.random.Generator) -> dict:
    """The decided share with the pairs' own estimate as the truth, at their seeds and at
    :data:`POWER_SEEDS` per cell."""
    sd = pair_sd(kept)
    sds = [float(p.d.std(ddof=1)) for p in kept]
    decided = {}
    for n in sorted({*POWER_SEEDS, *(len(p.d) for p in kept)}):
        codes = simulate(sds, [n] * len(kept), sd.tau, margin, replicates, rng)
        decided[n] = float(np.mean(codes != 2))
    now = float(np.mean(simulate(sds, [len(p.d) for p in kept], sd.tau, margin, replicates, rng) != 2))
    needed = next((n for n, p in sorted(decided.items()) if p >= 0.8), None)
    note = f"with the pairs' estimate (tau {sd.tau:.3f}) as the truth, {len(kept)} pairs: " + ", ".join(
        f"{n} seeds {p:.2f}" for n, p in sorted(decided.items())
    )
    if needed is None:
        note += (
            f"; not decided in 80% of studies at up to {max(decided)} seeds: more pairs, not seeds, narrow it"
        )
    return {"power_now": now, "seeds_for_80pct_power": float(needed or NAN), "power_note": note}


RHO_SUFFICES = "recipes.rho_suffices"  # the claim's id (RESULTS.md says what its verdict means for rho)


def _recipe_operating(study: Study) -> dict:
    kwargs = {} if study.replicates is None else {"replicates": study.replicates}
    return recipe_operating(pairs_of(study.distinct), study.margins.recipe, **kwargs)[1]


def _recipe_words(study: Study) -> str:
    return recipe_test(study.margins.recipe)


@register_claim(
    RHO_SUFFICES,
    sentence="at equal rho, the recipe does not matter",
    kind="our addition",
    paper="report_rho",
    reads=("grid",),
    margins=("recipe",),
    words=_recipe_words,
    unit="native reward SD of a recipe's effect at equal rho (REML, from the recipe pairs)",
    simulation=OwnSimulation(
        _recipe_operating, "recipe SD 0, 0.5, 1, 2 and 4 margins (4: rho not sufficient)"
    ),
)
def _rho_suffices(study: Study) -> Result:
    return recipe_decide(pairs_of(study.distinct), study.margins.recipe)
