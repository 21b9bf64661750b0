"""Tiny models built in memory: a character-level tokenizer and a small Qwen2 policy.

Used by the ledger benchmark and the tests; nothing here touches the network.
"""

from __future__ import annotations

CHARS = tuple("0123456789+-*=() abcdefghijklmnopqrstuvwxyz.?:")
SPECIAL = ("<pad>", "<eos>", "<unk>")


def char_tokenizer():
    """A character-level HF fast tokenizer: ids 0/1/2 are pad/eos/unk, then one id per character."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL + CHARS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


def tiny_qwen2(seed: int = 0, hidden: int = 32, layers: int = 2, heads: int = 4, kv_heads: int = 2):
    """A randomly initialised Qwen2 causal LM over :func:`char_tokenizer`'s vocabulary, with eager
    attention (FlopCounterMode cannot see the CPU sdpa kernel)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(SPECIAL) + len(CHARS),
        hidden_size=hidden,
        intermediate_size=2 * hidden + 16,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.config._attn_implementation = "eager"
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = 1
    return model
