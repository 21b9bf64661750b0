"""gpu-paper's sweep before it spends a GPU-hour: unpinned hub ids refused in one line before any
notebook starts, and each notebook job's SLURM resources (its GPUs fitted to what its runs use)
submitted exactly as the dry run prints them. Offline: the planner needs only the shipped configs."""

from __future__ import annotations

import pytest
import yaml

from paper_repro.config import load_profile
from paper_repro.drivers import dryrun, sweep
from paper_repro.run.launch import batch_layout

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def pinned_profile(tmp_path, **changes) -> str:
    """gpu-paper with every hub id pinned to a (made-up) commit, plus ``changes`` (top-level sections
    merged key by key, as ``extends`` does)."""
    base = load_profile("gpu-paper")
    raw: dict = {
        "extends": "gpu-paper",
        "policies": {name: {"id": ref, "revision": COMMIT} for name, ref in base.policies.items()},
        "prm": {"id": base.prm, "revision": COMMIT},
        "data": {role: {"id": ref, "revision": COMMIT} for role, ref in base.data.items()},
        **changes,
    }
    path = tmp_path / "pinned.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def used(spec) -> int:
    """The GPUs a run's launch starts: its layout on its policy size's GPUs."""
    return batch_layout(spec.P, spec.G, spec.K, spec.runtime.gpus, spec.runtime.micro_batch).processes


def test_an_unpinned_sweep_is_refused_in_one_line_before_any_notebook(tmp_path, capsys, monkeypatch):
    from paper_repro.cli import main

    started = []
    monkeypatch.setattr(sweep, "execute_job", lambda job, *args, **kwargs: started.append(job))
    executed, results = tmp_path / "executed", tmp_path / "results"
    argv = ["run", "--profile", "gpu-paper", "--stage", "A", "--executed", str(executed)]
    code = main([*argv, "--results", str(results)])
    out, err = capsys.readouterr()
    assert code == 2 and not started, "no notebook may start with unpinned ids"
    assert not out and err.count("\n") == 1 and err.startswith("paper-repro run: error: refused: "), err[:300]
    profile = load_profile("gpu-paper")
    for ref in [*profile.policies.values(), profile.prm, *profile.data.values()]:
        assert ref in err and f"hf download {ref}" in err  # each unpinned id, with how to pin it
    assert not executed.exists() and not results.exists()  # nothing written: no .running.ipynb


def test_the_pin_check_names_only_what_is_unpinned(tmp_path):
    base = load_profile("gpu-paper")
    data = {role: {"id": ref, "revision": None} for role, ref in base.data.items()}
    profile = load_profile(pinned_profile(tmp_path, data=data))
    jobs = sweep.study_jobs(profile, ["A"])
    with pytest.raises(ValueError, match="the sweep of stage\\(s\\) A names hub ids") as refused:
        sweep.check_pins(jobs)
    assert "dataset openai/gsm8k" in str(refused.value) and "model Qwen" not in str(refused.value)
    sweep.check_pins(sweep.study_jobs(load_profile(pinned_profile(tmp_path)), ["A"]))  # all pinned: runs


@pytest.mark.parametrize("name", ["gpu-paper", "gpu-paper-8gpu"])
def test_a_job_reserves_the_gpus_its_runs_use(name):
    """Each job reserves the most GPUs any of its runs (a RACE notebook's unnamed picks included)
    uses; gpu-paper's 7B RACE job holds 8 for its full-budget runs although its P=2 pilots use 2."""
    profile = load_profile(name)
    for job in sweep.study_jobs(profile, ["A", "B", "D", "race"]):
        runs = list(job.specs)
        if job.unknown_runs:
            runs += sweep.pick_candidates(profile, profile.setting(job.parameters["setting"]))
        assert job.resources.gpus == max(used(s) for s in runs), job.output.name
        size = profile.resources_for(job.specs[0].policy)
        assert (job.resources.cpus_per_task, job.resources.mem_gb) == (size.cpus_per_task, size.mem_gb)
    race_7b = next(
        j for j in sweep.study_jobs(load_profile("gpu-paper"), ["race"]) if j.output.stem.endswith("7B")
    )
    assert race_7b.resources.gpus == 8 and {used(s) for s in race_7b.specs} == {2, 8}


def test_submitted_resources_are_the_dry_runs_and_fit_the_runs(tmp_path, monkeypatch):
    """A profile whose 7B cells all keep K < G of P = 2 prompts: each 7B run uses 2 of the size's 8
    GPUs, so its job reserves 2; what submitit is given (a fake executor records it) is what the dry
    run prints, job for job."""
    import submitit

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    profile = load_profile(pinned_profile(tmp_path, allowed={"P": [2]}, grid={"targets": [0.15, 0.30]}))
    assert profile.resources_for("7B").gpus == 8
    submitted: dict[str, dict] = {}

    class Handle:
        def __init__(self, output):
            self.output = output

        def done(self):
            return True

        def result(self):
            return self.output

    class Executor:
        cluster = "slurm"

        def __init__(self, folder, cluster=None):
            self.params: dict = {}

        def update_parameters(self, **params):
            self.params = params

        def submit(self, fn, job, threads):
            submitted[job.output.stem] = self.params
            return Handle(job.output)

    monkeypatch.setattr(submitit, "AutoExecutor", Executor)
    monkeypatch.setattr("time.sleep", lambda seconds: None)
    jobs = sweep.study_jobs(profile, ["A"], results_root=tmp_path / "results", executed_dir=tmp_path / "nb")
    sweep.run_study(
        jobs, n_jobs=3, executor="slurm", progress=False, slurm_folder=tmp_path, slurm_partition="gpu"
    )

    result = dryrun.dry_run(profile, ["A"], n_jobs=3, partition="gpu")
    assert {job.output.stem: params for job, params in result["jobs"]} == submitted
    assert submitted["10_stage_A_model_size__7B"]["gpus_per_node"] == 2  # reserved: what its runs use
    assert {used(s) for s in jobs[-1].specs} == {2}
    printed = dryrun.format_report(result).splitlines()
    assert any("slurm_array_parallelism 3" in line and "slurm_partition gpu" in line for line in printed)
    for stem, params in submitted.items():
        (line,) = [line.split() for line in printed if line.split()[:1] == [stem]]
        assert line[1:5] == [str(params[c]) for c in dryrun.JOB_COLUMNS], stem
    assert printed[-1].split()[-3:] == ["6", "on", "2"]  # the 7B job: its 6 runs, each on 2 GPUs
