"""The claims table's words: the targets' names (:data:`TARGET_WORDS`), each claim test's ``test``
text, stated with the margins it runs with (one function per test, beside nothing but its words:
the tests are in :mod:`paper_repro.analysis.frontier_tests`, :mod:`paper_repro.analysis.fit_forms`
and :mod:`paper_repro.analysis.table_tests`), and a pilot budget as a fraction of the full one
(:func:`fraction_words`). The claims' names are built with their tests, in
:func:`paper_repro.analysis.claims.frontier_claims` and :func:`paper_repro.analysis.claims.claims_table`.
"""

from __future__ import annotations

from paper_repro.analysis.best_sets import DEFAULT
from paper_repro.analysis.optima import SAME_RHO
from paper_repro.config import Margins

TARGET_WORDS = {
    "native_reward": "the native reward",
    "gsm_pass1": "gsm pass@1",
    "math_pass1": "math pass@1",
    "judge_score": "the judge's score",
}


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


def lower_test(m: Margins = DEFAULT, target: str = "native_reward") -> str:
    return (
        f"on the settings of the middle policy, each setting's cells that could be best for {TARGET_WORDS[target]} "
        f"at 95% (as for rho* ~ x): heterogeneous if two settings of one class share no allocation; else "
        f"held if every PRM-style best cell's rho lies below every rule-based one's by more than {SAME_RHO}, "
        f"not held if no PRM-style best cell lies below any rule-based one by more than {SAME_RHO}, "
        "inconclusive otherwise (our_value: PRM-style minus rule-based median unimodal rho*)"
    )


def disagree_test(m: Margins = DEFAULT) -> str:
    return (
        "per distinct setting, each target's cells that could be best at 95% (as for rho* ~ x): the targets "
        "disagree on a setting when two targets' best sets share no allocation, agree when all of them lie "
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


def fraction_words(fraction: float) -> str:
    """``0.125`` -> ``1/8``: a pilot budget as a fraction of the full one."""
    from fractions import Fraction

    return str(Fraction(fraction).limit_denominator(1000))
