"""The analysis on synthetic result tables whose truths are known by construction.

A synthetic study has the cpu-tiny profile's settings and planned cells; each target of each
setting follows a known frontier (flat, or a parabola peaking at a chosen rho) plus seed noise. The
verdicts must follow the truth: a flat world gives no *held* on any rho* claim; a world with every
optimum at 0.45 gives *not held* for 0.72 and *held* for 0.445, and no verdict on "PRM-style is
lower" (the sets hold the cells either side of 0.45); PRM-style optima above rule-based ones refute
it; the paper's world (0.72 rule-based,
0.445 PRM-style) gives *held* for both and for "PRM-style is lower".
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from paper_repro import rewards
from paper_repro.analysis import analyse, design
from paper_repro.analysis.claims import Classes
from paper_repro.analysis.claims.columns import seeds_needed
from paper_repro.analysis.claims.frontier import disagree, near, pass1_vs_judge
from paper_repro.analysis.claims.race import no_race_gain
from paper_repro.analysis.claims.tables import loglinear
from paper_repro.analysis.stats.best_sets import DEFAULT
from paper_repro.analysis.stats.optima import (
    Cells,
    best_set,
    fieller,
    fit_optimum,
    isotonic,
    unimodal,
    window_verdict,
)
from paper_repro.analysis.tables.race import RegimeThresholds
from paper_repro.common.results import METRICS
from paper_repro.run.allocation import plan_setting
from paper_repro.run.spec import spec_for
from tests import fixtures
from tests.worlds import PROFILE, START, as_recorded, paper_peaks, parabola_rows, write_runs


def analysed(tmp_path, peak, **kwargs):
    as_recorded(write_runs(tmp_path / "runs.csv", peak, **kwargs))
    return analyse(
        PROFILE, results_root=tmp_path, figures_dir=tmp_path / "figures", power_replicates=0, figures=False
    )


def verdicts(result) -> dict[str, str]:
    """Each claim's verdict, by its id."""
    return dict(zip(result.claims["id"], result.claims["verdict"], strict=True))


RULE, PRM, LOWER = "rho_star.rule_based", "rho_star.prm_style", "rho_star.prm_lower"
# the same claims as regime contrasts, at the "any recipe at this rho" level and the cells as run
REGIMES = ("regime.rule_based", "regime.prm_style", "regime.interaction")
LEVELS = (".any", ".these")
CARD = {"device": {"type": "cpu", "name": "cpu", "peak_flops_per_s": 1e11}, "steps": 4, "rounds": 4,
        "rho": 0.5, "rho_executed": 0.4, "rho_time": 0.2, "seconds": {"total": 2.0},
        "flops": {"useful": {"C_total": 3e9}, "executed": {"C_total": 4e9}},
        "achieved_flops_per_s": {"total": 2e9}, "utilisation": {"total": 0.02}}  # fmt: skip


@pytest.fixture(scope="module")
def paper_world(tmp_path_factory):
    """The paper's world (noise 0.01, three grid seeds) as the study records it, with a compute card
    for its first run and one for a run not in its table, analysed once (the power column at 4
    replicates) for the tests that only read the analysis and its folder. Returns (folder, the
    carded run's id, the analysis)."""

    def build(root):
        as_recorded(write_runs(root / "runs.csv", paper_peaks, noise=0.01))
        run_id = pd.read_csv(root / "runs.csv")["run_id"].iloc[0]
        (root / "steps").mkdir()
        (root / "steps" / f"{run_id}.card.json").write_text(json.dumps(CARD))
        (root / "steps" / "not-a-run-of-this-table.card.json").write_text(json.dumps(CARD))
        result = analyse(PROFILE, results_root=root, figures_dir=root / "figures", power_replicates=4)
        return root, run_id, result

    return fixtures.shared(tmp_path_factory, "paper-world", build)


# ------------------------------------------------------------------------------- known truths


SLOW = pytest.mark.slow  # seeds 1, 2: seed 0 and test_design.py::test_the_rules_are_seldom_wrong_with_the_noise_they_allow_for cover it


@pytest.mark.parametrize("rng_seed", [0, pytest.param(1, marks=SLOW), pytest.param(2, marks=SLOW)])
def test_a_flat_world_holds_no_rho_star_claim(tmp_path, rng_seed):
    result = analysed(tmp_path, lambda s: None, noise=0.03, rng_seed=rng_seed)
    v = verdicts(result)
    for claim in (RULE, PRM, LOWER, *(r + lv for r in REGIMES for lv in LEVELS)):
        assert v[claim] != "held", (claim, result.claims.set_index("id").loc[claim, "note"])
    # Gupta's set keeps the best cell at 95%, not every equal one: a flat frontier of three seeds over six
    # to eight cells (the second recipes) loses a cell now and then, and its optimum is then identified
    assert (result.optima["status"] == "not identified").mean() > 0.6


def test_every_optimum_at_045_refutes_072_and_holds_0445(tmp_path):
    result = analysed(tmp_path, lambda s: 0.45, noise=0.005, curvature=4, seeds=5)
    v = verdicts(result)
    assert v[RULE] == "not held" and v[PRM] == "held"
    for lv in LEVELS:  # the contrasts: the search-heavy window wins everywhere; no interaction to hold
        assert (v["regime.rule_based" + lv], v["regime.prm_style" + lv]) == ("not held", "held")
        assert v["regime.interaction" + lv] != "held"
    # equal optima: never "held". Each best set holds the two cells either side of 0.45 (rho 0.37-0.52),
    # and sets that overlap by more than SAME_RHO allow either order, so the set rule cannot refute it
    assert v[LOWER] == "inconclusive", v[LOWER]


def test_a_prm_optimum_above_the_rule_based_one_refutes_lower(tmp_path):
    peaks = lambda s: 0.66 if rewards.is_prm_based(s.reward_system) else 0.15  # noqa: E731
    result = analysed(tmp_path, peaks, noise=0.005, curvature=4, seeds=5)
    v = verdicts(result)
    assert v[LOWER] == "not held", result.claims.set_index("id").loc[LOWER, "best_cells"]
    assert v["regime.interaction.any"] == v["regime.interaction.these"] == "not held"  # the reversed world


def test_the_papers_world_holds_both_optima_and_lower(tmp_path):
    result = analysed(tmp_path, paper_peaks, noise=0.005, curvature=4, seeds=5)
    v = verdicts(result)
    assert v[RULE] == "held" and v[PRM] == "held" and v[LOWER] == "held"
    assert all(v[r + lv] == "held" for r in REGIMES for lv in LEVELS), {r: v[r + ".any"] for r in REGIMES}
    assert v["allocation.matters"] == "held"
    assert set(result.claims["registration"]) == {"exploratory"}  # its runs predate the rules (2026-12-01)
    tests = result.rho_star_tests.set_index("setting")
    assert (tests["verdict"] == "held").all()
    assert tests.loc["M", "rho_star"] == pytest.approx(0.72, abs=0.07)  # cells nearest 0.72: 0.68, 0.76


def test_the_papers_world_at_the_observed_height_holds_the_contrasts(tmp_path):
    """The paper's optima on frontiers as tall as the committed ones (a parabola falling 0.13 from its
    peak to the grid's far end), five seeds: the regime contrasts hold where the best-cell windows
    cannot."""
    result = analysed(tmp_path, paper_peaks, noise=0.01, curvature=0.4, seeds=5)
    v = verdicts(result)
    assert all(v[r + ".any"] == "held" for r in REGIMES), {r: v[r + ".any"] for r in REGIMES}


def test_second_recipes_unlike_their_first_refute_that_rho_suffices(tmp_path):
    """Rho not sufficient: each second recipe 0.15 from its first at the same rho (five times the
    margin on the recipe SD), on quiet seeds: "at equal rho, the recipe does not matter" is not held."""
    result = analysed(
        tmp_path, paper_peaks, noise=0.005, curvature=4, seeds=5, offsets={"r50b": 0.15, "r78b": -0.15}
    )
    row = result.claims.set_index("id").loc["recipes.rho_suffices"]
    assert row["verdict"] == "not held", row["note"]


def test_a_setting_sharing_its_runs_counts_once(paper_world):
    _, _, result = paper_world
    optima = result.optima.set_index(["setting", "target"])
    assert optima.loc[("sparse", "native_reward"), "same_runs_as"] == "M"
    note = result.claims.set_index("id").loc[RULE, "note"]
    assert "sparse" not in note and "M:" in note


# ------------------------------------------------------------------------------- the estimator


def test_fieller_interval_by_hand():
    # b1 = 1.2, b2 = -1 (vertex 0.6), Var(b1) = Var(b2) = 0.01, no covariance, t = 2:
    # A = 1 - 0.04 = 0.96, B = -1.2, C = 1.44 - 0.04 = 1.40; theta = (B -+ sqrt(B^2 - A C)) / A
    lo_theta = (-1.2 - np.sqrt(1.44 - 0.96 * 1.40)) / 0.96
    hi_theta = (-1.2 + np.sqrt(1.44 - 0.96 * 1.40)) / 0.96
    assert fieller(1.2, -1.0, 0.01, 0.0, 0.01, 2.0) == pytest.approx((-hi_theta / 2, -lo_theta / 2))
    assert fieller(1.2, -0.1, 0.01, 0.0, 0.01, 2.0) is None  # curvature not significant: unbounded


def _frontier(peak, noise=0.02, seeds=5, rng_seed=0, curvature=1.0):
    cells = {f"r{round(c * 100)}": c for c in (0.16, 0.31, 0.5, 0.69, 0.84)}
    return pd.DataFrame(
        parabola_rows(cells, peak, seeds, noise, np.random.default_rng(rng_seed), curvature=curvature)
    )


def test_the_best_set_covers_the_best_cell_at_its_level():
    misses = 0
    for i in range(200):
        data = _frontier(0.55, noise=0.03, seeds=5, rng_seed=i)
        cells = Cells.of(data, "y")
        misses += not best_set(cells)[list(cells.names).index("r50")]  # r50 (0.50) is the true best
    assert misses / 200 <= 0.05


def test_a_cell_left_out_of_the_best_set_is_one_dunnett_rejects():
    """With no recipe effect and equal seed variances, the best set's Bonferroni constant on Welch's
    degrees of freedom is wider than Dunnett's exact one, so every cell it drops, scipy.stats.dunnett
    (one-sided, the best cell as control) rejects at 5%."""
    from scipy import stats

    rng = np.random.default_rng(0)
    deviations = rng.normal(0, 0.03, 6)
    dropped = 0
    for _ in range(20):
        means = rng.normal(0.5, 0.04, 5)
        data = pd.DataFrame(
            [{"cell": f"c{i}", "rho": i / 5, "y": m + d} for i, m in enumerate(means) for d in deviations]
        )
        cells = Cells.of(data, "y")
        keep = best_set(cells)
        groups = {c: data.loc[data["cell"] == c, "y"].to_numpy() for c in cells.names}
        best = cells.names[int(np.argmax(cells.mean))]
        others = [c for c in cells.names if c != best]
        p = stats.dunnett(*(groups[c] for c in others), control=groups[best], alternative="less").pvalue
        for c, pc in zip(others, p, strict=True):
            if not keep[cells.names.index(c)]:
                dropped += 1
                assert pc < 0.05, (c, pc)
    assert dropped > 10  # the check saw cells to drop


def test_the_recipe_effect_widens_the_best_set():
    cells = Cells.of(_frontier(0.84, noise=0.001, curvature=3), "y")
    assert [c for c, k in zip(cells.names, best_set(cells), strict=True) if k] == ["r84"]
    assert best_set(cells, recipe_sd=1.0).all()  # a recipe effect as large as the frontier
    assert best_set(Cells.of(_frontier(None, noise=0.05), "y")).sum() >= 4


def test_unimodal_fit_is_scipys_isotonic_fit_on_its_best_split():
    """The vectorised fit against scipy.optimize.isotonic_regression, tried on every split."""
    from scipy.optimize import isotonic_regression

    rng = np.random.default_rng(0)
    for k in (1, 2, 3, 5, 7):
        y, w = rng.normal(size=(30, k)), rng.integers(1, 10, size=k).astype(float)
        assert isotonic(y, w) == pytest.approx(np.array([isotonic_regression(r, weights=w).x for r in y]))
        for row, fit in zip(y, unimodal(y, w), strict=True):
            sse = []
            for m in range(k + 1):
                up = isotonic_regression(row[:m], weights=w[:m]).x if m else np.zeros(0)
                down = (
                    isotonic_regression(row[m:], weights=w[m:], increasing=False).x if m < k else np.zeros(0)
                )
                sse.append(float(np.sum(w * (row - np.concatenate([up, down])) ** 2)))
            assert float(np.sum(w * (row - fit) ** 2)) == pytest.approx(min(sse))


def test_boundary_interior_and_flat_frontiers_are_said_so():
    rising = fit_optimum(_frontier(peak=2.0, curvature=0.2, noise=0.005), "y")
    assert rising.status == "boundary" and "highest" in rising.reason
    assert (
        rising.rho_star == pytest.approx(0.84) and rising.ci95_high <= 0.84 + 1e-12
    )  # never beyond the grid
    flat = fit_optimum(_frontier(peak=None), "y")
    assert flat.status == "not identified" and np.isnan(flat.rho_star)
    interior = fit_optimum(_frontier(peak=0.5, noise=0.005), "y")
    assert interior.status == "interior" and interior.ci95_low <= 0.5 <= interior.ci95_high
    assert interior.best_cells == "r50"


def test_the_window_rule_returns_every_verdict():
    assert window_verdict(np.array([0.68, 0.7]), 0.72, 0.1) == "held"
    assert window_verdict(np.array([0.31, 0.5]), 0.72, 0.1) == "not held"
    assert window_verdict(np.array([0.5, 0.68]), 0.72, 0.1) == "inconclusive"


def test_settings_whose_best_sets_do_not_overlap_are_heterogeneous():
    rng = np.random.default_rng(0)
    cells = {f"r{round(c * 100)}": c for c in (0.16, 0.31, 0.5, 0.69, 0.84)}

    def setting(name, peak):
        rows = parabola_rows(cells, peak, 5, 0.003, rng, METRICS, curvature=3)
        return pd.DataFrame(rows).assign(setting=name)

    runs = pd.concat([setting("a", 0.16), setting("b", 0.84)], ignore_index=True)
    m = DEFAULT
    result = near(runs, ["a", "b"], 0.72, m)
    assert result.verdict == "heterogeneous" and np.isnan(result.value), result
    assert result.unanimous == "not held" and "a vs b" in result.note  # 0.84 lies outside 0.72 +- 0.10 too
    alike = pd.concat([setting("a", 0.69), setting("b", 0.72)], ignore_index=True)
    held = near(alike, ["a", "b"], 0.72, m)
    assert held.verdict == "held" and held.value == pytest.approx(0.69, abs=0.01)


# ------------------------------------------------------------------------------- every verdict


def test_targets_disagree_can_return_every_verdict(tmp_path):
    names = [s.name for s in PROFILE.all_settings() if s.name != "sparse"]

    def runs(judge_peak, peak=paper_peaks, noise=0.005, sub="x"):
        (tmp_path / sub).mkdir()
        write_runs(tmp_path / sub / "runs.csv", peak, noise=noise, judge_peak=judge_peak, seeds=4)
        return pd.read_csv(tmp_path / sub / "runs.csv").query("budget_kind == 'full'")

    assert disagree(runs(lambda s: 0.2, sub="a"), names).verdict == "held"
    assert disagree(runs(None, sub="b"), names).verdict == "not held"
    assert disagree(runs(None, peak=lambda s: None, noise=0.05, sub="c"), names).verdict == "inconclusive"


def test_pass1_vs_judge_can_return_every_verdict(tmp_path):
    process = [s.name for s in PROFILE.all_settings() if rewards.get(s.reward_system).reads != "answer"]

    def runs(peak, judge_peak, noise=0.004, sub="x"):
        (tmp_path / sub).mkdir()
        write_runs(
            tmp_path / sub / "runs.csv", peak, noise=noise, judge_peak=judge_peak, seeds=5, curvature=4
        )
        return pd.read_csv(tmp_path / sub / "runs.csv").query("budget_kind == 'full' and cell != 'default'")

    held = runs(lambda s: 0.9, lambda s: 0.4, sub="a")
    assert pass1_vs_judge(held, process).verdict == "held"
    same = runs(lambda s: 0.15, None, sub="b")  # one best cell for both (r40 and r50 both sit near 0.45)
    assert pass1_vs_judge(same, process).verdict == "not held"
    flat = runs(lambda s: None, None, noise=0.05, sub="c")
    assert pass1_vs_judge(flat, process).verdict == "inconclusive"


def test_loglinear_can_return_every_verdict():
    rng = np.random.default_rng(0)
    cells = np.repeat([0.16, 0.31, 0.5, 0.69, 0.84], 4)

    def runs(f, noise):
        y = f(cells) + rng.normal(0, noise, len(cells))
        return pd.DataFrame({"setting": "M", "cell": [f"r{round(c * 100)}" for c in cells], "rho": cells,
                             **{t: y for t in METRICS}})  # fmt: skip

    assert loglinear(runs(lambda x: 0.5 + 0.2 * np.log(x), 0.005), ["M"]).verdict == "held"
    assert loglinear(runs(lambda x: 0.5 - 3 * (x - 0.5) ** 2, 0.005), ["M"]).verdict == "not held"
    assert loglinear(runs(lambda x: 0.5 + 0 * x, 0.05), ["M"]).verdict == "inconclusive"


def test_no_race_gain_can_return_every_verdict():
    rng = np.random.default_rng(0)
    assert no_race_gain(rng.normal(0.0, 0.005, 20)).verdict == "held"
    assert no_race_gain(rng.normal(0.1, 0.01, 20)).verdict == "not held"
    assert no_race_gain(rng.normal(0.0, 0.1, 20)).verdict == "inconclusive"
    assert "needs at least 3" in no_race_gain(np.array([0.01, 0.02])).note


def test_conventions_robustness_can_return_every_verdict():
    from paper_repro.analysis.tables.conventions import robustness

    def table(*verdicts):
        return pd.DataFrame({"claim": "c", "convention": ["useful", "6N"], "verdict": list(verdicts)})

    assert robustness(table("held", "held")) == (1.0, "held", "")
    assert robustness(table("held", "not held")) == (0.5, "not held", "")
    assert robustness(table("held", "inconclusive")) == (0.5, "inconclusive", "")


def test_a_convention_robustness_that_compares_only_open_verdicts_reports_nan_with_the_reason():
    """Every rho* verdict inconclusive under every convention: all conventions "agree", but on nothing,
    so the claim decides nothing and reports no share (not 1.0, which reads as robust)."""
    from paper_repro.analysis.tables.conventions import NOTHING_DECIDED, robustness

    conventions = ["useful", "executed", "6N", "wall time"]
    open_ = pd.DataFrame(
        [
            {"claim": c, "convention": v, "verdict": "inconclusive"}
            for c in ("rule", "prm")
            for v in conventions
        ]
    )
    share, verdict, why = robustness(open_)
    assert np.isnan(share) and verdict == "inconclusive" and why == NOTHING_DECIDED
    assert "every rho* verdict is inconclusive under every FLOP convention" in why
    one_decided = open_.assign(verdict=np.where(open_["claim"] == "rule", "held", "inconclusive"))
    assert robustness(one_decided) == (1.0, "held", "")  # the same decided verdict under every convention


@pytest.mark.parametrize("decided", [False, True])
def test_the_convention_claim_reports_nan_with_the_reason_only_when_no_convention_decides(
    monkeypatch, decided
):
    """The claim as the analysis decides it, on a study whose rho* verdicts are set: inconclusive under
    every convention gives NaN and the reason in its note; one decided verdict gives a share."""
    from types import SimpleNamespace

    from paper_repro.analysis.claims import frontier
    from paper_repro.analysis.claims.registry import spec
    from paper_repro.analysis.stats.verdict import Result
    from paper_repro.analysis.tables.conventions import CONVENTIONS, NOTHING_DECIDED

    rule = "held" if decided else "inconclusive"
    monkeypatch.setattr(
        frontier,
        "near",
        lambda view, names, *a, **k: Result(verdict=rule if names == ("M",) else "inconclusive"),
    )
    study = SimpleNamespace(
        classes=SimpleNamespace(rule_based=("M",), prm_style=("prm",)),
        distinct=pd.DataFrame({column: [0.5] for column in CONVENTIONS.values()}),
        margins=DEFAULT,
    )
    result = spec("conventions.robust").decide(study)
    if decided:
        assert result.value == 1.0 and result.verdict == "held" and NOTHING_DECIDED not in result.note
    else:
        assert np.isnan(result.value) and result.verdict == "inconclusive"
        assert result.note.startswith(NOTHING_DECIDED) and "useful: inconclusive, inconclusive" in result.note


# ------------------------------------------------------------------------------- power


def test_power_grows_with_seeds_in_the_design_simulator():
    cells = tuple((f"r{c}", c / 100) for c in (16, 31, 50, 69, 84))
    layout = design.Layout({"M": cells}, seeds=3)
    noise = design.Noise(recipe_sd=0.0, default=0.05, seed_sd={})
    classes = Classes(rule_based=("M",), prm_style=(), process=(), sizes=(), middle=())
    truth = design.truths(("prm",), amplitude=0.05)["peak at 0.72"]
    chosen = [c for c in design.simulated_claims() if c.id == "regime.rule_based.these"]
    powers = design.power_table(
        layout, noise, truth, classes, DEFAULT, seeds=(3, 40), replicates=20, chosen=chosen
    )
    assert powers["regime.rule_based.these"][40] > powers["regime.rule_based.these"][3] + 0.2, powers
    assert seeds_needed({3: 0.1, 10: 0.85}) == 10 and seeds_needed({3: 0.1}) is None


def test_the_claims_table_carries_the_power_column(paper_world):
    _, _, result = paper_world
    c = result.claims.set_index("id")
    assert {"power_now", "seeds_for_80pct_power", "power_note"} <= set(result.claims.columns)
    assert c.loc[RULE, "power_note"].startswith("3 seeds:")
    assert c.loc[RULE, "power_now"] == pytest.approx(
        float(c.loc[RULE, "power_note"].split(",")[0].split(": ")[1])
    )
    from fractions import Fraction

    fractions = [str(Fraction(f).limit_denominator()) for f in PROFILE.pilot_fractions]
    for (
        fraction
    ) in fractions:  # the profile's pilot fractions: the first RACE's (the paper's), any other ours
        row = c.loc[f"race.pilots@{fraction}"]
        assert row["claim"] == f"RACE pilots at {fraction} of the budget name the full grid's regime"
        assert row["power_note"].startswith("not simulated")
        assert row["kind"] == ("paper claim" if fraction == fractions[0] else "our addition")
    assert c.loc[f"{RULE}.gsm_pass1", "kind"] == "description"  # the rho* windows describe, never decide
    assert c.loc[RULE, "kind"] == "description"
    assert (
        c.loc[f"{PRM}.judge_score", "claim"] == "PRM-style rewards: rho* ~ 0.44-0.45 (on the judge's score)"
    )
    assert c.loc[f"{PRM}.judge_score", "kind"] == "description"
    assert set(result.claims["verdict"]) <= {"held", "not held", "inconclusive", "heterogeneous"}
    # no design.csv beside the runs: the analysis wrote its post-hoc block (4 pairs per truth), which the oc_* read
    assert c.loc[RULE, "oc_note"].endswith("(design.csv, post-hoc block)")
    assert np.isfinite(c.loc["regime.rule_based.any", "oc_held_when_true"])


# ------------------------------------------------------------------------------- tables, figures, input


def test_every_table_and_figure_is_written(paper_world):
    folder, _, result = paper_world
    for name in (
        "frontiers",
        "optima",
        "rho_star_tests",
        "fits",
        "disagreement",
        "race",
        "conventions",
        "reward_hacking",
        "reward_hacking_summary",
        "claims",
        "recipe_sd",
        "design",
    ):
        assert (folder / f"{name}.csv").exists(), name
    recipe = pd.read_csv(folder / "recipe_sd.csv").set_index("target")
    assert set(recipe.index) == set(METRICS) and (recipe["recipe_sd_low"] <= recipe["recipe_sd_high"]).all()
    assert len(result.frontiers) and (result.frontiers["seeds"] == 3).all()
    for name in result.figures:
        assert (folder / "figures" / f"{name}.png").stat().st_size > 1000
        assert (folder / "figures" / f"{name}.pdf").exists()
    assert {"rho_star_by_convention", "reward_change_vs_outcomes", "regime_contrasts"} <= set(result.figures)
    race = result.race[result.race["pilot_fraction"] == PROFILE.pilot_fraction].set_index("setting")
    assert race.loc["M", "fresh_seeds"] == 2 and race.loc["prm", "fresh_seeds"] == 2  # the fresh seeds
    assert set(result.race["pilot_fraction"]) == set(PROFILE.pilot_fractions)
    assert (result.frontiers["seeds"] == 3).all()  # the fresh seeds stay out of the grid
    loso = result.claims.set_index("id")["leave_one_seed_out"]
    assert loso.str.startswith(("the same without any one seed", "changes without seed")).all()  # every claim


# ------------------------------------------------------------------------------- reward hacking


def _hacking_runs(shares: dict[str, float], n: int = 60, rng_seed: int = 0) -> pd.DataFrame:
    """Runs of each reward system in ``shares``, a share of which truly game (reward up, gsm pass@1
    and the judge down); the rest improve on every measure or only fall on one."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for system, share in shares.items():
        for i in range(n):
            games = i < round(share * n)
            d_reward = rng.uniform(0.05, 0.4)
            d_gsm = -rng.uniform(0.01, 0.2) if games else rng.uniform(-0.05, 0.2)
            d_judge = -rng.uniform(0.01, 0.2) if games else rng.uniform(0.01, 0.2)
            rows.append({"run_id": f"{system}{i}", "reward_system": system, "setting": system, "cell": "r50",
                         "seed": i, "native_reward": 0.3 + d_reward, "gsm_pass1": 0.3 + d_gsm,
                         "judge_score": 0.3 + d_judge, "base_native_reward": 0.3, "base_gsm_pass1": 0.3,
                         "base_judge_score": 0.3})  # fmt: skip
    return pd.DataFrame(rows)


def test_a_run_games_only_when_its_reward_rises_and_both_checks_fall():
    from paper_repro.analysis.tables import hacking

    runs = _hacking_runs({"prm": 0.25, "sparse": 0.0}, n=20)
    runs.loc[len(runs)] = {**runs.iloc[0].to_dict(), "run_id": "nojudge", "judge_score": np.nan}
    table = hacking.hacking_table(runs).set_index("run_id")
    assert table["games"].sum() == 5 and not table.loc[[f"sparse{i}" for i in range(20)], "games"].any()
    assert pd.isna(table.loc["nojudge", "games"]) and "no d_judge" in table.loc["nojudge", "status"]
    assert (table["diverges"].fillna(False) >= table["games"].fillna(False)).all()
    summary = hacking.hacking_summary(table.reset_index()).set_index("reward_system")
    assert summary.loc["prm", "gaming_runs"] == 5 and summary.loc["prm", "classed"] == 20
    assert summary.loc["prm", "share_ci_low"] < 0.25 < summary.loc["prm", "share_ci_high"]


@pytest.mark.parametrize(
    ("prm_share", "proxy_share", "verdict"),
    [(0.6, 0.0, "held"), (0.0, 0.0, "not held"), (0.02, 0.05, "not held"), (0.15, 0.05, "inconclusive")],
)
def test_prm_games_more_can_return_every_verdict(prm_share, proxy_share, verdict):
    from paper_repro.analysis.tables import hacking

    n = 40 if verdict == "inconclusive" else 200
    table = hacking.hacking_table(_hacking_runs({"prm": prm_share, "proxy_prm": proxy_share}, n=n))
    result = hacking.prm_games_more(table)
    assert result.verdict == verdict, result
    assert result.low <= prm_share - proxy_share <= result.high
    assert hacking.prm_games_more(table[table["reward_system"] != "prm"]).verdict == "inconclusive"


def test_regime_thresholds_sit_between_the_grids_cells():
    th = RegimeThresholds()
    targets = PROFILE.grid.targets
    assert not any(abs(th.rho_threshold - t) < PROFILE.grid.tolerance for t in targets)
    assert th.classify([0.7, 0.84]) == "update-heavy" and th.classify([0.16, 0.5]) == "search-heavy"
    assert th.classify([0.5, 0.7]) == "unresolved"


def test_bad_input_is_refused_with_what_is_missing(tmp_path):
    (tmp_path / "runs.csv").write_text("run_id,stage\nx,A\n")
    with pytest.raises(ValueError, match="lacks the columns the analysis reads: setting, cell"):
        analyse(PROFILE, results_root=tmp_path, figures_dir=tmp_path / "f", power_replicates=0)
    write_runs(tmp_path / "other" / "runs.csv", paper_peaks)
    frame = pd.read_csv(tmp_path / "other" / "runs.csv")
    frame["budget_flops"] = 1.0  # no run of the profile's grid at its budget
    frame.to_csv(tmp_path / "other" / "runs.csv", index=False)
    with pytest.raises(ValueError, match="no full-budget run of the cpu-tiny grid"):
        analyse(PROFILE, results_root=tmp_path / "other", figures_dir=tmp_path / "f", power_replicates=0)


def test_analyse_command_runs_on_any_results_directory(tmp_path, paper_world):
    shutil.copy(paper_world[0] / "runs.csv", tmp_path / "runs.csv")
    cmd = [sys.executable, "-m", "paper_repro.cli", "analyse", "--profile", "cpu-tiny", "--results", str(tmp_path),
           "--figures", str(tmp_path / "figures"), "--power-replicates", "0"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rule-based rewards: rho* ~ 0.72" in done.stdout and (tmp_path / "claims.csv").exists()
    bad = subprocess.run([*cmd[:7], str(tmp_path / "nowhere"), *cmd[8:]], capture_output=True, text=True)
    assert bad.returncode == 2 and "no runs table" in bad.stderr and "Traceback" not in bad.stderr


def test_the_analysis_reads_the_runs_compute_cards(paper_world):
    folder, run_id, _ = paper_world  # its steps/ holds CARD for run_id and for a run not in the table
    cards = pd.read_csv(folder / "compute_cards.csv")
    assert list(cards["run_id"]) == [run_id]
    assert cards["C_total_executed"].iloc[0] == 4e9 and cards["utilisation"].iloc[0] == 0.02


def test_only_the_runs_of_the_design_are_analysed(tmp_path):
    """The append-only table keeps every generation: rows of an earlier design (other weights,
    another recipe, before the design's first run) leave the analysis quietly; rows written after it
    that are not of the design (a quick run, a seed the design does not use, a changed recipe) leave
    it with a warning that names them; every run of the design stays."""
    import dataclasses
    import warnings

    from paper_repro.analysis.tables.frontiers import of_design

    write_runs(tmp_path / "runs.csv", paper_peaks, seeds=2)
    design = pd.read_csv(tmp_path / "runs.csv", dtype=str, keep_default_na=False)
    first = design.iloc[0]
    s = PROFILE.setting(first["setting"])
    cell = next(c for c in plan_setting(PROFILE, s, PROFILE.budget_flops).cells if c.label == first["cell"])

    def row(run_id, spec, created):
        return {**first.to_dict(), "run_id": run_id, "created_at": created,
                "spec": json.dumps(spec.canonical(), sort_keys=True, default=str)}  # fmt: skip

    base = spec_for(PROFILE, s, cell, 0)
    old = dataclasses.replace(base, weights="0123456789abcdef")
    quick = spec_for(PROFILE.quick_variant(), s, cell, 0)
    recipe = dataclasses.replace(base, train=dataclasses.replace(base.train, learning_rate=1e-3))
    later = (START + timedelta(days=1)).isoformat()
    extra = pd.DataFrame([
        row("earlier", old, "2026-11-01T00:00:00"), row("quick", quick, later),
        row("seed42", dataclasses.replace(base, seed=42), later), row("recipe", recipe, later),
    ])  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept = of_design(pd.concat([design, extra], ignore_index=True), PROFILE)
    assert sorted(kept["run_id"]) == sorted(design["run_id"])
    (warning,) = [w for w in caught if "not runs of the cpu-tiny design" in str(w.message)]
    text = str(warning.message)
    assert text.startswith("3 rows") and "earlier" not in text
    assert (
        "quick (" in text
        and f"seed 42 is not one of the design's full-budget seeds [0..{PROFILE.seeds - 1}, 200..204]" in text
    )
    assert "train.budget_stop" in text and "eval_limit" in text  # the quick run's
    assert "recipe (" in text and "train.learning_rate differs" in text


def test_leave_one_seed_out_finds_a_verdict_that_rests_on_one_seed(tmp_path):
    """The paper's world with one wild seed: with it, the rule-based rho* is not pinned down; without
    it, it is, so the claims table says the verdict changes when that seed is dropped (a design of 5
    seeds per cell: with the profile's 3, the 2 left could not pin rho* down either)."""
    import dataclasses

    design = dataclasses.replace(PROFILE, seeds=5)
    write_runs(tmp_path / "runs.csv", paper_peaks, noise=0.005, curvature=4, seeds=5)
    frame = pd.read_csv(tmp_path / "runs.csv")
    wild = (frame["seed"] == 1) & (frame["budget_kind"] == "full")
    frame.loc[wild, "native_reward"] += np.random.default_rng(1).normal(0, 0.5, int(wild.sum()))
    frame.to_csv(tmp_path / "runs.csv", index=False)
    claims_ = analyse(
        design, results_root=tmp_path, figures_dir=tmp_path / "f", power_replicates=0, figures=False
    ).claims
    row = claims_.set_index("id").loc[RULE]
    assert row["verdict"] != "held" and "seed 1: held" in row["leave_one_seed_out"], row["leave_one_seed_out"]
