"""How far a rerun's rows are from the committed ones: the columns compared, the tolerance that still
reads as the same run, and the absolute differences per run and column. The one owner of these for
``paper-repro recheck`` (a sample rerun) and ``paper-repro reproduce`` (the whole
study recomputed).
"""

from __future__ import annotations

import pandas as pd

from paper_repro.common.results import METRICS

# What a run measured; its labels (stage, setting, cell, budget_multiple: where its budget is, derived
# from the spec) are not compared: the run_id fixes what it computes, a label may be another asker's.
COMPARED = (*METRICS, "C_search", "C_learning", "C_reward", "C_total", "rounds", "steps")
# The largest absolute difference from the committed row that still reads as the same run: a metric
# may move by float rounding (a PRM-scored native reward is a mean of float scores: 1.6e-8 was seen
# between two machines of the project's kind, in 8 of 12 sampled rows, all `prm`), while one answer
# that changes moves a 300-problem metric by 3.3e-3; FLOP counts, rounds and steps must be equal.
TOLERANCE = {**dict.fromkeys(METRICS, 1e-6), **dict.fromkeys(COMPARED[len(METRICS) :], 0.0)}


def differences(committed: pd.DataFrame, rerun: pd.DataFrame) -> pd.DataFrame:
    """Per run id of ``committed`` (each must be in ``rerun``), the absolute difference of each
    :data:`COMPARED` column: 0 where both are NaN, ``inf`` where one side alone is NaN."""
    old = committed.set_index("run_id")[list(COMPARED)].astype(float)
    new = rerun.set_index("run_id")[list(COMPARED)].astype(float).loc[old.index]
    return (new - old).abs().where(~(old.isna() & new.isna()), 0.0).fillna(float("inf"))


def beyond(gap: pd.DataFrame) -> pd.DataFrame:
    """Which differences of :func:`differences` are beyond :data:`TOLERANCE` (a boolean frame)."""
    return gap.gt(pd.Series(TOLERANCE))
