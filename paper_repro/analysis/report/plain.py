"""The study's answer in plain words (:func:`plain_answer`), which the README and notebook 40 open
with before the detailed answer (:mod:`paper_repro.analysis.report.answer`): what the study decides
about the paper's optima and how sure (the chance of a wrong verdict beside the chance of reaching a
verdict), what it cannot decide and why, and our own checks that held; then what its words mean
(:mod:`paper_repro.analysis.report.meaning`: the margin behind "No", the verdicts that rest on one seed,
the FLOP convention's effect on rho, the models' size). Every number comes from ``claims.csv`` (and
``conventions.csv``, the profile, the models' configs); the words avoid the study's jargon, or define a
term where it is first used. A share the design simulation did not give is said so in words (its
error rates are not simulated for this design), never as a share.
"""

from __future__ import annotations

import re

import pandas as pd

from paper_repro.analysis.report import findings, meaning
from paper_repro.analysis.wording import finite, percent
from paper_repro.config import Profile

VERDICT_WORDS = {
    "held": "yes",
    "not held": "no",
    "inconclusive": "cannot tell",
    "heterogeneous": "cannot tell",
}
# what the answer says where the design simulation gave a claim no operating characteristics
UNSIMULATED = "its error rates are not simulated for this design"


def question_ids() -> list[str]:
    """The claim ids of the paper's questions the answer asks, in its order."""
    return list(_asked("question"))


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
    yes, and what seed count would make that 80% (where neither is simulated: said so)."""
    held, refuted = r.get("oc_held_when_true"), r.get("oc_not_held_when_false")
    if not finite(held):
        return UNSIMULATED
    said = (
        f"a study like this one says yes in only {percent(held)} of simulated studies where the answer is yes"
        if float(held) < 0.8
        else f"a study like this one says yes in {percent(held)} of simulated studies where the answer is yes"
        + (f", but says no in only {percent(refuted)} of those where it is no" if finite(refuted) else "")
    )
    if finite(r.get("seeds_for_80pct_power")):
        return f"{said}; about {int(r['seeds_for_80pct_power'])} seeds per allocation would decide it 80% of the time"
    top = largest_count(r.get("power_note"))
    if top is None:
        return f"{said}; its power at other seed counts is not simulated"
    return f"{said}; no number of seeds per allocation up to {top} decides it 80% of the time"


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
    operating characteristics on simulated studies of this design; those not simulated are left out,
    and where none is, :data:`UNSIMULATED` says so."""
    wrong, held, refuted = (r.get(k) for k in ("oc_wrong_max", "oc_held_when_true", "oc_not_held_when_false"))
    parts = [
        f"gives a wrong verdict here in at most {percent(wrong)} of simulated studies"
        if finite(wrong)
        else "",
        f"says yes in {percent(held)} of those where the answer is yes" if finite(held) else "",
        f"no in {percent(refuted)} of those where it is no" if finite(refuted) else "",
    ]
    parts = [p for p in parts if p]
    if not parts:
        return UNSIMULATED
    return "a study like this one " + (", ".join(parts[:-1]) + ", and " if len(parts) > 1 else "") + parts[-1]


def _fragility(r: pd.Series) -> str:
    """``; without seed 0 it turns *cannot tell*`` where the verdict moves when one grid seed is left
    out (``leave_one_seed_out``), else ""."""
    moved = meaning.moves(r.get("leave_one_seed_out"))
    if not moved:
        return ""
    said = "; without ".join(f"seed {seed} it turns *{VERDICT_WORDS.get(v, v)}*" for seed, v in moved)
    return f"; without {said}, so it rests on that seed"


def _reasons(rows: pd.DataFrame) -> str:
    """Why the claims ``rows`` (the regime questions the answer states) have no estimate: their notes,
    once each (a claim that is not computable says why in its note); "" where each has one."""
    blank = rows[~rows["our_value"].map(finite)] if "our_value" in rows else rows
    notes = blank.get("note", pd.Series(dtype=str)).dropna().astype(str)
    said = list(dict.fromkeys(n.removeprefix("not computable: ") for n in notes if n))
    return f"No estimate: {'; '.join(said)}." if said else ""


def regime_sentences(claims: pd.DataFrame, designs: dict[str, str] | None = None) -> list[str]:
    """Per regime question: decided (the answer, the estimate and how sure) or not (why, and what
    would decide it: more seeds), each with ``designs``' sentence for its claim id where given (an
    open question, or one this study's design does not decide reliably)."""
    by_id = claims.set_index("id") if "id" in claims else pd.DataFrame()
    decided, undecided = [], []
    for claim_id, asked in _asked("question").items():
        if claim_id not in by_id.index:
            continue
        r = by_id.loc[claim_id]
        answer = VERDICT_WORDS.get(str(r["verdict"]), str(r["verdict"]))
        if r["verdict"] in ("held", "not held"):
            # decided this time by a design that does not decide it reliably: which design would
            design = f"; {designs[claim_id]}" if designs and claim_id in designs else ""
            decided.append(
                f"*{asked}* **{answer.capitalize()}**: {_estimate(r)}; {_sureness(r)}{design}{_fragility(r)}."
            )
        else:
            design = f"; {designs[claim_id]}" if designs and claim_id in designs else ""
            undecided.append(
                f"*{asked}* **Cannot tell**: {_estimate(r)}; {_why_open(r)}{design}{_fragility(r)}."
            )
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
    head = (
        f"**The optima themselves** ('the best update share is {_values()['rule']}', '... {_values()['prm']}'): "
        f"{len(rows) - len(decided)} of {len(rows)} undecided."
    )
    if not held.notna().any():
        return f"{head} The test that reads which allocations might be the best: {UNSIMULATED}."
    top = held.max()
    power = "never says yes" if top == 0 else f"says yes in at most {percent(top)} of simulated studies"
    return (
        f"{head} At this study's size the best allocation cannot be told from its neighbours: the test that "
        f"reads which allocations might be the best {power} even where the paper is right, so its low error "
        "rate means it is silent, not that it is sure."
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
        f"*{checks[r['id']]}* **{VERDICT_WORDS.get(r['verdict'], r['verdict']).capitalize()}**{_fragility(r)}"
        for _, r in rows.iterrows()
    ]
    return "**Our own checks:** " + "; ".join(said) + "."


def _meaning(claims: pd.DataFrame, profile: Profile | None, conventions: pd.DataFrame | None) -> list[str]:
    """The paragraphs that say what the answer's words mean (:mod:`paper_repro.analysis.report.meaning`):
    the margin behind "No" and the verdicts that rest on one seed, the FLOP
    convention's effect on rho, and (with ``profile``) the models' size."""
    stated = claims[claims["id"].isin([*_asked("question"), *_asked("check")])] if "id" in claims else claims
    fragile = "leave_one_seed_out" in stated and any(meaning.moves(v) for v in stated["leave_one_seed_out"])
    others = meaning.other_moves(claims, set(stated.get("id", [])))
    return [
        meaning.margin_paragraph(profile, fragile, others),
        meaning.convention_paragraph(conventions, claims),
        meaning.testbed_line(profile) if profile is not None else "",
    ]


def plain_answer(
    claims: pd.DataFrame,
    profile: Profile | None = None,
    conventions: pd.DataFrame | None = None,
    designs: dict[str, str] | None = None,
) -> list[str]:
    """The plain-words answer as Markdown paragraphs, from ``claims.csv``, then what its words mean
    (``profile``: the profile whose margins and models they name, None: the margin named, not valued,
    and no models' size; ``conventions``: ``conventions.csv``, which rho* each FLOP convention gives;
    ``designs``: per open question's claim id, the design that would decide it, in words)."""
    if claims.empty:
        return ["**In short:** nothing is tested yet (`claims.csv` is empty)."]
    head = (
        "**In short.** The paper says the best share of compute to spend on policy updates rather than on "
        f"sampling answers (the update share, *rho*) is about {_values()['rule']} with rule-based rewards and "
        f"{_values()['prm']} with PRM-style rewards. We ask its three questions as comparisons between the "
        "allocations near those two values, each scored on held-out problems by its *setting*'s own reward (a "
        "setting is a policy with a reward system; its own reward is its *native reward*)"
    )
    bullets = [f"- {s}" for s in regime_sentences(claims, designs)]
    registered = set(
        claims.loc[claims["id"].isin(list(_asked("question"))), "registration"].dropna().astype(str)
    )
    if registered == {"exploratory"}:
        head += " (these comparisons were fixed after this study's runs, so they are *exploratory*)"
    asked = claims[claims["id"].isin(list(_asked("question")))]
    paragraphs = [
        _reasons(asked),
        optimum_sentence(claims) + findings.fits_sentence(claims),
        checks_sentence(claims),
        findings.convention_finding(claims),
        findings.target_finding(claims, designs),
        findings.race_finding(claims),
        *_meaning(claims, profile, conventions),
    ]
    tail = [part for s in paragraphs if s for part in (s, "")]
    return [head + ":", "", *bullets, "", *tail[:-1]]
