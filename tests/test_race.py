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

from paper_repro.analysis.claims.race import (
    permutation_p,
    pilot_agreement,
    pilot_agreement_test,
    regime_kappa,
)
from paper_repro.analysis.tables.race import (
    RegimeThresholds,
    parse_means,
    pilot_moved,
    race_table,
    regime_ceiling,
)
from paper_repro.analysis.tables.race_plus import plus_pick, plus_table, regret_interval

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


# ---------------------------------------------------------------------------------------- RACE+

C = 1e11  # the full budget in FLOPs; pilots at C/2, their ladders at C/8 and C/4 (as cpu-tiny's)
LADDER = (0.125, 0.25)


def rise(multiple, top, mid, b=2.0, base=BASE):
    """A saturating curve from the base policy: half its gain at ``mid`` x C."""
    return base + (top - base) / (1 + (mid / np.asarray(multiple, float)) ** b)


# per cell: (asymptote, C_mid as a multiple of C); r50 leads at C/2, r70 rises late and leads at C
CURVES = {"r15": (0.45, 1 / 32), "r30": (0.50, 1 / 32), "r50": (0.56, 1 / 32), "r70": (0.80, 0.7),
          "r85": (0.42, 1 / 32)}  # fmt: skip


def pilots_with_curves(setting="S", curves=CURVES, seeds=PILOT_SEEDS, ladder=LADDER, fraction=0.5, sd=0.002):
    """One setting's pilot rows at ``fraction`` x C (as :func:`grid` makes them) and their curves.csv
    rows at the ``ladder`` points and the pilot budget, each seed's curve shifted by a fixed offset."""
    rows = grid(setting, [rise(fraction, *curves[c]) for c in RHO], seeds, sd=sd, budget=fraction * C)
    rows["budget_flops"] = fraction * C
    offsets = dict(zip(seeds, sd * pattern(len(list(seeds))), strict=True))
    points = [
        {"run_id": r.run_id, "point": m, "point_flops": m * C, "status": "ok",
         "native_reward": float(rise(m, *curves[r.cell])) + offsets[r.seed]}
        for r in rows.itertuples() for m in (*ladder, fraction)
    ]  # fmt: skip
    return rows, pd.DataFrame(points)


def test_plus_pick_names_the_cell_predicted_best_at_c_not_the_best_at_the_pilot_budget():
    rows, curves = pilots_with_curves()
    assert rows.groupby("cell")["native_reward"].mean().idxmax() == "r50"  # RACE's pick
    pick, table = plus_pick(rows, curves, BASE, C)
    assert pick == "r70"
    table = table.set_index("cell")
    assert list(table.index) == list(RHO) and table["candidate"].all() and (table["status"] == "ok").all()
    assert (
        (table["n_points"] == 3).all()
        and (table["n_seeds"] == 5).all()
        and (table["pilot_point"] == 0.5).all()
    )
    truth = {c: float(rise(1.0, *CURVES[c])) for c in RHO}  # exact curves: the fit finds them
    assert table["predicted"].to_dict() == pytest.approx(truth, abs=0.01)
    assert table["R0"].to_numpy() == pytest.approx(BASE)  # fixed to the base policy's
    assert (table["pred_lo"] <= table["predicted"]).all() and (table["predicted"] <= table["pred_hi"]).all()
    assert table.loc["r50", "pilot_mean"] > table.loc["r70", "pilot_mean"]


def test_cells_without_a_fit_are_not_candidates_and_no_fit_means_no_pick():
    """r70 (the late riser) recorded without its ladder: its one point cannot be fitted, so it is no
    candidate, and the pick is the best of the others; without any ladder, or with an infeasible
    ladder point, no pick. With the base policy unknown R0 is free: four parameters, which the three
    points cannot fit; a fourth point (C/16) fits them."""
    rows, curves = pilots_with_curves()
    late = rows.loc[rows["cell"] == "r70", "run_id"]
    pick, table = plus_pick(rows, curves[~curves["run_id"].isin(late)], BASE, C, bootstrap=0)
    assert pick == "r50"
    r70 = table.set_index("cell").loc["r70"]
    assert not r70["candidate"] and r70["n_points"] == 1 and np.isnan(r70["predicted"])
    assert r70["status"].startswith("no fit: 1 point(s), the fit needs 3")
    pick, table = plus_pick(rows, curves.iloc[0:0], BASE, C, bootstrap=0)  # the runs' own rows alone
    assert pick is None and not table["candidate"].any() and (table["n_points"] == 1).all()
    infeasible = curves.assign(status=np.where(curves["point"] == 0.125, "infeasible", "ok"))
    pick, table = plus_pick(rows, infeasible, BASE, C, bootstrap=0)  # two points
    assert pick is None and table["status"].str.contains("needs 3").all()
    pick, table = plus_pick(rows, curves, float("nan"), C, bootstrap=0)  # three points, R0 free
    assert pick is None and table["status"].str.contains("needs 4").all()
    rows, curves = pilots_with_curves(ladder=(0.0625, *LADDER))
    assert plus_pick(rows, curves, float("nan"), C, bootstrap=0)[0] is not None


def test_regret_interval_resamples_both_sides_and_needs_two_seeds_each():
    best, pick = np.array([0.60, 0.62, 0.64]), np.array([0.50, 0.52])
    value, low, high, note = regret_interval(best, pick)
    assert value == pytest.approx(0.11) and note == ""
    assert 0.08 - 1e-12 <= low < value < high <= 0.14 + 1e-12  # inside the extremes of the resamples
    assert regret_interval(best, pick) == (value, low, high, note)  # a fixed RNG seed
    assert regret_interval(np.full(4, 0.6), np.full(3, 0.5))[:3] == pytest.approx((0.1, 0.1, 0.1))
    one = regret_interval(best, pick[:1])
    assert one[0] == pytest.approx(0.12) and np.isnan(one[1]) and np.isnan(one[2]) and "needs 2" in one[3]
    none = regret_interval(best, np.array([np.nan]))
    assert np.isnan(none[0]) and "no fresh-seed result" in none[3]


def plus_study(shapes=("S", "M")):
    """Full grids (SHAPES: S best at r70, M at r50), pilots whose curves are CURVES (RACE picks r50,
    RACE+ r70) and fresh seeds on the full grid's means; TRL's default is r85's allocation."""
    full = pd.concat([grid(s, SHAPES[s], FULL_SEEDS, budget=C) for s in shapes], ignore_index=True)
    parts = [pilots_with_curves(s) for s in shapes]
    pilots = pd.concat([p for p, _ in parts], ignore_index=True)
    curves = pd.concat([c for _, c in parts], ignore_index=True)
    fresh = pd.concat([grid(s, SHAPES[s], FRESH_SEEDS, budget=C) for s in shapes], ignore_index=True)
    for frame in (full, fresh):
        frame[["P", "G", "K", "mu"]] = [(8, 2 + list(RHO).index(c), 2, 1) for c in frame["cell"]]
    defaults = fresh[fresh["cell"] == "r85"].assign(cell="default")
    quarter = pilots.assign(C_total=pilots["C_total"] / 2)  # a second fraction: its FLOPs count, nothing else
    return plus_table(full, {0.5: pilots, 0.25: quarter}, curves, fresh, defaults, {}, C)


def test_plus_table_scores_both_picks_and_the_default_against_the_full_grid():
    tables = plus_study()
    row = tables.settings.set_index("setting")
    assert row["race_pick"].to_dict() == {"S": "r50", "M": "r50"}
    assert row["plus_pick"].to_dict() == {"S": "r70", "M": "r70"}
    assert row["default_cell"].to_dict() == {"S": "r85", "M": "r85"}
    assert row["full_best_cell"].to_dict() == {"S": "r70", "M": "r50"}
    # the fresh seeds sit on the full grid's cell means, so each regret is the gap of the cell means
    s, m = SHAPES["S"], SHAPES["M"]
    expected = {("S", "race"): s[3] - s[2], ("S", "plus"): 0.0, ("S", "default"): s[3] - s[4],
                ("M", "race"): 0.0, ("M", "plus"): m[2] - m[3], ("M", "default"): m[2] - m[4]}  # fmt: skip
    for (setting, key), regret in expected.items():
        assert row.loc[setting, f"{key}_regret"] == pytest.approx(regret), (setting, key)
        assert (
            row.loc[setting, f"{key}_regret_low"]
            <= regret + 1e-12
            <= row.loc[setting, f"{key}_regret_high"] + 2e-12
        )
        assert row.loc[setting, f"{key}_fresh_seeds"] == len(FRESH_SEEDS)
    assert row.loc["S", "plus_in_best_set"] and not row.loc["S", "race_in_best_set"]
    assert row.loc["M", "race_in_best_set"] and not row.loc["M", "plus_in_best_set"]
    assert not row["default_in_best_set"].any()
    assert row.loc["S", "pilot_flops_fraction"] == pytest.approx(0.5 * 5 / 10)
    assert row.loc["S", "all_pilot_flops_fraction"] == pytest.approx(0.75 * 5 / 10)
    assert (row["pilot_fraction"] == 0.5).all()
    assert row.loc["S", "plus_spearman"] > row.loc["S", "race_spearman"]
    cells = tables.cells.set_index(["setting", "cell"])
    assert cells.loc[("S", "r70"), "full_mean"] == pytest.approx(s[3])
    assert cells.loc[("S", "r70"), "error"] == pytest.approx(rise(1.0, *CURVES["r70"]) - s[3], abs=0.01)
    summary = tables.summary.iloc[0]
    assert summary["settings"] == 2
    for key in ("race", "plus", "default"):
        mean = np.mean([v for (_, k), v in expected.items() if k == key])
        assert summary[f"{key}_mean_regret"] == pytest.approx(mean)
        assert summary[f"{key}_regret_low"] <= mean + 1e-12 <= summary[f"{key}_regret_high"] + 2e-12
    assert summary["race_in_best_set_share"] == 0.5 and summary["plus_in_best_set_share"] == 0.5
    assert summary["default_in_best_set_share"] == 0.0


def test_plus_table_with_one_seed_has_no_intervals_and_says_why():
    tables = plus_study(("S",))
    row = tables.settings.iloc[0]
    assert np.isfinite(row["race_regret"]) and np.isfinite(row["race_regret_low"])
    assert np.isnan(tables.summary.iloc[0]["race_regret_low"])  # one setting: no bootstrap over settings
    assert "needs 2" in tables.summary.iloc[0]["race_note"]


def test_race_check_specs_runs_both_picks_on_the_fresh_seeds_once_each():
    """The default, RACE's pick and RACE+'s pick at C on the fresh seeds; a pick that is the other, or
    the default's allocation (cpu-tiny's r66 is K = G = 8, mu = 1, P = 8), is the same runs."""
    from dataclasses import replace

    from paper_repro.config import load_profile
    from paper_repro.run.spec import race_check_specs

    profile = load_profile("cpu-tiny")  # the estimate's stop: no tokenizer to price a costliest round
    profile = replace(profile, train=replace(profile.train, budget_stop="dearest"))
    n = len(profile.fresh_seeds)
    both = race_check_specs(profile, "M", "r50", "r90")
    assert [s.cell for s in both] == ["default"] * n + ["r50"] * n + ["r90"] * n
    assert {s.seed for s in both} == set(profile.fresh_seeds)
    assert all(s.budget_kind == "full" and s.budget_flops == profile.budget_flops for s in both)
    assert [s.run_id for s in race_check_specs(profile, "M", "r50", "r50")] == [
        s.run_id for s in both[: 2 * n]
    ]
    assert [s.cell for s in race_check_specs(profile, "M", "r66", None)] == ["default"] * n  # TRL's default
