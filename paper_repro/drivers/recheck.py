"""``paper-repro recheck``: is the committed study
bit-reproducible on this machine?

Reruns a random sample of the committed runs of a profile's current study (by default 6 ``prm``
runs, 2 each of ``proxy_prm``, ``structured`` and ``sparse`` (stage A's, which run past C along their
budget ladder), 2 RACE pilots) into an empty scratch table, and
compares every metric, FLOP count, round and step count with the committed row: each row says the
largest difference it found, in which column, and whether that is within :data:`paper_repro.common.rowdiff.TOLERANCE`. The
sampled specs are the study's own (:func:`paper_repro.drivers.sweep.study_jobs`), so a run is rerun exactly
as the study asked for it.
"""

from __future__ import annotations

import tempfile

import pandas as pd

from paper_repro.common.results import METRICS, RUN_COLUMNS, ResultTable, results_dir
from paper_repro.common.rowdiff import COMPARED, TOLERANCE, beyond, differences
from paper_repro.drivers import study, sweep
from paper_repro.run import runner
from paper_repro.run.history import full_budget_of

SAMPLE = {"prm": 6, "proxy_prm": 2, "structured": 2, "sparse": 2, "pilot": 2}


def sample(committed: pd.DataFrame, ids: set[str], seed: int = 0) -> pd.DataFrame:
    """The sampled committed rows: per reward system of :data:`SAMPLE` its full-budget runs, and
    ``pilot`` RACE pilots, among the current study's run ids."""
    rows = committed[committed["run_id"].isin(ids) & (committed["status"] == "ok")]
    parts = []
    for kind, n in SAMPLE.items():
        pool = (
            rows[rows["budget_kind"] == "pilot"]
            if kind == "pilot"
            else rows[(rows["reward_system"] == kind) & (rows["budget_kind"] == "full")]
        )
        parts.append(pool.sample(min(n, len(pool)), random_state=seed))
    return pd.concat(parts)


def recheck(
    profile_name: str = "cpu-tiny", scratch: str | None = None, jobs: int = 2, seed: int = 0
) -> pd.DataFrame:
    """Rerun the sample into ``scratch`` (a new temporary folder by default); one row per run with
    the largest difference from the committed row, its column, the columns beyond
    :data:`TOLERANCE` and a verdict (``equal``, ``within tolerance`` or ``differs``)."""
    profile = study.prepare(profile_name)
    by_id = {s.run_id: s for job in sweep.study_jobs(profile) for s in job.specs}
    committed = ResultTable(
        results_dir(profile.name) / "runs.csv", RUN_COLUMNS, full_budget=full_budget_of
    ).frame()
    picked = sample(committed, set(by_id), seed)
    scratch = scratch or tempfile.mkdtemp(prefix="recheck-")
    rows = pd.DataFrame(runner.run_specs([by_id[r] for r in picked["run_id"]], scratch, jobs=jobs, threads=1))
    return compare(picked, rows)


def compare(committed: pd.DataFrame, rerun: pd.DataFrame) -> pd.DataFrame:
    """Per committed row, its rerun's largest difference, the column it is in, the columns beyond
    :data:`TOLERANCE` and the verdict (``equal``, ``within tolerance`` or ``differs``)."""
    gap = differences(committed, rerun)
    over = beyond(gap)
    out = committed.set_index("run_id")[["setting", "cell", "seed", "budget_kind"]].copy()
    out["largest_difference"] = gap.max(axis=1)
    out["in_column"] = [gap.loc[i].idxmax() if gap.loc[i].max() > 0 else "" for i in out.index]
    out["beyond_tolerance"] = [", ".join(c for c in COMPARED if over.loc[i, c]) for i in out.index]
    out["verdict"] = [
        "differs" if b else ("equal" if d == 0 else "within tolerance")
        for b, d in zip(out["beyond_tolerance"], out["largest_difference"], strict=True)
    ]
    return out


def words(table: pd.DataFrame) -> str:
    """What a recheck found (:func:`compare`'s table): how many rows are equal, within tolerance, or
    differ."""
    counts = table["verdict"].value_counts()
    return (
        f"{len(table)} rerun rows against the committed ones: {int(counts.get('equal', 0))} equal, "
        f"{int(counts.get('within tolerance', 0))} within tolerance (metrics within "
        f"{TOLERANCE[METRICS[0]]:g}, FLOPs, rounds and steps equal), {int(counts.get('differs', 0))} differ"
    )
