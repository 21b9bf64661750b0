"""Evaluation: sampling completions from a policy and scoring them.

- :func:`sample` generates ``n`` completions per prompt with HF ``generate`` (greedy when
  ``temperature == 0``), in left-padded batches, deterministically from a seed.
- :func:`pass_at_k` is the unbiased estimator of Chen et al. (2021), ``1 - C(n-c, k) / C(n, k)``,
  averaged over problems; with ``n == k`` it is the plain "any of k correct" rate.

Metrics that cannot be computed are ``NaN`` with a status, never ``0.0``.

:func:`evaluate_policy` greedy-decodes the held-out, gsm and math sets once and scores them; a run's
evaluation with its own reward, judge and prompts is :func:`paper_repro.run.run_eval.evaluate_run`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from paper_repro.common.choices import SAMPLERS, check_choice


@dataclass(frozen=True)
class SampleConfig:
    """How completions are drawn."""

    n: int = 1  # completions per prompt
    temperature: float = 0.0  # 0 = greedy
    max_new_tokens: int = 128
    batch_size: int = 256  # sequences per generate call
    seed: int = 0
    # "lean": paper_repro.sampler (HF generate's tokens; greedy drops finished rows and decodes every
    # prompt in one batch), falling back to HF generate where it cannot reproduce it; "hf": HF generate;
    # "fused": the lean sampler's fused decoder (HF's model, other roundings), else HF generate
    sampler: str = "hf"

    def __post_init__(self) -> None:
        if self.n < 1 or self.max_new_tokens < 1 or self.batch_size < 1:
            raise ValueError(f"n, max_new_tokens and batch_size must be positive: {self}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.temperature == 0 and self.n > 1:
            raise ValueError("greedy decoding (temperature 0) gives one completion; use n=1")
        check_choice("sampler", self.sampler, SAMPLERS)


def sample(model, tokenizer, prompts: Sequence[str], config: SampleConfig) -> list[list[str]]:
    """``config.n`` completions for each prompt, as decoded text without special tokens."""
    return sample_with_lengths(model, tokenizer, prompts, config)[0]


def sample_with_lengths(
    model, tokenizer, prompts: Sequence[str], config: SampleConfig
) -> tuple[list[list[str]], list[list[int]]]:
    """:func:`sample`'s completions and, beside each, the tokens it generated (up to and including its
    EOS, or ``max_new_tokens``): what its decoding cost (:mod:`paper_repro.evaluation.test_time`)."""
    import torch

    from paper_repro.sampler import lean_generate, unsupported
    from paper_repro.sampler.tokens import encode

    rows = [p for p in prompts for _ in range(config.n)]
    texts: list[str] = []
    lengths: list[int] = []
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(config.seed)
    tokenizer.padding_side = "left"
    greedy = config.temperature == 0
    fused = config.sampler == "fused"
    lean = config.sampler in ("lean", "fused") and unsupported(model, fused=fused) is None
    try:
        model.eval()
        with torch.inference_mode():
            # HF's batches, so that each batch pads (and, sampling, draws) as HF's does; greedy draws
            # no random numbers, and the lean sampler drops finished rows from the batch
            for start in range(0, len(rows), config.batch_size):
                if lean:
                    # the prompts encoded once per tokenizer (a run is evaluated on the same sets at
                    # every budget point); the fused decoder prefills only what decoding reads
                    # (FusedDecoder.prefill: the same logits and cache, bit for bit)
                    ids = encode(tokenizer, rows[start : start + config.batch_size])
                    eos = tokenizer.eos_token_id
                    completion_ids = lean_generate(
                        model,
                        ids,
                        max_new_tokens=config.max_new_tokens,
                        do_sample=not greedy,
                        temperature=None if greedy else config.temperature,
                        top_k=None,
                        top_p=None,
                        eos_token_ids=eos if isinstance(eos, list) else [eos],
                        pad_token_id=tokenizer.pad_token_id,
                        compact=greedy,
                        fused=fused,
                        trim=fused,
                    )
                    texts.extend(tokenizer.batch_decode(completion_ids, skip_special_tokens=True))
                    lengths.extend(len(c) for c in completion_ids)
                    continue
                batch = tokenizer(
                    rows[start : start + config.batch_size],
                    return_tensors="pt",
                    padding=True,
                    add_special_tokens=False,
                ).to(model.device)
                out = model.generate(
                    **batch,
                    do_sample=not greedy,
                    temperature=None if greedy else config.temperature,
                    top_p=None,
                    top_k=None,
                    max_new_tokens=config.max_new_tokens,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                )
                completion_ids = out[:, batch["input_ids"].shape[1] :]
                texts.extend(tokenizer.batch_decode(completion_ids, skip_special_tokens=True))
                lengths.extend(_generated(completion_ids, tokenizer.eos_token_id))
    finally:
        torch.random.set_rng_state(generator_state)
    per = lambda values: [values[i * config.n : (i + 1) * config.n] for i in range(len(prompts))]  # noqa: E731
    return per(texts), per(lengths)


def _generated(completion_ids, eos) -> list[int]:
    """Tokens each row of HF ``generate``'s output generated: up to and including its first EOS (the
    padding after it was never decoded), else all of them."""
    eos_ids = set(eos if isinstance(eos, list) else [eos])
    out = []
    for row in completion_ids.tolist():
        ends = [i for i, t in enumerate(row) if t in eos_ids]
        out.append(ends[0] + 1 if ends else len(row))
    return out


def pass_at_k(correct: np.ndarray, k: int) -> float:
    """Unbiased pass@k over a ``(problems, n)`` boolean matrix of sample correctness."""
    correct = np.asarray(correct, dtype=bool)
    if correct.ndim != 2 or correct.shape[0] == 0:
        return float("nan")
    return float(np.mean(pass_at_k_per_problem(correct.sum(axis=1), correct.shape[1], k)))


def pass_at_k_per_problem(correct_counts: Sequence[int], n: int, k: int) -> np.ndarray:
    """Each problem's unbiased pass@k, ``1 - C(n-c, k) / C(n, k)``, from its ``c`` right of ``n``."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem, got {n}")
    return np.array(
        [1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k) for c in correct_counts]
    )


def score_matrix(
    completions: Sequence[Sequence[str]], answers: Sequence[str], check: Callable[[str, str], bool]
) -> np.ndarray:
    """A ``(problems, n)`` boolean matrix: ``check(completion, answer)`` for each sample."""
    return np.array([[bool(check(c, a)) for c in row] for row, a in zip(completions, answers, strict=True)])


@dataclass(frozen=True)
class EvalSets:
    """What a run is evaluated on: held-out training prompts (native reward) and the two
    downstream sets (pass@1; the judge reads the ``gsm`` completions)."""

    heldout: Sequence  # of paper_repro.tasks.base.Example
    gsm: Sequence
    math: Sequence


def columns_of(examples: Sequence) -> dict[str, list]:
    """The dataset columns a reward reads, as TRL passes them: one list per column."""
    rows = [{"answer": e.answer, **e.meta} for e in examples]
    keys = sorted({k for r in rows for k in r})
    return {k: [r.get(k) for r in rows] for k in keys}


def evaluate_policy(
    model,
    tokenizer,
    sets: EvalSets,
    reward,
    judge,
    task_grader,
    config: SampleConfig,
    render: Callable | None = None,
) -> dict:
    """Greedy-decode every set once and score it.

    Returns ``native_reward`` (the run's own reward function, mean over held-out prompts),
    ``gsm_pass1`` and ``math_pass1`` (share of greedy answers right), ``judge_score`` (the common
    judge's mean process score of the gsm completions). A set that is empty gives ``NaN``.
    ``render`` turns an example into the text the policy is prompted with (an Instruct model's chat
    template); rewards and the judge always read the plain problem.
    """
    render = render or (lambda e: e.prompt)
    out: dict[str, float] = {}
    greedy = {}
    # one generation per set: a batch of all three sets would pad every prompt to the longest math
    # prompt, and evaluation batches are large enough to be bound by arithmetic, not per-step overhead
    for name, examples in (("heldout", sets.heldout), ("gsm", sets.gsm), ("math", sets.math)):
        prompts = [render(e) for e in examples]
        greedy[name] = [c[0] for c in sample(model, tokenizer, prompts, config)] if prompts else []
    held = list(sets.heldout)
    scores = reward(prompts=[e.prompt for e in held], completions=greedy["heldout"], **columns_of(held))
    out["native_reward"] = float(np.mean(scores)) if scores else float("nan")
    for name in ("gsm", "math"):
        examples = list(getattr(sets, name))
        rows = [{"answer": e.answer, **e.meta} for e in examples]
        right = [task_grader.is_correct(c, r) for c, r in zip(greedy[name], rows, strict=True)]
        out[f"{name}_pass1"] = float(np.mean(right)) if right else float("nan")
    gsm = list(sets.gsm)
    judged = judge.score(
        [e.prompt for e in gsm], greedy["gsm"], [{"answer": e.answer, **e.meta} for e in gsm]
    )
    out["judge_score"] = float(np.mean(judged)) if judged else float("nan")
    return out
