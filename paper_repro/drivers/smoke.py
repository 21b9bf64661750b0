"""``make gpu-smoke``: one short, prepared check for a machine with a CUDA GPU (under 5 minutes).

1. ``cuda-bf16``: a cpu-tiny cell (policy M, TRL's default allocation K = G = 8, mu = 1) trained and
   evaluated on the GPU in bf16 with HF generate, at a quarter of the cpu-tiny budget, through
   :func:`paper_repro.run.train.run_cell`: the ledger, the budget stop and the evaluation on CUDA.
2. ``vllm-colocate`` (only if ``vllm`` is installed): the same cell with TRL's vLLM colocate rollouts,
   which the ledger prices from token counts with each prompt prefilled once.

Each check's row goes to ``<out>/results/`` (never the committed tables); ``<out>/gpu_smoke.json``
holds each check's status, seconds, FLOPs, rho and metrics, and on a GPU its peak allocated and
reserved bytes (``paper-repro rehearse --compare`` sets them beside the memory model), and
``<out>/gpu_smoke.log`` the log.
Without a GPU it stops with a clear message, unless ``--allow-cpu`` (how the tests run it).

    paper-repro smoke --out gpu_smoke [--allow-cpu] [--budget-scale 0.25]
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import socket
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path


def _cell(backend: str, dtype: str, budget_scale: float):
    from paper_repro.config import load_profile
    from paper_repro.run.spec import default_cell_spec

    profile = load_profile("cpu-tiny")
    profile = replace(
        profile,
        budget_flops=profile.budget_flops * budget_scale,
        train=replace(profile.train, dtype=dtype, generation=backend),
        seeds=1,
    )
    (setting,) = [s for s in profile.settings("A") if s.policy == profile.stages["B"].policies[0]]
    return default_cell_spec(profile, setting, seed=0)


def _single_process_env() -> None:
    """vLLM colocate runs one engine per rank through torch.distributed: a one-process world."""
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])


def run_check(name: str, backend: str, dtype: str, budget_scale: float, out: Path, log) -> dict:
    import torch

    from paper_repro.run import train

    started = time.perf_counter()
    if torch.cuda.is_available():  # the run's own peak, for the memory model (paper-repro rehearse --compare)
        torch.cuda.reset_peak_memory_stats()
    try:
        spec = _cell(backend, dtype, budget_scale)
        log.info(
            "%s: run %s (%s, P=%d G=%d K=%d mu=%d, budget %.3g FLOPs)",
            name,
            spec.run_id,
            backend,
            spec.P,
            spec.G,
            spec.K,
            spec.mu,
            spec.budget_flops,
        )
        row = train.run_cell(spec, out / "results" / name, raise_errors=True)
        keys = (
            "status",
            "rounds",
            "steps",
            "C_total",
            "budget_flops",
            "rho",
            "native_reward",
            "gsm_pass1",
            "base_gsm_pass1",
            "seconds_train",
            "seconds_eval",
        )
        result = {"check": name, **{k: row.get(k) for k in keys}, "P": spec.P, "G": spec.G, "K": spec.K}
        result.update(mu=spec.mu, backend=backend, dtype=dtype)
        if torch.cuda.is_available():
            result["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
            result["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        if not row["C_total"] <= spec.budget_flops:
            result["status"] = f"failed: C_total {row['C_total']:.4g} above the budget"
    except Exception as err:
        log.error("%s failed:\n%s", name, traceback.format_exc())
        result = {"check": name, "status": f"failed: {type(err).__name__}: {err}"}
    result["seconds"] = round(time.perf_counter() - started, 1)
    log.info("%s: %s", name, json.dumps(result, default=str))
    return result


def check(out: str | Path = "gpu_smoke", allow_cpu: bool = False, budget_scale: float = 0.25) -> int:
    """Run the checks into folder ``out`` (``budget_scale``: the share of the cpu-tiny budget; without
    a GPU only with ``allow_cpu``); 0 when none failed, 1 when one did, 2 with no GPU to check."""
    import torch

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(message)s",
        handlers=[logging.FileHandler(out / "gpu_smoke.log", mode="w"), logging.StreamHandler(sys.stdout)],
    )
    log = logging.getLogger("gpu-smoke")
    cuda = torch.cuda.is_available()
    if not cuda and not allow_cpu:
        log.error(
            "no CUDA GPU visible (torch %s, CUDA build %s): nothing to check here. "
            "Run this on a GPU machine, or pass --allow-cpu to exercise the script.",
            torch.__version__,
            torch.version.cuda,
        )
        return 2
    device = torch.cuda.get_device_name(0) if cuda else "cpu"
    log.info("device %s, torch %s (CUDA %s)", device, torch.__version__, torch.version.cuda)
    results = [run_check("cuda-bf16" if cuda else "cpu-bf16", "hf", "bfloat16", budget_scale, out, log)]
    if importlib.util.find_spec("vllm") is None:
        results.append({"check": "vllm-colocate", "status": "skipped: vllm is not installed"})
    elif not cuda:
        results.append({"check": "vllm-colocate", "status": "skipped: vLLM needs a GPU"})
    else:
        _single_process_env()
        results.append(run_check("vllm-colocate", "vllm", "bfloat16", budget_scale, out, log))
    summary = {"device": device, "torch": torch.__version__, "checks": results, "budget_scale": budget_scale}
    if cuda:
        summary["device_total_bytes"] = torch.cuda.get_device_properties(0).total_memory
    (out / "gpu_smoke.json").write_text(json.dumps(summary, indent=2, default=str))
    failed = [r for r in results if str(r["status"]).startswith("failed")]
    log.info("%d check(s), %d failed; summary in %s", len(results), len(failed), out / "gpu_smoke.json")
    return 1 if failed else 0
