"""RACE's decision on synthetic runs tables whose truth is known by construction.

Every cell's seeds are its mean plus a fixed pattern of mean 0 and SD 1 times ``sd``, so each cell
mean and SD is exactly the one designed: pilots that mirror the full grid, pilots that sit at the base
policy, pilots whose ranking is reversed, and PRM-like settings whose reward share is large at low rho.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from paper_repro.analysis.race import (
    RegimeThresholds,
    parse_means,
    permutation_p,
    pilot_agreement,
    pilot_agreement_test,
    pilot_moved,
    race_table,
    regime_ceiling,
    regime_kappa,
)

RHO = {"r15": 0.16, "r30": 0.31, "r50": 0.50, "r70": 0.69, "r85": 0.84}
BASE = 0.353
FULL_SEEDS, PILOT_SEEDS, FRESH_SEEDS = range(10), range(100, 105), (200, 201)
# the full grids' cell means (r15 .. r85): optima at different rho, never a tie
SHAPES = {
    "S": [0.48, 0.52, 0.58, 0.65, 0.61],
    "M": [0.50, 0.55, 0.63, 0.60, 0.52],
    "L": [0.52, 0.60, 0.56, 0.53, 0.49],
    "dense": [0.49, 0.51, 0.55, 0.59, 0.64],
}


def pattern(n: int) -> np.ndarray:
    """``n`` offsets with mean 0 and SD (ddof 1) 1 (one: 0)."""
    z = np.arange(n) - (n - 1) / 2
    return z / z.std(ddof=1) if n > 1 else z


def grid(setting, means, seeds, sd=0.01, budget=1.0, prm_share=0.0, stage="B") -> pd.DataFrame:
    """One grid's runs: ``means`` per cell (r15 .. r85), seed noise exactly ``sd``; a PRM-like reward
    costs ``prm_share * (1 - rho)`` of each run's FLOPs (the share every scored rollout gives)."""
    seeds = list(seeds)
    rows = []
    for (cell, rho), mean in zip(RHO.items(), means, strict=True):
        for seed, z in zip(seeds, pattern(len(seeds)), strict=True):
            rows.append({
                "stage": stage, "setting": setting, "cell": cell, "seed": seed, "rho": rho, "rho_time": rho,
                "native_reward": mean + sd * z, "base_native_reward": BASE, "C_total": budget,
                "C_reward": budget * prm_share * (1 - rho), "run_id": f"{setting}-{cell}-{seed}-{budget}",
                "model": "M", "reward_system": "prm" if prm_share else "sparse",
            })  # fmt: skip
    return pd.DataFrame(rows)


def mirror(means, scale=0.5):
    """Pilot means that keep the full grid's ranking, closer to the base policy."""
    return [BASE + scale * (m - BASE) for m in means]


def reverse(means, scale=0.5):
    """Pilot means whose ranking is the full grid's reversed."""
    return [BASE + scale * (max(means) + min(means) - m - BASE) for m in means]


def study(pilot_shape, shapes=SHAPES, pilot_sd=0.01, fraction=0.125, **kwargs):
    """The full grids of ``shapes``, their pilots (``pilot_shape(setting, means)``) and the race table."""
    full = pd.concat([grid(s, m, FULL_SEEDS, **kwargs) for s, m in shapes.items()], ignore_index=True)
    pilots = pd.concat(
        [grid(s, pilot_shape(s, m), PILOT_SEEDS, pilot_sd, fraction, **kwargs) for s, m in shapes.items()],
        ignore_index=True,
    )
    fresh = pd.concat([grid(s, m, FRESH_SEEDS, **kwargs) for s, m in shapes.items()], ignore_index=True)
    defaults = fresh[fresh["cell"] == "r70"].assign(cell="default")
    return race_table(full, {fraction: pilots}, fresh, defaults, {}, RegimeThresholds())


def test_pilots_that_mirror_the_full_grid_hold():
    race, gains = study(lambda s, m: mirror(m))
    assert race["pilot_moved"].all() and np.allclose(race["spearman"], 1.0)
    assert race["pick_in_full_best_set"].all() and (race["race_regret"] == 0).all()
    assert (race["pilot_best_cell"] == race["full_best_cell"]).all()
    # M's pilots (5 seeds at half the full grid's spread) cannot tell r70 from r50: unresolved
    labels = race.set_index("setting")[["pilot_best_cells", "pilot_regime", "full_regime"]]
    assert labels.loc["M"].tolist() == ["r50 r70", "unresolved", "search-heavy"]
    assert race.set_index("setting")["same_regime"].to_dict() == {
        "S": True,
        "M": False,
        "L": True,
        "dense": True,
    }
    result = pilot_agreement(race)
    assert result.verdict == "held", result.note
    assert result.value == pytest.approx(1.0) and -1 <= result.low <= result.high <= 1
    assert "4 of 4 settings moved" in result.note and "best set in 4 of 4" in result.note
    # the gains: the pick against the default (r70) on the fresh seeds, one per setting and fresh seed
    assert len(gains) == len(SHAPES) * len(FRESH_SEEDS)
    expected = {s: max(m) - m[3] for s, m in SHAPES.items()}
    assert race.set_index("setting")["race_gain_vs_default"].to_dict() == pytest.approx(expected)


def test_pilots_at_the_base_policy_are_uninformative():
    """Cells within 0.005 of the base with seed SD 0.01 over 5 seeds: inside every interval."""
    offsets = [-0.004, 0.0, 0.003, -0.002, 0.005]
    race, _ = study(lambda s, m: [BASE + o for o in offsets])
    assert not race["pilot_moved"].any()
    assert (race["pilot_regime"] == "uninformative").all() and race["same_regime"].isna().all()
    result = pilot_agreement(race)
    assert result.verdict == "inconclusive"
    assert result.note.startswith("uninformative pilots: 0 of 4 settings moved off the base policy")
    assert np.isnan(regime_kappa(race)[0])


def test_too_few_moved_settings_are_inconclusive_whatever_they_say():
    offsets = [-0.004, 0.0, 0.003, -0.002, 0.005]
    race, _ = study(lambda s, m: mirror(m) if s in ("S", "M") else [BASE + o for o in offsets])
    result = pilot_agreement(race)
    assert result.verdict == "inconclusive"
    assert result.note.startswith("uninformative pilots: 2 of 4 settings moved off the base policy")


def test_pilots_whose_ranking_is_reversed_do_not_hold():
    race, _ = study(lambda s, m: reverse(m))
    assert race["pilot_moved"].all() and np.allclose(race["spearman"], -1.0)
    assert not race["pick_in_full_best_set"].any() and (race["race_regret"] > 0).all()
    result = pilot_agreement(race)
    assert result.verdict == "not held" and result.value == pytest.approx(-1.0)


def test_a_pick_outside_the_best_set_in_one_setting_is_inconclusive():
    """Ranks agree almost everywhere, but in one setting the pilots prefer the full grid's runner-up,
    0.04 below its best (far outside the best set)."""
    swap = lambda s, m: mirror([*m[:3], m[4], m[3]] if s == "S" else m)  # noqa: E731
    race, _ = study(swap)
    assert race.set_index("setting")["pick_in_full_best_set"].to_dict() == {
        "S": False, "M": True, "L": True, "dense": True,
    }  # fmt: skip
    result = pilot_agreement(race)
    assert result.verdict == "inconclusive" and "best set in 3 of 4" in result.note


def test_shared_settings_are_counted_once():
    race, _ = study(lambda s, m: mirror(m))
    race.loc[race["setting"] == "S", "same_runs_as"] = "M"
    assert "3 of 3 settings moved" in pilot_agreement(race).note


def test_pilot_moved_is_bonferroni_over_the_cells():
    """Five cells on five seeds with SD 0.01: the half-width is t(1 - 0.05 / 10, 4) * 0.01 / sqrt(5)."""
    half = stats.t.ppf(1 - 0.05 / 10, 4) * 0.01 / np.sqrt(5)
    for shift, moved in ((0.99 * half, False), (1.01 * half, True)):
        rows = grid("S", [BASE, BASE, BASE + shift, BASE, BASE], PILOT_SEEDS)
        assert pilot_moved(rows, BASE) == (moved, pytest.approx(shift))
    one_seed = grid("S", [0.9] * 5, [100])
    assert pilot_moved(one_seed, BASE)[0] is False  # no interval on one seed


def test_permutation_p_is_exact_for_small_grids():
    """Three settings ranked perfectly: only the identity order in each reaches the observed sum."""
    pairs = [(np.arange(5.0), np.arange(5.0) * 2)] * 3
    assert permutation_p(pairs) == pytest.approx(120.0**-3)
    eight = [(np.arange(8.0), np.arange(8.0))] * 3  # over the exact limit: Monte Carlo, 10000 draws
    assert permutation_p(eight) == pytest.approx(1 / 10_001)
    assert permutation_p([(np.arange(5.0), -np.arange(5.0))] * 3) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "pilot, full",
    [
        (["update-heavy", "search-heavy"] * 3, ["update-heavy", "search-heavy"] * 3),
        (["update-heavy", "search-heavy", "unresolved"], ["update-heavy", "search-heavy", "unresolved"]),
        (["update-heavy", "search-heavy", "search-heavy"], ["update-heavy", "search-heavy", "update-heavy"]),
        (["update-heavy"] * 3 + ["search-heavy"], ["search-heavy"] * 3 + ["update-heavy"]),
        (["update-heavy", "search-heavy"] * 2, ["search-heavy", "update-heavy"] * 2),
    ],
)
def test_kappa_interval_stays_inside_minus_one_to_one(pilot, full):
    race = pd.DataFrame({
        "setting": [f"s{i}" for i in range(len(pilot))], "pilot_moved": True,
        "pilot_regime": pilot, "full_regime": full,
    })  # fmt: skip
    kappa, low, high = regime_kappa(race)
    assert -1 <= low <= kappa <= high <= 1


def test_kappa_is_undefined_with_one_label():
    race = pd.DataFrame({"setting": ["a", "b"], "pilot_moved": True, "pilot_regime": "update-heavy",
                         "full_regime": "update-heavy"})  # fmt: skip
    assert all(np.isnan(v) for v in regime_kappa(race))


def test_a_prm_setting_best_at_low_rho_is_search_heavy():
    """The PRM's share is 0.56 at r15: by share alone the old rule called it reward-heavy."""
    shapes = {"prm": [0.62, 0.60, 0.52, 0.48, 0.45]}
    full = grid("prm", shapes["prm"], FULL_SEEDS, prm_share=0.66)
    assert (full["C_reward"] / full["C_total"]).max() > 0.5
    race, _ = study(lambda s, m: mirror(m), shapes=shapes, prm_share=0.66)
    row = race.iloc[0]
    assert row["full_best_cells"] == "r15" and row["full_regime"] == "search-heavy"
    assert row["pilot_regime"] == "search-heavy"
    assert not any("reward" in str(v) for v in race.filter(like="regime").to_numpy().ravel())


def test_a_best_set_straddling_the_threshold_is_unresolved():
    """r50 and r70 tie at the top, either side of rho 0.6."""
    race, _ = study(lambda s, m: mirror(m), shapes={"S": [0.48, 0.52, 0.62, 0.62, 0.50]})
    assert race.iloc[0]["full_best_cells"] == "r50 r70"
    assert race.iloc[0]["full_regime"] == "unresolved"


def test_classify_names_the_regime_from_every_best_cell():
    th = RegimeThresholds()
    assert th.classify([0.69, 0.84]) == "update-heavy"
    assert th.classify([0.16, 0.31, 0.50]) == "search-heavy"
    assert th.classify([0.50, 0.69]) == "unresolved"
    assert th.classify([]) == "unknown"


def test_regime_ceiling_of_clear_optima_is_one():
    full = pd.concat([grid(s, m, range(6), sd=0.005) for s, m in SHAPES.items()], ignore_index=True)
    assert regime_ceiling(full, list(SHAPES), RegimeThresholds()) == 1.0
    assert np.isnan(regime_ceiling(grid("S", SHAPES["S"], [0]), ["S"], RegimeThresholds()))


def test_the_race_table_carries_its_cell_means_and_columns():
    race, _ = study(lambda s, m: mirror(m))
    row = race.set_index("setting").loc["M"]
    assert parse_means(row["full_cell_means"]).to_dict() == pytest.approx(
        dict(zip(RHO, SHAPES["M"], strict=True))
    )
    assert row["pilot_flops_fraction"] == pytest.approx(0.125 * 5 / 10)
    for column in ("pilot_moved", "pilot_best_cells", "full_best_cells", "spearman", "pick_in_full_best_set",
                   "race_regret", "pilot_regime", "full_regime", "same_regime"):  # fmt: skip
        assert column in race
    assert not any("reward_share" in c or "reward_threshold" in c for c in race.columns)


def test_the_rule_is_stated_in_words():
    text = pilot_agreement_test()
    for words in ("Spearman", "permutation", "best set", "uninformative", "not held if", "fewer than 3"):
        assert words in text
