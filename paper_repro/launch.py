"""Where a run's rows go: the batch layout over processes and micro-batches, and the multi-GPU launch.

:func:`batch_layout` lays one generation round of P x G rows out over processes and micro-batches so
that the rollout batch and the optimizer batch are the same whatever the GPU count. A spec that asks
for more than one GPU outside a distributed launch is started by :func:`launch` as ``accelerate
launch`` of :mod:`paper_repro.worker`, whose main process appends the run's row.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from paper_repro.spec import RunSpec


@dataclass(frozen=True)
class BatchLayout:
    """How one generation round of P x G rows is laid out over processes and micro-batches. The
    rollout batch and the optimizer batch (one step per epoch over all P x G rows, or the K-of-G kept
    ones) are the same whatever the layout, so runs on 1, 2 or 8 GPUs are the same experiment."""

    processes: int
    per_device: int  # TRL's per-device batch: generated rows per micro-batch (before keeping K of G)
    accumulation: int  # micro-batches per process per round, accumulated into one optimizer step
    note: str = ""

    @property
    def rows(self) -> int:
        return self.processes * self.per_device * self.accumulation


def batch_layout(P: int, G: int, K: int, gpus: int = 0, micro_batch: int | None = None) -> BatchLayout:
    """The layout of a round of ``P`` prompts x ``G`` completions on ``gpus`` processes (0: one CPU
    process), with at most ``micro_batch`` kept rows per loss forward/backward.

    With down-sampling (K < G) every process must hold whole groups (it keeps K of each of its own
    groups), so processes = the largest count <= gpus that divides P; fewer GPUs than asked is said
    in ``note``. Raises if no micro-batch size fits (the kept rows must split evenly too)."""
    rows = P * G
    asked = max(gpus, 1)
    procs = asked
    if K < G:
        procs = max(d for d in range(1, asked + 1) if P % d == 0)
    else:
        procs = max(d for d in range(1, asked + 1) if rows % d == 0)
    note = f"uses {procs} of {asked} GPUs: P={P} prompts do not split over {asked}" if procs < asked else ""
    share = rows // procs
    kept_share = share // G * K if K < G else share
    cap = micro_batch or kept_share
    # TRL generates a process's whole share at once, then splits the (kept) rows into
    # `accumulation` micro-batches for the loss: both must split evenly.
    for accumulation in range(1, kept_share + 1):
        if share % accumulation or kept_share % accumulation or kept_share // accumulation > cap:
            continue
        return BatchLayout(procs, share // accumulation, accumulation, note)
    raise ValueError(
        f"no micro-batch layout for P={P}, G={G}, K={K} on {procs} process(es) with micro_batch "
        f"{micro_batch}: {share} generated and {kept_share} kept rows per process must split evenly "
        f"into micro-batches of at most {cap} kept rows"
    )


def needs_launch(spec: RunSpec) -> bool:
    """A multi-GPU spec asked for outside a distributed launch: it must be started with accelerate."""
    return spec.runtime.gpus > 1 and "WORLD_SIZE" not in os.environ and "LOCAL_RANK" not in os.environ


def is_main_process() -> bool:
    return os.environ.get("RANK", "0") == "0"


def launch(spec: RunSpec, root: Path, executed_notebook: str) -> tuple[int, str]:
    """Run a multi-GPU spec as ``accelerate launch`` of :mod:`paper_repro.worker`, whose main process
    appends the run's row to ``root/runs.csv``; returns the launcher's exit code and command line.
    The base metrics are computed here first, on one GPU, so the workers find them cached (an
    evaluation on rank 0 alone would stall the other ranks' collectives)."""
    import subprocess
    import sys

    import torch

    from paper_repro import models
    from paper_repro.evaluate import base_metrics
    from paper_repro.trainer import load_parts

    layout = batch_layout(spec.P, spec.G, spec.K, spec.runtime.gpus, spec.runtime.micro_batch)
    available = torch.cuda.device_count()
    if available < layout.processes:
        raise ValueError(
            f"run {spec.run_id} ({spec.setting} {spec.cell}) needs {layout.processes} GPUs; "
            f"{available} visible. Set resources[{spec.policy}].gpus in the profile to what you have."
        )
    parts = load_parts(spec)
    base_metrics(spec, parts, root)
    del parts
    torch.cuda.empty_cache()
    spec_file = root / "launch" / f"{spec.run_id}.json"
    spec_file.parent.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(spec.to_json())
    config = models.local(spec.runtime.accelerate_config)
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", config,
           "--num_processes", str(layout.processes), "-m", "paper_repro.worker", str(spec_file),
           "--results", str(root), "--executed", executed_notebook]  # fmt: skip
    completed = subprocess.run(cmd, check=False)
    return completed.returncode, " ".join(cmd)
