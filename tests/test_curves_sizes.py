"""The budget claims' low end (the first point where every cell has left the base policy) and the
size contrasts (size_star.top, curves.grows) on curves whose truth is known, with their simulated
operating characteristics and the fast path they simulate with."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from paper_repro.analysis.claims import curves as cc
from paper_repro.analysis.claims import sizes as cs
from paper_repro.analysis.stats.contrasts import ANY, contrast, directional_verdict
from paper_repro.analysis.tables import curves as cv
from tests.worlds import LADDER, LADDER_A, STAGE_A, curve_rows, flat, growing, large_always

ORDER = ["S", "M", "L"]
COLUMNS = {"oc_wrong_max", "oc_wrong_truth", "oc_agreement_min", "oc_held_when_true", "oc_not_held_when_false",
           "oc_note", "power_now", "seeds_for_80pct_power", "power_note"}  # fmt: skip


def late_peak(setting, cell, rho, point):
    """Every cell at the base policy (0.3) up to C/4, then a peak that moves from 0.15 to 0.85."""
    if point <= 0.25:
        return 0.3
    peak = 0.15 if point < 1.0 else 0.85
    return 0.6 - 2.0 * (rho - peak) ** 2


def test_a_cell_has_left_the_base_policy_when_its_change_is_large_and_beyond_noise():
    rows = cv.prepared(curve_rows(flat, seeds=5, sd=0.01))  # every cell 0.5, base 0.3
    at = rows[rows["point"] == 1.0]
    assert cv.left_base(at, "native_reward") == (True, "")
    near = at.assign(native_reward=at["native_reward"] - 0.19)  # 0.01 above base: inside the margin
    left, why = cv.left_base(near, "native_reward")
    assert not left and "r15 +0.0" in why
    noisy = at.assign(native_reward=0.33 + np.resize([0.3, -0.3], len(at)))  # 0.03 above base, SD 0.3
    assert not cv.left_base(noisy, "native_reward")[0]
    unstepped = at.assign(steps=0)
    assert "no optimizer step" in cv.left_base(unstepped, "native_reward")[1]


def test_moves_compares_the_first_point_where_the_cells_have_left_the_base_policy():
    rows = curve_rows(late_peak)
    (ends,) = cc.setting_ends(rows, "native_reward")
    assert ends.low_point == 0.5 and ends.high_point == 1.0  # C/16 to C/4 are the base policy
    result = cc.moves_decide([ends])
    assert result.verdict == "held" and "M 0.5C -> 1C: moves" in result.note


def test_moves_is_inconclusive_when_only_the_top_has_left_the_base_policy():
    rows = curve_rows(lambda s, c, rho, point: 0.6 if point == 1.0 else 0.3)
    ends, skipped = cc.frontier_ends(rows, "native_reward")
    assert ends == [] and "no point below the top (1C)" in skipped[0]
    result = cc.moves_decide(ends, skipped=skipped)
    assert result.verdict == "inconclusive" and "no point below the top" in result.note


def _sizes(truth, growth: bool, sd: float = 0.01, seeds: int = 5, tau: float = 0.0):
    rows = curve_rows(truth, settings=STAGE_A, points=LADDER_A, sd=sd, seeds=seeds)
    return cs.sizes_decide(rows, "native_reward", ORDER, tau, np.inf, 0.02, growth)


@pytest.mark.parametrize(
    "truth, growth, sd, verdict",
    [
        (large_always, False, 0.01, "held"),  # L 0.2 above S at every point
        (flat, False, 0.01, "not held"),  # the sizes are equal
        (flat, False, 0.3, "inconclusive"),  # too noisy to say
        (growing, True, 0.01, "held"),  # S best at small budgets, L at large
        (large_always, True, 0.01, "not held"),  # L's advantage does not grow
        (large_always, True, 0.3, "inconclusive"),
    ],
)
def test_the_size_contrasts_return_every_verdict(truth, growth, sd, verdict):
    assert _sizes(truth, growth, sd).verdict == verdict


def test_the_size_contrast_reads_the_top_and_the_lowest_point_that_left_the_base_policy():
    result = _sizes(large_always, growth=False)
    assert "L - S at 4C over 5 cells" in result.note and "at 0.0625C, the lowest point" in result.note
    assert result.value == pytest.approx(0.2, abs=0.01) and result.low < result.value < result.high
    assert "these recipes" in result.note and "any recipe at this rho" in result.note
    wider = _sizes(large_always, growth=False, tau=0.05)
    assert wider.high - wider.low > result.high - result.low  # the recipe effect widens the any-recipe level


def test_growth_without_a_point_that_left_the_base_policy_is_inconclusive_and_says_why():
    result = _sizes(lambda s, c, rho, point: 0.6 if point == 4.0 else 0.3, growth=True)
    assert result.verdict == "inconclusive" and "at 2C" in result.note


def test_the_fast_path_agrees_with_contrast_and_directional_verdict():
    rows = curve_rows(growing, settings=STAGE_A, points=LADDER_A, sd=0.03, seeds=4)
    sc = cs.size_claim(rows, "native_reward", ORDER, 0.02, growth=True)
    tau, tau_df = 0.02, 15.0
    general = sc.estimate("native_reward", tau, tau_df)[ANY]
    names = list(sc.weights)
    wide = sc.rows.pivot_table(index="seed", columns="cell", values="native_reward").reindex(columns=names)
    d = wide.to_numpy(float) @ np.array([sc.weights[n] for n in names])
    value, se, df = cs.paired_estimates(d[None, :], tau**2 * sum(w * w for w in sc.weights.values()), tau_df)
    assert (value[0], se[0], df[0]) == pytest.approx((general.value, general.se, general.df), rel=1e-9)
    for margin in (-1.0, 0.02, 1.0):  # each verdict in turn
        want = directional_verdict(general, margin, cs.LEVEL)[0]
        assert cs.CODES[int(cs.directional_codes(value, se, df, margin)[0])] == want


def test_the_size_contrasts_operating_characteristics():
    rows = curve_rows(large_always, settings=STAGE_A, points=LADDER_A, sd=0.02)
    world = cs.sizes_world(rows, "native_reward", ORDER, 0.01, np.inf, 0.02, False)
    oc = cs.sizes_operating(world, 0.02, replicates=400)
    assert set(oc) >= COLUMNS
    assert oc["oc_wrong_max"] <= 0.05 + 0.02  # each side a 5% test; 400 studies: about +-2 points
    assert oc["power_now"] > 0.95 and oc["seeds_for_80pct_power"] <= 5
    assert oc["oc_not_held_when_false"] > 0.6  # equal sizes: its 90% upper end under 0.02 (se about 0.008)
    none = cs.sizes_operating(None, 0.02)
    assert set(none) >= COLUMNS and "not simulated" in none["oc_note"]


def test_the_planner_order_of_sizes_is_respected_when_the_curves_name_fewer():
    rows = curve_rows(large_always, settings={"S": "A", "L": "A"}, points=LADDER)
    assert "L - S" in cs.sizes_decide(rows, "native_reward", ["S", "L"], 0.0, np.inf, 0.02, False).note
    assert isinstance(cs.size_claim(rows, "native_reward", ["S"], 0.02, False), str)
    assert contrast(pd.DataFrame(columns=["setting", "cell", "seed", "x"]), "x", {})[ANY].value == 0.0
