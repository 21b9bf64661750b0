"""The claims told in sentences generated from their tables: what notebook 40 prints after the
answer (:mod:`paper_repro.analysis.report.answer`).

No number is typed here: every sentence is filled from a row of ``claims.csv``, so the text changes
when the table does. :func:`how_tested` states each test once; :func:`claim_paragraphs`
gives, per claim, the verdict, the estimate and its interval, the cells behind it, the power and the
simulated error rates; :func:`readings` gives one line per figure, each declared with its figure
(:mod:`paper_repro.analysis.figures.registry`).
"""

from __future__ import annotations

import re

import pandas as pd

from paper_repro.analysis.claims.curves import MOVES
from paper_repro.analysis.claims.sizes import GROWS
from paper_repro.analysis.wording import finite, num, percent

TARGET = "native_reward"
CURVE_CLAIMS = (MOVES, GROWS)  # the compute-curve claims the answer's budget line names


def estimate_sentence(row: pd.Series) -> str:
    """Our value, its interval when there is one, and the test's note."""
    note = str(row["note"]) if isinstance(row.get("note"), str) and row["note"] else ""
    if not finite(row["our_value"]):
        return f"There is no estimate; the test's note: {note}." if note else "There is no estimate."
    text = f"Our estimate is {num(row['our_value'])}"
    if finite(row["ci_low"]) and finite(row["ci_high"]):
        text += f" (95% interval {num(row['ci_low'])} to {num(row['ci_high'])})"
    return text + (f"; {note}." if note else ".")


def power_sentence(row: pd.Series) -> str:
    """What would change the verdict: how often the test decides in studies simulated at this
    study's seeds, and how many seeds per cell would make it decide 80% of the time."""
    if not finite(row.get("power_now")):
        return f"Power: {row['power_note']}."
    n = int(row["seeds_per_cell"]) if finite(row["seeds_per_cell"]) else 0
    p = float(row["power_now"])
    text = f"Power: it decides {percent(p)} of simulated studies at {n} seeds per cell"
    needed = row.get("seeds_for_80pct_power")
    if p >= 0.8:
        return text + "."
    if finite(needed):
        return text + f"; about {int(needed)} seeds per cell would make that 80%."
    return text + "; not even 40 seeds per cell would make that 80%."


def oc_sentence(row: pd.Series) -> str:
    """How often the test is wrong and how often two draws agree, from ``design.csv``."""
    if not finite(row.get("oc_wrong_max")):
        note = row.get("oc_note")
        return f" Error rates: {note}." if isinstance(note, str) and note else ""
    worst = (
        f" (under {row['oc_wrong_truth']})"
        if isinstance(row.get("oc_wrong_truth"), str) and row["oc_wrong_truth"]
        else ""
    )
    held = (
        f"; held in {percent(row['oc_held_when_true'])} where the truth holds"
        if finite(row.get("oc_held_when_true"))
        else ""
    )
    return (
        f" Error rates (simulated, design.csv): wrong in at most {percent(row['oc_wrong_max'])}{worst}, "
        f"two draws agree in at least {percent(row['oc_agreement_min'])}{held}."
    )


def source_sentence(row: pd.Series) -> str:
    """Where the claim comes from and what the paper says of it."""
    value = str(row["paper_value"])
    if row["kind"] == "paper claim":
        return (
            "The paper states it without a number."
            if value == "qualitative"
            else f"The paper reports {value}."
        )
    if row["kind"] == "description":
        return f"A description, not counted among the decided claims; the paper's value: {value}."
    kind = "A consistency check" if row["kind"] == "consistency check" else "Our addition"
    if value in ("qualitative", "") or value.startswith("not "):
        return f"{kind}{', ' + value if value.startswith('not ') else ''}."
    return f"{kind}; the paper's value: {value}."


def family(claim: str) -> str:
    """The test a claim shares with its rows on other targets or pilot budgets."""
    name = re.sub(r" \(on [^)]*\)$", "", claim)
    return re.sub(r"at \d+/\d+ of the budget", "at a pilot budget", name)


def how_tested(claims: pd.DataFrame) -> list[str]:
    """Each test once, as the claims table states it (its first row's wording; the rows on other
    targets or pilot budgets run the same test on theirs)."""
    out = []
    for name, rows in claims.groupby(claims["claim"].map(family), sort=False):
        k = len(rows) - 1
        also = f" (and {k} row{'s' * (k != 1)} on other targets or pilot budgets)" if k else ""
        out.append(f"- **{name}**{also}: {str(rows['test'].iloc[0]).rstrip('.')}.")
    return out


def claim_paragraphs(claims: pd.DataFrame) -> list[str]:
    """One Markdown paragraph per claim: its verdict, where it comes from, our estimate with its
    interval, the cells behind it, the power and the simulated error rates."""
    out = []
    for _, row in claims.iterrows():
        loso = row.get("leave_one_seed_out")
        robust = (
            f" Dropping one grid seed at a time: {loso}."
            if isinstance(loso, str) and loso != "not recomputed"
            else ""
        )
        cells = row.get("best_cells")
        best = f" Could be best: {cells}." if isinstance(cells, str) and cells else ""
        out.append(
            f"**{row['claim']}: {row['verdict']}.** {source_sentence(row)} {estimate_sentence(row)}{best} "
            f"{power_sentence(row)}{oc_sentence(row)}{robust}"
        )
    return out


def verdict_counts(claims: pd.DataFrame) -> str:
    """``k held, m not held, j inconclusive`` over the paper's claims."""
    paper = claims[claims["kind"] == "paper claim"]["verdict"].value_counts()
    return ", ".join(
        f"{int(paper.get(v, 0))} {v}" for v in ("held", "not held", "inconclusive", "heterogeneous")
    )


def story(analysis) -> str:
    """The claims in Markdown, from an :class:`paper_repro.analysis.Analysis`: a count of the
    paper's verdicts, how each claim is tested (each test once), then one paragraph per claim."""
    return "\n\n".join(story_sections(analysis))


def story_sections(analysis) -> list[str]:
    """:func:`story` in its two sections, each one Markdown string: the count of the paper's verdicts
    with how each claim is tested, then the claims' paragraphs (notebook 40 displays them one by one,
    so that no output of the executed notebook grows past what a committed notebook may hold)."""
    claims = analysis.claims
    seeds = int(claims["seeds_per_cell"].max()) if len(claims) else 0
    head = (
        f"Of the paper's claims, {verdict_counts(claims)}, with {seeds} seed{'s' * (seeds != 1)} per "
        "full-budget cell. Each verdict comes from a test fixed in code before the runs."
    )
    return [
        "\n\n".join([head, "### How each claim is tested", "\n".join(how_tested(claims))]),
        "\n\n".join(["### The claims", *claim_paragraphs(claims)]),
    ]


def readings(analysis) -> dict[str, str]:
    """One line per figure of an :class:`paper_repro.analysis.Analysis` (by its file name), each
    figure's own reading (:func:`paper_repro.analysis.figures.registry.figure_readings`) of the
    tables the analysis wrote."""
    from paper_repro.analysis.figures.registry import figure_readings

    return figure_readings(analysis.tables)
