"""The claims table: one row per registered claim (:func:`paper_repro.analysis.claims.registry.claims`),
its verdict with our estimate and interval, its words, its operating characteristics and power, and
whether its verdict survives leaving out any one grid seed.

Every column is filled by iterating the registry, so a claim declared once appears here, in the
README's table and in notebook 40's story. The columns on how a claim's test errs and decides come
from its declared simulation (:mod:`paper_repro.analysis.claims.columns`): the design simulator's
``design.csv`` and power table for the :class:`Simulated` claims, the claim's own simulation for
:class:`OwnSimulation`, the declared reason for :class:`NotSimulated`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pandas as pd

from paper_repro.analysis.claims.columns import NO_OC, oc_columns, power_columns
from paper_repro.analysis.claims.registry import Claim, NotSimulated, OwnSimulation, claims, registration
from paper_repro.analysis.claims.study import Study

COLUMNS = [
    "id",
    "claim",
    "kind",
    "registration",
    "paper_value",
    "our_value",
    "our_value_means",
    "ci_low",
    "ci_high",
    "verdict",
    "best_cells",
    "note",
    "test",
    "seeds_per_cell",
    "oc_wrong_max",
    "oc_wrong_truth",
    "oc_agreement_min",
    "oc_held_when_true",
    "oc_not_held_when_false",
    "oc_note",
    "power_now",
    "seeds_for_80pct_power",
    "power_note",
    "leave_one_seed_out",
]
MIN_SEEDS = 3  # leave-one-seed-out needs at least this many grid seeds


def _simulation_columns(claim: Claim, study: Study, design, powers, seeds: int) -> dict:
    """The ``oc_*`` and ``power_*`` columns from the claim's declared simulation."""
    sim = claim.simulation
    if isinstance(sim, NotSimulated):
        words = f"not simulated: {sim.reason}"
        return {
            **NO_OC,
            "oc_note": words,
            "power_now": float("nan"),
            "seeds_for_80pct_power": float("nan"),
            "power_note": words,
        }
    if isinstance(sim, OwnSimulation):
        return sim.operating(study, **claim.params)
    return {**oc_columns(claim.id, design), **power_columns(claim.id, powers, seeds)}


def decided(study: Study, ids: Sequence[str] | None = None) -> dict[str, str]:
    """Every claim's verdict on ``study`` (by id; ``ids``: only these): what leave-one-seed-out compares."""
    return {c.id: c.decide(study).verdict for c in claims(study, ids=ids)}


def claims_table(
    study: Study,
    design: pd.DataFrame | None = None,
    powers: dict[str, dict[int, float]] | None = None,
    leave_one_out: bool = True,
    ids: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One row per registered claim of ``study``. ``design``: the operating characteristics
    (``design.csv``) whose study-design rows give the simulated claims' wrong and agreement rates;
    ``powers``: per claim id, the simulated share decided per seed count
    (:func:`paper_repro.analysis.design.power_table`); ``ids``: only these claims (None: every one).
    ``registration``: whether the claim's rule was fixed before the study's first run (pre-registered)
    or after (exploratory)."""
    rows, seeds = [], study.seeds_per_cell
    began = study.first_run
    for claim in claims(study, ids=ids):
        result = claim.decide(study)
        rows.append(
            {
                "id": claim.id,
                "claim": claim.sentence,
                "kind": claim.kind,
                "registration": registration(claim, began),
                "paper_value": claim.paper_value,
                "our_value": result.value,
                "our_value_means": claim.spec.unit,
                "ci_low": result.low,
                "ci_high": result.high,
                "verdict": result.verdict,
                "best_cells": result.best_cells,
                "note": result.note,
                "test": claim.words(study),
                "seeds_per_cell": seeds,
                **_simulation_columns(claim, study, design, powers, seeds),
            }
        )
    table = pd.DataFrame(rows, columns=COLUMNS[:-1])
    if leave_one_out:
        table["leave_one_seed_out"] = (
            table["id"].map(leave_one_seed_out(study, table)).fillna("not recomputed")
        )
    return table


def leave_one_seed_out(study: Study, table: pd.DataFrame) -> dict[str, str]:
    """Per claim, whether its verdict survives dropping any one grid seed: every claim decided again
    on the study less each seed in turn (its curves' points too; the verdicts need no bootstrap)."""
    verdict = dict(zip(table["id"], table["verdict"], strict=True))
    seeds = sorted(study.grid_rows["seed"].unique())
    if len(seeds) < MIN_SEEDS:
        return {}
    moves: dict[str, list[str]] = {i: [] for i in verdict}
    for seed in seeds:
        for claim_id, v in decided(replace(study.without_seed(seed), estimate=False), list(moves)).items():
            if claim_id in moves and v != verdict[claim_id]:
                moves[claim_id].append(f"seed {seed}: {v}")
    return {
        i: "the same without any one seed" if not m else f"changes without {'; '.join(m)}"
        for i, m in moves.items()
    }
