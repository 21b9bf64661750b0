"""Devices: the one place a peak FLOP/s is resolved, the CPU's name, and matmul throughput measured now.

:func:`resolve_peak` is the single owner of "what is this device's peak for this dtype": a peak given
by the user (``LedgerConfig.peak_flops``), else TRL's own table (``trl.trainer.utils.get_peak_flops``,
the dense 16-bit tensor-core peaks TRL's MFU uses), else :data:`GPU_PEAK_FLOPS`, this package's table
of what TRL does not know (fp32 and TF32 peaks, and the V100's fp16), else no peak with the reason.
Each (device, dtype) has one owner: a row of ours that TRL also knows is dropped (``tests/test_card.py``
checks none overlaps). A compute card's MFU and the dry run's GPU-hours both read their peak here.

A CPU has no datasheet peak here: :func:`matmul_throughput` measures what an fp32 matmul achieves (the
median of repeats, a measurement to show beside a run, not a peak to divide by),
:func:`matmul_peak_flops` the best of repeats (the benchmark's reference), and :func:`cpu_model` names
the processor.
"""

from __future__ import annotations

import platform
import re
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, NamedTuple

CPUINFO = Path("/proc/cpuinfo")  # where Linux names the processor ("model name")

# Where a peak came from (a compute card's ``peak_source``).
SOURCE_GIVEN = "LedgerConfig.peak_flops"
SOURCE_TRL = "trl.get_peak_flops"
SOURCE_TABLE = "paper_repro.accounting.devices table"

# Dense (no sparsity) peak FLOP/s from the vendors' datasheets for what TRL's table
# (trl.trainer.utils._PEAK_FLOPS_BY_DEVICE: bf16 / fp16 only) does not hold: fp32 (CUDA cores),
# ``tfloat32`` (fp32 matmuls on TF32 tensor cores, when torch allows them) and the V100's fp16. Its
# 16-bit rows for H200, H100 (SXM, PCIe), A100, L40S, L4 and T4 agreed with TRL's and were dropped:
# TRL owns them. Matched as TRL matches: the longest name first, as a whole word, case-blind.
GPU_PEAK_FLOPS: dict[str, dict[str, float]] = {
    "H200 NVL": {"float32": 60e12, "tfloat32": 417.5e12},
    "H200": {"float32": 67e12, "tfloat32": 494.7e12},  # SXM
    "H100 NVL": {"float32": 60e12, "tfloat32": 417.5e12},
    "H100 PCIe": {"float32": 51e12, "tfloat32": 378e12},
    "H100": {"float32": 67e12, "tfloat32": 494.7e12},  # SXM
    "A100": {"float32": 19.5e12, "tfloat32": 156e12},
    "L40S": {"float32": 91.6e12, "tfloat32": 183e12},
    "L4": {"float32": 30.3e12, "tfloat32": 60e12},
    "V100": {"float16": 125e12, "float32": 15.7e12},  # no bf16, no TF32
    "T4": {"float32": 8.1e12},  # fp16 is TRL's; no bf16, no TF32
}

_DTYPE_NAMES = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float": "float32",
    "tf32": "tfloat32",
}


class Peak(NamedTuple):
    """A device's peak FLOP/s for one dtype: ``peak`` (None when unknown), ``source`` (one of
    :data:`SOURCE_GIVEN`, :data:`SOURCE_TRL`, :data:`SOURCE_TABLE`; None when unknown), ``missing``
    (why there is none), ``dtype`` (the dtype the peak is for: ``tfloat32`` for fp32 matmuls that run
    on TF32 tensor cores) and ``matched`` (the table's name the device matched, where known)."""

    peak: float | None
    source: str | None
    missing: str | None = None
    dtype: str | None = None
    matched: str | None = None


def dtype_name(dtype: Any) -> str:
    """``torch.bfloat16`` / ``"bf16"`` / ``"bfloat16"`` -> ``"bfloat16"`` (torch's name, no prefix)."""
    name = str(dtype).removeprefix("torch.")
    return _DTYPE_NAMES.get(name, name)


def tf32_matmuls() -> bool:
    """Whether torch runs CUDA fp32 matmuls on TF32 tensor cores now (``GRPOConfig(tf32=True)``,
    ``torch.backends.cuda.matmul.allow_tf32`` / ``fp32_precision``, or a float32 matmul precision
    below "highest")."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy flag is deprecated in newer torch
        matmul = torch.backends.cuda.matmul
        return bool(
            getattr(matmul, "fp32_precision", None) == "tf32"
            or getattr(matmul, "allow_tf32", False)
            or torch.get_float32_matmul_precision() != "highest"
        )


def _match(name: str, keys) -> str | None:
    folded = name.casefold()
    for key in sorted(keys, key=len, reverse=True):
        if re.search(rf"\b{re.escape(key.casefold())}\b", folded):
            return key
    return None


def trl_peak(device_name: str, dtype: str) -> float | None:
    """TRL's dense peak for ``device_name`` in ``dtype`` (``trl.trainer.utils.get_peak_flops``), None
    where TRL does not know it (or this TRL has no table)."""
    try:
        from trl.trainer.utils import get_peak_flops
    except ImportError:
        return None
    return get_peak_flops(device_name, dtype)


def resolve_peak(
    device_name: str,
    dtype: Any,
    override: float | None = None,
    device_type: str = "cuda",
    tf32: bool | None = None,
) -> Peak:
    """The peak FLOP/s per device a run's MFU is stated against, for matmuls in ``dtype``, and where
    it came from: ``override`` (``LedgerConfig.peak_flops``: any device, any dtype) when given; on a
    GPU TRL's table (:func:`trl_peak`), else ours (:data:`GPU_PEAK_FLOPS`); fp32 matmuls on TF32 tensor
    cores (``tf32``, default :func:`tf32_matmuls`) are priced at the TF32 peak. Else no peak, with the
    reason in ``missing``: a GPU or dtype neither table holds, a CPU (no datasheet peak), another device."""
    dtype = dtype_name(dtype)
    if override is not None:
        return Peak(float(override), SOURCE_GIVEN, None, dtype)
    hint = "pass LedgerConfig(peak_flops=...) to state MFU"
    if device_type == "cpu":
        return Peak(
            None,
            None,
            "a CPU has no datasheet peak here (the matmul throughput measured in the "
            f"process is shown beside the run, as a measurement): {hint}",
            dtype,
        )
    if device_type != "cuda":
        return Peak(None, None, f"no peak known for a {device_type} device: {hint}", dtype)
    if dtype == "float32" and (tf32_matmuls() if tf32 is None else tf32):
        dtype = "tfloat32"
    peak = trl_peak(device_name, dtype)
    if peak is not None:
        return Peak(float(peak), SOURCE_TRL, None, dtype)
    key = _match(device_name, GPU_PEAK_FLOPS)
    if key is not None and dtype in GPU_PEAK_FLOPS[key]:
        return Peak(GPU_PEAK_FLOPS[key][dtype], SOURCE_TABLE, None, dtype, key)
    return Peak(
        None,
        None,
        f"no {dtype} peak for {device_name} in TRL's table (trl.get_peak_flops) or "
        f"ours (paper_repro.accounting.devices.GPU_PEAK_FLOPS): {hint}",
        dtype,
    )


def gpu_peak(name: str, half: bool = True) -> tuple[str, float] | None:
    """(the name matched, or ``name``; its dense peak FLOP/s) for a GPU named ``name`` (as
    ``torch.cuda.get_device_name`` or a profile names it): bf16 tensor-core with ``half`` (fp16 where
    the GPU has no bf16), else fp32 (no TF32); None for a GPU neither table knows
    (:func:`resolve_peak`)."""
    dtypes = ("bfloat16", "float16") if half else ("float32",)
    for dtype in dtypes:
        found = resolve_peak(name, dtype, tf32=False)
        if found.peak is not None:
            return found.matched or name, found.peak
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
