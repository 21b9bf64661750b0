"""``FlopLedgerCallback`` on TRL's own trainers, in TRL's test style: tiny models built in memory, one
test class parametrised over the trainer (``GRPOTrainer``, ``RLOOTrainer``) x LoRA / full fine-tuning x
activation checkpointing (off, non-reentrant, reentrant), and the run shapes a TRL user reaches for
(``steps_per_generation``, ``num_iterations``, ``beta`` with a reference model, a reward model). Each
case trains under ``FlopCounterMode`` with in-place ``addmm_`` counted
(:func:`paper_repro.accounting.profiling.flop_counter`) and asserts that the callback's executed FLOPs
are what the profiler counted, to 1e-6 relative.

Runnable on its own, with no fixture beyond this file: ``pytest tests/test_ledger_trl_style.py``;
``python -m tests.test_ledger_trl_style`` prints the callback/profiler ratio of every case.

Eager attention throughout: the profiler cannot see the CPU sdpa kernel."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from paper_repro.accounting.profiling import flop_counter
from paper_repro.ledger import FlopLedgerCallback, LedgerConfig
from paper_repro.testbed import build_tokenizer

REL = 1e-6  # the callback's executed FLOPs against the profiler's

# activation checkpointing: (on, activation_checkpointing_kwargs)
CHECKPOINTING = {
    "off": (False, None),
    "non-reentrant": (True, {"use_reentrant": False}),
    "reentrant": (True, {"use_reentrant": True}),
}


def tiny_causal_lm(model_type: str = "qwen2", seed: int = 0):
    """A random causal LM (2 layers, hidden 32, GQA 4/2 heads) over the testbed tokenizer, eager attention."""
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
    """A random one-layer Qwen2 sequence classifier: TRL's ``nn.Module`` reward path."""
    from transformers import Qwen2Config, Qwen2ForSequenceClassification

    tokenizer = build_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=48, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, num_labels=1, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(1)
    return Qwen2ForSequenceClassification(config)


def prompt_dataset(n: int = 64):
    """Prompts of different lengths: left padding in generation, padding in the loss passes."""
    from datasets import Dataset

    return Dataset.from_list([{"prompt": f"{i}+{(7 * i) % 1000}="} for i in range(n)])


def length_reward(completions, **kwargs):
    return [float(len(c)) / 10 for c in completions]


def make_trainer(
    tmp_path: Path,
    trainer: str,
    lora: bool,
    checkpointing: str = "off",
    model="qwen2",
    callback=None,
    **kwargs,
):
    """TRL's ``trainer`` ("GRPO" or "RLOO") with a fresh :class:`FlopLedgerCallback`: 8 rows a micro-batch
    (2 prompts x 4 generations), 8-token completions, one generation round over ``steps_per_generation``
    (2) optimizer steps, so the old-policy forward runs. ``model``: a family built in memory, or "path"
    (a tiny Qwen2 saved under ``tmp_path``: TRL loads the reference model of a full fine-tune with
    ``beta != 0`` from the policy's path). ``kwargs``: ``reward_funcs``, ``reward_processing_classes``
    or config fields. ``callback``: the ledger callback to train with (default a fresh
    ``FlopLedgerCallback``; ``tests/test_ledger_trl_core.py`` passes the core's). Returns the trainer and
    the callback."""
    import trl
    from peft import LoraConfig

    on, ckpt_kwargs = CHECKPOINTING[checkpointing]
    trainer_kwargs = {k: kwargs.pop(k) for k in ("reward_funcs", "reward_processing_classes") if k in kwargs}
    args = dict(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=8, num_generations=4,
        max_completion_length=8, max_steps=2, steps_per_generation=2, beta=0.0, learning_rate=1e-3,
        report_to="none", logging_steps=1, save_strategy="no", use_cpu=True, seed=0, disable_tqdm=True,
        log_level="error", activation_checkpointing=on, activation_checkpointing_kwargs=ckpt_kwargs,
    )  # fmt: skip
    args.update(kwargs)
    if model == "path":
        tiny_causal_lm("qwen2").save_pretrained(tmp_path / "policy")
        model, args["model_init_kwargs"] = str(tmp_path / "policy"), {"attn_implementation": "eager"}
    else:
        model = tiny_causal_lm(model)
    callback = callback if callback is not None else FlopLedgerCallback(LedgerConfig())
    built = getattr(trl, f"{trainer}Trainer")(
        model=model,
        reward_funcs=trainer_kwargs.pop("reward_funcs", length_reward),
        args=getattr(trl, f"{trainer}Config")(**args),
        train_dataset=prompt_dataset(),
        processing_class=build_tokenizer(),
        peft_config=LoraConfig(r=4, target_modules="all-linear", lora_dropout=0.0) if lora else None,
        callbacks=[callback],
        **trainer_kwargs,
    )
    return built, callback


def assert_one_round_counted(summary: dict, built, lora: bool) -> None:
    """What :func:`make_trainer`'s run of one round of 16 rows over 2 steps leaves in a ledger's summary
    (either form): each row generated, through the old-policy forward and the loss passes; useful
    within executed; ``total_flos`` the useful total; and no hook left on the policy after training (a
    later forward or generate is not charged)."""
    tokens = summary["tokens"]
    assert tokens["gen_rows"] == tokens["loss_rows"] == tokens["old_forward_rows"] == 16
    for component in ("C_search", "C_learning"):
        assert 0 < summary["useful"][component] <= summary["executed"][component]
    assert (summary["steps"], summary["rounds"]) == (2, 1)
    assert built.state.total_flos == pytest.approx(summary["useful"]["C_total"])
    base = built.model.get_base_model() if lora else built.model
    assert "generate" not in vars(base) and not base._forward_pre_hooks


def train_under_profiler(trainer) -> float:
    """``trainer.train()`` under ``FlopCounterMode`` with ``addmm_`` counted; the FLOPs it counted."""
    counter = flop_counter()
    with warnings.catch_warnings(), counter:
        warnings.simplefilter("ignore")  # transformers' deprecation notes on every checkpointed run
        trainer.train()
    return float(counter.get_total_flops())


def executed(callback: FlopLedgerCallback) -> float:
    """The callback's executed FLOPs: C_search + C_learning + C_reward (0 without a reward model)."""
    return callback.ledger.summary()["executed"]["C_total"]


# the runs beyond the grid, each a TRL user's choice: (trainer, LoRA, model, kwargs)
RUN_SHAPES = {
    "grpo-lora-steps_per_generation4": ("GRPO", True, "qwen2", dict(steps_per_generation=4, max_steps=4)),
    "grpo-llama-lora-num_iterations2": ("GRPO", True, "llama", dict(num_iterations=2, max_steps=4)),
    "grpo-lora-beta-adapters-off": ("GRPO", True, "qwen2", dict(beta=0.04)),
    "rloo-llama-lora-beta-adapters-off": ("RLOO", True, "llama", dict(beta=0.04)),
    "grpo-full-beta-reference-model": ("GRPO", False, "path", dict(beta=0.04)),
    "rloo-full-beta-reference-model": ("RLOO", False, "path", dict(beta=0.04)),
    "rloo-lora-reward-model": ("RLOO", True, "qwen2", dict(reward_funcs="model")),
    "grpo-llama-full-reward-model": ("GRPO", False, "llama", dict(reward_funcs="model")),
}


def run_shape_kwargs(kwargs: dict) -> dict:
    """``RUN_SHAPES`` kwargs with ``reward_funcs="model"`` made a reward model and its tokenizer."""
    if kwargs.get("reward_funcs") != "model":
        return dict(kwargs)
    return {**kwargs, "reward_funcs": tiny_reward_model(), "reward_processing_classes": build_tokenizer()}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models gain nothing from a second thread, and on a shared machine torch's spinning OpenMP
    threads make these runs several times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class TestFlopLedgerCallback:
    @pytest.mark.parametrize("trainer", ["GRPO", "RLOO"])
    @pytest.mark.parametrize("lora", [True, False], ids=["lora", "full"])
    @pytest.mark.parametrize("checkpointing", list(CHECKPOINTING))
    def test_executed_flops_are_the_profilers(self, tmp_path, trainer, lora, checkpointing):
        built, callback = make_trainer(tmp_path, trainer, lora, checkpointing)
        measured = train_under_profiler(built)
        summary = callback.ledger.summary()
        assert executed(callback) == pytest.approx(measured, rel=REL)
        assert summary["executed"]["C_reward"] == summary["useful"]["C_reward"] == 0  # a reward function
        assert_one_round_counted(summary, built, lora)

    @pytest.mark.parametrize("shape", list(RUN_SHAPES))
    def test_run_shapes(self, tmp_path, shape):
        trainer, lora, model, kwargs = RUN_SHAPES[shape]
        built, callback = make_trainer(tmp_path, trainer, lora, model=model, **run_shape_kwargs(kwargs))
        measured = train_under_profiler(built)
        summary = callback.ledger.summary()
        assert executed(callback) == pytest.approx(measured, rel=REL)
        tokens = summary["tokens"]
        rows = 8 * kwargs.get("steps_per_generation", 2)
        assert tokens["gen_rows"] == rows and tokens["old_forward_rows"] == rows
        assert tokens["loss_rows"] == rows * kwargs.get("num_iterations", 1)
        assert tokens.get("ref_forward_rows", 0) == (rows if kwargs.get("beta") else 0)
        assert summary["rounds"] == 1
        assert (summary["executed"]["C_reward"] > 0) == (kwargs.get("reward_funcs") == "model")
        if kwargs.get("beta"):
            assert summary["learning_parts"]["executed"]["ref"] > 0


def ratio_table(tmp: Path, new_callback=lambda: None) -> list[tuple[str, float, float]]:
    """Every case of this module: (case, the callback's executed FLOPs, the profiler's). ``new_callback``
    builds each case's ledger callback (``None``: a ``FlopLedgerCallback``; ``tests/test_ledger_trl_core.py``
    passes the core's)."""
    cases = [
        (
            f"{trainer} {'LoRA' if lora else 'full'} checkpointing {checkpointing}",
            trainer,
            lora,
            checkpointing,
            {},
        )
        for checkpointing in CHECKPOINTING
        for lora in (True, False)
        for trainer in ("GRPO", "RLOO")
    ]
    cases += [
        (shape, trainer, lora, "off", dict(model=model, **run_shape_kwargs(kwargs)))
        for shape, (trainer, lora, model, kwargs) in RUN_SHAPES.items()
    ]
    rows = []
    for case, trainer, lora, checkpointing, kwargs in cases:
        built, callback = make_trainer(
            tmp / case.replace(" ", "-"), trainer, lora, checkpointing, callback=new_callback(), **kwargs
        )
        measured = train_under_profiler(built)
        rows.append((case, executed(callback), measured))
    return rows


if __name__ == "__main__":
    import tempfile

    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        print("| case | callback executed | FlopCounterMode | callback / profiler |\n|---|--:|--:|--:|")
        for case, ours, measured in ratio_table(Path(tmp)):
            print(f"| {case} | {ours:,.0f} | {measured:,.0f} | {ours / measured:.9f} |")
