"""The compute-curve analysis (:mod:`paper_repro.analysis.tables.curves`) on synthetic ``curves.csv`` tables
whose truths are known by construction: saturating curves with a known asymptote, a best cell that
moves (or not) with the budget, a best policy size that grows (or not)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from paper_repro.analysis.claims import curves as cc
from paper_repro.analysis.figures.registry import Context, draw_figures
from paper_repro.analysis.tables import curve_rows as cr
from paper_repro.analysis.tables import curves as cv
from paper_repro.common.results import CURVE_COLUMNS
from tests.worlds import (
    BASE,
    LADDER,
    LADDER_A,
    STAGE_A,
    curve_rows,
    flat,
    growing,
    known,
    moving_peak,
    static_peak,
)

CURVE_CLAIMS = ("curves.moves", "curves.grows", "size_star.top")


# ---------------------------------------------------------------------------------------- the fit


def test_fit_recovers_a_known_asymptote():
    truth = known(0.7, 0.25, 1.5)
    rows = curve_rows(lambda *a: truth(a[-1]), cells={"r50": 0.5}, points=LADDER_A)
    fits = cv.fit_table(rows, targets=["native_reward"])
    r = fits.iloc[0]
    assert r["status"] == "identified", r["reason"]
    assert r["R0_fixed"] and r["R0"] == pytest.approx(BASE)
    assert abs(r["A"] - 0.7) < 0.03
    assert r["A_lo"] <= 0.7 <= r["A_hi"]
    assert 0.25 / 1.5 < r["C_mid_point"] < 0.25 * 1.5
    assert abs(r["B"] - 1.5) < 0.5
    assert r["n_points"] == len(LADDER_A) and r["n_seeds"] == 5


def test_fit_with_a_free_start():
    truth = known(0.7, 0.25, 1.5)
    rows = curve_rows(lambda *a: truth(a[-1]), cells={"r50": 0.5}, points=LADDER_A, base=None)
    r = cv.fit_table(rows, targets=["native_reward"]).iloc[0]
    assert not r["R0_fixed"]
    assert r["status"] == "identified", r["reason"]
    assert abs(r["A"] - 0.7) < 0.05 and abs(r["R0"] - BASE) < 0.1


def test_a_curve_that_has_not_bent_is_not_identified():
    truth = known(0.9, 100.0, 1.0)  # half the gain at 100 C: still rising at the ladder's top
    rows = curve_rows(lambda *a: truth(a[-1]), cells={"r50": 0.5}, points=LADDER_A)
    r = cv.fit_table(rows, targets=["native_reward"]).iloc[0]
    assert r["status"] == "not identified"
    assert np.isnan(r["A"]) and np.isfinite(r["A_fit"])
    assert "not bent" in r["reason"]


def test_a_curve_on_its_plateau_pins_its_asymptote():
    truth = known(0.6, 0.01, 1.5)  # half the gain at C/100: the ladder sees the plateau
    rows = curve_rows(lambda *a: truth(a[-1]), cells={"r50": 0.5}, points=LADDER_A)
    r = cv.fit_table(rows, targets=["native_reward"]).iloc[0]
    assert r["status"] == "identified" and "only A is pinned" in r["reason"]
    assert abs(r["A"] - 0.6) < 0.02


def test_a_curve_the_form_does_not_fit_is_not_identified():
    def dip(point):  # below the base policy first, then up: no saturating curve from R0 = 0.3
        return 0.15 + 0.1 * (math.log2(point) + 4)

    rows = curve_rows(lambda *a: dip(a[-1]), cells={"r50": 0.5}, points=LADDER)
    r = cv.fit_table(rows, targets=["native_reward"]).iloc[0]
    assert r["status"] == "not identified" and "does not fit" in r["reason"]
    assert r["p_lack_of_fit"] < 0.05


def test_one_seed_gives_no_interval_never_zero():
    truth = known(0.7, 0.25, 1.5)
    rows = curve_rows(lambda *a: truth(a[-1]), cells={"r50": 0.5}, points=LADDER_A, seeds=1)
    r = cv.fit_table(rows, targets=["native_reward"]).iloc[0]
    assert r["status"] == "not identified" and "one seed" in r["reason"]
    assert np.isnan(r["A"]) and np.isnan(r["A_lo"]) and np.isnan(r["A_hi"]) and np.isnan(r["C_mid_lo"])


def test_too_few_points_is_no_fit():
    rows = curve_rows(flat, cells={"r50": 0.5}, points=(0.5, 1.0), base=None)
    r = cv.fit_table(rows, targets=["native_reward"]).iloc[0]
    assert r["status"] == "no fit" and "fewer than 4 points" in r["reason"]


# ---------------------------------------------------------------------------------------- rho*(C), size*(C)


def _best(table: pd.DataFrame, point: float, column: str = "best_cells", **where) -> str:
    mask = (table["point"] == point) & (table["target"] == "native_reward")
    for k, v in where.items():
        mask &= table[k] == v
    return table.loc[mask, column].iloc[0]


def test_rho_star_follows_a_moving_and_a_static_best():
    moving = cv.rho_star_table(curve_rows(moving_peak), targets=["native_reward"])
    assert _best(moving, 0.0625) == "r15" and _best(moving, 1.0) == "r85"
    assert _best(moving, 1.0, "best_rhos") == "0.860"  # the measured rho (target 0.85 + 0.01)
    assert _best(moving, 1.0, "best_target_rhos") == "0.850"
    static = cv.rho_star_table(curve_rows(static_peak), targets=["native_reward"])
    assert set(static.loc[static["target"] == "native_reward", "best_cells"]) == {"r50"}


def test_rho_star_leaves_out_infeasible_cells_and_says_so():
    rows = curve_rows(moving_peak, infeasible={("r15", 0.0625): "*"})
    table = cv.rho_star_table(rows, targets=["native_reward"])
    first = table[table["point"] == 0.0625].iloc[0]
    assert (
        first["infeasible_cells"] == "r15" and first["n_cells"] == 4 and "r15" not in first["cells"].split()
    )
    assert "feasible cells only" in first["note"]
    ends = cc.setting_ends(rows, "native_reward")
    # C/8 measures every cell, but r70 sits within 0.02 of the base policy there: C/4 is the low end
    assert ends[0].low_point == 0.25 and ends[0].high_point == 1.0


def test_size_star_finds_the_growing_best_size():
    rows = curve_rows(growing, settings=STAGE_A, points=LADDER_A)
    table = cv.size_star_table(rows, targets=["native_reward"])
    assert _best(table, 0.0625, "best_sizes") == "S"
    assert _best(table, 4.0, "best_sizes") == "L"
    assert _best(table, 4.0, "argmax_pair") == "L:r50"
    assert cv.size_order(["L", "S", "M"]) == ["S", "M", "L"]
    assert cv.size_order(["7B", "1.5B", "3B"]) == ["1.5B", "3B", "7B"]


# ---------------------------------------------------------------------------------------- the claims


def _moves(*truths, sd: float = 0.01) -> str:
    names = [f"s{i}" for i in range(len(truths))]
    rows = pd.concat(
        [
            curve_rows(t, settings={n: "B"}, sd=sd, rng_seed=i)
            for i, (n, t) in enumerate(zip(names, truths, strict=True))
        ]
    )
    return cc.moves_decide(cc.setting_ends(rows, "native_reward")).verdict


def test_moves_claim_returns_each_verdict():
    assert _moves(moving_peak, moving_peak) == "held"
    assert _moves(static_peak, static_peak) == "not held"
    assert _moves(flat, flat, sd=0.05) == "inconclusive"
    assert _moves(moving_peak, static_peak) == "heterogeneous"
    rows = pd.concat(
        [curve_rows(moving_peak, settings={"M": "A"}), curve_rows(moving_peak, settings={"sparse": "B"})]
    )
    assert [e.name for e in cc.setting_ends(rows, "native_reward", shared={"sparse": "M"})] == ["M"]
    assert cc.moves_decide([]).verdict == "inconclusive"


def test_moves_rule_and_aggregation():
    assert cc.aggregate_moves(["held", "held", "not held"]) == "held"
    assert cc.aggregate_moves(["not held", "not held", "inconclusive"]) == "not held"
    assert cc.aggregate_moves(["held", "not held", "inconclusive"]) == "heterogeneous"
    assert cc.aggregate_moves(["held", "inconclusive", "inconclusive"]) == "inconclusive"


def test_operating_characteristics_by_simulation():
    rows = curve_rows(moving_peak)
    oc = cc.moves_operating(cc.setting_ends(rows, "native_reward"), replicates=60)
    assert set(oc) >= {"oc_wrong_max", "oc_wrong_truth", "oc_agreement_min", "oc_held_when_true", "power_now"}
    assert 0 <= oc["oc_wrong_max"] <= 0.05 and oc["oc_held_when_true"] > 0.9 and oc["power_now"] > 0.9
    static = cc.moves_operating(cc.setting_ends(curve_rows(static_peak), "native_reward"), replicates=60)
    assert static["oc_not_held_when_false"] > 0.9  # the static truth: the best cell stays
    one = cc.moves_operating(cc.setting_ends(curve_rows(moving_peak, seeds=1), "native_reward"))
    assert np.isnan(one["oc_wrong_max"]) and "one seed" in one["oc_note"]


def test_claims_rows_use_the_claims_table_columns():
    rows = pd.concat([curve_rows(growing, settings=STAGE_A, points=LADDER_A), curve_rows(moving_peak)])
    table = curve_claims(rows)
    assert list(table["id"]) == list(CURVE_CLAIMS)
    assert list(table["claim"]) == [
        "the best allocation moves with the budget",
        "as the budget grows, the best policy gets bigger",
        "at the ladder's top, the largest policy beats the smallest",
    ]
    assert set(table["kind"]) == {"our addition"}
    assert set(table["verdict"]) <= {"held", "not held", "inconclusive", "heterogeneous"}
    assert list(table["verdict"].iloc[1:]) == ["held", "held"]  # L's advantage at 4C, and its growth
    from paper_repro.analysis.claims.table import COLUMNS

    assert set(table.columns) <= set(COLUMNS)  # the claims table's, whose owner is table.py


# ---------------------------------------------------------------------------------------- extrapolation


def test_extrapolation_recovers_a_known_curve():
    truth = known(0.7, 0.125, 1.5)
    rows = curve_rows(lambda *a: truth(a[-1]), cells={"r30": 0.3, "r70": 0.7})
    table = cv.extrapolation_table(rows, targets=["native_reward"], bootstrap=100)
    assert len(table) == 2 and set(table["status"]) == {"ok"}
    assert (table["abs_error"] < 0.02).all()
    assert table["covered"].all()
    summary = cv.extrapolation_summary(table)
    assert summary.iloc[0]["median_abs_error"] < 0.02 and summary.iloc[0]["share_covered"] == 1.0


# ---------------------------------------------------------------------------------------- the entry point


CURVE_FIGURES = ("curves", "rho_star_vs_budget", "compute_optimal_envelope")


def curve_tables(result: cv.CurveAnalysis, curves: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """What the curve figures draw, by table name."""
    return {
        "curves": curves,
        "curve_fits": result.fits,
        "rho_star_by_budget": result.rho_star,
        "size_star_by_budget": result.size_star,
    }


def test_empty_curves_give_empty_tables_and_no_figures(tmp_path):
    for empty in (pd.DataFrame(columns=list(CURVE_COLUMNS)), pd.DataFrame()):
        result = cv.curve_analysis(empty)
        for table in (result.fits, result.rho_star, result.size_star, result.extrapolation,
                      result.extrapolation_summary):  # fmt: skip
            assert table.empty
        assert draw_figures(curve_tables(result, empty), tmp_path, Context(), only=CURVE_FIGURES) == []
        assert set(curve_claims(empty)["verdict"]) == {"inconclusive"}


def test_a_quick_run_says_what_it_cannot_estimate():
    quick = {"r15": 0.15, "r50": 0.5, "r85": 0.85}
    rows = curve_rows(moving_peak, cells=quick, seeds=1)
    result = cv.curve_analysis(rows.astype(str), recipe_sd=0.0)  # a CSV's text cells
    fits = result.fits[result.fits["target"] == "native_reward"]
    assert fits["A_lo"].isna().all() and (fits["status"] != "identified").all()
    assert fits["reason"].str.contains("one seed").all()
    assert result.rho_star["note"].str.contains("no seed replication").all()
    claims = curve_claims(rows.astype(str))
    assert set(claims["verdict"]) == {"inconclusive"}
    assert claims["oc_wrong_max"].isna().all()
    assert result.extrapolation["covered"].isna().all()
    assert set(result.extrapolation["status"]) <= {
        "no interval: one seed",
        "no fit: too few points up to C/2",
    }


def test_figures_are_written(tmp_path):
    rows = pd.concat([curve_rows(growing, settings=STAGE_A, points=LADDER_A, seeds=3),
                      curve_rows(moving_peak, seeds=3)])  # fmt: skip
    result = cv.curve_analysis(rows, recipe_sd=0.0, targets=["native_reward"], bootstrap=30)
    written = draw_figures(curve_tables(result, rows), tmp_path, Context(), only=CURVE_FIGURES)
    assert sorted(written) == [
        "compute_optimal_envelope_native_reward",
        "curves_native_reward",
        "rho_star_vs_budget_native_reward",
    ]
    assert all((tmp_path / f"{name}.png").stat().st_size > 0 for name in written)


def test_grid_curves_label_the_grid_runs_and_give_their_base():
    rows = curve_rows(moving_peak, settings={"M": "A"}, base=None, seeds=2)
    runs = rows.drop_duplicates("run_id")[["run_id", "stage", "setting", "cell", "target_rho"]]
    grid = pd.concat([runs.assign(base_native_reward=0.25),
                      runs.assign(stage="B", setting="sparse", base_native_reward=0.25)])  # fmt: skip
    stray = curve_rows(flat, settings={"M": "A"}, seeds=1).assign(run_id="a-fresh-seed")
    labelled = cr.grid_curves(pd.concat([rows, stray]), grid)
    assert len(labelled) == 2 * len(rows) and set(labelled["setting"]) == {"M", "sparse"}
    assert (labelled["base_native_reward"] == 0.25).all()
    assert cr.grid_curves(rows.iloc[0:0], grid).empty


def curve_claims(curves: pd.DataFrame, replicates: int = 20) -> pd.DataFrame:
    """The two compute-curve claims' rows of the claims table, decided by the registry on a study
    that has only ``curves`` (stage A's policies in the curves' own order)."""
    from paper_repro.analysis.claims import Classes, Study
    from paper_repro.analysis.claims.table import claims_table
    from paper_repro.analysis.stats.best_sets import DEFAULT

    classes = Classes(rule_based=(), prm_style=(), process=(), sizes=(), middle=())
    grid = pd.DataFrame(columns=["setting", "cell", "seed", "rho", "native_reward"])
    study = Study(grid, classes, DEFAULT, curves=curves, replicates=replicates)
    return claims_table(study, leave_one_out=False, ids=CURVE_CLAIMS)
