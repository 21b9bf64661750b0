"""Two findings of the plain answer in words, from ``claims.csv``: how the FLOP convention moves the
regime verdicts (the ``convention.*`` rows, :mod:`paper_repro.analysis.claims.conventions`) and
whether the targets disagree (the ``targets.*`` rows, :mod:`paper_repro.analysis.claims.targets`),
each with how often a study like this one decides it.
"""

from __future__ import annotations

import pandas as pd

from paper_repro.analysis.wording import finite, percent

REGIMES = {
    "rule_based": "rule-based rewards",
    "prm_style": "PRM-style rewards",
    "interaction": "the interaction",
}
COUNTS = {"executed": "executed FLOPs (padding included)", "6N": "6N per token", "wall_time": "wall time"}
SAID = {"held": "yes", "not held": "no", "inconclusive": "cannot tell"}


def _row(claims: pd.DataFrame, claim_id: str) -> pd.Series | None:
    rows = claims[claims["id"] == claim_id]
    return rows.iloc[0] if len(rows) else None


def _interval(r: pd.Series) -> str:
    if not finite(r["ci_low"]):
        return f"{r['our_value']:+.3f}" if finite(r["our_value"]) else "not computable"
    return f"{r['our_value']:+.3f} (90% interval {r['ci_low']:+.3f} to {r['ci_high']:+.3f})"


def _registered(r: pd.Series) -> str:
    """ " (exploratory: ...)" where the row's rule was fixed after the study's runs."""
    return (
        "; its rule was fixed after these runs, so it is *exploratory*"
        if r.get("registration") == "exploratory"
        else ""
    )


def power_words(r: pd.Series) -> str:
    """How often a study like this one decides the claim right, from its ``oc_*`` columns."""
    parts = []
    if finite(r.get("oc_held_when_true")):
        parts.append(
            f"says yes in {percent(r['oc_held_when_true'])} of simulated studies where the answer is yes"
        )
    if finite(r.get("oc_not_held_when_false")):
        parts.append(f"no in {percent(r['oc_not_held_when_false'])} of those where it is no")
    if finite(r.get("oc_wrong_max")):
        parts.append(f"is wrong in at most {percent(r['oc_wrong_max'])}")
    said = "a study like this one " + ", ".join(parts) if parts else "its power is not simulated"
    return said + _registered(r)


def convention_finding(claims: pd.DataFrame) -> str:
    """Which regime verdicts a change of FLOP count reverses, and the agreement claim's verdict."""
    agree = _row(claims, "convention.regimes_agree")
    if agree is None:
        return ""
    said = []
    for claim, words in REGIMES.items():
        useful = _row(claims, f"regime.{claim}.any")
        others = {c: _row(claims, f"convention.{claim}.any.{c}") for c in COUNTS}
        others = {c: r for c, r in others.items() if r is not None and finite(r["our_value"])}
        if useful is None or not others:
            continue
        verdicts = {useful["verdict"], *(r["verdict"] for r in others.values())}
        if {"held", "not held"} <= verdicts:
            each = "; ".join(
                f"counting {COUNTS[c]} {SAID[r['verdict']]}, {_interval(r)}" for c, r in others.items()
            )
            said.append(
                f"for {words}, counting useful FLOPs (the paper's count) says {SAID[useful['verdict']]}, "
                f"{_interval(useful)}; {each}"
            )
    head = "**How compute is counted can reverse a verdict.**" if said else "**How compute is counted.**"
    verdict = {
        "held": "the *regime* verdicts are the same under every count",
        "not held": "the *regime* verdicts are not the same under every count",
        "inconclusive": "whether the *regime* verdicts are the same under every count cannot be told",
    }[agree["verdict"]]
    return (
        f"{head} The same runs, with each allocation's update share counted another way: "
        + ("; ".join(said) + ". So " if said else "")
        + f"{verdict} (`convention.regimes_agree`; {power_words(agree)}). A window of rho means different "
        "allocations under different counts: compare a verdict with another study's only under the same count."
    )


# the target claims the plain answer names: the pooled disagreement and the paper's own form
TARGET_IDS = ("targets.gsm_judge.pooled.any", "targets.pass1_high_judge_mid.any")


def target_finding(claims: pd.DataFrame, designs: dict[str, str] | None = None) -> str:
    """Whether the targets prefer different windows (pooled gsm pass@1 minus the judge) and the
    paper's own form of it; ``designs``: per claim id, the design that would decide it, in words
    (:func:`paper_repro.analysis.report.simulated.open_question_designs`), said after its power."""
    pooled, paper = (_row(claims, i) for i in TARGET_IDS)
    if pooled is None or paper is None:
        return ""
    designs = designs or {}

    def deciding(claim_id: str) -> str:
        return f"; {designs[claim_id]}" if claim_id in designs else ""

    which = "less" if pooled["our_value"] < 0 else "more"
    first = (
        f"**Do the scores disagree on where to spend?** Over every setting, pass@1 (gsm) favours the *update-heavy* "
        f"allocations {which} than the common *judge* does, by {_interval(pooled)} (each run scored both ways, "
        f"so the comparison is paired): *{SAID[pooled['verdict']]}*, they disagree ({power_words(pooled)}"
        f"{deciding(TARGET_IDS[0])})."
    )
    second = (
        " The paper's own form, that for dense and PRM rewards pass@1 prefers a high-update allocation and the "
        f"judge a mid-update one, reads {_interval(paper)}: *{SAID[paper['verdict']]}*"
        + (
            ", the disagreement runs the other way"
            if paper["verdict"] == "not held" and paper["our_value"] < 0
            else ""
        )
        + f" ({power_words(paper)}{deciding(TARGET_IDS[1])})."
    )
    return first + second


def race_finding(claims: pd.DataFrame) -> str:
    """RACE's same-regime count read against uninformative pilots' and the paper's world's counts."""
    from paper_repro.analysis.claims.race_null import read_note

    rows = claims[claims["id"].astype(str).str.startswith("race.same_regime")] if "id" in claims else claims
    if rows.empty:
        return ""
    r = rows.iloc[0]
    n = read_note(str(r["note"]))
    if not n:
        return ""
    verdict = {
        "held": "more than pilots that know nothing would: the pilots carry information",
        "not held": "fewer than RACE as the paper reports it would give",
        "inconclusive": "a count that neither pilots that know nothing nor the paper's RACE make unlikely",
    }[r["verdict"]]
    return (
        f"**The pilots of *RACE*.** In {n['same']} of {n['settings']} settings the cheap pilots name the regime the full "
        f"grid names: {verdict}. Pilots that know nothing, with this study's noise and its own full grids, give "
        f"{n['null']} on average ({percent(float(n['null_tail']))} of simulated studies reach {n['same']} or more); RACE as the paper "
        f"reports it would give {n['paper']} (`race.same_regime`; {power_words(r)})." + gain_sentence(claims)
    )


def gain_sentence(claims: pd.DataFrame) -> str:
    """RACE's gain over TRL's default allocation on fresh seeds (``race.no_gain``) and, where its
    study does not decide it reliably, what would: its power by fresh seeds and by settings
    (:func:`paper_repro.analysis.claims.race.read_gain_powers`); "" without the row."""
    from paper_repro.analysis.claims.race import read_gain_powers
    from paper_repro.analysis.design.bounds import TARGETS, missed_targets

    r = _row(claims, "race.no_gain")
    if r is None or not finite(r["our_value"]):
        return ""
    said = (
        f" Does RACE's pick gain nothing stable over TRL's default allocation (fresh seeds, paired)? "
        f"*{SAID.get(r['verdict'], r['verdict'])}*, {r['our_value']:+.3f} (95% interval "
        f"{r['ci_low']:+.3f} to {r['ci_high']:+.3f}: the rule's not-held side; `race.no_gain`; {power_words(r)})"
    )
    seeds, at, settings = read_gain_powers(r.get("power_note", ""))
    enough = TARGETS["held_when_true"][0]
    if not seeds or (r["verdict"] in ("held", "not held") and not missed_targets(r, prefix="oc_")):
        return said + "."
    top = max(seeds)
    said += (
        f": no number of fresh seeds per setting up to {top} decides it (where there is no gain it says so in at "
        f"most {percent(max(seeds.values()))}: the settings differ more than their seeds do)"
    )
    if settings:
        most = max(settings)
        reached = [k for k, x in sorted(settings.items()) if x >= enough]
        said += (
            f"; {reached[0]} settings at {at} seeds each would ({percent(settings[reached[0]])})"
            if reached
            else f", and the most settings simulated, {most} at {at} seeds each, says so in "
            f"{percent(settings[most])}, still under {percent(enough)}"
        )
    return said + "."


def fits_sentence(claims: pd.DataFrame) -> str:
    """The paper's "log-linear in rho is the best fit" (``fits.loglinear``): its verdict with the forms'
    wins, and how often it can say yes (its own simulation); "" without the row."""
    from paper_repro.analysis.claims.tables import read_wins

    r = _row(claims, "fits.loglinear")
    if r is None:
        return ""
    wins = read_wins(r.get("note", ""))
    counts = ", ".join(f"{k.replace('loglinear', 'log-linear')} {v}" for k, v in wins.items() if k != "tie")
    said = (
        f" The shape of the score against rho ('log-linear in rho is the best fit'): *{SAID.get(r['verdict'], r['verdict'])}*"
        + (
            f" (the lowest AICc over each setting's curves of each score that are not flat: {counts}, "
            f"{wins.get('tie', 0)} ties)"
            if wins
            else ""
        )
        + f" (`fits.loglinear`; {power_words(r)})"
    )
    held = r.get("oc_held_when_true")
    if finite(held) and held < 0.8:
        said += (
            ". At this design it cannot say yes, and more seeds would not help: it fits the runs, which each "
            "allocation's recipe moves off the curve, and with more seeds the quadratic wins more often even where "
            "the curve is log-linear (docs/MEASUREMENTS.md); a test of the curve's own form would have to fit the "
            "allocations' means with that spread allowed for"
        )
    return said + "."
