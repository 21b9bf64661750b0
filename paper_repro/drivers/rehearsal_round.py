"""One GRPO round of a gpu-paper cell through the study's own run path, at real widths on the CPU.

The rehearsal's pass-by-pass measurements (:mod:`paper_repro.drivers.rehearsal`) call the study's
pieces one at a time; this runs them as the study does: a checkpoint of the policy size and of the
PRM at their real widths with their depth cut (random bf16 weights, saved with the interfaces of
:mod:`paper_repro.testbed.qwen_interface`: a byte-level stand-in of Qwen2.5's tokenizer, the real
vocabulary size in the embeddings and head, the PRM's remote code), a copy of the gpu-paper profile
over them whose stage D rewards that size with the PRM, the planner's spec of one cell (scaled down
in P, G and the lengths), and :func:`paper_repro.run.train.run_cell`: the ledger, TRL's
``GRPOTrainer`` under :class:`paper_repro.ledger.LedgerGRPOTrainer`, the PRM reward, the base and
final evaluations with the PRM judge, the row.

Each phase's peak is the bytes resident when it starts (the parameters and buffers of the policy and
the PRM, Adam's state) plus the peak of :class:`paper_repro.accounting.profiling.LiveBytes` inside it,
the phase marked by wrapping the trainer's own methods (generation: ``_generate_single_turn``; prm:
``_calculate_rewards``; old_pass: ``_get_per_token_logps_and_entropies`` without gradients; loss:
``training_step`` once its batch is prepared; evaluation: :func:`paper_repro.run.run_eval.evaluate_run`), the largest over a
round's occurrences. The ledger's FLOPs are the run's row (``C_total_executed``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from paper_repro.drivers.rehearsal import RoundShapes  # the round's shapes, beside the passes'

# the round's attention: eager, which FlopCounterMode sees (it cannot see the CPU's sdpa kernel); the
# memory model is read with it too, since eager holds each layer's attention weights (the runs: sdpa)
ROUND_ATTENTION = "eager"


def write_checkpoints(size: str, layers: int, root: Path) -> tuple[Path, Path]:
    """The policy ``size`` of gpu-paper and its PRM at ``layers`` layers, real widths, random bf16
    weights, saved under ``root`` with the stand-in tokenizer; returns (policy path, PRM path)."""
    from safetensors.torch import save_file

    from paper_repro.config import load_profile
    from paper_repro.drivers.rehearsal import _policy, _prm
    from paper_repro.testbed.qwen_interface import PRM_CONFIG_KEYS, qwen25_style_tokenizer, write_prm_code

    profile = load_profile("gpu-paper")
    tokenizer = qwen25_style_tokenizer()
    policy_dir, prm_dir = root / f"policy-{size}-{layers}", root / f"prm-{layers}"
    policy = _policy(profile.policies[size], layers, fused_head=False)
    policy.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.pad_token_id]
    policy.save_pretrained(policy_dir)
    tokenizer.save_pretrained(policy_dir)
    del policy
    prm = _prm(profile.prm, layers)
    write_prm_code(prm_dir)
    config = {**prm.model.config.to_dict(), **PRM_CONFIG_KEYS, "dtype": "bfloat16"}
    (prm_dir / "config.json").write_text(json.dumps(config, indent=1))
    tensors = {k: v.contiguous() for k, v in prm.state_dict().items()}
    save_file(tensors, prm_dir / "model.safetensors", metadata={"format": "pt"})
    tokenizer.save_pretrained(prm_dir)
    return policy_dir, prm_dir


def round_profile(size: str, layers: int, shapes: RoundShapes, root: Path) -> Path:
    """gpu-paper over the cut checkpoints: its policy ``size`` and PRM replaced, its datasets local
    rows in the hub's columns, stage D's PRM reward on ``size``, lengths and evaluation cut to
    ``shapes``, one process on the CPU with gradient checkpointing and HF ``generate``; every other
    setting gpu-paper's (bf16, LoRA, chat template, PRM judge). Returns the YAML path."""
    import yaml

    from paper_repro.config import load_profile
    from paper_repro.testbed.qwen_interface import write_hub_rows

    policy, prm = write_checkpoints(size, layers, root)
    files = write_hub_rows(root)
    raw = yaml.safe_load(Path(load_profile("gpu-paper").source).read_text())
    raw["name"] = f"rehearsal-{size}-{layers}"
    raw["policies"] = {size: str(policy)}
    raw["prm"] = str(prm)
    raw["stages"] = {"A": {"reward": "sparse"}, "D": {"policy": size, "rewards": ["prm"]}}
    raw["data"] = {
        "train": f"POLARIS-Project/Polaris-Dataset-53K={files['polaris']}",
        "heldout": f"POLARIS-Project/Polaris-Dataset-53K={files['polaris']}",
        "gsm": f"openai/gsm8k={files['gsm8k']}",
        "math": f"HuggingFaceH4/MATH-500={files['math500']}",
    }
    raw["eval"] = {"limit": 1, "heldout_limit": 1, "max_new_tokens": shapes.eval_new, "batch_size": 8}
    raw["train"]["max_completion_length"] = shapes.completion
    raw["expected_lengths"] = {"prompt": 90, "completion": shapes.completion}
    raw["resources"] = {size: {"gpus": 0, "gradient_checkpointing": True, "sampler": "hf"}}
    path = root / f"{raw['name']}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def round_spec(profile_path: Path, shapes: RoundShapes):
    """The planner's spec of one round of stage D's PRM setting at ``shapes`` (K = G), its budget
    2.5 rounds' cost at the
    profile's expected 90-token prompts: the chat template's prompts are about twice that, so the
    ledger stops after the first round's ``mu`` optimizer steps."""
    from paper_repro.config import load_profile
    from paper_repro.run import allocation
    from paper_repro.run.spec import spec_for

    profile = load_profile(profile_path)
    (setting,) = profile.settings("D")
    planner = allocation.planner_for(profile, setting)
    one = planner.explicit(shapes.P, shapes.G, shapes.G, shapes.mu, 1e30, label="x").round_cost.C_total
    cell = planner.explicit(shapes.P, shapes.G, shapes.G, shapes.mu, 2.5 * one, label="r70")
    return profile, spec_for(profile, setting, cell, seed=0)


class PhaseMeter:
    """Each phase's peak bytes: the resident bytes when it starts (:func:`resident`) plus what
    :class:`LiveBytes` sees allocated inside it, the largest over its occurrences."""

    def __init__(self, resident) -> None:
        self.resident = resident
        self.peaks: dict[str, float] = {}
        self.above: dict[str, float] = {}
        self.flops: dict[str, int] = {}
        self.active: str | None = None

    def wrap(self, phase: str, fn, when=lambda: True):
        from paper_repro.accounting.profiling import LiveBytes, flop_counter

        meter = self

        def measured(*args, **kwargs):
            if not when():
                return fn(*args, **kwargs)
            base, meter.active = meter.resident(), phase
            counter = flop_counter(by_module=False)
            with LiveBytes() as live, counter:
                out = fn(*args, **kwargs)
            meter.flops[phase] = meter.flops.get(phase, 0) + int(counter.get_total_flops())
            meter.active = None
            meter.peaks[phase] = max(meter.peaks.get(phase, 0.0), base + live.peak)
            meter.above[phase] = max(meter.above.get(phase, 0.0), live.peak)
            return out

        return measured


def _loss_step(measured):
    """``training_step`` with its batch prepared first, outside ``measured`` (the loss phase): TRL
    generates, scores and runs the old policy's pass inside ``_prepare_inputs``, phases of their own."""

    def step(self, model, inputs, *args, **kwargs):
        prepared = self._prepare_inputs(inputs)
        self._prepare_inputs = lambda _: prepared
        try:
            return measured(self, model, inputs, *args, **kwargs)
        finally:
            del self._prepare_inputs

    return step


def measure_round(size: str, layers: int, shapes: RoundShapes, root: Path) -> dict[str, Any]:
    """One round of ``size`` at ``layers`` layers through :func:`run_cell`, in this process, under
    ``root``: each phase's measured peak (bytes), the ledger's FLOPs and the round's token counts
    from its step log, and the spec it ran."""
    import torch

    from paper_repro.drivers.rehearsal import _static_bytes, contiguous_linear_inputs
    from paper_repro.ledger.trainer import LedgerGRPOTrainer
    from paper_repro.rewards.prm_scorer import PRMScorer
    from paper_repro.run import train

    profile, spec = round_spec(round_profile(size, layers, shapes, root), shapes)
    held: dict[str, Any] = {}

    def resident() -> int:
        trainer, scorer = held.get("trainer"), held.get("scorer")
        modules = [m for m in (trainer and trainer.model, scorer and scorer.model) if m is not None]
        optimizer = trainer and trainer.optimizer
        state = [t for s in (optimizer.state.values() if optimizer else ()) for t in s.values()]
        return _static_bytes(*modules, *[t for t in state if torch.is_tensor(t) and t.dim()])

    meter = PhaseMeter(resident)
    cls = LedgerGRPOTrainer
    names = (
        "__init__",
        "_generate_single_turn",
        "_calculate_rewards",
        "_get_per_token_logps_and_entropies",
        "training_step",
    )
    originals = {n: getattr(cls, n) for n in names}
    load, evaluate_run = PRMScorer.__dict__["load"], train.evaluate_run

    def init(self, *args, **kwargs):
        originals["__init__"](self, *args, **kwargs)
        held["trainer"] = self
        self.model.base_model.model.set_attn_implementation(ROUND_ATTENTION)
        held["scorer"].model.set_attn_implementation(ROUND_ATTENTION)

    def load_scorer(*args, **kwargs):
        held["scorer"] = load.__func__(PRMScorer, *args, **kwargs)
        held["scorer"].model.register_forward_pre_hook(judged, with_kwargs=True)
        return held["scorer"]

    def judged(module, args, kwargs):  # the PRM's widest read while the evaluation judges
        if meter.active == "evaluation":
            ids = kwargs.get("input_ids", args[0] if args else None)
            held["judge_tokens"] = max(held.get("judge_tokens", 0), ids.shape[-1])

    try:
        cls.__init__ = init
        PRMScorer.load = load_scorer
        cls._generate_single_turn = meter.wrap("generation", originals["_generate_single_turn"])
        cls._calculate_rewards = meter.wrap("prm", originals["_calculate_rewards"])
        cls._get_per_token_logps_and_entropies = meter.wrap(
            "old_pass",
            originals["_get_per_token_logps_and_entropies"],
            when=lambda: not torch.is_grad_enabled(),
        )
        cls.training_step = _loss_step(meter.wrap("loss", originals["training_step"]))
        train.evaluate_run = meter.wrap("evaluation", evaluate_run)
        with contiguous_linear_inputs():
            row = train.run_cell(spec, root / "results", raise_errors=True)
    finally:
        for name, fn in originals.items():
            setattr(cls, name, fn)
        PRMScorer.load, train.evaluate_run = load, evaluate_run
    steps = [json.loads(line) for line in (root / "results" / "steps" / f"{spec.run_id}.jsonl").open()]
    return {
        "size": size,
        "layers": layers,
        "cell": f"{spec.setting} P={spec.P} G={spec.G} K={spec.K} mu={spec.mu}",
        "row": {k: row.get(k) for k in ("status", "C_total", "C_total_executed", "rounds", "steps")},
        "measured": meter.peaks,
        "above": meter.above,
        "profiler_flops": meter.flops,
        "ledger_flops": ledger_flops(steps),
        "model": modelled(profile, spec, shapes, steps[0]["tokens"], held.get("judge_tokens")),
    }


# the ledger's categories of a step's executed FLOPs, by the phase that runs them
LEDGER_PHASES = {"generation": ("search",), "prm": ("reward",), "old_pass": ("old",), "loss": ("loss",)}


def ledger_flops(steps: list[dict]) -> dict[str, float]:
    """The executed FLOPs the ledger charged each phase over ``steps`` (its step log)."""
    out = dict.fromkeys(LEDGER_PHASES, 0.0)
    for step in steps:
        charged = {**step["flops"]["executed"], **step.get("learning_parts", {}).get("executed", {})}
        for phase, (key,) in LEDGER_PHASES.items():
            out[phase] += charged.get(key, 0.0)
    return out


def modelled(
    profile, spec, shapes: RoundShapes, tokens: dict, judge_tokens: int | None
) -> dict[str, dict[str, float]]:
    """The memory model of the round as it ran (its prompts' mean length from the ledger's token
    counts, one problem per evaluation batch, the judge's widest read ``judge_tokens``, the round's
    attention :data:`ROUND_ATTENTION`): per phase, the total and what is above the resident state
    (weights, LoRA, Adam's moments), bytes."""
    from paper_repro.accounting import memory
    from paper_repro.drivers.rehearsal import Shapes, model_at

    prompt = round(tokens["gen_prompt_tokens"] / tokens["gen_rows"])
    rows = shapes.P * shapes.G
    cut = Shapes(
        prompt=prompt, completion=shapes.completion, rows=rows, eval_rows=1, eval_new=shapes.eval_new
    )
    run = replace(model_at(profile, spec, cut, None), judge_tokens=judge_tokens, attention=ROUND_ATTENTION)
    resident = sum(run.resident().values())
    return {p.phase: {"total": p.total, "above": p.total - resident} for p in memory.phases(run)}
