"""Side-by-side reward systems on one fixed set of completions.

``paper-repro reward-comparison`` samples one
completion (temperature 1.0, fixed seed) for each of the first ``n`` held-out arith prompts from a
base policy, scores them with every reward system and the common judge, and writes per system: the
mean reward, its Pearson and Spearman correlation with the judge, and the FLOPs the ledger charges
per completion (``flop_cost``, useful and executed conventions). Output: :data:`OUT`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# from the repository's root: the base policy and PRM compared by default, and where the table goes
POLICY = Path("data/models/policy-M")
PRM = Path("data/models/prm")
OUT = Path("data/results/cpu-tiny/reward_systems.csv")


def compare(policy: str | Path, prm: str | Path, n: int = 200, seed: int = 0, aggregation: str = "min"):
    """The comparison table (a DataFrame, one row per reward system)."""
    import pandas as pd
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paper_repro import rewards
    from paper_repro.common import provenance
    from paper_repro.common.paths import repo_relative
    from paper_repro.evaluation import evaluate, judge
    from paper_repro.rewards.prm_scorer import PRMScorer
    from paper_repro.tasks import arith

    examples = arith.load_split("heldout")[:n]
    model = AutoModelForCausalLM.from_pretrained(policy)
    tokenizer = AutoTokenizer.from_pretrained(policy)
    prompts = [e.prompt for e in examples]
    config = evaluate.SampleConfig(n=1, temperature=1.0, seed=seed)
    completions = [row[0] for row in evaluate.sample(model, tokenizer, prompts, config)]
    columns = {key: [e.to_record()[key] for e in examples] for key in ("answer", "start", "ops")}
    scorer = PRMScorer.load(prm)
    judged = np.array(
        judge.StepVerifierJudge().score(prompts, completions, [e.to_record() for e in examples])
    )
    rows = []
    for name in rewards.REWARD_SYSTEMS:
        fn = rewards.build_reward(name, "arith", prm=scorer, aggregation=aggregation)
        values = np.array(fn(prompts=prompts, completions=completions, **columns))
        cost = fn.flop_cost(prompts=prompts, completions=completions)
        rows.append(
            {
                "reward_system": name,
                "mean": values.mean(),
                "std": values.std(),
                "pearson_vs_judge": _corr(values, judged),
                "spearman_vs_judge": _corr(_ranks(values), _ranks(judged)),
                "flops_per_completion_useful": cost["useful"] / len(completions),
                "flops_per_completion_executed": cost["executed"] / len(completions),
            }
        )
    table = pd.DataFrame(rows)
    table["judge_mean"] = judged.mean()
    table["n_completions"] = len(completions)
    table["policy"] = repo_relative(policy)
    table["prm"] = repo_relative(prm)
    table["aggregation"] = aggregation
    table["seed"] = seed
    for key, value in provenance.stamp().items():
        table[key] = value
    return table


def _ranks(x: np.ndarray) -> np.ndarray:
    import pandas as pd

    return pd.Series(x).rank(method="average").to_numpy()


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation; NaN when either side is constant (no correlation is defined)."""
    if a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def write(table, out: str | Path) -> Path:
    """Write :func:`compare`'s table to ``out`` atomically (a temporary file replaced); returns ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".csv.tmp")
    table.to_csv(tmp, index=False)
    tmp.replace(out)
    return out


def words(table) -> str:
    """:func:`compare`'s table as printed: per reward system its mean, correlations with the judge and
    FLOPs per completion, then the judge's mean."""
    cols = ["reward_system", "mean", "pearson_vs_judge", "spearman_vs_judge", "flops_per_completion_useful"]
    n = len(table) and table["n_completions"].iloc[0]
    return f"{table[cols].to_string(index=False)}\njudge mean {table['judge_mean'].iloc[0]:.3f} over {n} completions"


# an alias of `paper-repro reward-comparison` (paper_repro/commands/reward_comparison.py)
