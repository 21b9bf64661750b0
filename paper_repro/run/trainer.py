"""Trainer assembly: what a run loads and the ledger-wrapped TRL ``GRPOTrainer`` it trains.

:func:`load_parts` loads the base policy, its tokenizer, the reward, the judge and the data of a spec;
:func:`build_trainer` puts them into :class:`paper_repro.ledger.LedgerGRPOTrainer` with a LoRA adapter
(PEFT) and a ``GRPOConfig`` whose batch layout makes one generation round one optimizer step per
epoch.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from paper_repro import models
from paper_repro.run.launch import BatchLayout, batch_layout
from paper_repro.run.spec import RunSpec


@dataclass
class RunParts:
    """What a run computes with, loaded once: shared by training and evaluation."""

    tokenizer: Any
    model: Any  # the base policy, on this process's device
    reward: Any  # the TRL reward callable (paper_repro.rewards.RewardFunction)
    judge: Any
    grader: Any
    train_examples: list
    eval_sets: Any  # paper_repro.evaluation.evaluate.EvalSets


def load_parts(spec: RunSpec) -> RunParts:
    """The base policy and tokenizer, the PRM (when the spec names one), the reward, the judge, the
    training prompts and the evaluation sets of ``spec``."""
    import torch
    from accelerate import PartialState
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paper_repro.evaluation.evaluate import EvalSets
    from paper_repro.evaluation.judge import build_judge
    from paper_repro.rewards import build_reward
    from paper_repro.rewards.prm_scorer import PRMScorer
    from paper_repro.tasks import load_examples
    from paper_repro.tasks.graders import grader

    path = models.checkpoint(spec.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    dtype = torch.bfloat16 if spec.train.dtype == "bfloat16" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(PartialState().device)
    scorer = None
    if spec.prm:
        scorer = PRMScorer.load(spec.prm, model_kwargs={"dtype": dtype})
        scorer.model.to(PartialState().device)  # this process's GPU (or the CPU)
    reward = build_reward(spec.reward_system, spec.task, prm=scorer)
    judge = build_judge(spec.judge, scorer, spec.task)
    data = spec.data_map
    heldout = load_examples(data["heldout"], limit=spec.heldout_limit)
    train = load_examples(data["train"])
    if data["train"] == data["heldout"]:  # one hub dataset: hold out its first rows
        train = train[len(heldout) :]
    sets = EvalSets(
        heldout=heldout,
        gsm=load_examples(data["gsm"], limit=spec.eval_limit),
        math=load_examples(data["math"], limit=spec.eval_limit),
    )
    return RunParts(tokenizer, model, reward, judge, grader(spec.task), train, sets)


def build_trainer(spec: RunSpec, parts: RunParts, log_path: Path):
    """The ledger-wrapped ``GRPOTrainer`` of ``spec``: LoRA on the base policy, trained until the
    budget is spent (the ledger's stop), its per-step log written to ``log_path``; it prints no log
    dicts (they stay in ``state.log_history`` and the step log)."""
    from accelerate import PartialState
    from datasets import Dataset

    from paper_repro.common.quiet import quiet_trainer
    from paper_repro.evaluation.evaluate import columns_of
    from paper_repro.ledger import BudgetWarning, LedgerGRPOTrainer

    prompts = [train_prompt(spec, e) for e in parts.train_examples]
    dataset = Dataset.from_dict({"prompt": prompts, **columns_of(parts.train_examples)})
    main = PartialState().is_main_process
    with warnings.catch_warnings():
        # the profile chose the estimate (`budget_stop: dearest`, docs/CHOICES.md): the ledger's warning
        # that it can pass the budget says nothing new here; a run that does pass it still warns
        warnings.filterwarnings(
            "ignore", message=r"LedgerConfig\(budget_stop='overshoot'\)", category=BudgetWarning
        )
        trainer = LedgerGRPOTrainer(
            model=parts.model,
            reward_funcs=parts.reward,
            args=grpo_config(spec, layout_for(spec)),
            train_dataset=dataset,
            processing_class=parts.tokenizer,
            peft_config=lora_config(spec),
            ledger=ledger_config(spec, log_path if main else None),
            sampler=spec.decoder("rollouts"),
            update_layout=spec.train.update_layout,
        )
    return quiet_trainer(trainer)


def layout_for(spec: RunSpec) -> BatchLayout:
    """The batch layout of ``spec`` on the processes it was launched on (or asks for)."""
    from accelerate import PartialState

    world = PartialState().num_processes
    layout = batch_layout(
        spec.P, spec.G, spec.K, world if world > 1 else spec.runtime.gpus, spec.runtime.micro_batch
    )
    if world > 1 and layout.processes != world:
        raise ValueError(
            f"run {spec.run_id} was launched on {world} processes, but cell P={spec.P} G={spec.G} K={spec.K} "
            f"can use {layout.processes} ({layout.note}); launch it with --num_processes {layout.processes}"
        )
    return layout


def grpo_config(spec: RunSpec, layout: BatchLayout):
    """TRL's ``GRPOConfig`` of ``spec``: one generation round (P x G rows over all processes) is one
    optimizer step per epoch; ``max_steps`` is only a cap, the ledger's budget stops the run."""
    import torch
    from trl import GRPOConfig

    cuda = torch.cuda.is_available()
    t = spec.train
    vllm = {}
    if t.generation == "vllm":
        vllm = dict(
            use_vllm=True,
            vllm_mode="colocate",
            vllm_gpu_memory_utilization=spec.runtime.vllm_gpu_memory_utilization,
            vllm_enable_sleep_mode=False,
        )
    return GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix=f"grpo-{spec.run_id}-"),
        per_device_train_batch_size=layout.per_device,
        gradient_accumulation_steps=layout.accumulation,
        steps_per_generation=layout.accumulation,
        num_generations=spec.G,
        num_iterations=spec.mu,
        max_completion_length=t.max_completion_length,
        temperature=t.temperature,
        learning_rate=t.learning_rate,
        lr_scheduler_type=t.lr_scheduler,
        beta=t.beta,
        max_steps=max_steps_for(spec, spec.budget_flops),
        seed=spec.seed,
        data_seed=spec.seed,
        bf16=t.dtype == "bfloat16" and cuda,
        # TRL defaults it on; the tiny policies only lose time by it, the gpu-paper ones need it
        activation_checkpointing=spec.runtime.gradient_checkpointing,
        use_cpu=not cuda,
        save_strategy="no",
        report_to=[],
        logging_steps=1,
        disable_tqdm=True,
        log_level="error",
        **vllm,
    )


def max_steps_for(spec: RunSpec, budget: float) -> int:
    """TRL's ``max_steps`` for a run of ``spec``'s recipe at ``budget``: only a cap (four times the
    optimizer steps the planner's first round predicts, and 8 more); the ledger's budget stops the
    run. The budget ladder (:mod:`paper_repro.run.ladder`) asks it of each of its points."""
    expected = math.ceil(budget / spec.first_round_flops) * spec.mu if spec.first_round_flops else 10_000
    return 4 * expected + 8


def lora_config(spec: RunSpec):
    from peft import LoraConfig

    t = spec.train
    return LoraConfig(
        r=t.lora_rank,
        lora_alpha=t.lora_alpha,
        target_modules=t.lora_targets,
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
    )


# The profile's budget stop as the ledger's: at the end of a round, before the next priced at its
# ceiling ("round") or as the dearest so far ("overshoot"); or before each optimizer step ("step").
LEDGER_BUDGET_STOPS = {"ceiling": "round", "dearest": "overshoot", "step": "step"}


def ledger_config(spec: RunSpec, log_path: Path | None):
    """The ledger's budget contract: the budget, the planner's first round, and with the ``ceiling``
    stop the costliest round the run could meet; the compute card is written beside the step log."""
    from paper_repro.ledger import LedgerConfig
    from paper_repro.run.preflight import round_ceiling

    return LedgerConfig(
        budget_flops=spec.budget_flops,
        budget_stop=LEDGER_BUDGET_STOPS[spec.train.budget_stop],
        kept=spec.K,
        log_path=log_path,
        first_round_flops=spec.first_round_flops,
        round_ceiling_flops=round_ceiling(spec) if spec.train.budget_stop == "ceiling" else None,
        downsample_seed=spec.seed,
        selection_decimals=spec.train.selection_decimals,
        # the compute card beside the step log: steps/<run_id>.card.json and .card.md
        card_path=log_path.with_suffix(".card") if log_path else None,
    )


def train_prompt(spec: RunSpec, example) -> str | list[dict[str, str]]:
    """The prompt TRL trains on: plain text, or the chat turns its template renders."""
    from paper_repro.tasks.hub import chat_messages

    return chat_messages(example) if spec.train.chat_template else example.prompt
