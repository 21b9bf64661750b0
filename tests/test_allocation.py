"""The planner and the profiles: cells, predicted rho, refusals, and the `plan` command."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from paper_repro import cli
from paper_repro.config import Grid, load_profile
from paper_repro.run.allocation import (
    InfeasibleTarget,
    cell_round_ceiling,
    plan_setting,
    plan_stage,
    planner_for,
)
from paper_repro.run.spec import pilot_specs, setting_specs


@pytest.fixture(scope="module")
def tiny():
    return load_profile("cpu-tiny")


def _setting(profile, stage, name):
    return next(s for s in profile.settings(stage) if s.name == name)


@pytest.mark.parametrize("profile_name", ["cpu-tiny", "gpu-paper"])
@pytest.mark.parametrize("stage", ["A", "B", "D"])
def test_every_planned_cell_predicts_its_target_within_tolerance(profile_name, stage):
    profile = load_profile(profile_name)
    for planned in plan_stage(profile, stage):
        assert planned.cells, f"{planned.setting.name}: no feasible cell at all"
        for cell in planned.cells:
            assert abs(cell.predicted_rho - cell.target_rho) <= profile.grid.tolerance
            assert cell.K <= cell.G and cell.K >= 2
            assert cell.predicted_rounds >= 1
            assert cell.predicted_flops <= profile.budget_flops  # never planned above the budget
            assert profile.budget_flops - cell.predicted_flops < cell.round_cost.C_total  # within one round
            assert cell.label.removesuffix("b") == f"r{round(cell.target_rho * 100):02d}"
        seconds = [c.target_rho for c in planned.cells if c.label.endswith("b")]
        wanted = profile.grid.second_targets(planned.setting.policy, planned.setting.reward_system)
        assert seconds == [t for t in wanted if t not in [e.target for e in planned.infeasible]]
        lo, hi = planned.feasible
        for err in planned.infeasible:
            if "no second recipe" in str(err):  # the target is reached, by one recipe only
                assert f"r{round(err.target * 100):02d}" in {c.label for c in planned.cells}
                continue
            assert not lo <= err.target <= hi or abs(err.nearest - err.target) > profile.grid.tolerance


def test_rule_based_stage_a_has_the_full_default_grid(tiny):
    for planned in plan_stage(tiny, "A"):
        firsts = [c for c in planned.cells if not c.label.endswith("b")]
        assert [c.target_rho for c in firsts] == list(tiny.grid.targets)  # every target is feasible
        # search-heavy cells discard rollouts (K < G); update-heavy ones reuse them (mu > 1)
        assert planned.cells[0].K < planned.cells[0].G
        assert planned.cells[-1].mu > 1


def test_a_second_recipe_reaches_the_same_target_another_way(tiny):
    """grid.recipes: each setting's window targets again, by another G and another K/G or mu, where the
    planner finds one; where it finds none the target is said infeasible for a second recipe (the
    middle policy's r50 and r78, the first second recipes, are realised)."""
    for planned in plan_stage(tiny, "A"):
        cells = {c.label: c for c in planned.cells}
        refused = {round(e.target, 2) for e in planned.infeasible if "no second recipe" in str(e)}
        for target in tiny.grid.second_targets(planned.setting.policy, "sparse"):
            if round(target, 2) in refused:
                continue
            first, second = cells[f"r{round(target * 100)}"], cells[f"r{round(target * 100)}b"]
            assert abs(second.predicted_rho - target) <= tiny.grid.tolerance
            assert second.G != first.G
            assert second.mu != first.mu or abs(second.K / second.G - first.K / first.G) >= 0.08
    m = {c.label for c in plan_stage(tiny, "A")[1].cells}
    assert {"r50b", "r78b"} <= m
    one_shape = replace(
        planner_for(tiny, _setting(tiny, "A", "M")), grid=Grid(targets=(0.66,), G=(4, 8), K=(4, 8), mu=(1,))
    )
    with pytest.raises(InfeasibleTarget, match="no second recipe"):
        one_shape.second_cell(0.66, tiny.budget_flops)  # K = G, mu = 1 at either G: the same recipe


def test_a_prm_caps_how_high_rho_can_go(tiny):
    sparse = planner_for(tiny, _setting(tiny, "B", "sparse")).feasible_range()
    prm = planner_for(tiny, _setting(tiny, "D", "prm")).feasible_range()
    assert prm[1] < sparse[1] - 0.1
    planner = planner_for(tiny, _setting(tiny, "D", "prm"))
    with pytest.raises(InfeasibleTarget, match="reward model's cost caps") as info:
        planner.cell(0.85, tiny.budget_flops)
    assert info.value.nearest == pytest.approx(prm[1])
    assert "0.85" in str(info.value) and f"{prm[1]:.3f}" in str(info.value)


def test_rho_rises_with_kept_completions_and_epochs(tiny):
    planner = planner_for(tiny, _setting(tiny, "A", "M"))
    by_k = [planner.round_cost(8, 16, k, 1).rho for k in (2, 4, 8, 16)]
    by_mu = [planner.round_cost(8, 8, 8, mu).rho for mu in (1, 2, 3, 4)]
    assert by_k == sorted(by_k) and by_mu == sorted(by_mu)
    assert planner.round_cost(4, 8, 8, 1).rho == pytest.approx(planner.round_cost(16, 8, 8, 1).rho)


def test_a_budget_below_one_round_says_what_one_round_needs(tiny):
    planner = planner_for(tiny, _setting(tiny, "A", "L"))
    one_round = planner.round_cost(8, 8, 8, 1).C_total
    with pytest.raises(ValueError, match=re.escape(f"one round needs {one_round:.3g}")):
        planner.explicit(8, 8, 8, 1, budget_flops=one_round / 2)
    with pytest.raises(ValueError, match="positive"):
        planner.cell(0.5, budget_flops=0)
    with pytest.raises(ValueError, match="cannot exceed"):
        planner.round_cost(8, 4, 8, 1)


def test_unknown_profile_and_stage_are_refused(tiny):
    with pytest.raises(ValueError, match="unknown profile 'gpu-huge'; known: cpu-tiny, gpu-paper"):
        load_profile("gpu-huge")
    with pytest.raises(ValueError, match="unknown stage"):
        tiny.settings("C")


def _with_stages(stages: dict, policies: dict | None = None):
    import yaml

    from paper_repro.config.loading import _profile_from_dict

    raw = yaml.safe_load(Path(load_profile("cpu-tiny").source).read_text())
    raw["stages"] = stages
    if policies is not None:
        raw["policies"] = policies
    return _profile_from_dict(raw)


def test_the_profiles_stages_are_the_settings():
    """What each stage compares is the profile's, not the code's: a new reward or size is a YAML line."""
    two = {"S": "data/models/policy-S", "M": "data/models/policy-M", "XL": "data/models/policy-L"}
    stages = {"A": {"reward": "dense"}, "B": {"policy": "XL", "rewards": ["structured", "proxy_prm"]}}
    p = _with_stages(stages, policies=two)
    # one row per setting: (stage, name, policy, reward), a table kept one setting a line
    assert [(s.stage, s.name, s.policy, s.reward_system) for s in p.all_settings()] == [
        ("A", "S", "S", "dense"), ("A", "M", "M", "dense"), ("A", "XL", "XL", "dense"),
        ("B", "structured", "XL", "structured"), ("B", "proxy_prm", "XL", "proxy_prm"),
    ]  # fmt: skip
    assert p.settings("D") == [] and p.setting("proxy_prm").stage == "B"
    assert [s.name for s in _with_stages({"A": {"policies": ["M"], "reward": "sparse"}}).settings("A")] == [
        "M"
    ]
    assert p.needs_prm_weights(p.setting("proxy_prm")) and not p.needs_prm_weights(p.setting("S"))


# a table of refused designs, one a line with the words that refuse it
@pytest.mark.parametrize(
    "stages, message",
    [
        ({"A": {"reward": "vibes"}}, "unknown reward system 'vibes'"),
        ({"B": {"policy": "XXL", "rewards": ["sparse"]}}, "policies \\['XXL'\\] must be some of"),
        ({"B": {"policy": "M", "rewards": []}}, "no reward systems"),
        ({"A": {"reward": "sparse"}, "B": {"policy": "M", "rewards": ["sparse"]}, "D": {"policy": "M", "rewards": ["sparse"]}},
         "setting names \\['sparse'\\] appear in two stages"),
        ({"C": {"reward": "sparse"}}, "unknown stages \\['C'\\]"),
        ({"B": {"policy": "M", "reward": "sparse"}}, "unknown keys \\['reward'\\]"),
    ],
)  # fmt: skip
def test_a_design_the_study_cannot_run_is_refused(stages, message):
    with pytest.raises(ValueError, match=message):
        _with_stages(stages)


def test_a_setting_is_found_by_its_name_alone(tiny):
    assert {s.name: tiny.setting(s.name) for s in tiny.all_settings()} == {
        s.name: s for s in tiny.all_settings()
    }
    with pytest.raises(ValueError, match="no setting 'XL'; its settings: S \\(A\\)"):
        tiny.setting("XL")
    assert tiny.pilot_budget_flops == pytest.approx(tiny.budget_flops * tiny.pilot_fraction)


def test_plan_command_prints_every_setting_as_json(capsys):
    assert cli.main(["plan", "--profile", "gpu-paper", "--stage", "D", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["profile"] == "gpu-paper"
    (prm,) = out["settings"]
    assert prm["reward_system"] == "prm"
    assert {
        "cell",
        "P",
        "G",
        "K",
        "mu",
        "predicted_steps",
        "predicted_rho",
        "C_search",
        "C_learning",
        "C_reward",
    } <= set(prm["cells"][0])
    assert all(c["C_reward"] > 0 for c in prm["cells"])
    assert [i["target_rho"] for i in prm["infeasible"]] == [0.85]


def test_plan_command_text_and_errors(capsys):
    assert cli.main(["plan", "--profile", "cpu-tiny", "--stage", "a"]) == 0
    text = capsys.readouterr().out
    for label in ("S (policy S", "M (policy M", "L (policy L", "r15", "r90", "r50b", "feasible rho"):
        assert label in text
    assert cli.main(["plan", "--profile", "cpu-tiny", "--stage", "A", "--budget", "1e6"]) == 2
    assert "one round needs" in capsys.readouterr().err
    assert cli.main(["plan", "--profile", "nope", "--stage", "A"]) == 2
    with pytest.raises(SystemExit):
        cli.main(["plan", "--profile", "cpu-tiny", "--stage", "Z"])


def test_plan_and_the_study_run_the_same_cells_at_every_budget(tiny):
    """One grid: at C/16, where the PRM-charged settings' r66 cannot surely buy its costliest round
    under the ceiling budget stop, and at every budget cpu-tiny runs (its pilots' and C), the cells
    the planner lists for a setting are the cells the study's specs run, in the same order."""
    for fraction in (1 / 16, *tiny.pilot_fractions, 1.0):
        budget = tiny.budget_flops * fraction
        for s in tiny.all_settings():
            if fraction < 1:  # the study's runs at that budget: its pilots, were it the pilots' budget
                specs = pilot_specs(replace(tiny, pilot_fractions=(fraction,)), s)
            else:
                specs = setting_specs(tiny, s, seeds=1, extend=False)
            planned = [c.label for c in plan_setting(tiny, s, budget).cells]
            assert planned == list(dict.fromkeys(x.cell for x in specs)), (s.name, fraction)


def test_a_cell_whose_costliest_round_the_budget_cannot_buy_is_refused_with_its_price(tiny, capsys):
    """Under the ceiling budget stop the planner leaves out a cell whose costliest round costs more
    than the budget, saying the round's price and the budget; the study refuses to run it by name,
    with that reason; ``paper-repro plan`` lists it as refused."""
    setting, budget = tiny.setting("prm"), tiny.budget_flops / 16
    cell = planner_for(tiny, setting).cell(0.66, budget)
    price = cell_round_ceiling(tiny, setting, cell)
    assert cell.predicted_flops <= budget < price  # the expected rounds fit; the costliest does not
    planned = plan_setting(tiny, setting, budget)
    (refused,) = [e for e in planned.infeasible if e.label == "r66"]
    assert "r66" not in [c.label for c in planned.cells] and "r66b" in [c.label for c in planned.cells]
    assert f"budget {budget:.3g} FLOPs" in str(refused) and f"costs up to {price:.3g} FLOPs" in str(refused)
    with pytest.raises(ValueError, match=r"cells \['r66'\] are not in the grid of setting prm .*costs up to"):
        setting_specs(replace(tiny, pilot_fractions=(1 / 16,)), setting, budget_kind="pilot", cells=["r66"])
    assert cli.main(["plan", "--profile", "cpu-tiny", "--stage", "D", "--budget", str(budget)]) == 0
    assert re.search(
        r"r66 +refused: cell r66 .* is refused at budget 6.25e\+09 FLOPs", capsys.readouterr().out
    )
    listed = {e["cell"]: e["reason"] for e in planned.as_dict()["infeasible"]}
    assert listed["r66"] == str(refused) and "not realisable" in listed["r78b"]  # a second recipe's own label
    untouched = replace(tiny, train=replace(tiny.train, budget_stop="step"))  # it prices each step as it goes
    assert "r66" in [c.label for c in plan_setting(untouched, setting, budget).cells]


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(tolerance=0.6), "tolerance must be in"),
        (dict(K=(1, 2)), "K must be >= 2"),
        (dict(G=()), "allowed G must be positive"),
        (dict(recipes=(("M", "sparse", (0.42,)),)), "must be grid targets"),
    ],
)
def test_a_grid_the_planner_cannot_use_is_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        Grid(targets=(0.15, 0.5), **fields)
