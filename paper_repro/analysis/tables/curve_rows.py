"""The rows of ``curves.csv`` as the compute-curve analysis reads them (:mod:`paper_repro.analysis.tables.curves`,
:mod:`paper_repro.analysis.tables.extrapolation`): parsed (:func:`prepared`), labelled per setting
(:func:`grid_curves`), the targets they measure and policy sizes in order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pandas as pd

from paper_repro.analysis.stats.saturating import DECIMALS
from paper_repro.common.results import METRICS, POLICY_SIZES

FULL = 1.0  # the full budget's point
NUMBERS = (
    "seed",
    "point",
    "point_flops",
    "steps",
    "target_rho",
    "rho",
    *METRICS,
    *(f"base_{t}" for t in METRICS),
)


def prepared(curves: pd.DataFrame) -> pd.DataFrame:
    """``curves`` with the numbers this module reads parsed and ``point`` rounded (a CSV's cells are
    text; ``point`` and ``point_flops`` are not among :data:`paper_repro.analysis.tables.frontiers.NUMERIC`)."""
    frame = curves.copy()
    for column in [c for c in NUMBERS if c in frame]:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    if "point" in frame:
        frame["point"] = frame["point"].round(DECIMALS)
    if "status" not in frame:
        frame["status"] = "ok"
    return frame


LABELS = ("stage", "setting", "cell", "target_rho", *(f"base_{t}" for t in METRICS))


def grid_curves(curves: pd.DataFrame, grid: pd.DataFrame) -> pd.DataFrame:
    """The curve rows of the runs in ``grid`` (the analysis' full-budget grid rows, labelled per
    setting as :func:`paper_repro.analysis.tables.frontiers.setting_rows` does), each labelled as its run is
    there (stage, setting, cell, target rho) with its run's ``base_<metric>``: a run that serves two
    settings (stage B's sparse is stage A's M) gives its curve to both; a run not in ``grid`` (a pilot,
    a fresh seed, TRL's default) is left out."""
    if curves.empty or grid.empty:
        return curves.iloc[0:0]
    labels = grid[["run_id", *(c for c in LABELS if c in grid)]].drop_duplicates()
    mine = curves.drop(columns=[c for c in labels.columns if c != "run_id" and c in curves])
    return mine.merge(labels, on="run_id", how="inner")


def targets_of(curves: pd.DataFrame, targets: Sequence[str] | None = None) -> list[str]:
    """The targets (of ``targets``, default every metric) that ``curves`` measures somewhere."""
    wanted = METRICS if targets is None else targets
    return [t for t in wanted if t in curves and curves[t].notna().any()]


def size_order(labels) -> list[str]:
    """Policy labels smallest first: letters by :data:`POLICY_SIZES` ("S" < "M" < "L"), else by the
    number in the label ("1.5B" < "3B" < "7B"), else in the order given."""
    labels = list(dict.fromkeys(map(str, labels)))
    if all(s in POLICY_SIZES for s in labels):
        return sorted(labels, key=POLICY_SIZES.index)
    numbers = [re.search(r"\d+(\.\d+)?", s) for s in labels]
    if all(numbers):
        return [s for _, s in sorted(zip([float(m.group()) for m in numbers], labels, strict=True))]
    return labels
