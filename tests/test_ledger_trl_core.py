"""The ledger's pull-request-sized core, :class:`paper_repro.ledger.trl_core.FlopLedgerCoreCallback`, on
TRL's own trainers, in TRL's test style and on the grid of ``tests/test_ledger_trl_style.py`` (whose tiny
models and trainer builder it reuses): ``GRPOTrainer`` / ``RLOOTrainer`` x LoRA / full x activation
checkpointing (off, non-reentrant, reentrant), and the run shapes beyond it. Each case asserts that the
core's executed FLOPs are ``FlopCounterMode``'s (with ``addmm_``) to 1e-6, and that the core and the full
``FlopLedgerCallback`` agree. Also: the core imports nothing of the project beyond itself, its budget
stop, its ``ExportableState`` resume and its metrics.

``python -m tests.test_ledger_trl_core`` prints the core/profiler ratio of every case."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from paper_repro.ledger.trl_core import BudgetSpentError, FlopLedgerCoreCallback
from tests.test_ledger_trl_style import (
    CHECKPOINTING,
    REL,
    RUN_SHAPES,
    assert_one_round_counted,
    executed,
    make_trainer,
    ratio_table,
    run_shape_kwargs,
    train_under_profiler,
)

# Every project module importing the core may load: itself and the FLOP model it prices with.
CORE_CLOSURE = {
    "paper_repro",
    "paper_repro.common",
    "paper_repro.common.lazy",  # paper_repro.ledger's lazy surface (PEP 562)
    "paper_repro.ledger",
    "paper_repro.ledger.trl_core",
    "paper_repro.ledger.trl_core_read",
    "paper_repro.ledger.trl_core_watch",
    "paper_repro.accounting",  # the FLOP model the core prices with (stdlib only)
    "paper_repro.accounting.flops",
    "paper_repro.accounting.flop_work",
}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("trainer", ["GRPO", "RLOO"])
@pytest.mark.parametrize("lora", [True, False], ids=["lora", "full"])
@pytest.mark.parametrize("checkpointing", list(CHECKPOINTING))
def test_core_executed_flops_are_the_profilers(tmp_path, trainer, lora, checkpointing):
    built, callback = make_trainer(tmp_path, trainer, lora, checkpointing, callback=FlopLedgerCoreCallback())
    measured = train_under_profiler(built)
    summary = callback.ledger.summary()
    assert executed(callback) == pytest.approx(measured, rel=REL)
    assert_one_round_counted(summary, built, lora)


@pytest.mark.parametrize("shape", list(RUN_SHAPES))
def test_core_run_shapes(tmp_path, shape):
    trainer, lora, model, kwargs = RUN_SHAPES[shape]
    core = FlopLedgerCoreCallback()
    built, _ = make_trainer(tmp_path, trainer, lora, model=model, callback=core, **run_shape_kwargs(kwargs))
    measured = train_under_profiler(built)
    summary = core.ledger.summary()
    assert executed(core) == pytest.approx(measured, rel=REL)
    assert (summary["executed"]["C_reward"] > 0) == (kwargs.get("reward_funcs") == "model")
    if kwargs.get("beta"):
        assert summary["learning_parts"]["executed"]["ref"] > 0


def test_core_and_full_callback_count_the_same(tmp_path):
    """Both forms on one trainer: every component, both conventions, equal (one price and one set of
    hooks, two ledgers)."""
    from paper_repro.ledger import FlopLedgerCallback, LedgerConfig

    core, full = FlopLedgerCoreCallback(), FlopLedgerCallback(LedgerConfig())
    built, _ = make_trainer(tmp_path, "GRPO", True, "non-reentrant", callback=full)
    core.attach(built)
    built.train()
    ours, theirs = core.ledger.summary(), full.ledger.summary()
    for convention in ("useful", "executed"):
        for key in ("C_search", "C_learning", "C_reward"):
            assert ours[convention][key] == pytest.approx(theirs[convention][key], rel=1e-12)
        assert ours["learning_parts"][convention] == pytest.approx(theirs["learning_parts"][convention])


def test_importing_the_core_loads_no_other_project_module():
    code = (
        "import sys, logging; before = len(logging.getLogger().handlers);"
        "import paper_repro.ledger.trl_core;"
        "mods = sorted(m for m in sys.modules if m.startswith('paper_repro'));"
        "print(','.join(mods)); print('trl' in sys.modules, len(logging.getLogger().handlers) - before)"
    )
    root = str(Path(__file__).resolve().parents[1])  # this checkout's paper_repro, not an installed one
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root, env=env
    ).stdout
    modules, rest = out.strip().splitlines()
    assert set(modules.split(",")) <= CORE_CLOSURE
    assert rest == "False 0"  # no TRL, no log handler


def closure_code_lines() -> dict[str, int]:
    """Code lines (lines holding code: no blank line, comment or docstring) of each module importing
    the core loads, by file."""
    import ast
    import importlib
    import io
    import tokenize

    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    sizes = {}
    for name in sorted(CORE_CLOSURE):
        path = Path(importlib.import_module(name).__file__)
        source = path.read_text()
        docs = set()
        for node in ast.walk(ast.parse(source)):
            body = getattr(node, "body", None)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
                first = body[0]
                if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
                    docs.update(range(first.lineno, first.end_lineno + 1))
        lines = set()
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type not in skip and token.type != tokenize.ENDMARKER:
                lines.update(n for n in range(token.start[0], token.end[0] + 1) if n not in docs)
        sizes[str(path.relative_to(Path(__file__).resolve().parents[1]))] = len(lines)
    return sizes


def test_the_core_is_pull_request_sized():
    """The core's whole import closure within ~1,300 code lines, as the issue that asked for it set."""
    sizes = closure_code_lines()
    assert 0 < sum(sizes.values()) <= 1300, sizes


def test_budget_stops_before_a_round_and_a_spent_resume_is_refused(tmp_path):
    """One round per 2 steps: a budget of 2.5 rounds stops after round 2 (step 4) without passing it;
    resumed from that step's checkpoint (another output_dir), the core refuses to run."""
    probe = FlopLedgerCoreCallback()
    built, _ = make_trainer(tmp_path / "probe", "GRPO", True, callback=probe)
    built.train()
    round_cost = probe.ledger.rounds[0]
    budget = 2.5 * round_cost
    core = FlopLedgerCoreCallback(budget_flops=budget, round_ceiling_flops=1.2 * round_cost)
    built, _ = make_trainer(
        tmp_path / "a", "GRPO", True, callback=core, max_steps=10, save_strategy="steps", save_steps=2
    )
    built.train()
    assert core.ledger.total() <= budget and core.ledger.stop_reason
    assert built.state.global_step == 4 and built.state.total_flos == pytest.approx(core.ledger.total())
    checkpoint = tmp_path / "a" / "out" / "checkpoint-4"
    again = FlopLedgerCoreCallback(budget_flops=budget, round_ceiling_flops=1.2 * round_cost)
    resumed, _ = make_trainer(tmp_path / "b", "GRPO", True, callback=again, max_steps=10)
    with pytest.raises(BudgetSpentError, match="raise budget_flops"):
        resumed.train(resume_from_checkpoint=str(checkpoint))


def test_resume_restores_the_checkpoints_state_and_metrics_reach_the_logs(tmp_path):
    """Killed at step 2 (a round boundary) and resumed from another output_dir: the totals equal the
    uninterrupted run's, read from trainer_state.json's stateful_callbacks; the logs carry flops/*."""
    whole = FlopLedgerCoreCallback()
    built, _ = make_trainer(tmp_path / "whole", "GRPO", True, callback=whole, max_steps=4)
    built.train()
    first = FlopLedgerCoreCallback()
    built, _ = make_trainer(
        tmp_path / "a", "GRPO", True, callback=first, max_steps=2, save_strategy="steps", save_steps=2
    )
    built.train()
    second = FlopLedgerCoreCallback()
    resumed, _ = make_trainer(tmp_path / "b", "GRPO", True, callback=second, max_steps=4)
    resumed.train(resume_from_checkpoint=str(tmp_path / "a" / "out" / "checkpoint-2"))
    assert second.ledger.resumed_from == [2] and second.run_id == first.run_id
    for convention in ("useful", "executed"):
        assert second.ledger.total(convention) == pytest.approx(whole.ledger.total(convention), rel=1e-9)
    logged = [entry for entry in resumed.state.log_history if "flops/total" in entry]
    assert logged and logged[-1]["flops/total"] == pytest.approx(second.ledger.total())


if __name__ == "__main__":
    import tempfile

    if "--size" in sys.argv:
        sizes = closure_code_lines()
        print("| module | code lines |\n|---|--:|")
        print("\n".join(f"| `{path}` | {n} |" for path, n in sizes.items()))
        print(f"| the core's import closure | {sum(sizes.values())} |")
        raise SystemExit(0)

    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        print("| case | core executed | FlopCounterMode | core / profiler |\n|---|--:|--:|--:|")
        for case, ours, measured in ratio_table(Path(tmp), FlopLedgerCoreCallback):
            print(f"| {case} | {ours:,.0f} | {measured:,.0f} | {ours / measured:.9f} |")
