"""A run's evaluation: its policy greedy-decoded on the held-out, gsm and math sets once, with the
run's own reward, judge and prompts (:func:`evaluate_run`, on :func:`paper_repro.evaluation.evaluate.evaluate_policy`);
and its base policy's metrics (:func:`base_metrics`), computed once per (model, reward, evaluation
sets) and cached in ``base_metrics.csv``. The run (:mod:`paper_repro.run.train`), its budget ladder
(:mod:`paper_repro.run.ladder`) and the benchmarks call these.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paper_repro.common.results import METRICS
from paper_repro.evaluation.evaluate import SampleConfig, evaluate_policy

if TYPE_CHECKING:
    from paper_repro.run.spec import RunSpec
    from paper_repro.run.trainer import RunParts

BASE_COLUMNS = ("base_id", "model", "reward_system", *METRICS, "seconds", "git_sha", "versions", "created_at")
# What the base policy's metrics depend on: its weights, the reward, the judge and the sets.
BASE_KEY = (
    "model",
    "reward_system",
    "prm",
    "task",
    "data",
    "eval_limit",
    "eval_max_new_tokens",
    "judge",
    "weights",
    "eval_heldout_limit",
    "eval_decoding",
)


def evaluate_run(spec: RunSpec, parts: RunParts, model) -> dict[str, float]:
    """:func:`evaluate_policy` of ``model`` on ``spec``'s sets, with its reward, judge and prompts."""
    from paper_repro.tasks.hub import format_prompt

    render = (lambda e: format_prompt(parts.tokenizer, e)) if spec.train.chat_template else None
    config = SampleConfig(
        max_new_tokens=spec.eval_max_new_tokens,
        batch_size=spec.eval_batch_size,
        seed=spec.seed,
        sampler=spec.decoder("evaluation"),
    )
    return evaluate_policy(
        model,
        parts.tokenizer,
        parts.eval_sets,
        parts.reward,
        parts.judge,
        parts.grader,
        config,
        render=render,
    )


def base_metrics(spec: RunSpec, parts: RunParts, root: Path) -> dict[str, Any]:
    """The base policy's metrics under this run's reward and evaluation sets (computed once, then
    read from ``root/base_metrics.csv``)."""
    from paper_repro.common import provenance
    from paper_repro.common.results import ResultTable

    key = {k: v for k, v in spec.canonical().items() if k in BASE_KEY}
    base_id = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    table = ResultTable(root / "base_metrics.csv", BASE_COLUMNS, key="base_id")
    for row in table.rows():
        if row["base_id"] == base_id:
            return {k: float(row[k]) for k in METRICS}
    t0 = time.perf_counter()
    metrics = evaluate_run(replace(spec, seed=0), parts, parts.model)
    stamp = provenance.stamp()
    table.append(
        {
            "base_id": base_id,
            "model": spec.policy,
            "reward_system": spec.reward_system,
            **metrics,
            "seconds": time.perf_counter() - t0,
            "git_sha": stamp["git_sha"],
            "versions": stamp["versions"],
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
    )
    return metrics
