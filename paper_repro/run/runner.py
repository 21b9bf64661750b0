"""Running many specs in this process (or in worker processes), resumably.

:func:`run_specs` skips every spec whose ``ok`` row is already in the table, with (for a run with a
budget ladder) a row for each point of its curve in ``curves.csv`` (so a sweep killed at any point and
rerun finishes only what is missing), refuses bad input before any compute, runs the rest
(with a progress bar where someone sees it: :class:`paper_repro.common.console.RunsProgress`), says in one
line how many it ran and skipped, and returns the
rows in spec order. With ``jobs > 1`` each worker is a fresh process; every run has ``threads`` torch
threads (default: :func:`threads_per_job`, which the sweep and the notebooks call too); rows are
appended by the workers themselves, under the table's file lock.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from paper_repro.common.console import RunsProgress
from paper_repro.common.quiet import quiet_libraries
from paper_repro.common.results import RUN_COLUMNS, ResultTable, labels, results_dir
from paper_repro.run.ladder import curves_table, missing_points
from paper_repro.run.preflight import check_spec
from paper_repro.run.spec import RunSpec
from paper_repro.run.study_design import check_committed
from paper_repro.run.train import run_cell

# A run's torch threads unless told otherwise. A cpu-tiny run's matrices (hidden sizes 48 to 96) are too
# small to share between threads: on the 2-core machine one run of the documented exploration (dense r40
# seed 42) trained and evaluated in 12.5 s on one thread and 15.7 s on two, quiet, and in 29.6 s
# against 194.7 s wall beside one busy process (issue 51; docs/usage.md). More cores go to more runs at
# once (``--jobs``), not to more threads per run.
THREADS_PER_RUN = 1


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform says, else the machine's)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def threads_per_job(jobs: int = 1, threads: int | None = None) -> int:
    """The torch threads of each of ``jobs`` runs made at once on this machine: ``threads`` when given
    (the caller's choice), else :data:`THREADS_PER_RUN`, never more than the usable cores divided among
    the jobs (and at least one). The one rule ``paper-repro cells``, the notebooks (``threads=None``)
    and the local sweep (``paper-repro run``, ``make reproduce``) share."""
    if threads is not None:
        return threads
    return max(1, min(THREADS_PER_RUN, usable_cores() // max(1, jobs)))


def pending(specs: Sequence[RunSpec], results_root: str | Path | None = None) -> list[RunSpec]:
    """The specs without an ``ok`` row in their profile's table, or without a row in ``curves.csv``
    for a point of their ladder (in order, without repeats)."""
    done: dict[str, set[str]] = {}
    measured: dict[str, set[str]] = {}
    out, seen = [], set()
    for spec in specs:
        if spec.profile not in done:
            root = results_dir(spec.profile, results_root)
            done[spec.profile] = ResultTable(root / "runs.csv", RUN_COLUMNS).done()
            measured[spec.profile] = curves_table(root).keys()
        finished = spec.run_id in done[spec.profile] and not missing_points(spec, measured[spec.profile])
        if finished or spec.run_id in seen:
            continue
        seen.add(spec.run_id)
        out.append(spec)
    return out


def run_specs(
    specs: Sequence[RunSpec],
    results_root: str | Path | None = None,
    jobs: int = 1,
    threads: int | None = None,
    executed_notebook: str = "",
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Run every spec that has no ``ok`` row yet; return the rows of all specs (existing ones too).
    With ``progress``: the runs' progress where someone sees it (a bar on a terminal, and from a
    notebook that papermill executes, on papermill's console; never in the notebook, where each
    update would be one more output: :class:`paper_repro.common.console.RunsProgress`), then
    :func:`run_summary`'s line."""
    todo = pending(specs, results_root)
    check_committed(todo, results_root)  # refuse bad input before any compute, once (run_cell trusts it)
    for spec in todo:
        check_spec(spec)
    threads = threads_per_job(jobs, threads)
    shown = RunsProgress(len(todo), progress)
    made = []
    if jobs <= 1:
        for spec in todo:
            with shown.running(run_name(spec)):
                made.append(run_cell(spec, results_root, executed_notebook, threads, pending=True))
    else:
        context = get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=quiet_libraries) as pool:
            futures = {
                pool.submit(run_cell, s, results_root, executed_notebook, threads, pending=True): s
                for s in todo
            }
            for future in as_completed(futures):
                made.append(future.result())
                shown.finished(run_name(futures[future]))
    shown.close()
    if progress:
        print(run_summary(made, len({s.run_id for s in specs}) - len(todo)))
    return rows_for(specs, results_root)


def run_name(spec: RunSpec) -> str:
    """A run as the progress names it: its setting, cell and seed (and a pilot's budget kind)."""
    kind = "" if spec.budget_kind == "full" else f" ({spec.budget_kind})"
    return f"{spec.setting} {spec.cell} seed {spec.seed}{kind}"


def run_summary(made: Sequence[dict[str, Any]], skipped: int) -> str:
    """One line on what :func:`run_specs` did: the runs it made (and how many of them failed) and the
    ones it skipped because their ``ok`` row was already in the table."""
    failed = sum(row.get("status") == "failed" for row in made)
    line = f"{_runs(len(made))} done, {skipped} skipped (already present)"
    return f"{line}; {failed} failed (their error is in runs.csv)" if failed else line


def _runs(n: int) -> str:
    return f"{n} run{'s' * (n != 1)}"


def rows_for(specs: Sequence[RunSpec], results_root: str | Path | None = None) -> list[dict[str, Any]]:
    """The latest row of each spec (``ok`` preferred over ``failed``), in spec order."""
    rows: dict[str, dict[str, str]] = {}
    for profile in {s.profile for s in specs}:
        for row in ResultTable(results_dir(profile, results_root) / "runs.csv", RUN_COLUMNS).rows():
            if row["status"] == "ok" or row["run_id"] not in rows:
                rows[row["run_id"]] = row
    # a run serves every spec that computes the same thing: label it as this spec asked for it
    return [{**rows[s.run_id], **labels(s)} for s in specs if s.run_id in rows]
