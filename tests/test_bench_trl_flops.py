"""``paper-repro bench trl-flops``: TRL's FLOPs computed as its MFU logging computes them, and the table
in docs/ledger.md ("Beside TRL's and transformers' FLOP counts") as the command writes it today."""

from __future__ import annotations

import re

import pytest

from paper_repro.bench import trl_flops
from paper_repro.common.paths import repo_root


def _config():
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=50, hidden_size=64, intermediate_size=144, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2,
    )  # fmt: skip


def test_trls_count_takes_each_steps_own_mean_length_and_skips_steps_without_a_loss_pass():
    """Per step, ``compute_flops_per_token`` at that step's ``int(tokens / rows)`` times its tokens (as
    ``AsyncGRPOTrainer`` logs it), not the run's mean length; the causal variant is below it."""
    from trl.trainer.utils import compute_flops_per_token

    config = _config()
    steps = [
        {"tokens": {"loss_tokens": 40.0, "loss_rows": 4.0}},  # length 10
        {"tokens": {"gen_rows": 8.0}},  # no loss pass
        {"tokens": {"loss_tokens": 90.0, "loss_rows": 4.0}},  # length 22.5 -> 22
    ]
    counted = trl_flops._trl_flops(config, steps)
    expected = 40 * compute_flops_per_token(config, 10) + 90 * compute_flops_per_token(config, 22)
    assert counted["non_causal"] == expected
    assert counted["non_causal"] != 130 * compute_flops_per_token(config, 130 // 8)
    assert 0 < counted["causal"] < counted["non_causal"]


@pytest.mark.slow
def test_the_docs_table_is_what_the_bench_measures_today():
    """The run is deterministic on CPU (one thread): the table in docs/ledger.md is this bench's output,
    and its executed total is the profiler's in every run. On a mismatch, rerun ``paper-repro bench
    trl-flops`` and paste its table between the markers."""
    result = trl_flops.bench_trl_flops()
    for run in result["runs"].values():
        assert run["executed"]["C_total"] == pytest.approx(run["profiler"], rel=1e-6)
        assert run["transformers_floating_point_ops"] == 0  # TRL issue #3967
    doc = (repo_root() / "docs" / "ledger.md").read_text()
    block = re.search(r"<!-- trl-flops: [^\n]*-->\n(.*?)\n<!-- /trl-flops -->", doc, re.S)
    assert block, "docs/ledger.md lost its trl-flops markers"
    assert block.group(1) == trl_flops.markdown_table(result)
