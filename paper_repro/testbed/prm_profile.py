"""Where the built PRM errs: its step AUROC on the ``prm`` split, by slip kind, and on the solutions
the base policies sample (``prm_error_profile.csv``), and its row of ``base_models.csv``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from paper_repro.tasks import arith
from paper_repro.testbed.specs import POLICIES, policy_dir

if TYPE_CHECKING:
    import pandas as pd

    from paper_repro.testbed.specs import BuildConfig


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


def policy_samples(
    policy_dir: str | Path,
    prompts_split: str = "heldout",
    n: int = PRM_POLICY_SAMPLES,
    seed: int = 0,
    tasks_dir=None,
    limit: int | None = None,
) -> list[dict]:
    """Step-labelled solutions the base policy at ``policy_dir`` samples (temperature 1) on a split's
    prompts: what the PRM scores during RL. Solutions without steps (shortcut answers) carry none."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paper_repro.evaluation import evaluate

    cut = arith.SPLITS[prompts_split].first_size if limit is None else limit  # None: as first shipped
    examples = arith.load_split(prompts_split, tasks_dir)[:cut]
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
    for size in config.sizes or [s for s in POLICIES if (policy_dir(s, root) / "config.json").exists()]:
        records = policy_samples(
            policy_dir(size, root), seed=config.seed, tasks_dir=config.tasks_dir, limit=config.eval_limit
        )
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
