"""Every ``LedgerConfig`` field is honoured by ``FlopLedgerCallback`` or refused when it is built, with
why (``paper_repro.ledger.callback_fields``, the table in docs/ledger.md); the subclass resumed after
its budget is spent ends as a run does; and the ledger's errors name their cause."""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from paper_repro.ledger import BudgetWarning, FlopLedgerCallback, LedgerConfig, as_conventions
from paper_repro.ledger import compat as compat_module
from paper_repro.ledger.callback_fields import CALLBACK_HONOURS, CALLBACK_REFUSES
from tests.test_ledger import build_tiny_grpo
from tests.test_ledger_callback import build, length_reward
from tests.test_ledger_streaming import Stream
from tests.test_ledger_trl_style import one_thread  # noqa: F401 (one torch thread while the module runs)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "ledger.md"


# --- every field: honoured or refused ----------------------------------------------------------


def test_every_field_is_honoured_or_refused_by_the_callback_and_the_docs_say_which():
    names = {f.name for f in fields(LedgerConfig)}
    assert set(CALLBACK_HONOURS) | set(CALLBACK_REFUSES) == names
    # docs/ledger.md's table: one row a field, the callback's column saying honoured or refused
    table = DOCS.read_text().split("<!-- table: fields by form -->")[1].split("\n\n")[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| [^|]+ \| ([^|]+) \|", table, flags=re.M))
    assert set(rows) == names
    for name, cell in rows.items():
        if name not in CALLBACK_REFUSES:
            assert cell.strip().startswith("honoured"), name
        elif name not in CALLBACK_HONOURS:
            assert cell.strip().startswith("refused"), name
        else:
            assert "honoured" in cell and "refused" in cell, name


@pytest.mark.parametrize(
    "name, value, why",
    [
        ("kept", 2, "LedgerGRPOTrainer for K-of-G"),
        ("downsample", "random", "do not expose the generation batch"),
        ("downsample_seed", 3, "seeds random K-of-G"),
        ("selection_decimals", 4, "rounds the rewards"),
        ("prefix_cache", True, "prefills every row's prompt"),
    ],
)
def test_a_field_the_callback_cannot_honour_is_refused_naming_it_and_why(name, value, why):
    with pytest.raises(ValueError, match=rf"LedgerConfig\.{name}={value!r}: .*{why}"):
        FlopLedgerCallback(LedgerConfig(**{name: value}))


def test_prefix_cache_off_is_what_the_callback_counts():
    for value in (None, False):
        FlopLedgerCallback(LedgerConfig(prefix_cache=value))  # no refusal: HF generate prefills every row


def test_an_untested_trl_is_refused_unless_opted_in(monkeypatch):
    monkeypatch.setattr(compat_module, "trl_version", lambda: "1.17.0")
    monkeypatch.delenv(compat_module.ALLOW_UNTESTED_TRL_ENV, raising=False)
    with pytest.raises(RuntimeError, match=r"trl 1\.17\.0.*allow_untested_trl=True"):
        FlopLedgerCallback(LedgerConfig())
    with pytest.warns(UserWarning, match=r"tested with TRL 1\.13 to 1\.16, not trl 1\.17\.0"):
        FlopLedgerCallback(LedgerConfig(allow_untested_trl=True))
    monkeypatch.setattr(compat_module, "trl_version", lambda: "1.13.2")
    FlopLedgerCallback(LedgerConfig())  # the oldest tested series


# --- max_prompt_tokens: a stream whose prompts grow -----------------------------------------------


def _stream_run(tmp_path, config: LedgerConfig, max_steps: int = 12):
    """TRL's GRPOTrainer with the callback on :class:`Stream` (short prompts for two rounds, then long
    ones), one round every two optimizer steps, the stream read in order."""
    from trl import GRPOTrainer

    callback = FlopLedgerCallback(config)

    def on_stream(**kwargs):
        return GRPOTrainer(**{**kwargs, "train_dataset": Stream().dataset()})

    trainer = build(
        tmp_path, "grpo", "qwen2", True, callback, trainer_cls=on_stream, max_steps=max_steps,
        shuffle_dataset=False,
    )  # fmt: skip
    trainer.train()
    return callback, trainer


def _longest_stream_prompt() -> int:
    from paper_repro.testbed import build_tokenizer

    tokenizer = build_tokenizer()
    rows = Stream(rows=64).dataset()
    return max(len(tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]) for row in rows)


def test_a_declared_prompt_length_keeps_the_budget_on_a_stream_whose_prompts_grow(tmp_path):
    """A budget that the third round (the first of long prompts) passes when the next round is priced as
    the dearest so far (what the callback did with max_prompt_tokens ignored); priced from the declared
    length, the round's ceiling stops the run before it."""
    free, _ = _stream_run(tmp_path / "free", LedgerConfig(), max_steps=6)
    first, second, grown = free.ledger.rounds
    assert grown > 2 * max(first, second)  # the third round's prompts are the long ones
    budget = first + second + 0.6 * grown
    with pytest.warns(BudgetWarning, match="dearest so far"):
        blind, _ = _stream_run(tmp_path / "blind", LedgerConfig(budget_flops=budget))
    assert blind.ledger.summary()["over_budget"]  # the dearest round so far was a short one: it passes
    declared = LedgerConfig(budget_flops=budget, max_prompt_tokens=_longest_stream_prompt() + 2)
    kept, trainer = _stream_run(tmp_path / "declared", declared)
    s = kept.ledger.summary()
    assert s["stopped_by_budget"] and not s["over_budget"] and s["useful"]["C_total"] <= budget
    assert kept.round_price["prompt_tokens"] == declared.max_prompt_tokens
    assert grown <= kept.round_price["C_total"] <= budget  # a bound on the long round, within the budget
    assert (
        kept.ledger.prompt_length_source
        == f"LedgerConfig.max_prompt_tokens ({declared.max_prompt_tokens} tokens)"
    )
    assert trainer.state.global_step < 12


def test_a_declared_prompt_length_refuses_a_budget_below_one_round_and_warns_when_outgrown(tmp_path):
    with pytest.raises(ValueError, match=r"does not surely buy one generation round.*max_prompt_tokens"):
        _stream_run(tmp_path / "a", LedgerConfig(budget_flops=1e6, max_prompt_tokens=64))
    with pytest.warns(BudgetWarning, match=r"longer than the round's ceiling was priced with \(LedgerConfig"):
        callback, _ = _stream_run(tmp_path / "b", LedgerConfig(budget_flops=1e12, max_prompt_tokens=3), 6)
    assert callback.round_price["prompt_tokens"] > 3
    assert callback.ledger.prompt_length_source.startswith("the longest prompt seen so far")


# --- card_path, write_card, peak_flops --------------------------------------------------------------


def _strict(path: Path) -> dict:
    def refuse(constant):
        raise ValueError(f"{path} holds {constant}")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.mark.parametrize("kind", ["grpo", "rloo"])
def test_the_callback_writes_the_compute_card_with_mfu_against_the_given_peak(tmp_path, kind):
    stem = tmp_path / "cards" / "run"
    config = LedgerConfig(card_path=stem, peak_flops=1e12, budget_flops=1e12, max_prompt_tokens=16)
    callback = FlopLedgerCallback(config)
    trainer = build(tmp_path, kind, "qwen2", True, callback)
    trainer.train()
    card = _strict(Path(f"{stem}.json"))
    assert Path(f"{stem}.md").read_text().startswith("# Compute card")
    assert card["steps"] == 2 and card["flops"]["useful"]["C_total"] == callback.ledger.total("useful")
    assert card["round"] == {**card["round"], "P": 4, "G": 4, "K": 4, "mu": 1}
    assert card["device"]["peak_flops_per_s"] == 1e12 and card["mfu"]["total"] > 0
    assert card["budget"]["round_ceiling_flops"] == callback.round_price["C_total"] > 0
    assert card["budget"]["prompt_length_source"] == "LedgerConfig.max_prompt_tokens (16 tokens)"
    logged = [e for e in trainer.state.log_history if "perf/ledger_mfu" in e][-1]
    assert logged["perf/ledger_mfu"] == pytest.approx(100 * card["mfu"]["total"], rel=0.5)
    assert not (tmp_path / "out" / "compute_card.json").exists()
    # the CPU's matmul beside the run, measured when the trainer was built: not in train()
    assert card["measured_matmul"]["flops_per_s"] > 0


def test_without_a_card_or_a_peak_the_callback_writes_and_logs_neither(tmp_path):
    callback = FlopLedgerCallback(LedgerConfig(write_card=False))
    trainer = build(tmp_path, "grpo", "qwen2", True, callback)
    trainer.train()
    assert not list((tmp_path / "out").glob("compute_card*"))
    assert not any(k.startswith("perf/ledger_") for e in trainer.state.log_history for k in e)


# --- the subclass resumed after its budget is spent -------------------------------------------------


def test_a_subclass_resumed_after_its_budget_is_spent_rewrites_its_card_and_keeps_its_state(tmp_path):
    settings = dict(steps_per_generation=1, save_strategy="steps", save_steps=1, max_steps=40)
    probe = build_tiny_grpo(
        tmp_path / "probe", LedgerConfig(), **{**settings, "max_steps": 3, "save_strategy": "no"}
    )
    probe.train()
    budget = 0.9 * probe.ledger.total("useful")
    first = build_tiny_grpo(tmp_path, LedgerConfig(budget_flops=budget), **settings)
    first.train()  # stops by its budget, a checkpoint at the stop
    steps, flos = first.state.global_step, first.state.total_flos
    assert (
        first.ledger.stopped_by_budget
        and _strict(tmp_path / "out" / "compute_card.json")["budget"]["resumed"] is False
    )
    again = build_tiny_grpo(tmp_path, LedgerConfig(budget_flops=budget), **settings)
    out = again.train(resume_from_checkpoint=True)
    card = _strict(tmp_path / "out" / "compute_card.json")
    assert card["budget"]["resumed"] is True and card["budget"]["resumed_from"][-1]["step"] == steps
    assert card["steps"] == steps
    assert again.state.global_step == out.global_step == steps
    assert again.state.total_flos == flos == out.metrics["total_flos"]


# --- errors that name their cause --------------------------------------------------------------------


def judged(completions, **kwargs):
    return [1.0 for _ in completions]


@pytest.mark.parametrize(
    "returned, error, says",
    [
        (-5.0, ValueError, r"returned \{.*-5\.0.*\}: FLOPs must be finite and >= 0"),
        (None, TypeError, r"returned None; it must return a number of FLOPs"),
        ({"useful": 1.0}, TypeError, r"returned a dict without 'executed' \(keys: 'useful'\)"),
        ((1.0, 2.0, 3.0), TypeError, r"returned \(1\.0, 2\.0, 3\.0\); it must return"),
    ],
)
def test_a_bad_flop_cost_through_the_callback_names_the_reward_function(returned, error, says):
    callback = FlopLedgerCallback(LedgerConfig())
    judged.flop_cost = lambda **kwargs: returned
    wrapped = callback.priced_reward(judged)
    # as in training: a ledger to charge and a policy in training mode
    callback.ledger, callback._policy = SimpleNamespace(charge_priced_reward=print), torch.nn.Linear(1, 1)
    with pytest.raises(error, match=rf"reward function 'judged''s flop_cost {says}"):
        wrapped(prompts=["1+1="], completions=["2"], completion_ids=[[5]])


def test_a_flop_cost_that_raises_is_named_in_the_error():
    callback = FlopLedgerCallback(LedgerConfig())
    judged.flop_cost = lambda **kwargs: 1 / 0
    wrapped = callback.priced_reward(judged)
    callback.ledger, callback._policy = SimpleNamespace(charge_priced_reward=print), torch.nn.Linear(1, 1)
    with pytest.raises(ZeroDivisionError) as caught:
        wrapped(prompts=["1+1="], completions=["2"], completion_ids=[[5]])
    assert "reward function 'judged''s flop_cost" in "\n".join(caught.value.__notes__)


def test_a_bad_flop_cost_in_the_subclass_names_the_reward_function(tmp_path):
    def none_cost(completions, **kwargs):
        return [0.0 for _ in completions]

    none_cost.flop_cost = lambda **kwargs: None
    trainer = build_tiny_grpo(tmp_path, LedgerConfig(), reward_funcs=none_cost, max_steps=1)
    with pytest.raises(TypeError, match=r"reward function 'none_cost''s flop_cost returned None"):
        trainer.train()


def test_as_conventions_accepts_its_three_forms():
    assert as_conventions(3) == {"useful": 3.0, "executed": 3.0}
    assert (
        as_conventions((1, 2))
        == as_conventions({"useful": 1, "executed": 2})
        == {"useful": 1.0, "executed": 2.0}
    )
    with pytest.raises(TypeError, match=r"returned '7'"):
        as_conventions("7")


def test_from_dict_names_a_field_whose_text_is_not_a_number():
    with pytest.raises(
        ValueError, match=r"LedgerConfig\.budget_flops must be a number, got the string 'lots'"
    ):
        LedgerConfig.from_dict({"budget_flops": "lots"})
    with pytest.raises(
        ValueError, match=r"LedgerConfig\.max_prompt_tokens must be an int, got the string '6e1'"
    ):
        LedgerConfig.from_dict({"max_prompt_tokens": "6e1"})
    assert LedgerConfig.from_dict({"budget_flops": "3e15", "max_prompt_tokens": "64"}).max_prompt_tokens == 64


def test_an_unwrapped_flop_cost_is_charged_once_the_callback_is_attached_and_warned_when_not(tmp_path):
    def priced(completions, **kwargs):
        return length_reward(completions)

    priced.flop_cost = lambda prompts, completions, completion_ids: 1e3 * len(completions)
    unseen = FlopLedgerCallback(LedgerConfig())
    with pytest.warns(
        UserWarning, match=r"cannot see the trainer's reward functions.*ledger\.attach\(trainer\)"
    ):
        build(tmp_path / "a", "grpo", "qwen2", True, unseen, reward_funcs=[priced], max_steps=1).train()
    assert unseen.ledger.summary()["useful"]["C_reward"] == 0
    seen = FlopLedgerCallback(LedgerConfig())
    trainer = build(tmp_path / "b", "grpo", "qwen2", True, None, reward_funcs=[priced], max_steps=1)
    assert seen.attach(trainer) is seen and seen in trainer.callback_handler.callbacks
    assert trainer.reward_funcs[0].__name__ == "priced" and not hasattr(trainer.reward_funcs[0], "flop_cost")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    assert not any("cannot see the trainer's reward functions" in str(w.message) for w in caught)
    assert seen.ledger.summary()["useful"]["C_reward"] == 1e3 * 16
    with pytest.raises(TypeError, match="attach takes TRL's GRPOTrainer or RLOOTrainer"):
        seen.attach(object())
