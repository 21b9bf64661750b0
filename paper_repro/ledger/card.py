"""The compute card: what one ledger-wrapped GRPO run computed, in one record (JSON and Markdown).

:func:`compute_card` reads a finished :class:`~paper_repro.ledger.LedgerGRPOTrainer`: the model (its name or
path; an in-memory model by class and type) and its parameter counts, LoRA, how it ran (dtypes, attention
implementation, activation checkpointing), the round (P / G / K / mu), tokens, C_search / C_learning /
C_reward / C_total under each convention with C_learning split into loss passes, old-policy and reference
forwards, rho and the time-based rho, wall seconds per component, the hardware by name and count, and the
achieved FLOP/s as MFU (useful FLOPs) and HFU (executed FLOPs), each phase's FLOPs against the peak of the
dtype it computed in (measured as the run goes: :mod:`paper_repro.ledger.probes`), the peak resolved in one
place (:func:`paper_repro.accounting.devices.resolve_peak`: ``LedgerConfig.peak_flops``, TRL's table, ours). A CPU has
no datasheet peak: its card states no MFU and shows an fp32 matmul measured in the process beside the run,
as a measurement only. Its ``provenance`` (package versions, the model's revision, the dataset's name and
fingerprint, seeds, the generation backend and sampling, the world size), ``hardware`` and ``versions`` make
it citable (:mod:`paper_repro.ledger.citation`); no NaN anywhere (each becomes null with the reason beside
it). The trainer writes the card at the end of training (``LedgerConfig.card_path``); :func:`card_markdown`
renders it; :func:`utilisation_metrics` is the run's MFU and HFU so far as ``perf/ledger_*`` metrics. This
is the allocation-aware compute report the paper asks runs to publish.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

import torch

from paper_repro.accounting.devices import Peak, cpu_model, matmul_throughput, resolve_peak
from paper_repro.accounting.flops import CONVENTIONS
from paper_repro.ledger.citation import (
    dataset_provenance,  # noqa: F401  re-exported: tests import it (and model_revision) from here
    hardware,
    hardware_line,
    jsonable,
    library_versions,
    model_name,
    model_revision,  # noqa: F401
    provenance,
    provenance_lines,
)
from paper_repro.ledger.core import COMPONENTS, LEARNING_PARTS
from paper_repro.ledger.probes import PHASE_COMPONENT, PHASE_ROWS, PHASES, DtypeProbes

if TYPE_CHECKING:
    from paper_repro.ledger.trainer import LedgerGRPOTrainer

# The JSON's layout; 2: hardware by name, MFU / HFU against a datasheet peak only, C_learning's parts;
# 3: the compute dtype per phase as measured, MFU / HFU per phase's peak, provenance, no NaN.
CARD_VERSION = 3

# The two conventions, one line each (the card's ``conventions``; docs/ledger.md has the long form).
CONVENTION_LINES = {
    "useful": "real tokens only, causal attention: what the paper counts and the budget is charged in "
    "(it includes the recompute the run chose: activation checkpointing, the LM head in backward)",
    "executed": "what the kernels ran: padding, the finished rows HF generate keeps decoding, eager "
    "attention's full score square, the fused head over every position off CUDA/XPU",
}

# What MFU and HFU mean on the card, one line each.
UTILISATION_LINES = {
    "mfu": "model FLOPs utilisation: useful FLOPs per wall second over the peak x processes, each phase's "
    "FLOPs over the peak of the dtype it computed in (sum of FLOPs / peak, over wall seconds x processes)",
    "hfu": "hardware FLOPs utilisation: the same with executed FLOPs",
}

# Why a number the ledger's summary holds as NaN is null on the card (the key beside it: <key>_missing).
NAN_REASONS = {
    "rho": "no FLOPs counted (C_total is 0): no optimizer step ran",
    "rho_time": "no wall seconds counted: no optimizer step ran",
    "max_round_flops": "no generation round completed",
}

# The per-step utilisation metrics (:func:`utilisation_metrics`), beside TRL's own ``perf/`` keys (its
# async GRPO trainer logs ``perf/mfu_fwd_bwd`` and ``perf/mfu_wall_clock``) and, like them, in percent.
UTILISATION_METRIC_NAMES: tuple[str, ...] = tuple(
    f"perf/ledger_{u}{'' if k == 'total' else '_' + k}"
    for u in ("mfu", "hfu")
    for k in ("total", *COMPONENTS)
)

LEARNING_PART_NAMES = {
    "loss": "loss passes (forward + backward)",
    "old": "old-policy forwards",
    "ref": "reference forwards",
}

# The CPU matmul the card shows beside a CPU run: n x n x n fp32, the median of this many repeats.
MATMUL_N, MATMUL_REPEATS = 1024, 15


@functools.cache
def cpu_matmul_throughput() -> dict[str, Any]:
    """fp32 matmul throughput measured once per process (:func:`paper_repro.accounting.devices.matmul_throughput`):
    the trainer measures it when it is built, before training, so the matmuls stay out of the run."""
    return matmul_throughput(n=MATMUL_N, repeats=MATMUL_REPEATS)


def compute_dtype(param_dtype: torch.dtype, mixed_precision: str | None) -> torch.dtype:
    """The dtype the matmuls nominally run in: 16-bit weights as they are, else the autocast of
    ``accelerate``'s ``mixed_precision`` ("bf16" / "fp16"), else the weights' dtype. Nominal only: TRL's
    HF generate unwraps the model from the autocast, so what each phase ran in is measured
    (:mod:`paper_repro.ledger.probes`); this is the fallback for a phase no probe saw."""
    if param_dtype in (torch.bfloat16, torch.float16):
        return param_dtype
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(str(mixed_precision), param_dtype)


def device_name(device: torch.device) -> str:
    """The device by name: the GPU's (``torch.cuda.get_device_name``), the CPU's model, else its type."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        return cpu_model()
    return device.type


def _peak_block(peak: Peak) -> dict[str, Any]:
    return {
        "peak_flops_per_s": peak.peak,
        "peak_dtype": peak.dtype,
        "peak_source": peak.source,
        "peak_missing": peak.missing,
    }


def device_peak(device: torch.device, dtype: Any, override: float | None = None) -> dict[str, Any]:
    """The device a run used and its peak for matmuls in ``dtype``
    (:func:`paper_repro.accounting.devices.resolve_peak`: ``override``, i.e. ``LedgerConfig.peak_flops``, else
    TRL's table, else ours; none on a CPU), with ``peak_source`` and, without a peak, ``peak_missing``."""
    name = device_name(device)
    return {
        "type": device.type,
        "name": name,
        **_peak_block(resolve_peak(name, dtype, override, device.type)),
    }


def _probes(trainer: Any) -> DtypeProbes | None:
    probes = getattr(trainer, "dtype_probes", None)
    return probes if isinstance(probes, DtypeProbes) else None


def phase_peaks(trainer: Any) -> dict[str, dict[str, Any]]:
    """Each phase's compute dtype and peak: the dtype its probe saw (:mod:`paper_repro.ledger.probes`;
    of several, the one with the highest peak, so MFU is not overstated), else an assumed one with
    ``dtype_basis`` saying which: the weights' dtype for rollouts of the ledger's lean or fused sampler
    (``paper_repro.sampler`` runs no autocast), else the nominal one (:func:`compute_dtype`); the peak
    for it from :func:`paper_repro.accounting.devices.resolve_peak`."""
    device = trainer.accelerator.device
    name = device_name(device)
    override = trainer.ledger.config.peak_flops
    weights = next((p.dtype for p in trainer.model.parameters() if p.is_floating_point()), torch.float32)
    nominal = str(compute_dtype(weights, getattr(trainer.accelerator, "mixed_precision", None)))
    probes = _probes(trainer)
    seen = probes.seen if probes is not None else {}
    lean = getattr(trainer, "sampler", "hf") in ("lean", "fused") and not getattr(trainer, "use_vllm", False)
    out = {}
    for phase in PHASES:
        if phase in seen:
            dtypes, basis = seen[phase], "measured"
        elif phase == "search" and lean:
            dtypes = [str(weights)]
            basis = f"assumed: the weights' dtype (the {trainer.sampler} sampler runs no autocast)"
        else:
            dtypes, basis = [nominal], "assumed: nominal (the weights' dtype and mixed_precision)"
        dtypes = [d.removeprefix("torch.") for d in dtypes]
        peaks = [resolve_peak(name, d, override, device.type) for d in dtypes]
        best = max(peaks, key=lambda p: -1.0 if p.peak is None else p.peak)
        out[phase] = {
            "dtype": dtypes[0] if len(dtypes) == 1 else list(dtypes),
            "dtype_observed": phase in seen,
            "dtype_basis": basis,
            **_peak_block(best),
        }
    return out


def _phase_flops(
    components: dict[str, dict[str, float]], parts: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    """Per convention, FLOPs by phase: search and reward are their components, learning its parts."""
    return {
        c: {"search": components[c]["search"], **parts[c], "reward": components[c]["reward"]}
        for c in CONVENTIONS
    }


def _utilisation(
    flops: dict[str, dict[str, float]], seconds: dict[str, float], peaks: dict[str, float | None], world: int
) -> dict[str, dict[str, float | None]]:
    """Per convention and component (and ``total``): the sum over its phases of FLOPs / that phase's
    peak, over its wall seconds x processes (with one peak: FLOP/s over peak x processes). None
    without seconds, where a phase with FLOPs has no peak, or where none of its phases has one."""
    out: dict[str, dict[str, float | None]] = {}
    for convention in CONVENTIONS:
        out[convention] = {}
        for comp in (*COMPONENTS, "total"):
            phases = [p for p in PHASES if comp == "total" or PHASE_COMPONENT[p] == comp]
            busy: float | None = 0.0
            if seconds.get(comp, 0.0) <= 0 or all(peaks[p] is None for p in phases):
                busy = None
            for p in phases:
                f = flops[convention][p]
                if busy is None or f == 0:
                    continue
                busy = None if peaks[p] is None else busy + f / peaks[p]
            out[convention][comp] = None if busy is None else busy / (seconds[comp] * world)
    return out


def utilisation_metrics(trainer: LedgerGRPOTrainer) -> dict[str, float]:
    """The run's MFU and HFU so far, in percent as TRL's ``perf/mfu_*``, for the step-end metrics
    (:data:`UTILISATION_METRIC_NAMES`: ``perf/ledger_mfu``, ``perf/ledger_mfu_search``, ...,
    ``perf/ledger_hfu_reward``): cumulative, like the ledger's other metrics, each phase's FLOPs over
    the peak of its measured dtype. Only where a peak is known and the value is finite: ``{}`` on a
    CPU without ``LedgerConfig.peak_flops``, never NaN."""
    ledger = trainer.ledger
    if trainer.accelerator.device.type != "cuda" and ledger.config.peak_flops is None:
        return {}  # no peak: nothing to resolve each step
    peaks = {p: v["peak_flops_per_s"] for p, v in phase_peaks(trainer).items()}
    components = {c: ledger.component_totals(c) for c in CONVENTIONS}
    util = _utilisation(
        _phase_flops(components, ledger.learning_parts()),
        ledger.seconds_totals(),
        peaks,
        trainer.accelerator.num_processes,
    )
    out = {}
    for convention, u in (("useful", "mfu"), ("executed", "hfu")):
        for comp, value in util[convention].items():
            if value is not None and math.isfinite(value):
                out[f"perf/ledger_{u}{'' if comp == 'total' else '_' + comp}"] = 100 * value
    return out


def _rate(flops: float, seconds: float) -> float | None:
    return flops / seconds if seconds > 0 else None


def _finite(node: Any, reasons: dict[str, str] = NAN_REASONS) -> Any:
    """``node`` with every NaN / inf float made null, a ``<key>_missing`` reason beside each in its
    dict (:data:`NAN_REASONS`, else a generic one); a list's non-finite entries are null, the reason
    beside the list."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            bad = isinstance(value, float) and not math.isfinite(value)
            bad_list = isinstance(value, list) and any(
                isinstance(v, float) and not math.isfinite(v) for v in value
            )
            out[key] = None if bad else _finite(value, reasons)
            if (bad or bad_list) and f"{key}_missing" not in node:
                out[f"{key}_missing"] = reasons.get(key, f"not finite ({value!r}) in the ledger's summary")
        return out
    if isinstance(node, list):
        return [None if isinstance(v, float) and not math.isfinite(v) else _finite(v, reasons) for v in node]
    return node


def compute_card(trainer: LedgerGRPOTrainer) -> dict[str, Any]:
    """What a run computed, in one record: the model and its parameter counts, LoRA, how it ran (the
    compute dtype per phase as measured: :mod:`paper_repro.ledger.probes`), the round (P / G / K / mu),
    tokens, C_search / C_learning / C_reward / C_total under each convention and C_learning's parts
    (``learning_parts``), rho and the time-based rho, wall seconds per component, the hardware, the
    peaks (:func:`phase_peaks`), the achieved FLOP/s under each convention, and MFU (useful) and HFU
    (executed): each phase's FLOPs over its own dtype's peak, over wall seconds times the number of
    processes (the ledger sums FLOPs over processes, its seconds are the main process's); null
    without a peak, the reason in ``mfu_missing``. ``provenance`` (:func:`provenance`) makes it
    citable. Every FLOP, token and second is the ledger's summary: the sums of the step log. No NaN:
    each is null with ``<key>_missing`` beside it."""
    ledger = trainer.ledger
    summary = ledger.summary()
    world = trainer.accelerator.num_processes
    model, execution, dtype_by_phase = _model_and_execution(trainer, summary)
    secs = summary["seconds"]
    flops_by = {c: {k: summary[c][f"C_{k}"] for k in (*COMPONENTS, "total")} for c in CONVENTIONS}
    achieved = {c: {k: _rate(v, secs[k]) for k, v in flops_by[c].items()} for c in CONVENTIONS}
    phase_flops = _phase_flops(flops_by, summary["learning_parts"])
    peaks = phase_peaks(trainer)
    util = _utilisation(phase_flops, secs, {p: v["peak_flops_per_s"] for p, v in peaks.items()}, world)
    ran = [
        p
        for p in PHASES
        if p in dtype_by_phase or phase_flops["useful"][p] > 0 or summary["tokens"].get(PHASE_ROWS[p])
    ]
    device = {
        "type": trainer.accelerator.device.type,
        "name": device_name(trainer.accelerator.device),
        # the peak of the loss passes' dtype (the card's compute_dtype); each phase's in `peaks`
        **{k: v for k, v in peaks["loss"].items() if k.startswith("peak_")},
        "peaks": {p: peaks[p] for p in ran},
    }
    lacking = sorted(
        {peaks[p]["peak_missing"] for p in ran if phase_flops["useful"][p] > 0 and peaks[p]["peak_missing"]}
    )
    mfu_missing = "; ".join(lacking) or (
        None
        if util["useful"]["total"] is not None
        else (device["peak_missing"] or "no wall seconds counted: no optimizer step ran")
    )
    card = {
        "card_version": CARD_VERSION,
        **model,
        "execution": execution,
        "round": _round(trainer, world),
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
        "budget": _budget(trainer, summary),
        "hardware": hardware(trainer.accelerator.device, world),
        "device": device,
        # measured before training, never here (a profiler around the run would count it): by the
        # trainer when built, by the callback when the trainer is built or it is attached
        "measured_matmul": _measured_matmul(
            trainer.accelerator.device, cpu_matmul_throughput.cache_info().currsize > 0
        ),
        "achieved_flops_per_s": achieved["executed"],
        "achieved_useful_flops_per_s": achieved["useful"],
        "utilisation_definitions": dict(UTILISATION_LINES),
        "mfu": util["useful"],
        "hfu": util["executed"],
        "mfu_missing": mfu_missing,  # why MFU and HFU are null, where they are
        "versions": library_versions(),
        "provenance": provenance(trainer),
    }
    return _finite(card)


def _model_and_execution(
    trainer: LedgerGRPOTrainer, summary: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """The card's ``model`` and ``lora`` sections (as one dict, in the card's order), its
    ``execution`` section, and the compute dtype measured per phase."""
    ledger = trainer.ledger
    model = trainer.model
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    params = list(model.parameters())
    lora_params = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
    total_params = sum(p.numel() for p in params)
    lora = ledger.train.lora
    peft_cfg = getattr(model, "peft_config", None) or {}
    alpha = next((getattr(c, "lora_alpha", None) for c in peft_cfg.values()), None)
    dtype = next((p.dtype for p in params if p.is_floating_point()), torch.float32)
    mixed = getattr(trainer.accelerator, "mixed_precision", None)
    nominal = str(compute_dtype(dtype, mixed)).removeprefix("torch.")
    probes = _probes(trainer)
    by_phase = probes.by_phase() if probes is not None else {}
    dtype_missing = probes.missing(summary["tokens"]) if probes is not None else {}
    if probes is None:
        dtype_missing = {"all": "no dtype probes installed (paper_repro.ledger.probes.install_dtype_probes)"}
    loss_dtype = by_phase.get("loss")
    train = ledger.train
    sections = {
        "model": {
            **model_name(model, ledger.policy.model_type, ledger.policy.name),
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
    }
    execution = {
        "dtype": str(dtype).removeprefix("torch."),
        "mixed_precision": mixed,
        # the loss passes' dtype as measured; the nominal one where the probe did not see them
        "compute_dtype": loss_dtype if loss_dtype is not None else nominal,
        "compute_dtype_source": "measured in the loss passes"
        if loss_dtype is not None
        else "nominal: the weights' dtype and mixed_precision (the loss passes were not measured)",
        "compute_dtype_nominal": nominal,
        "compute_dtype_by_phase": by_phase,
        "compute_dtype_missing": dtype_missing,
        "attn_implementation": getattr(base.config, "_attn_implementation", None),
        "activation_checkpointing": bool(getattr(trainer.args, "activation_checkpointing", False)),
        # how the backward replays checkpointed layers, as priced: "full" (reentrant, or early stop
        # off) or "early_stop" (non-reentrant: each layer's last matmul not replayed); null when off
        "activation_checkpointing_recompute": train.recompute if train.gradient_checkpointing else None,
        "activation_checkpointing_every_n_layers": (
            train.checkpoint_every_n_layers if train.gradient_checkpointing else None
        ),
        "sampler": getattr(trainer, "sampler", None),
        "update_layout": getattr(trainer, "update_layout", None),
    }
    return sections, execution, by_phase


def _measured_matmul(device: torch.device, measured: bool = True) -> dict[str, Any] | None:
    """On a CPU, this process's fp32 matmul throughput (:func:`cpu_matmul_throughput`: a measurement
    shown beside the run, not a peak); None on an accelerator, or where it was not ``measured``
    before training (it is not measured at the end: a profiler around the run would count it)."""
    if device.type != "cpu" or not measured:
        return None
    m = cpu_matmul_throughput()
    return {
        **m,
        "label": f"measured fp32 matmul throughput (median of {m['repeats']})",
        "note": f"{m['n']}^3 fp32 matmuls at {m['torch_threads']} torch threads, measured in this "
        "process before training; a measurement beside the run, not a peak",
    }


def _round(trainer: LedgerGRPOTrainer, world: int) -> dict[str, Any]:
    """The card's ``round``: P / G / K / mu, rows per round over ``world`` processes, the completion
    length cap and beta."""
    args = trainer.args
    rows = args.per_device_train_batch_size * args.steps_per_generation * world
    return {
        "P": rows // trainer.num_generations,
        "G": trainer.num_generations,
        "K": trainer._kept,
        "mu": trainer.num_iterations,
        "rows": rows,
        "max_completion_length": args.max_completion_length,
        "beta": trainer.beta,
        "processes": world,
    }


def _budget(trainer: LedgerGRPOTrainer, summary: dict[str, Any]) -> dict[str, Any]:
    """The card's ``budget``: the budget in FLOPs, whether it stopped the run, the round prices, the
    prompt length the ceiling was priced with and the resume, each null with its reason beside it."""
    ledger = trainer.ledger
    resumed_from = getattr(ledger, "resumed_from", None)
    prompt_source = getattr(ledger, "prompt_length_source", None)
    budget = {
        "budget_flops": summary["budget_flops"],
        "stopped_by_budget": summary["stopped_by_budget"],
        "over_budget": summary["over_budget"],
        "max_round_flops": summary["max_round_flops"],
        "first_round_flops": ledger.config.first_round_flops,
        "round_ceiling_flops": ledger.config.round_ceiling_flops
        or (trainer.round_price or {}).get("C_total"),
        "prompt_length_source": prompt_source,
        "resumed": None if resumed_from is None else bool(resumed_from),
        "resumed_from": None if resumed_from is None else jsonable(list(resumed_from)),
    }
    if prompt_source is None:
        budget["prompt_length_source_missing"] = (
            "not recorded by this ledger"
            if not hasattr(ledger, "prompt_length_source")
            else "LedgerConfig.round_ceiling_flops was given: no prompt length priced"
            if ledger.config.round_ceiling_flops
            else "the round ceiling was not self-priced (no budget, or no prompt to price it with)"
        )
    if resumed_from is None:
        budget["resumed_missing"] = "not recorded by this ledger"
    return budget


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


def card_markdown(card: dict[str, Any]) -> str:
    """The compute card as a list and Markdown tables."""
    m, r, lora, dev, ex = card["model"], card["round"], card["lora"], card["device"], card["execution"]
    named = m["name"] if m["in_memory"] else f"`{m['name']}` ({m['class']}, {m['model_type']})"
    peak_line = (
        f"- peak: {_fmt(dev['peak_flops_per_s'])} FLOP/s per device ({dev['peak_dtype']}, the loss passes'): "
        f"{dev['peak_source']}"
        if dev["peak_flops_per_s"]
        else f"- peak: none, so MFU and HFU are not stated: {dev['peak_missing']}"
    )
    if dev["peak_flops_per_s"]:
        others = [
            f"{phase} {_fmt(p['peak_flops_per_s'])} ({p['peak_dtype']}, {p['peak_source']})"
            for phase, p in dev.get("peaks", {}).items()
            if phase != "loss"
        ]
        peak_line += "; per phase: " + ", ".join(others) if others else ""
    by_phase = ex.get("compute_dtype_by_phase") or {}
    dtypes = ", ".join(f"{k} {'+'.join(v) if isinstance(v, list) else v}" for k, v in by_phase.items())
    unseen = ", ".join(f"{k} ({v})" for k, v in (ex.get("compute_dtype_missing") or {}).items())
    prov = card.get("provenance") or {}
    lines = [
        f"# Compute card: {m['name']}",
        "",
        f"- model: {named}, "
        f"{m['parameters']:,} parameters ({m['non_embedding_parameters']:,} non-embedding), "
        f"{m['trainable_parameters']:,} trainable",
        f"- execution: weights {ex['dtype']}, mixed precision {ex['mixed_precision']} (loss matmuls in "
        f"{ex['compute_dtype']}), attention `{ex['attn_implementation']}`, activation checkpointing "
        f"{'on (recompute ' + str(ex['activation_checkpointing_recompute']) + ')' if ex['activation_checkpointing'] else 'off'}, sampler {ex['sampler']}, update layout "
        f"{ex['update_layout']}",
        f"- compute dtype by phase (measured): {dtypes or 'none measured'}"
        + (f"; not measured: {unseen}" if unseen else ""),
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
        hardware_line(card),
        peak_line,
    ]
    if prov:
        lines += provenance_lines(prov)
    budget = card["budget"]
    if budget.get("resumed") is not None or budget.get("prompt_length_source") is not None:
        resumed = budget.get("resumed_from") or []
        lines.append(
            "- resumed: "
            + (", ".join(f"from {r.get('checkpoint')} at step {r.get('step')}" for r in resumed) or "no")
            + f"; round ceiling's prompt length: {budget.get('prompt_length_source') or '–'}"
        )
    measured = card["measured_matmul"]
    if measured is not None:
        lines.append(
            f"- {measured['label']}: {_fmt(measured['flops_per_s'])} FLOP/s (range "
            f"{_fmt(measured['min_flops_per_s'])} to {_fmt(measured['max_flops_per_s'])}; {measured['note']})"
        )
    return "\n".join([*lines, *_tables_markdown(card)]) + "\n"


def _tables_markdown(card: dict[str, Any]) -> list[str]:
    """The card's conventions, its FLOPs / seconds / utilisation table, C_learning by part and the
    token counts, as Markdown lines."""
    keys = (*COMPONENTS, "total")
    lines = ["", "Conventions:", ""]
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
    return lines
