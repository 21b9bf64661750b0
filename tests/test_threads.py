"""A run's torch threads: one rule (:func:`paper_repro.run.runner.threads_per_job`) that
``paper-repro cells``, the notebooks (``threads=None``) and the local sweep share.

A notebook run alone once took every core (``threads = None  # all cores``): on a busy 2-core machine
the documented exploration took 311 s instead of 20 s, with the same run_id and metrics."""

from __future__ import annotations

import json

import pytest

from paper_repro.config import load_profile
from paper_repro.drivers import sweep
from paper_repro.run import runner
from paper_repro.run.spec import setting_specs


@pytest.mark.parametrize("cores", [1, 2, 16])
@pytest.mark.parametrize("jobs", [1, 2, 4])
def test_a_run_gets_one_thread_unless_told(monkeypatch, cores, jobs):
    monkeypatch.setattr(runner, "usable_cores", lambda: cores)
    assert runner.threads_per_job(jobs) == 1
    assert runner.threads_per_job(jobs, threads=3) == 3  # the caller's choice stands


def test_more_threads_per_run_are_bounded_by_the_cores_shared_among_the_jobs(monkeypatch):
    monkeypatch.setattr(runner, "THREADS_PER_RUN", 8)
    monkeypatch.setattr(runner, "usable_cores", lambda: 16)
    assert [runner.threads_per_job(j) for j in (1, 4, 16, 32)] == [8, 4, 1, 1]
    monkeypatch.setattr(runner, "usable_cores", lambda: 2)
    assert runner.threads_per_job(1) == 2


def test_run_specs_and_the_sweep_call_the_one_rule(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "THREADS_PER_RUN", 3)
    monkeypatch.setattr(runner, "usable_cores", lambda: 12)
    seen = []
    monkeypatch.setattr(runner, "check_spec", lambda spec: None)
    monkeypatch.setattr(runner, "run_cell", lambda spec, root, nb, threads, pending: seen.append(threads))
    (spec,) = setting_specs(load_profile("cpu-tiny"), "S", seeds=[42], cells=["r40"])
    runner.run_specs([spec], tmp_path, progress=False)  # a notebook's threads=None, alone
    assert seen == [3]

    given = []
    monkeypatch.setattr(
        sweep, "execute_job", lambda job, threads=None, log_output=False: given.append(threads)
    )
    steps = [s for s in sweep.STUDY_STEPS if s != "testbed"]
    jobs = sweep.study_jobs(load_profile("cpu-tiny"), steps, results_root=tmp_path, executed_dir=tmp_path)
    sweep.run_study(jobs[:2], n_jobs=6, progress=False)
    assert given == [2, 2]  # 12 cores among 6 notebooks


def test_threads_do_not_enter_a_runs_id():
    (spec,) = setting_specs(load_profile("cpu-tiny"), "M", seeds=[0], cells=["r40"])
    assert "thread" not in json.dumps(spec.canonical(), default=str)


def test_stage_e_gets_the_sweeps_threads_though_its_runs_are_in_no_spec(tmp_path, monkeypatch):
    """Stage E retrains and samples in its notebook with no spec of its own: without the sweep's
    threads it took torch's default (every core), and on the busy 2-core machine two threads spun
    over work that one thread does (stage E at 150 problems, 2026-12-05)."""
    import shutil

    import papermill

    given = {}

    def execute(source, out, parameters, **kwargs):  # the notebook as it is, its parameters kept
        given.update(parameters)
        shutil.copy(source, out)

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    (job,) = sweep.study_jobs(load_profile("cpu-tiny"), ["test_time"], executed_dir=tmp_path)
    sweep.execute_job(job, threads=1)
    assert given["threads"] == 1
