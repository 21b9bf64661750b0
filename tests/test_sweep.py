"""The resumable runner over many specs and the `paper-repro cells` command."""

from __future__ import annotations

import dataclasses

import pytest

from paper_repro import cli
from paper_repro.common.results import ResultTable
from paper_repro.config import load_profile
from paper_repro.drivers import sweep
from paper_repro.run import runner, train
from paper_repro.run.spec import setting_specs


def test_a_rerun_runs_only_what_is_missing(tiny_profile, tmp_path, monkeypatch):
    profile = load_profile(tiny_profile)
    specs = setting_specs(profile, "M", seeds=1, cells=["r40", "r66"])
    assert len(specs) == 2
    runner.run_specs(specs[:1], tmp_path, progress=False)
    calls = []
    real = train.run_cell

    def counting(spec, *args, **kwargs):
        calls.append(spec.run_id)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(runner, "run_cell", counting)
    rows = runner.run_specs(specs + specs, tmp_path, progress=False)  # repeats are run once
    assert calls == [specs[1].run_id]
    assert [r["run_id"] for r in rows] == [s.run_id for s in specs + specs]
    assert len(ResultTable(tmp_path / "runs.csv").rows()) == 2
    assert runner.pending(specs, tmp_path) == []


def test_bad_specs_are_refused_before_any_run(tiny_profile, tmp_path):
    profile = load_profile(tiny_profile)
    good = setting_specs(profile, "S", seeds=1)[0]
    bad = dataclasses.replace(good, model=str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError):
        runner.run_specs([good, bad], tmp_path, progress=False)
    assert not (tmp_path / "runs.csv").exists()  # the good one did not run either


def test_cells_command_runs_a_stage_in_two_worker_processes(tiny_profile, tmp_path, capsys):
    argv = ["cells", "--profile", str(tiny_profile), "--stage", "A", "--seeds", "1", "--cells", "r66"]
    argv += ["--jobs", "2", "--results", str(tmp_path)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    rows = ResultTable(tmp_path / "runs.csv").rows()
    assert sorted(r["model"] for r in rows) == sorted(
        s.policy for s in load_profile(tiny_profile).settings("A")
    )
    assert all(r["status"] == "ok" for r in rows)
    assert "r66" in out and "ok" in out


def _study(tmp_path):
    steps = [s for s in sweep.STUDY_STEPS if s != "testbed"]
    jobs = sweep.study_jobs(load_profile("cpu-tiny"), steps, results_root=tmp_path, executed_dir=tmp_path)
    index = {(j.stage, j.output.stem.split("__")[-1]): i for i, j in enumerate(jobs)}
    return jobs, index


def test_notebooks_sharing_runs_wait_for_the_earlier_stage(tmp_path):
    jobs, index = _study(tmp_path)
    deps = sweep.dependencies(jobs)
    # stage A's middle policy is stage B's `sparse`: the same runs, made once, by stage A
    assert index[("A", "M")] in deps[index[("B", "sparse")]]
    assert index[("race", "A_M")] in deps[index[("race", "B_sparse")]]  # the same pilots
    assert deps[index[("B", "structured")]] == set() and deps[index[("A", "S")]] == set()
    analysis = index[("analysis", "40_final_analysis")]
    assert deps[analysis] == set(range(analysis))
    # stage E reads the analysis's best cells and retrains their runs: it waits for every notebook
    assert deps[index[("test_time", "60_stage_E_test_time")]] == set(range(len(jobs) - 1))
    for i, later in enumerate(jobs):  # every shared run has its earlier notebook as a dependency
        for k, earlier in enumerate(jobs[:i]):
            if {s.run_id for s in earlier.specs} & {s.run_id for s in later.specs}:
                assert k in deps[i], (earlier.output.name, later.output.name)


def test_local_sweep_overlaps_stages_and_keeps_dependencies(tmp_path, monkeypatch):
    import threading
    import time

    jobs, index = _study(tmp_path)
    clock, spans, lock = time.monotonic, {}, threading.Lock()
    stage_b_started = threading.Event()
    last_a = index[("A", "L")]  # two workers: S and M start first, L third

    def fake_execute(job, threads=None, log_output=False):
        start = clock()
        if job.stage == "B":
            stage_b_started.set()
        # with a barrier between stages no stage-B notebook could start while L runs
        overlapped = stage_b_started.wait(timeout=10) if jobs.index(job) == last_a else None
        time.sleep(0.01)
        with lock:
            spans[jobs.index(job)] = (start, clock(), overlapped)
        return job.output

    monkeypatch.setattr(sweep, "execute_job", fake_execute)
    written = sweep.run_study(jobs, n_jobs=2, progress=False)
    assert written == [j.output for j in jobs] and len(spans) == len(jobs)
    for i, before in sweep.dependencies(jobs).items():
        assert all(spans[k][1] <= spans[i][0] for k in before)
    assert spans[last_a][2] is True  # a stage-B notebook started while stage A's last one ran


def test_a_failed_notebook_stops_new_starts_and_is_raised(tmp_path, monkeypatch):
    jobs, index = _study(tmp_path)
    started = []

    def fake_execute(job, threads=None, log_output=False):
        started.append(job)
        if job is jobs[index[("A", "M")]]:
            raise RuntimeError("kernel died")
        return job.output

    monkeypatch.setattr(sweep, "execute_job", fake_execute)
    with pytest.raises(RuntimeError, match="kernel died"):
        sweep.run_study(jobs, n_jobs=1, progress=False)
    assert jobs[index[("B", "sparse")]] not in started and jobs[-1] not in started


def test_the_analysis_notebooks_executed_copy_records_no_time(tmp_path):
    """Rerunning notebook 40 on the same tables must give the same file: no start, end or duration,
    no per-cell execution times, and papermill's injected cell under a fixed id (a run notebook keeps
    its times)."""
    import nbformat

    from paper_repro.common.paths import repo_root
    from paper_repro.drivers.sweep import _portable

    nb = nbformat.v4.new_notebook()
    nb.metadata["papermill"] = {"input_path": str(repo_root() / "notebooks/40_final_analysis.ipynb"),
                                "start_time": "t0", "end_time": "t1", "duration": 1.0}  # fmt: skip
    injected = nbformat.v4.new_code_cell("profile = 'cpu-tiny'")
    injected.metadata.update(tags=["injected-parameters"], execution={"iopub.status.idle": "t"},
                             papermill={"duration": 0.1, "start_time": "t0", "end_time": "t1"})  # fmt: skip
    nb.cells.append(injected)
    for timings in (True, False):
        path = tmp_path / f"{timings}.ipynb"
        nbformat.write(nb, path)
        _portable(path, repo_root() / "notebooks/executed/cpu-tiny/40_final_analysis.ipynb", timings)
        out = nbformat.read(path, as_version=4)
        assert out.cells[0]["id"] == "injected-parameters"
        assert out.metadata["papermill"]["input_path"] == "notebooks/40_final_analysis.ipynb"
        assert ("duration" in out.metadata["papermill"]) == timings
        assert ("execution" in out.cells[0].metadata) == timings
        assert ("start_time" in out.cells[0].metadata["papermill"]) == timings
