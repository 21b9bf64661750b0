"""The cost model as recalibrated on the registered study: per setting, its setup net of the ladder's
evaluations, wall minutes at the measured job-seconds per wall second, its check on the runs it was
measured on (fitted and leaving each setting out), and the PRM-arm candidates it prices."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from paper_repro.analysis.design.cost_check import cost_check
from paper_repro.config import load_profile
from paper_repro.run import cost_model as cm
from paper_repro.run import design_cost as dc

# (policy, reward system) -> (training s per GFLOP, evaluation ms per problem)
SPEED = {("M", "sparse"): (0.05, 1.0), ("M", "proxy_prm"): (0.1, 2.0), ("S", "sparse"): (0.08, 1.0)}


def _rows(speed=SPEED, start="2026-12-04T20:00:00+00:00", gap=0.0) -> pd.DataFrame:
    """Runs of each setting at C/2 and C, two of each, seconds exactly as ``speed`` says (training
    0.5 s a run plus its rate, 2,100 problems, 0.25 s setup), written one after another ``gap`` s apart."""
    rows, clock = [], pd.Timestamp(start)
    for (policy, system), (train, evaluate) in speed.items():
        for i, budget in enumerate((5e10, 5e10, 1e11, 1e11)):
            seconds_train = 0.5 + train * budget / 1e9
            seconds_eval = evaluate * 2.1
            total = seconds_train + seconds_eval + 0.25
            clock += pd.Timedelta(seconds=total + gap)
            rows.append(
                {
                    "run_id": f"{policy}-{system}-{i}", "setting": f"{system}@{policy}", "policy": policy,
                    "reward_system": system, "reward_class": cm.reward_class(system), "budget_flops": budget,
                    "C_total": budget, "seconds_train": seconds_train, "seconds_eval": seconds_eval,
                    "seconds_total": total, "problems": 2100, "heldout": 900, "created_at": clock.isoformat(),
                    "budget_kind": "full", "seed": i, "role": "grid", "spec": json.dumps({"eval_limit": 900}),
                }
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_each_setting_is_priced_at_its_own_measured_seconds():
    model = cm.CostModel.from_runs(_rows())
    prm = model.rate_for("M", "proxy_prm", "prm")
    assert prm.per_flop == pytest.approx(1e-10) and prm.intercept == pytest.approx(0.5)
    assert prm.per_problem == pytest.approx(0.002) and prm.setup == pytest.approx(0.25)
    assert model.rate_for("M", "sparse", "rule").per_flop == pytest.approx(5e-11)
    # a reward measured on M alone, on S: S's rule-based rate times the reward's ratio to M's rule-based
    carried = model.rate_for("S", "proxy_prm", "prm")
    assert carried.per_flop == pytest.approx(8e-11 * 2) and carried.per_problem == pytest.approx(0.002)
    predicted = cm.predicted_seconds(_rows(), model)
    assert np.allclose(predicted, _rows()["seconds_total"])  # the runs it was measured on, exactly


def test_a_runs_ladder_evaluations_are_not_counted_twice():
    rows = _rows({("M", "sparse"): (0.05, 1.0)})
    rows["seconds_total"] += 0.6  # one native ladder point of 900 problems at 0.67 ms each, inside the total
    curves = pd.DataFrame(
        {
            "run_id": rows["run_id"],
            "status": "ok",
            "final": False,
            "evaluation": "native",
            "seconds_eval": 0.6,
        }
    )
    model = cm.CostModel.from_runs(rows, curves)
    assert model.rate_for("M", "sparse", "rule").setup == pytest.approx(0.25)  # the ladder is not setup
    assert np.allclose(cm.predicted_seconds(rows, model, curves), rows["seconds_total"], rtol=0.05)


def test_wall_minutes_are_job_seconds_at_the_measured_parallelism():
    one_at_a_time = cm.CostModel.from_runs(_rows())  # written back to back: one job-second per wall second
    assert one_at_a_time.parallel == pytest.approx(1.0, rel=0.05)
    job = cm.Job("grid", "M", "rule", 1e11, 1, 0, count=6, reward_system="sparse")
    price = dc.cost(dc.Candidate("c", (0.5,), seeds=6, eval_problems=900), one_at_a_time, [job], overhead=2.5)
    assert price.minutes == pytest.approx(6 * (0.5 + 5 + 2.1 + 0.25) / one_at_a_time.parallel / 60 + 2.5)
    assert (
        cm.CostModel.from_runs(_rows().drop(columns="created_at")).parallel == cm.JOBS
    )  # no times: two jobs


def test_the_check_leaves_each_setting_out():
    check = cost_check(_rows(), None, overhead=0.0).set_index(["setting", "role"])
    assert check["fitted_error"].abs().max() < 1e-9  # exact seconds, fitted exactly
    # without its runs M's proxy_prm is priced as M's rule-based runs: half its training and evaluation
    assert check.loc[("proxy_prm@M", "grid"), "left_out_error"] < -0.3
    # S's sparse is priced from every other run pooled (no other run of S): off, and said so
    assert check.loc[("sparse@S", "grid"), "left_out_error"] != pytest.approx(0.0, abs=0.01)


@pytest.mark.slow  # the candidates' simulation: about four minutes
def test_prm_arm_candidates_plan_prm_settings_to_each_policys_rho_cap():
    from paper_repro.analysis.design.candidates import layout_of

    profile = load_profile("cpu-tiny")
    base = dc.Candidate.from_profile(profile)
    more = dc.Candidate.from_profile(profile, more_settings=(("S", "proxy_prm"), ("L", "prm")))
    names = [s.name for s in dc.distinct_settings(profile)]
    layout = layout_of(more, profile, names)
    caps = {name: max(r for _, r in cells) for name, cells in layout.cells.items()}
    # the planner's caps: S's PRM-charged rounds reach rho 0.644, L's 0.806 (M's 0.727)
    assert caps["proxy_prm@S"] <= 0.644 + 1e-3 < caps["prm@L"] <= 0.806 + 1e-3
    assert "r78" in dict(layout.cells["prm@L"]) and "r78" not in dict(layout.cells["proxy_prm@S"])
    # the new settings run their grid alone: no pilots or fresh seeds
    added = [j for j in dc.jobs(more, profile) if j not in dc.jobs(base, profile)]
    assert added and {j.role for j in added} == {"grid"}
    assert {(j.policy, j.reward_system) for j in added} == {("S", "proxy_prm"), ("L", "prm")}


def test_a_candidates_errors_are_weighted_by_its_job_seconds_overall_and_per_run_kind():
    """Two settings checked at known errors (grid +10% / -20%, pilot +30%): a candidate's error is each
    part's, weighted by the seconds it spends there; a kind it does not run has none."""
    from paper_repro.analysis.design.cost_check import candidate_errors

    model = cm.CostModel.from_runs(_rows())
    check = pd.DataFrame(
        {
            "setting": ["M", "M", "P"],
            "role": ["grid", "pilot", "grid"],
            "fitted_error": [0.0, 0.0, 0.0],
            "left_out_error": [0.1, 0.3, -0.2],
        }
    )
    names = {("M", "sparse"): "M", ("M", "proxy_prm"): "P"}
    grid = cm.Job("grid", "M", "rule", 1e11, 1, 0, 1.0, "sparse")
    prm = cm.Job("grid", "M", "prm", 1e11, 1, 0, 1.0, "proxy_prm")
    pilot = cm.Job("pilot", "M", "rule", 1e11, 1, 0, 2.0, "sparse")
    seconds = {j: j.count * model.seconds(j, 300, 300) for j in (grid, prm, pilot)}
    got = candidate_errors([grid, prm, pilot], model, check, names, 300)
    grid_error = (0.1 * seconds[grid] - 0.2 * seconds[prm]) / (seconds[grid] + seconds[prm])
    assert got["minutes_grid_error_left_out"] == pytest.approx(grid_error)
    assert got["minutes_pilot_error_left_out"] == pytest.approx(0.3)
    assert np.isnan(got["minutes_fresh_error_left_out"])
    total = (0.1 * seconds[grid] - 0.2 * seconds[prm] + 0.3 * seconds[pilot]) / sum(seconds.values())
    assert got["minutes_error_left_out"] == pytest.approx(total) and got["minutes_error_fitted"] == 0.0
