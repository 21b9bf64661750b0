"""The claims table's columns on how often each claim's test errs and decides, both read from the
design simulator (:mod:`paper_repro.analysis.design`): its **operating characteristics**
(:func:`oc_columns`, ``oc_*``, from ``design.csv``, written by ``paper-repro design``) and its
**power** (:func:`power_columns`: the share of studies simulated from the committed frontiers'
unimodal fits, with their seed noise and recipe effect, that decide; ``seeds_for_80pct_power`` the
smallest seed count at which :data:`TARGET_POWER` of them do, :func:`seeds_needed`).
"""

from __future__ import annotations

import pandas as pd

from paper_repro.analysis.stats.verdict import NAN

TARGET_POWER = 0.8  # the power column's "seeds for 80%"
# the oc_* columns of a claim not simulated (its oc_note says why)
NO_OC = {
    "oc_wrong_max": NAN,
    "oc_wrong_truth": "",
    "oc_agreement_min": NAN,
    "oc_held_when_true": NAN,
    "oc_not_held_when_false": NAN,
}


def study_design(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``design.csv`` for the design the study ran at its current rules: the post-hoc
    block (regenerated from the runs by the analysis) where the table has one, else ``chosen`` (the
    profile as written, from ``paper-repro design --candidates``) where it has it, else
    ``committed``."""
    if "block" in table and (table["block"] == "post-hoc").any():
        return table[table["block"] == "post-hoc"]
    at = "chosen" if (table["design"] == "chosen").any() else "committed"
    return table[table["design"] == at]


def powers(rows: pd.DataFrame) -> tuple[float, float]:
    """(held when true, not held when false) of one claim's ``design.csv`` rows: the smallest over
    the truths of the share held among studies whose truth holds, and of the share not held among
    those whose truth fails; a truth inside the rule's grey zone (a contrast between 0 and its
    margin) counts for neither. Rows from before these columns: the shares of the truths whose own
    verdict is held / not held."""
    if "held_if_true" in rows:
        held, refuted = rows["held_if_true"].dropna(), rows["not_held_if_false"].dropna()
    else:
        held = rows[rows["true_verdict"] == "held"]["share_held"]
        refuted = rows[rows["true_verdict"] == "not held"]["share_not_held"]
    return (float(held.min()) if len(held) else NAN, float(refuted.min()) if len(refuted) else NAN)


def oc_columns(claim_id: str, design: pd.DataFrame | None) -> dict:
    """The claim's operating characteristics at the study's design, from ``design.csv`` (its rows of
        ``claim_id``): its largest wrong share over the truths (and which truth), its smallest two-draw
        agreement, how often it is held where the truth is held and how often not held where the truth is
    not held (the smallest over such truths: the power it is sure of)."""
    if design is None or design.empty:
        return {**NO_OC, "oc_note": "not simulated: no design.csv (paper-repro design)"}
    ran = study_design(design)
    rows = ran[ran["claim_id"] == claim_id]
    if rows.empty:
        return {
            **NO_OC,
            "oc_note": "not simulated yet: design.csv has no rows of this claim (paper-repro design)",
        }
    worst = rows.loc[rows["wrong"].idxmax()]
    held, refuted = powers(rows)
    return {
        "oc_wrong_max": float(worst["wrong"]),
        "oc_wrong_truth": str(worst["truth"]) if worst["wrong"] > 0 else "",
        "oc_agreement_min": float(rows["agreement"].min()),
        "oc_held_when_true": held,
        "oc_not_held_when_false": refuted,
        "oc_note": f"{len(rows)} truths, {int(rows['studies'].iloc[0])} studies each (design.csv"
        + (f", {rows['block'].iloc[0]} block)" if "block" in rows else ")"),
    }


def power_columns(claim_id: str, powers: dict[str, dict[int, float]] | None, seeds_now: int) -> dict:
    """The share of simulated studies that decide at the study's seeds per cell, and the seeds per
    cell that reach 80% (:func:`paper_repro.analysis.design.power_table`, keyed by claim id)."""
    if not powers or claim_id not in powers:
        return {"power_now": NAN, "seeds_for_80pct_power": NAN, "power_note": "not computed"}
    table = powers[claim_id]
    needed = seeds_needed(table)
    note = ", ".join(f"{n} seeds: {p:.2f}" for n, p in sorted(table.items()))
    if needed is None:
        note += f"; not decided in 80% of studies with up to {max(table)} seeds per cell"
    return {
        "power_now": table.get(seeds_now, NAN),
        "seeds_for_80pct_power": float(needed or NAN),
        "power_note": note,
    }


def seeds_needed(powers: dict[int, float]) -> int | None:
    """The smallest seed count whose share of deciding studies reaches :data:`TARGET_POWER`."""
    return next((n for n, p in sorted(powers.items()) if p >= TARGET_POWER), None)
