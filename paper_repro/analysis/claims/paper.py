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

# the paper's world as a shape of each target over (useful-FLOP) rho, 0 to 1: native reward peaks at
# its class's optimum, pass@1 rises with the update share, the judge peaks mid-update (its "a100"
# against pass@1's "a180"); the claims' own simulations read it (paper_world), scaled to a height
PAPER_WIDTH = 0.2  # the SD of the peaks, in rho
JUDGE_RHO = 0.5  # where the paper's judge prefers its allocation (mid-update)


def paper_world(reward_class: str, target: str, rho) -> object:
    """The paper's world's shape of ``target`` at ``rho`` (an array, 0 to 1) for a setting of
    ``reward_class`` (a key of :data:`PAPER_RHO`)."""
    import numpy as np

    rho = np.asarray(rho, float)
    if target in ("gsm_pass1", "math_pass1"):
        return (rho - 0.15) / 0.7
    centre = JUDGE_RHO if target == "judge_score" else PAPER_RHO[reward_class]
    return np.exp(-0.5 * ((rho - centre) / PAPER_WIDTH) ** 2)
