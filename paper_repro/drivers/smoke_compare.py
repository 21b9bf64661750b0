"""What ``make gpu-smoke`` measured on a GPU set beside the rehearsal on the CPU
(``paper-repro rehearse --compare gpu_smoke/gpu_smoke.json``): where they agree, what differs, and what
only the GPU showed.

The smoke test runs a cpu-tiny cell on CUDA (bf16, HF generate; vLLM colocate when installed) and
records each check's peak allocated and reserved bytes. This script prices the same cell with the
memory model on CUDA (:func:`paper_repro.drivers.fit.run_memory`: autocast, TRL's Triton head) and
says, per check, the measured peak beside the model's dearest phase, the allocator's reserve above
what was allocated (fragmentation and cached blocks, which the model leaves out) and, where vLLM ran,
that its reservation is the configured share, not a measured one. Beside it, the rehearsal's own
verdict (``<rehearsal>/rehearsal.json``): the memory model against the CPU at real widths.
"""

from __future__ import annotations

import json
from pathlib import Path

from paper_repro.accounting import memory

TOLERANCE = 0.10  # the memory model against a measured peak, as the rehearsal's target

# What a GPU shows that the rehearsal on the CPU cannot, and where the smoke test's output says it.
GPU_ONLY = {
    "vLLM's paged memory": "the vllm-colocate check's peak (vLLM reserves vllm_gpu_memory_utilization of the "
    "device for its weights and paged KV blocks; the model adds that share whole)",
    "NCCL buffers": "not in the smoke test (one process); the first multi-GPU run (8 GPUs, ZeRO-2) shows them",
    "fragmentation": "peak_reserved_bytes - peak_allocated_bytes: the caching allocator's reserve",
    "kernels' workspace": "inside peak_allocated_bytes (cuBLAS and attention workspaces): the model leaves them out",
    "throughput": "seconds_train / seconds_eval beside the dry run's assumed MFUs (docs/gpu-paper.md, the ladder)",
    "bf16 autocast and Triton's head": "the model's CUDA precision (Precision.of(dtype, 'cuda')); the CPU "
    "rehearsal runs PEFT's fp32 casts and torch's head instead",
}


def smoke_model(check: dict, budget_scale: float, device_bytes: float | None) -> memory.PhaseMemory:
    """The memory model's dearest phase for the smoke test's cell of ``check``, on one CUDA device."""
    from dataclasses import replace

    from paper_repro.config import load_profile
    from paper_repro.drivers.fit import run_memory
    from paper_repro.drivers.smoke import _cell

    spec = _cell(check.get("backend", "hf"), check.get("dtype", "bfloat16"), budget_scale)
    run = run_memory(load_profile("cpu-tiny"), spec, 1)
    run = replace(run, precision=memory.Precision.of(spec.train.dtype, "cuda"))
    if device_bytes:
        run = replace(run, device_gib=device_bytes / memory.GIB)
    return memory.peak(run)


def compare(smoke_json: str | Path, rehearsal_out: str | Path = "gpu_rehearsal") -> list[str]:
    """The comparison's lines: per smoke check, measured against modelled and the allocator's reserve;
    the rehearsal's verdicts; what only the GPU showed."""
    smoke = json.loads(Path(smoke_json).read_text())
    lines = [
        f"gpu-smoke on {smoke.get('device')} (torch {smoke.get('torch')}) beside the memory model and the rehearsal"
    ]
    mib = 2**20
    for check in smoke.get("checks", []):
        name, status = check.get("check"), str(check.get("status"))
        if "peak_allocated_bytes" not in check:
            lines.append(f"  {name}: {status}; no GPU memory recorded: nothing to compare")
            continue
        modelled = smoke_model(check, smoke.get("budget_scale", 0.25), smoke.get("device_total_bytes"))
        measured, reserved = check["peak_allocated_bytes"], check["peak_reserved_bytes"]
        ratio = modelled.total / measured - 1
        verdict = "agrees" if abs(ratio) <= TOLERANCE else "DIFFERS"
        lines.append(
            f"  {name}: measured peak {measured / mib:.0f} MiB allocated, {reserved / mib:.0f} MiB reserved "
            f"(fragmentation and cache {(reserved - measured) / mib:.0f} MiB, not modelled); memory model "
            f"{modelled.total / mib:.0f} MiB in its {modelled.phase} phase ({ratio:+.1%}): {verdict}"
        )
        if check.get("backend") == "vllm":
            lines.append(
                "    vLLM: the model adds its configured share whole; the measured peak says what it took"
            )
        lines.append(
            f"    throughput: {check.get('seconds_train')} s training, {check.get('seconds_eval')} s evaluation"
        )
    rehearsal = Path(rehearsal_out) / "rehearsal.json"
    if rehearsal.is_file():
        summary = json.loads(rehearsal.read_text())
        for size, r in summary["sizes"].items():
            worst = max(p["worst_model_error"] for p in r["phases"].values())
            lines.append(
                f"  rehearsal {size} (CPU, real widths): memory model within {worst:.1%} of every phase"
            )
        lines.append(f"  rehearsal checks: {summary['checks']}")
    else:
        lines.append(f"  no rehearsal at {rehearsal}: run `make gpu-rehearsal` first to set it beside")
    lines.append("what only a GPU shows, and where:")
    lines += [f"  {k}: {v}" for k, v in GPU_ONLY.items()]
    return lines


def compare_smoke(smoke_json: str | Path, rehearsal_out: str | Path = "gpu_rehearsal") -> int:
    """Print :func:`compare`; 1 when a smoke check's peak differs from the model by more than
    :data:`TOLERANCE`, else 0."""
    lines = compare(smoke_json, rehearsal_out)
    print("\n".join(lines))
    return 1 if any("DIFFERS" in line for line in lines) else 0
