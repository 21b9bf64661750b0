"""``paper-repro flops``: the analytic FLOPs of one GRPO round. Its round options are the fields of
:class:`paper_repro.accounting.flops.GRPOStep`, :class:`~paper_repro.accounting.flops.LoRASpec` and
:class:`~paper_repro.accounting.flops.TrainSpec`, with their defaults."""

from __future__ import annotations

import argparse
import json

from paper_repro.accounting import flops
from paper_repro.commands._options import add_command, dataclass_options, default_of, positive_int

NAME = "flops"
HELP = "price one GRPO round in FLOPs (useful convention)"
MODEL_HELP = "checkpoint directory, config.json, hub id with a shipped config, or shipped config name"
STEP_HELP = {
    "prompt_tokens": "tokens per prompt",
    "completion_tokens": "tokens per completion",
    "generations": "G, completions per prompt",
    "kept": "K <= G, completions kept per prompt",
    "epochs": "mu, update epochs (num_iterations)",
    "prompts": "P, prompts per round",
    "beta": "KL coefficient; != 0 adds a reference forward",
    "prefix_cache": "prefill each prompt once (vLLM)",
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
    # GRPOStep has no default prompt count; priced alone, a round is one prompt's
    dataclass_options(f, flops.GRPOStep, STEP_HELP, defaults={"prompts": 1})
    f.add_argument(
        "--lora-rank",
        type=positive_int,
        default=default_of(flops.LoRASpec, "rank"),
        help="LoRA rank on every linear layer",
    )
    f.add_argument(
        "--reward-model", default=None, help=f"the PRM ({MODEL_HELP}); none: a rule-based reward, 0 FLOPs"
    )
    dataclass_options(f, flops.TrainSpec, {"gradient_checkpointing": "add the recompute forward"})
    f.add_argument("--json", action="store_true", help="print one JSON object")
    return f


def run(args: argparse.Namespace) -> int:
    from paper_repro import models

    policy = models.shape(args.model)
    reward = models.shape(args.reward_model) if args.reward_model else None
    lora = flops.LoRASpec(rank=args.lora_rank)
    train = flops.TrainSpec(lora=lora, gradient_checkpointing=args.gradient_checkpointing)
    step = flops.GRPOStep(**{name: getattr(args, name) for name in STEP_HELP})
    cost = flops.grpo_step_cost(policy, step, train=train, reward_model=reward)
    per_token = flops.per_token_flops(policy, lora)
    out = {
        "model": policy.name,
        "reward_model": reward.name if reward else None,
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
        },
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"model {out['model']}  (non-embedding matmul params {policy.body_matmul_params:,})")
    for key in ("C_search", "C_learning", "C_reward", "C_total"):
        print(f"  {key:<11} {out[key]:.4e} FLOPs")
    print(f"  rho         {out['rho']:.4f}")
    pt = out["per_token"]
    print(
        f"  per token: forward {pt['forward']:.4e}, LoRA train {pt['lora_train']:.4e}, "
        f"full train {pt['full_train']:.4e} FLOPs"
    )
    return 0
