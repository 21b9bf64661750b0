"""A run interrupted and resumed from its checkpoints is charged as if it had not stopped: the same
totals, the same steps, the same stop, and the budget held across every resume (the ledger's state
is saved with each checkpoint: ``paper_repro.ledger.resume``)."""

from __future__ import annotations

import contextlib
import json
import random

import pytest
from transformers import TrainerCallback

from paper_repro.ledger import LedgerConfig
from paper_repro.ledger.resume import STATE_NAME
from tests.test_ledger import build_tiny_grpo


class Interrupted(Exception):
    """Stands for the process being killed right after a checkpoint was written."""


class KillAfterSave(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise Interrupted(self.step)


# every optimizer step is one generation round (P = 2 prompts x G = 4), K = 2 kept at random (the
# down-sampling generator is part of the saved state), a checkpoint every step
SETTINGS = dict(steps_per_generation=1, save_strategy="steps", save_steps=1, max_steps=40)


def _run(tmp_path, budget: float | None, kill_at: int | None = None, resume: bool = False, **over):
    ledger = LedgerConfig(
        budget_flops=budget, kept=2, downsample="random", log_path=tmp_path / "ledger.jsonl", **over
    )
    trainer = build_tiny_grpo(tmp_path, ledger, **SETTINGS)
    if kill_at is not None:
        trainer.add_callback(KillAfterSave(kill_at))  # after the ledger's callback: its state is saved
    with contextlib.suppress(Interrupted):
        trainer.train(resume_from_checkpoint=True if resume else None)
    return trainer


def _comparable(summary: dict) -> dict:
    """A summary without what may differ between sessions: wall seconds and the resumes."""
    drop = {"seconds", "rho_time", "resumed_from"}
    return {k: v for k, v in summary.items() if k not in drop}


def _log(tmp_path) -> list[dict]:
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k != "seconds"} for x in lines]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The run without interruption, on a budget its fourth-to-ninth step passes."""
    probe = build_tiny_grpo(
        tmp_path_factory.mktemp("probe"), LedgerConfig(kept=2, downsample="random"),
        **{**SETTINGS, "save_strategy": "no", "max_steps": 6},
    )  # fmt: skip
    probe.train()
    budget = 0.9 * probe.ledger.total("useful")
    path = tmp_path_factory.mktemp("whole")
    trainer = _run(path, budget)
    summary = trainer.ledger.summary()
    assert summary["stopped_by_budget"] and 3 <= summary["steps"] <= 8
    return budget, summary, _log(path), trainer.state.total_flos


def test_a_run_resumed_at_random_steps_is_charged_as_the_uninterrupted_run(tmp_path, uninterrupted):
    budget, whole, whole_log, whole_flos = uninterrupted
    first, second = sorted(random.Random(41).sample(range(1, whole["steps"]), 2))
    _run(tmp_path, budget, kill_at=first)
    _run(tmp_path, budget, kill_at=second, resume=True)
    resumed = _run(tmp_path, budget, resume=True)
    summary = resumed.ledger.summary()
    assert _comparable(summary) == _comparable(whole)  # the same FLOPs, tokens, rounds, stop and reason
    assert not summary["over_budget"] and summary["useful"]["C_total"] <= budget
    assert _log(tmp_path) == whole_log  # the step log keeps the steps of every session
    assert resumed.state.total_flos == whole_flos == summary["useful"]["C_total"]
    assert [r["step"] for r in summary["resumed_from"]] == [first, second]
    assert summary["resumed_from"][-1]["checkpoint"].endswith(f"checkpoint-{second}")
    saved = json.loads((tmp_path / "ledger.summary.json").read_text())
    assert saved["resumed_from"] == summary["resumed_from"]


def test_a_run_resumed_where_its_budget_stopped_it_runs_no_step(tmp_path, uninterrupted, caplog):
    budget, whole, *_ = uninterrupted
    _run(tmp_path, budget)  # stops by its budget, a checkpoint at the stop
    with caplog.at_level("INFO", logger="paper_repro.ledger"):
        again = _run(tmp_path, budget, resume=True)
    assert again.ledger.summary()["useful"]["C_total"] == whole["useful"]["C_total"]
    assert len(again.ledger.steps) == whole["steps"]
    assert any("nothing left to run" in r.getMessage() for r in caplog.records)


def test_a_checkpoint_without_the_ledger_state_refuses_a_budget(tmp_path, uninterrupted):
    budget = uninterrupted[0]
    _run(tmp_path, budget, kill_at=2)
    path = tmp_path / "out" / "checkpoint-2" / "trainer_state.json"
    state = json.loads(path.read_text())
    del state["stateful_callbacks"]["_LedgerCallback"]  # the ledger's state travels in it
    path.write_text(json.dumps(state))
    assert not (path.parent / STATE_NAME).exists()  # nor beside it (older checkpoints)
    with pytest.raises(ValueError, match=r"holds no FLOP ledger state .* the budget could not be kept"):
        _run(tmp_path, budget, resume=True)


def _callback_run(tmp_path, budget: float, kill_at: int | None = None, resume: bool = False):
    """TRL's own GRPOTrainer with the ledger as a callback, one round per optimizer step, a checkpoint
    every step."""
    from paper_repro.ledger import FlopLedgerCallback
    from tests.test_ledger_callback import build

    callback = FlopLedgerCallback(LedgerConfig(budget_flops=budget, round_ceiling_flops=budget / 3))
    trainer = build(
        tmp_path, "grpo", "qwen2", True, callback, steps_per_generation=1, save_strategy="steps",
        save_steps=1, max_steps=40,
    )  # fmt: skip
    if kill_at is not None:
        trainer.add_callback(KillAfterSave(kill_at))
    try:
        trainer.train(resume_from_checkpoint=True if resume else None)
    except Interrupted:
        # a killed process loses the callback's hooks with it; here the process goes on, and hooks left
        # behind would charge (and measure) every model later tests run (a gemma2 pass then counted twice)
        callback._remove_hooks()
    return callback.ledger.summary()


def test_the_callback_resumes_as_the_uninterrupted_run(tmp_path_factory):
    whole = _callback_run(tmp_path_factory.mktemp("whole"), 2e8)
    assert whole["stopped_by_budget"] and whole["steps"] >= 3
    path = tmp_path_factory.mktemp("killed")
    kill_at = random.Random(7).randrange(1, whole["steps"])
    _callback_run(path, 2e8, kill_at=kill_at)
    resumed = _callback_run(path, 2e8, resume=True)
    assert _comparable(resumed) == _comparable(whole)
    assert [r["step"] for r in resumed["resumed_from"]] == [kill_at]
