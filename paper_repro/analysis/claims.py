"""The claims table: one row per paper claim, our estimate with its interval, a verdict, and the power.

Every verdict comes from a test fixed here, in code, before the numbers were looked at; the ``test``
column states it. Each test can return ``held``, ``not held`` and ``inconclusive``, and a flat world
(no optimum anywhere) can never produce ``held`` on a rho* claim: a frontier that is statistically
flat has no identified rho* (:mod:`paper_repro.analysis.optima`), and an unidentified rho* is
inconclusive. The margins are the profile's (``margins:``, :class:`paper_repro.config.Margins`, fixed
before the runs; the defaults are cpu-tiny's):

- ``rho`` (0.10): "rho* ~ x" holds when the 90% interval of rho* lies inside ``[x - 0.10, x + 0.10]``
  (two one-sided tests at 5%); the same margin decides "no difference" between two optima;
- ``gain`` (0.02): RACE's "no stable gain", a TOST on native reward;
- ``agree_correlation`` (0.8): targets agree on a setting when their cell-mean profiles correlate
  at least this much and the cell x target interaction is not significant;
- ``kappa_slight`` (0.2): pilot-grid agreement no better than slight (Landis and Koch);
- ``aicc`` (2): a fitted form wins a frontier when its AICc beats the runner-up by this much.

The paper states its rho* claims on the native reward. Because native rewards differ in scale and a
learned PRM's can be gamed, the reward-system claims are also tested on gsm pass@1 and on the judge
(rows marked *our addition*).

Settings are classed by the reward registry (:mod:`paper_repro.rewards`), never listed here:
*rule-based* settings are those whose reward is free (stage A's sizes and stage B's sparse,
structured, dense), *PRM-style* those charged the PRM's forward (proxy_prm, prm), *process-level*
(the pass@1-vs-judge claim) those that read the problem's steps or the PRM. A setting whose runs are
another setting's (stage B's ``sparse`` is stage A's middle policy) is counted once.

The **power** column: from each frontier's fitted quadratic and the covariance of its residuals
across a run's targets, studies with ``n`` seeds per cell are simulated and the same test is run on each (:mod:`paper_repro.analysis.power`);
``seeds_for_80pct_power`` is the smallest ``n`` (of :data:`paper_repro.analysis.power.SEEDS`) at
which the test decides (held or not held) in at least 80% of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from paper_repro import rewards
from paper_repro.analysis.optima import NAN, equivalence_verdict, fit_optimum, standardised
from paper_repro.config import Margins, Profile
from paper_repro.results import METRICS

DEFAULT = Margins()
DRAWS = 4000  # parametric draws of fitted coefficients (fixed seed)
RULE_BASED_RHO, PRM_STYLE_RHO = 0.72, 0.445  # the paper's values, as the summary reports them


@dataclass(frozen=True)
class Classes:
    """The distinct settings of a profile, by class (names, in the profile's order)."""

    rule_based: tuple[str, ...]
    prm_style: tuple[str, ...]
    process: tuple[str, ...]
    sizes: tuple[str, ...]  # stage A, smallest policy first
    middle: tuple[str, ...]  # the settings on the policy of stages B and D
    shared: dict[str, str] = field(default_factory=dict)  # a setting -> the one whose runs it reuses

    @classmethod
    def of(cls, profile: Profile, shared: dict[str, str]) -> Classes:
        settings = [s for s in profile.all_settings() if s.name not in shared]
        prm = tuple(s.name for s in settings if rewards.is_prm_based(s.reward_system))
        middle_policy = next((s.policy for s in profile.settings("B") + profile.settings("D")), None)
        return cls(
            rule_based=tuple(s.name for s in settings if s.name not in prm),
            prm_style=prm,
            process=tuple(s.name for s in settings if rewards.get(s.reward_system).reads != "answer"),
            sizes=tuple(s.name for s in profile.settings("A")),
            middle=tuple(s.name for s in settings if s.policy == middle_policy),
            shared=dict(shared),
        )


@dataclass(frozen=True)
class Result:
    value: float = NAN
    low: float = NAN
    high: float = NAN
    verdict: str = "inconclusive"
    note: str = ""


TARGET_WORDS = {
    "native_reward": "the native reward",
    "gsm_pass1": "gsm pass@1",
    "math_pass1": "math pass@1",
    "judge_score": "the judge's score",
}


def _of(runs: pd.DataFrame, names) -> pd.DataFrame:
    return runs[runs["setting"].isin(list(names))]


# ---------------------------------------------------------------------------------------- rho* ~ x


def near(runs: pd.DataFrame, names, x: float, m: Margins = DEFAULT, target: str = "native_reward") -> Result:
    """Each distinct setting's rho* of ``target`` tested for equivalence with ``x``; the class
    verdict is the majority's (more than half of the settings held, or more than half not held)."""
    verdicts, stars = [], []
    for name in names:
        opt = fit_optimum(_of(runs, [name]), target)
        verdicts.append(equivalence_verdict(opt, x, m.rho))
        if opt.identified:
            stars.append(opt.rho_star)
    if not verdicts:
        return Result(note="no runs of these settings")
    n = len(verdicts)
    held, not_held = verdicts.count("held"), verdicts.count("not held")
    verdict = "held" if held > n / 2 else "not held" if not_held > n / 2 else "inconclusive"
    note = "; ".join(f"{name}: {v}" for name, v in zip(names, verdicts, strict=True))
    return Result(float(np.median(stars)) if stars else NAN, verdict=verdict, note=note)


def near_test(x: float, m: Margins = DEFAULT, target: str = "native_reward") -> str:
    return (
        f"per distinct setting of the class, rho* of {TARGET_WORDS[target]} from the quadratic in realised "
        f"rho over all runs (Fieller intervals): a setting is held if its 90% interval lies inside "
        f"[{x - m.rho:.3g}, {x + m.rho:.3g}], not held if its 95% interval excludes {x}, inconclusive "
        f"otherwise and when rho* is not identified (flat frontier, lack of fit, no bounded interval); "
        f"the claim is held if more than half of the settings are held, not held if more than half are "
        f"not held, inconclusive otherwise (our_value: median rho* of the identified settings)"
    )


# ---------------------------------------------------------------------------------------- PRM lower


def _vertex_draws(params: np.ndarray, cov: np.ndarray, pairs, seed: int = 0) -> tuple[np.ndarray, float]:
    """Draws of the vertices ``-b1 / (2 b2)`` for each ``(b1 index, b2 index)`` list in ``pairs``
    (indices summed: a class's slope is the base slope plus its offset); returns (draws x vertices,
    the share of draws in which some curvature is not negative)."""
    rng = np.random.default_rng(seed)
    draws = rng.multivariate_normal(params, cov, size=DRAWS, method="svd")
    vertices, ok = [], np.ones(DRAWS, dtype=bool)
    for slope_idx, curve_idx in pairs:
        b1, b2 = draws[:, slope_idx].sum(axis=1), draws[:, curve_idx].sum(axis=1)
        ok &= b2 < 0
        vertices.append(-b1 / (2 * np.where(b2 == 0, np.nan, b2)))
    return np.column_stack(vertices)[ok], float(1 - ok.mean())


def lower(
    runs: pd.DataFrame,
    rule: tuple[str, ...],
    prm: tuple[str, ...],
    m: Margins = DEFAULT,
    target: str = "native_reward",
) -> Result:
    """PRM-style rho* minus rule-based rho*, on the same policy and a rho range both reach: one
    model of the standardised ``target`` with a setting intercept, a shared quadratic and a
    PRM-style offset on both its terms; the difference's interval from parametric draws."""
    from paper_repro.analysis.optima import OLS, f_test

    rows = _of(runs, (*rule, *prm)).dropna(subset=[target, "rho"])
    if not len(_of(rows, rule)) or not len(_of(rows, prm)):
        return Result(note="settings missing")
    reach = rows.groupby("setting")["rho"].agg(["min", "max"])
    lo, hi = float(reach["min"].max()), float(reach["max"].min())
    rows = rows[(rows["rho"] >= lo - 0.02) & (rows["rho"] <= hi + 0.02)].reset_index(drop=True)
    cells = rows.groupby("setting")["cell"].nunique().reindex(list((*rule, *prm)), fill_value=0)
    if cells.min() < 3 or rows.groupby(["setting", "cell"]).size().max() < 2:
        return Result(
            note=f"fewer than three cells with replicated seeds each in the common range {lo:.2f}-{hi:.2f}"
        )
    y = standardised(rows, target, "setting").to_numpy(float)
    rho = rows["rho"].to_numpy(float)
    is_prm = rows["setting"].isin(prm).to_numpy(float)
    intercepts = pd.get_dummies(rows["setting"], dtype=float).to_numpy()
    X = np.column_stack([intercepts, rho, rho**2, is_prm * rho, is_prm * rho**2])
    fit = OLS.fit(X, y)
    p_flat = f_test(OLS.fit(intercepts, y), fit)
    if not p_flat < 0.05:
        return Result(note=f"flat in the common range (p = {p_flat:.2g})")
    k = intercepts.shape[1]
    vertices, no_max = _vertex_draws(fit.params, fit.cov, [([k], [k + 1]), ([k, k + 2], [k + 1, k + 3])])
    if no_max > 0.05:
        return Result(note=f"no maximum in {no_max:.0%} of the draws (rho* not identified)")
    diff = vertices[:, 1] - vertices[:, 0]
    b = fit.params
    estimate = -(b[k] + b[k + 2]) / (2 * (b[k + 1] + b[k + 3])) + b[k] / (2 * b[k + 1])
    lo95, hi95 = np.percentile(diff, [2.5, 97.5])
    lo90, hi90 = np.percentile(diff, [5, 95])
    if hi95 < 0:
        verdict = "held"
    elif lo95 > 0 or (lo90 >= -m.rho and hi90 <= m.rho):
        verdict = "not held"
    else:
        verdict = "inconclusive"
    note = f"common range {lo:.2f}-{hi:.2f}"
    return Result(float(estimate), float(lo95), float(hi95), verdict, note)


def lower_test(m: Margins = DEFAULT, target: str = "native_reward") -> str:
    return (
        f"PRM-style minus rule-based rho* of {TARGET_WORDS[target]}, on the settings of the middle policy "
        "and the rho range all of them reach: one OLS model of the standardised score (setting intercepts, "
        "a shared quadratic in rho, a PRM-style offset on both terms), the difference's interval from "
        f"{DRAWS} parametric draws of the coefficients: held if the 95% interval lies below 0; not held if "
        f"it lies above 0 or the 90% interval lies inside [-{m.rho}, {m.rho}] (no difference); "
        "inconclusive otherwise, and when the frontier is flat or more than 5% of the draws have no maximum"
    )


# ---------------------------------------------------------------------------------------- targets


def disagree(runs: pd.DataFrame, names, m: Margins = DEFAULT) -> Result:
    """Per setting, the cell x target interaction on standardised, run-paired scores (an F test of
    cell x target terms over run effects), Holm-adjusted over settings; targets agree on a setting
    when the interaction is not significant and every pair of targets' cell-mean profiles
    correlates at least ``m.agree_correlation``."""
    from statsmodels.stats.multitest import multipletests

    pvalues, agree = [], []
    for name in names:
        rows = _of(runs, [name]).dropna(subset=list(METRICS))
        if rows["cell"].nunique() < 3 or len(rows) <= rows["cell"].nunique():
            continue
        values = rows[list(METRICS)].to_numpy(float)  # runs x targets
        std = values.std(axis=0, ddof=1)
        z = ((values - values.mean(axis=0)) / np.where(std > 0, std, np.nan)).ravel()  # run-major
        z = np.nan_to_num(z)
        n_targets = len(METRICS)
        runs_of = np.repeat(np.arange(len(rows)), n_targets)
        cell_of = np.repeat(pd.factorize(rows["cell"])[0], n_targets)
        target_of = np.tile(np.arange(n_targets), len(rows))
        # cell x target terms beyond the run effects (the first target's are the runs' own)
        n_cells = cell_of.max() + 1
        index = cell_of * (n_targets - 1) + target_of - 1
        terms = np.zeros((len(z), n_cells * (n_targets - 1)))
        keep = target_of > 0
        terms[np.flatnonzero(keep), index[keep]] = 1.0
        pvalues.append(_within_run_f_test(z, terms, runs_of))
        profiles = pd.DataFrame(z.reshape(len(rows), n_targets)).groupby(cell_of[::n_targets]).mean()
        with np.errstate(invalid="ignore", divide="ignore"):
            corr = np.corrcoef(profiles.to_numpy().T)
        agree.append(bool(np.nanmin(corr) >= m.agree_correlation) if np.isfinite(corr).any() else False)
    if not pvalues:
        return Result(note="no setting with three cells and replicated seeds")
    significant = multipletests(np.nan_to_num(pvalues, nan=1.0), method="holm")[0]
    n = len(pvalues)
    agreeing = sum(a and not s for a, s in zip(agree, significant, strict=True))
    share = float(np.mean(significant))
    if significant.sum() > n / 2:
        verdict = "held"
    elif agreeing > n / 2:
        verdict = "not held"
    else:
        verdict = "inconclusive"
    note = f"{int(significant.sum())} of {n} settings disagree, {agreeing} agree"
    return Result(share, verdict=verdict, note=note)


def _within_run_f_test(z: np.ndarray, terms: np.ndarray, runs_of: np.ndarray) -> float:
    """p of the F test of ``terms`` over run effects, by removing each run's mean (the same test as
    OLS with one dummy per run, without building the dummies)."""
    from paper_repro.analysis.optima import OLS, f_test

    def within(a: np.ndarray) -> np.ndarray:
        sums = np.zeros((runs_of.max() + 1, *a.shape[1:]))
        np.add.at(sums, runs_of, a)
        return a - (sums / np.bincount(runs_of).reshape((-1,) + (1,) * (a.ndim - 1)))[runs_of]

    zd, td = within(z), within(terms)
    n_runs = runs_of.max() + 1
    reduced = OLS(np.zeros(0), np.zeros((0, 0)), float(zd @ zd), len(z) - n_runs)
    params, _, rank, _ = np.linalg.lstsq(td, zd, rcond=None)
    full = OLS(params, np.zeros((0, 0)), float(np.sum((zd - td @ params) ** 2)), len(z) - n_runs - rank)
    return f_test(reduced, full)


def disagree_test(m: Margins = DEFAULT) -> str:
    return (
        "per distinct setting, the four targets standardised and stacked by run; an F test of cell x "
        "target terms over run effects (OLS), Holm-adjusted over settings: held if the interaction is "
        "significant in a majority of settings; not held if in a majority it is not and every pair of "
        f"targets' cell-mean profiles correlates >= {m.agree_correlation}; inconclusive otherwise "
        "(our_value: share of settings with a significant interaction)"
    )


def pass1_vs_judge(runs: pd.DataFrame, names, m: Margins = DEFAULT) -> Result:
    """Over the process-level settings whose gsm pass@1 and judge frontiers both have an identified
    rho*: pass@1's rho* minus the judge's, bounded by the extremes of the two Fieller intervals (a
    conservative interval for the difference: wider than any joint one)."""
    agree = disagree_n = 0
    considered = []
    for name in names:
        rows = _of(runs, [name])
        p1, judge = fit_optimum(rows, "gsm_pass1"), fit_optimum(rows, "judge_score")
        if not (p1.identified and judge.identified):
            continue
        considered.append(name)
        diff_low = p1.ci95_low - judge.ci95_high  # conservative: the two 95% intervals' extremes
        diff_high = p1.ci95_high - judge.ci95_low
        interior = judge.status == "interior"
        if diff_low > 0 and interior:
            agree += 1
        elif diff_high < 0 or (
            p1.ci90_low - judge.ci90_high >= -m.rho and p1.ci90_high - judge.ci90_low <= m.rho
        ):
            disagree_n += 1
    n = len(considered)
    if n == 0:
        return Result(note="no process-level setting with pass@1 and judge frontiers both identified")
    verdict = "held" if agree > n / 2 else "not held" if disagree_n > n / 2 else "inconclusive"
    return Result(agree / n, verdict=verdict, note=f"settings considered: {', '.join(considered)}")


def pass1_test(names, m: Margins = DEFAULT) -> str:
    return (
        f"settings {', '.join(names)} whose gsm pass@1 and judge frontiers both have an identified rho*: a "
        "setting agrees when the 95% intervals put pass@1's rho* above the judge's (every value of one "
        "above every value of the other) and the judge's optimum is interior; it disagrees when they put "
        f"it below, or both 90% intervals lie within {m.rho} of each other; held if a majority agree, "
        "not held if a majority disagree, inconclusive otherwise (our_value: share that agree)"
    )


# ---------------------------------------------------------------------------------------- fits


def aicc(rss: float, n: int, k: int) -> float:
    """AICc of a Gaussian least-squares fit with ``k`` coefficients (the variance adds one)."""
    p = k + 1
    if n - p - 1 <= 0 or rss <= 0:
        return NAN
    return n * np.log(rss / n) + 2 * p + 2 * p * (p + 1) / (n - p - 1)


def loglinear(runs: pd.DataFrame, names, m: Margins = DEFAULT) -> Result:
    """Over the frontiers (distinct setting x target) that are not flat: constant, log-linear and
    quadratic in rho by AICc over all runs; a form wins when it beats the runner-up by ``m.aicc``."""
    wins: dict[str, int] = {"constant": 0, "loglinear": 0, "quadratic": 0, "tie": 0}
    for name in names:
        for target in METRICS:
            rows = _of(runs, [name]).dropna(subset=[target, "rho"])
            if fit_optimum(rows, target).reason.startswith(("flat", "too few", "no seed")):
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


def aicc_by_form(rows: pd.DataFrame, target: str) -> dict[str, float]:
    """AICc of the constant, log-linear and quadratic fits of ``target`` on rho over ``rows``."""
    return {kind: aicc(*_rss(rows, target, kind)) for kind in ("constant", "loglinear", "quadratic")}


def _rss(rows: pd.DataFrame, target: str, kind: str) -> tuple[float, int, int]:
    x = rows["rho"].to_numpy(float)
    y = rows[target].to_numpy(float)
    cols = {"constant": [np.ones_like(x)], "loglinear": [np.ones_like(x), np.log(x)],
            "quadratic": [np.ones_like(x), x, x**2]}[kind]  # fmt: skip
    X = np.column_stack(cols)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    return float(np.sum((X @ coef - y) ** 2)), len(y), X.shape[1]


def loglinear_test(m: Margins = DEFAULT) -> str:
    return (
        "over every frontier (distinct setting x target) that is not flat: constant, log-linear (a + b log "
        "rho) and quadratic fits over all runs, compared by AICc; a form wins a frontier when it beats the "
        f"runner-up by >= {m.aicc}, else the frontier is a tie: held if log-linear wins a majority; not "
        "held if other forms win a majority; inconclusive otherwise, and when no frontier is not flat "
        "(our_value: share log-linear wins; its power is simulated from the fitted quadratics, so it says "
        "how often the test decides when the truth is quadratic)"
    )


# ---------------------------------------------------------------------------------------- RACE


def same_regime(race: pd.DataFrame, ceiling: float, m: Margins = DEFAULT) -> Result:
    """Cohen's kappa of the pilots' regime against the full grid's, over the distinct settings."""
    from statsmodels.stats.inter_rater import cohens_kappa

    if race.empty:
        return Result(note="no pilots")
    labels = sorted(set(race["pilot_regime"]) | set(race["full_regime"]))
    table = pd.crosstab(race["pilot_regime"], race["full_regime"]).reindex(
        index=labels, columns=labels, fill_value=0
    )
    rate = float(race["same_regime"].mean())
    if len(labels) < 2:
        return Result(rate, note=f"one regime only ({labels[0]}): kappa is undefined; rate {rate:.2f}")
    k = cohens_kappa(table.to_numpy())
    lo, hi = float(k.kappa_low), float(k.kappa_upp)
    if lo > 0 and (np.isnan(ceiling) or rate >= ceiling):
        verdict = "held"
    elif hi < m.kappa_slight:
        verdict = "not held"
    else:
        verdict = "inconclusive"
    note = f"same-regime rate {rate:.2f}; ceiling from the full grid's own seed halves {ceiling:.2f}"
    return Result(float(k.kappa), lo, hi, verdict, note)


def same_regime_test(m: Margins = DEFAULT) -> str:
    return (
        "Cohen's kappa (statsmodels) of the pilot grid's regime against the full grid's over the distinct "
        "settings, with its 95% interval: held if the interval lies above 0 and the same-regime rate "
        "reaches the ceiling the full grid's own seed noise allows (the rate at which two disjoint halves "
        f"of its seeds name the same regime); not held if the interval's upper bound is below "
        f"{m.kappa_slight} (no better than slight agreement); inconclusive otherwise (our_value: kappa)"
    )


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


# ---------------------------------------------------------------------------------------- planner


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


FEWER_TEST = (
    "a consistency check of the planner, not a finding: stage A, in every cell, optimizer steps and "
    "rollouts (rounds x P x G) strictly decrease with policy size; held if so in every cell, else not "
    "held (our_value: largest/smallest size's optimizer steps, mean over cells)"
)


# ---------------------------------------------------------------------------------------- the table


def fraction_words(fraction: float) -> str:
    """``0.125`` -> ``1/8``: a pilot budget as a fraction of the full one."""
    from fractions import Fraction

    return str(Fraction(fraction).limit_denominator(1000))


def claims_table(
    runs: pd.DataFrame,
    frontier: pd.DataFrame,
    race: pd.DataFrame,
    gains: np.ndarray,
    ceiling: float,
    classes: Classes,
    replicates: int | None = None,
    margins: Margins = DEFAULT,
) -> pd.DataFrame:
    """One row per claim. ``runs``: the full-budget grid runs of the distinct settings; ``race``: the
    RACE table (one row per setting and pilot fraction; its distinct settings are used, its first
    fraction is the paper's pilot); ``gains``: RACE's fresh-seed gains; ``replicates``: simulated
    studies per seed count for the power column (None: the power module's default; 0: no power
    column); ``margins``: the profile's."""
    from paper_repro.analysis import power

    c, m = classes, margins
    distinct = [*c.rule_based, *c.prm_style]
    middle_rule = tuple(s for s in c.middle if s in c.rule_based)
    middle_prm = tuple(s for s in c.middle if s in c.prm_style)
    race = race[~race["setting"].isin(c.shared)] if len(race) else race
    fractions = list(dict.fromkeys(race["pilot_fraction"])) if len(race) else []
    claims = []
    for target in ("native_reward", "gsm_pass1", "judge_score"):
        ours = target != "native_reward"
        on = f" (on {TARGET_WORDS[target]})" if ours else ""
        kind = "our addition" if ours else "paper claim"
        claims += [
            (f"rule-based rewards: rho* ~ 0.72{on}", kind, "0.72",
             lambda r, t=target: near(r, c.rule_based, RULE_BASED_RHO, m, t), near_test(RULE_BASED_RHO, m, target)),
            (f"PRM-style rewards: rho* ~ 0.44-0.45{on}", kind, "0.44-0.45",
             lambda r, t=target: near(r, c.prm_style, PRM_STYLE_RHO, m, t), near_test(PRM_STYLE_RHO, m, target)),
            (f"PRM-style rho* is lower than rule-based rho*{on}", kind, "0.44-0.45 < 0.72",
             lambda r, t=target: lower(r, middle_rule, middle_prm, m, t), lower_test(m, target)),
        ]  # fmt: skip
    claims += [
        ("evaluation targets disagree on the best allocation", "paper claim", "qualitative",
         lambda r: disagree(r, distinct, m), disagree_test(m)),
        ("dense/PRM rewards: pass@1 prefers a high-update cell, the judge a mid-update cell", "paper claim",
         "a180 (pass@1) vs a100 (judge)", lambda r: pass1_vs_judge(r, c.process, m), pass1_test(c.process, m)),
    ]  # fmt: skip
    fixed = {}
    for i, fraction in enumerate(fractions):
        name = f"RACE pilots at {fraction_words(fraction)} of the budget name the full grid's regime"
        claims.append((name, "paper claim" if i == 0 else "our addition", "1.0" if i == 0 else "not tested by the paper",
                       None, same_regime_test(m)))  # fmt: skip
        fixed[name] = same_regime(race[race["pilot_fraction"] == fraction], ceiling, m)
    claims += [
        ("RACE gives no stable held-out gain over a fixed default allocation", "paper claim", "no stable gain",
         None, no_gain_test(m)),
        ("log-linear in rho is the best non-trivial fit", "paper claim", "log-linear best",
         lambda r: loglinear(r, distinct, m), loglinear_test(m)),
        ("larger policies buy fewer updates and rollouts at equal FLOPs", "consistency check", "qualitative",
         None, FEWER_TEST),
    ]  # fmt: skip
    fixed["RACE gives no stable held-out gain over a fixed default allocation"] = no_race_gain(gains, m)
    fixed["larger policies buy fewer updates and rollouts at equal FLOPs"] = fewer_updates(frontier, c.sizes)
    truth = power.fitted_frontiers(runs, distinct) if replicates != 0 else []
    covariances = power.noise_covariances(runs, truth) if truth else None
    seeds_now = int(runs.groupby(["setting", "cell"])["seed"].nunique().median()) if len(runs) else 0
    rows = []
    for claim, kind, paper, test, text in claims:
        result = fixed.get(claim) or test(runs)
        rec = {"claim": claim, "kind": kind, "paper_value": paper, "our_value": result.value,
               "ci_low": result.low, "ci_high": result.high, "verdict": result.verdict,
               "note": result.note, "test": text, "seeds_per_cell": seeds_now}  # fmt: skip
        rec.update(_power_columns(test, truth, replicates, seeds_now, covariances))
        rows.append(rec)
    return pd.DataFrame(rows)


def _power_columns(test, truth, replicates, seeds_now: int, covariances=None) -> dict:
    """The power at the study's seeds per cell and the seeds that reach 80% (:mod:`.power`)."""
    from paper_repro.analysis import power

    if test is None:
        reason = "not simulated: the test reads the pilot grid or the planner, which the frontier model does not generate"
        return {"power_now": NAN, "seeds_for_80pct_power": NAN, "power_note": reason}
    if not truth:
        return {"power_now": NAN, "seeds_for_80pct_power": NAN, "power_note": "not computed"}
    kwargs = {} if replicates is None else {"replicates": replicates}
    counts = tuple(sorted({*power.SEEDS, seeds_now} - {0}))
    powers = power.power(
        lambda r: test(r).verdict, truth, seeds=counts, through=seeds_now, covariances=covariances, **kwargs
    )
    needed = power.seeds_needed(powers)
    note = ", ".join(f"{n} seeds: {p:.2f}" for n, p in powers.items())
    if needed is None:
        note += f"; not decidable at 80% power with up to {max(power.SEEDS)} seeds per cell"
    return {
        "power_now": powers.get(seeds_now, NAN),
        "seeds_for_80pct_power": float(needed or NAN),
        "power_note": note,
    }
