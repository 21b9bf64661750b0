"""The frontier claims: the rho* claims and the targets' claims, each decided from whole best sets
(:func:`paper_repro.analysis.stats.best_sets.setting_best`), never from a fitted curve, and each declared
in the registry (:mod:`paper_repro.analysis.claims.registry`).

- "rho* ~ x" for a class of settings (:func:`near`): a setting is held when every cell that could be
  best lies in ``x +- margins.rho``, not held when none does, inconclusive otherwise; the class is
  *heterogeneous* when two settings' sets lie more than one grid step apart (a fourth verdict, with no class value:
  never a median of settings that contradict each other); else held when every setting is held, not
  held when every one is not held, inconclusive otherwise. Its sets are taken at ``1 - 0.05 / S``
  over its ``S`` settings, so a false contradiction stays under 5%;
- "PRM-style is lower" (:func:`lower`), "pass@1 above the judge" (:func:`pass1_vs_judge`), "targets
  disagree" (:func:`disagree`): whole best sets compared, one wholly below the other (by more than
  :data:`paper_repro.analysis.stats.optima.SAME_RHO`) or not.

The paper states its rho* claims on the native reward. Because native rewards differ in scale and a
learned PRM's can be gamed, the reward-system claims are also declared on gsm pass@1 and on the
judge (kind *our addition*). A flat world never gives *held*: every cell could be best, so no set
fits in a window. Every claim here is simulated by the design simulator (:class:`Simulated`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.paper import PAPER
from paper_repro.analysis.claims.registry import Simulated, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.best_sets import DEFAULT, Frontiers, SettingBest, contradict, setting_best
from paper_repro.analysis.stats.optima import SAME_RHO, window_verdict
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.analysis.wording import recipe_words
from paper_repro.common.results import METRICS, TARGET_WORDS
from paper_repro.config import Margins


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


def near(
    runs: pd.DataFrame,
    names,
    x: float,
    m: Margins = DEFAULT,
    target: str = "native_reward",
    estimate: bool = True,
) -> Result:
    """ "rho* ~ x" for a class of settings: each setting's verdict from its best set
    (:func:`paper_repro.analysis.stats.optima.window_verdict`); the class is heterogeneous when two
    settings' sets lie more than one grid step apart, else held when every setting is held, not held when every
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
        return Result(
            verdict="heterogeneous",
            note=f"best sets lie more than one grid step apart: {pairs}; {per_setting}",
            best_cells=_sets_words(bests),
            unanimous=_unanimous(verdicts),
        )
    verdict = _unanimous(verdicts) or "inconclusive"
    value, low, high = _class_estimate(bests)
    return Result(value, low, high, verdict, per_setting, _sets_words(bests))


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
        return Result(
            verdict="heterogeneous",
            note=f"within a class, best sets lie more than one grid step apart: {pairs}",
            best_cells=sets,
            unanimous=verdict if verdict != "inconclusive" else "",
        )
    value = _class_estimate(pb)[0] - _class_estimate(rb)[0]
    return Result(value, verdict=verdict, note="PRM-style minus rule-based median rho*", best_cells=sets)


def disagree(runs: pd.DataFrame, names, m: Margins = DEFAULT, estimate: bool = True) -> Result:
    """Do the targets pick different allocations? Per setting, from each target's best set: the
    targets disagree when two of them lie more than one grid step apart, agree when every target's best set lies
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
    return Result(
        values.count("held") / len(values),
        verdict=verdict,
        note=note,
        best_cells="; ".join(sets),
        unanimous=_unanimous(values),
    )


# ---------------------------------------------------------------------------------------- words


def near_test(x: float, m: Margins = DEFAULT, target: str = "native_reward") -> str:
    return (
        f"per distinct setting of the class, the cells that could be best for {TARGET_WORDS[target]} at 95% "
        f"(Gupta's subset over all runs, Bonferroni, seed noise plus {recipe_words(m)}): a "
        f"setting is held if every one of them has realised rho in [{x - m.rho:.3g}, {x + m.rho:.3g}], not "
        "held if none has, inconclusive otherwise; the class is heterogeneous if two settings' sets share no "
        "allocation, else held if every setting is held, not held if every one is not held, inconclusive "
        "otherwise (our_value: the median of the settings' unimodal rho*, only where their sets overlap; "
        "interval: the envelope of their seed-bootstrap 95% intervals)"
    )


def lower_test(m: Margins = DEFAULT, target: str = "native_reward") -> str:
    return (
        f"on the settings of the middle policy, each setting's cells that could be best for {TARGET_WORDS[target]} "
        f"at 95% (as for rho* ~ x): heterogeneous if two settings of one class lie more than one grid step apart; else "
        f"held if every PRM-style best cell's rho lies below every rule-based one's by more than {SAME_RHO}, "
        f"not held if no PRM-style best cell lies below any rule-based one by more than {SAME_RHO}, "
        "inconclusive otherwise (our_value: PRM-style minus rule-based median unimodal rho*)"
    )


def disagree_test(m: Margins = DEFAULT) -> str:
    return (
        "per distinct setting, each target's cells that could be best at 95% (as for rho* ~ x): the targets "
        "disagree on a setting when two targets' best sets lie more than one grid step apart, agree when all of them lie "
        f"within a window of width {2 * m.rho:.2g} in rho; held if a majority of settings disagree, not held "
        "if a majority agree, inconclusive otherwise (our_value: share of settings that disagree)"
    )


def pass1_test(names, m: Margins = DEFAULT) -> str:
    return (
        f"settings {', '.join(names)}: each one's cells that could be best for gsm pass@1 and for the judge at "
        f"95% (as for rho* ~ x); a setting says pass@1 prefers more update when every pass@1 best cell's rho "
        f"lies above every judge best cell's by more than {SAME_RHO}, and the opposite when none does; held "
        "if every setting says so, not held if none does, heterogeneous if settings say both, inconclusive "
        "otherwise (our_value: share of settings that say so)"
    )


# ---------------------------------------------------------------------------------------- declarations

RHO_MARGINS = ("rho", "recipe_sd")
# the targets the reward-system claims are declared on: (id suffix, target); the native reward is the paper's
FAMILY = "rho_star."  # the ids of this module's rho* windows begin so (on every target)
CLAIM_TARGETS = (("", "native_reward"), (".gsm_pass1", "gsm_pass1"), (".judge_score", "judge_score"))


def _on(target: str) -> str:
    return "" if target == "native_reward" else f" (on {TARGET_WORDS[target]})"


def _near_claim(names: str, key: str, target: str):
    """The decision of "rho* ~ x" for the class ``names`` (an attribute of :class:`Classes`) at the
    paper's value ``key`` on ``target``."""

    def decide(study: Study) -> Result:
        x = PAPER[key].value
        return near(study.grid, getattr(study.classes, names), x, study.margins, target, study.estimate)

    return decide


for _suffix, _target in CLAIM_TARGETS:
    # the rho* windows never hold at this design (P(held | true) 0 by construction: the best sets
    # span both windows), so they are descriptions, not counted among the decided claims; the
    # paper's optima are decided as the regime contrasts (regimes.py)
    _kind = "description"
    _sim = Simulated(target=_target)

    for _class, _words in (("rule_based", "rule-based rewards"), ("prm_style", "PRM-style rewards")):
        _key = f"rho_star.{_class}"
        register_claim(
            f"{_key}{_suffix}",
            sentence=f"{_words}: rho* ~ {{paper}}" + _on(_target),
            kind=_kind,
            paper=_key,
            reads=("grid",),
            margins=RHO_MARGINS,
            unit="rho*: the median over the class's settings of their fitted peak's rho (interval: the envelope of their 95% intervals)",
            simulation=_sim,
            words=lambda s, t=_target, k=_key: near_test(PAPER[k].value, s.margins, t),
            headline="optimum" if _target == "native_reward" else None,
        )(_near_claim(_class, _key, _target))

    @register_claim(
        f"rho_star.prm_lower{_suffix}",
        sentence="PRM-style rho* is lower than rule-based rho*" + _on(_target),
        kind=_kind,
        paper="rho_star.prm_lower",
        reads=("grid",),
        margins=RHO_MARGINS,
        unit="rho*: the PRM-style settings' median minus the rule-based settings' median (negative: PRM-style lower)",
        simulation=_sim,
        words=lambda s, t=_target: lower_test(s.margins, t),
        headline="optimum" if _target == "native_reward" else None,
    )
    def _prm_lower(study: Study, t: str = _target) -> Result:
        c = study.classes
        return lower(study.grid, c.middle_rule, c.middle_prm, study.margins, t, study.estimate)


# the best-set forms of the targets' claims: like the rho* windows, their test cannot hold at this
# design (held and not held where true both 0 in design.csv: the best sets span most cells), so they are
# descriptions; the paired contrasts between targets decide the paper's two target claims (targets.py)
@register_claim(
    "targets_disagree",
    sentence="evaluation targets disagree on the best allocation",
    kind="description",
    paper="targets_disagree",
    reads=("grid",),
    margins=RHO_MARGINS,
    unit="share of settings whose targets' best cells disagree",
    simulation=Simulated(),
    words=lambda s: disagree_test(s.margins),
)
def _targets_disagree(study: Study) -> Result:
    return disagree(study.grid, study.classes.distinct, study.margins, study.estimate)


@register_claim(
    "pass1_vs_judge",
    sentence="dense/PRM rewards: pass@1 prefers a high-update cell, the judge a mid-update cell",
    kind="description",
    paper="pass1_vs_judge",
    reads=("grid",),
    margins=("recipe_sd",),
    unit="share of dense/PRM settings where pass@1's best cells are high-update and the judge's mid-update",
    simulation=Simulated(),
    words=lambda s: pass1_test(s.classes.process, s.margins),
)
def _pass1_vs_judge(study: Study) -> Result:
    return pass1_vs_judge(study.grid, study.classes.process, study.margins, study.estimate)
