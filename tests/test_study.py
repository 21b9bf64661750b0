"""`paper-repro run`: the study notebooks executed with papermill, resumed after a SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from paper_repro.analysis import analyse
from paper_repro.common.results import ResultTable
from paper_repro.config import QUICK_CELLS, load_profile
from paper_repro.drivers import study, sweep
from tests import fixtures


def _cmd(profile, results, executed, *extra):
    return [sys.executable, "-m", "paper_repro.cli", "run", "--profile", str(profile), "--results", str(results),
            "--executed", str(executed), *extra]  # fmt: skip


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory):
    """Stage A (quick) of a tiny profile started, SIGKILLed after two runs, and run again to the end:
    once per session (once in all under pytest-xdist, :func:`tests.fixtures.shared`), as its tests
    change none of its runs. Returns (the profile's YAML path, the jobs, the run ids they make, the
    results and executed-notebook folders, the command's arguments)."""
    return fixtures.shared(tmp_path_factory, "killed-study", _kill_and_resume)


def _kill_and_resume(root):
    """The study of :func:`killed_and_resumed` in ``root``, on a tiny profile of its own there (a
    worker's ``tiny_profile`` names that worker's checkpoints, and so other run ids)."""
    policy = fixtures.save_random_model(root / "policy")
    prm = fixtures.save_random_model(root / "prm", head="prm")
    profile = fixtures.write_tiny_profile(root, policy, prm)
    results, executed = root / "results", root / "executed"
    args = ["--stage", "A", "--quick"]
    jobs = sweep.study_jobs(
        load_profile(profile), ["A"], quick=True, results_root=results, executed_dir=executed
    )
    expected = {s.run_id for j in jobs for s in j.specs}
    sizes = [s.name for s in load_profile(profile).settings("A")]
    assert [j.parameters["setting"] for j in jobs] == sizes  # one notebook per policy size
    assert {(s.setting, s.cell, s.seed) for j in jobs for s in j.specs} == {
        (size, cell, 0) for size in sizes for cell in QUICK_CELLS
    }  # quick: the quick cells, one seed
    assert all(j.results_root == str(results) for j in jobs)
    proc = subprocess.Popen(_cmd(profile, results, executed, *args), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    table = ResultTable(results / "runs.csv")
    deadline = time.time() + 240
    while time.time() < deadline and (not (results / "runs.csv").exists() or len(table.rows()) < 2):
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its notebook kernels
    proc.wait()
    killed_at = len(table.rows())
    assert 2 <= killed_at < len(expected), "the kill came too late to test resuming"
    time.sleep(1)
    done = subprocess.run(_cmd(profile, results, executed, *args), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return profile, jobs, expected, results, executed, args


@pytest.mark.slow  # a real study killed and resumed in subprocesses: about a minute
def test_a_study_killed_mid_stage_and_rerun_finishes_without_duplicates(killed_and_resumed):
    profile, jobs, expected, results, executed, args = killed_and_resumed
    table = ResultTable(results / "runs.csv")
    ids = [r["run_id"] for r in table.rows()]
    assert len(ids) == len(set(ids)) == len(expected) and set(ids) == expected
    for job in jobs:
        assert job.output.exists()
        assert not sweep.running_copy(job.output).exists()
    assert all(sweep.job_done(j) for j in jobs)
    # a third run has nothing left to do
    again = subprocess.run(_cmd(profile, results, executed, *args), capture_output=True, text=True)
    assert again.returncode == 0 and "executed" not in again.stdout
    assert len(table.rows()) == len(expected)


def test_unknown_stage_is_refused(tiny_profile):
    with pytest.raises(ValueError, match="unknown stage"):
        sweep.study_jobs(load_profile(tiny_profile), ["Z"])


@pytest.mark.slow  # a real study killed and resumed in subprocesses: about a minute
def test_the_analysis_notebook_runs_through_submitit_on_partial_results(killed_and_resumed, tmp_path):
    """The slurm executor, through submitit's local backend; stage A alone is enough to analyse."""
    profile, _, _, results, _, _ = killed_and_resumed
    with pytest.raises(ValueError, match="quick=True"):  # quick runs are not the full grid
        analyse(study.prepare(str(profile)), results, tmp_path / "figures")
    jobs = sweep.study_jobs(
        load_profile(profile), ["analysis"], quick=True, results_root=results, executed_dir=tmp_path
    )
    (path,) = sweep.run_study(jobs, executor="slurm", cluster="local", progress=False,
                              slurm_folder=tmp_path / "submitit")  # fmt: skip
    assert path.exists()
    for table in ("frontiers", "optima", "claims"):
        assert (results / f"{table}.csv").exists()


def test_every_job_of_a_study_writes_to_the_same_results(tiny_profile, tmp_path):
    jobs = sweep.study_jobs(
        load_profile(tiny_profile), ["all"], quick=True, results_root=tmp_path, executed_dir=tmp_path
    )
    assert [j.stage for j in jobs].count("race") == len(load_profile(tiny_profile).all_settings())
    assert [j.stage for j in jobs][-2:] == ["analysis", "test_time"]  # stage E reads the analysis' optima
    assert {j.results_root for j in jobs} == {str(tmp_path)}
    assert all(j.parameters["results_root"] == str(tmp_path) for j in jobs)


def test_quick_mode_is_one_seed_a_quarter_budget_and_a_short_evaluation():
    """A quick run evaluates on the first QUICK_EVAL_LIMIT problems of the full study's sets, with
    the same generation length; the full study's profile is left as it was."""
    from paper_repro.config import QUICK_EVAL_LIMIT
    from paper_repro.run.spec import setting_specs
    from paper_repro.tasks import load_examples

    full = load_profile("cpu-tiny")
    quick = full.quick_variant()
    assert full == load_profile("cpu-tiny")
    assert quick.seeds == 1 and quick.budget_flops == full.budget_flops / 4
    full_spec, quick_spec = (setting_specs(p, "M", seeds=1, cells=["r66"])[0] for p in (full, quick))
    for role in ("gsm", "math"):
        ref = dict(full_spec.data)[role]
        assert dict(quick_spec.data)[role] == ref
        everything = load_examples(ref, limit=full_spec.eval_limit)
        short = load_examples(ref, limit=quick_spec.eval_limit)
        assert len(short) == QUICK_EVAL_LIMIT < len(everything) and short == everything[: len(short)]
    assert quick_spec.eval_max_new_tokens == full_spec.eval_max_new_tokens


def _late_riser(multiple: float, cell: str) -> float:
    """A pilot cell's native reward at ``multiple`` x C: every cell saturates early (at C/32) at its own
    level, r40 highest by C/2; r78 rises late and steeply (half its gain at 0.8 C) and is best at C."""
    if cell == "r78":
        return BASE_REWARD + 0.6 / (1 + (0.8 / multiple) ** 2)
    top = {"r15": 0.45, "r40": 0.60, "r50": 0.55}.get(cell, 0.40)
    return BASE_REWARD + (top - BASE_REWARD) / (1 + (1 / 32 / multiple) ** 2)


BASE_REWARD = 0.3


def _record_pilots(profile, specs, root, reward, curves=True) -> None:
    """Rows for ``specs`` (pilots) in ``root``'s runs.csv and, with ``curves``, their curves' points
    (their ladder and their own budget) in curves.csv: ``reward(multiple, cell)`` plus a seed offset."""
    from paper_repro.common.results import RUN_COLUMNS, curve_id
    from paper_repro.run.ladder import curves_table, points_of

    runs, points = ResultTable(root / "runs.csv", RUN_COLUMNS), curves_table(root)
    for s in specs:
        own = s.budget_flops / profile.budget_flops
        offset = 0.002 * (s.seed % 3 - 1)
        if curves:
            for m in [*(p.multiple for p in points_of(s)), own]:
                points.append({"curve_id": curve_id(s.run_id, m), "run_id": s.run_id, "point": m,
                               "point_flops": m * profile.budget_flops, "status": "ok",
                               "native_reward": reward(m, s.cell) + offset})  # fmt: skip
        runs.append({"run_id": s.run_id, "profile": s.profile, "status": "ok", "cell": s.cell, "seed": s.seed, "rho": 0.5,
                     "C_reward": 0.0, "C_total": s.budget_flops, "budget_kind": "pilot",
                     "budget_flops": s.budget_flops, "base_native_reward": BASE_REWARD,
                     "native_reward": reward(own, s.cell) + offset})  # fmt: skip


@pytest.fixture(scope="module")
def dense_pilots():
    """cpu-tiny and its dense setting's pilots (planned once: planning is what takes time here), on the
    estimate's budget stop (no tokenizer to price a costliest round), with a second pilot budget (C/4)
    beside the profile's C/2, whose pilots must play no part in the picks."""
    from dataclasses import replace

    from paper_repro.run.spec import pilot_specs

    profile = load_profile("cpu-tiny")
    profile = replace(
        profile, train=replace(profile.train, budget_stop="dearest"), pilot_fractions=(0.5, 0.25)
    )
    return profile, pilot_specs(profile, "dense")


def test_race_names_both_picks_once_every_first_budget_pilot_and_its_curve_is_recorded(
    tmp_path, dense_pilots, monkeypatch
):
    """Before the pilots, RACE's notebook counts its picks' runs as unknown (two cells per fresh seed);
    a pilot recorded without its curve's points still leaves them unknown (it runs again); once every
    pilot of the first budget has its row and its points, RACE picks the best mean at the pilot budget
    (r40) and RACE+ the best prediction at C (r78, which rises late), each on the fresh seeds, none of
    the grid's or the pilots'; the second budget's pilots play no part."""
    profile, pilots = dense_pilots
    monkeypatch.setattr(study, "pilot_specs", lambda *args, **kwargs: pilots)
    specs, unknown = study.race_specs(profile, "dense", tmp_path)
    assert unknown == 2 * len(profile.fresh_seeds) and not any(
        s.budget_kind == "full" and s.cell != "default" for s in specs
    )
    first = [s for s in pilots if s.budget_flops == profile.pilot_budget_flops]
    assert {s.cell for s in first} >= {"r15", "r40", "r50", "r78"} and len(first) < len(pilots)
    _record_pilots(profile, first[:-1], tmp_path, _late_riser)
    assert study.race_specs(profile, "dense", tmp_path)[1] == 2 * len(profile.fresh_seeds)  # one missing
    _record_pilots(profile, first[-1:], tmp_path, _late_riser, curves=False)
    assert study.race_specs(profile, "dense", tmp_path)[1] == 2 * len(
        profile.fresh_seeds
    )  # its curve missing
    _record_pilots(profile, first[-1:], tmp_path, _late_riser)  # its points (its row is not written twice)
    specs, unknown = study.race_specs(profile, "dense", tmp_path)
    picked = [s for s in specs if s.budget_kind == "full" and s.cell != "default"]
    assert unknown == 0 and {s.cell for s in picked} == {"r40", "r78"}
    assert len(picked) == 2 * len(profile.fresh_seeds) and len({s.run_id for s in specs}) == len(specs)
    assert {s.seed for s in picked} == set(profile.fresh_seeds)
    assert not {s.seed for s in specs} & set(range(profile.seeds))
    assert specs[: len(pilots)] == pilots


def test_race_runs_one_cell_once_when_both_picks_name_it(tmp_path, dense_pilots, monkeypatch):
    """Pilots whose best cell at C/2 also rises most to C: one pick, its fresh runs once."""
    profile, pilots = dense_pilots
    monkeypatch.setattr(study, "pilot_specs", lambda *args, **kwargs: pilots)
    first = [s for s in pilots if s.budget_flops == profile.pilot_budget_flops]
    _record_pilots(
        profile, first, tmp_path, lambda m, cell: _late_riser(m, "r78" if cell == "r50" else "r15")
    )
    specs, unknown = study.race_specs(profile, "dense", tmp_path)
    picked = [s for s in specs if s.budget_kind == "full" and s.cell != "default"]
    assert unknown == 0 and {s.cell for s in picked} == {"r50"} and len(picked) == len(profile.fresh_seeds)


def test_every_run_of_the_study_surely_buys_a_round():
    """The preflight check refuses a run whose budget cannot surely buy one costliest round (the
    ``ceiling`` stop); the study never asks for one: the planner leaves such a cell out of that
    budget's grid (:func:`paper_repro.run.allocation.plan_setting`), and the study runs the planner's
    grid, the pilots' included."""
    from paper_repro.run.allocation import plan_setting
    from paper_repro.run.preflight import round_ceiling

    profile = load_profile("cpu-tiny")
    specs = [s for job in sweep.study_jobs(profile) for s in job.specs]
    assert specs and all(round_ceiling(s) <= s.budget_flops for s in specs)
    for s in profile.all_settings():
        planned = {c.label for c in plan_setting(profile, s).cells}
        assert planned == {
            x.cell for x in specs if x.setting == s.name and x.budget_kind == "full" and x.seed == 0
        }
        for budget in profile.pilot_budgets().values():
            planned = {c.label for c in plan_setting(profile, s, budget).cells}
            assert planned == {
                x.cell
                for x in specs
                if x.setting == s.name and x.budget_kind == "pilot" and x.budget_flops == budget
            }
