"""The compute card: what one ledger-wrapped GRPO run computed, in one record (JSON and Markdown).

:func:`compute_card` reads a finished :class:`~paper_repro.ledger.LedgerGRPOTrainer`: the model and
its parameter counts, LoRA, the round (P / G / K / mu), tokens, C_search / C_learning / C_reward /
C_total under each convention, rho and the time-based rho, wall seconds per component, the device
and the achieved FLOP/s with the utilisation against the device's peak (:func:`device_peak`: a
table of datasheet peaks for GPUs, a matmul peak measured in the process on CPU). The trainer writes
it at the end of training (``LedgerConfig.card_path``); :func:`card_markdown` renders it.
This is the allocation-aware compute report the paper asks runs to publish.
"""

from __future__ import annotations

import functools
import math
import platform
from typing import TYPE_CHECKING, Any

import torch

from paper_repro.devices import gpu_peak, matmul_peak_flops
from paper_repro.flops import CONVENTIONS
from paper_repro.ledger.core import COMPONENTS

if TYPE_CHECKING:
    from paper_repro.ledger.trainer import LedgerGRPOTrainer


@functools.cache
def cpu_matmul_peak() -> float:
    return matmul_peak_flops(n=1024, repeats=10)


def device_peak(device: torch.device, dtype: torch.dtype, override: float | None = None) -> dict[str, Any]:
    """The device a run used and the peak its utilisation is stated against: ``override`` when
    given; on a GPU the datasheet peak of :data:`paper_repro.devices.GPU_PEAK_FLOPS` for the model's
    dtype (16-bit tensor core or fp32), none for a GPU not in the table; on CPU an fp32 1024^3 matmul
    measured in this process (:func:`paper_repro.devices.matmul_peak_flops`), at torch's thread count."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        half = dtype in (torch.bfloat16, torch.float16)
        peak, source = (
            None,
            f"{name} is not in the table of known GPU peaks: pass LedgerConfig(peak_flops=...)",
        )
        known = gpu_peak(name, half)
        if known is not None:
            key, peak = known
            source = f"datasheet dense {'16-bit tensor' if half else 'fp32'} peak of the {key}"
    else:
        name = platform.processor() or platform.machine() or device.type
        name = f"{name} ({torch.get_num_threads()} torch threads)"
        peak, source = None, ""
    if override is not None:
        peak, source = float(override), "given (LedgerConfig.peak_flops)"
    elif device.type != "cuda":
        peak, source = cpu_matmul_peak(), "measured fp32 1024^3 matmul in this process"
    return {"type": device.type, "name": name, "peak_flops_per_s": peak, "peak_source": source}


def compute_card(trainer: LedgerGRPOTrainer) -> dict[str, Any]:
    """What a run computed, in one record: the model and its parameter counts, LoRA, the round
    (P / G / K / mu), tokens, C_search / C_learning / C_reward / C_total under each convention,
    rho and the time-based rho, wall seconds per component, the device and the achieved FLOP/s
    (executed FLOPs per wall second) with the utilisation against the device's peak
    (:func:`device_peak`; times the number of processes, whose FLOPs the ledger sums while its
    seconds are the main process's). Every number is the ledger's summary: the sums of the step log."""
    import trl

    ledger = trainer.ledger
    summary = ledger.summary()
    model = trainer.model
    params = list(model.parameters())
    lora_params = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
    total_params = sum(p.numel() for p in params)
    lora = ledger.train.lora
    peft_cfg = getattr(model, "peft_config", None) or {}
    alpha = next((getattr(c, "lora_alpha", None) for c in peft_cfg.values()), None)
    args = trainer.args
    world = trainer.accelerator.num_processes
    rows = args.per_device_train_batch_size * args.steps_per_generation * world
    dtype = next((p.dtype for p in params if p.is_floating_point()), torch.float32)
    device = device_peak(trainer.accelerator.device, dtype, ledger.config.peak_flops)
    secs, executed = summary["seconds"], summary["executed"]
    achieved = {k: executed[f"C_{k}"] / secs[k] if secs[k] > 0 else None for k in (*COMPONENTS, "total")}
    peak = device["peak_flops_per_s"]
    utilisation = {k: (v / (peak * world) if v is not None and peak else None) for k, v in achieved.items()}
    return {
        "model": {
            "name": ledger.policy.name or getattr(model.config, "_name_or_path", ""),
            "model_type": ledger.policy.model_type,
            "parameters": total_params - lora_params,
            "parameters_analytic": ledger.policy.parameter_count(),
            "non_embedding_parameters": ledger.policy.parameter_count(include_embeddings=False),
            "trainable_parameters": sum(p.numel() for p in params if p.requires_grad),
            "dtype": str(dtype).removeprefix("torch."),
        },
        "lora": None
        if lora is None
        else {
            "rank": lora.rank,
            "alpha": alpha,
            "target_modules": list(lora.target_modules),
            "adapter_parameters": lora_params,
        },
        "round": {
            "P": rows // trainer.num_generations,
            "G": trainer.num_generations,
            "K": trainer._kept,
            "mu": trainer.num_iterations,
            "rows": rows,
            "max_completion_length": args.max_completion_length,
            "beta": trainer.beta,
            "processes": world,
        },
        "steps": summary["steps"],
        "rounds": summary["rounds"],
        "tokens": summary["tokens"],
        "flops": {c: summary[c] for c in CONVENTIONS},
        "rho": summary["useful"]["rho"],
        "rho_executed": summary["executed"]["rho"],
        "rho_time": summary["rho_time"],
        "seconds": secs,
        "budget": {
            "budget_flops": summary["budget_flops"],
            "stopped_by_budget": summary["stopped_by_budget"],
            "over_budget": summary["over_budget"],
            "max_round_flops": summary["max_round_flops"],
            "first_round_flops": ledger.config.first_round_flops,
            "round_ceiling_flops": ledger.config.round_ceiling_flops
            or (trainer.round_price or {}).get("C_total"),
        },
        "device": device,
        "achieved_flops_per_s": achieved,
        "utilisation": utilisation,
        "versions": {"trl": trl.__version__, "torch": torch.__version__},
    }


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.4g}"
    return str(value)


def card_markdown(card: dict[str, Any]) -> str:
    """The compute card as Markdown tables."""
    m, r, lora, dev = card["model"], card["round"], card["lora"], card["device"]
    lines = [
        f"# Compute card: {m['name'] or m['model_type']}",
        "",
        f"- model: `{m['name']}` ({m['model_type']}, {m['dtype']}), {m['parameters']:,} parameters "
        f"({m['non_embedding_parameters']:,} non-embedding), {m['trainable_parameters']:,} trainable",
        "- LoRA: "
        + (
            "none (full fine-tuning)"
            if lora is None
            else f"rank {lora['rank']}, alpha {lora['alpha']}, on {', '.join(lora['target_modules'])} "
            f"({lora['adapter_parameters']:,} adapter parameters)"
        ),
        f"- round: P={r['P']} prompts x G={r['G']} completions, K={r['K']} kept, mu={r['mu']} epochs, "
        f"max_completion_length={r['max_completion_length']}, beta={r['beta']}, {r['processes']} process(es)",
        f"- {card['steps']} optimizer steps, {card['rounds']} generation rounds; budget "
        f"{_fmt(card['budget']['budget_flops'])} FLOPs (stopped by budget: {card['budget']['stopped_by_budget']})",
        f"- device: {dev['name']} ({dev['type']}); peak {_fmt(dev['peak_flops_per_s'])} FLOP/s: {dev['peak_source']}",
        "",
        "| | search | learning | reward | total | rho (learning / total) |",
        "|---|---|---|---|---|---|",
    ]
    for convention, f in card["flops"].items():
        cells = [_fmt(f[k]) for k in ("C_search", "C_learning", "C_reward", "C_total", "rho")]
        lines.append(f"| FLOPs ({convention}) | " + " | ".join(cells) + " |")
    s, a, u = card["seconds"], card["achieved_flops_per_s"], card["utilisation"]
    lines.append(
        "| wall seconds | "
        + " | ".join(_fmt(s[k]) for k in (*COMPONENTS, "total"))
        + f" | {_fmt(card['rho_time'])} (time) |"
    )
    lines.append(
        "| achieved FLOP/s (executed) | " + " | ".join(_fmt(a[k]) for k in (*COMPONENTS, "total")) + " | |"
    )
    lines.append("| utilisation of peak | " + " | ".join(_fmt(u[k]) for k in (*COMPONENTS, "total")) + " | |")
    lines += ["", "| tokens | count |", "|---|---|"]
    lines += [f"| {k} | {_fmt(v)} |" for k, v in card["tokens"].items()]
    return "\n".join(lines) + "\n"
