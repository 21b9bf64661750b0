"""How good a built base policy is: pass@1 and pass@k on the downstream splits and the common
judge's process score of its greedy solutions (a row of ``base_models.csv``)."""

from __future__ import annotations

from paper_repro.tasks import arith


def evaluate_base(
    model, tokenizer, pass_k: int = 8, limit: int | None = None, seed: int = 0, tasks_dir=None
) -> dict:
    """Greedy pass@1 and pass@k (temperature 1.0) on gsm_tiny and math_tiny, and the common judge's
    process score of the greedy gsm_tiny solutions (share of steps right, in [0, 1])."""
    import numpy as np

    from paper_repro.evaluation import evaluate
    from paper_repro.evaluation.judge import StepVerifierJudge

    out: dict[str, float] = {}
    for split, prefix in (("gsm_tiny", "gsm"), ("math_tiny", "math")):
        examples = arith.load_split(split, tasks_dir)[
            : arith.SPLITS[split].first_size if limit is None else limit
        ]
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
