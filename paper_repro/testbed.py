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
- The PRM is a likelihood-reading PRM (:mod:`paper_repro.rewards.likelihood_prm`): a Qwen2 LM,
  larger than the largest policy, trained from scratch on step-labelled solutions the policies never
  see, with the LM loss on the right steps only; a step's score is the probability of its least
  likely token. It keeps the interface of Qwen2.5-Math-PRM: the solution's steps are joined by
  ``<extra_0>`` and the class-1 probability of its two outputs at each separator is that step's
  score. docs/CHOICES.md (*The PRM*) has the trials that led here.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from paper_repro.paths import repo_root
from paper_repro.quiet import quiet_libraries, quiet_trainer
from paper_repro.rewards.prm_scorer import STEP_TOKEN
from paper_repro.tasks import arith

if TYPE_CHECKING:
    import pandas as pd

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
# The PRM: one layer deeper than policy L, so it costs more per token than every policy (as
# Qwen2.5-Math-PRM-7B does against the 1.5B-7B policies), trained from scratch on fresh step data.
PRM = ModelSpec("prm", hidden=96, intermediate=256, layers=4, steps=1000, learning_rate=3e-3)
PRM_ERROR_RATE = 0.3  # share of slipped steps in the PRM's step-labelled data
PRM_DATA_SEED = 108  # the stream of fresh PRM training problems (disjoint from every split's prompts)


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


def prm_config(spec: ModelSpec, tokenizer):
    """The likelihood PRM's config: a Qwen2 LM's, plus the tokens that end a step (``<extra_0>``)
    and the problem (the newline that ends an arith prompt)."""
    return qwen2_config(
        spec,
        tokenizer,
        architectures=["Qwen2LikelihoodPRM"],
        step_token_id=tokenizer.convert_tokens_to_ids(STEP_TOKEN),
        problem_end_token_id=tokenizer.convert_tokens_to_ids(_byte_level("\n")),
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
    seeded with ``seed``: a causal LM (``head="lm"``, a policy), the testbed's likelihood PRM
    (``head="prm"``, :func:`prm_config`) or a 2-way token classifier (``head="token-classification"``,
    the generic PRM interface); a policy's generation config pads and stops with the tokenizer's pad
    and eos.

    ``attn_implementation="eager"`` for passes counted with FlopCounterMode, which cannot see the CPU
    sdpa kernel. :func:`pretrain_policy` and :func:`train_prm` start from this model."""
    import torch
    from transformers import Qwen2ForCausalLM, Qwen2ForTokenClassification

    from paper_repro.rewards.likelihood_prm import Qwen2LikelihoodPRM

    tokenizer = tokenizer if tokenizer is not None else build_tokenizer()
    if head == "lm":
        cls, config = Qwen2ForCausalLM, qwen2_config(spec, tokenizer)
    elif head == "prm":
        cls, config = Qwen2LikelihoodPRM, prm_config(spec, tokenizer)
    elif head == "token-classification":
        labels = {"id2label": PRM_LABELS, "label2id": {v: k for k, v in PRM_LABELS.items()}}
        cls, config = Qwen2ForTokenClassification, qwen2_config(spec, tokenizer, num_labels=2, **labels)
    else:
        raise ValueError(f"head must be 'lm', 'prm' or 'token-classification', got {head!r}")
    torch.manual_seed(seed)
    model = cls(config)
    if attn_implementation is not None:
        model.config._attn_implementation = attn_implementation
    if head == "prm":
        model.register_for_auto_class("AutoModel")  # save_pretrained ships likelihood_prm.py
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


def load_prm(path: str | Path):
    """The PRM at ``path`` as the study scores with it (:class:`PRMScorer`, its own modelling code)."""
    from paper_repro.rewards.prm_scorer import PRMScorer

    return PRMScorer.load(path, batch_size=128)


def prm_auroc(scorer, records: list[dict]) -> tuple[float, int]:
    """Step-level AUROC of the PRM's scores against the step verdicts, and the number of steps."""
    from paper_repro.rewards.prm_scorer import auroc

    scores, labels = _scored_steps(scorer, records)
    return auroc(scores, labels), len(labels)


def _scored_steps(scorer, records: list[dict]) -> tuple[list[float], list[bool]]:
    scores = scorer.step_scores([r["prompt"] for r in records], [r["steps"] for r in records])
    flat = [s for row in scores for s in row]
    labels = [bool(v) for r in records for v in r["labels"]]
    if len(flat) != len(labels):
        raise RuntimeError(f"PRM returned {len(flat)} step scores for {len(labels)} steps")
    return flat, labels


PRM_POLICY_SAMPLES = 4  # sampled solutions per held-out prompt and base policy, for the PRM's error profile


def policy_samples(policy_dir: str | Path, prompts_split: str = "heldout", n: int = PRM_POLICY_SAMPLES,
                   seed: int = 0, tasks_dir=None, limit: int | None = None) -> list[dict]:  # fmt: skip
    """Step-labelled solutions the base policy at ``policy_dir`` samples (temperature 1) on a split's
    prompts: what the PRM scores during RL. Solutions without steps (shortcut answers) carry none."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paper_repro import evaluate

    examples = arith.load_split(prompts_split, tasks_dir)[:limit]
    model = AutoModelForCausalLM.from_pretrained(policy_dir)
    tokenizer = AutoTokenizer.from_pretrained(policy_dir)
    config = evaluate.SampleConfig(n=n, temperature=1.0, seed=seed)
    completions = evaluate.sample(model, tokenizer, [e.prompt for e in examples], config)
    records = []
    for example, texts in zip(examples, completions, strict=True):
        problem = arith.record_to_problem(example.meta)
        for text in texts:
            steps = list(arith.parse_solution(text).step_texts)
            labels = arith.step_verdicts(problem, text)
            records.append({"prompt": example.prompt, "steps": steps, "labels": labels})
    return records


def prm_error_profile(scorer, prm_split: list[dict], root: Path, config: BuildConfig) -> pd.DataFrame:
    """The PRM's step AUROC where it can err: on the whole ``prm`` split (no PRM training solution
    is in it), its last ``prm_heldout`` share (the held-out set of the earlier PRMs), each slip kind
    against the right steps, and the solutions each base policy samples. One row per view, with the
    steps, wrong steps, AUROC and the share of wrong steps scored below 0.5 (caught) and of right
    steps scored below 0.5 (false alarms)."""
    import pandas as pd

    cut = round(len(prm_split) * (1 - config.prm_heldout))
    views: list[tuple[str, str, list[float], list[bool]]] = []
    scores, labels = _scored_steps(scorer, prm_split)
    views.append(("prm split", "all", scores, labels))
    first_heldout = sum(len(r["labels"]) for r in prm_split[:cut])
    tail = f"prm split, last {config.prm_heldout:.0%}"
    views.append((tail, "all", scores[first_heldout:], labels[first_heldout:]))
    kinds = [k for r in prm_split for k in r["kinds"]]
    right = [s for s, ok in zip(scores, labels, strict=True) if ok]
    for kind in arith.SLIP_KINDS:
        wrong = [s for s, ok, k in zip(scores, labels, kinds, strict=True) if not ok and k == kind]
        views.append(("prm split", kind, right + wrong, [True] * len(right) + [False] * len(wrong)))
    for size in config.sizes or [s for s in POLICIES if (root / POLICIES[s].name / "config.json").exists()]:
        records = policy_samples(root / POLICIES[size].name, seed=config.seed, tasks_dir=config.tasks_dir,
                                 limit=config.eval_limit)  # fmt: skip
        s, lab = _scored_steps(scorer, records)
        views.append((f"policy {size} samples", "all", s, lab))
    return pd.DataFrame([_view_row(*v) for v in views])


def _view_row(source: str, kind: str, scores: list[float], labels: list[bool]) -> dict:
    import numpy as np

    from paper_repro.rewards.prm_scorer import auroc

    s, ok = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    return {
        "source": source,
        "error_kind": kind,
        "steps": len(s),
        "wrong_steps": int((~ok).sum()),
        "auroc": auroc(s, ok),
        "caught": float((s[~ok] < 0.5).mean()) if (~ok).any() else float("nan"),
        "false_alarms": float((s[ok] < 0.5).mean()) if ok.any() else float("nan"),
    }


def prm_summary(profile: pd.DataFrame) -> dict:
    """The PRM's row of ``base_models.csv``: its AUROC on the ``prm`` split (all of it held out), on
    the split's last ``prm_heldout`` share, and on the base policies' own samples (pooled, weighted
    by steps)."""
    whole = profile[(profile["source"] == "prm split") & (profile["error_kind"] == "all")].iloc[0]
    tail = profile[profile["source"].str.startswith("prm split, last")].iloc[0]
    samples = profile[profile["source"].str.startswith("policy")]
    pooled = (
        (samples["auroc"] * samples["steps"]).sum() / samples["steps"].sum() if len(samples) else float("nan")
    )
    return {
        "prm_auroc": whole["auroc"],
        "prm_heldout_steps": int(whole["steps"]),
        "prm_auroc_last10": tail["auroc"],  # the earlier PRMs' held-out set (the default share, 10%)
        "prm_auroc_policy_samples": pooled,
    }


def write_error_profile(profile: pd.DataFrame, config: BuildConfig) -> Path:
    """``prm_error_profile.csv`` beside ``base_models.csv``, written atomically."""
    out = results_table(config).with_name("prm_error_profile.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".csv.tmp")
    profile.to_csv(tmp, index=False)
    tmp.replace(out)
    return out


def results_table(config: BuildConfig) -> Path:
    """Where the build writes ``base_models.csv`` (``prm_error_profile.csv`` goes beside it)."""
    return (
        Path(config.results_csv)
        if config.results_csv
        else repo_root() / "data/results/cpu-tiny/base_models.csv"
    )


# ---------------------------------------------------------------------------------------- building


@dataclass(frozen=True)
class BuildConfig:
    """What notebook 00 builds. ``steps_scale`` shrinks every training run (smoke tests use ~0.02)."""

    models_dir: str | None = None  # None: the repo's data/models
    tasks_dir: str | None = None  # None: the repo's data/tasks/arith
    results_csv: str | None = None  # None: data/results/cpu-tiny/base_models.csv
    sizes: tuple[str, ...] | None = None  # None: every size of POLICIES
    prm: bool = True  # train the PRM (from scratch; its error profile samples the built policies)
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
    quiet_libraries()  # before transformers is imported: importing it warns in a kernel without widgets
    import pandas as pd
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paper_repro import provenance

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
        exclude = {r["prompt"] for records in splits.values() for r in records}
        training = prm_training_records(
            PRM.batch_size * config.steps(PRM), exclude, PRM_DATA_SEED + config.seed
        )
        record = train_prm(
            PRM, tokenizer, root / PRM.name, training, seed=config.seed, steps=config.steps(PRM)
        )
        prm = load_prm(root / PRM.name)
        profile = prm_error_profile(prm, splits["prm"], root, config)
        write_error_profile(profile, config)
        rows.append(_row("PRM", "prm", PRM, record, prm.model, prm_summary(profile)))
    table = pd.DataFrame(rows)
    stamp = provenance.stamp()
    for key, value in stamp.items():
        table[key] = value
    out = results_table(config)
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
