"""Does a run fit its GPUs: a spec on its job's GPUs as the memory model sees it
(:mod:`paper_repro.accounting.memory`), for the dry run (``paper-repro run --dry-run``).

:func:`run_memory` reads what a run holds on each process from its spec, its batch layout and its
accelerate config (ZeRO's stage); :func:`fit_report` groups a study's runs by stage, policy size and
GPU count and keeps each group's dearest run, phase by phase; :class:`DoesNotFit` is the refusal: the
phase, the bytes it needs beside the device's, and the knob that would make it fit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from paper_repro import models
from paper_repro.accounting import memory
from paper_repro.config import Profile
from paper_repro.run.launch import batch_layout
from paper_repro.run.spec import RunSpec


class DoesNotFit(ValueError):
    """A layout the memory model says cannot fit its GPU: the message names the phase, its bytes, the
    device's and the knob that would make it fit."""


def zero_stage(accelerate_config: str | None) -> int:
    """DeepSpeed's ZeRO stage in an accelerate config (0: DDP or a single process)."""
    if not accelerate_config:
        return 0
    raw = yaml.safe_load(Path(models.local(accelerate_config)).read_text()) or {}
    return int((raw.get("deepspeed_config") or {}).get("zero_stage", 0))


def run_memory(profile: Profile, spec: RunSpec, gpus: int) -> memory.RunMemory:
    """What one process of ``spec`` holds on ``gpus`` GPUs: its layout's rows, the profile's assumed
    prompt length, every completion at the cap (the dearest round), the PRM on the policy's device
    when the run loads one (reward or judge), vLLM's share when it generates with vLLM."""
    layout = batch_layout(spec.P, spec.G, spec.K, gpus, spec.runtime.micro_batch)
    kept = layout.per_device * spec.K // spec.G if spec.K < spec.G else layout.per_device
    t = spec.train
    return memory.RunMemory(
        policy=models.shape(spec.model),
        precision=memory.Precision.of(t.dtype, "cuda" if gpus else "cpu"),
        prompt_tokens=int(profile.expected_lengths["prompt"]),
        completion_tokens=t.max_completion_length,
        rows=layout.per_device * layout.accumulation,
        micro_rows=max(kept, 1),
        lora_rank=t.lora_rank,
        checkpointing=spec.runtime.gradient_checkpointing,
        old_pass=spec.mu > 1,  # TRL's rule with one step a round (paper_repro.ledger.pricing)
        processes=layout.processes,
        zero_stage=zero_stage(spec.runtime.accelerate_config),
        prm=models.shape(spec.prm) if spec.prm else None,
        eval_rows=spec.eval_batch_size,
        eval_new_tokens=spec.eval_max_new_tokens,
        vllm_share=spec.runtime.vllm_gpu_memory_utilization if t.generation == "vllm" else 0.0,
        device_gib=memory.device_memory_gib(profile.estimate.gpu),
    )


@dataclass
class FitRow:
    """The dearest run of one (stage, policy size, GPU count): its phases and whether it fits."""

    stage: str
    policy: str
    gpus: int
    spec: RunSpec
    run: memory.RunMemory
    phases: list[memory.PhaseMemory]

    @property
    def peak(self) -> memory.PhaseMemory:
        return max(self.phases, key=lambda p: p.total)

    @property
    def fits(self) -> bool:
        return self.peak.total <= self.run.device_gib * memory.GIB

    def refusal(self) -> str:
        """Why it does not fit and what would: the phase, its GiB beside the device's, the knob."""
        peak, device = self.peak, self.run.device_gib
        knob = memory.remedy(self.run) or (
            "none of micro_batch, checkpointing, a separate PRM device or a smaller evaluation batch: "
            "tensor parallel (not provided: ZeRO-3/FSDP or vLLM's tensor_parallel_size)"
        )
        return (
            f"stage {self.stage}, {self.policy} on {self.gpus} GPU(s), cell {self.spec.cell} (P={self.spec.P} "
            f"G={self.spec.G} K={self.spec.K} mu={self.spec.mu}): phase {peak.phase} needs "
            f"{peak.total / memory.GIB:.1f} GiB on a {device:g} GiB GPU ({peak.largest()}: "
            f"{peak.parts[peak.largest()] / memory.GIB:.1f} GiB); would fit with: {knob}"
        )


def fit_report(profile: Profile, runs: Iterable[tuple[str, int, RunSpec]]) -> list[FitRow]:
    """Per (stage, policy size, GPUs a run uses) the run whose peak is highest, from ``runs``
    ((stage, the processes its layout uses, spec)); CPU runs (0 GPUs) are left out."""
    rows: dict[tuple[str, str, int], FitRow] = {}
    for stage, gpus, spec in runs:
        if not gpus:
            continue
        run = run_memory(profile, spec, gpus)
        phases = memory.phases(run)
        key = (stage, spec.policy, gpus)
        row = FitRow(stage, spec.policy, gpus, spec, run, phases)
        if key not in rows or row.peak.total > rows[key].peak.total:
            rows[key] = row
    return list(rows.values())


def format_fit(rows: list[FitRow]) -> list[str]:
    """The dry run's memory table: per stage, policy size and GPU count, the policy's weights, what
    stays resident through every phase (weights, LoRA and Adam, a colocated PRM, vLLM's share, the CUDA
    context), the dearest run's peak per phase, all in GiB beside the GPU's, and the verdict."""
    if not rows:
        return []
    device = rows[0].run.device_gib
    head = " ".join(f"{p:>10}" for p in memory.PHASES)
    lines = [
        f"memory per GPU, GiB (paper_repro.accounting.memory; dearest run of each row, every completion at the "
        f"cap, prompts at the assumed length; GPU {device:g} GiB):",
        f"  {'stage':<6} {'policy':<6} {'GPUs':>4} {'weights':>8} {'resident':>8} {head}   verdict",
    ]
    for r in rows:
        resident = r.run.resident()
        weights, held = resident["policy weights"] / memory.GIB, sum(resident.values()) / memory.GIB
        cells = " ".join(f"{p.total / memory.GIB:>10.1f}" for p in r.phases)
        verdict = "fits" if r.fits else f"DOES NOT FIT ({r.peak.phase})"
        lines.append(
            f"  {r.stage:<6} {r.policy:<6} {r.gpus:>4} {weights:>8.1f} {held:>8.1f} {cells}   {verdict}"
        )
    return lines
