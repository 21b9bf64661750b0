"""Budgeted GRPO runs: one IsoFLOP cell -> one result row.

:func:`run_cell` takes a :class:`RunSpec` (stage, setting, cell, seed, budget, and everything the
run computes with), and:

1. checks the spec before any compute (model, PRM and data present, reward known, K <= G, the
   budget buys at least one round);
2. loads the base policy, attaches a LoRA adapter (PEFT) and trains it with the ledger-wrapped TRL
   ``GRPOTrainer`` (:class:`paper_repro.ledger.LedgerGRPOTrainer`) until the FLOP budget is spent:
   the ledger stops before the round that would pass it, so C_total lands within one round of the
   budget and never above it;
3. evaluates the adapted policy (greedy): native reward on held-out training prompts, pass@1 on the
   two downstream sets, the common judge on the gsm completions; and the base policy the same way
   (cached per base model, reward system and evaluation set in ``base_metrics.csv``);
4. appends one row to ``data/results/<profile>/runs.csv`` (:mod:`paper_repro.common.results`) and writes the
   per-step ledger log to ``steps/<run_id>.jsonl`` beside it, with the run's compute card
   (``steps/<run_id>.card.json`` and ``.card.md``, :func:`paper_repro.ledger.card.compute_card`).

A run that raises after the checks is recorded as ``status=failed`` with its error and NaN metrics.

The pieces live one to a module: the spec and its ``run_id`` (:mod:`paper_repro.run.spec`), weight
fingerprints (:mod:`paper_repro.run.weights`), the checks before compute (:mod:`paper_repro.run.preflight`),
the batch layout and multi-GPU launch (:mod:`paper_repro.run.launch`), trainer assembly
(:mod:`paper_repro.run.trainer`) and a run's evaluation (:mod:`paper_repro.run.run_eval`, on :mod:`paper_repro.evaluation.evaluate`).

How this GRPO differs from the paper's (as far as the summary lets us know): LoRA on every linear
layer of a small policy, TRL's ``dapo`` loss (its default), no KL (beta = 0), a constant learning
rate, and K < G by PODS max-variance down-sampling to reach low update fractions.
"""

from __future__ import annotations

import json
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from paper_repro.common import provenance
from paper_repro.common.console import listened, report
from paper_repro.common.results import METRICS, RUN_COLUMNS, ResultTable, results_dir, row_identity
from paper_repro.run import launch
from paper_repro.run.history import full_budget_of
from paper_repro.run.ladder import budget_ladder, curves_table, final_row, missing_points
from paper_repro.run.preflight import check_spec
from paper_repro.run.run_eval import base_metrics, evaluate_run
from paper_repro.run.spec import RunSpec, own_model
from paper_repro.run.study_design import check_committed
from paper_repro.run.trainer import build_trainer, load_parts
from paper_repro.run.weights import sources as _sources


def sources(spec: RunSpec) -> dict[str, str]:
    """What the run's models (policy, PRM, a reward's own model) and datasets resolved to
    (:func:`paper_repro.run.weights.sources`): the fact its row records."""
    return _sources((spec.model, spec.prm, own_model(spec.reward_system)), [ref for _, ref in spec.data])


def run_cell(
    spec: RunSpec,
    results_root: str | Path | None = None,
    executed_notebook: str = "",
    threads: int | None = None,
    raise_errors: bool = False,
    pending: bool = False,
) -> dict[str, Any]:
    """Run ``spec`` unless an ``ok`` row with its run_id exists (with the rows of its ladder's points,
    :mod:`paper_repro.run.ladder`); return the row (the existing one, with ``skipped=True``, when it
    does). A run whose row exists but some of whose points do not is run again for them; its row is
    not written twice. ``threads`` sets torch's CPU threads (a run-time choice,
    not part of the spec). A failed attempt is kept as a ``failed`` row and retried by a rerun.
    ``pending``: the caller (:func:`paper_repro.run.runner.run_specs`) has read the tables, found the run
    unfinished and checked the spec, so neither is done again."""
    root = results_dir(spec.profile, results_root)
    table = ResultTable(root / "runs.csv", RUN_COLUMNS, full_budget=full_budget_of)
    if not pending:
        for row in table.rows():
            if row["run_id"] == spec.run_id and row["status"] == "ok":
                if not missing_points(spec, curves_table(root).keys()):
                    return {**row, "skipped": True}
                break  # run again to measure the points of its curve it lacks; its row stays the one
        check_committed([spec], results_root)
        check_spec(spec)
    if launch.needs_launch(spec):
        return _launched(spec, root, executed_notebook, raise_errors)
    started = time.perf_counter()
    row = _identity(spec, executed_notebook)
    try:
        result = _train_and_evaluate(spec, root, threads)
        if result is None:  # a non-main process of a multi-GPU run: rank 0 records the row
            return {"run_id": spec.run_id, "status": "worker"}
        row.update(result)
        row["status"] = "ok"
    except Exception as err:
        if raise_errors or not launch.is_main_process():  # one row per run: the main process records it
            raise
        row.update({m: float("nan") for m in METRICS})
        row["status"] = "failed"
        row["error"] = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=3)}"[-2000:]
    row["seconds_total"] = time.perf_counter() - started
    table.append(row)
    return row


def launch_run(spec: RunSpec, root: Path, executed_notebook: str) -> tuple[int, str]:
    """Run a multi-GPU spec as ``accelerate launch`` of :mod:`paper_repro.run.worker`, whose main process
    appends the run's row to ``root/runs.csv``; returns the launcher's exit code and command line.
    The base metrics are computed here first, on one GPU, so the workers find them cached (an
    evaluation on rank 0 alone would stall the other ranks' collectives)."""
    import subprocess
    import sys

    import torch

    from paper_repro import models

    layout = launch.batch_layout(spec.P, spec.G, spec.K, spec.runtime.gpus, spec.runtime.micro_batch)
    available = torch.cuda.device_count()
    if available < layout.processes:
        raise ValueError(
            f"run {spec.run_id} ({spec.setting} {spec.cell}) needs {layout.processes} GPUs; "
            f"{available} visible. Set resources[{spec.policy}].gpus in the profile to what you have."
        )
    parts = load_parts(spec)
    base_metrics(spec, parts, root)
    del parts
    torch.cuda.empty_cache()
    spec_file = root / "launch" / f"{spec.run_id}.json"
    spec_file.parent.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(spec.to_json())
    config = models.local(spec.runtime.accelerate_config)
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", config]
    cmd += ["--num_processes", str(layout.processes), "-m", "paper_repro.run.worker", str(spec_file)]
    cmd += ["--results", str(root), "--executed", executed_notebook]
    completed = subprocess.run(cmd, check=False)
    return completed.returncode, " ".join(cmd)


def _launched(spec: RunSpec, root: Path, executed_notebook: str, raise_errors: bool) -> dict[str, Any]:
    """A multi-GPU run through ``accelerate launch``: the row its main process appended, or a
    ``failed`` row when the launch died before writing one."""
    code, cmd = launch_run(spec, root, executed_notebook)
    table = ResultTable(root / "runs.csv", RUN_COLUMNS, full_budget=full_budget_of)
    rows = [r for r in table.rows() if r["run_id"] == spec.run_id]
    if rows and rows[-1]["status"] == "ok":
        return rows[-1]
    if raise_errors:
        raise RuntimeError(f"accelerate launch of run {spec.run_id} exited {code}")
    if rows:  # the workers recorded their failure
        return rows[-1]
    row = _identity(spec, executed_notebook)
    row.update({m: float("nan") for m in METRICS})
    row.update(status="failed", error=f"accelerate launch exited {code}: {cmd}")
    table.append(row)
    return row


def _identity(spec: RunSpec, executed_notebook: str) -> dict[str, Any]:
    """The row's identity and provenance; ``versions`` records, besides the packages, the commit
    (or local fingerprint) each of the run's models and datasets resolved to (key ``sources``)."""
    stamp = provenance.stamp(sources(spec))
    return {
        **row_identity(spec),
        "flops_convention": "useful",
        "git_sha": stamp["git_sha"],
        "git_dirty": stamp["git_dirty"],
        "versions": stamp["versions"],
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "executed_notebook": executed_notebook,
        "spec": json.dumps(spec.canonical(), sort_keys=True, default=str),
        "error": "",
    }


def _train_and_evaluate(spec: RunSpec, root: Path, threads: int | None) -> dict[str, Any] | None:
    import torch
    from transformers import set_seed

    if threads:
        torch.set_num_threads(threads)
    set_seed(spec.seed)
    report("loading")
    parts = load_parts(spec)
    # in a multi-GPU run the launcher has cached them; only the main process reads them
    report("evaluating the base policy (once per base model)")
    base = base_metrics(spec, parts, root) if launch.is_main_process() else None
    trainer = build_trainer(spec, parts, root / "steps" / f"{spec.run_id}.jsonl")
    steps = budget_ladder(trainer, spec, parts, root) if spec.ladder else None
    if steps is not None:
        trainer.add_callback(steps)  # after the ledger's, whose price of the next step it reads
    if listened():  # the console shows the run's progress (paper_repro.common.console)
        trainer.add_callback(_budget_spent(trainer, spec))
    report("training")
    t0 = time.perf_counter()
    trainer.train()
    # the ladder's evaluations along the way are in curves.csv, not in the run's training time
    seconds_train = time.perf_counter() - t0 - (steps.seconds if steps else 0.0)
    if not trainer.accelerator.is_main_process:
        return None
    summary = trainer.ledger.summary()
    policy = trainer.model.merge_and_unload()
    report("evaluating")
    t0 = time.perf_counter()
    metrics = evaluate_run(spec, parts, policy)
    seconds_eval = time.perf_counter() - t0
    useful, executed, secs = summary["useful"], summary["executed"], summary["seconds"]
    row = {
        **metrics,
        **{f"base_{k}": base[k] for k in METRICS},
        "rho": useful["rho"],
        "C_search": useful["C_search"],
        "C_learning": useful["C_learning"],
        "C_reward": useful["C_reward"],
        "C_total": useful["C_total"],
        "rho_executed": executed["rho"],
        "C_total_executed": executed["C_total"],
        "rho_time": summary["rho_time"],
        "rounds": summary["rounds"],
        "steps": summary["steps"],
        "seconds_search": secs["search"],
        "seconds_learning": secs["learning"],
        "seconds_reward": secs["reward"],
        "seconds_train": seconds_train,
        "seconds_eval": seconds_eval,
    }
    if steps is not None:  # the ladder's last point: the run's own budget
        curves_table(root).append(final_row(spec, row, seconds_train, seconds_eval))
    return row


def _budget_spent(trainer, spec: RunSpec):
    """A trainer callback that reports after each optimizer step the share of its budget the run has
    spent (:func:`paper_repro.common.console.report`); it reads the ledger and changes nothing."""
    from transformers import TrainerCallback

    class BudgetSpent(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            report(
                "training", f"{trainer.ledger.total('useful') / spec.budget_flops:.0%} of its budget spent"
            )

    return BudgetSpent()
