"""``paper-repro bench trl-flops``: one tiny run of TRL's own ``GRPOTrainer`` with the ledger's
``FlopLedgerCallback``, counted four ways side by side: the ledger (``useful`` and ``executed``
C_search / C_learning / C_reward), TRL's ``compute_flops_per_token`` times the tokens its trainers
log MFU with, transformers' ``total_flos`` (``Trainer.floating_point_ops``: 6 x non-embedding
parameters x input tokens), and ``FlopCounterMode`` with in-place ``addmm_`` counted around
``trainer.train()`` (the ground truth). Once with LoRA and once as a full fine-tune, on the same
prompts and seed. Deterministic on CPU (one thread, eager attention): the table in docs/ledger.md
(TRL's conventions) is this command's output.

What each convention counts is in docs/ledger.md ("The ledger beside TRL's and transformers' FLOP
counts"); here, what TRL 1.16 would report is computed as its code computes it:

- ``GRPOTrainer`` and ``RLOOTrainer`` log no ``perf/`` key and never call ``compute_flops_per_token``;
  TRL's experimental ``AsyncGRPOTrainer`` does: per optimizer step, ``perf/mfu_fwd_bwd`` is
  ``compute_mfu(compute_flops_per_token(config, int(mean_seq_len)), forwarded tokens / seconds, ...)``,
  the forwarded tokens being the real (packed) prompt + completion tokens of the loss passes and
  ``mean_seq_len`` those tokens over the rows. The FLOPs behind that MFU are
  ``compute_flops_per_token(config, int(mean_seq_len)) x forwarded tokens``, summed here over the
  run's steps; ``trl.trainer.utils.adjusted_mfu`` gives its causal-attention variant.
- transformers adds ``floating_point_ops(inputs)`` to ``state.total_flos`` for every micro-batch; a
  GRPO micro-batch is a list of prompts with no ``input_ids``, so it adds 0 (TRL issue #3967); the
  callback then sets ``state.total_flos`` to the ledger's useful C_total. The 6N row applies
  transformers' formula to the loss passes' padded ``input_ids``, as it would had it seen them.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

# the runs, in the table's column order: run -> (LoRA, activation checkpointing)
RUNS = {"LoRA": (True, True), "full": (False, True), "full, no checkpointing": (False, False)}


@dataclass(frozen=True)
class TrlFlopsBench:
    hidden: int = 128
    intermediate: int = 272
    layers: int = 2
    prompts: int = 2  # prompts per optimizer step
    generations: int = 4  # G completions per prompt
    max_completion_length: int = 16
    steps: int = 4  # optimizer steps: two generation rounds
    steps_per_generation: int = 2  # so TRL runs the old-policy forward
    beta: float = 0.04  # so TRL runs the reference forward (LoRA: adapters off; full: a reference model)
    lora_rank: int = 4  # adapters ~5% of the base's matmul parameters, as in a real LoRA run


def _prompts(n: int):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": f"{i}+{(7 * i) % 1000}="} for i in range(n)])


def _length_reward(completions, **kwargs):
    return [float(len(c)) / 10 for c in completions]


def _trainer(cfg: TrlFlopsBench, run: str, workdir: Path, callback) -> Any:
    """TRL's GRPOTrainer on a random tiny Qwen2 (eager attention), TRL's defaults elsewhere
    (activation checkpointing non-reentrant); ``run`` one of :data:`RUNS`: with LoRA (rank
    ``cfg.lora_rank`` on every linear), or full fine-tuning (the policy from a saved copy, which TRL
    loads its reference model from), activation checkpointing on (TRL's default) or off."""
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from paper_repro.testbed import ModelSpec, build_tokenizer, random_model

    tokenizer = build_tokenizer()
    spec = ModelSpec("trl-flops", hidden=cfg.hidden, intermediate=cfg.intermediate, layers=cfg.layers)
    model = random_model(spec, tokenizer, attn_implementation="eager")
    lora, checkpointing = RUNS[run]
    init = {}
    if not lora:
        model.save_pretrained(workdir / "policy")
        model, init = str(workdir / "policy"), {"model_init_kwargs": {"attn_implementation": "eager"}}
    args = GRPOConfig(
        output_dir=str(workdir / "out"),
        per_device_train_batch_size=cfg.prompts * cfg.generations,
        num_generations=cfg.generations,
        max_completion_length=cfg.max_completion_length,
        max_steps=cfg.steps,
        steps_per_generation=cfg.steps_per_generation,
        beta=cfg.beta,
        learning_rate=1e-3,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        log_level="error",
        activation_checkpointing=checkpointing,
        **init,
    )
    return GRPOTrainer(
        model=model,
        reward_funcs=_length_reward,
        args=args,
        train_dataset=_prompts(cfg.prompts * cfg.steps * 4),
        processing_class=tokenizer,
        peft_config=LoraConfig(r=cfg.lora_rank, target_modules="all-linear", lora_dropout=0.0)
        if lora
        else None,
        callbacks=[callback],
    )


def _trl_flops(config, steps: list[dict]) -> dict[str, float]:
    """TRL's training FLOPs of the run's loss passes, as its MFU logging computes them: per step,
    ``compute_flops_per_token(config, int(tokens / rows))`` x the step's real loss tokens; and the same
    with ``adjusted_mfu``'s causal correction."""
    from trl.trainer.utils import adjusted_mfu, compute_flops_per_token

    non_causal = causal = 0.0
    for record in steps:
        tokens, rows = record["tokens"].get("loss_tokens", 0), record["tokens"].get("loss_rows", 0)
        if not tokens:
            continue
        seq_len = int(tokens / rows)
        per_token = compute_flops_per_token(config, seq_len)
        non_causal += per_token * tokens
        causal += per_token * tokens * adjusted_mfu(100.0, config, seq_len) / 100.0
    return {"non_causal": non_causal, "causal": causal}


def _one_run(cfg: TrlFlopsBench, run: str, workdir: Path) -> dict[str, Any]:
    from transformers.trainer_callback import PrinterCallback

    from paper_repro.accounting.profiling import flop_counter
    from paper_repro.ledger import FlopLedgerCallback, LedgerConfig

    callback = FlopLedgerCallback(LedgerConfig())
    trainer = _trainer(cfg, run, workdir, callback)
    trainer.remove_callback(PrinterCallback)  # each step's logs printed would bury the table
    seen = []  # what transformers' Trainer adds to state.total_flos, micro-batch by micro-batch
    own = trainer.floating_point_ops
    trainer.floating_point_ops = lambda inputs: seen.append(own(inputs)) or seen[-1]
    counter = flop_counter()
    with counter:
        trainer.train()
    summary = callback.ledger.summary()
    tokens = summary["tokens"]
    non_embedding = trainer.model.num_parameters(exclude_embeddings=True)
    config = trainer.model.config.get_text_config()
    num_tokens = [e["num_tokens"] for e in trainer.state.log_history if "num_tokens" in e]
    return {
        "useful": summary["useful"],
        "executed": summary["executed"],
        "learning_parts": summary["learning_parts"],
        "profiler": float(counter.get_total_flops()),
        "trl": _trl_flops(config, callback.ledger.steps),
        "transformers_floating_point_ops": float(sum(seen)),
        "transformers_6n_loss_tokens": 6.0 * non_embedding * tokens["loss_executed_tokens"],
        "total_flos_with_callback": float(trainer.state.total_flos),
        "non_embedding_parameters": non_embedding,
        "trl_num_tokens": num_tokens[-1] if num_tokens else None,
        "tokens": tokens,
    }


def bench_trl_flops(cfg: TrlFlopsBench | None = None) -> dict[str, Any]:
    """The runs of :data:`RUNS`; per run the ledger's summary FLOPs, the profiler's count, TRL's and
    transformers' conventions (FLOPs) and the token counts they rest on."""
    from transformers.utils import logging as hf_logging

    cfg = cfg or TrlFlopsBench()
    hf_logging.set_verbosity_error()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the same completions, so the same counts, run to run
    try:
        with tempfile.TemporaryDirectory() as tmp:
            runs = {run: _one_run(cfg, run, Path(tmp) / run.replace(" ", "")) for run in RUNS}
    finally:
        torch.set_num_threads(threads)
    return {"config": asdict(cfg), "runs": runs}


def table_rows(result: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The table's rows: (label, one cell per run), FLOPs to four significant digits."""
    runs = [result["runs"][r] for r in RUNS]

    def flops(get) -> list[str]:
        return [f"{get(r):.4g}" for r in runs]

    def ratio(get) -> list[str]:
        return [f"{get(r) / r['profiler']:.4f}" for r in runs]

    def per_loss_token(get) -> list[str]:
        return [f"{get(r) / r['tokens']['loss_tokens']:,.0f}" for r in runs]

    rows = []
    for convention in ("useful", "executed"):
        for c in ("C_search", "C_learning", "C_reward", "C_total"):
            rows.append((f"ledger {convention} {c}", flops(lambda r, v=convention, c=c: r[v][c])))
    rows += [
        ("FlopCounterMode around `train()`", flops(lambda r: r["profiler"])),
        ("ledger executed C_total / FlopCounterMode", ratio(lambda r: r["executed"]["C_total"])),
        (
            "ledger useful C_learning, loss passes only",
            flops(lambda r: r["learning_parts"]["useful"]["loss"]),
        ),
        ("TRL `compute_flops_per_token` x loss tokens", flops(lambda r: r["trl"]["non_causal"])),
        ("the same, `adjusted_mfu`'s causal correction", flops(lambda r: r["trl"]["causal"])),
        (
            "TRL / ledger useful loss passes",
            [f"{r['trl']['non_causal'] / r['learning_parts']['useful']['loss']:.3f}" for r in runs],
        ),
        ("TRL / FlopCounterMode", ratio(lambda r: r["trl"]["non_causal"])),
        ("transformers `floating_point_ops`, summed", flops(lambda r: r["transformers_floating_point_ops"])),
        ("transformers' 6N x padded loss tokens", flops(lambda r: r["transformers_6n_loss_tokens"])),
        ("6N / FlopCounterMode", ratio(lambda r: r["transformers_6n_loss_tokens"])),
        ("`state.total_flos` with the callback", flops(lambda r: r["total_flos_with_callback"])),
        (
            "per real loss token: TRL `compute_flops_per_token`",
            per_loss_token(lambda r: r["trl"]["non_causal"]),
        ),
        (
            "per real loss token: ledger useful loss passes",
            per_loss_token(lambda r: r["learning_parts"]["useful"]["loss"]),
        ),
        (
            "per real loss token: 6N",
            per_loss_token(
                lambda r: (
                    r["transformers_6n_loss_tokens"]
                    * (r["tokens"]["loss_tokens"] / r["tokens"]["loss_executed_tokens"])
                )
            ),
        ),
        (
            "N (non-embedding parameters, LoRA's included)",
            [f"{r['non_embedding_parameters']:,}" for r in runs],
        ),
        (
            "tokens generated (prompt + completion)",
            [f"{r['tokens']['gen_prompt_tokens'] + r['tokens']['gen_completion_tokens']:.0f}" for r in runs],
        ),
        ("TRL's `num_tokens` at the last step", [f"{r['trl_num_tokens']:.0f}" for r in runs]),
        (
            "loss-pass tokens, real / padded",
            [f"{r['tokens']['loss_tokens']:.0f} / {r['tokens']['loss_executed_tokens']:.0f}" for r in runs],
        ),
    ]
    return rows


def markdown_table(result: dict[str, Any]) -> str:
    """The table as docs/ledger.md shows it: one row a quantity, one column a run."""
    lines = [f"| | {' | '.join(RUNS)} |", f"|---|{'--:|' * len(RUNS)}"]
    lines += [f"| {label} | {' | '.join(cells)} |" for label, cells in table_rows(result)]
    return "\n".join(lines)


def print_trl_flops(result: dict[str, Any]) -> None:
    cfg = result["config"]
    print(
        f"GRPOTrainer + FlopLedgerCallback, Qwen2 hidden {cfg['hidden']}, {cfg['layers']} layers, "
        f"{cfg['steps']} steps of {cfg['prompts']} prompts x G={cfg['generations']}, beta {cfg['beta']}, "
        f"steps_per_generation {cfg['steps_per_generation']}, LoRA rank {cfg['lora_rank']} (FLOPs)"
    )
    print(markdown_table(result))
