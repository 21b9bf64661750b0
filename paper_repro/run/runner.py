"""Running many specs in this process (or in worker processes), resumably.

:func:`run_specs` skips every spec whose ``ok`` row is already in the table, with (for a run with a
budget ladder) a row for each point of its curve in ``curves.csv`` (so a sweep killed at any point and
rerun finishes only what is missing), refuses bad input before any compute, runs the rest
(with a progress bar where someone sees it: :class:`paper_repro.common.console.RunsProgress`), says in one
line how many it ran and skipped, and returns the
rows in spec order. With ``jobs > 1`` each worker is a fresh process with ``threads`` torch threads
(default: the machine's cores divided among the jobs); rows are appended by the workers themselves,
under the table's file lock.
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
    threads = threads or max(1, (os.cpu_count() or 1) // max(1, jobs))
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
