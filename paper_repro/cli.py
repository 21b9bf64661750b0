"""The ``paper-repro`` command line. Each subcommand parses its arguments and calls the package."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from paper_repro import flops


def _flops_command(args: argparse.Namespace) -> int:
    policy = flops.load_shape(args.model)
    reward = flops.load_shape(args.reward_model) if args.reward_model else None
    lora = flops.LoRASpec(rank=args.lora_rank)
    train = flops.TrainSpec(lora=lora, gradient_checkpointing=args.gradient_checkpointing)
    step = flops.GRPOStep(
        prompts=args.prompts,
        generations=args.generations,
        kept=args.kept,
        epochs=args.epochs,
        prompt_tokens=args.prompt_tokens,
        completion_tokens=args.completion_tokens,
        beta=args.beta,
        prefix_cache=args.prefix_cache,
    )
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
    else:
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


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="paper-repro", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    f = sub.add_parser(
        "flops",
        help="analytic FLOPs of one GRPO round (useful convention)",
        description="Analytic FLOPs of one GRPO generation round: P prompts x G completions, "
        "K kept for the update, MU epochs, at fixed prompt and completion lengths.",
    )
    f.add_argument("--model", required=True, help="config.json, checkpoint dir, or shipped config name")
    f.add_argument("--prompt-tokens", type=_positive_int, required=True)
    f.add_argument("--completion-tokens", type=_positive_int, required=True)
    f.add_argument("--generations", type=_positive_int, required=True, help="G, completions per prompt")
    f.add_argument("--kept", type=_positive_int, required=True, help="K <= G, completions kept per prompt")
    f.add_argument("--epochs", type=_positive_int, required=True, help="mu, update epochs (num_iterations)")
    f.add_argument("--prompts", type=_positive_int, default=1, help="P, prompts per round (default 1)")
    f.add_argument("--lora-rank", type=_positive_int, default=16)
    f.add_argument("--beta", type=float, default=0.0, help="KL coefficient; != 0 adds a reference forward")
    f.add_argument("--reward-model", default=None, help="reward model / PRM config (default: rule-based, 0)")
    f.add_argument("--prefix-cache", action="store_true", help="prefill each prompt once (vLLM)")
    f.add_argument("--gradient-checkpointing", action="store_true")
    f.add_argument("--json", action="store_true", help="print one JSON object")
    f.set_defaults(func=_flops_command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"paper-repro {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
