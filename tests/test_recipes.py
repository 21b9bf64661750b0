"""Recipe vs rho: pairs of recipes of one target rho, paired by seed; the recipe SD at equal rho with
its Q-profile interval, the rule against the margin on worlds whose truth is known, and its simulated
error and power."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from paper_repro.analysis.claims.recipes import CODES, pair_sd, recipe_decide, recipe_operating
from paper_repro.analysis.tables import recipes

COLUMNS = {"oc_wrong_max", "oc_wrong_truth", "oc_agreement_min", "oc_held_when_true", "oc_not_held_when_false",
           "oc_note", "power_now", "seeds_for_80pct_power", "power_note"}  # fmt: skip


def _runs(
    means: dict[str, float], sd: float = 0.01, seeds: int = 8, seed: int = 1, block: float = 0.0
) -> pd.DataFrame:
    """One setting's runs: each cell's seeds around its mean, plus a seed block shared by every cell."""
    rng = np.random.default_rng(seed)
    blocks = rng.normal(0, block, seeds)
    return pd.DataFrame(
        [
            {"setting": "M", "cell": cell, "seed": s, "native_reward": mean + blocks[s] + rng.normal(0, sd)}
            for cell, mean in means.items()
            for s in range(seeds)
        ]
    )


def _world(tau: float, pairs: int, seeds: int, sd: float = 0.01, seed: int = 3) -> pd.DataFrame:
    """``pairs`` recipe pairs whose recipe effects are N(0, tau^2) around a common mean per rho."""
    rng = np.random.default_rng(seed)
    means = {}
    for j in range(pairs):
        rho = 0.5 + 0.1 * j
        means[f"r{j}"], means[f"r{j}b"] = rho + rng.normal(0, tau), rho + rng.normal(0, tau)
    return _runs(means, sd, seeds, seed, block=0.05)


def test_pairs_are_a_cell_and_its_second_recipe_paired_by_seed():
    runs = _runs({"r15": 0.4, "r50": 0.5, "r50b": 0.5, "r78": 0.6, "r78b": 0.6, "r90b": 0.6})
    runs = runs[~((runs["cell"] == "r78b") & (runs["seed"] == 7))]  # r78b misses seed 7
    pairs = recipes.pairs_of(runs)
    assert [(p.first, p.second) for p in pairs] == [("r50", "r50b"), ("r78", "r78b")]  # r90b has no r90
    assert len(pairs[0].d) == 8 and len(pairs[1].d) == 7  # on the seeds both ran
    wide = runs.pivot_table(index="seed", columns="cell", values="native_reward")
    assert pairs[1].d == pytest.approx((wide["r78b"] - wide["r78"]).dropna().to_numpy())


def test_pairing_by_seed_removes_the_seed_block():
    runs = _runs({"r50": 0.5, "r50b": 0.51}, sd=0.005, block=0.05)
    pair = recipes.pairs_of(runs)[0]
    d, se, df, was_paired = recipes.paired(pair)
    _, welch_se, _ = recipes.welch(pair.a, pair.b)
    assert was_paired and df == len(pair.d) - 1 and d == pytest.approx(0.01, abs=0.006)
    assert se < welch_se / 3  # the block (SD 0.05) is in each cell's spread, not in the differences


def test_the_q_profile_interval_solves_its_equations():
    pairs = recipes.pairs_of(_world(0.04, pairs=3, seeds=6))
    sd = pair_sd(pairs)
    dbar = np.array([p.d.mean() for p in pairs])
    v = np.array([p.d.var(ddof=1) / len(p.d) for p in pairs])

    def q(tau):
        return float(np.sum(dbar**2 / (2 * tau**2 + v)))

    for end, level in ((sd.low, 0.95), (sd.high, 0.05), (sd.tau, None)):
        want = stats.chi2.ppf(level, 3) if level is not None else 3.0
        if q(0.0) <= want:
            assert end == 0.0
        else:
            assert end == pytest.approx(optimize.brentq(lambda t, w=want: q(t) - w, 0, 10), rel=1e-6)
    assert 0.0 <= sd.low <= sd.tau <= sd.high


@pytest.mark.parametrize(
    "world, verdict",
    [
        (dict(tau=0.0, pairs=4, seeds=40), "held"),  # identical recipes, many seeds
        (dict(tau=0.15, pairs=6, seeds=5), "not held"),  # rho not sufficient: recipe SD 5 margins
        (dict(tau=0.0, pairs=2, seeds=5, sd=0.08), "inconclusive"),  # two noisy pairs cannot say
    ],
)
def test_the_rule_returns_every_verdict_in_worlds_built_for_it(world, verdict):
    result = recipe_decide(recipes.pairs_of(_world(**world)), margin=0.03)
    assert result.verdict == verdict
    assert "margin of 0.03 on the SD" in result.note and result.low <= result.value <= result.high


def test_no_pairs_is_inconclusive_and_says_why():
    result = recipe_decide(recipes.pairs_of(_runs({"r50": 0.5, "r78": 0.6})), margin=0.03)
    assert result.verdict == "inconclusive" and "grid.recipes" in result.note


def test_pair_table_has_intervals_and_recipes():
    runs = _runs({"r50": 0.5, "r50b": 0.52})
    frontier = pd.DataFrame(
        [{"setting": "M", "cell": "r50", "P": 8, "G": 8, "K": 4, "mu": 1, "rho": 0.52},
         {"setting": "M", "cell": "r50b", "P": 8, "G": 12, "K": 5, "mu": 1, "rho": 0.47}]
    )  # fmt: skip
    row = recipes.pair_table(recipes.pairs_of(runs), 0.03, recipes=frontier).iloc[0]
    assert row["first_recipe"] == "P8 G8 K4 mu1" and row["second_rho"] == pytest.approx(0.47)
    assert row["ci95_low"] < row["ci90_low"] < row["difference"] < row["ci90_high"] < row["ci95_high"]
    assert row["difference"] == pytest.approx(row["second_mean"] - row["first_mean"])
    assert bool(row["paired"])


def test_its_simulated_error_stays_at_the_tests_size_and_it_finds_rho_not_sufficient():
    pairs = recipes.pairs_of(_world(0.0, pairs=4, seeds=8, sd=0.012))
    table, oc = recipe_operating(pairs, margin=0.03, replicates=1000, power_replicates=100)
    assert set(oc) >= COLUMNS
    assert oc["oc_wrong_max"] <= 0.05 + 0.02  # each end a 5% test; 1000 studies: about +-1.4 points
    at = table.set_index("truth")
    assert at.loc["identical recipes (tau 0)", "share_held"] > 0.8  # 8 seeds at SD 0.012, 4 pairs
    far = at.loc["rho not sufficient (tau 4 x margin)"]
    assert far["share_not_held"] > 0.8 and far["share_held"] < 0.01
    assert oc["oc_not_held_when_false"] == pytest.approx(at.loc["tau 2 x margin", "share_not_held"])
    assert 0 <= oc["power_now"] <= 1 and set(table["true_verdict"]) == {"held", "not held"}


def test_no_pairs_gives_every_column_and_says_why():
    _, oc = recipe_operating(recipes.pairs_of(_runs({"r50": 0.5})), margin=0.03)
    assert set(oc) >= COLUMNS and "no recipe pair" in oc["oc_note"]


def test_the_readme_says_what_each_recipe_verdict_means_for_reporting_rho(tmp_path):
    from paper_repro.analysis.report.readme import RECIPE_CLAIM, RECIPE_MEANING, _recipe_sentences

    assert set(CODES) == set(RECIPE_MEANING)
    pd.DataFrame({"id": [RECIPE_CLAIM], "verdict": ["not held"]}).to_csv(tmp_path / "claims.csv", index=False)
    pd.DataFrame({"setting": ["M"], "first": ["r50"], "second": ["r50b"], "difference": [-0.08], "ci90_low": [-0.1],
                  "ci90_high": [-0.06], "margin": [0.03]}).to_csv(tmp_path / "recipe_pairs.csv", index=False)  # fmt: skip
    (sentence,) = _recipe_sentences(tmp_path)
    assert "M r50b − r50 -0.080 (90% -0.100 to -0.060)" in sentence and RECIPE_MEANING["not held"] in sentence
