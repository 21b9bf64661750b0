"""Shared fixtures: tiny HF models built in memory (no network, no downloads)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Three small shapes that differ where the FLOP model branches: GQA ratio, tied head, family.
TINY_CONFIGS = {
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


def build_tiny_model(name: str, seed: int = 0):
    """A randomly initialised causal LM with eager attention (FlopCounterMode cannot see the
    CPU sdpa kernel, so profiler checks use eager)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    kwargs = dict(TINY_CONFIGS[name])
    model_type = kwargs.pop("model_type")
    config = AutoConfig.for_model(model_type, **kwargs, max_position_embeddings=256)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model.eval()
    return model


@pytest.fixture(params=sorted(TINY_CONFIGS))
def tiny_model(request):
    return build_tiny_model(request.param)
