"""Budgeted GRPO runs end to end on a tiny local checkpoint: budget, rows, resume, failures, refusals."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from paper_repro.common.results import ResultTable
from paper_repro.config import load_profile
from paper_repro.run import train
from paper_repro.run.allocation import planner_for
from paper_repro.run.preflight import round_ceiling
from paper_repro.run.spec import setting_specs, spec_for


def _spec(profile, rounds: float, stage="A", name="M", target=0.70, seed=0):
    setting = next(s for s in profile.settings(stage) if s.name == name)
    planner = planner_for(profile, setting)
    one_round = planner.cell(target, 1e30).round_cost.C_total
    cell = planner.cell(target, rounds * one_round)
    return spec_for(profile, setting, cell, seed=seed)


def test_a_run_spends_its_budget_within_one_round_and_writes_one_row(tiny_m_profile, tmp_path):
    spec = _spec(tiny_m_profile, rounds=3.5)
    row = train.run_cell(spec, results_root=tmp_path, threads=1, raise_errors=True)
    assert row["status"] == "ok", row.get("error")
    steps = [
        json.loads(line) for line in (tmp_path / "steps" / f"{spec.run_id}.jsonl").read_text().splitlines()
    ]
    per_step = [s["flops"]["useful"]["total"] for s in steps]
    rounds = [sum(per_step[i : i + spec.mu]) for i in range(0, len(per_step), spec.mu)]  # mu steps a round
    assert row["C_total"] <= spec.budget_flops
    # the stop leaves less than one round unspent: the dearest round so far, or (the ceiling stop) the
    # costliest round the run could meet
    one_round = round_ceiling(spec) if spec.train.budget_stop == "ceiling" else max(rounds)
    assert spec.budget_flops - row["C_total"] < one_round
    assert row["rounds"] == len(rounds) >= 2 and row["steps"] == len(steps) == row["rounds"] * spec.mu
    assert row["C_total"] == pytest.approx(sum(s["flops"]["useful"]["total"] for s in steps))
    assert abs(row["rho"] - spec.target_rho) <= 0.05
    for metric in ("native_reward", "gsm_pass1", "math_pass1", "judge_score", "base_gsm_pass1"):
        assert 0.0 <= row[metric] <= 1.0
    table = ResultTable(tmp_path / "runs.csv")
    (stored,) = table.rows()
    assert stored["run_id"] == spec.run_id and stored["git_sha"] and stored["versions"].startswith("{")
    assert json.loads(stored["spec"])["K"] == spec.K

    again = train.run_cell(spec, results_root=tmp_path, threads=1)
    assert again["skipped"] is True
    assert len(table.rows()) == 1


def test_down_sampled_cell_realises_a_low_rho(tiny_m_profile, tmp_path):
    spec = _spec(tiny_m_profile, rounds=2.5, target=0.30)
    assert spec.K < spec.G
    row = train.run_cell(spec, results_root=tmp_path, threads=1, raise_errors=True)
    assert abs(row["rho"] - 0.30) <= 0.05
    assert row["C_total"] <= spec.budget_flops


def test_a_failure_is_a_failed_row_with_nan_metrics_then_a_retry(tiny_m_profile, tmp_path, monkeypatch):
    spec = _spec(tiny_m_profile, rounds=1.5)

    def boom(*args, **kwargs):
        raise RuntimeError("the trainer fell over")

    monkeypatch.setattr(train, "build_trainer", boom)
    row = train.run_cell(spec, results_root=tmp_path, threads=1)
    assert row["status"] == "failed" and "the trainer fell over" in row["error"]
    assert all(math.isnan(row[m]) for m in ("native_reward", "gsm_pass1", "math_pass1", "judge_score"))
    frame = ResultTable(tmp_path / "runs.csv").frame()
    assert frame["status"].tolist() == ["failed"] and math.isnan(frame["gsm_pass1"][0])
    monkeypatch.undo()
    row = train.run_cell(spec, results_root=tmp_path, threads=1)
    assert row["status"] == "ok"
    assert ResultTable(tmp_path / "runs.csv").frame()["status"].tolist() == ["failed", "ok"]


def test_the_same_experiment_asked_by_two_stages_is_one_run(tiny_m_profile):
    a = _spec(tiny_m_profile, rounds=4, stage="A", name="M")
    b = _spec(tiny_m_profile, rounds=4, stage="B", name="sparse")
    assert (a.stage, b.stage) == ("A", "B")
    assert a.run_id == b.run_id
    assert _spec(tiny_m_profile, rounds=4, seed=1).run_id != a.run_id
    assert dataclasses.replace(a, budget_flops=a.budget_flops * 2).run_id != a.run_id
    assert dataclasses.replace(a, cell="default", target_rho=float("nan")).run_id == a.run_id
    assert dataclasses.replace(a, mu=a.mu + 1).run_id != a.run_id


def test_setting_specs_cover_every_feasible_cell_and_seed():
    from paper_repro.run.allocation import plan_setting

    profile = load_profile("cpu-tiny")
    for s in profile.all_settings():
        grid = [c.label for c in plan_setting(profile, s).cells]
        specs = setting_specs(profile, s, seeds=2)
        assert [(x.cell, x.seed) for x in specs] == [(c, seed) for c in grid for seed in (0, 1)]
        assert len({x.run_id for x in specs}) == len(specs)
        assert all(x.setting == s.name and x.stage == s.stage for x in specs)
    d = setting_specs(profile, "prm", seeds=1, budget_kind="pilot")
    assert all(s.budget_flops == profile.pilot_budget_flops and s.prm for s in d)
    assert "r90" not in {s.cell for s in d}  # the PRM's cost caps rho
    assert [s.seed for s in setting_specs(profile, "M", seeds=[4, 7], cells=["r40"])] == [4, 7]
    with pytest.raises(ValueError, match=r"cells \['r90'\] are not in the grid of setting prm"):
        setting_specs(profile, "prm", cells=["r90"])


def test_bad_input_is_refused_before_any_compute(tiny_m_profile, tmp_path):
    spec = _spec(tiny_m_profile, rounds=2)
    missing = dataclasses.replace(spec, model=str(tmp_path / "no-such-model"))
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        train.run_cell(missing, results_root=tmp_path)
    with pytest.raises(ValueError, match="unknown arith split 'nope'"):
        train.run_cell(dataclasses.replace(spec, data=(*spec.data[:-1], ("train", "arith/nope"))), tmp_path)
    with pytest.raises(ValueError, match="unknown dataset 'org/nothing'; known"):
        train.run_cell(dataclasses.replace(spec, data=(*spec.data[:-1], ("train", "org/nothing"))), tmp_path)
    with pytest.raises(ValueError, match="one round needs"):
        train.run_cell(dataclasses.replace(spec, budget_flops=spec.first_round_flops / 3), tmp_path)
    with pytest.raises(ValueError, match="cannot exceed"):
        dataclasses.replace(spec, K=spec.G + 1)
    with pytest.raises(ValueError, match="unknown reward system"):
        dataclasses.replace(spec, reward_system="vibes")
    with pytest.raises(ValueError, match="positive"):
        dataclasses.replace(spec, budget_flops=-1.0)
    assert not (tmp_path / "runs.csv").exists()


@pytest.mark.parametrize(
    ("setting", "cell"), [("prm", "r40"), ("proxy_prm", "r66"), ("M", "r90"), ("S", "r15")]
)
def test_the_study_prices_a_round_as_the_ledgers_trainer_does(setting, cell, tmp_path):
    """The planner and the ledger's trainer call one price of a round's ceiling
    (:func:`paper_repro.accounting.ceiling.round_ceiling_cost`, tested on hand-worked cases in test_ceiling.py),
    each with the worst case it measures itself: the planner from the run's tokenizers and data
    (which decides which cells a budget's grid keeps, and the ledger's ceiling), the trainer from its
    batch, TRL's tokenization and the reward functions' own flop_cost. What they measure agrees, for
    a PRM, a proxy PRM and rule-based rewards, on the shipped cpu-tiny checkpoints."""
    from paper_repro.run.trainer import build_trainer, load_parts

    spec = setting_specs(load_profile("cpu-tiny"), setting, seeds=1, cells=[cell])[0]
    trainer = build_trainer(spec, load_parts(spec), tmp_path / "log.jsonl")
    own = trainer.price_round_ceiling()
    assert (own["P"], own["G"], own["K"], own["mu"]) == (spec.P, spec.G, spec.K, spec.mu)
    assert own["C_total"] == round_ceiling(spec)
    assert (own["C_reward"] > 0) == (setting in ("prm", "proxy_prm"))
