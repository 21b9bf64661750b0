"""What the benchmarks share: the policy sizes they time, the committed base metrics copied in
before any timed run, and a run without its budget ladder."""

from __future__ import annotations

from paper_repro.testbed import POLICIES

RUN_SIZES = tuple(POLICIES)  # every policy size of the testbed


def base_folder(tmp):
    """``tmp/base`` with the committed base metrics (when there are any): the base policies are
    evaluated once per study, never inside a timed run."""
    import shutil

    from paper_repro.common.paths import repo_root

    committed = repo_root() / "data" / "results" / "cpu-tiny" / "base_metrics.csv"
    base = tmp / "base"
    base.mkdir()
    if committed.exists():
        shutil.copy(committed, base / "base_metrics.csv")
    return base


def without_ladder(spec):
    """``spec`` without its budget ladder (the same run: :mod:`paper_repro.run.ladder`)."""
    import dataclasses

    return dataclasses.replace(spec, ladder=(), ladder_unit=None)
