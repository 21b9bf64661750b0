"""Where a run's rows go: the batch layout over processes and micro-batches, and the multi-GPU launch.

:func:`batch_layout` lays one generation round of P x G rows out over processes and micro-batches so
that the rollout batch and the optimizer batch are the same whatever the GPU count. A spec that asks
for more than one GPU outside a distributed launch is started by :func:`paper_repro.run.train.launch_run` as ``accelerate
launch`` of :mod:`paper_repro.run.worker`, whose main process appends the run's row.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from paper_repro.run.spec import RunSpec


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
