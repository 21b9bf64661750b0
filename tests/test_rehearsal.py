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


def _cpu_round(layers: int, micro_rows: int = 2):
    from dataclasses import replace

    from paper_repro.accounting import memory

    shape = replace(models.shape("Qwen/Qwen2.5-1.5B-Instruct"), num_layers=layers)
    return memory.RunMemory(
        shape, memory.Precision.of("bfloat16", "cpu"), prompt_tokens=182, completion_tokens=8, rows=2,
        micro_rows=micro_rows, old_pass=True,
    )  # fmt: skip


def test_off_triton_the_fused_head_projects_every_position():
    """TRL gathers the scored positions only under Triton; torch's ops project every position but
    each row's last (measured: the tile of a 2 x (16 + 8) batch has 46 rows)."""
    from paper_repro.accounting import memory

    assert memory.head_positions(2, 16, 8, memory.Precision.of("bfloat16", "cpu")) == 46
    assert memory.head_positions(2, 16, 8, memory.Precision.of("bfloat16", "cuda")) == 16


def test_the_loss_pass_peaks_at_one_moment_of_its_backward_not_their_sum():
    """The head's backward runs before the layers' (LoRA's gradients do not exist yet in a step's
    first micro-batch): the phase holds the larger moment. At one layer on the CPU the head's is
    larger (its fp32 tile copies); at full depth under Triton, the layers' (LoRA's gradients grow
    with depth, Triton's head holds no fp32 tile)."""
    from dataclasses import replace

    from paper_repro.accounting import memory

    shallow = dict(memory.phases(_cpu_round(1))[PHASE_LOSS].parts)
    assert "fused head" in shallow and "LoRA grads" not in shallow and "one layer recomputed" not in shallow
    gpu = memory.Precision.of("bfloat16", "cuda")
    deep = dict(memory.phases(replace(_cpu_round(28), precision=gpu))[PHASE_LOSS].parts)
    assert "fused head" not in deep and {"LoRA grads", "one layer recomputed"} <= set(deep)
    # with gradient accumulation an earlier micro-batch's LoRA gradients are there during the head's
    accumulating = dict(memory.phases(_cpu_round(1, micro_rows=1))[PHASE_LOSS].parts)
    assert {"fused head", "LoRA grads"} <= set(accumulating)


PHASE_LOSS = 3  # memory.PHASES.index("loss")


def test_the_smoke_comparison_reads_what_gpu_smoke_writes(tmp_path, monkeypatch):
    """gpu_smoke.json as `make gpu-smoke` writes it (drivers/smoke.py's own check(), on a faked CUDA
    device and a faked run): a check whose peak is near the memory model's agrees, one far from it
    is flagged, the GPU-only list is always printed; a change of the smoke output's format fails here."""
    from types import SimpleNamespace

    from paper_repro.drivers import smoke
    from paper_repro.run import train

    modelled = smoke_compare.smoke_model({"backend": "hf", "dtype": "bfloat16"}, 0.25, 80 * 2**30).total
    allocated = iter([int(modelled * 1.02), int(modelled * 3)])  # cuda-bf16 agrees, vllm-colocate does not
    find_spec = smoke.importlib.util.find_spec
    fakes = {
        "is_available": lambda: True,
        "reset_peak_memory_stats": lambda *a: None,
        "max_memory_allocated": lambda *a: next(allocated),
        "max_memory_reserved": lambda *a: int(modelled * 3.5),
        "get_device_name": lambda *a: "NVIDIA H100 80GB HBM3",
        "get_device_properties": lambda *a: SimpleNamespace(total_memory=80 * 2**30),
    }
    for name, fake in fakes.items():
        monkeypatch.setattr(torch.cuda, name, fake)
    monkeypatch.setattr(
        smoke.importlib.util, "find_spec", lambda n: object() if n == "vllm" else find_spec(n)
    )
    monkeypatch.setattr(smoke, "_single_process_env", lambda: None)
    monkeypatch.setattr(
        train,
        "run_cell",
        lambda spec, root, raise_errors: {
            "status": "ok",
            "C_total": spec.budget_flops / 2,
            "seconds_train": 1.0,
        },
    )
    out = tmp_path / "gpu_smoke"
    assert smoke.check(out) == 0
    lines = smoke_compare.compare(out / "gpu_smoke.json", tmp_path / "no-rehearsal")
    text = "\n".join(lines)
    assert "NVIDIA H100" in lines[0]
    assert "agrees" in next(line for line in lines if line.startswith("  cuda-bf16"))
    assert "DIFFERS" in next(line for line in lines if line.startswith("  vllm-colocate"))
    assert "run `make gpu-rehearsal` first" in text
    assert all(item in text for item in smoke_compare.GPU_ONLY)
    assert smoke_compare.compare_smoke(out / "gpu_smoke.json", tmp_path) == 1


def test_a_smoke_check_without_gpu_memory_has_nothing_to_compare(tmp_path):
    path = tmp_path / "gpu_smoke.json"
    checks = [{"check": "cpu-bf16", "status": "ok"}]
    path.write_text(
        json.dumps({"device": "cpu", "torch": torch.__version__, "budget_scale": 0.25, "checks": checks})
    )
    assert "no GPU memory recorded" in "\n".join(smoke_compare.compare(path, tmp_path))


@pytest.mark.slow
def test_the_rehearsal_meets_its_targets(tmp_path):
    """`make gpu-rehearsal`: every size at every depth; the memory model within 10% of every measured
    phase, in total and above the weights, the depth line within 5%, the ledger's FLOPs equal to the
    profiler's to 1e-6, RSS under 12 GB."""
    summary = rehearsal.rehearse()
    assert summary["checks"] == {
        "memory": True,
        "above_weights": True,
        "extrapolation": True,
        "flops": True,
    }, rehearsal.format_rehearsal(summary)
    assert all(s["max_rss_bytes"] < 12e9 for s in summary["sizes"].values())


def test_the_rounds_phase_meter_adds_what_a_phase_allocates_to_what_was_resident():
    """A wrapped phase's peak is the resident bytes at its start plus its own live peak, the largest
    over its calls; its FLOPs add up over calls; a call its condition excludes is not measured."""
    from paper_repro.drivers.rehearsal_round import PhaseMeter, ledger_flops

    meter = PhaseMeter(resident=lambda: 1000)
    w = torch.randn(64, 64)

    def phase(n: int):
        return (torch.randn(n, 64) @ w).sum()

    wrapped = meter.wrap("loss", phase, when=lambda: torch.is_grad_enabled())
    wrapped(8)
    wrapped(16)
    with torch.no_grad():
        wrapped(1024)  # excluded: neither its bytes nor its FLOPs count
    assert meter.peaks["loss"] == 1000 + 2 * 16 * 64 * 4  # the input and the product, live together
    assert meter.flops["loss"] == 2 * 64 * 64 * (8 + 16)
    steps = [
        {
            "flops": {"executed": {"search": 5.0, "reward": 2.0}},
            "learning_parts": {"executed": {"loss": 3.0, "old": 1.0}},
        },
        {
            "flops": {"executed": {"search": 0.0, "reward": 0.0}},
            "learning_parts": {"executed": {"loss": 3.0, "old": 0.0}},
        },
    ]
    assert ledger_flops(steps) == {"generation": 5.0, "prm": 2.0, "old_pass": 1.0, "loss": 6.0}


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_the_rollouts_prefill_under_peft_is_what_the_memory_model_says(attention):
    """A small Qwen2 under PEFT's LoRA (bf16 weights, fp32 adapters), its rollouts' prefill measured
    by LiveBytes against the generation phase above the resident state: the MLP's moment at up's
    adapter (two fp32 intermediate-width tensors beside two bf16), and under eager attention each
    layer's [rows, heads, T, T] weights held through it (sdpa holds none)."""
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from paper_repro.accounting import memory
    from paper_repro.accounting.flops import LINEAR_MODULES, ModelShape

    config = Qwen2Config(
        hidden_size=256, intermediate_size=1024, num_attention_heads=8, num_key_value_heads=2,
        num_hidden_layers=1, vocab_size=512, tie_word_embeddings=True,
    )  # fmt: skip
    torch.manual_seed(0)
    policy = Qwen2ForCausalLM(config).to(torch.bfloat16)
    policy.set_attn_implementation(attention)
    policy = get_peft_model(policy, LoraConfig(r=8, target_modules=list(LINEAR_MODULES))).eval()
    prompt = torch.randint(0, 512, (2, 96))
    with torch.no_grad(), LiveBytes() as live:
        rehearsal._sample(policy, prompt, 2, greedy=True)
    run = memory.RunMemory(
        ModelShape.from_config(config.to_dict()), memory.Precision.of("bfloat16", "cpu"), prompt_tokens=96,
        completion_tokens=2, rows=2, micro_rows=2, lora_rank=8, attention=attention,
    )  # fmt: skip
    generation, resident = memory.phases(run)[0], run.resident()
    modelled = sum(v for k, v in generation.parts.items() if k not in resident)
    assert modelled == pytest.approx(live.peak, rel=0.03)
    held = memory.attention_weights(run.policy, 2, 96, run.precision, attention)
    assert held == (2 * 8 * 96 * 96 * 2 if attention == "eager" else 0)
