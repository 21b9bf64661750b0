"""The claims table: one row per paper claim, our estimate with its interval, a verdict, and how
often its test is wrong.

Every verdict comes from a test fixed in code before the numbers were looked at; the ``test`` column
states it. The rho* claims decide from **the cells that could be best**
(:func:`paper_repro.analysis.optima.best_set`), never from a fitted curve. The claims' parts:

- :mod:`paper_repro.analysis.best_sets`: each setting's cells that could be best
  (:class:`Frontiers`, :func:`setting_best`);
- :mod:`paper_repro.analysis.frontier_tests`: the rho* claims' tests on them ("rho* ~ x" per class,
  "PRM-style lower", "targets disagree", "pass@1 above the judge");
- :mod:`paper_repro.analysis.fit_forms`: the fits claim (log-linear best by AICc);
- :mod:`paper_repro.analysis.table_tests`: RACE's held-out gain and the planner's consistency check;
- :mod:`paper_repro.analysis.wording`: each test's words (the ``test`` column);
- :mod:`paper_repro.analysis.power`: the operating characteristics and power columns;
- here: the settings' classes (:class:`Classes`), the claims (:class:`Claim`,
  :func:`frontier_claims`) and the table (:func:`claims_table`). The names of those modules that the
  rest of the package reads from here stay importable from here.

The margins are the profile's (``margins:``, :class:`paper_repro.config.Margins`, fixed before the
runs): ``rho`` (the window), ``recipe_sd`` (the recipe effect the sets allow for; ``null``: estimated
from the study's own frontiers), ``gain`` (RACE's TOST), ``aicc``, ``gaming``.

The paper states its rho* claims on the native reward. Because native rewards differ in scale and a
learned PRM's can be gamed, the reward-system claims are also tested on gsm pass@1 and on the judge
(rows marked *our addition*).

Settings are classed by the reward registry (:mod:`paper_repro.rewards`), never listed here:
*rule-based* settings are those whose reward is free (stage A's sizes and stage B's sparse,
structured, dense), *PRM-style* those charged the PRM's forward (proxy_prm, prm), *process-level*
(the pass@1-vs-judge claim) those that read the problem's steps or the PRM. A setting whose runs are
another setting's (stage B's ``sparse`` is stage A's middle policy) is counted once.

Beside each verdict: its **operating characteristics** and its **power**
(:mod:`paper_repro.analysis.power`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from paper_repro import rewards
from paper_repro.analysis.best_sets import DEFAULT, Frontiers, SettingBest, contradict, setting_best
from paper_repro.analysis.fit_forms import aicc, aicc_by_form, loglinear
from paper_repro.analysis.frontier_tests import disagree, lower, near, pass1_vs_judge
from paper_repro.analysis.power import TARGET_POWER, oc_columns, power_columns, seeds_needed
from paper_repro.analysis.table_tests import fewer_updates, no_race_gain
from paper_repro.analysis.verdict import Result
from paper_repro.analysis.wording import (
    FEWER_TEST,
    TARGET_WORDS,
    disagree_test,
    fraction_words,
    loglinear_test,
    lower_test,
    near_test,
    no_gain_test,
    pass1_test,
)
from paper_repro.config import Margins, Profile

__all__ = [  # the names the rest of the package reads from here, wherever they are defined
    "DEFAULT", "FEWER_TEST", "PRM_STYLE_RHO", "RULE_BASED_RHO", "TARGET_POWER", "TARGET_WORDS", "Claim",
    "Classes", "Frontiers", "Result", "SettingBest", "aicc", "aicc_by_form", "claim_target", "claims_table",
    "contradict", "disagree", "disagree_test", "fewer_updates", "fraction_words", "frontier_claims",
    "loglinear", "loglinear_test", "lower", "lower_test", "near", "near_test", "no_gain_test", "no_race_gain",
    "pass1_test", "pass1_vs_judge", "seeds_needed", "setting_best",
]  # fmt: skip

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
            **oc_columns(claim.name, design), **power_columns(claim.name, powers, seeds_now),
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
