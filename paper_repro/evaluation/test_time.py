"""Test-time arms: the same policy spending more FLOPs per query by sampling k answers (stage E).

From ``n`` temperature samples of each problem (:func:`sample_policy`), each arm's accuracy at
k = 1, 2, 4, ... and its FLOPs per query:

- ``pass``: pass@k, the unbiased estimator (:func:`paper_repro.evaluation.evaluate.pass_at_k_per_problem`).
  It is best-of-k by the exact checker: an **oracle** a deployment does not have, the ceiling of
  every selection rule;
- ``majority``: majority vote over the k final answers (no verifier; ties go to the answer seen
  first, a sample without an answer does not vote);
- ``prm``: best-of-k by the learned PRM's score (aggregated as the PRM reward aggregates it), the
  PRM's forward over the k solutions counted in its FLOPs, as training counts it.

Majority and best-of-k are averaged over the ``n // k`` disjoint groups of k samples (each group k
draws from the policy, so the mean is unbiased for a random k-sample, like pass@k's estimator).
FLOPs are the analytic model's (:mod:`paper_repro.accounting.flops`), ``useful`` convention: real
tokens only, the prompt prefilled once per query and its cache shared by the k samples (prefix
caching, as vLLM and the fused decoder do), each completion decoded against it; the PRM reads each
of the k solutions once (:func:`scoring_flops`). An arm's FLOPs at k are the mean over the same
groups its accuracy is. ``tests/test_test_time.py`` checks both against ``FlopCounterMode``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from paper_repro.accounting import flops
from paper_repro.evaluation.evaluate import pass_at_k_per_problem

ARMS = ("pass", "majority", "prm")  # pass@k is the exact checker's best-of-k: the oracle
ARM_LABELS = {
    "pass": "pass@k (oracle: best-of-k by the exact checker)",
    "majority": "majority vote @k",
    "prm": "best-of-k by the learned PRM",
}


def k_ladder(n: int) -> tuple[int, ...]:
    """k = 1, 2, 4, ... up to ``n`` samples per problem."""
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    return tuple(2**i for i in range(n.bit_length()) if 2**i <= n)


@dataclass(frozen=True)
class ProblemSamples:
    """``n`` temperature samples of one problem, as the arms read them."""

    prompt_tokens: int
    correct: Sequence[bool]  # the exact checker's verdict on each sample
    answers: Sequence[str | None]  # each sample's final answer (its vote), None without one
    completion_tokens: Sequence[int]  # tokens each sample generated (its EOS included)
    prm_scores: Sequence[float]  # the PRM's aggregated score of each sample
    prm_tokens: Sequence[int]  # the tokens the PRM read for each sample

    def __post_init__(self) -> None:
        n = len(self.correct)
        sizes = {len(self.answers), len(self.completion_tokens), len(self.prm_scores), len(self.prm_tokens)}
        if n == 0 or sizes != {n}:
            raise ValueError(f"every per-sample field needs the same number (>0) of samples: {n}, {sizes}")


def groups(n: int, k: int) -> list[range]:
    """The ``n // k`` disjoint groups of k consecutive samples the arms average over."""
    if not 1 <= k <= n:
        raise ValueError(f"k={k} needs 1 <= k <= n={n}")
    return [range(i * k, (i + 1) * k) for i in range(n // k)]


def majority_vote(answers: Sequence[str | None], correct: Sequence[bool]) -> bool:
    """Is the most frequent answer right? Ties go to the answer seen first; no answer: wrong."""
    votes = Counter(a for a in answers if a is not None)
    if not votes:
        return False
    top = max(votes.values())
    winner = next(a for a in answers if a is not None and votes[a] == top)
    return bool(correct[list(answers).index(winner)])


def best_of(scores: Sequence[float], correct: Sequence[bool]) -> bool:
    """Is the best-scored sample right (the first of equal scores)?"""
    return bool(correct[int(np.argmax(np.asarray(scores, dtype=float)))])


def sampling_flops(shape: flops.ModelShape, prompt_tokens: int, completion_tokens: Sequence[int]) -> float:
    """Useful FLOPs of one query's samples: its prompt prefilled once, each completion of
    ``completion_tokens`` decoded against the cached prompt (the first reuses the prefill's logits)."""
    work = sum(
        (flops.generation_work(prompt_tokens, c, prefill=i == 0) for i, c in enumerate(completion_tokens)),
        flops.Work(),
    )
    return flops.forward_flops(shape, work)


def scoring_flops(prm_shape: flops.ModelShape, prm_tokens: Sequence[int]) -> float:
    """Useful FLOPs of the PRM reading each solution once (its ``prm_tokens`` each)."""
    return flops.forward_flops(prm_shape, sum((flops.sequence_work(n) for n in prm_tokens), flops.Work()))


def arm_values(
    problem: ProblemSamples, k: int, shape: flops.ModelShape, prm_shape: flops.ModelShape
) -> dict[str, float]:
    """One problem's arms at ``k``: ``pass``, ``majority`` and ``prm`` (accuracy in [0, 1]),
    ``sample_flops`` (the k samples) and ``prm_flops`` (the PRM over them), in FLOPs per query."""
    n = len(problem.correct)
    parts = groups(n, k)
    pick = lambda seq, g: [seq[i] for i in g]  # noqa: E731
    return {
        "pass": float(pass_at_k_per_problem([sum(problem.correct)], n, k)[0]),
        "majority": float(
            np.mean([majority_vote(pick(problem.answers, g), pick(problem.correct, g)) for g in parts])
        ),
        "prm": float(
            np.mean([best_of(pick(problem.prm_scores, g), pick(problem.correct, g)) for g in parts])
        ),
        "sample_flops": float(
            np.mean(
                [
                    sampling_flops(shape, problem.prompt_tokens, pick(problem.completion_tokens, g))
                    for g in parts
                ]
            )
        ),
        "prm_flops": float(np.mean([scoring_flops(prm_shape, pick(problem.prm_tokens, g)) for g in parts])),
    }


def arm_flops(arm: str, sample_flops: float, prm_flops: float) -> float:
    """An arm's FLOPs per query: the samples, and for the PRM's best-of-k the PRM's reading too (the
    oracle's checker and the vote are free)."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; one of {ARMS}")
    return sample_flops + (prm_flops if arm == "prm" else 0.0)


def sample_policy(model, tokenizer, examples, grader, scorer, aggregation: str, config) -> list[dict]:
    """``config.n`` samples and one greedy answer of each example, scored: one dict a problem with a
    :class:`ProblemSamples` (``samples``), ``greedy_correct`` and ``greedy_tokens``.
    ``scorer``: the PRM (:class:`paper_repro.rewards.prm_scorer.PRMScorer`); ``aggregation``: how its
    step scores make one (the PRM reward's, ``min`` or ``mean``)."""
    from dataclasses import replace

    from paper_repro.evaluation.evaluate import sample_with_lengths
    from paper_repro.rewards.prm_scorer import aggregate

    prompts = [e.prompt for e in examples]
    rows = [{"answer": e.answer, **e.meta} for e in examples]
    texts, lengths = sample_with_lengths(model, tokenizer, prompts, config)
    greedy, greedy_lengths = sample_with_lengths(
        model, tokenizer, prompts, replace(config, n=1, temperature=0.0)
    )
    flat_prompts = [p for p, row in zip(prompts, texts, strict=True) for _ in row]
    steps = [grader.steps(c) for row in texts for c in row]
    scores = [aggregate(s, aggregation) for s in scorer.step_scores(flat_prompts, steps)]
    read = scorer.lengths(flat_prompts, steps)
    prompt_tokens = [len(ids) for ids in tokenizer(prompts, add_special_tokens=False)["input_ids"]]
    out, at = [], 0
    for i, row in enumerate(texts):
        n = len(row)
        samples = ProblemSamples(
            prompt_tokens=prompt_tokens[i],
            correct=[grader.is_correct(c, rows[i]) for c in row],
            answers=[grader.final_answer(c) for c in row],
            completion_tokens=lengths[i],
            prm_scores=scores[at : at + n],
            prm_tokens=read[at : at + n],
        )
        at += n
        out.append(
            {
                "samples": samples,
                "greedy_correct": bool(grader.is_correct(greedy[i][0], rows[i])),
                "greedy_tokens": greedy_lengths[i][0],
            }
        )
    return out


def problem_rows(sampled: Sequence[dict], shape: flops.ModelShape, prm_shape: flops.ModelShape) -> list[dict]:
    """One row a problem (``problem``: its index) of what the stage-E tables keep: ``n``, ``correct``
    (samples right), the greedy answer's verdict and FLOPs (``greedy``, ``greedy_flops``), and for each
    k of :func:`k_ladder` each arm's value and FLOPs (``pass@k``, ``majority@k``, ``prm@k``,
    ``sample_flops@k``, ``prm_flops@k``)."""
    out = []
    for i, s in enumerate(sampled):
        samples: ProblemSamples = s["samples"]
        n = len(samples.correct)
        row = {
            "problem": i,
            "n": n,
            "correct": int(sum(samples.correct)),
            "greedy": float(s["greedy_correct"]),
            "greedy_flops": sampling_flops(shape, samples.prompt_tokens, [s["greedy_tokens"]]),
        }
        for k in k_ladder(n):
            for name, value in arm_values(samples, k, shape, prm_shape).items():
                row[f"{name}@{k}"] = value
        out.append(row)
    return out
