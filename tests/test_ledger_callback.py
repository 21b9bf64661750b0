"""``FlopLedgerCallback``: the ledger as a ``TrainerCallback`` on TRL's own ``GRPOTrainer`` and
``RLOOTrainer`` (no subclass), checked against ``LedgerGRPOTrainer`` on the same run, and what reaches
the outside (metrics, the budget stop, what it refuses). Tiny Qwen2 and Llama models built here, eager
attention, one generation round in two optimizer steps. Its FLOPs against ``FlopCounterMode`` around
``trainer.train()`` (trainer x LoRA/full x checkpointing, and the run shapes): test_ledger_trl_style.py."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from paper_repro.ledger import (
    HOOKED_METHODS,
    METRIC_NAMES,
    FlopLedgerCallback,
    LedgerConfig,
    LedgerGRPOTrainer,
)
from paper_repro.ledger import callback as callback_module
from paper_repro.ledger import watch as watch_module
from paper_repro.testbed import build_tokenizer
from tests.test_ledger_trl_style import (
    length_reward,
    one_thread,  # noqa: F401 (one torch thread while the module runs)
    prompt_dataset,
    tiny_reward_model,
)
from tests.test_ledger_trl_style import tiny_causal_lm as tiny_lm


def prompts(n: int = 32):
    """32 prompts of different lengths (:func:`tests.test_ledger_trl_style.prompt_dataset`)."""
    return prompt_dataset(n)


def build(tmp_path, trainer="grpo", model="qwen2", lora=True, callback=None, trainer_cls=None, **overrides):
    """TRL's trainer (or ``trainer_cls``) with the callback: 16 rows (4 prompts x G=4) generated once and
    used over two optimizer steps, 8-token completions; the old-policy forward runs (TRL's rule: one
    micro-batch per step, two per round). ``model`` "path" is a saved tiny Qwen2, which full fine-tuning
    with beta != 0 needs (TRL loads the reference model from the policy's path)."""
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer

    config_cls, default_cls = (GRPOConfig, GRPOTrainer) if trainer == "grpo" else (RLOOConfig, RLOOTrainer)
    extra = {
        k: overrides.pop(k) for k in ("reward_funcs", "reward_processing_classes", "ledger") if k in overrides
    }
    args = dict(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=8, num_generations=4,
        max_completion_length=8, max_steps=2, learning_rate=1e-3, report_to="none", logging_steps=1,
        save_strategy="no", use_cpu=True, beta=0.0, steps_per_generation=2, seed=0, disable_tqdm=True,
        activation_checkpointing=False, log_level="error",
    )  # fmt: skip
    args.update(overrides)
    if model == "path":
        path = tmp_path / "policy"
        tiny_lm("qwen2").save_pretrained(path)
        policy, args["model_init_kwargs"] = str(path), {"attn_implementation": "eager"}
    else:
        policy = tiny_lm(model)
    callbacks = [] if callback is None else [callback]
    return (trainer_cls or default_cls)(
        model=policy,
        reward_funcs=extra.pop("reward_funcs", length_reward),
        args=config_cls(**args),
        train_dataset=prompts(),
        processing_class=build_tokenizer(),
        peft_config=LoraConfig(r=4, target_modules="all-linear", lora_dropout=0.0) if lora else None,
        callbacks=callbacks,
        **extra,
    )


# --- against LedgerGRPOTrainer on the same run --------------------------------------------------


@pytest.mark.parametrize(
    "model, lora, overrides",
    [
        ("qwen2", True, dict(beta=0.05, num_iterations=2)),
        ("path", False, dict(beta=0.05, reward_funcs=[length_reward, "rm"])),
    ],
    ids=["lora-ref-mu2", "full-ref-model-reward-model"],
)
def test_callback_agrees_with_ledger_grpo_trainer(tmp_path, model, lora, overrides):
    """Both on one GRPO run (the subclass's own hooks and the callback's): the same FLOPs per component
    under both conventions, and the same token counts."""
    if "reward_funcs" in overrides:
        overrides["reward_funcs"] = [
            f if f != "rm" else tiny_reward_model() for f in overrides["reward_funcs"]
        ]
        overrides["reward_processing_classes"] = [None, build_tokenizer()]
    callback = FlopLedgerCallback(LedgerConfig())
    trainer = build(
        tmp_path, "grpo", model, lora, callback, trainer_cls=LedgerGRPOTrainer,
        ledger=LedgerConfig(write_card=False), **overrides,
    )  # fmt: skip
    trainer.train()
    ours, theirs = callback.ledger.summary(), trainer.ledger.summary()
    for convention in ("useful", "executed"):
        for component in ("C_search", "C_learning", "C_reward"):
            assert ours[convention][component] == pytest.approx(theirs[convention][component], rel=1e-9)
        assert ours["learning_parts"][convention] == pytest.approx(theirs["learning_parts"][convention])
    assert ours["tokens"] == theirs["tokens"]
    if "reward_funcs" in overrides:
        assert ours["executed"]["C_reward"] > 0


# --- what reaches the outside ------------------------------------------------------------------


def test_metrics_reach_the_logs_and_the_log_history(tmp_path):
    callback = FlopLedgerCallback(LedgerConfig(log_path=tmp_path / "steps.jsonl"))
    trainer = build(tmp_path, "grpo", "qwen2", True)
    trainer.add_callback(callback)
    trainer.train()
    logged = [e for e in trainer.state.log_history if "flops/search" in e]
    assert [e["step"] for e in logged if "loss" in e] == [1, 2]
    assert set(METRIC_NAMES) <= set(logged[-1])
    assert logged[-1]["flops/total"] == pytest.approx(callback.ledger.total("useful"))
    assert logged[-1]["flops/executed/total"] == pytest.approx(callback.ledger.total("executed"))
    assert len((tmp_path / "steps.jsonl").read_text().splitlines()) == 2
    assert (tmp_path / "steps.summary.json").is_file()


def test_a_reward_function_wrapped_by_the_callback_is_charged_its_flop_cost(tmp_path):
    callback = FlopLedgerCallback(LedgerConfig())

    def judged(completions, **kwargs):
        return [1.0 if "1" in c else 0.0 for c in completions]

    judged.flop_cost = lambda prompts, completions, completion_ids: {
        "useful": 1e3 * len(completions),
        "executed": 2e3 * len(completions),
    }
    reward = callback.priced_reward(judged)
    assert reward.__name__ == "judged" and not hasattr(reward, "flop_cost")
    trainer = build(tmp_path, "grpo", "qwen2", True, callback, reward_funcs=reward)
    trainer.train()
    s = callback.ledger.summary()
    assert s["useful"]["C_reward"] == 1e3 * 16 and s["executed"]["C_reward"] == 2e3 * 16
    # its tokens are the function's own: the log has no tokens/reward 0 beside the C_reward charged
    assert s["tokens"]["reward_priced_rows"] == 16
    logged = [e for e in trainer.state.log_history if "flops/reward" in e]
    assert logged and all(e["flops/reward"] > 0 and "tokens/reward" not in e for e in logged)


def test_the_budget_stops_the_run(tmp_path):
    """With a round's ceiling, the run stops at the end of the round the next one could pass the budget
    after, and never passes it; inside a round, before a step whose loss passes could."""
    free = FlopLedgerCallback(LedgerConfig())
    build(tmp_path / "a", "grpo", "qwen2", True, free, max_steps=4).train()
    rounds = free.ledger.rounds
    assert len(rounds) == 2
    budget = rounds[0] + 0.5 * rounds[1]
    capped = FlopLedgerCallback(LedgerConfig(budget_flops=budget, round_ceiling_flops=1.2 * max(rounds)))
    trainer = build(tmp_path / "b", "grpo", "qwen2", True, capped, max_steps=50)
    trainer.train()
    s = capped.ledger.summary()
    assert s["stopped_by_budget"] and not s["over_budget"] and trainer.state.global_step == 2
    with pytest.raises(ValueError, match="does not buy one generation round"):
        build(tmp_path / "c", "grpo", "qwen2", True, FlopLedgerCallback(
            LedgerConfig(budget_flops=1e6, round_ceiling_flops=2e6))).train()  # fmt: skip


def test_what_the_callback_refuses():
    with pytest.raises(ValueError, match="LedgerGRPOTrainer for K-of-G"):
        FlopLedgerCallback(LedgerConfig(kept=2))
    with pytest.raises(TypeError, match="takes a LedgerConfig"):
        FlopLedgerCallback({"budget_flops": 1e9})


def test_the_callback_touches_no_private_trl_name_it_does_not_list():
    """The subclass's hooked methods and the private attributes it reads appear nowhere in the callback's
    code, its model hooks' (paper_repro.ledger.watch) included (docstrings aside); any private TRL name
    it did use would be listed in PRIVATE_TRL_NAMES."""
    source = "".join(Path(m.__file__).read_text() for m in (callback_module, watch_module))
    code = re.sub(r'"""[\s\S]*?"""', "", source)
    private = [*HOOKED_METHODS, "_buffered_inputs", "_metrics", "_step", "_is_vlm", "_last_loaded_step"]
    for name in private:
        if name not in callback_module.PRIVATE_TRL_NAMES:
            assert not re.search(rf"\.{name}\b", code), name
    assert "import trl" not in code and "from trl" not in code


# --- hooks on the trainer's own models only ----------------------------------------------------


def _hooks(module: torch.nn.Module) -> int:
    """Forward hooks and pre-hooks on ``module`` and its submodules."""
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in module.modules())


def _global_hooks() -> int:
    """Process-wide forward hooks and pre-hooks (torch.nn.modules.module.register_module_forward_hook)."""
    from torch.nn.modules import module as torch_module

    return len(torch_module._global_forward_hooks) + len(torch_module._global_forward_pre_hooks)


@pytest.mark.parametrize("form", ["full", "core"])
@pytest.mark.parametrize("route", ["callbacks", "attach"])
def test_a_model_outside_the_trainer_is_never_touched(tmp_path, route, form):
    """A causal LM run in the same process while training runs (here from inside a reward function) gets
    no hook and no charge, whichever way the callback reached the trainer, in both forms (the full
    callback and the core, whose hooks they share); the trainer's reference and reward models are
    charged; after training no hook is left on any of the models, nor process-wide."""
    outside = tiny_lm("llama", seed=3)
    seen = []

    def outside_reward(completions, **kwargs):
        seen.append((_hooks(outside), _global_hooks()))
        with torch.no_grad():
            outside(input_ids=torch.ones(len(completions), 6, dtype=torch.long))
        return [0.0] * len(completions)

    from paper_repro.ledger.trl_core import FlopLedgerCoreCallback

    callback = FlopLedgerCallback(LedgerConfig()) if form == "full" else FlopLedgerCoreCallback()
    rm = tiny_reward_model()
    trainer = build(
        tmp_path, "grpo", "path", False, callback if route == "callbacks" else None, beta=0.05,
        reward_funcs=[outside_reward, rm], reward_processing_classes=[None, build_tokenizer()],
    )  # fmt: skip
    if route == "attach":
        assert callback.attach(trainer) is callback
    rm_tokens = []  # the real tokens of each reward-model call in training
    spy = rm.register_forward_pre_hook(
        lambda m, args, kwargs: rm_tokens.append(int(kwargs["attention_mask"].sum())), with_kwargs=True
    )
    trainer.train()
    spy.remove()
    assert seen and all(s == (0, 0) for s in seen)  # nothing on the outside model, nothing process-wide
    s = callback.ledger.summary()
    assert s["tokens"]["ref_forward_rows"] == 16  # the trainer's reference model is charged
    # C_reward is the reward model's alone: its tokens, none of the outside model's
    assert s["tokens"]["reward_tokens"] == sum(rm_tokens) > 0 and s["executed"]["C_reward"] > 0
    for model in (trainer.model, trainer.ref_model, rm, outside):
        assert _hooks(model) == 0
    assert _global_hooks() == 0


class LogRecorder(TrainerCallback):
    """A stand-in ``report_to`` backend (tensorboard and wandb are not installed here): what
    TensorBoardCallback would write, each ``on_log``'s logs as they were when it ran."""

    def __init__(self):
        self.logs, self.train_begins = [], 0

    def on_train_begin(self, args, state, control, **kwargs):
        self.train_begins += 1

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.logs.append(dict(logs or {}))


class LaterCallback(LogRecorder):
    pass


@pytest.mark.parametrize("route", ["callbacks", "attach"])
def test_metrics_reach_a_report_to_backend(tmp_path, monkeypatch, route):
    """A reporting callback that Trainer adds for ``report_to`` (listed before every user callback) logs
    the ledger's metrics at each logging step, and the run's ``total_flos``; each callback sees
    ``on_train_begin`` once although the ledger moves itself ahead of the reporter in it."""
    import transformers.trainer

    recorders = []

    def reporting_callbacks(report_to):  # as transformers resolves args.report_to
        recorders.append(LogRecorder)
        return [LogRecorder]

    monkeypatch.setattr(transformers.trainer, "get_reporting_integration_callbacks", reporting_callbacks)
    callback, after = FlopLedgerCallback(LedgerConfig()), LaterCallback()
    trainer = build(tmp_path, "grpo", "qwen2", True, callback if route == "callbacks" else None)
    if route == "attach":
        callback.attach(trainer)
    trainer.add_callback(after)  # a user callback after the ledger: its events are not skipped
    callbacks = trainer.callback_handler.callbacks
    reporter = next(cb for cb in callbacks if type(cb) is LogRecorder)
    assert callbacks.index(reporter) < callbacks.index(callback) or route == "attach"
    trainer.train()
    assert recorders and reporter.train_begins == after.train_begins == 1
    assert callbacks.index(callback) < callbacks.index(reporter)  # the ledger runs ahead of it
    steps = [e for e in reporter.logs if "loss" in e]
    assert len(steps) == 2 and all(set(METRIC_NAMES) <= set(e) for e in steps)
    assert steps[-1]["flops/total"] == pytest.approx(callback.ledger.total("useful"))
    assert steps[-1]["flops/executed/total"] == pytest.approx(callback.ledger.total("executed"))
    assert reporter.logs[-1]["total_flos"] == pytest.approx(callback.ledger.total("useful"))


def test_without_a_trainer_only_the_policy_is_watched_and_it_warns(tmp_path):
    """Events called by a loop of one's own (no Trainer among the callers): the policy is hooked, no
    other model is, and the warning names the fix."""
    from transformers.trainer_callback import CallbackHandler, DefaultFlowCallback

    trainer = build(tmp_path, "grpo", "path", False, beta=0.05)
    callback = FlopLedgerCallback(LedgerConfig())
    handler = CallbackHandler([DefaultFlowCallback, callback], trainer.model, None, None, None)
    with pytest.warns(UserWarning, match=r"callback\.attach\(trainer\)"):
        handler.on_train_begin(trainer.args, trainer.state, trainer.control)
    assert _hooks(trainer.model) > 0 and _hooks(trainer.ref_model) == 0
    handler.on_train_end(trainer.args, trainer.state, trainer.control)
    assert _hooks(trainer.model) == 0


def test_hooks_a_run_left_behind_are_removed_by_the_next_watcher_of_the_model():
    """A train() that raises never reaches on_train_end, so its callback's hooks stay on the model; the
    next callback that watches that model removes them (with a warning) before it installs its own,
    so no pass is charged twice or to the finished run."""
    model = tiny_lm()
    left = FlopLedgerCallback()
    left._claim(model)
    left._handles.append(model.register_forward_pre_hook(lambda module, args: None))
    nxt = FlopLedgerCallback()
    with pytest.warns(UserWarning, match="hooks an earlier run left"):
        nxt._claim(model)
    assert not left._handles and not model._forward_pre_hooks
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nxt._claim(model)  # its own claim again: nothing to remove, no warning
