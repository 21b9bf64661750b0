"""The paper's values: one table, which the claims, the design simulator's truths and the figures'
reference lines read.

Wilhelm & Kao (2026) report their optima as ranges and words; we have only a summary of the paper,
so each value here is the summary's, and where it gives a range (PRM-style rho* 0.44-0.45) the
number the tests use is its midpoint (``docs/CHOICES.md``). Nothing else in the package types a
paper value.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PaperValue:
    """What the paper reports for a claim: as the claims table prints it, and as a number where
    the tests use one."""

    text: str
    value: float | None = None


RULE_BASED_RHO = 0.72  # rule-based rewards' optimal rho (the summary's value)
PRM_STYLE_RHO = 0.445  # PRM-style rewards' (the midpoint of the summary's 0.44-0.45)

PAPER: dict[str, PaperValue] = {
    "rho_star.rule_based": PaperValue("0.72", RULE_BASED_RHO),
    "rho_star.prm_style": PaperValue("0.44-0.45", PRM_STYLE_RHO),
    "rho_star.prm_lower": PaperValue("0.44-0.45 < 0.72"),
    "targets_disagree": PaperValue("qualitative"),
    "pass1_vs_judge": PaperValue("a180 (pass@1) vs a100 (judge)"),
    "race.pilots": PaperValue("1.0"),
    "race.no_gain": PaperValue("no stable gain"),
    "fits.loglinear": PaperValue("log-linear best"),
    "qualitative": PaperValue("qualitative"),
    "report_rho": PaperValue("presumed by the advice to report rho"),
    "not tested": PaperValue("not tested by the paper"),
    "not reported": PaperValue("not reported by the paper"),
}

# the paper's reported optima by reward class (the figures' reference lines, the simulator's world)
PAPER_RHO: dict[str, float] = {"rule-based": RULE_BASED_RHO, "PRM-style": PRM_STYLE_RHO}
