"""The answer in plain words (:mod:`paper_repro.analysis.report.plain`) says what each verdict means,
with the chance of a wrong verdict beside the chance of reaching it, from the claims table alone."""

from __future__ import annotations

import pandas as pd

from paper_repro.analysis.report.plain import plain_answer


def _row(claim_id: str, verdict: str, held: float, refuted: float, seeds=float("nan"), **kw) -> dict:
    return {"id": claim_id, "claim": claim_id, "verdict": verdict, "our_value": 0.031, "ci_low": 0.012,
            "ci_high": 0.05, "oc_wrong_max": 0.035, "oc_held_when_true": held, "oc_not_held_when_false": refuted,
            "seeds_for_80pct_power": seeds, "power_note": "3 seeds: 0.10, 40 seeds: 0.50",
            "registration": "pre-registered", "kind": "paper claim", **kw}  # fmt: skip


def test_each_verdict_reads_as_an_answer_with_its_error_and_its_power():
    claims = pd.DataFrame([
        _row("regime.rule_based.any", "held", 0.91, 0.84),
        _row("regime.prm_style.any", "inconclusive", 0.4, 0.3, seeds=20),
        _row("regime.interaction.any", "not held", 0.9, 0.7),
        _row("rho_star.rule_based", "inconclusive", 0.0, 0.0),
        _row("allocation.matters", "held", 0.5, float("nan")),
    ])  # fmt: skip
    text = "\n".join(plain_answer(claims))
    rule, interaction, prm = (line for line in text.splitlines() if line.startswith("- "))  # decided first
    assert "**Yes**: +0.031 in native reward, 90% interval +0.012 to +0.050" in rule
    assert (
        "at most 3.5% of simulated studies, says yes in 91% of those where the answer is yes, and no in 84%"
        in rule
    )
    assert "**No**" in interaction and "**Cannot tell**" in prm
    assert "says yes in only 40% of simulated studies" in prm and "about 20 seeds per allocation" in prm
    assert "1 of 1 undecided" in text and "never says yes even where the paper is right" in text
    assert "*does the split matter at all" in text and "exploratory" not in text


def test_an_exploratory_study_says_so_and_an_empty_table_says_nothing_is_tested():
    claims = pd.DataFrame(
        [_row("regime.rule_based.any", "inconclusive", 0.9, 0.1, registration="exploratory")]
    )
    text = "\n".join(plain_answer(claims))
    assert "so they are *exploratory*" in text
    assert "says no in only 10% of those where it is no" in text and "up to 40" in text
    assert plain_answer(pd.DataFrame()) == ["**In short:** nothing is tested yet (`claims.csv` is empty)."]


def test_a_quick_studys_answer_opens_by_saying_it_is_a_smoke_run(tmp_path):
    from paper_repro.analysis.report.answer import answer_markdown

    pd.DataFrame([_row("regime.rule_based.any", "held", 0.9, 0.8)]).to_csv(
        tmp_path / "claims.csv", index=False
    )
    text = answer_markdown(tmp_path, "cpu-tiny", quick=True)
    assert text.startswith("**A smoke run, not the study.**")
    assert text.index("**In short.**") < text.index("**In detail.**")
    assert not answer_markdown(tmp_path, "cpu-tiny").startswith("**A smoke run")


# ------------------------------------------------------------------------------- what the words mean


def _profile(regime: float):
    """cpu-tiny with its regime margin set to ``regime``: the words must read the margin, not type it."""
    from dataclasses import replace

    from paper_repro.config import load_profile

    profile = load_profile("cpu-tiny")
    return replace(profile, margins=replace(profile.margins, regime=regime))


def test_no_is_said_to_mean_not_by_the_profiles_margin():
    claims = pd.DataFrame([_row("regime.rule_based.any", "not held", 0.9, 0.7)])
    text = "\n".join(plain_answer(claims, _profile(0.037)))
    assert (
        '"No" means not by the *margin*, the smallest advantage that counts (0.037 native reward, set in '
        "`paper_repro/profiles/cpu-tiny.yaml` under `margins:` before the runs): the 90% interval rules out an "
        "advantage that large or larger in the paper's direction"
    ) in text
    assert "0.02 native reward" not in text
    unvalued = "\n".join(plain_answer(claims))  # no profile: the margin named, not valued
    assert '"No" means not by the *margin*, the smallest advantage that counts: the 90% interval' in unvalued


def test_a_verdict_that_moves_without_one_seed_is_said_to_rest_on_it_and_one_that_does_not_is_not():
    moving = "changes without seed 0: inconclusive"
    claims = pd.DataFrame([
        _row("regime.rule_based.any", "not held", 0.9, 0.7, leave_one_seed_out="the same without any one seed"),
        _row("regime.interaction.any", "not held", 0.9, 0.7, leave_one_seed_out=moving),
        _row("allocation.matters", "held", 0.5, float("nan"), leave_one_seed_out="changes without seed 2: not held"),
        _row("fits.loglinear", "not held", float("nan"), float("nan"), leave_one_seed_out="changes without seed 1: held"),
    ])  # fmt: skip
    text = "\n".join(plain_answer(claims))
    rule, interaction = (line for line in text.splitlines() if line.startswith("- "))
    assert "without seed 0 it turns *cannot tell*, so it rests on that seed" in interaction
    assert "without seed" not in rule
    assert "**Yes**; without seed 2 it turns *no*" in text  # a check moves too
    assert (
        "Of the other claims, 1 change verdict without one seed (RESULTS.md, *Every claim*, its last" in text
    )
    steady = claims.assign(leave_one_seed_out="the same without any one seed")
    assert "without seed" not in "\n".join(plain_answer(steady))
    assert "rests on that seed" not in "\n".join(plain_answer(steady))


def test_a_claim_without_an_estimate_or_simulation_says_why_never_an_unsimulated_share():
    reason = "the grid holds 1 seed per cell; every claim compares cells over seeds"
    nan = float("nan")
    claims = pd.DataFrame([
        _row(i, "inconclusive", nan, nan, our_value=nan, ci_low=nan, ci_high=nan, oc_wrong_max=nan,
             power_note="not computed", note=f"not computable: {reason}")
        for i in ("regime.rule_based.any", "regime.prm_style.any", "rho_star.rule_based")
    ])  # fmt: skip
    text = "\n".join(plain_answer(claims))
    assert "unsimulated" not in text and " nan" not in text.lower()
    assert text.count("**Cannot tell**: no estimate; its error rates are not simulated for this design.") == 2
    assert f"No estimate: {reason}." in text  # the reason once, not per claim
    assert "the best: its error rates are not simulated for this design" in text
    decided = pd.DataFrame([_row("regime.rule_based.any", "held", nan, nan, oc_wrong_max=nan)])
    assert (
        "**Yes**: +0.031 in native reward, 90% interval +0.012 to +0.050; its error rates are not simulated"
        in ("\n".join(plain_answer(decided)))
    )


def test_the_convention_paragraph_gives_rho_star_under_each_count_and_a_nan_claims_reason():
    from paper_repro.analysis.tables.conventions import NOTHING_DECIDED

    stars = {"useful": 0.52, "executed": 0.72, "6N": 0.34, "wall time": 0.56}
    conventions = pd.DataFrame(
        [{"group": "M", "convention": c, "rho_star": v} for c, v in stars.items()]
        + [{"group": "L", "convention": c, "rho_star": v + 0.2} for c, v in stars.items()]
        + [{"group": "S", "convention": c, "rho_star": float("nan")} for c in stars]
    )
    nan = float("nan")
    claims = pd.DataFrame([
        _row("regime.rule_based.any", "not held", 0.9, 0.7),
        _row("conventions.robust", "inconclusive", nan, nan, our_value=nan,
             note=f"{NOTHING_DECIDED}; rule-based, PRM-style verdicts per convention: useful: inconclusive"),
    ])  # fmt: skip
    text = "\n".join(plain_answer(claims, conventions=conventions))
    assert (
        "M's fitted best update share reads 0.52 counting useful FLOPs (the paper's count), 0.72 counting "
        "executed FLOPs (padding included), 0.34 counting 6N per token, 0.56 counting wall time (L's 0.54–0.92"
    ) in text
    assert "S's" not in text  # not identified under every convention: no span
    assert (
        "Whether the verdicts survive a change of count is not decided: under every count, every verdict"
        in text
    )
    other = claims.assign(
        note=[None, "not computable: one seed per cell; rule-based, PRM-style verdicts per convention: ..."]
    )
    assert "not decided: one seed per cell." in "\n".join(plain_answer(other, conventions=conventions))
    decided = claims.assign(our_value=[0.031, 0.75], verdict=["not held", "not held"])
    assert "The convention claim is not held: the verdicts under 75% of the counts match" in "\n".join(
        plain_answer(decided, conventions=conventions)
    )


def test_the_models_size_is_counted_from_their_configs_beside_the_paper_scale_profiles():
    from paper_repro import models
    from paper_repro.analysis.report.meaning import size_words, testbed_line
    from paper_repro.config import load_profile

    assert [size_words(n) for n in (79056, 411936, 1543714304, 7615616512)] == ["79k", "412k", "1.5B", "7.6B"]
    profile, paper = load_profile("cpu-tiny"), load_profile("gpu-paper")
    line = testbed_line(profile)
    small = [size_words(models.shape(p).parameter_count()) for p in profile.policies.values()]
    big = [size_words(models.shape(p).parameter_count()) for p in paper.policies.values()]
    assert f"policies S, M and L of {', '.join(small[:-1])} and {small[-1]} parameters" in line
    assert f"a PRM of {size_words(models.shape(profile.prm).parameter_count())}" in line
    assert f"the `gpu-paper` profile's policies have {', '.join(big[:-1])} and {big[-1]} parameters" in line
    assert line in "\n".join(
        plain_answer(pd.DataFrame([_row("regime.rule_based.any", "held", 0.9, 0.8)]), profile)
    )


def _gain_row(verdict, held, refuted, settings):
    note = (
        "P(held) at true gain 0 by fresh seeds per setting, the settings fixed: 5 seeds: 0.01, 160 seeds: 0.02; "
        f"not reached with up to 160 seeds: the between-setting SD bounds it; by settings at 5 seeds each: {settings}"
    )
    return pd.DataFrame({
        "id": ["race.no_gain"], "verdict": [verdict], "our_value": [0.014], "ci_low": [-0.037],
        "ci_high": [0.064], "oc_wrong_max": [0.027], "oc_held_when_true": [held],
        "oc_not_held_when_false": [refuted], "oc_agreement_min": [0.9], "power_note": [note],
    })  # fmt: skip


def test_races_gain_names_what_would_decide_it_or_that_no_design_tried_does():
    """``race.no_gain`` undecided: seeds never decide it (the settings' spread bounds it), and the
    most settings simulated is named with its power, or the fewest that reach 80%; decided
    reliably, only the verdict is said. The interval is the row's own, the 95% one."""
    from paper_repro.analysis.claims.race import read_gain_powers
    from paper_repro.analysis.report.findings import gain_sentence

    short = gain_sentence(_gain_row("inconclusive", 0.004, 0.13, "7: 0.01, 14: 0.02, 28: 0.20, 56: 0.72"))
    assert "*cannot tell*, +0.014 (95% interval -0.037 to +0.064" in short
    assert "no number of fresh seeds per setting up to 160 decides it" in short and "at most 2%" in short
    assert "the most settings simulated, 56 at 5 seeds each, says so in 72%, still under 80%" in short
    enough = gain_sentence(_gain_row("inconclusive", 0.004, 0.13, "7: 0.01, 14: 0.30, 28: 0.85, 56: 0.99"))
    assert "28 settings at 5 seeds each would (85%)" in enough
    decided = gain_sentence(_gain_row("held", 0.9, 0.9, "7: 0.9"))
    assert "*yes*" in decided and "fresh seeds per setting up to" not in decided
    assert read_gain_powers("another note") == ({}, None, {})
    assert gain_sentence(pd.DataFrame({"id": ["regime.rule_based.any"]})) == ""
