"""Two of our additions, declared in the registry: whether the rho* verdicts survive a change of
FLOP convention (:mod:`paper_repro.analysis.tables.conventions`), and whether the learned PRM is gamed more
than the exact checker (:mod:`paper_repro.analysis.tables.hacking`).
"""

from __future__ import annotations

import pandas as pd

from paper_repro.analysis.claims.paper import PAPER
from paper_repro.analysis.claims.registry import NotSimulated, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.verdict import NAN, Result

CONVENTION_TEST = (
    "the two rho* ~ x claims recomputed with rho under the useful, executed, 6N-for-everything and wall-time "
    "conventions: held if every convention gives the same verdicts and some verdict is decided; not held if a "
    "claim is held under one and not held under another; inconclusive otherwise (our_value: share of "
    "conventions agreeing with useful; NaN when no convention decides a verdict: nothing to be robust)"
)

PER_CONVENTION = "rule-based, PRM-style verdicts per convention"  # the note's list, after any reason


@register_claim(
    "conventions.robust",
    sentence="the rho* verdicts are robust to the FLOP convention",
    kind="our addition",
    paper="not tested",
    reads=("grid", "steps"),
    margins=("rho", "recipe_sd"),
    words=lambda s: CONVENTION_TEST,
    unit="share of the FLOP conventions whose rho* verdicts all match the useful-FLOP convention's",
    simulation=NotSimulated("as the rho* ~ x claims' power, under each convention"),
)
def _conventions_robust(study: Study) -> Result:
    from paper_repro.analysis.claims.frontier import near
    from paper_repro.analysis.tables import conventions

    c, rows = study.classes, []
    for convention, column in conventions.CONVENTIONS.items():
        view = study.distinct.assign(rho=study.distinct[column])
        for claim, names, key in (
            ("rule-based", c.rule_based, "rho_star.rule_based"),
            ("PRM-style", c.prm_style, "rho_star.prm_style"),
        ):
            verdict = near(view, names, PAPER[key].value, study.margins, estimate=False).verdict
            rows.append({"claim": claim, "convention": convention, "verdict": verdict})
    table = pd.DataFrame(rows)
    share, verdict, why = conventions.robustness(table)
    detail = "; ".join(f"{k}: {', '.join(g['verdict'])}" for k, g in table.groupby("convention", sort=False))
    note = f"{PER_CONVENTION}: {detail}"
    return Result(share, NAN, NAN, verdict, f"{why}; {note}" if why else note)


def _gaming_words(study: Study) -> str:
    from paper_repro.analysis.tables.hacking import prm_games_test

    return prm_games_test(study.margins.gaming)


@register_claim(
    "hacking.prm_gamed_more",
    sentence="the learned PRM is gamed more often than the exact checker at the same cost",
    kind="our addition",
    paper="not reported",
    reads=("hacking",),
    margins=("gaming",),
    words=_gaming_words,
    unit="share of learned-PRM runs that game their reward minus the share of proxy-PRM runs",
    simulation=NotSimulated("the frontier model does not generate the runs' changes from base"),
)
def _prm_gamed_more(study: Study) -> Result:
    from paper_repro.analysis.tables.hacking import prm_games_more

    return prm_games_more(study.hacking, margin=study.margins.gaming)
