"""The claims read from tables other than the frontiers alone, each declared in the registry: RACE's
pilots against the full grid (one row per pilot budget, :func:`paper_repro.analysis.race.pilot_agreement`),
RACE's held-out gain (a TOST on its fresh-seed pairs, :func:`no_race_gain`), the fits claim
(:func:`loglinear`, AICc by :func:`paper_repro.analysis.stats.fit_forms.aicc_by_form`) and the planner's
consistency check on the frontier table (:func:`fewer_updates`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.registry import NotSimulated, Variant, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.best_sets import DEFAULT, rows_of
from paper_repro.analysis.stats.fit_forms import aicc_by_form
from paper_repro.analysis.stats.optima import fit_optimum
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.analysis.wording import fraction_words
from paper_repro.config import Margins
from paper_repro.results import METRICS


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


def fewer_updates(frontier: pd.DataFrame, sizes: tuple[str, ...]) -> Result:
    a = frontier[frontier["setting"].isin(sizes)]
    if a["setting"].nunique() < 2:
        return Result(note="fewer than two sizes")
    order = [s for s in sizes if s in set(a["setting"])]
    ok, ratios = True, []
    for _, g in a.groupby("cell"):
        g = g.set_index("setting").reindex(order).dropna(subset=["rounds"])
        updates = (g["rounds"] * g["mu"]).to_numpy()
        rollouts = (g["rounds"] * g["P"] * g["G"]).to_numpy()
        ok &= bool(np.all(np.diff(updates) < 0) and np.all(np.diff(rollouts) < 0))
        if len(updates) > 1:
            ratios.append(updates[-1] / updates[0])
    return Result(float(np.mean(ratios)) if ratios else NAN, verdict="held" if ok else "not held")


def loglinear(runs: pd.DataFrame, names, m: Margins = DEFAULT) -> Result:
    """Over the frontiers (distinct setting x target) whose cells differ (one-way F, p < 0.05):
    constant, log-linear and quadratic in rho by AICc over all runs; a form wins when it beats the
    runner-up by ``m.aicc``."""
    wins: dict[str, int] = {"constant": 0, "loglinear": 0, "quadratic": 0, "tie": 0}
    for name in names:
        for target in METRICS:
            rows = rows_of(runs, [name]).dropna(subset=[target, "rho"])
            if rows["cell"].nunique() < 3 or not fit_optimum(rows, target, bootstrap=0).p_flat < 0.05:
                continue
            scores = aicc_by_form(rows, target)
            ranked = sorted(scores, key=scores.get)
            best, second = ranked[0], ranked[1]
            wins[best if scores[second] - scores[best] >= m.aicc else "tie"] += 1
    n = sum(wins.values())
    if n == 0:
        return Result(note="no frontier that is not flat")
    verdict = (
        "held"
        if wins["loglinear"] > n / 2
        else "not held"
        if n - wins["loglinear"] - wins["tie"] > n / 2
        else "inconclusive"
    )
    return Result(wins["loglinear"] / n, verdict=verdict, note=", ".join(f"{k} {v}" for k, v in wins.items()))


# ---------------------------------------------------------------------------------------- words


def loglinear_test(m: Margins = DEFAULT) -> str:
    return (
        "over every frontier (distinct setting x target) whose cells differ (one-way F test, p < 0.05): constant, log-linear (a + b log "
        "rho) and quadratic fits over all runs, compared by AICc; a form wins a frontier when it beats the "
        f"runner-up by >= {m.aicc}, else the frontier is a tie: held if log-linear wins a majority; not "
        "held if other forms win a majority; inconclusive otherwise, and when no frontier is not flat "
        "(our_value: share log-linear wins)"
    )


def no_gain_test(m: Margins = DEFAULT) -> str:
    return (
        "native reward of RACE's pick (the full-grid cell the first pilot budget's pilots chose) minus TRL's "
        "default allocation (K = G, mu = 1), both run at the full budget on fresh seeds (neither the "
        "pilots' nor the grid's), paired per distinct setting and seed: held if a TOST with margin "
        f"+-{m.gain} rejects (the 90% interval lies inside it); not held if the 95% interval lies above 0 "
        "(a stable gain); inconclusive otherwise, and with fewer than 3 pairs"
    )


FEWER_TEST = (
    "a consistency check of the planner, not a finding: stage A, in every cell, optimizer steps and "
    "rollouts (rounds x P x G) strictly decrease with policy size; held if so in every cell, else not "
    "held (our_value: largest/smallest size's optimizer steps, mean over cells)"
)


def with_kappa(result: Result, race: pd.DataFrame) -> Result:
    """``result`` with Cohen's kappa of the pilot and full regime labels in its note: a description,
    never the verdict."""
    from paper_repro.analysis.race import regime_kappa

    kappa, low, high = regime_kappa(race)
    words = "undefined (one label)" if np.isnan(kappa) else f"{kappa:.2f} (95% {low:.2f} to {high:.2f})"
    return replace(result, note=f"{result.note}; regime kappa, a description: {words}")


# ---------------------------------------------------------------------------------------- declarations

PILOTS = NotSimulated("the test reads the pilot grids, which the frontier model does not generate")
FRESH = NotSimulated(
    "the test reads the fresh seeds' picks and defaults, which the frontier model does not generate"
)
FITS = NotSimulated(
    "its AICc wins are not tabulated over the frontier model's truths (it reads the grid runs only, "
    "so it could be)"
)
PLANNER = NotSimulated("a consistency check of the planner's arithmetic: nothing random to simulate")


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
    from paper_repro.analysis.race import pilot_agreement_test

    return pilot_agreement_test()


@register_claim("race.pilots", sentence="RACE pilots at {fraction} of the budget name the full grid's regime",
                kind="paper claim", paper="race.pilots", reads=("race",), words=_pilot_words,
                simulation=PILOTS, variants=_pilot_fractions)  # fmt: skip
def _race_pilots(study: Study, fraction: float) -> Result:
    from paper_repro.analysis.race import pilot_agreement

    race = study.race
    race = race[~race["setting"].isin(list(study.classes.shared))]
    rows = race[race["pilot_fraction"] == fraction]
    return with_kappa(pilot_agreement(rows), rows)


@register_claim("race.no_gain", sentence="RACE gives no stable held-out gain over a fixed default allocation",
                kind="paper claim", paper="race.no_gain", reads=("race", "fresh"), margins=("gain",),
                simulation=FRESH, words=lambda s: no_gain_test(s.margins))  # fmt: skip
def _race_no_gain(study: Study) -> Result:
    return no_race_gain(study.gains, study.margins)


@register_claim("fits.loglinear", sentence="log-linear in rho is the best non-trivial fit", kind="paper claim",
                paper="fits.loglinear", reads=("grid",), margins=("aicc",), simulation=FITS,
                words=lambda s: loglinear_test(s.margins))  # fmt: skip
def _fits_loglinear(study: Study) -> Result:
    return loglinear(study.grid.runs, study.classes.distinct, study.margins)


@register_claim("planner.fewer_updates", sentence="larger policies buy fewer updates and rollouts at equal FLOPs",
                kind="consistency check", paper="qualitative", reads=("frontier",), simulation=PLANNER,
                words=lambda s: FEWER_TEST)  # fmt: skip
def _planner_fewer_updates(study: Study) -> Result:
    return fewer_updates(study.frontier, study.classes.sizes)
