"""``FlopLedgerCallback``: the ledger as a ``TrainerCallback`` on TRL's own ``GRPOTrainer`` and
``RLOOTrainer`` (no subclass), checked against ``LedgerGRPOTrainer`` on the same run, and what reaches
the outside (metrics, the budget stop, what it refuses). Tiny Qwen2 and Llama models built here, eager
attention, one generation round in two optimizer steps. Its FLOPs against ``FlopCounterMode`` around
``trainer.train()`` (trainer x LoRA/full x checkpointing, and the run shapes): test_ledger_trl_style.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

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


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models gain nothing from a second thread, and on a shared machine torch's spinning OpenMP
    threads make these runs several times slower: one thread while this module runs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_lm(model_type: str = "qwen2", seed: int = 0):
    """A random tiny causal LM (2 layers, hidden 32, GQA) over the testbed tokenizer, eager attention."""
    from transformers import AutoConfig, AutoModelForCausalLM

    tokenizer = build_tokenizer()
    config = AutoConfig.for_model(
        model_type, vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
    )  # fmt: skip
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def tiny_reward_model():
    """A tiny Qwen2 sequence classifier (TRL's nn.Module reward path), eager attention."""
    from transformers import Qwen2Config, Qwen2ForSequenceClassification

    tokenizer = build_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=48, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, num_labels=1, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(1)
    return Qwen2ForSequenceClassification(config)


def prompts(n: int = 32):
    """Prompts of different lengths: left padding in generation, padding in the loss passes."""
    from datasets import Dataset

    return Dataset.from_list([{"prompt": f"{i}+{(7 * i) % 1000}="} for i in range(n)])


def length_reward(completions, **kwargs):
    return [float(len(c)) / 10 for c in completions]


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
