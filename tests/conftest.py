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


CHARS = list("0123456789+-*=() abcdefghijklmnopqrstuvwxyz.?:")


def build_tiny_tokenizer():
    """A character-level HF tokenizer with pad/eos tokens, built offline with `tokenizers`."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{c: i + 3 for i, c in enumerate(CHARS)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


def build_tiny_policy(seed: int = 0, hidden: int = 32, layers: int = 2):
    """A random tiny Qwen2 causal LM over the char tokenizer's vocabulary, eager attention."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(CHARS) + 3, hidden_size=hidden, intermediate_size=2 * hidden + 16,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=128, tie_word_embeddings=True, pad_token_id=0, eos_token_id=1,
        bos_token_id=None,
    )  # fmt: skip
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.config._attn_implementation = "eager"
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = 1
    return model
