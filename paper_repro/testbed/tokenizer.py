"""The testbed's tokenizer: one token per character the arith prompts and solutions use."""

from __future__ import annotations

from paper_repro.rewards.prm_scorer import STEP_TOKEN

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
SPECIALS = (PAD, EOS, UNK, STEP_TOKEN)
# Every character the arith prompts and solutions use.
CHARS = tuple("0123456789abcdefghijklmnopqrstuvwxyz +-*=.,:?\n")


def build_tokenizer():
    """A character-level tokenizer built with ``tokenizers``, in Qwen2's own form: byte-level BPE
    with one token per character of :data:`CHARS` and no merges, after the special tokens (pad 0,
    eos 1, unk 2, ``<extra_0>`` 3).

    Byte-level matters: ``AutoTokenizer`` loads any checkpoint whose config says ``qwen2`` as
    ``Qwen2Tokenizer``, which rebuilds a byte-level pre-tokenizer; a plain character vocabulary
    would then silently lose its spaces and newlines.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [byte_level(c) for c in CHARS]
    vocab = {tok: i for i, tok in enumerate(list(SPECIALS) + chars)}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        additional_special_tokens=[STEP_TOKEN],
        padding_side="left",
        model_max_length=512,
    )


def byte_level(char: str) -> str:
    """GPT-2's byte-to-unicode map for an ASCII character: printable ones map to themselves, space
    and control characters to ``chr(256 + byte)`` (space is 'Ġ', newline 'Ċ')."""
    byte = ord(char)
    if byte > 126:
        raise ValueError(f"only ASCII characters are supported, got {char!r}")
    return char if byte >= 33 else chr(256 + byte)
