"""``paper-repro bench eval-noise``: the seed x block ANOVA that splits a cell's evaluation
noise into the part its seeds share and the part each run has of its own, on tables whose
components are known."""

from __future__ import annotations

import numpy as np
import pytest

from paper_repro.bench.eval_noise import eval_noise_components


def test_an_additive_table_is_split_exactly():
    """No interaction: the residual is 0, the block and seed effects come back as their variances."""
    seeds = np.array([0.0, 0.02, -0.01, 0.03, 0.01, -0.02])
    blocks = np.array([0.015, -0.01, -0.005])
    out = eval_noise_components(0.6 + seeds[:, None] + blocks[None, :])
    assert out["nonshared_eval_var"] == pytest.approx(0.0, abs=1e-15)
    assert out["shared_bias_var"] == pytest.approx(blocks.var(ddof=1))
    assert out["true_seed_var"] == pytest.approx(seeds.var(ddof=1))
    assert out["per_run_eval_var"] == pytest.approx(blocks.var(ddof=1))
    assert out["seed_var_300"] == pytest.approx(seeds.var(ddof=1))
    assert out["seed_var_900"] == pytest.approx(seeds.var(ddof=1))
    assert out["eval_noise_share_300"] == pytest.approx(0.0, abs=1e-12)
    assert out["mean"] == pytest.approx(0.6 + seeds.mean() + blocks.mean())
    assert out["block_means"] == pytest.approx(list(0.6 + seeds.mean() + blocks))
    assert out["clipped"] == []


def test_the_estimates_are_unbiased_for_known_components():
    """Many simulated 6 x 3 tables with var(seed) 4e-4, var(block) 1e-4, var(residual) 2.25e-4 (the
    size of the noise of a score on 300 problems): the unclipped estimates average to them."""
    rng = np.random.default_rng(0)
    var_a, var_c, var_e = 4e-4, 1e-4, 2.25e-4
    n, k, b = 20_000, 6, 3
    y = (
        rng.normal(0, var_a**0.5, (n, k, 1))
        + rng.normal(0, var_c**0.5, (n, 1, b))
        + rng.normal(0, var_e**0.5, (n, k, b))
    )
    est = [eval_noise_components(t) for t in y]

    def mean(key: str) -> float:
        return float(np.mean([e[key] for e in est]))

    assert mean("nonshared_eval_var") == pytest.approx(var_e, rel=0.03)
    assert mean("shared_bias_var_raw") == pytest.approx(var_c, rel=0.1)
    assert mean("true_seed_var_raw") == pytest.approx(var_a, rel=0.05)
    assert mean("per_run_eval_var") == pytest.approx(var_c + var_e, rel=0.05)
    assert mean("seed_var_300") == pytest.approx(var_a + var_e, rel=0.03)
    assert mean("seed_var_900") == pytest.approx(var_a + var_e / b, rel=0.03)
    # clipping at 0 only raises an estimate, and says so
    assert mean("shared_bias_var") > mean("shared_bias_var_raw")
    assert any("shared_bias_var" in e["clipped"] for e in est)
    assert all(e["shared_bias_var"] >= 0 and e["true_seed_var"] >= 0 for e in est)
    # the share of a block's seed variance that is evaluation noise: var_e / (var_a + var_e) = 0.36
    assert 0.3 < mean("eval_noise_share_300") < 0.45


def test_negative_estimates_are_clipped_at_zero_and_named():
    """Blocks that agree better than their residuals allow: the shared bias estimate is negative."""
    y = np.array([[0.60, 0.62, 0.58], [0.62, 0.58, 0.60], [0.58, 0.60, 0.62], [0.61, 0.60, 0.59]])
    out = eval_noise_components(y)
    assert out["shared_bias_var_raw"] < 0
    assert out["shared_bias_var"] == 0.0 and "shared_bias_var" in out["clipped"]
    assert out["nonshared_eval_var"] > 0
    with pytest.raises(ValueError, match="at least 2"):
        eval_noise_components(np.zeros((5, 1)))
