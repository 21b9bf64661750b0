"""``paper-repro bench ledger``: plain ``trl.GRPOTrainer`` against
:class:`~paper_repro.ledger.LedgerGRPOTrainer` on the same tiny run (K = G, so both do the same work;
same seed, so the same rollouts), alternating, several repeats. Prints the median wall-time ratio
(target <= 1.03), and the achieved FLOP/s of generation and of the update against a matmul peak
measured in the same process.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from paper_repro.accounting.devices import matmul_peak_flops


@dataclass(frozen=True)
class LedgerBench:
    hidden: int = 96
    layers: int = 3
    prompts: int = 8  # P prompts per step
    generations: int = 8  # G completions per prompt (all kept)
    max_completion_length: int = 24
    steps: int = 6  # optimizer steps per run
    repeats: int = 5  # runs of each trainer, alternating


def _prompts(n: int):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": f"{i % 17}+{(7 * i) % 9}*{i % 5}="} for i in range(n)])


def _digit_reward(completions, **kwargs):
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def _run(trainer_cls: type, cfg: LedgerBench, workdir: str, **extra: Any) -> tuple[float, Any]:
    from peft import LoraConfig
    from trl import GRPOConfig

    from paper_repro.testbed import ModelSpec, build_tokenizer, random_model

    args = GRPOConfig(
        output_dir=workdir,
        per_device_train_batch_size=cfg.prompts * cfg.generations,
        num_generations=cfg.generations,
        max_completion_length=cfg.max_completion_length,
        max_steps=cfg.steps,
        learning_rate=1e-3,
        report_to="none",
        logging_steps=10_000,
        save_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        # TRL's default (on), by its current name: left unset, TRL's `gradient_checkpointing=True`
        # default goes through transformers' deprecated alias and warns on every config
        activation_checkpointing=True,
    )
    tokenizer = build_tokenizer()
    spec = ModelSpec("bench", hidden=cfg.hidden, intermediate=2 * cfg.hidden + 16, layers=cfg.layers)
    trainer = trainer_cls(
        # eager attention, as in the ledger tests (FlopCounterMode cannot see the CPU sdpa kernel)
        model=random_model(spec, tokenizer, attn_implementation="eager"),
        reward_funcs=_digit_reward,
        args=args,
        train_dataset=_prompts(cfg.prompts * cfg.steps * 2),
        processing_class=tokenizer,
        peft_config=LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", lora_dropout=0.0),
        **extra,
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # the end-of-run metrics dump would only be noise here
    start = time.perf_counter()
    trainer.train()
    return time.perf_counter() - start, trainer


def bench_ledger(cfg: LedgerBench) -> dict[str, Any]:
    from transformers.utils import logging as hf_logging
    from trl import GRPOTrainer

    from paper_repro.ledger import LedgerGRPOTrainer

    hf_logging.set_verbosity_error()
    plain, ledger, summaries = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        _run(GRPOTrainer, cfg, tmp)  # warm-up: imports, allocator, thread pools
        for _ in range(cfg.repeats):
            plain.append(_run(GRPOTrainer, cfg, tmp)[0])
            seconds, trainer = _run(LedgerGRPOTrainer, cfg, tmp)
            ledger.append(seconds)
            summaries.append(trainer.ledger.summary())
    peak = matmul_peak_flops()
    ratios = [b / a for a, b in zip(plain, ledger, strict=True)]
    last = summaries[-1]
    secs, executed = last["seconds"], last["executed"]
    return {
        "config": asdict(cfg),
        "plain_seconds": plain,
        "ledger_seconds": ledger,
        "median_ratio": statistics.median(ledger) / statistics.median(plain),
        "median_of_paired_ratios": statistics.median(ratios),
        "matmul_peak_flops_per_s": peak,
        "generation_flops_per_s": executed["C_search"] / secs["search"],
        "update_flops_per_s": executed["C_learning"] / secs["learning"],
        "rho_flops": last["useful"]["rho"],
        "rho_time": last["rho_time"],
        "torch_threads": torch.get_num_threads(),
    }


def print_ledger(result: dict[str, Any]) -> None:
    fmt = ", ".join(f"{s:.2f}" for s in result["plain_seconds"])
    print(f"plain GRPOTrainer  s/run: {fmt}")
    fmt = ", ".join(f"{s:.2f}" for s in result["ledger_seconds"])
    print(f"LedgerGRPOTrainer  s/run: {fmt}")
    print(
        f"median wall-time ratio ledger/plain: {result['median_ratio']:.4f} "
        f"(median of paired ratios {result['median_of_paired_ratios']:.4f}; target <= 1.03)"
    )
    peak = result["matmul_peak_flops_per_s"]
    for key, label in (("generation_flops_per_s", "generation"), ("update_flops_per_s", "update")):
        print(
            f"{label:>10}: {result[key] / 1e9:7.3f} GFLOP/s executed = {result[key] / peak:.2%} of matmul peak"
        )
    print(f"matmul peak (fp32, 1024^3, {result['torch_threads']} threads): {peak / 1e9:.1f} GFLOP/s")
    print(f"rho (FLOPs, useful) {result['rho_flops']:.3f} vs rho (wall time) {result['rho_time']:.3f}")
