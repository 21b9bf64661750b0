"""The memory model (paper_repro/accounting/memory.py) at the gpu-paper shapes: hand-worked sizes, the
depth it scales with, and the knob it names when a layout does not fit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from paper_repro import models
from paper_repro.accounting import memory

BF16 = memory.Precision.of("bfloat16")


def _run(name="Qwen/Qwen2.5-7B-Instruct", **kw):
    base = dict(prompt_tokens=200, completion_tokens=2048, rows=8, micro_rows=4, old_pass=True)
    return memory.RunMemory(models.shape(name), BF16, **{**base, **kw})


def test_weights_and_kv_cache_at_the_real_configs():
    shape = models.shape("Qwen/Qwen2.5-7B-Instruct")
    # 7.62B parameters (model card 7.61B) in bf16; K and V of 28 layers x 4 heads x 128 per token
    assert memory.weight_bytes(shape, BF16) == pytest.approx(2 * 7.615e9, rel=1e-3)
    assert memory.kv_bytes_per_token(shape, BF16) == 2 * 28 * 4 * 128 * 2
    # LoRA rank 64 on all seven linear modules of 28 layers
    per_layer = 64 * sum(a + b for a, b in shape.module_shapes().values())
    assert memory.lora_parameters(shape, 64) == 28 * per_layer


def test_the_fused_heads_tile_is_capped_whatever_the_scored_tokens():
    """TRL's fused head never holds the logits whole: past 4096 tokens only the gathered hidden states
    (and their fp32 gradient) grow, not the tile."""
    shape = models.shape("Qwen/Qwen2.5-1.5B-Instruct")
    small, big = (memory.head_workspace(n, shape, BF16, backward=False) for n in (4096, 8192))
    assert big - small == 4096 * shape.hidden_size * 2
    full_logits = 8192 * shape.vocab_size * 4
    assert big < full_logits / 10


def test_each_phase_is_affine_in_depth():
    """The rehearsal extrapolates from a few layers: every phase must be a + b x layers."""
    shape = models.shape("Qwen/Qwen2.5-3B-Instruct")
    totals = {}
    for layers in (2, 4, 6):
        run = _run(prm=models.shape("Qwen/Qwen2.5-Math-PRM-7B"))
        run = replace(run, policy=replace(shape, num_layers=layers))
        totals[layers] = [p.total for p in memory.phases(run)]
    for a, b, c in zip(totals[2], totals[4], totals[6], strict=True):
        assert c - b == pytest.approx(b - a, rel=1e-9)


def test_checkpointing_and_zero2_lower_what_they_should():
    run = _run(processes=8)
    loss = {p.phase: p for p in memory.phases(run)}["loss"].total
    unchecked = {p.phase: p for p in memory.phases(replace(run, checkpointing=False))}["loss"].total
    assert unchecked > 3 * loss
    ddp, zero2 = run.resident(), replace(run, zero_stage=2).resident()
    assert "DDP grad buckets" in ddp and "DDP grad buckets" not in zero2
    assert zero2["Adam moments"] == pytest.approx(ddp["Adam moments"] / 8)


def test_a_layout_that_does_not_fit_names_the_knob_that_would():
    """Without checkpointing the 7B loss pass of 16 rows passes the H100; turning it on is one change
    that fits. With checkpointing on, 64 rows a micro-batch still do not: a smaller micro-batch does."""
    unchecked = _run(checkpointing=False, micro_rows=16, rows=16)
    assert memory.peak(unchecked).total > unchecked.device_gib * memory.GIB
    assert memory.remedy(unchecked) == "gradient_checkpointing: true"
    assert memory.peak(replace(unchecked, checkpointing=True)).total <= unchecked.device_gib * memory.GIB
    wide = _run(micro_rows=64, rows=64)
    assert memory.peak(wide).phase == "loss" and memory.peak(wide).total > wide.device_gib * memory.GIB
    knob = memory.remedy(wide)
    assert knob is not None and knob.startswith("micro_batch")


def test_a_colocated_prm_that_cannot_fit_is_moved_off_the_device():
    run = _run(prm=models.shape("Qwen/Qwen2.5-Math-PRM-7B"), device_gib=30.0, micro_rows=1, eval_rows=8)
    assert memory.remedy(run) == "the PRM on a separate device"


def test_device_memory_names_the_table_when_unknown():
    assert memory.device_memory_gib("H100 SXM") == 79.2
    with pytest.raises(ValueError, match="DEVICE_MEMORY_GIB"):
        memory.device_memory_gib("TPU v5")


def _profile_with(tmp_path, **resources):
    import yaml

    from paper_repro.config import load_profile

    raw = yaml.safe_load(Path(load_profile("gpu-paper-1gpu").source).read_text())
    base = yaml.safe_load(Path(load_profile("gpu-paper").source).read_text())
    raw = {**base, **{k: v for k, v in raw.items() if k != "extends"}}
    raw["resources"]["7B"].update(resources)
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_profile(path)


def test_the_dry_run_prints_each_stage_and_gpu_count_beside_the_gpus_memory(tmp_path, monkeypatch):
    from paper_repro.drivers import dryrun

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = dryrun.dry_run(_profile_with(tmp_path), ["A"])
    text = dryrun.format_report(result)
    table = text.split("memory per GPU")[1].split("SLURM jobs")[0]
    rows = [line.split() for line in table.splitlines() if line.startswith("  A ")]
    assert [(r[1], r[2]) for r in rows] == [("1.5B", "1"), ("3B", "1"), ("7B", "1")]
    assert all(r[-1] == "fits" for r in rows) and "GPU 79.2 GiB" in text


def test_the_dry_run_refuses_the_7b_on_one_gpu_without_checkpointing(tmp_path, monkeypatch):
    """The number that does not fit, the device's, and the knob that would."""
    from paper_repro.drivers import dryrun, fit

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    profile = _profile_with(tmp_path, gradient_checkpointing=False, micro_batch=16)
    with pytest.raises(
        fit.DoesNotFit, match=r"7B on 1 GPU.*phase loss needs [0-9.]+ GiB on a 79.2 GiB GPU"
    ) as err:
        dryrun.dry_run(profile, ["A"])
    assert "would fit with: gradient_checkpointing: true" in str(err.value)
