"""Drop-in: GRPO configurations after TRL's own GRPO tests, each trained with ``GRPOTrainer`` and with
``LedgerGRPOTrainer(ledger=LedgerConfig())`` on tiny local models; none that trains with TRL may fail
with the ledger. Slow (about two minutes): run it after trying another TRL with
``PAPER_REPRO_ALLOW_UNTESTED_TRL=1 pytest -m slow tests/test_trl_compat.py``."""

from __future__ import annotations

import logging

import pytest
import torch

from tests import fixtures

pytestmark = pytest.mark.slow


def _length(completions, **kwargs):
    return [float(len(str(c))) for c in completions]


# name -> GRPOConfig overrides and how the trainer is built (after TRL's tests/test_grpo_trainer.py)
CASES: dict[str, dict] = {
    "minimal": {},
    "conversational": {"data": "conversational"},
    **{
        f"loss_{t}": {"args": {"loss_type": t, "gradient_accumulation_steps": 2}}
        for t in ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo")
    },
    "eval_on_start": {
        "args": {"eval_strategy": "steps", "eval_steps": 2, "eval_on_start": True},
        "eval": True,
    },
    "num_generations_eval": {
        "args": {"eval_strategy": "steps", "eval_steps": 2, "num_generations_eval": 1},
        "eval": True,
    },
    "multiple_iterations": {"args": {"num_iterations": 2, "epsilon_high": 0.28, "delta": 2.0}},
    "beta": {"args": {"beta": 0.1}},
    "peft_config_beta": {"peft": True, "args": {"beta": 0.1}},
    "pre_wrapped_peft_beta": {"prewrap": True, "args": {"beta": 0.1}},
    "weighted_reward_model_and_function": {"rewards": "both", "args": {"reward_weights": [0.7, 0.3]}},
    "reward_model_object": {"rewards": "object"},
    "entropy_mask": {"args": {"top_entropy_quantile": 0.2}},
    "mask_truncated": {"args": {"mask_truncated_completions": True, "scale_rewards": "none"}},
    "steps_per_generation": {"args": {"steps_per_generation": 4, "gradient_accumulation_steps": 2}},
    "iterable_dataset": {"data": "iterable"},
    "sync_ref_model": {"args": {"beta": 0.1, "sync_ref_model": True, "ref_model_sync_steps": 1}},
    "checkpointing_peft": {"peft": True, "args": {"activation_checkpointing": True}},
    "sampling_options": {"args": {"temperature": 0.7, "top_p": 0.9, "top_k": 10, "repetition_penalty": 1.1}},
}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny Qwen2 policy and a Qwen2 sequence-classification reward model, saved as checkpoints."""
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, Qwen2Config

    root = tmp_path_factory.mktemp("trl-compat")
    tokenizer = fixtures.qwen25_style_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(root / "policy")
    reward = AutoModelForSequenceClassification.from_config(
        Qwen2Config(**{**config.to_dict(), "num_labels": 1})
    )
    reward.save_pretrained(root / "reward")
    for name in ("policy", "reward"):
        tokenizer.save_pretrained(root / name)
    return root


def _train(trainer_cls, case: dict, tiny, out) -> None:
    from datasets import Dataset, IterableDataset
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer
    from trl import GRPOConfig

    from paper_repro.ledger import LedgerConfig, LedgerGRPOTrainer

    policy, reward = str(tiny / "policy"), str(tiny / "reward")
    args = GRPOConfig(
        output_dir=str(out), learning_rate=0.1, per_device_train_batch_size=3, per_device_eval_batch_size=3,
        num_generations=3, max_completion_length=8, max_steps=3, report_to="none", use_cpu=True,
        save_strategy="no", disable_tqdm=True, **case.get("args", {}),
    )  # fmt: skip
    data = {
        "conversational": Dataset.from_list(
            [{"prompt": [{"role": "user", "content": f"What color is the sky {i}?"}]} for i in range(17)]
        ),
        "iterable": IterableDataset.from_generator(
            lambda: ({"prompt": f"The sky is {i}"} for i in range(40))
        ),
    }.get(case.get("data"), Dataset.from_list([{"prompt": f"The sky is {i}"} for i in range(17)]))
    rewards = {
        "both": [reward, _length],
        "object": AutoModelForSequenceClassification.from_pretrained(reward),
    }
    kwargs = dict(
        model=policy, reward_funcs=rewards.get(case.get("rewards"), reward), args=args, train_dataset=data
    )
    if case.get("rewards") == "object":
        kwargs["reward_processing_classes"] = AutoTokenizer.from_pretrained(reward)
    if case.get("eval"):
        kwargs["eval_dataset"] = Dataset.from_list([{"prompt": f"The sea is {i}"} for i in range(6)])
    if case.get("peft"):
        kwargs["peft_config"] = LoraConfig(r=4, target_modules="all-linear")
    if case.get("prewrap"):
        lora = LoraConfig(r=4, target_modules="all-linear")
        kwargs["model"] = get_peft_model(AutoModelForCausalLM.from_pretrained(policy), lora)
        kwargs["processing_class"] = AutoTokenizer.from_pretrained(policy)
    if trainer_cls is LedgerGRPOTrainer:
        kwargs["ledger"] = LedgerConfig()
    trainer_cls(**kwargs).train()


@pytest.mark.parametrize("name", sorted(CASES))
def test_what_trains_with_trl_trains_with_the_ledger(name, tiny, tmp_path, monkeypatch):
    from trl import GRPOTrainer

    from paper_repro.ledger import LedgerGRPOTrainer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    logging.getLogger("paper_repro.ledger").setLevel(logging.WARNING)
    torch.manual_seed(0)
    try:
        _train(GRPOTrainer, CASES[name], tiny, tmp_path / "trl")
    except Exception as err:  # not the ledger's to pass: TRL itself cannot train this here
        pytest.skip(f"TRL itself fails: {type(err).__name__}: {err}")
    torch.manual_seed(0)
    _train(LedgerGRPOTrainer, CASES[name], tiny, tmp_path / "ledger")
