"""Training the testbed's models from scratch: the policies' SFT pretraining on the arith
``pretrain`` corpus (TRL's ``SFTTrainer``) and the PRM's training on fresh step-labelled solutions
(the ``transformers`` Trainer), each saved with its tokenizer as an HF checkpoint."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from paper_repro.common.quiet import quiet_trainer
from paper_repro.rewards.prm_scorer import STEP_TOKEN
from paper_repro.tasks import arith
from paper_repro.testbed.networks import random_model
from paper_repro.testbed.specs import PRM_DATA_SEED, PRM_ERROR_RATE, ModelSpec

# ---------------------------------------------------------------------------------------- policies


def pretrain_policy(
    spec: ModelSpec,
    tokenizer,
    out_dir: str | Path,
    records: list[dict],
    *,
    seed: int = 0,
    steps: int | None = None,
) -> dict:
    """SFT a fresh Qwen2 policy on prompt-completion ``records`` (the arith ``pretrain`` corpus) with
    TRL's ``SFTTrainer``, loss on the completion only, and save model + tokenizer to ``out_dir``.
    Returns the training record (steps, seconds, final loss, parameter count)."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    steps = steps if steps is not None else spec.steps
    records = records[: steps * spec.batch_size]  # the trainer cycles through them if steps need more
    data = Dataset.from_dict(tokenize_pairs(tokenizer, records))
    model = random_model(spec, tokenizer, seed=seed)
    args = SFTConfig(**_training_args(spec, steps, out_dir, seed), completion_only_loss=True)
    trainer = quiet_trainer(
        SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    )
    seconds = _timed(trainer.train)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.do_sample = False
    _save(model, tokenizer, out_dir)
    return {**_record(spec, steps, seed, seconds, trainer, model), "examples": len(records)}


def _training_args(spec: ModelSpec, steps: int, out_dir: str | Path, seed: int) -> dict:
    """The trainer settings shared by policy pretraining and PRM training."""
    return dict(
        output_dir=str(Path(out_dir) / "_trainer"),
        max_steps=steps,
        per_device_train_batch_size=spec.batch_size,
        learning_rate=spec.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=max(1, steps // 20),
        weight_decay=0.0,
        logging_steps=max(1, steps // 10),
        save_strategy="no",
        report_to="none",
        seed=seed,
        use_cpu=True,
        bf16=False,  # TRL defaults to bf16 autocast, which is ~10x slower than fp32 on CPU
        activation_checkpointing=False,  # TRL defaults to True: a second forward per step, no memory to save
        dataloader_num_workers=0,
        disable_tqdm=True,
    )


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _record(spec: ModelSpec, steps: int, seed: int, seconds: float, trainer, model) -> dict:
    """What a training run reports: its spec, steps, seconds, last logged loss, parameter count."""
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    return {
        "model": spec.name,
        **asdict(spec),
        "steps": steps,
        "seed": seed,
        "train_seconds": seconds,
        "final_loss": losses[-1] if losses else float("nan"),
        "n_params": sum(p.numel() for p in model.parameters()),
    }


def tokenize_pairs(tokenizer, records: list[dict]) -> dict[str, list]:
    """Prompt-completion records tokenised in one batch, in the form ``SFTTrainer`` takes as already
    processed: ``input_ids`` (prompt + completion + eos) and ``completion_mask`` (1 on the
    completion and eos, so the loss is on the solution only)."""
    prompts = tokenizer([r["prompt"] for r in records], add_special_tokens=False)["input_ids"]
    completions = tokenizer(
        [r["completion"] + tokenizer.eos_token for r in records], add_special_tokens=False
    )["input_ids"]
    return {
        "input_ids": [p + c for p, c in zip(prompts, completions, strict=True)],
        "completion_mask": [[0] * len(p) + [1] * len(c) for p, c in zip(prompts, completions, strict=True)],
    }


def _save(model, tokenizer, out_dir: str | Path) -> None:
    import shutil

    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    shutil.rmtree(out_dir / "_trainer", ignore_errors=True)  # the trainer's scratch output


# ---------------------------------------------------------------------------------------- the PRM


def prm_training_records(n: int, exclude: set[str], seed: int = PRM_DATA_SEED) -> list[dict]:
    """``n`` fresh step-labelled solutions for PRM training: problems of the ``prm`` split's
    difficulty whose prompts are in no split (``exclude``), each solved with slips of every kind at
    :data:`PRM_ERROR_RATE`. Free to generate, so training never repeats a solution."""
    import itertools
    import random

    problems = arith.fresh_problems(seed, arith.SPLITS["prm"].difficulty, exclude)
    rng = random.Random(seed + 1)
    return list(itertools.islice(arith.step_labelled(problems, rng, PRM_ERROR_RATE), n))


def prm_features(tokenizer, records: list[dict]) -> dict[str, list]:
    """Language-model features for step-labelled records, in the PRM's input form (the problem, each
    step followed by ``<extra_0>``): ``labels`` are the tokens of the *right* steps and their
    separators, -100 on the problem and on every wrong step, so the PRM learns what a right next step
    is (after an earlier slip too: the checker judges each step on the value the solution holds)."""
    sep = tokenizer.convert_tokens_to_ids(STEP_TOKEN)
    prompts = tokenizer([r["prompt"] for r in records], add_special_tokens=False)["input_ids"]
    flat_steps = [s for r in records for s in r["steps"]]
    step_ids = iter(tokenizer(flat_steps, add_special_tokens=False)["input_ids"]) if flat_steps else iter(())
    input_ids, labels = [], []
    for record, prompt in zip(records, prompts, strict=True):
        ids, lab = list(prompt), [-100] * len(prompt)
        for _, verdict in zip(record["steps"], record["labels"], strict=True):
            step = [*next(step_ids), sep]
            ids += step
            lab += step if verdict else [-100] * len(step)
        input_ids.append(ids)
        labels.append(lab)
    return {"input_ids": input_ids, "labels": labels}


def train_prm(
    spec: ModelSpec,
    tokenizer,
    out_dir: str | Path,
    records: list[dict],
    *,
    seed: int = 0,
    steps: int | None = None,
) -> dict:
    """Train the testbed PRM from scratch on step-labelled ``records`` (one pass, ``steps`` x batch
    of them) with the ``transformers`` Trainer and the LM loss of :func:`prm_features`, and save it to
    ``out_dir`` as a :class:`~paper_repro.rewards.likelihood_prm.Qwen2LikelihoodPRM` with its
    modelling code."""
    from datasets import Dataset
    from transformers import DataCollatorForTokenClassification, Trainer, TrainingArguments

    steps = steps if steps is not None else spec.steps
    data = Dataset.from_dict(prm_features(tokenizer, records[: steps * spec.batch_size]))
    model = random_model(spec, tokenizer, seed=seed, head="prm")
    args = TrainingArguments(**_training_args(spec, steps, out_dir, seed))
    tokenizer.padding_side = "right"
    collator = DataCollatorForTokenClassification(tokenizer)  # pads labels with -100
    trainer = quiet_trainer(Trainer(model=model, args=args, train_dataset=data, data_collator=collator))
    seconds = _timed(trainer.train)
    tokenizer.padding_side = "left"
    _save(model, tokenizer, out_dir)
    return {**_record(spec, steps, seed, seconds, trainer, model), "examples": len(data)}
