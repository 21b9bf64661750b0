"""The design simulator's noise model with seed blocks: its components measured by the two-way
ANOVA, recovered from the studies it simulates, and its verdict shares against an independent plain
Gaussian simulation of the same design (every run of a setting one draw of a multivariate normal
whose covariance is written out from the model, decided by the same claims)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from paper_repro.analysis.claims import Classes
from paper_repro.analysis.claims.registry import claims
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.design import characteristics as oc
from paper_repro.analysis.design.noise import Layout, Noise, seed_blocks
from paper_repro.analysis.design.studies import recipe_draw, simulate, truths
from paper_repro.analysis.stats.best_sets import DEFAULT
from paper_repro.common.results import METRICS

CELLS = tuple((f"r{c}", c / 100) for c in (16, 40, 50, 66, 78))
PRM_CELLS = tuple((f"r{c}", c / 100) for c in (15, 40, 50, 66))
LAYOUT = Layout({"S": CELLS, "M": CELLS, "proxy_prm": PRM_CELLS, "prm": PRM_CELLS}, seeds=3)
CLASSES = Classes(
    rule_based=("S", "M"), prm_style=("proxy_prm", "prm"), process=("proxy_prm", "prm"),
    sizes=("S", "M"), middle=("M", "proxy_prm", "prm"),
)  # fmt: skip
CORRELATION = ((1.0, 0.9, 0.75, 0.85), (0.9, 1.0, 0.75, 0.9), (0.75, 0.75, 1.0, 0.8), (0.85, 0.9, 0.8, 1.0))
RECIPE_CORRELATION = ((1.0, 0.6, 0.3, 0.2), (0.6, 1.0, 0.3, 0.4), (0.3, 0.3, 1.0, 0.5), (0.2, 0.4, 0.5, 1.0))
# a PRM setting whose seed blocks carry most of its raw seed variance, as the committed proxy_prm's do
BLOCKS = {"S": 0.0, "M": 0.027, "proxy_prm": 0.06, "prm": 0.0}
RESIDUAL = {"S": 0.038, "M": 0.04, "proxy_prm": 0.03, "prm": 0.058}
NOISE = Noise(
    recipe_sd=0.03,
    default=0.04,
    seed_sd={},
    setting_sd={(s, t): v for s, v in RESIDUAL.items() for t in METRICS},
    recipe_by_target=dict.fromkeys(METRICS, 0.03),
    block_sd={(s, t): v for s, v in BLOCKS.items() for t in METRICS},
    correlation=CORRELATION,
)
MARGINS = dataclasses.replace(DEFAULT, recipe_sd=None)


def test_seed_blocks_are_the_two_way_anova_components():
    rng = np.random.default_rng(1)
    seeds, cells = 400, 6
    effect = rng.normal(0, 0.05, seeds)
    rows = pd.DataFrame(
        {
            "setting": "S",
            "cell": np.repeat([f"c{i}" for i in range(cells)], seeds),
            "seed": np.tile(np.arange(seeds), cells),
            "native_reward": np.tile(effect, cells) + rng.normal(0, 0.02, seeds * cells),
        }
    )
    parts = seed_blocks(rows, "native_reward")
    drawn = float(np.var(effect, ddof=1))  # the seed effects as drawn, not as meant
    assert parts.seed == pytest.approx(drawn, rel=0.05)
    assert parts.residual == pytest.approx(0.02**2, rel=0.05)
    assert parts.raw == pytest.approx(drawn + 0.02**2, rel=0.05)  # the plain within-cell variance
    assert seed_blocks(rows[rows["cell"] == "c0"], "native_reward") is None  # one cell: no blocks


def test_a_simulated_study_shares_its_seed_blocks_across_its_cells_and_targets():
    truth = truths(CLASSES.prm_style, 0.1)["flat"]
    study = simulate(LAYOUT.with_seeds(600), truth, NOISE, np.random.default_rng(0))
    prm = study[study["setting"] == "proxy_prm"]
    parts = seed_blocks(prm, "native_reward")
    assert np.sqrt(parts.seed) == pytest.approx(0.06, rel=0.1)
    assert np.sqrt(parts.residual) == pytest.approx(0.03, rel=0.05)
    # the targets move together: each run's deviation from its cell's mean correlates as the model's
    dev = prm[list(METRICS)] - prm.groupby("cell")[list(METRICS)].transform("mean")
    assert dev.corr().loc["native_reward", "gsm_pass1"] == pytest.approx(0.9, abs=0.03)


def _covariance(cells: int, seeds: int, setting: str, noise: Noise) -> np.ndarray:
    """The covariance of every run x target of one setting, written out from the model: the cell's
    recipe draw (same cell), the seed's block (same seed), the run's own residual (same run), each
    correlated across targets as the noise says (the recipe draw as its own correlation says, where the
    noise has one). Runs are ordered cell-major, seed-minor, target last."""
    r = np.asarray(noise.correlation)
    rr = np.asarray(noise.recipe_correlation or noise.correlation)
    tau = np.array([noise.tau(t) for t in METRICS])
    block = np.array([noise.block(setting, t) for t in METRICS])
    own = np.array([noise.sd(setting, "", t) for t in METRICS])
    same_cell = np.kron(np.eye(cells), np.ones((seeds, seeds)))
    same_seed = np.kron(np.ones((cells, cells)), np.eye(seeds))
    same_run = np.eye(cells * seeds)
    return (
        np.kron(same_cell, rr * np.outer(tau, tau))
        + np.kron(same_seed, r * np.outer(block, block))
        + np.kron(same_run, r * np.outer(own, own))
    )


def _covariance_z(noise: Noise, model: Noise, setting: str, draws: int) -> float:
    """The largest |z| over every entry of one setting's run x target covariance: ``draws`` studies
    simulated with ``noise`` against the covariance ``model`` writes out (each entry's sampling SD
    sqrt((s_ii s_jj + s_ij^2) / draws), a normal sample's)."""
    layout = Layout({setting: LAYOUT.cells[setting]}, seeds=LAYOUT.seeds)
    truth = truths(CLASSES.prm_style, 0.1)["flat"]
    rng = np.random.default_rng(5)
    x = np.array(
        [
            simulate(layout, truth, noise, rng, recipe_draw(layout, noise, rng))[list(METRICS)]
            .to_numpy()
            .ravel()
            for _ in range(draws)
        ]
    )
    expected = _covariance(len(layout.cells[setting]), layout.seeds, setting, model)
    d = np.diag(expected)
    return float(np.max(np.abs(np.cov(x.T) - expected) / np.sqrt((np.outer(d, d) + expected**2) / draws)))


def test_a_simulated_setting_has_the_covariance_the_model_writes_out():
    # the recipe draw, the seed block and the residual, correlated across targets, as one covariance:
    # what the plain Gaussian check below draws from; the check of the model itself, at the power the
    # verdict shares cannot have (a 1,800-entry matrix from 800 studies in about a second)
    assert _covariance_z(NOISE, NOISE, "proxy_prm", 800) < 5
    without_blocks = dataclasses.replace(NOISE, block_sd={})  # the model before the seed blocks
    assert _covariance_z(NOISE, without_blocks, "proxy_prm", 800) > 5
    # recipe effects that correlate less across targets than the residuals (a recipe suits one target
    # more than another): drawn so, and told apart from the residuals' correlation
    own = dataclasses.replace(
        NOISE, recipe_correlation=RECIPE_CORRELATION, recipe_by_target=dict.fromkeys(METRICS, 0.06)
    )
    assert _covariance_z(own, own, "S", 800) < 5
    assert _covariance_z(own, dataclasses.replace(own, recipe_correlation=None), "S", 800) > 5


def _plain_study(layout: Layout, truth, noise: Noise, rng: np.random.Generator) -> pd.DataFrame:
    frames = []
    for setting, cells in layout.cells.items():
        names, rho, n = [c for c, _ in cells], np.array([r for _, r in cells]), layout.seeds
        mean = np.stack([np.repeat(truth(setting, t, rho), n) for t in METRICS], axis=1).ravel()
        y = rng.multivariate_normal(mean, _covariance(len(names), n, setting, noise)).reshape(
            -1, len(METRICS)
        )
        frame = pd.DataFrame(y, columns=list(METRICS))
        frame.insert(0, "rho", np.repeat(rho, n))
        frame.insert(0, "seed", np.tile(np.arange(n), len(names)))
        frame.insert(0, "cell", np.repeat(names, n))
        frame.insert(0, "setting", setting)
        frame.insert(0, "run_id", [f"{setting}-{c}-{i}" for c in names for i in range(n)])
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def agreement(
    layout: Layout,
    noise: Noise,
    classes: Classes,
    studies: int,
    truth_names=("flat", "the paper's world"),
    chosen=None,
) -> pd.DataFrame:
    """Per truth and claim (``chosen``; by default the regime claims but the interaction), the
    simulator's shares held and not held (:func:`oc.operating_characteristics`, ``studies`` studies in
    ``studies / 2`` pairs sharing a recipe draw) beside the plain simulation's (as many, each its own
    draw), their difference and its SE (at most, the pairs fully correlated)."""
    if chosen is None:
        chosen = [
            c for c in claims(simulated=True) if c.id.startswith("regime.") and "interaction" not in c.id
        ]
    world = {k: v for k, v in truths(classes.prm_style, 0.06).items() if k in truth_names}
    ours = oc.operating_characteristics(
        layout, noise, world, classes, MARGINS, studies // 2, 0, seed=3, chosen=chosen
    )
    rng = np.random.default_rng(4)
    rows = []
    for name, truth in world.items():
        verdicts = {c.id: [] for c in chosen}
        for _ in range(studies):
            study = Study.simulated(_plain_study(layout, truth, noise, rng), classes, MARGINS)
            for c in chosen:
                verdicts[c.id].append(c.decide(study).verdict)
        for c in chosen:
            row = ours[(ours["truth"] == name) & (ours["claim_id"] == c.id)].iloc[0]
            for side in ("held", "not held"):
                plain = float(np.mean([v == side for v in verdicts[c.id]]))
                simulated = float(row[f"share_{side.replace(' ', '_')}"])
                p = (simulated + plain) / 2
                rows.append(
                    {
                        "truth": name,
                        "claim_id": c.id,
                        "share": side,
                        "simulator": simulated,
                        "plain": plain,
                        "difference": simulated - plain,
                        "studies": studies,
                        # the simulator's studies come in pairs sharing their recipe draw (studies / 2
                        # draws): its share's variance is up to twice a binomial's, the plain one's is one
                        "se": float(np.sqrt(3 * p * (1 - p) / studies)),
                    }
                )
    return pd.DataFrame(rows)


@pytest.mark.slow
def test_the_simulators_shares_match_a_plain_gaussian_simulation_of_the_same_design():
    # 400 studies each (about a minute): a difference of two shares has SE at most 0.043 here (the
    # simulator's in pairs), so the bound is three of its SEs; docs/MEASUREMENTS.md (issue 53) has the
    # 0.03 check at 4,000 studies each way
    table = agreement(LAYOUT, NOISE, CLASSES, 400, truth_names=("the paper's world",))
    assert (table["difference"].abs() <= 3 * table["se"]).all(), table.to_string()
    assert table[table["share"] == "held"]["simulator"].max() > 0.3  # shares that move, not zeros alone


@pytest.mark.slow
def test_the_target_claims_shares_match_a_plain_gaussian_simulation_with_the_recipes_own_correlation():
    # the target claims difference two targets of one run: their shares turn on the targets' joint
    # noise, the recipe draws' own correlation included (400 studies each, about a minute)
    own = dataclasses.replace(
        NOISE, recipe_correlation=RECIPE_CORRELATION, recipe_by_target=dict.fromkeys(METRICS, 0.04)
    )
    chosen = oc.design_claims(("targets.gsm_judge.pooled.any", "targets.pass1_high_judge_mid.any"))
    table = agreement(LAYOUT, own, CLASSES, 400, truth_names=("the paper's world",), chosen=chosen)
    assert (table["difference"].abs() <= 3 * table["se"]).all(), table.to_string()
    assert table[table["share"] == "held"]["simulator"].max() > 0.1  # shares that move (0.27 here)
