"""``paper-repro bench ledger``: the ledger's wall-time overhead on a short LoRA GRPO run. Each pair
runs plain ``trl.GRPOTrainer`` and the same trainer with the ledger, in the form ``--form`` names:
``callback`` (:class:`~paper_repro.ledger.FlopLedgerCallback` on TRL's own trainer, the default) or
``subclass`` (:class:`~paper_repro.ledger.LedgerGRPOTrainer`, K = G so both do the same work); same
seed, so the same rollouts. The pairs are interleaved and alternate which run goes first (AB BA AB
...), so a change in the machine's load between pairs weighs on both sides. The policy is a random
Qwen2 of ``--hidden`` (3 layers) or a checkpoint folder (``--policy data/models/policy-M``).

Prints each pair's wall-time ratio (ledger / plain), their median (target <= 1.03) and spread, the
CPU-time ratio (this process's CPU seconds: on a loaded machine the steadier of the two), the load
average before and after, and the achieved FLOP/s of generation and of the
update against a matmul peak measured in the same process.
"""

from __future__ import annotations

import gc
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch

from paper_repro.accounting.devices import matmul_peak_flops

FORMS = ("callback", "subclass")


@dataclass(frozen=True)
class LedgerBench:
    form: Literal["callback", "subclass"] = "callback"  # the ledger's form (module docstring)
    policy: str = ""  # a checkpoint folder; "" = a random Qwen2 of `hidden` x `layers`
    hidden: int = 256
    layers: int = 3
    prompts: int = 8  # P prompts per step
    generations: int = 8  # G completions per prompt (all kept)
    max_completion_length: int = 24
    steps: int = 6  # optimizer steps per run
    repeats: int = 11  # pairs (plain, ledger), interleaved
    threads: int = 0  # torch's threads; 0 = its default. 1 on a loaded machine: spinning OpenMP threads
    # waiting for a core make wall and CPU time swing by several times between identical runs

    def __post_init__(self) -> None:
        if self.form not in FORMS:
            raise ValueError(f"LedgerBench.form must be one of {FORMS}, got {self.form!r}")


def _prompts(n: int):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": f"{i % 17}+{(7 * i) % 9}*{i % 5}="} for i in range(n)])


def _digit_reward(completions, **kwargs):
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def _policy(cfg: LedgerBench):
    """The bench's policy and tokenizer: ``cfg.policy``'s checkpoint, else a random Qwen2."""
    from paper_repro.testbed import ModelSpec, build_tokenizer, random_model

    if cfg.policy:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        return AutoModelForCausalLM.from_pretrained(cfg.policy), AutoTokenizer.from_pretrained(cfg.policy)
    tokenizer = build_tokenizer()
    spec = ModelSpec("bench", hidden=cfg.hidden, intermediate=2 * cfg.hidden + 16, layers=cfg.layers)
    return random_model(spec, tokenizer), tokenizer


def _run(cfg: LedgerBench, workdir: str, ledger: bool) -> tuple[float, float, Any]:
    """One run: (wall seconds, CPU seconds of this process, the ledger or None) of ``trainer.train()``."""
    from peft import LoraConfig
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    from paper_repro.ledger import FlopLedgerCallback, LedgerConfig, LedgerGRPOTrainer

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
    model, tokenizer = _policy(cfg)
    extra: dict[str, Any] = {}
    trainer_cls = GRPOTrainer
    callback = None
    if ledger and cfg.form == "subclass":
        trainer_cls, extra = LedgerGRPOTrainer, {"ledger": LedgerConfig(write_card=False)}
    elif ledger:
        callback = FlopLedgerCallback(LedgerConfig(write_card=False))
    trainer = trainer_cls(
        model=model,
        reward_funcs=_digit_reward,
        args=args,
        train_dataset=_prompts(cfg.prompts * cfg.steps * 2),
        processing_class=tokenizer,
        peft_config=LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", lora_dropout=0.0),
        **extra,
    )
    if callback is not None:
        callback.attach(trainer)
    trainer.remove_callback(PrinterCallback)  # the end-of-run metrics dump would only be noise here
    gc.collect()  # the previous run's garbage is no cost of this one
    wall, cpu = time.perf_counter(), time.process_time()
    trainer.train()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    found = callback.ledger if callback is not None else getattr(trainer, "ledger", None)
    return wall, cpu, found


def _quartiles(values: list[float]) -> list[float]:
    return statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3


def bench_ledger(cfg: LedgerBench) -> dict[str, Any]:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    plain, ledger, plain_cpu, ledger_cpu, summaries = [], [], [], [], []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        _run(cfg, tmp, ledger=True)  # warm-up: imports, allocator, thread pools
        for pair in range(cfg.repeats):
            for with_ledger in (False, True) if pair % 2 == 0 else (True, False):
                wall, cpu, found = _run(cfg, tmp, ledger=with_ledger)
                (ledger if with_ledger else plain).append(wall)
                (ledger_cpu if with_ledger else plain_cpu).append(cpu)
                if found is not None:
                    summaries.append(found.summary())
    load_after = os.getloadavg()
    peak = matmul_peak_flops()
    ratios = [b / a for a, b in zip(plain, ledger, strict=True)]
    cpu_ratios = [b / a for a, b in zip(plain_cpu, ledger_cpu, strict=True)]
    last = summaries[-1]
    secs, executed = last["seconds"], last["executed"]
    return {
        "config": asdict(cfg),
        "plain_seconds": plain,
        "ledger_seconds": ledger,
        "paired_ratios": ratios,
        "median_of_paired_ratios": statistics.median(ratios),
        "paired_ratio_quartiles": _quartiles(ratios),
        "median_ratio": statistics.median(ledger) / statistics.median(plain),
        "median_cpu_ratio": statistics.median(cpu_ratios),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "cpus": os.cpu_count(),
        "matmul_peak_flops_per_s": peak,
        "generation_flops_per_s": executed["C_search"] / secs["search"],
        "update_flops_per_s": executed["C_learning"] / secs["learning"],
        "rho_flops": last["useful"]["rho"],
        "rho_time": last["rho_time"],
        "torch_threads": torch.get_num_threads(),
    }


def print_ledger(result: dict[str, Any]) -> None:
    cfg = result["config"]
    model = cfg["policy"] or f"random Qwen2, hidden {cfg['hidden']}, {cfg['layers']} layers"
    print(f"ledger form: {cfg['form']}; policy: {model}; {cfg['repeats']} pairs, AB BA interleaved")
    for label, key in (("plain GRPOTrainer", "plain_seconds"), (f"with the {cfg['form']}", "ledger_seconds")):
        print(f"{label:>20} s/run: " + ", ".join(f"{s:.2f}" for s in result[key]))
    print("  paired ratios: " + ", ".join(f"{r:.3f}" for r in result["paired_ratios"]))
    q1, _median, q3 = result["paired_ratio_quartiles"]
    ratios = result["paired_ratios"]
    print(
        f"median of paired wall-time ratios ledger/plain: {result['median_of_paired_ratios']:.4f} "
        f"(quartiles {q1:.4f} .. {q3:.4f}, range {min(ratios):.4f} .. {max(ratios):.4f}; target <= 1.03); "
        f"ratio of medians {result['median_ratio']:.4f}; median CPU-time ratio {result['median_cpu_ratio']:.4f}"
    )
    before = " ".join(f"{x:.2f}" for x in result["load_average_before"])
    after = " ".join(f"{x:.2f}" for x in result["load_average_after"])
    print(f"load average (1, 5, 15 min) before: {before}; after: {after}; {result['cpus']} CPUs")
    peak = result["matmul_peak_flops_per_s"]
    for key, label in (("generation_flops_per_s", "generation"), ("update_flops_per_s", "update")):
        print(
            f"{label:>10}: {result[key] / 1e9:7.3f} GFLOP/s executed = {result[key] / peak:.2%} of matmul peak"
        )
    print(f"matmul peak (fp32, 1024^3, {result['torch_threads']} threads): {peak / 1e9:.1f} GFLOP/s")
    print(f"rho (FLOPs, useful) {result['rho_flops']:.3f} vs rho (wall time) {result['rho_time']:.3f}")
