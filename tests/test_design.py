"""The design simulator (``paper-repro design``): its studies, its truths' own verdicts, its error
rates, and the recipe-effect estimate the decision rules lean on."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from paper_repro.analysis import claims, design, simulate_design
from paper_repro.analysis.verdict import Result
from paper_repro.cli import main
from paper_repro.config import load_profile

CELLS = tuple((f"r{c}", c / 100) for c in (16, 31, 50, 69, 84))
PRM_CELLS = tuple((f"r{c}", c / 100) for c in (17, 33, 53, 70))
LAYOUT = design.Layout(
    {"S": CELLS, "M": CELLS, "L": CELLS, "proxy_prm": PRM_CELLS, "prm": PRM_CELLS}, seeds=10
)
CLASSES = claims.Classes(
    rule_based=("S", "M", "L"), prm_style=("proxy_prm", "prm"), process=("proxy_prm", "prm"),
    sizes=("S", "M", "L"), middle=("M", "proxy_prm", "prm"),
)  # fmt: skip


def _tests(recipe_sd=None):
    m = dataclasses.replace(claims.DEFAULT, recipe_sd=recipe_sd)
    return {c.name: c.test for c in claims.frontier_claims(CLASSES, m)}


def test_a_simulated_study_has_the_design_and_the_noise_it_was_given():
    noise = design.Noise(recipe_sd=0.0, default=0.05, seed_sd={("S", "r16", "native_reward"): 0.2})
    truth = design.truths(("prm",), amplitude=0.1)["peak at 0.72"]
    study = design.simulate(LAYOUT.with_seeds(400), truth, noise, np.random.default_rng(0))
    assert len(study) == 400 * (3 * 5 + 2 * 4)
    sd = study.groupby(["setting", "cell"])["native_reward"].std()
    assert sd[("S", "r16")] == pytest.approx(0.2, rel=0.1) and sd[("M", "r50")] == pytest.approx(
        0.05, rel=0.1
    )
    means = study.groupby(["setting", "cell"])["native_reward"].mean()
    assert means[("M", "r69")] == pytest.approx(truth("M", "native_reward", np.array([0.69]))[0], abs=0.01)


def test_the_truths_own_verdicts_follow_their_shapes():
    world = design.truths(CLASSES.prm_style, amplitude=0.1)
    tests = _tests(recipe_sd=0.0)
    rule, prm, lower = (f"{claims.RULE_BASED_RHO}", "0.44-0.45", "is lower")
    verdict = {
        name: {k: r.verdict for k, r in design.truth_verdicts(LAYOUT, t, tests).items()}
        for name, t in world.items()
    }

    def of(truth, words):
        return next(v for k, v in verdict[truth].items() if words in k and "(on" not in k)

    assert of("flat", rule) == of("flat", prm) == of("flat", lower) == "inconclusive"
    assert of("peak at 0.72", rule) == "held" and of("peak at 0.72", prm) == "not held"
    assert (
        of("the paper's world", rule)
        == of("the paper's world", prm)
        == of("the paper's world", lower)
        == "held"
    )
    assert of("plateau over 0.3-0.7", prm) == "inconclusive"  # best cells both inside and outside the window


def test_a_decided_verdict_is_wrong_only_against_the_truth():
    held, split = Result(verdict="held"), Result(verdict="heterogeneous", unanimous="not held")
    assert not design.is_wrong("held", held) and design.is_wrong("not held", held)
    assert not design.is_wrong("inconclusive", held)  # undecided is never wrong
    assert not design.is_wrong("not held", split)  # every setting's truth says so
    assert design.is_wrong("held", split)


def test_the_rules_are_seldom_wrong_with_the_noise_they_allow_for():
    noise = design.Noise(recipe_sd=0.02, default=0.04, seed_sd={})
    world = design.truths(CLASSES.prm_style, amplitude=0.15)
    world = {k: world[k] for k in ("flat", "peak at 0.72", "the paper's world")}
    table = design.operating_characteristics(
        LAYOUT, noise, world, _tests(), _tests(0.0), {}, replicates=15, coverage_replicates=0
    )
    assert table["wrong"].max() <= 0.1, table.sort_values("wrong").tail(3)
    flat = table[table["truth"] == "flat"]
    assert (flat["share_held"] == 0).all() and (flat["true_verdict"] != "held").all()
    shares = table[[c for c in table if c.startswith("share_")]].sum(axis=1)
    assert shares.to_numpy() == pytest.approx(1.0)


@pytest.mark.parametrize("truth", ["flat", "peak at 0.45, skewed", "the paper's world"])
def test_the_recipe_effect_estimate_is_not_low_on_average(truth):
    """The doubled lack-of-fit estimate (optima.RECIPE_BIAS) against the recipe SD that made the data."""
    noise = design.Noise(recipe_sd=0.03, default=0.04, seed_sd={})
    world = design.truths(CLASSES.prm_style, amplitude=0.1)
    rng = np.random.default_rng(1)
    estimates = [
        claims.Frontiers(
            design.simulate(LAYOUT, world[truth], noise, rng, design.recipe_draw(LAYOUT, noise, rng))
        ).recipe_sd(claims.DEFAULT)
        for _ in range(20)
    ]
    assert 0.03 <= np.mean(estimates) <= 0.06


def test_the_design_command_writes_design_csv_and_the_claims_read_it(tmp_path):
    from tests.test_analysis import PROFILE, write_runs

    write_runs(tmp_path / "runs.csv", lambda s: 0.5, noise=0.03, seeds=3)
    assert main(["design", "--profile", "cpu-tiny", "--results", str(tmp_path), "--replicates", "2",
                 "--recipes", "4"]) == 0  # fmt: skip
    table = pd.read_csv(tmp_path / "design.csv")
    assert set(table["design"]) == {"committed", "4 recipes per cell"}
    assert set(table["truth"]) == {*design.SHAPES, "the paper's world"}
    from paper_repro.analysis import analyse

    result = analyse(PROFILE, results_root=tmp_path, figures_dir=tmp_path / "f", power_replicates=0)
    row = result.claims.set_index("claim").loc["rule-based rewards: rho* ~ 0.72"]
    assert np.isfinite(row["oc_wrong_max"]) and row["oc_note"].endswith("(design.csv)")
    race_row = result.claims.set_index("claim").loc[
        "RACE gives no stable held-out gain over a fixed default allocation"
    ]
    assert race_row["oc_note"].startswith("not simulated")


def test_a_design_with_no_runs_needs_its_noise_given(tmp_path):
    profile = load_profile("cpu-tiny")
    with pytest.raises(ValueError, match="--recipe-sd, --seed-sd, --amplitude"):
        simulate_design(profile, tmp_path)
    table = simulate_design(profile, tmp_path, recipe_sd=0.02, seed_sd=0.04, amplitude=0.1, replicates=1)
    assert (table["seeds"] == profile.seeds).all() and (tmp_path / "design.csv").exists()


def test_draws_are_the_training_configurations_in_the_order_they_first_ran():
    from paper_repro.analysis import draws

    spec = lambda layout: json.dumps({"train": {"update_layout": layout}})  # noqa: E731
    runs = pd.DataFrame({
        "spec": [spec("fused"), spec("padded"), spec("fused"), "not json"],
        "created_at": ["2026-12-02", "2026-12-01", "2026-12-03", "2026-11-30"],
    })  # fmt: skip
    assert draws.draws(runs) == [
        "",
        json.dumps({"update_layout": "padded"}),
        json.dumps({"update_layout": "fused"}),
    ]
    assert draws.draw(runs, 2)["created_at"].tolist() == ["2026-12-02", "2026-12-03"]
