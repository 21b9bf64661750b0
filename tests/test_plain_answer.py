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
