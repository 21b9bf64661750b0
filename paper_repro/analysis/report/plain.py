"""The study's answer in plain words (:func:`plain_answer`), which the README and notebook 40 open
with before the detailed answer (:mod:`paper_repro.analysis.report.answer`): what the study decides
about the paper's optima and how sure (the chance of a wrong verdict beside the chance of reaching a
verdict), what it cannot decide and why, and our own checks that held. Every number comes from
``claims.csv``; the words avoid the study's jargon, or define a term where it is first used.
"""

from __future__ import annotations

import re

import pandas as pd

from paper_repro.analysis.wording import finite, percent

VERDICT_WORDS = {
    "held": "yes",
    "not held": "no",
    "inconclusive": "cannot tell",
    "heterogeneous": "cannot tell",
}
# a share the simulation did not give, in the answer's words
UNSIMULATED = "an unsimulated share"


def _asked(kind: str) -> dict[str, str]:
    """The claims the answer names as ``kind`` (a headline of their declarations:
    :data:`paper_repro.analysis.claims.registry.HEADLINES`), by id, each with its plain-words question."""
    from paper_repro.analysis.claims.registry import headlines

    return {s.id: s.question.format(**_values()) for s in headlines(kind)}


def largest_count(note) -> int | None:
    """The largest seed count a power note simulated (``3 seeds: 0.00, ..., 40 seeds: 0.00; ...``)."""
    counts = [int(n) for n in re.findall(r"(\d+) seeds:", str(note))]
    return max(counts) if counts else None


def _why_open(r: pd.Series) -> str:
    """Why an open question stays open: how often a study like this one says yes where the answer is
    yes, and what seed count would make that 80%."""
    held = r.get("oc_held_when_true")
    said = (
        f"a study like this one says yes in only {percent(held, UNSIMULATED)} of simulated studies where the answer is yes"
        if finite(held) and float(held) < 0.8
        else f"a study like this one says yes in {percent(held, UNSIMULATED)} of simulated studies where the answer is yes, but "
        f"says no in only {percent(r.get('oc_not_held_when_false'), UNSIMULATED)} of those where it is no"
    )
    if finite(r.get("seeds_for_80pct_power")):
        return f"{said}; about {int(r['seeds_for_80pct_power'])} seeds per allocation would decide it 80% of the time"
    top = largest_count(r.get("power_note"))
    return f"{said}; no number of seeds per allocation{f' up to {top}' if top else ''} decides it 80% of the time"


def _values() -> dict[str, str]:
    """The paper's two optima as it states them: ``rule`` (rule-based rewards), ``prm`` (PRM-style),
    the paper values of the first two optima the answer names (their declarations' order)."""
    from paper_repro.analysis.claims.registry import headlines

    rule, prm = (s.paper_value for s in headlines("optimum")[:2])
    return {"rule": rule, "prm": prm}


def _estimate(r: pd.Series) -> str:
    if not (finite(r.get("our_value")) and finite(r.get("ci_low"))):
        return "no estimate"
    return (
        f"{float(r['our_value']):+.3f} in native reward, 90% interval {float(r['ci_low']):+.3f} to "
        f"{float(r['ci_high']):+.3f}"
    )


def _sureness(r: pd.Series) -> str:
    """The chance of a wrong verdict beside the chances of reaching the right one, from the claim's
    operating characteristics on simulated studies of this design."""
    return (
        f"a study like this one gives a wrong verdict here in at most {percent(r.get('oc_wrong_max'), UNSIMULATED)} of "
        f"simulated studies, says yes in {percent(r.get('oc_held_when_true'), UNSIMULATED)} of those where the answer is yes, "
        f"and no in {percent(r.get('oc_not_held_when_false'), UNSIMULATED)} of those where it is no"
    )


def regime_sentences(claims: pd.DataFrame) -> list[str]:
    """Per regime question: decided (the answer, the estimate and how sure) or not (why, and what
    would decide it)."""
    by_id = claims.set_index("id") if "id" in claims else pd.DataFrame()
    decided, undecided = [], []
    for claim_id, asked in _asked("question").items():
        if claim_id not in by_id.index:
            continue
        r = by_id.loc[claim_id]
        answer = VERDICT_WORDS.get(str(r["verdict"]), str(r["verdict"]))
        if r["verdict"] in ("held", "not held"):
            decided.append(f"*{asked}* **{answer.capitalize()}**: {_estimate(r)}; {_sureness(r)}.")
        else:
            undecided.append(f"*{asked}* **Cannot tell**: {_estimate(r)}; {_why_open(r)}.")
    return [*decided, *undecided]


def _window_claims(claims: pd.DataFrame) -> pd.DataFrame:
    ids = claims["id"].astype(str) if "id" in claims else pd.Series(dtype=str)
    from paper_repro.analysis.claims.registry import headlines

    return claims[ids.isin([s.id for s in headlines("optimum")])]


def optimum_sentence(claims: pd.DataFrame) -> str:
    """Whether the paper's optima themselves (rho* near a value) are decided, and how often the rule
    that reads the best cells decides at all where the paper is right."""
    rows = _window_claims(claims)
    if rows.empty:
        return ""
    decided = rows[rows["verdict"].isin(["held", "not held"])]
    held = pd.to_numeric(rows.get("oc_held_when_true"), errors="coerce")
    if len(decided) == len(rows):
        return "The paper's optima themselves are decided too (the claims table gives each)."
    top = held.max() if held.notna().any() else float("nan")
    power = (
        "never says yes"
        if top == 0
        else f"says yes in at most {percent(top, UNSIMULATED)} of simulated studies"
    )
    return (
        f"**The optima themselves** ('the best update share is {_values()['rule']}', '... {_values()['prm']}'): "
        f"{len(rows) - len(decided)} of {len(rows)} undecided. At this study's size the best allocation cannot "
        f"be told from its neighbours: the test that reads which allocations might be the best {power} even where "
        "the paper is right, so its low error rate means it is silent, not that it is sure."
    )


def checks_sentence(claims: pd.DataFrame) -> str:
    """Our own checks that the answer names (the declarations headlined "check"), with their verdicts."""
    if "id" not in claims:
        return ""
    checks = _asked("check")
    rows = claims[claims["id"].isin(list(checks))]
    if rows.empty:
        return ""
    said = [
        f"*{checks[r['id']]}* **{VERDICT_WORDS.get(r['verdict'], r['verdict']).capitalize()}**"
        for _, r in rows.iterrows()
    ]
    return "**Our own checks:** " + "; ".join(said) + "."


def plain_answer(claims: pd.DataFrame) -> list[str]:
    """The plain-words answer as Markdown paragraphs, from ``claims.csv``."""
    if claims.empty:
        return ["**In short:** nothing is tested yet (`claims.csv` is empty)."]
    head = (
        "**In short.** The paper says the best share of compute to spend on policy updates rather than on "
        f"sampling answers (the update share, *rho*) is about {_values()['rule']} with rule-based rewards and "
        f"{_values()['prm']} with PRM-style rewards. We ask its three questions as comparisons between the "
        "allocations near those two values, each scored on held-out problems by its *setting*'s own reward (a "
        "setting is a policy with a reward system; its own reward is its *native reward*)"
    )
    bullets = [f"- {s}" for s in regime_sentences(claims)]
    registered = set(
        claims.loc[claims["id"].isin(list(_asked("question"))), "registration"].dropna().astype(str)
    )
    if registered == {"exploratory"}:
        head += " (these comparisons were fixed after this study's runs, so they are *exploratory*)"
    tail = [part for s in (optimum_sentence(claims), checks_sentence(claims)) if s for part in (s, "")]
    return [head + ":", "", *bullets, "", *tail[:-1]]
