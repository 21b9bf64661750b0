"""``paper-repro flops``: the analytic FLOPs of one GRPO round. Its round options are the fields of
:class:`paper_repro.accounting.flops.GRPOStep` and :class:`~paper_repro.accounting.flops.TrainSpec`,
with their defaults (K all G, one epoch); how the policy trains (the LoRA rank and targets, beta,
vLLM's prefix cache) defaults to a profile's train section (``--profile``), else to that section's
own defaults (:class:`paper_repro.config.TrainConfig`), the one owner of each."""

from __future__ import annotations

import argparse
import json

from paper_repro.accounting import flops
from paper_repro.commands._options import (
    PROFILE_HELP,
    add_command,
    dataclass_options,
    default_of,
    positive_int,
)
from paper_repro.config import TrainConfig

NAME = "flops"
HELP = "price one GRPO round in FLOPs (useful convention)"
MODEL_HELP = "checkpoint directory, config.json, hub id with a shipped config, or shipped config name"
STEP_HELP = {
    "prompt_tokens": "tokens per prompt",
    "completion_tokens": "tokens per completion",
    "generations": "G, completions per prompt",
    "epochs": "mu, update epochs (num_iterations)",
    "prompts": "P, prompts per round",
}
# Options whose default is not a field's: K (all G) and what the train section says (None: not given)
DERIVED_HELP = {
    "kept": "K <= G, completions kept per prompt (default: G, every completion kept)",
    "beta": "KL coefficient; != 0 adds a reference forward (default: the train section's beta)",
    "prefix_cache": "prefill each prompt once, as vLLM does (default: where the train section generates with vLLM)",
}


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    f = add_command(
        subparsers,
        NAME,
        HELP,
        "Analytic FLOPs of one GRPO generation round: P prompts x G completions, K kept for the update, "
        "MU epochs, at fixed prompt and completion lengths.",
    )
    f.add_argument("--model", required=True, help=f"the policy: {MODEL_HELP}")
    f.add_argument(
        "--profile",
        default=None,
        help=f"take how the policy trains (LoRA rank and targets, beta, vLLM generation) from this profile's "
        f"train section ({PROFILE_HELP}); default: that section's own defaults",
    )
    # GRPOStep has no default prompt count or mu: priced alone, a round is one prompt's, with one
    # update epoch (TRL's num_iterations default)
    dataclass_options(f, flops.GRPOStep, STEP_HELP, defaults={"prompts": 1, "epochs": 1})
    f.add_argument("--kept", type=positive_int, default=None, help=DERIVED_HELP["kept"])
    f.add_argument("--beta", type=float, default=None, help=DERIVED_HELP["beta"])
    f.add_argument(
        "--prefix-cache",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=DERIVED_HELP["prefix_cache"],
    )
    unset = default_of(TrainConfig, "lora_rank")
    f.add_argument(
        "--lora-rank",
        type=positive_int,
        default=None,
        help=f"LoRA rank on the train section's target modules (default: the profile's train.lora_rank; "
        f"without --profile, {unset}, the train section's own default, which is not gpu-paper's: give "
        "--profile gpu-paper for its rank)",
    )
    f.add_argument(
        "--reward-model", default=None, help=f"the PRM ({MODEL_HELP}); none: a rule-based reward, 0 FLOPs"
    )
    dataclass_options(f, flops.TrainSpec, {"gradient_checkpointing": "add the recompute forward"})
    f.add_argument("--json", action="store_true", help="print one JSON object")
    return f


def profile_train(profile: str | None) -> tuple[str | None, TrainConfig]:
    """The name of ``profile`` and its train section; without one, ``(None, TrainConfig())``: the
    section's defaults, what a profile that names none of its fields trains with."""
    if profile is None:
        return None, TrainConfig()
    from paper_repro.config import load_profile

    loaded = load_profile(profile)
    return loaded.name, loaded.train


def run(args: argparse.Namespace) -> int:
    from paper_repro import models

    profile, section = profile_train(args.profile)
    vllm = section.generation == "vllm"
    policy = models.shape(args.model)
    reward = models.shape(args.reward_model) if args.reward_model else None
    rank = args.lora_rank if args.lora_rank is not None else section.lora_rank
    lora = flops.LoRASpec(rank=rank, target_modules=(section.lora_targets,))
    train = flops.TrainSpec(lora=lora, gradient_checkpointing=args.gradient_checkpointing)
    unset = {"kept": args.generations, "beta": section.beta, "prefix_cache": vllm}
    derived = {k: unset[k] if getattr(args, k) is None else getattr(args, k) for k in DERIVED_HELP}
    # under vLLM, TRL corrects for the sampler's log-probs with an old-policy forward, as the planner prices it
    step = flops.GRPOStep(
        **{name: getattr(args, name) for name in STEP_HELP}, **derived, vllm_importance_sampling=vllm
    )
    cost = flops.grpo_step_cost(policy, step, train=train, reward_model=reward)
    per_token = flops.per_token_flops(policy, lora)
    out = {
        "model": policy.name,
        "reward_model": reward.name if reward else None,
        "profile": profile,  # whose train section the unset options came from (None: its defaults)
        "convention": "useful",
        **cost.as_dict(),
        "per_token": {
            "forward": per_token.forward,
            "lora_train": per_token.lora_train,
            "full_train": per_token.full_train,
            "attention_per_pair": per_token.attention_per_pair,
        },
        "non_embedding_params": policy.body_matmul_params,
        "step": {
            "prompts": step.prompts,
            "generations": step.generations,
            "kept": step.kept,
            "epochs": step.epochs,
            "prompt_tokens": step.prompt_tokens,
            "completion_tokens": step.completion_tokens,
            "beta": step.beta,
            "old_logprobs": step.runs_old_logprobs,
            "prefix_cache": step.prefix_cache,
            "lora_rank": lora.rank,
            "lora_targets": list(lora.target_modules),
        },
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"model {out['model']}  (non-embedding matmul params {policy.body_matmul_params:,})")
    source = f"profile {profile}" if profile else "no --profile: the train section's defaults"
    print(
        f"  P {step.prompts}, G {step.generations}, K {step.kept}, mu {step.epochs}; LoRA rank {rank} ({source})"
    )
    for key in ("C_search", "C_learning", "C_reward", "C_total"):
        print(f"  {key:<11} {out[key]:.4e} FLOPs")
    print(f"  rho         {out['rho']:.4f}")
    pt = out["per_token"]
    print(
        f"  per token: forward {pt['forward']:.4e}, LoRA train {pt['lora_train']:.4e}, "
        f"full train {pt['full_train']:.4e} FLOPs"
    )
    return 0
