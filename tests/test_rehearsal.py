"""The gpu-paper rehearsal (paper_repro/drivers/rehearsal.py): its measuring tool, its depth line, the
smoke comparison, and (slow: `make gpu-rehearsal`) the whole rehearsal against its targets."""

from __future__ import annotations

import json

import pytest
import torch

from paper_repro import models
from paper_repro.accounting.profiling import LiveBytes
from paper_repro.drivers import rehearsal, smoke_compare


def test_live_bytes_counts_what_ops_allocate_and_frees_it():
    """New storages count once (a view or an in-place result adds nothing), from the op that made them
    until they are freed; tensors saved for backward stay counted until the backward frees them; the
    weights made before entering are not counted at all."""
    w = torch.randn(256, 256, requires_grad=True)  # 256 KiB, made before: not counted
    with LiveBytes() as live:
        a = torch.randn(256, 256)
        view = a.t()[:10]  # a view of a: nothing new
        b = a @ w  # autograd saves a for w's gradient
        assert live.live == 2 * 256 * 256 * 4
        del a, view
        assert live.live == 2 * 256 * 256 * 4  # a is still saved
        b.sum().backward()
        del b
        assert live.live == 256 * 256 * 4  # only w.grad is left
        assert live.peak >= 3 * 256 * 256 * 4
        assert live.phase() == live.live and live.peak == live.live


def test_the_cut_configs_keep_every_width():
    full = models.shape("Qwen/Qwen2.5-7B-Instruct")
    cut = json.loads(json.dumps(rehearsal.cut_config("Qwen/Qwen2.5-7B-Instruct", 2)))
    assert cut["num_hidden_layers"] == 2 and cut["vocab_size"] == full.vocab_size == 152064
    assert (cut["hidden_size"], cut["intermediate_size"], cut["num_key_value_heads"]) == (3584, 18944, 4)


def test_the_depth_line_reads_the_two_shallowest_depths():
    assert rehearsal.extrapolate({1: 10.0, 2: 13.0, 4: 99.0}, 28) == pytest.approx(10 + 3 * 27)


def test_the_smoke_comparison_says_what_differs(tmp_path):
    """A smoke summary whose peak is far from the memory model's is flagged; one without GPU numbers
    (a CPU run) says there is nothing to compare; the GPU-only list is always printed."""
    modelled = smoke_compare.smoke_model({"backend": "hf", "dtype": "bfloat16"}, 0.25, 80 * 2**30).total
    summary = {
        "device": "NVIDIA H100 80GB HBM3",
        "torch": "2.13.0",
        "budget_scale": 0.25,
        "device_total_bytes": 80 * 2**30,
        "checks": [
            {"check": "cuda-bf16", "status": "ok", "backend": "hf", "dtype": "bfloat16",
             "peak_allocated_bytes": int(modelled * 1.02), "peak_reserved_bytes": int(modelled * 1.3)},
            {"check": "vllm-colocate", "status": "ok", "backend": "hf", "dtype": "bfloat16",
             "peak_allocated_bytes": int(modelled * 3), "peak_reserved_bytes": int(modelled * 3)},
            {"check": "cpu-bf16", "status": "ok"},
        ],
    }  # fmt: skip
    path = tmp_path / "gpu_smoke.json"
    path.write_text(json.dumps(summary))
    lines = smoke_compare.compare(path, tmp_path / "no-rehearsal")
    text = "\n".join(lines)
    assert "cuda-bf16" in text and "agrees" in lines[1]
    assert "DIFFERS" in next(line for line in lines if line.startswith("  vllm-colocate"))
    assert "no GPU memory recorded" in text and "run `make gpu-rehearsal` first" in text
    assert all(item in text for item in smoke_compare.GPU_ONLY)
    assert smoke_compare.compare_smoke(path, tmp_path) == 1


@pytest.mark.slow
def test_the_rehearsal_meets_its_targets(tmp_path):
    """`make gpu-rehearsal`: every size at every depth; the memory model within 10% of every measured
    phase, the depth line within 5%, the ledger's FLOPs equal to the profiler's to 1e-6, RSS under 12 GB."""
    summary = rehearsal.rehearse()
    assert summary["checks"] == {"memory": True, "extrapolation": True, "flops": True}, (
        rehearsal.format_rehearsal(summary)
    )
    assert all(s["max_rss_bytes"] < 12e9 for s in summary["sizes"].values())
