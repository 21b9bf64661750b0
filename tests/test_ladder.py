"""The budget ladder: a run's point at B is a run of budget B, row for row; curves.csv is append-only
and a run killed between points resumes without a second row for any point."""

from __future__ import annotations

import dataclasses
import math

import pytest

from paper_repro.common.results import CURVE_COLUMNS, METRICS, ResultTable, curve_id
from paper_repro.config import Curves, load_profile
from paper_repro.run import ladder, train
from paper_repro.run.allocation import planner_for
from paper_repro.run.spec import setting_specs, spec_for

# what a point's row and the run of that budget both record, and must agree on exactly
SAME = ("rho", "C_search", "C_learning", "C_reward", "C_total", "rho_executed", "C_total_executed", "rounds",
        "steps", *METRICS)  # fmt: skip


def _laddered(profile, rounds: float, target: float, stop: str, points=((0.25, "native"), (0.5, "all"))):
    """A run of about ``rounds`` rounds of the M cell nearest ``target`` with ``points`` on its ladder
    (the unit is the run's own budget, so 0.25 is a quarter of it)."""
    setting = next(s for s in profile.settings("A") if s.name == "M")
    planner = planner_for(profile, setting)
    one_round = planner.cell(target, 1e30).round_cost.C_total
    cell = planner.cell(target, rounds * one_round)
    spec = spec_for(profile, setting, cell, seed=0)
    spec = dataclasses.replace(spec, train=dataclasses.replace(spec.train, budget_stop=stop))
    return dataclasses.replace(spec, ladder=tuple(points), ladder_unit=spec.budget_flops)


def _as_run_of(spec, multiple: float):
    """The same recipe and seed as a plain run of budget ``multiple`` x the ladder's unit."""
    return dataclasses.replace(spec, budget_flops=multiple * spec.ladder_unit, ladder=(), ladder_unit=None)


def _curves(root) -> dict[str, dict]:
    return {r["curve_id"]: r for r in ResultTable(root / "curves.csv", CURVE_COLUMNS, key="curve_id").rows()}


def _equal(a: dict, b: dict) -> list[str]:
    """The columns of SAME where two rows differ (NaN equals NaN)."""
    out = []
    for k in SAME:
        x, y = float(a[k]), float(b[k])
        if not (x == y or (math.isnan(x) and math.isnan(y))):
            out.append(f"{k}: {x!r} != {y!r}")
    return out


# the study's stop (ceiling) in `make test`; the quick study's (dearest) and gpu-paper's (step) in `make test-slow`
@pytest.mark.parametrize(
    ("stop", "target"),
    [
        ("ceiling", 0.70),
        pytest.param("dearest", 0.85, marks=pytest.mark.slow),
        pytest.param("step", 0.85, marks=pytest.mark.slow),
    ],
)
def test_a_point_of_a_run_is_the_run_of_that_budget_row_for_row(tiny_m_profile, tmp_path, stop, target):
    spec = _laddered(tiny_m_profile, rounds=8, target=target, stop=stop)
    row = train.run_cell(spec, results_root=tmp_path / "ladder", threads=1, raise_errors=True)
    assert row["status"] == "ok"
    curves = _curves(tmp_path / "ladder")
    assert set(curves) == {curve_id(spec.run_id, m) for m in (0.25, 0.5, 1.0)}
    final = curves[curve_id(spec.run_id, 1.0)]
    assert final["final"] == "True" and final["evaluation"] == "all" and not _equal(final, row)
    for multiple, evaluation in spec.ladder:
        alone = train.run_cell(_as_run_of(spec, multiple), results_root=tmp_path / "alone", threads=1,
                               raise_errors=True)  # fmt: skip
        point = curves[curve_id(spec.run_id, multiple)]
        assert point["status"] == "ok" and point["evaluation"] == evaluation and point["final"] == "False"
        if evaluation == "native":  # the other sets are not evaluated there
            assert all(math.isnan(float(point[m])) for m in METRICS if m != "native_reward")
            alone = {**alone, **{m: float("nan") for m in METRICS if m != "native_reward"}}
        assert not _equal(point, alone), f"{stop}, point {multiple}: {_equal(point, alone)}"
        assert 0 < int(point["rounds"]) <= int(row["rounds"])
        assert float(point["C_total"]) <= multiple * spec.ladder_unit or stop == "dearest"
    # the points are the run's own curve: spent FLOPs grow along it
    spent = [float(curves[curve_id(spec.run_id, m)]["C_total"]) for m in (0.25, 0.5, 1.0)]
    assert spent == sorted(spent) and spent[0] < spent[-1]


def test_a_point_below_one_round_is_infeasible_with_its_reason(tiny_m_profile, tmp_path):
    spec = _laddered(
        tiny_m_profile, rounds=3, target=0.70, stop="ceiling", points=((0.01, "native"), (0.5, "native"))
    )
    train.run_cell(spec, results_root=tmp_path, threads=1, raise_errors=True)
    low = _curves(tmp_path)[curve_id(spec.run_id, 0.01)]
    assert low["status"] == "infeasible" and "one round" in low["error"]
    assert all(math.isnan(float(low[m])) for m in METRICS)


def test_a_run_killed_between_points_resumes_without_a_second_row(tiny_m_profile, tmp_path, monkeypatch):
    spec = _laddered(tiny_m_profile, rounds=6, target=0.70, stop="ceiling")
    calls: list[float] = []
    real = ladder.evaluate_point

    def dies_after_the_first_point(spec_, parts, policy, evaluation):
        calls.append(evaluation)
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed at the second point, after the first was recorded
        return real(spec_, parts, policy, evaluation)

    monkeypatch.setattr(ladder, "evaluate_point", dies_after_the_first_point)
    with pytest.raises(KeyboardInterrupt):
        train.run_cell(spec, results_root=tmp_path, threads=1, raise_errors=True)
    assert set(_curves(tmp_path)) == {curve_id(spec.run_id, 0.25)}
    assert not ResultTable(tmp_path / "runs.csv").rows()
    first = _curves(tmp_path)[curve_id(spec.run_id, 0.25)]

    monkeypatch.setattr(ladder, "evaluate_point", real)
    evaluated: list[str] = []
    monkeypatch.setattr(ladder, "evaluate_point", lambda *a: evaluated.append(a[3]) or real(*a))
    row = train.run_cell(spec, results_root=tmp_path, threads=1, raise_errors=True)
    assert row["status"] == "ok" and evaluated == ["all"]  # only the missing point is evaluated again
    lines = (tmp_path / "curves.csv").read_text().splitlines()
    assert len(lines) == 1 + 3  # the header and one row per point
    assert _curves(tmp_path)[curve_id(spec.run_id, 0.25)] == first
    # a third run of the spec finds its row and adds nothing
    assert train.run_cell(spec, results_root=tmp_path, threads=1)["skipped"]
    assert (tmp_path / "curves.csv").read_text().splitlines() == lines


def test_the_profile_ladder_reaches_each_runs_budget_and_stage_a_runs_on_to_2c():
    profile = load_profile("cpu-tiny")
    C = profile.budget_flops
    a = setting_specs(profile, "M", seeds=1, cells=["r50"])[0]
    b = setting_specs(profile, "dense", seeds=1, cells=["r50"])[0]
    pilot = setting_specs(profile, "dense", seeds=[100], budget_kind="pilot", cells=["r50"])[0]
    assert a.budget_flops == 2 * C and [p for p, _ in a.ladder] == [0.125, 0.25, 0.5, 1]
    assert dict(a.ladder)[1.0] == "all" and dict(a.ladder)[0.5] == "native"
    assert b.budget_flops == C and [p for p, _ in b.ladder] == [0.125, 0.25, 0.5]
    # the first pilot fraction's pilots carry the ladder below their budget (RACE+), the others none
    assert pilot.budget_flops == profile.pilot_budget_flops < C and [p for p, _ in pilot.ladder] == [
        0.125,
        0.25,
    ]
    from dataclasses import replace

    two = replace(
        profile, pilot_fractions=(0.5, 0.25)
    )  # the profile runs one pilot budget; a second one's pilots
    other = setting_specs(two, "dense", seeds=[100], budget_kind="pilot", cells=["r50"], fraction=0.25)[0]
    assert other.ladder == ()
    # stage B's sparse setting is stage A's middle policy: one run, to 2C
    assert setting_specs(profile, "sparse", seeds=1, cells=["r50"])[0].run_id == a.run_id
    # the recipe is the one planned at C
    c = setting_specs(profile, "M", seeds=1, cells=["r50"], extend=False)[0]
    assert (a.P, a.G, a.K, a.mu) == (c.P, c.G, c.K, c.mu) and c.budget_flops == C


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"points": [0.5, 0.25, 1]}, "increasing"),
        ({"points": [0.25, 0.5]}, "must hold 1"),
        ({"points": [0.5, 1], "evaluate_all_at": [2]}, "not points"),
        ({"points": [0.5, 1, 2], "stage_budgets": {"A": 4}}, "point of the ladder"),
        ({"points": [0.5, 1], "stage_budgets": {"Z": 1}}, "unknown stage"),
        ({"stage_budgets": {"A": 2}}, "needs a ladder"),
    ],
)
def test_a_bad_ladder_is_refused_with_what_is_wrong(raw, message):
    from paper_repro.config.loading import _curves

    with pytest.raises(ValueError, match=message):
        _curves(raw)
    assert Curves().ladder(1.0) == ()


def test_a_run_recorded_without_its_curve_is_run_again_for_it_and_its_row_stays_one(tiny_m_profile, tmp_path):
    """The ladder is not the run's identity: a run whose row predates its ladder (or was killed after
    its row) is pending until its points are measured, and its row is not written twice."""
    from paper_repro.run import runner

    spec = _laddered(tiny_m_profile, rounds=4, target=0.70, stop="ceiling")
    bare = dataclasses.replace(spec, ladder=(), ladder_unit=None)
    assert bare.run_id == spec.run_id
    first = train.run_cell(bare, results_root=tmp_path, threads=1, raise_errors=True)
    assert not (tmp_path / "curves.csv").exists() and runner.pending([bare], tmp_path) == []
    assert runner.pending([spec], tmp_path) == [spec]
    runner.run_specs([spec], results_root=tmp_path, threads=1, progress=False)
    assert runner.pending([spec], tmp_path) == []
    (row,) = ResultTable(tmp_path / "runs.csv").rows()
    assert row["created_at"] == first["created_at"]
    final = _curves(tmp_path)[curve_id(spec.run_id, 1.0)]
    assert not _equal(final, first)


def test_a_run_past_c_counts_at_c_by_its_point_there():
    """The analysis reads a stage's run that went on to 4C at C through its point at C; a run past C
    without that point is left out with a warning that names it, and a C run of the same experiment recorded earlier gives way."""
    import pandas as pd

    from paper_repro.analysis.tables.frontiers import at_full_budget

    C = 1e11
    base = {"budget_kind": "full", "model": "M", "reward_system": "sparse", "P": 8, "G": 8, "K": 8, "mu": 1}
    runs = pd.DataFrame([
        {**base, "run_id": "long", "seed": 0, "budget_flops": 4 * C, "native_reward": 0.9, "rounds": 40,
         "created_at": "2026-12-02T02"},
        {**base, "run_id": "short", "seed": 0, "budget_flops": C, "native_reward": 0.5, "rounds": 10,
         "created_at": "2026-12-02T01"},
        {**base, "run_id": "lost", "seed": 1, "budget_flops": 4 * C, "native_reward": 0.8, "rounds": 41,
         "created_at": "2026-12-02T03"},
        {**base, "run_id": "other", "seed": 2, "budget_flops": C, "native_reward": 0.4, "rounds": 9,
         "created_at": "2026-12-02T01"},
    ])  # fmt: skip
    point = {"run_id": "long", "point_flops": C, "status": "ok", "native_reward": 0.6, "rounds": 11}
    curves = pd.DataFrame([point, {**point, "point_flops": 2 * C, "native_reward": 0.7, "rounds": 20}])
    for column in ("rho", "C_search", "C_learning", "C_reward", "C_total", "rho_executed", "C_total_executed",
                   "rho_time", "steps", "gsm_pass1", "math_pass1", "judge_score", "seconds_train",
                   "seconds_eval"):  # fmt: skip
        runs[column], curves[column] = 0.0, 0.0
    with pytest.warns(UserWarning, match=r"1 full-budget run\(s\) past C have no point at C .*: lost"):
        at_c = at_full_budget(runs, curves, C).set_index("run_id")
    assert sorted(at_c.index) == ["long", "other"]  # "lost" has no point at C; "short" gives way to "long"
    assert at_c.loc["long", "budget_flops"] == C
    assert (at_c.loc["long", "native_reward"], at_c.loc["long", "rounds"]) == (0.6, 11)
    assert at_c.loc["other", "native_reward"] == 0.4
