"""The compute card: what one ledger-wrapped GRPO run computed, in one record (JSON and Markdown).

:func:`compute_card` reads a finished :class:`~paper_repro.ledger.LedgerGRPOTrainer`: the model (its
name or path; an in-memory model by class and type) and its parameter counts, LoRA, how it ran
(dtypes, attention implementation, activation checkpointing), the round (P / G / K / mu), tokens,
C_search / C_learning / C_reward / C_total under each convention with C_learning split into loss
passes, old-policy and reference forwards, rho and the time-based rho, wall seconds per component,
the hardware by name and count, and the achieved FLOP/s as MFU (useful FLOPs) and HFU (executed
FLOPs) against a datasheet peak from :data:`paper_repro.devices.GPU_PEAK_FLOPS` (or
``LedgerConfig.peak_flops``). A CPU has no datasheet peak: its card states no MFU and shows an fp32
matmul measured in the process beside the run, as a measurement only. The trainer writes the card at
the end of training (``LedgerConfig.card_path``); :func:`card_markdown` renders it. This is the
allocation-aware compute report the paper asks runs to publish.
"""

from __future__ import annotations

import functools
import math
import os
import platform
from typing import TYPE_CHECKING, Any

import torch

from paper_repro.devices import cpu_model, gpu_peak, matmul_throughput
from paper_repro.flops import CONVENTIONS
from paper_repro.ledger.core import COMPONENTS, LEARNING_PARTS

if TYPE_CHECKING:
    from paper_repro.ledger.trainer import LedgerGRPOTrainer

# The JSON's layout; 2: hardware by name, MFU / HFU against a datasheet peak only, C_learning's parts.
CARD_VERSION = 2

# The two conventions, one line each (the card's ``conventions``; docs/ledger.md has the long form).
CONVENTION_LINES = {
    "useful": "real tokens only, causal attention: what the paper counts and the budget is charged in "
    "(it includes the recompute the run chose: activation checkpointing, the LM head in backward)",
    "executed": "what the kernels ran: padding, the finished rows HF generate keeps decoding, eager "
    "attention's full score square, the fused head over every position off CUDA/XPU",
}

# What MFU and HFU mean on the card, one line each.
UTILISATION_LINES = {
    "mfu": "model FLOPs utilisation: useful FLOPs per wall second over the peak x processes",
    "hfu": "hardware FLOPs utilisation: executed FLOPs per wall second over the peak x processes",
}

LEARNING_PART_NAMES = {
    "loss": "loss passes (forward + backward)",
    "old": "old-policy forwards",
    "ref": "reference forwards",
}

# The CPU matmul the card shows beside a CPU run: n x n x n fp32, the median of this many repeats.
MATMUL_N, MATMUL_REPEATS = 1024, 15


@functools.cache
def cpu_matmul_throughput() -> dict[str, Any]:
    """fp32 matmul throughput measured once per process (:func:`paper_repro.devices.matmul_throughput`):
    the trainer measures it when it is built, before training, so the matmuls stay out of the run."""
    return matmul_throughput(n=MATMUL_N, repeats=MATMUL_REPEATS)


def compute_dtype(param_dtype: torch.dtype, mixed_precision: str | None) -> torch.dtype:
    """The dtype the matmuls run in: 16-bit weights as they are, else the autocast of
    ``accelerate``'s ``mixed_precision`` ("bf16" / "fp16"), else the weights' dtype."""
    if param_dtype in (torch.bfloat16, torch.float16):
        return param_dtype
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(str(mixed_precision), param_dtype)


def device_peak(device: torch.device, dtype: torch.dtype, override: float | None = None) -> dict[str, Any]:
    """The device a run used and the peak its MFU is stated against: ``override`` when given
    (``LedgerConfig.peak_flops``); on a GPU the dense datasheet peak of
    :data:`paper_repro.devices.GPU_PEAK_FLOPS` for the compute dtype (16-bit tensor core, or fp32);
    else none, with the reason in ``peak_missing``: a GPU not in the table, or a CPU (no datasheet
    peak; a matmul measured in the process is a measurement, not a peak to divide by)."""
    half = dtype in (torch.bfloat16, torch.float16)
    peak, source, missing = None, None, None
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        known = gpu_peak(name, half)
        if known is not None:
            key, peak = known
            source = f"datasheet dense {'16-bit tensor-core' if half else 'fp32'} peak of the {key}"
        else:
            missing = (
                f"{name} is not in the table of GPU peaks (paper_repro.devices.GPU_PEAK_FLOPS): "
                "pass LedgerConfig(peak_flops=...) to state MFU"
            )
    elif device.type == "cpu":
        name = cpu_model()
        missing = (
            "a CPU has no datasheet peak here (the matmul throughput measured in the process is shown "
            "beside the run, as a measurement): pass LedgerConfig(peak_flops=...) to state MFU"
        )
    else:
        name = device.type
        missing = f"no peak known for a {device.type} device: pass LedgerConfig(peak_flops=...) to state MFU"
    if override is not None:
        peak, source, missing = float(override), "given (LedgerConfig.peak_flops)", None
    return {
        "type": device.type,
        "name": name,
        "peak_flops_per_s": peak,
        "peak_dtype": str(dtype).removeprefix("torch."),
        "peak_source": source,
        "peak_missing": missing,
    }


def hardware(device: torch.device, processes: int) -> dict[str, Any]:
    """The machine by name and count: the CPU (model, logical CPUs, the ones this process may use,
    torch's threads), the GPU (model, how many the run used: one per process, and how many this
    process sees; ``None`` off CUDA) and the number of processes."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpu = None
    if device.type == "cuda":
        gpu = {
            "model": torch.cuda.get_device_name(device),
            "count": processes,
            "visible_to_process": torch.cuda.device_count(),
        }
    return {
        "cpu": {
            "model": cpu_model(),
            "logical_cpus": os.cpu_count(),
            "usable_cpus": usable,
            "torch_threads": torch.get_num_threads(),
        },
        "gpu": gpu,
        "processes": processes,
        "platform": platform.platform(),
    }


def _model_name(model: Any, model_type: str, ledger_name: str) -> dict[str, Any]:
    """The model's hub id or path; an in-memory model (empty ``_name_or_path``) by class and type."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    path = getattr(base.config, "_name_or_path", "") or ledger_name
    cls = type(base).__name__
    if path:
        return {"name": str(path), "in_memory": False, "class": cls}
    return {"name": f"in-memory {cls} ({model_type})", "in_memory": True, "class": cls}


def _rate(flops: float, seconds: float) -> float | None:
    return flops / seconds if seconds > 0 else None


def compute_card(trainer: LedgerGRPOTrainer) -> dict[str, Any]:
    """What a run computed, in one record: the model and its parameter counts, LoRA, how it ran, the
    round (P / G / K / mu), tokens, C_search / C_learning / C_reward / C_total under each convention
    and C_learning's parts (``learning_parts``), rho and the time-based rho, wall seconds per
    component, the hardware, the peak (:func:`device_peak`), the achieved FLOP/s under each
    convention, and MFU (useful) and HFU (executed) against the peak times the number of processes
    (the ledger sums FLOPs over processes, its seconds are the main process's); ``None`` without a
    peak, the reason in ``device.peak_missing``. Every FLOP, token and second is the ledger's
    summary: the sums of the step log."""
    import transformers
    import trl

    ledger = trainer.ledger
    summary = ledger.summary()
    model = trainer.model
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
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
    mixed = getattr(trainer.accelerator, "mixed_precision", None)
    matmul_dtype = compute_dtype(dtype, mixed)
    accelerator_device = trainer.accelerator.device
    device = device_peak(accelerator_device, matmul_dtype, ledger.config.peak_flops)
    measured = None
    if accelerator_device.type == "cpu":
        m = cpu_matmul_throughput()
        measured = {
            **m,
            "label": f"measured fp32 matmul throughput (median of {m['repeats']})",
            "note": f"{m['n']}^3 fp32 matmuls at {m['torch_threads']} torch threads, measured in this "
            "process before training; a measurement beside the run, not a peak",
        }
    secs = summary["seconds"]
    flops_by = {c: {k: summary[c][f"C_{k}"] for k in (*COMPONENTS, "total")} for c in CONVENTIONS}
    achieved = {c: {k: _rate(v, secs[k]) for k, v in flops_by[c].items()} for c in CONVENTIONS}
    peak = device["peak_flops_per_s"]

    def utilisation(convention: str) -> dict[str, float | None]:
        return {
            k: v / (peak * world) if v is not None and peak else None for k, v in achieved[convention].items()
        }

    return {
        "card_version": CARD_VERSION,
        "model": {
            **_model_name(model, ledger.policy.model_type, ledger.policy.name),
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
        "execution": {
            "dtype": str(dtype).removeprefix("torch."),
            "mixed_precision": mixed,
            "compute_dtype": str(matmul_dtype).removeprefix("torch."),
            "attn_implementation": getattr(base.config, "_attn_implementation", None),
            "activation_checkpointing": bool(getattr(args, "activation_checkpointing", False)),
            "sampler": getattr(trainer, "sampler", None),
            "update_layout": getattr(trainer, "update_layout", None),
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
        "conventions": dict(CONVENTION_LINES),
        "flops": {c: summary[c] for c in CONVENTIONS},
        "learning_parts": summary["learning_parts"],
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
        "hardware": hardware(accelerator_device, world),
        "device": device,
        "measured_matmul": measured,
        "achieved_flops_per_s": achieved["executed"],
        "achieved_useful_flops_per_s": achieved["useful"],
        "utilisation_definitions": dict(UTILISATION_LINES),
        "mfu": utilisation("useful"),
        "hfu": utilisation("executed"),
        "mfu_missing": None if peak else device["peak_missing"],  # why MFU and HFU are null
        "versions": {
            "trl": trl.__version__,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
    }


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.4g}"
    return str(value)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.3g}%"


def _hardware_line(card: dict[str, Any]) -> str:
    hw, dev = card["hardware"], card["device"]
    cpu = hw["cpu"]
    line = (
        f"- hardware: CPU {cpu['model']} ({cpu['logical_cpus']} logical CPUs, {cpu['usable_cpus']} usable, "
        f"{cpu['torch_threads']} torch threads)"
    )
    gpu = hw["gpu"]
    if gpu is not None:
        line += f"; GPU {gpu['count']} x {gpu['model']} ({gpu['visible_to_process']} visible to the process)"
    elif dev["type"] not in ("cpu", "cuda"):
        line += f"; device {dev['type']}"
    return line + f"; {hw['processes']} process(es); {hw['platform']}"


def card_markdown(card: dict[str, Any]) -> str:
    """The compute card as a list and Markdown tables."""
    m, r, lora, dev, ex = card["model"], card["round"], card["lora"], card["device"], card["execution"]
    keys = (*COMPONENTS, "total")
    named = m["name"] if m["in_memory"] else f"`{m['name']}` ({m['class']}, {m['model_type']})"
    peak_line = (
        f"- peak: {_fmt(dev['peak_flops_per_s'])} FLOP/s per device ({dev['peak_dtype']}): {dev['peak_source']}"
        if dev["peak_flops_per_s"]
        else f"- peak: none, so MFU and HFU are not stated: {dev['peak_missing']}"
    )
    lines = [
        f"# Compute card: {m['name']}",
        "",
        f"- model: {named}, "
        f"{m['parameters']:,} parameters ({m['non_embedding_parameters']:,} non-embedding), "
        f"{m['trainable_parameters']:,} trainable",
        f"- execution: weights {ex['dtype']}, mixed precision {ex['mixed_precision']} (matmuls in "
        f"{ex['compute_dtype']}), attention `{ex['attn_implementation']}`, activation checkpointing "
        f"{'on' if ex['activation_checkpointing'] else 'off'}, sampler {ex['sampler']}, update layout "
        f"{ex['update_layout']}",
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
        _hardware_line(card),
        peak_line,
    ]
    measured = card["measured_matmul"]
    if measured is not None:
        lines.append(
            f"- {measured['label']}: {_fmt(measured['flops_per_s'])} FLOP/s (range "
            f"{_fmt(measured['min_flops_per_s'])} to {_fmt(measured['max_flops_per_s'])}; {measured['note']})"
        )
    lines += ["", "Conventions:", ""]
    lines += [f"- **{c}**: {text}" for c, text in card["conventions"].items()]
    lines += [
        "",
        "| | search | learning | reward | total | rho (learning / total) |",
        "|---|---|---|---|---|---|",
    ]
    for convention, f in card["flops"].items():
        cells = [_fmt(f[k]) for k in ("C_search", "C_learning", "C_reward", "C_total", "rho")]
        lines.append(f"| FLOPs ({convention}) | " + " | ".join(cells) + " |")
    s = card["seconds"]
    lines.append(
        "| wall seconds | " + " | ".join(_fmt(s[k]) for k in keys) + f" | {_fmt(card['rho_time'])} (time) |"
    )
    lines.append(
        "| achieved FLOP/s (useful) | "
        + " | ".join(_fmt(card["achieved_useful_flops_per_s"][k]) for k in keys)
        + " | |"
    )
    lines.append(
        "| achieved FLOP/s (executed) | "
        + " | ".join(_fmt(card["achieved_flops_per_s"][k]) for k in keys)
        + " | |"
    )
    lines.append("| MFU (useful / peak) | " + " | ".join(_pct(card["mfu"][k]) for k in keys) + " | |")
    lines.append("| HFU (executed / peak) | " + " | ".join(_pct(card["hfu"][k]) for k in keys) + " | |")
    lines += ["", *(f"- {k.upper()}: {v}" for k, v in card["utilisation_definitions"].items())]
    parts = card["learning_parts"]
    lines += [
        "",
        "C_learning by part:",
        "",
        "| | " + " | ".join(LEARNING_PART_NAMES[p] for p in LEARNING_PARTS) + " | C_learning |",
        "|---|" + "---|" * (len(LEARNING_PARTS) + 1),
    ]
    for convention, f in card["flops"].items():
        cells = [_fmt(parts[convention][p]) for p in LEARNING_PARTS] + [_fmt(f["C_learning"])]
        lines.append(f"| FLOPs ({convention}) | " + " | ".join(cells) + " |")
    lines += ["", "| tokens | count |", "|---|---|"]
    lines += [f"| {k} | {_fmt(v)} |" for k, v in card["tokens"].items()]
    return "\n".join(lines) + "\n"
