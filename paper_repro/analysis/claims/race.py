"""RACE's claims, declared in the registry: do the pilots name the full grid's regime (one row per
pilot budget), and does RACE's pick gain over TRL's default on fresh seeds? The RACE table they read:
:mod:`paper_repro.analysis.tables.race`.

**The agreement test** (:func:`pilot_agreement`, one pilot fraction, the distinct settings whose
pilots moved): per setting, the Spearman correlation of the pilot cell means with the full grid's, and
whether RACE's pick (the pilots' argmax cell) lies in the full grid's 95% best set, with its regret
on the full grid's seeds (which the pilots never used). :func:`pilot_agreement_test` states the rule.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from itertools import permutations

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.registry import NotSimulated, Variant, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.best_sets import DEFAULT
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.analysis.tables.race import (
    ALPHA,
    BOOTSTRAP,
    distinct_rows,
    moved_rows,
    parse_means,
    spearman,
)
from paper_repro.analysis.wording import fraction_words
from paper_repro.config import Margins

PERMUTATIONS = 10_000  # Monte Carlo draws of the permutation test where exact enumeration is not cheap
EXACT_CELLS = 7  # settings of at most this many cells are enumerated exactly (7! = 5040 orders)
MIN_MOVED = 3  # settings whose pilots moved that the agreement test needs


def regime_kappa(race: pd.DataFrame) -> tuple[float, float, float]:
    """A description: Cohen's kappa (statsmodels) of the pilot regime against the full grid's over the
    distinct settings whose pilots moved, with its asymptotic 95% interval clipped to [-1, 1]; NaNs
    when fewer than two labels occur (kappa is undefined)."""
    from statsmodels.stats.inter_rater import cohens_kappa

    race = moved_rows(race)
    labels = sorted(set(race["pilot_regime"]) | set(race["full_regime"]))
    if len(labels) < 2:
        return NAN, NAN, NAN
    table = pd.crosstab(race["pilot_regime"], race["full_regime"])
    with np.errstate(divide="ignore", invalid="ignore"):
        k = cohens_kappa(table.reindex(index=labels, columns=labels, fill_value=0).to_numpy())
    low, high = np.clip([float(k.kappa_low), float(k.kappa_upp)], -1.0, 1.0)
    return float(k.kappa), float(low), float(high)


def pilot_agreement(
    race: pd.DataFrame, alpha: float = ALPHA, draws: int = PERMUTATIONS, seed: int = 0
) -> Result:
    """The pre-registered test that RACE's pilots (one pilot fraction's rows of :func:`race_table`)
    name the full grid's optimum, by :func:`pilot_agreement_test`'s rule. ``value``: the pooled
    Spearman correlation; ``low``/``high``: its 95% percentile bootstrap interval over settings."""
    race = distinct_rows(race)
    moved = moved_rows(race)
    k, n = len(moved), len(race)
    head = f"uninformative pilots: {k} of {n} settings moved off the base policy"
    if k < MIN_MOVED:
        return Result(note=f"{head} (the test needs at least {MIN_MOVED})")
    pairs = [p for p in (_aligned(r) for _, r in moved.iterrows()) if p is not None]
    rhos = moved["spearman"].dropna().to_numpy(float)
    pooled = float(rhos.mean()) if len(rhos) else NAN
    p = permutation_p(pairs, draws, seed) if len(pairs) else NAN
    inside = moved["pick_in_full_best_set"].astype(bool).to_numpy()
    if p < alpha and inside.all():
        verdict = "held"
    elif pooled <= 0 or (~inside).sum() > k / 2:
        verdict = "not held"
    else:
        verdict = "inconclusive"
    low, high = _bootstrap_mean(rhos, seed)
    note = (
        f"{k} of {n} settings moved off the base policy; pooled Spearman {pooled:.2f} over {len(rhos)}, "
        f"permutation p {p:.2g}; RACE's pick in the full grid's 95% best set in {int(inside.sum())} of {k}; "
        f"mean regret {moved['race_regret'].mean():.3f}"
    )
    cells = "; ".join(f"{r['setting']}: {r['full_best_cells']}" for _, r in moved.iterrows())
    return Result(pooled, low, high, verdict, note, cells)


def pilot_agreement_test(alpha: float = ALPHA) -> str:
    return (
        "over the distinct settings whose pilots moved off the base policy (some pilot cell's mean native "
        f"reward outside its two-sided {1 - alpha:.0%} t interval around the base policy's over the pilot seeds, "
        "Bonferroni over the cells; pilots that did not move are uninformative, reported and never scored): "
        "per setting, Spearman's correlation of the pilot cell means with the full grid's, pooled as their "
        "mean, with a one-sided permutation p (pilot cell means shuffled within each setting; exact, or "
        f"{PERMUTATIONS} draws with seed 0), and whether RACE's pick (the pilots' argmax cell) lies in the "
        f"full grid's {1 - alpha:.0%} best set (Gupta's subset, Bonferroni, with the recipe effect): held if "
        f"p < {alpha} and the pick lies in the best set in every moved setting; not held if the pooled "
        "correlation is <= 0 or the pick lies outside the best set in more than half of them; inconclusive "
        f"otherwise, and with fewer than {MIN_MOVED} moved settings (our_value: the pooled correlation, with "
        "a percentile bootstrap over settings)"
    )


def _aligned(row: pd.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """One RACE row's pilot and full cell means over the cells both have; None when its Spearman
    correlation is undefined."""
    pilot, full = parse_means(row["pilot_cell_means"]), parse_means(row["full_cell_means"])
    if np.isnan(spearman(pilot, full)):
        return None
    common = pilot.index.intersection(full.index)
    return pilot[common].to_numpy(float), full[common].to_numpy(float)


def _rank_correlations(pilots: np.ndarray, full: np.ndarray) -> np.ndarray:
    """Spearman's correlation of each row of ``pilots`` (orders of one setting's pilot means) with
    ``full``: the Pearson correlation of their (mid-)ranks."""
    from scipy import stats

    a = stats.rankdata(pilots, axis=-1)
    b = stats.rankdata(full)
    a, b = a - a.mean(axis=-1, keepdims=True), b - b.mean()
    return (a @ b) / np.sqrt((a * a).sum(axis=-1) * (b @ b))


def permutation_p(pairs, draws: int = PERMUTATIONS, seed: int = 0) -> float:
    """One-sided p of the summed (so the mean) Spearman correlation over ``pairs`` (pilot, full cell
    means per setting) when the pilot means are shuffled within each setting: exact, by convolving
    each setting's distribution over every order, when each has at most :data:`EXACT_CELLS` cells;
    else ``draws`` Monte Carlo shuffles (fixed RNG ``seed``)."""
    observed = sum(float(_rank_correlations(p[None, :], f)[0]) for p, f in pairs)
    if all(len(p) <= EXACT_CELLS for p, _ in pairs):
        sums = {0.0: 1.0}
        for p, f in pairs:
            values, counts = np.unique(
                np.round(_rank_correlations(np.array(list(permutations(p))), f), 9), return_counts=True
            )
            grown = defaultdict(float)
            for total, weight in sums.items():
                for v, c in zip(values, counts / counts.sum(), strict=True):
                    grown[round(total + v, 9)] += weight * c
            sums = grown
        return float(min(1.0, sum(w for total, w in sums.items() if total >= observed - 1e-6)))
    rng = np.random.default_rng(seed)
    null = sum(_rank_correlations(rng.permuted(np.tile(p, (draws, 1)), axis=1), f) for p, f in pairs)
    return float((1 + np.sum(null >= observed - 1e-9)) / (1 + draws))


def _bootstrap_mean(values: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of the mean of ``values`` (resampled with replacement)."""
    if len(values) == 0:
        return NAN, NAN
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(BOOTSTRAP, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


# ---------------------------------------------------------------------------------------- RACE+


def no_race_gain(gains: np.ndarray, m: Margins = DEFAULT) -> Result:
    """TOST of the RACE pick against TRL's default allocation on seeds the pilots did not use
    (paired per setting and seed)."""
    from scipy import stats
    from statsmodels.stats.weightstats import DescrStatsW

    gains = gains[~np.isnan(gains)]
    if len(gains) < 3:
        return Result(note=f"{len(gains)} fresh-seed pairs (the test needs at least 3)")
    d = DescrStatsW(gains)
    if d.std_mean == 0:  # every pair identical (the pick is the default cell itself): no noise to test
        inside = abs(d.mean) < m.gain
        verdict = "held" if inside else "not held" if d.mean > 0 else "inconclusive"
        return Result(float(d.mean), float(d.mean), float(d.mean), verdict, f"{len(gains)} identical pairs")
    p_tost = float(d.ttost_mean(-m.gain, m.gain)[0])
    lo, hi = d.tconfint_mean(alpha=0.05)
    t_one = stats.t.ppf(0.95, len(gains) - 1) * d.std_mean
    if p_tost < 0.05:
        verdict = "held"
    elif lo > 0:
        verdict = "not held"
    else:
        verdict = "inconclusive"
    note = (
        f"{len(gains)} pairs; TOST p {p_tost:.2g}; 90% interval {d.mean - t_one:.3f} to {d.mean + t_one:.3f}"
    )
    return Result(float(d.mean), float(lo), float(hi), verdict, note)


def no_gain_test(m: Margins = DEFAULT) -> str:
    return (
        "native reward of RACE's pick (the full-grid cell the first pilot budget's pilots chose) minus TRL's "
        "default allocation (K = G, mu = 1), both run at the full budget on fresh seeds (neither the "
        "pilots' nor the grid's), paired per distinct setting and seed: held if a TOST with margin "
        f"+-{m.gain} rejects (the 90% interval lies inside it); not held if the 95% interval lies above 0 "
        "(a stable gain); inconclusive otherwise, and with fewer than 3 pairs"
    )


def with_kappa(result: Result, race: pd.DataFrame) -> Result:
    """``result`` with Cohen's kappa of the pilot and full regime labels in its note: a description,
    never the verdict."""

    kappa, low, high = regime_kappa(race)
    words = "undefined (one label)" if np.isnan(kappa) else f"{kappa:.2f} (95% {low:.2f} to {high:.2f})"
    return replace(result, note=f"{result.note}; regime kappa, a description: {words}")


# ---------------------------------------------------------------------------------------- declarations

PILOTS = NotSimulated("the test reads the pilot grids, which the frontier model does not generate")
FRESH = NotSimulated(
    "the test reads the fresh seeds' picks and defaults, which the frontier model does not generate"
)


def _pilot_fractions(study: Study) -> list[Variant]:
    """One row per pilot budget in the RACE table; the first is the paper's pilot."""
    race = study.race
    race = race[~race["setting"].isin(list(study.classes.shared))] if len(race) else race
    fractions = list(dict.fromkeys(race["pilot_fraction"])) if len(race) else []
    return [
        Variant(f"@{fraction_words(f)}", {"fraction": f}, {"fraction": fraction_words(f)},
                kind=None if i == 0 else "our addition", paper=None if i == 0 else "not tested")
        for i, f in enumerate(fractions)
    ]  # fmt: skip


def _pilot_words(study: Study, fraction: float) -> str:

    return pilot_agreement_test()


@register_claim("race.pilots", sentence="RACE pilots at {fraction} of the budget name the full grid's regime",
                kind="paper claim", paper="race.pilots", reads=("race",), words=_pilot_words,
                simulation=PILOTS, variants=_pilot_fractions)  # fmt: skip
def _race_pilots(study: Study, fraction: float) -> Result:

    race = study.race
    race = race[~race["setting"].isin(list(study.classes.shared))]
    rows = race[race["pilot_fraction"] == fraction]
    return with_kappa(pilot_agreement(rows), rows)


@register_claim("race.no_gain", sentence="RACE gives no stable held-out gain over a fixed default allocation",
                kind="paper claim", paper="race.no_gain", reads=("race", "fresh"), margins=("gain",),
                simulation=FRESH, words=lambda s: no_gain_test(s.margins))  # fmt: skip
def _race_no_gain(study: Study) -> Result:
    return no_race_gain(study.gains, study.margins)
