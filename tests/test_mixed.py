"""The REML recipe SD (a closed-form one-dimensional fit) against statsmodels' MixedLM, its interval's
coverage and bias by simulation at a small design, and contrasts paired by seed against their
hand-computed values."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from paper_repro.analysis.stats.contrasts import ANY, THESE, contrast, directional_verdict, window_weights
from paper_repro.analysis.stats.mixed import design_matrix, recipe_reml, reml_fit


def study(tau: float, sigma: float = 0.04, seeds: int = 5, settings: int = 4, rng_seed: int = 0,
          block: float = 0.03) -> pd.DataFrame:  # fmt: skip
    """A grid of ``settings`` settings x 6 cells x ``seeds`` seeds: a quadratic frontier per setting,
    a recipe effect per cell (SD ``tau``), a seed block per setting and seed (SD ``block``) and seed
    noise (SD ``sigma``)."""
    rng = np.random.default_rng(rng_seed)
    rhos = np.array([0.15, 0.4, 0.5, 0.66, 0.78, 0.9])
    rows = []
    for s in range(settings):
        curve = (
            0.5 + rng.normal(0, 0.05) - (0.3 + 0.2 * rng.random()) * (rhos - 0.3 - 0.4 * rng.random()) ** 2
        )
        effect = rng.normal(0, tau, len(rhos))
        blocks = rng.normal(0, block, seeds)
        for c, rho in enumerate(rhos):
            for k in range(seeds):
                y = curve[c] + effect[c] + blocks[k] + rng.normal(0, sigma)
                rows.append({"setting": f"s{s}", "cell": f"r{c}", "seed": k, "rho": rho, "native_reward": y})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("tau", [0.0, 0.02, 0.05])
def test_the_fast_reml_fit_is_statsmodels_mixedlm(tau):
    from statsmodels.regression.mixed_linear_model import MixedLM

    rows = study(tau, rng_seed=3)
    X, group = design_matrix(rows)
    y = rows["native_reward"].to_numpy(float)
    tau2, sigma2, criterion = reml_fit(X, y, group)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = MixedLM(y, X, groups=group).fit(reml=True)
    theirs = (float(np.asarray(fit.cov_re)[0, 0]), float(fit.scale))
    # never a worse REML optimum than statsmodels' (at tau 0 its optimiser stops short of it)
    assert criterion.full(tau2, sigma2) <= criterion.full(*theirs) + 1e-6
    if tau > 0:  # an interior optimum: the same parameters
        assert np.sqrt(tau2) == pytest.approx(np.sqrt(theirs[0]), rel=1e-3)
        assert np.sqrt(sigma2) == pytest.approx(np.sqrt(theirs[1]), rel=1e-3)


def test_the_recipe_sd_is_found_with_its_interval_covering_it():
    """At a design like the study's (4 settings x 6 cells x 5 seeds), 60 simulated studies at a true
    recipe SD of 0.025: the mean estimate within 0.006 of it (REML is not doubled) and the 90%
    profile interval covering it in at least 80% of them."""
    truth, hits, estimates = 0.025, [], []
    for k in range(60):
        fit = recipe_reml(study(truth, rng_seed=100 + k), "native_reward")
        estimates.append(fit.tau)
        hits.append(fit.low <= truth <= fit.high)
    assert abs(np.mean(estimates) - truth) < 0.006, np.mean(estimates)
    assert np.mean(hits) >= 0.8, np.mean(hits)


def test_no_recipe_effect_gives_a_small_recipe_sd_and_an_interval_from_zero():
    fit = recipe_reml(study(0.0, rng_seed=7), "native_reward")
    assert fit.status == "ok" and fit.tau < 0.015 and fit.low == pytest.approx(0.0, abs=1e-6)
    assert recipe_reml(study(0.0).head(3), "native_reward").status != "ok"  # too few runs: said so


def test_a_contrast_is_paired_by_seed_and_its_recipe_part_adds_to_its_variance():
    rows = study(0.0, sigma=0.01, block=0.1, settings=1)
    weights = {
        "s0": window_weights(dict(zip(rows["cell"], rows["rho"], strict=False)), (0.62, 0.82), (0.345, 0.545))
    }
    assert weights["s0"] == {"r3": 0.5, "r4": 0.5, "r1": -0.5, "r2": -0.5}
    est = contrast(rows, "native_reward", weights, tau=0.02, tau_df=10.0)
    wide = rows.pivot(index="seed", columns="cell", values="native_reward")
    d = (wide["r3"] + wide["r4"] - wide["r1"] - wide["r2"]) / 2
    assert est[THESE].value == pytest.approx(d.mean()) and est[THESE].paired
    assert est[THESE].se == pytest.approx(d.std(ddof=1) / np.sqrt(len(d)))
    # the seed blocks (SD 0.1) cancel in the pairs: unpaired, the se would be about ten times larger
    assert est[THESE].se < 0.01
    assert est[ANY].se ** 2 == pytest.approx(est[THESE].se ** 2 + 0.02**2 * 4 * 0.25)
    assert est[THESE].df == pytest.approx(4.0) and 4.0 < est[ANY].df < 20.0  # Satterthwaite over both parts


@pytest.mark.parametrize(("value", "se", "verdict"), [(0.05, 0.01, "held"), (-0.05, 0.01, "not held"),
                                                      (0.0, 0.001, "not held"), (0.005, 0.02, "inconclusive")])  # fmt: skip
def test_the_directional_rule_returns_every_verdict(value, se, verdict):
    from paper_repro.analysis.stats.contrasts import Estimate

    assert directional_verdict(Estimate(value, se, 20.0), margin=0.01)[0] == verdict


@pytest.mark.parametrize("tau", [0.0, 0.03])
def test_the_balanced_closed_form_is_the_general_reml_fit(tau):
    """Every cell on the same seeds once, one rho per cell: the ANOVA form (what the simulator's
    studies use) gives the general fit's recipe SD, seed SD and df; a missing run falls back."""
    from paper_repro.analysis.stats.mixed import balanced_fit

    rows = study(tau, rng_seed=21)
    fast, general = balanced_fit(rows, "native_reward"), recipe_reml(rows, "native_reward")
    assert fast.tau == pytest.approx(general.tau, abs=1e-9) and fast.sigma == pytest.approx(
        general.sigma, rel=1e-9
    )
    assert (np.isnan(fast.df) and np.isnan(general.df)) or fast.df == pytest.approx(general.df, abs=2e-3)
    assert balanced_fit(rows.iloc[1:], "native_reward") is None
