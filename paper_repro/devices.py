"""Devices: the one table of datasheet peak FLOP/s, the CPU's name, and matmul throughput measured now.

Utilisation (achieved / peak) in a compute card and the dry run's GPU-hours both read their peak
here. A GPU is matched by name against :data:`GPU_PEAK_FLOPS`, the longest key first (as verl's FLOPs
counter keeps its table). A CPU has no datasheet peak here: :func:`matmul_throughput` measures what
an fp32 matmul achieves (the median of repeats, a measurement to show beside a run, not a peak to
divide by), :func:`matmul_peak_flops` the best of repeats (the benchmark's reference), and
:func:`cpu_model` names the processor.
"""

from __future__ import annotations

import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")  # where Linux names the processor ("model name")

# Dense (no sparsity) peak FLOP/s from the vendors' datasheets: (16-bit tensor core, fp32 non-tensor).
# V100 and T4 have fp16, not bf16.
GPU_PEAK_FLOPS: dict[str, tuple[float, float]] = {
    "H200": (989e12, 67e12),
    "H100 PCIe": (756e12, 51e12),
    "H100": (989e12, 67e12),  # SXM
    "A100": (312e12, 19.5e12),
    "L40S": (362e12, 91.6e12),
    "L4": (121e12, 30.3e12),
    "V100": (125e12, 15.7e12),
    "T4": (65e12, 8.1e12),
}


def gpu_peak(name: str, half: bool = True) -> tuple[str, float] | None:
    """(the table's key, its dense peak FLOP/s) for a GPU named ``name`` (as
    ``torch.cuda.get_device_name`` or a profile names it): 16-bit tensor-core with ``half``, else
    fp32; None for a GPU not in the table."""
    for key in sorted(GPU_PEAK_FLOPS, key=len, reverse=True):
        if key in name:
            return key, GPU_PEAK_FLOPS[key][0 if half else 1]
    return None


def cpu_model() -> str:
    """The processor's model name: ``model name`` of /proc/cpuinfo on Linux (e.g. "AMD EPYC 7763
    64-Core Processor"), else ``platform.processor()``, else the machine type (e.g. "x86_64")."""
    if sys.platform.startswith("linux"):
        try:
            for line in CPUINFO.read_text().splitlines():
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return " ".join(value.split())
        except OSError:
            pass
    return platform.processor() or platform.machine() or "unknown CPU"


def matmul_throughput(n: int = 1024, repeats: int = 21, warmup: int = 3) -> dict[str, Any]:
    """fp32 FLOP/s of an n x n x n matmul on this machine now, at torch's thread count: the median of
    ``repeats`` timed matmuls after ``warmup`` untimed ones (the median, not the best: one lucky
    repeat on a shared machine should not move it), with the spread."""
    import torch

    # its own generator: measuring must not move the global RNG a run samples from
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=generator), torch.randn(n, n, generator=generator)
    for _ in range(warmup):
        torch.mm(a, b)
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        rates.append(2 * n**3 / (time.perf_counter() - start))
    return {
        "flops_per_s": statistics.median(rates),
        "min_flops_per_s": min(rates),
        "max_flops_per_s": max(rates),
        "statistic": "median",
        "repeats": repeats,
        "n": n,
        "dtype": "float32",
        "torch_threads": torch.get_num_threads(),
    }


def matmul_peak_flops(n: int = 1024, repeats: int = 20) -> float:
    """Best achieved fp32 FLOP/s of an n x n x n matmul on this machine, now."""
    import torch

    # its own generator: measuring the peak must not move the global RNG a run samples from (the first
    # run of a process measured it and so sampled differently from the same spec run later)
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=generator), torch.randn(n, n, generator=generator)
    torch.mm(a, b)
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = max(best, 2 * n**3 / (time.perf_counter() - start))
    return best
