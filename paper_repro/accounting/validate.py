"""The analytic FLOP model against FlopCounterMode on real passes of small models.

``paper-repro validate [--out CSV]`` measures every case
and writes one row per case: measured and predicted FLOPs and their ratio. The tests assert the same
cases within :data:`TOLERANCE`.

Passes use eager attention: FlopCounterMode cannot see the CPU sdpa kernel, and eager attention
computes the full square of scores before masking, so the profiler is compared with the
``executed`` work (``padded_*_work``). LoRA adapters are PEFT's, rank 8 unless stated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from paper_repro.accounting import flops
from paper_repro.accounting.flops import LoRASpec, ModelShape, TrainSpec
from paper_repro.accounting.profiling import count_flops

# Three small shapes that differ where the FLOP model branches: GQA ratio, tied head, family.
SHAPES: dict[str, dict] = {
    "qwen2-gqa2-tied": dict(
        model_type="qwen2",
        hidden_size=64,
        intermediate_size=176,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=96,
        tie_word_embeddings=True,
    ),
    "llama-gqa4-untied": dict(
        model_type="llama",
        hidden_size=48,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=1,
        vocab_size=80,
        tie_word_embeddings=False,
    ),
    "qwen2-mha-untied": dict(
        model_type="qwen2",
        hidden_size=32,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        vocab_size=64,
        tie_word_embeddings=False,
    ),
}

PASSES = ("forward", "generate", "lora_all", "lora_qv", "full", "lora_checkpointed")
TOLERANCE = 0.02  # the largest |measured / predicted - 1| that passes (the tests assert the same)


def build_model(name: str, seed: int = 0):
    """A randomly initialised causal LM of shape ``name`` with eager attention."""
    from transformers import AutoConfig, AutoModelForCausalLM

    kwargs = dict(SHAPES[name])
    config = AutoConfig.for_model(kwargs.pop("model_type"), **kwargs, max_position_embeddings=256)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model.eval()
    return model


def _ids(vocab: int, rows: int, width: int) -> torch.Tensor:
    return torch.randint(3, vocab, (rows, width), generator=torch.Generator().manual_seed(0))


def _train_pass(model, ids: torch.Tensor) -> None:
    model(input_ids=ids, labels=ids).loss.backward()


def _with_lora(model, rank: int, targets, checkpointed: bool = False):
    from peft import LoraConfig, get_peft_model

    if checkpointed:
        model.train()
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    return get_peft_model(model, LoraConfig(r=rank, target_modules=list(targets), lora_dropout=0.0))


@dataclass(frozen=True)
class Case:
    shape: str
    kind: str
    measured: int
    predicted: float

    @property
    def ratio(self) -> float:
        return self.measured / self.predicted


def measure(shape_name: str, kind: str) -> Case:
    """Run one pass of one shape under FlopCounterMode and predict it analytically."""
    model = build_model(shape_name)
    shape = ModelShape.from_config(model.config)
    vocab = model.config.vocab_size
    rows, width = 2, 13
    run: Callable[[], object]
    if kind == "forward":
        ids = _ids(vocab, 3, 17)
        predicted = flops.forward_flops(shape, flops.padded_batch_work(3, 17, 3 * 17))
        run = lambda: model(input_ids=ids)  # noqa: E731
        with torch.no_grad():
            _, measured = count_flops(run)
        return Case(shape_name, kind, measured, predicted)
    if kind == "generate":
        ids, steps = _ids(vocab, 4, 9), 12
        mask = torch.ones_like(ids)
        mask[0, :3] = 0  # a left-padded row: executed work includes its padding
        predicted = flops.forward_flops(shape, flops.padded_generation_work(4, 9, steps))
        with torch.no_grad():
            _, measured = count_flops(
                model.generate,
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=steps,
                min_new_tokens=steps,
                do_sample=False,
                pad_token_id=0,
                eos_token_id=None,
            )
        return Case(shape_name, kind, measured, predicted)
    ids = _ids(vocab, rows, width)
    work = flops.padded_batch_work(rows, width, rows * width)
    if kind == "full":
        train = flops.FULL_FINETUNE
    elif kind in ("lora_all", "lora_qv", "lora_checkpointed"):
        targets = ("q_proj", "v_proj") if kind == "lora_qv" else flops.LINEAR_MODULES
        checkpointed = kind == "lora_checkpointed"
        model = _with_lora(model, 8, targets, checkpointed)
        # _with_lora checkpoints non-reentrant: torch's early stop skips each layer's last matmul
        train = TrainSpec(
            lora=LoRASpec(8, targets), gradient_checkpointing=checkpointed, recompute="early_stop"
        )
    else:
        raise ValueError(f"unknown pass {kind!r}; choose from {', '.join(PASSES)}")
    _, measured = count_flops(_train_pass, model, ids)
    return Case(shape_name, kind, measured, flops.train_flops(shape, work, train))


def table():
    """Every case (:data:`SHAPES` x :data:`PASSES`) measured: one row each, its shape, pass, measured
    and predicted FLOPs and their ratio (a DataFrame)."""
    import pandas as pd

    cases = [measure(s, k) for s in SHAPES for k in PASSES]
    rows = [
        {"shape": c.shape, "pass": c.kind, "measured": c.measured, "predicted": c.predicted, "ratio": c.ratio}
        for c in cases
    ]
    return pd.DataFrame(rows)


def worst(cases) -> float:
    """The largest |measured / predicted - 1| over the rows of :func:`table`."""
    return float((cases["ratio"] - 1).abs().max())
