"""The history of a profile's runs table: the rows that are not runs of its design move aside.

:func:`split_history` moves the rows of ``runs.csv`` that belong to no run of the profile's design
(:class:`paper_repro.run.study_design.Design`: an earlier generation's, a stray) to ``runs_history.csv``
beside it, with their curves' points; ``runs.csv`` then holds the study alone. :func:`full_budget_of`
is the C an older row's ``budget_multiple`` is derived with (:func:`paper_repro.common.results.upgrade_text`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from paper_repro.common.results import (
    CURVE_COLUMNS,
    RUN_COLUMNS,
    ResultTable,
    history_path,
    move_rows,
    results_dir,
)
from paper_repro.config import Profile, load_profile
from paper_repro.run.study_design import Design


def full_budget_of(spec: Mapping[str, Any]) -> float | None:
    """The full budget C in FLOPs of the run a row records (``spec``: its canonical spec, as a dict):
    the C of the shipped profile it names, or of that profile's quick variant where the run is one of
    the quick variant's design and not of the profile's (a quick run's C is a quarter of the study's);
    None where no shipped profile has that name (a profile file of one's own: its row's
    ``budget_multiple`` is NaN, never a guess)."""
    budgets = _full_budgets(str(spec.get("profile")))
    if budgets is None:
        return None
    study, quick = budgets
    text = json.dumps(dict(spec), default=str)
    if quick[1].problem(text, any_seed=True) is None and study[1].problem(text, any_seed=True) is not None:
        return quick[0]
    return study[0]


@cache
def _full_budgets(name: str) -> tuple[tuple[float, Design], tuple[float, Design]] | None:
    """The C and the design of shipped profile ``name`` and of its quick variant; None if unknown."""
    try:
        profile = load_profile(name)
    except (ValueError, FileNotFoundError):
        return None
    quick = profile.quick_variant()
    return (profile.budget_flops, Design(profile)), (quick.budget_flops, Design(quick))


def split_history(
    profile: Profile, results_root: str | Path | None = None, before: str | None = None
) -> tuple[int, int]:
    """Move the rows of ``profile``'s runs table (``runs.csv`` in ``results_root``; None: the
    committed one) that are not runs of its design (:class:`Design`: an earlier generation's, a
    stray) to ``runs_history.csv`` beside it, and the points of those runs' curves to
    ``curves_history.csv`` (:func:`paper_repro.common.results.move_rows`: atomic, idempotent; the step logs
    stay in ``steps/``). ``runs.csv`` then holds the study alone, which every later run keeps so
    (:func:`paper_repro.run.study_design.check_committed`). ``before`` (ISO 8601): also move every row made before that time, an
    earlier study of the same design (a design registered after those runs is tested on runs made
    after it: its rerun makes the same run ids again). Returns the rows and the curve points moved."""
    import pandas as pd

    root = results_dir(profile.name, results_root)
    design = Design(profile)
    runs = ResultTable(root / "runs.csv", RUN_COLUMNS, full_budget=full_budget_of)
    cut = pd.Timestamp(before) if before else None
    if cut is not None and cut.tzinfo is None:
        cut = cut.tz_localize("UTC")

    def earlier(row: dict[str, str]) -> bool:
        made = pd.to_datetime(row.get("created_at") or None, utc=True, errors="coerce")
        return cut is not None and pd.notna(made) and made < cut

    moved = move_rows(runs, lambda row: design.problem(row["spec"]) is not None or earlier(row))
    # a curve point moves with its run's row: the points of a run that has no row yet wait for it
    gone = ResultTable(history_path(runs.path), RUN_COLUMNS, full_budget=full_budget_of).keys() - runs.keys()
    curves = ResultTable(root / "curves.csv", CURVE_COLUMNS, key="curve_id")
    points = move_rows(curves, lambda row: row["run_id"] in gone)
    return moved, points
