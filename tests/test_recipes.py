"""Recipe vs rho: the equivalence rule on pairs whose truth is known, and its simulated error."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from paper_repro.analysis.claims.recipes import claim_verdict, recipe_decide, recipe_operating
from paper_repro.analysis.tables import recipes


def _runs(means: dict[str, float], sd: float = 0.01, seeds: int = 8, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        [
            {"setting": "M", "cell": cell, "seed": s, "native_reward": mean + rng.normal(0, sd)}
            for cell, mean in means.items()
            for s in range(seeds)
        ]
    )


def test_pairs_are_a_cell_and_its_second_recipe():
    runs = _runs({"r15": 0.4, "r50": 0.5, "r50b": 0.5, "r78": 0.6, "r78b": 0.6, "r90b": 0.6})
    pairs = recipes.pairs_of(runs)
    assert [(p.first, p.second) for p in pairs] == [("r50", "r50b"), ("r78", "r78b")]  # r90b has no r90
    assert all(len(p.a) == len(p.b) == 8 for p in pairs)


@pytest.mark.parametrize(
    "means, sd, verdict",
    [
        ({"r50": 0.5, "r50b": 0.5, "r78": 0.6, "r78b": 0.605}, 0.01, "held"),
        ({"r50": 0.5, "r50b": 0.58, "r78": 0.6, "r78b": 0.6}, 0.01, "not held"),  # one pair 0.08 apart
        ({"r50": 0.5, "r50b": 0.5, "r78": 0.6, "r78b": 0.6}, 0.08, "inconclusive"),  # too noisy to say
    ],
)
def test_the_rule_returns_every_verdict(means, sd, verdict):
    result = recipe_decide(recipes.pairs_of(_runs(means, sd)), margin=0.03)
    assert result.verdict == verdict
    assert "margin 0.03" in result.note


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


def test_its_simulated_error_stays_at_the_tests_size():
    pairs = recipes.pairs_of(_runs({"r50": 0.5, "r50b": 0.5, "r78": 0.6, "r78b": 0.6}, sd=0.012))
    table, oc = recipe_operating(pairs, margin=0.03, replicates=400)
    assert set(table["true_verdict"]) == {"held", "not held"}
    assert oc["oc_wrong_max"] <= 0.05 + 0.02  # TOST at 5% per pair; 400 studies: +-2 points
    zero = table[table["truth"] == "difference 0 x margin"].iloc[0]
    assert zero["share_held"] > 0.8  # 8 seeds at SD 0.012 settle a margin of 0.03
    far = table[table["truth"] == "difference 2 x margin"].iloc[0]
    assert far["share_not_held"] > 0.8 and far["share_held"] == 0


def test_the_readme_says_what_each_recipe_verdict_means_for_reporting_rho(tmp_path):
    from paper_repro.analysis.report.readme import RECIPE_CLAIM, RECIPE_MEANING, _recipe_sentences

    assert {claim_verdict(v) for v in (["equivalent"], ["different"], ["open"], [])} == set(RECIPE_MEANING)
    pd.DataFrame({"id": [RECIPE_CLAIM], "verdict": ["not held"]}).to_csv(tmp_path / "claims.csv", index=False)
    pd.DataFrame({"setting": ["M"], "first": ["r50"], "second": ["r50b"], "difference": [-0.08], "ci90_low": [-0.1],
                  "ci90_high": [-0.06], "margin": [0.03]}).to_csv(tmp_path / "recipe_pairs.csv", index=False)  # fmt: skip
    (sentence,) = _recipe_sentences(tmp_path)
    assert "M r50b − r50 -0.080 (90% -0.100 to -0.060)" in sentence and RECIPE_MEANING["not held"] in sentence
