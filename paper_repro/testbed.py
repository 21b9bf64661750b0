"""The cpu-tiny testbed's models: the arith tokenizer, base policies S/M/L and the tiny PRM.

Everything here is built by the repo itself, offline, and saved as HF-format checkpoints under
``data/models/`` (``tokenizer/``, ``policy-S``, ``policy-M``, ``policy-L``, ``prm``), which load
with ``from_pretrained``. Notebook ``00_embedded_models`` calls :func:`build_all`.

**Adding a policy size** is one entry in :data:`POLICIES` (its architecture and pretraining steps)
and one line under ``policies:`` of ``paper_repro/profiles/cpu-tiny.yaml`` (``XL:
data/models/policy-XL``; stage A takes every policy unless its ``policies:`` list says otherwise).
``make models`` then builds it; the study, the sweep and the analysis read the sizes from the profile.

- Policies are Qwen2 causal LMs pretrained with TRL's ``SFTTrainer`` on the arith ``pretrain``
  corpus, whose solutions carry injected step errors, so that they start with room to improve.
- The PRM is a Qwen2 backbone, larger than the largest policy, with a 2-way token-classification
  head read at step separators, the interface of Qwen2.5-Math-PRM: the solution's steps are joined
  by ``<extra_0>`` and the probability of class 1 at each separator is that step's score.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from paper_repro.paths import repo_root
from paper_repro.rewards.prm_scorer import STEP_TOKEN
from paper_repro.tasks import arith

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
SPECIALS = (PAD, EOS, UNK, STEP_TOKEN)
# Every character the arith prompts and solutions use.
CHARS = tuple("0123456789abcdefghijklmnopqrstuvwxyz +-*=.,:?\n")
MODELS_DIR = Path("data") / "models"


@dataclass(frozen=True)
class ModelSpec:
    """A Qwen2 architecture for the testbed and how long to pretrain it."""

    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int = 4
    kv_heads: int = 2
    steps: int = 600  # optimizer steps of pretraining
    batch_size: int = 64
    learning_rate: float = 3e-3

    def __post_init__(self) -> None:
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"{self.name}: hidden must divide by heads, heads by kv_heads")


POLICIES: dict[str, ModelSpec] = {
    "S": ModelSpec("policy-S", hidden=48, intermediate=128, layers=3, steps=1200),
    "M": ModelSpec("policy-M", hidden=64, intermediate=176, layers=3, steps=1000),
    "L": ModelSpec("policy-L", hidden=96, intermediate=256, layers=3, steps=1000),
}
# Pretraining runs each size well up its learning curve on a corpus with slips and shortcut answers
# (paper_repro.tasks.arith): the room for RL is in the corpus, not in stopping training early. S is
# deep and narrow: a 2-layer S (hidden 56) stayed at gsm pass@1 0.11 and RL could not move it (+2
# points); 3 layers at hidden 48 reach 0.35 and RL lifts them like M (docs/CHOICES.md, *Policy S*).
# Greedy pass@1 is capped near (share of problems whose greedy solution works the steps) x accuracy,
# so M and L end close on it; they differ in pass@8 and in what RL makes of them (docs/CHOICES.md).
PRM = ModelSpec("prm", hidden=96, intermediate=256, layers=4, steps=250, learning_rate=1e-3)
PRM_INIT = "L"  # the PRM grows from policy L: L's three layers plus one more
PRM_ERROR_RATE = 0.3  # share of slipped steps in the PRM's step-labelled set


def models_dir(root: str | Path | None = None) -> Path:
    return Path(root) if root is not None else repo_root() / MODELS_DIR


# ---------------------------------------------------------------------------------------- tokenizer


def build_tokenizer():
    """A character-level tokenizer built with ``tokenizers``, in Qwen2's own form: byte-level BPE
    with one token per character of :data:`CHARS` and no merges, after the special tokens (pad 0,
    eos 1, unk 2, ``<extra_0>`` 3).

    Byte-level matters: ``AutoTokenizer`` loads any checkpoint whose config says ``qwen2`` as
    ``Qwen2Tokenizer``, which rebuilds a byte-level pre-tokenizer; a plain character vocabulary
    would then silently lose its spaces and newlines.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [_byte_level(c) for c in CHARS]
    vocab = {tok: i for i, tok in enumerate(list(SPECIALS) + chars)}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        additional_special_tokens=[STEP_TOKEN],
        padding_side="left",
        model_max_length=512,
    )


def _byte_level(char: str) -> str:
    """GPT-2's byte-to-unicode map for an ASCII character: printable ones map to themselves, space
    and control characters to ``chr(256 + byte)`` (space is 'Ġ', newline 'Ċ')."""
    byte = ord(char)
    if byte > 126:
        raise ValueError(f"only ASCII characters are supported, got {char!r}")
    return char if byte >= 33 else chr(256 + byte)


# ---------------------------------------------------------------------------------------- models


def qwen2_config(spec: ModelSpec, tokenizer, **extra):
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden,
        intermediate_size=spec.intermediate,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        **extra,
    )


# The smallest Qwen2 the pipeline runs end to end: random tiny policies and PRMs for tests and examples.
TINY = ModelSpec("tiny", hidden=32, intermediate=64, layers=1, heads=2, kv_heads=1)
PRM_LABELS = {0: "wrong", 1: "right"}  # the PRM's two classes: class 1 is a step judged right


def random_model(
    spec: ModelSpec = TINY,
    tokenizer=None,
    *,
    seed: int = 0,
    head: str = "lm",
    attn_implementation: str | None = None,
):
    """A randomly initialised Qwen2 of ``spec`` over ``tokenizer`` (default :func:`build_tokenizer`),
    seeded with ``seed``: a causal LM (``head="lm"``, a policy) or the PRM's 2-way token classifier
    (``head="prm"``); a policy's generation config pads and stops with the tokenizer's pad and eos.

    ``attn_implementation="eager"`` for passes counted with FlopCounterMode, which cannot see the CPU
    sdpa kernel. :func:`pretrain_policy` and :func:`train_prm` start from this model."""
    import torch
    from transformers import Qwen2ForCausalLM, Qwen2ForTokenClassification

    tokenizer = tokenizer if tokenizer is not None else build_tokenizer()
    if head == "lm":
        cls, config = Qwen2ForCausalLM, qwen2_config(spec, tokenizer)
    elif head == "prm":
        labels = {"id2label": PRM_LABELS, "label2id": {v: k for k, v in PRM_LABELS.items()}}
        cls, config = Qwen2ForTokenClassification, qwen2_config(spec, tokenizer, num_labels=2, **labels)
    else:
        raise ValueError(f"head must be 'lm' or 'prm', got {head!r}")
    torch.manual_seed(seed)
    model = cls(config)
    if attn_implementation is not None:
        model.config._attn_implementation = attn_implementation
    if head == "lm":
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


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
    trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
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


def prm_features(tokenizer, records: list[dict]) -> dict[str, list]:
    """Token-classification features for step-labelled records: the problem, each step followed by
    ``<extra_0>``; labels are the step verdicts at the separators and -100 elsewhere."""
    sep = tokenizer.convert_tokens_to_ids(STEP_TOKEN)
    prompts = tokenizer([r["prompt"] for r in records], add_special_tokens=False)["input_ids"]
    flat_steps = [s for r in records for s in r["steps"]]
    step_ids = iter(tokenizer(flat_steps, add_special_tokens=False)["input_ids"]) if flat_steps else iter(())
    input_ids, labels = [], []
    for record, prompt in zip(records, prompts, strict=True):
        ids, lab = list(prompt), [-100] * len(prompt)
        for _, verdict in zip(record["steps"], record["labels"], strict=True):
            step = next(step_ids)
            ids += [*step, sep]
            lab += [-100] * len(step) + [int(verdict)]
        input_ids.append(ids)
        labels.append(lab)
    return {"input_ids": input_ids, "labels": labels}


def train_prm(
    spec: ModelSpec,
    tokenizer,
    out_dir: str | Path,
    records: list[dict],
    *,
    init_from: str | Path | None = None,
    seed: int = 0,
    steps: int | None = None,
) -> dict:
    """Train the tiny PRM (Qwen2 backbone + 2-way token-classification head) on step-labelled
    records with the ``transformers`` Trainer and save it to ``out_dir``.

    ``init_from``: a policy checkpoint to grow the backbone from (see :func:`grow_backbone`), as real
    PRMs start from a pretrained LM (Qwen2.5-Math-PRM-7B from Qwen2.5-Math-7B-Instruct). One label
    per step is a thin signal: on this task neither a from-scratch nor a grown PRM gets far within
    the notebook's budget (docs/CHOICES.md lists what we tried and the AUROCs measured)."""
    from datasets import Dataset
    from transformers import DataCollatorForTokenClassification, Trainer, TrainingArguments

    steps = steps if steps is not None else spec.steps
    data = Dataset.from_dict(prm_features(tokenizer, records))
    model = random_model(spec, tokenizer, seed=seed, head="prm")
    if init_from is not None:
        grow_backbone(model, init_from)
    args = TrainingArguments(**_training_args(spec, steps, out_dir, seed))
    tokenizer.padding_side = "right"
    collator = DataCollatorForTokenClassification(tokenizer)
    trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=collator)
    seconds = _timed(trainer.train)
    tokenizer.padding_side = "left"
    _save(model, tokenizer, out_dir)
    return _record(spec, steps, seed, seconds, trainer, model)


def grow_backbone(model, policy_dir: str | Path) -> None:
    """Load a smaller policy's weights into ``model``'s backbone (embeddings, its first layers, final
    norm). The extra layers on top start as the identity on the residual stream (zero output
    projections), so the grown model begins computing exactly the policy's features."""
    from transformers import AutoModelForCausalLM

    policy = AutoModelForCausalLM.from_pretrained(policy_dir)
    if policy.config.hidden_size != model.config.hidden_size:
        raise ValueError(
            f"cannot grow a hidden-{model.config.hidden_size} backbone from a hidden-"
            f"{policy.config.hidden_size} policy ({policy_dir})"
        )
    result = model.model.load_state_dict(policy.model.state_dict(), strict=False)
    if result.unexpected_keys:
        raise ValueError(f"{policy_dir} has weights the PRM backbone lacks: {result.unexpected_keys[:3]}")
    for layer in model.model.layers[policy.config.num_hidden_layers :]:
        layer.self_attn.o_proj.weight.data.zero_()
        layer.mlp.down_proj.weight.data.zero_()


def prm_auroc(model, tokenizer, records: list[dict]) -> tuple[float, int]:
    """Step-level AUROC of the PRM's scores against the step verdicts, and the number of steps."""
    from paper_repro.rewards.prm_scorer import PRMScorer, auroc

    scorer = PRMScorer(model.eval(), tokenizer, batch_size=128)
    scores = scorer.step_scores([r["prompt"] for r in records], [r["steps"] for r in records])
    flat = [s for row in scores for s in row]
    labels = [bool(v) for r in records for v in r["labels"]]
    if len(flat) != len(labels):
        raise RuntimeError(f"PRM returned {len(flat)} step scores for {len(labels)} steps")
    return auroc(flat, labels), len(labels)


# ---------------------------------------------------------------------------------------- building


@dataclass(frozen=True)
class BuildConfig:
    """What notebook 00 builds. ``steps_scale`` shrinks every training run (smoke tests use ~0.02)."""

    models_dir: str | None = None  # None: the repo's data/models
    tasks_dir: str | None = None  # None: the repo's data/tasks/arith
    results_csv: str | None = None  # None: data/results/cpu-tiny/base_models.csv
    sizes: tuple[str, ...] | None = None  # None: every size of POLICIES
    prm: bool = True  # train the PRM (it grows from policy L: L must be built or already saved)
    steps_scale: float = 1.0
    error_rate: float = 0.05  # share of pretraining steps whose result carries a slip
    seed: int = 0
    pass_k: int = 8  # pass@k at temperature 1.0
    eval_limit: int | None = None  # evaluate on the first N problems of each split (None: all)
    prm_heldout: float = 0.1  # share of the step-labelled set kept out of PRM training

    def __post_init__(self) -> None:
        if self.sizes is None:
            object.__setattr__(self, "sizes", tuple(POLICIES))
        unknown = [s for s in self.sizes if s not in POLICIES]
        if unknown:
            raise ValueError(f"unknown policy sizes {unknown}; known: {', '.join(POLICIES)}")
        if not 0 < self.steps_scale <= 10:
            raise ValueError(f"steps_scale must be in (0, 10], got {self.steps_scale}")
        if not 0 < self.prm_heldout < 1:
            raise ValueError(f"prm_heldout must be in (0, 1), got {self.prm_heldout}")

    def steps(self, spec: ModelSpec) -> int:
        return max(2, round(spec.steps * self.steps_scale))


def evaluate_base(
    model, tokenizer, pass_k: int = 8, limit: int | None = None, seed: int = 0, tasks_dir=None
) -> dict:
    """Greedy pass@1 and pass@k (temperature 1.0) on gsm_tiny and math_tiny, and the common judge's
    process score of the greedy gsm_tiny solutions (share of steps right, in [0, 1])."""
    import numpy as np

    from paper_repro import evaluate
    from paper_repro.judge import StepVerifierJudge

    out: dict[str, float] = {}
    for split, prefix in (("gsm_tiny", "gsm"), ("math_tiny", "math")):
        examples = arith.load_split(split, tasks_dir)[:limit]
        prompts = [e.prompt for e in examples]
        answers = [e.answer for e in examples]
        greedy = evaluate.sample(model, tokenizer, prompts, evaluate.SampleConfig(seed=seed))
        sampled = evaluate.sample(
            model, tokenizer, prompts, evaluate.SampleConfig(n=pass_k, temperature=1.0, seed=seed)
        )
        correct = evaluate.score_matrix(greedy, answers, arith.is_correct)
        out[f"{prefix}_pass1"] = evaluate.pass_at_k(correct, 1)
        out[f"{prefix}_pass{pass_k}"] = evaluate.pass_at_k(
            evaluate.score_matrix(sampled, answers, arith.is_correct), pass_k
        )
        judged = StepVerifierJudge().score(prompts, [c[0] for c in greedy], [e.meta for e in examples])
        out[f"{prefix}_judge"] = float(np.mean(judged)) if judged else float("nan")
    return out


def non_embedding_params(model) -> int:
    """Parameters outside the token embedding (the tied LM head is the embedding)."""
    embed = model.get_input_embeddings().weight
    return sum(p.numel() for p in model.parameters() if p is not embed)


def build_all(config: BuildConfig = BuildConfig()):
    """Regenerate the testbed: splits, tokenizer, policies S/M/L, the PRM, and the base-model table.

    A partial build (``sizes`` a subset, or ``prm=False``) rebuilds only those models: their rows
    replace the same models' rows in an existing table, whose other rows (with their own provenance)
    are kept. Returns the table (one row per model) that is also written to ``config.results_csv``.
    """
    import pandas as pd
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

    from paper_repro import provenance

    quiet_progress_bars()
    root = models_dir(config.models_dir)
    root.mkdir(parents=True, exist_ok=True)
    splits = arith.build_splits(config.error_rate, PRM_ERROR_RATE)
    arith.write_splits(config.tasks_dir, config.error_rate, PRM_ERROR_RATE, splits=splits)
    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(root / "tokenizer")
    rows = []
    for size in config.sizes:
        spec = POLICIES[size]
        record = pretrain_policy(
            spec, tokenizer, root / spec.name, splits["pretrain"], seed=config.seed, steps=config.steps(spec)
        )
        model = AutoModelForCausalLM.from_pretrained(root / spec.name)
        loaded = AutoTokenizer.from_pretrained(root / spec.name)
        metrics = evaluate_base(
            model, loaded, config.pass_k, config.eval_limit, config.seed, config.tasks_dir
        )
        rows.append(_row(size, "policy", spec, record, model, metrics))
    if config.prm:
        prm_records = splits["prm"]
        cut = round(len(prm_records) * (1 - config.prm_heldout))
        init = root / POLICIES[PRM_INIT].name
        grown = PRM_INIT in config.sizes or (init / "config.json").exists()
        record = train_prm(
            PRM,
            tokenizer,
            root / PRM.name,
            prm_records[:cut],
            seed=config.seed,
            steps=config.steps(PRM),
            init_from=init if grown else None,
        )
        record["init"] = f"policy-{PRM_INIT}" if grown else "scratch"
        prm = AutoModelForTokenClassification.from_pretrained(root / PRM.name)
        auc, n_steps = prm_auroc(prm, AutoTokenizer.from_pretrained(root / PRM.name), prm_records[cut:])
        metrics = {"prm_auroc": auc, "prm_heldout_steps": n_steps, "prm_init": record["init"]}
        rows.append(_row("PRM", "prm", PRM, record, prm, metrics))
    table = pd.DataFrame(rows)
    stamp = provenance.stamp()
    for key, value in stamp.items():
        table[key] = value
    out = (
        Path(config.results_csv)
        if config.results_csv
        else repo_root() / "data/results/cpu-tiny/base_models.csv"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():  # keep the rows of the models this build did not make, in the table's order
        kept = pd.read_csv(out)
        kept = kept[~kept["model"].isin(table["model"])]
        order = {m: i for i, m in enumerate([*POLICIES, "PRM"])}
        table = pd.concat([kept, table], ignore_index=True)
        table = table.sort_values("model", key=lambda col: col.map(order), kind="stable", ignore_index=True)
    tmp = out.with_suffix(".csv.tmp")
    table.to_csv(tmp, index=False)
    tmp.replace(out)
    return table


def quiet_progress_bars() -> None:
    """Turn off the datasets/transformers progress bars, which would fill an executed notebook."""
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


def _row(label: str, role: str, spec: ModelSpec, record: dict, model, metrics: dict) -> dict:
    return {
        "model": label,
        "role": role,
        "path": f"data/models/{spec.name}",
        "hidden": spec.hidden,
        "layers": spec.layers,
        "params": sum(p.numel() for p in model.parameters()),
        "non_embedding_params": non_embedding_params(model),
        "train_steps": record["steps"],
        "batch_size": spec.batch_size,
        "train_seconds": round(record["train_seconds"], 1),
        "final_loss": record["final_loss"],
        **metrics,
    }
