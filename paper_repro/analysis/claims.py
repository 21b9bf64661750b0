"""The claims table: one row per paper claim, our estimate with its interval, a verdict, and how
often its test is wrong.

Every verdict comes from a test fixed here, in code, before the numbers were looked at; the ``test``
column states it. The rho* claims decide from **the cells that could be best**
(:func:`paper_repro.analysis.optima.best_set`), never from a fitted curve:

- "rho* ~ x" per setting: held when every cell that could be best lies in ``x +- margins.rho``,
  not held when none does, inconclusive otherwise;
- a class of settings (rule-based, PRM-style): *heterogeneous* when two settings' sets share no
  allocation (a fourth verdict, with no class value: never a median of settings that contradict each
  other); else held when every setting is held, not held when every one is not held, inconclusive
  otherwise. Its sets are taken at ``1 - 0.05 / S`` over its ``S`` settings, so a false contradiction
  stays under 5%;
- "PRM-style is lower", "pass@1 above the judge", "targets disagree": whole best sets compared, one
  wholly below the other (by more than :data:`paper_repro.analysis.optima.SAME_RHO`) or not.

A flat world never gives *held*: every cell could be best, so no set fits in a window. The margins
are the profile's (``margins:``, :class:`paper_repro.config.Margins`, fixed before the runs): ``rho``
(the window), ``recipe_sd`` (the recipe effect the sets allow for; ``null``: estimated from the
study's own frontiers), ``gain`` (RACE's TOST), ``aicc``, ``gaming``.

The paper states its rho* claims on the native reward. Because native rewards differ in scale and a
learned PRM's can be gamed, the reward-system claims are also tested on gsm pass@1 and on the judge
(rows marked *our addition*).

Settings are classed by the reward registry (:mod:`paper_repro.rewards`), never listed here:
*rule-based* settings are those whose reward is free (stage A's sizes and stage B's sparse,
structured, dense), *PRM-style* those charged the PRM's forward (proxy_prm, prm), *process-level*
(the pass@1-vs-judge claim) those that read the problem's steps or the PRM. A setting whose runs are
another setting's (stage B's ``sparse`` is stage A's middle policy) is counted once.

Beside each verdict: its **operating characteristics** (``oc_*``, from ``design.csv``, written by
``paper-repro design``: :mod:`paper_repro.analysis.design`), and its **power** (the share of
studies simulated from the committed frontiers' unimodal fits, with their seed noise and recipe
effect, that decide; ``seeds_for_80pct_power`` the smallest seed count at which 80% do).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from paper_repro import rewards
from paper_repro.analysis.optima import (
    ALPHA,
    SAME_RHO,
    Cells,
    best_set,
    fit_optimum,
    overlap,
    recipe_sd_estimate,
    window_verdict,
)
from paper_repro.analysis.verdict import NAN, Result
from paper_repro.config import Margins, Profile
from paper_repro.results import METRICS

DEFAULT = Margins()
TARGET_POWER = 0.8  # the power column's "seeds for 80%"
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


TARGET_WORDS = {
    "native_reward": "the native reward",
    "gsm_pass1": "gsm pass@1",
    "math_pass1": "math pass@1",
    "judge_score": "the judge's score",
}


def _of(runs: pd.DataFrame, names) -> pd.DataFrame:
    return runs[runs["setting"].isin(list(names))]


# ---------------------------------------------------------------------------------------- per setting


@dataclass(frozen=True)
class SettingBest:
    """One setting's frontier of one target: the realised rhos of its cells that could be best, and
    (when estimated) rho* with its interval."""

    setting: str
    cells: str  # the best set's cells, in order of rho
    rhos: np.ndarray  # their realised rho
    star: float = NAN
    low: float = NAN
    high: float = NAN
    status: str = ""

    @property
    def span(self) -> tuple[float, float]:
        return (float(self.rhos.min()), float(self.rhos.max())) if len(self.rhos) else (NAN, NAN)

    def words(self) -> str:
        return f"{self.setting} {{{self.cells}}}"


class Frontiers:
    """A runs table with each (setting, target) frontier summarised once (:class:`Cells`): the claim
    tests read it many times per table, and the design simulator thousands of times."""

    def __init__(self, runs: pd.DataFrame) -> None:
        self.runs = runs
        self._cells: dict[tuple[str, str], Cells] | None = None
        self._recipe_sd: float | None = None

    @classmethod
    def of(cls, runs: pd.DataFrame | Frontiers) -> Frontiers:
        return runs if isinstance(runs, Frontiers) else cls(runs)

    def cells(self, setting: str, target: str) -> Cells:
        if self._cells is None:
            self._cells = self._summarise()
        return self._cells.get((setting, target), Cells((), *(np.zeros(0),) * 3, np.zeros(0, dtype=int)))

    def recipe_sd(self, m: Margins) -> float:
        """The recipe effect the best sets allow for: the margins' when given, else the one this
        table's frontiers show (:func:`paper_repro.analysis.optima.recipe_sd_estimate`, over every
        setting and target in it)."""
        if m.recipe_sd is not None:
            return m.recipe_sd
        if self._recipe_sd is None:
            if self._cells is None:
                self._cells = self._summarise()
            self._recipe_sd = recipe_sd_estimate(list(self._cells.values()))
        return self._recipe_sd

    def _summarise(self) -> dict[tuple[str, str], Cells]:
        targets = [t for t in METRICS if t in self.runs]
        if self.runs.empty or not targets:
            return {}
        g = self.runs.groupby(["setting", "cell"], sort=False)
        mean, var, count = g[targets].mean(), g[targets].var(ddof=1), g[targets].count()
        rho = g["rho"].mean()
        out = {}
        for setting in dict.fromkeys(mean.index.get_level_values(0)):
            order = rho.loc[setting].sort_values(kind="stable")
            names = tuple(map(str, order.index))
            for t in targets:
                n = count.loc[setting, t].reindex(order.index).to_numpy(int)
                has = n > 0
                out[(setting, t)] = Cells(
                    tuple(np.array(names, dtype=object)[has]), order.to_numpy(float)[has],
                    mean.loc[setting, t].reindex(order.index).to_numpy(float)[has],
                    var.loc[setting, t].reindex(order.index).to_numpy(float)[has], n[has],
                )  # fmt: skip
        return out


def setting_best(
    runs: pd.DataFrame | Frontiers, name: str, target: str, m: Margins, estimate: bool = True, family: int = 1
) -> SettingBest:
    """The cells of setting ``name`` that could be best for ``target`` (the decision; at level
    ``1 - ALPHA / family``, Bonferroni over the ``family`` sets a claim reads together), and with
    ``estimate`` its unimodal rho* with the seed-bootstrap interval (a description)."""
    frontiers = Frontiers.of(runs)
    cells = frontiers.cells(name, target)
    tau = frontiers.recipe_sd(m)
    keep = best_set(cells, tau, ALPHA / family)
    names = " ".join(np.array(cells.names, dtype=object)[keep])
    if not estimate:
        return SettingBest(name, names, cells.rho[keep])
    opt = fit_optimum(_of(frontiers.runs, [name]), target, tau, describe=False)
    return SettingBest(name, names, cells.rho[keep], opt.rho_star, opt.ci95_low, opt.ci95_high, opt.status)


def contradict(bests: list[SettingBest]) -> list[tuple[str, str]]:
    """The pairs of settings whose best sets share no allocation (one lies wholly beyond the other)."""
    return [
        (a.setting, b.setting)
        for i, a in enumerate(bests)
        for b in bests[i + 1 :]
        if len(a.rhos) and len(b.rhos) and not overlap(a.span, b.span)
    ]


def _class_estimate(bests: list[SettingBest]) -> tuple[float, float, float]:
    """The class's rho*: the median of its settings' estimates, with the envelope of their intervals
    (only ever called on settings whose best sets overlap)."""
    stars = [b.star for b in bests if np.isfinite(b.star)]
    if not stars:
        return NAN, NAN, NAN
    lows = [b.low for b in bests if np.isfinite(b.low)]
    highs = [b.high for b in bests if np.isfinite(b.high)]
    return float(np.median(stars)), min(lows, default=NAN), max(highs, default=NAN)


def _unanimous(verdicts: list[str]) -> str:
    """ "held" or "not held" when every setting says so, else ""."""
    return verdicts[0] if verdicts and verdicts[0] in ("held", "not held") and len(set(verdicts)) == 1 else ""


def _sets_words(bests: list[SettingBest]) -> str:
    return "; ".join(b.words() for b in bests)


# ---------------------------------------------------------------------------------------- rho* ~ x


def near(
    runs: pd.DataFrame,
    names,
    x: float,
    m: Margins = DEFAULT,
    target: str = "native_reward",
    estimate: bool = True,
) -> Result:
    """ "rho* ~ x" for a class of settings: each setting's verdict from its best set
    (:func:`paper_repro.analysis.optima.window_verdict`); the class is heterogeneous when two
    settings' sets share no allocation, else held when every setting is held, not held when every
    one is not held, inconclusive otherwise."""
    runs = Frontiers.of(runs)
    bests = [setting_best(runs, name, target, m, estimate, len(names)) for name in names]
    bests = [b for b in bests if len(b.rhos)]
    if not bests:
        return Result(note="no runs of these settings")
    verdicts = [window_verdict(b.rhos, x, m.rho) for b in bests]
    per_setting = "; ".join(f"{b.setting}: {v}" for b, v in zip(bests, verdicts, strict=True))
    split = contradict(bests)
    if split:
        pairs = ", ".join(f"{a} vs {b}" for a, b in split)
        return Result(verdict="heterogeneous", note=f"best sets share no allocation: {pairs}; {per_setting}",
                      best_cells=_sets_words(bests), unanimous=_unanimous(verdicts))  # fmt: skip
    verdict = _unanimous(verdicts) or "inconclusive"
    value, low, high = _class_estimate(bests)
    return Result(value, low, high, verdict, per_setting, _sets_words(bests))


def _recipe_words(m: Margins) -> str:
    if m.recipe_sd is None:
        return "the recipe effect the study's frontiers show (the unimodal fits' lack of fit)"
    return f"a recipe effect of SD {m.recipe_sd}"


def near_test(x: float, m: Margins = DEFAULT, target: str = "native_reward") -> str:
    return (
        f"per distinct setting of the class, the cells that could be best for {TARGET_WORDS[target]} at 95% "
        f"(Gupta's subset over all runs, Bonferroni, seed noise plus {_recipe_words(m)}): a "
        f"setting is held if every one of them has realised rho in [{x - m.rho:.3g}, {x + m.rho:.3g}], not "
        "held if none has, inconclusive otherwise; the class is heterogeneous if two settings' sets share no "
        "allocation, else held if every setting is held, not held if every one is not held, inconclusive "
        "otherwise (our_value: the median of the settings' unimodal rho*, only where their sets overlap; "
        "interval: the envelope of their seed-bootstrap 95% intervals)"
    )


# ---------------------------------------------------------------------------------------- PRM lower


def _ordered(low: list[SettingBest], high: list[SettingBest]) -> str:
    """Whether the best sets of ``low`` lie below those of ``high``: "held" when every allocation of the
    first lies below every one of the second (by more than :data:`SAME_RHO`), "not held" when none of
    the first lies below any of the second, "inconclusive" otherwise."""
    a = np.concatenate([b.rhos for b in low])
    c = np.concatenate([b.rhos for b in high])
    if a.max() < c.min() - SAME_RHO:
        return "held"
    if a.min() >= c.max() - SAME_RHO:
        return "not held"
    return "inconclusive"


def lower(
    runs: pd.DataFrame,
    rule: tuple[str, ...],
    prm: tuple[str, ...],
    m: Margins = DEFAULT,
    target: str = "native_reward",
    estimate: bool = True,
) -> Result:
    """PRM-style rho* below rule-based rho*, on the settings of one policy: heterogeneous when two
    settings of one class contradict; else held when every PRM-style best cell lies below every
    rule-based one, not held when none does, inconclusive otherwise."""
    runs = Frontiers.of(runs)
    family = len(rule) + len(prm)
    rb = [b for b in (setting_best(runs, n, target, m, estimate, family) for n in rule) if len(b.rhos)]
    pb = [b for b in (setting_best(runs, n, target, m, estimate, family) for n in prm) if len(b.rhos)]
    if not rb or not pb:
        return Result(note="settings missing")
    sets = _sets_words([*rb, *pb])
    split = contradict(rb) + contradict(pb)
    verdict = _ordered(pb, rb)
    if split:
        pairs = ", ".join(f"{a} vs {b}" for a, b in split)
        return Result(verdict="heterogeneous", note=f"within a class, best sets share no allocation: {pairs}",
                      best_cells=sets, unanimous=verdict if verdict != "inconclusive" else "")  # fmt: skip
    value = _class_estimate(pb)[0] - _class_estimate(rb)[0]
    return Result(value, verdict=verdict, note="PRM-style minus rule-based median rho*", best_cells=sets)


def lower_test(m: Margins = DEFAULT, target: str = "native_reward") -> str:
    return (
        f"on the settings of the middle policy, each setting's cells that could be best for {TARGET_WORDS[target]} "
        f"at 95% (as for rho* ~ x): heterogeneous if two settings of one class share no allocation; else "
        f"held if every PRM-style best cell's rho lies below every rule-based one's by more than {SAME_RHO}, "
        f"not held if no PRM-style best cell lies below any rule-based one by more than {SAME_RHO}, "
        "inconclusive otherwise (our_value: PRM-style minus rule-based median unimodal rho*)"
    )


# ---------------------------------------------------------------------------------------- targets


def disagree(runs: pd.DataFrame, names, m: Margins = DEFAULT, estimate: bool = True) -> Result:
    """Do the targets pick different allocations? Per setting, from each target's best set: the
    targets disagree when two of them share no allocation, agree when every target's best set lies
    within one window of width ``2 m.rho``; held when a majority of settings disagree, not held when
    a majority agree, inconclusive otherwise."""
    runs = Frontiers.of(runs)
    disagreeing, agreeing, n = [], [], 0
    for name in names:
        bests = [setting_best(runs, name, t, m, estimate=False, family=len(METRICS)) for t in METRICS]
        bests = [b for b in bests if len(b.rhos)]
        if len(bests) < 2:
            continue
        n += 1
        if contradict(bests):
            disagreeing.append(name)
        elif np.ptp(np.concatenate([b.rhos for b in bests])) <= 2 * m.rho + 1e-12:
            agreeing.append(name)
    if n == 0:
        return Result(note="no setting with two targets")
    verdict = "held" if len(disagreeing) > n / 2 else "not held" if len(agreeing) > n / 2 else "inconclusive"
    note = (
        f"{len(disagreeing)} of {n} settings disagree ({', '.join(disagreeing) or 'none'}), "
        f"{len(agreeing)} agree ({', '.join(agreeing) or 'none'})"
    )
    return Result(len(disagreeing) / n, verdict=verdict, note=note)


def disagree_test(m: Margins = DEFAULT) -> str:
    return (
        "per distinct setting, each target's cells that could be best at 95% (as for rho* ~ x): the targets "
        "disagree on a setting when two targets' best sets share no allocation, agree when all of them lie "
        f"within a window of width {2 * m.rho:.2g} in rho; held if a majority of settings disagree, not held "
        "if a majority agree, inconclusive otherwise (our_value: share of settings that disagree)"
    )


def pass1_vs_judge(runs: pd.DataFrame, names, m: Margins = DEFAULT, estimate: bool = True) -> Result:
    """Per process-level setting, whether gsm pass@1's best set lies above the judge's (as
    :func:`lower`, mirrored); held when every setting says so, not held when none does,
    heterogeneous when settings say both, inconclusive otherwise."""
    runs = Frontiers.of(runs)
    verdicts, sets = {}, []
    for name in names:
        p1 = setting_best(runs, name, "gsm_pass1", m, estimate=False, family=2 * len(names))
        judge = setting_best(runs, name, "judge_score", m, estimate=False, family=2 * len(names))
        if not len(p1.rhos) or not len(judge.rhos):
            continue
        verdicts[name] = _ordered([judge], [p1])
        sets.append(f"{name}: pass@1 {{{p1.cells}}}, judge {{{judge.cells}}}")
    if not verdicts:
        return Result(note="no process-level setting with both targets")
    values = list(verdicts.values())
    if "held" in values and "not held" in values:
        verdict = "heterogeneous"
    elif all(v == "held" for v in values):
        verdict = "held"
    elif all(v == "not held" for v in values):
        verdict = "not held"
    else:
        verdict = "inconclusive"
    note = "; ".join(f"{k}: {v}" for k, v in verdicts.items())
    return Result(values.count("held") / len(values), verdict=verdict, note=note, best_cells="; ".join(sets),
                  unanimous=_unanimous(values))  # fmt: skip


def pass1_test(names, m: Margins = DEFAULT) -> str:
    return (
        f"settings {', '.join(names)}: each one's cells that could be best for gsm pass@1 and for the judge at "
        f"95% (as for rho* ~ x); a setting says pass@1 prefers more update when every pass@1 best cell's rho "
        f"lies above every judge best cell's by more than {SAME_RHO}, and the opposite when none does; held "
        "if every setting says so, not held if none does, heterogeneous if settings say both, inconclusive "
        "otherwise (our_value: share of settings that say so)"
    )


# ---------------------------------------------------------------------------------------- fits


def aicc(rss: float, n: int, k: int) -> float:
    """AICc of a Gaussian least-squares fit with ``k`` coefficients (the variance adds one)."""
    p = k + 1
    if n - p - 1 <= 0 or rss <= 0:
        return NAN
    return n * np.log(rss / n) + 2 * p + 2 * p * (p + 1) / (n - p - 1)


def loglinear(runs: pd.DataFrame, names, m: Margins = DEFAULT) -> Result:
    """Over the frontiers (distinct setting x target) whose cells differ (one-way F, p < 0.05):
    constant, log-linear and quadratic in rho by AICc over all runs; a form wins when it beats the
    runner-up by ``m.aicc``."""
    wins: dict[str, int] = {"constant": 0, "loglinear": 0, "quadratic": 0, "tie": 0}
    for name in names:
        for target in METRICS:
            rows = _of(runs, [name]).dropna(subset=[target, "rho"])
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
        "over every frontier (distinct setting x target) whose cells differ (one-way F test, p < 0.05): constant, log-linear (a + b log "
        "rho) and quadratic fits over all runs, compared by AICc; a form wins a frontier when it beats the "
        f"runner-up by >= {m.aicc}, else the frontier is a tie: held if log-linear wins a majority; not "
        "held if other forms win a majority; inconclusive otherwise, and when no frontier is not flat "
        "(our_value: share log-linear wins)"
    )


# ---------------------------------------------------------------------------------------- RACE


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


@dataclass(frozen=True)
class Claim:
    """One row of the claims table: its words, its kind, the paper's value and its test (``None``
    where the verdict comes from the RACE or planner tables instead of the runs)."""

    name: str
    kind: str
    paper_value: str
    test: Callable[[pd.DataFrame, bool], Result] | None
    text: str


def frontier_claims(c: Classes, m: Margins = DEFAULT) -> list[Claim]:
    """The claims decided from the full-budget frontiers alone, in the table's order: the ones the
    design simulator (:mod:`paper_repro.analysis.design`) runs. Each test takes ``(runs, estimate)``."""
    middle_rule = tuple(s for s in c.middle if s in c.rule_based)
    middle_prm = tuple(s for s in c.middle if s in c.prm_style)
    distinct = [*c.rule_based, *c.prm_style]
    out = []
    for target in ("native_reward", "gsm_pass1", "judge_score"):
        ours = target != "native_reward"
        on = f" (on {TARGET_WORDS[target]})" if ours else ""
        kind = "our addition" if ours else "paper claim"
        out += [
            Claim(f"rule-based rewards: rho* ~ 0.72{on}", kind, "0.72",
                  lambda r, e, t=target: near(r, c.rule_based, RULE_BASED_RHO, m, t, e),
                  near_test(RULE_BASED_RHO, m, target)),
            Claim(f"PRM-style rewards: rho* ~ 0.44-0.45{on}", kind, "0.44-0.45",
                  lambda r, e, t=target: near(r, c.prm_style, PRM_STYLE_RHO, m, t, e),
                  near_test(PRM_STYLE_RHO, m, target)),
            Claim(f"PRM-style rho* is lower than rule-based rho*{on}", kind, "0.44-0.45 < 0.72",
                  lambda r, e, t=target: lower(r, middle_rule, middle_prm, m, t, e), lower_test(m, target)),
        ]  # fmt: skip
    out += [
        Claim("evaluation targets disagree on the best allocation", "paper claim", "qualitative",
              lambda r, e: disagree(r, distinct, m, e), disagree_test(m)),
        Claim("dense/PRM rewards: pass@1 prefers a high-update cell, the judge a mid-update cell", "paper claim",
              "a180 (pass@1) vs a100 (judge)", lambda r, e: pass1_vs_judge(r, c.process, m, e),
              pass1_test(c.process, m)),
    ]  # fmt: skip
    return out


def claim_target(name: str) -> str | None:
    """The target whose rho* a frontier claim is about (None for the others)."""
    if "rho*" not in name:
        return None
    return next((t for t, words in TARGET_WORDS.items() if f"(on {words})" in name), "native_reward")


def claims_table(
    runs: pd.DataFrame,
    frontier: pd.DataFrame,
    race: pd.DataFrame,
    gains: np.ndarray,
    classes: Classes,
    margins: Margins = DEFAULT,
    design: pd.DataFrame | None = None,
    powers: dict[str, dict[int, float]] | None = None,
) -> pd.DataFrame:
    """One row per claim. ``runs``: the full-budget grid runs of the distinct settings; ``race``: the
    RACE table (one row per setting and pilot fraction; its first fraction is the paper's pilot);
    ``gains``: RACE's fresh-seed gains; ``design``: the operating characteristics
    (``design.csv``) whose committed-design rows give each claim's wrong and agreement rates;
    ``powers``: per claim, the simulated share decided per seed count (:func:`design.power_table`)."""
    from paper_repro.analysis import race as race_tests

    c, m = classes, margins
    race = race[~race["setting"].isin(c.shared)] if len(race) else race
    fractions = list(dict.fromkeys(race["pilot_fraction"])) if len(race) else []
    claims = frontier_claims(c, m)
    fixed: dict[str, Result] = {}
    for i, fraction in enumerate(fractions):
        name = f"RACE pilots at {fraction_words(fraction)} of the budget name the full grid's regime"
        claims.append(Claim(name, "paper claim" if i == 0 else "our addition",
                            "1.0" if i == 0 else "not tested by the paper", None, race_tests.pilot_agreement_test()))  # fmt: skip
        fixed[name] = _with_kappa(race_tests.pilot_agreement(race[race["pilot_fraction"] == fraction]),
                                  race[race["pilot_fraction"] == fraction])  # fmt: skip
    claims += [
        Claim("RACE gives no stable held-out gain over a fixed default allocation", "paper claim", "no stable gain",
              None, no_gain_test(m)),
        Claim("log-linear in rho is the best non-trivial fit", "paper claim", "log-linear best",
              lambda r, e: loglinear(Frontiers.of(r).runs, [*c.rule_based, *c.prm_style], m), loglinear_test(m)),
        Claim("larger policies buy fewer updates and rollouts at equal FLOPs", "consistency check", "qualitative",
              None, FEWER_TEST),
    ]  # fmt: skip
    fixed["RACE gives no stable held-out gain over a fixed default allocation"] = no_race_gain(gains, m)
    fixed["larger policies buy fewer updates and rollouts at equal FLOPs"] = fewer_updates(frontier, c.sizes)
    seeds_now = int(runs.groupby(["setting", "cell"])["seed"].nunique().median()) if len(runs) else 0
    frontiers, rows = Frontiers(runs), []
    for claim in claims:
        result = fixed.get(claim.name) or claim.test(frontiers, True)
        rows.append({
            "claim": claim.name, "kind": claim.kind, "paper_value": claim.paper_value,
            "our_value": result.value, "ci_low": result.low, "ci_high": result.high, "verdict": result.verdict,
            "best_cells": result.best_cells, "note": result.note, "test": claim.text, "seeds_per_cell": seeds_now,
            **_oc_columns(claim.name, design), **_power_columns(claim.name, powers, seeds_now),
        })  # fmt: skip
    return pd.DataFrame(rows)


def _with_kappa(result: Result, race: pd.DataFrame) -> Result:
    """``result`` with Cohen's kappa of the pilot and full regime labels in its note: a description,
    never the verdict."""
    from dataclasses import replace

    from paper_repro.analysis import race as race_tests

    kappa, low, high = race_tests.regime_kappa(race)
    words = "undefined (one label)" if np.isnan(kappa) else f"{kappa:.2f} (95% {low:.2f} to {high:.2f})"
    return replace(result, note=f"{result.note}; regime kappa, a description: {words}")


def _oc_columns(name: str, design: pd.DataFrame | None) -> dict:
    """The claim's operating characteristics at the study's design, from ``design.csv``: its largest
    wrong share over the truths (and which truth), its smallest two-draw agreement, and how often it
    is held where the truth is held."""
    empty = {"oc_wrong_max": NAN, "oc_wrong_truth": "", "oc_agreement_min": NAN, "oc_held_when_true": NAN}
    if design is None or design.empty:
        return {**empty, "oc_note": "not simulated: no design.csv (paper-repro design)"}
    rows = design[(design["claim"] == name) & (design["design"] == "committed")]
    if rows.empty:
        return {**empty, "oc_note": "not simulated: the design simulator runs the frontier claims only"}
    worst = rows.loc[rows["wrong"].idxmax()]
    held = rows[rows["true_verdict"] == "held"]["share_held"]
    return {
        "oc_wrong_max": float(worst["wrong"]),
        "oc_wrong_truth": str(worst["truth"]) if worst["wrong"] > 0 else "",
        "oc_agreement_min": float(rows["agreement"].min()),
        "oc_held_when_true": float(held.min()) if len(held) else NAN,
        "oc_note": f"{len(rows)} truths, {int(rows['studies'].iloc[0])} studies each (design.csv)",
    }


def _power_columns(name: str, powers: dict[str, dict[int, float]] | None, seeds_now: int) -> dict:
    """The share of simulated studies that decide at the study's seeds per cell, and the seeds per
    cell that reach 80% (:func:`paper_repro.analysis.design.power_table`)."""
    if not powers or name not in powers:
        reason = "not simulated: the test reads the pilot grid or the planner, or the frontier fits only"
        return {
            "power_now": NAN,
            "seeds_for_80pct_power": NAN,
            "power_note": reason if powers else "not computed",
        }
    table = powers[name]
    needed = seeds_needed(table)
    note = ", ".join(f"{n} seeds: {p:.2f}" for n, p in sorted(table.items()))
    if needed is None:
        note += f"; not decided in 80% of studies with up to {max(table)} seeds per cell"
    return {
        "power_now": table.get(seeds_now, NAN),
        "seeds_for_80pct_power": float(needed or NAN),
        "power_note": note,
    }


def seeds_needed(powers: dict[int, float]) -> int | None:
    """The smallest seed count whose share of deciding studies reaches :data:`TARGET_POWER`."""
    return next((n for n, p in sorted(powers.items()) if p >= TARGET_POWER), None)
