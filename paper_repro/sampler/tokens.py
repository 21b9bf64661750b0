"""Prompts' token ids, encoded once per tokenizer: :func:`encode`.

A run's evaluation decodes the same held-out, gsm and math prompts at every budget point it is
evaluated at (and its base policy's once more); encoding 300 short prompts takes the HF tokenizer
about 20 ms, a tenth of decoding them with the fused decoder. :func:`encode` keeps the last
:data:`KEPT` lists of prompts each tokenizer encoded, keyed by the texts (and the tokenizer's
vocabulary size, so that tokens added to it are seen).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

KEPT = 8  # lists of prompts kept per tokenizer

_ENCODED: weakref.WeakKeyDictionary[Any, dict[tuple, list[list[int]]]] = weakref.WeakKeyDictionary()


def encode(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """``tokenizer(texts, add_special_tokens=False)["input_ids"]``, computed once per tokenizer and
    texts (a fresh list of fresh lists each call: the caller may change them)."""
    key = (len(tokenizer), tuple(texts))
    try:
        cache = _ENCODED.setdefault(tokenizer, {})
    except TypeError:  # a tokenizer that cannot be weakly referenced: encoded each time
        cache = {}
    ids = cache.get(key)
    if ids is None:
        ids = [list(p) for p in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]
        while len(cache) >= KEPT:
            cache.pop(next(iter(cache)))
        cache[key] = ids
    return [list(p) for p in ids]


def clear() -> None:
    """Forget every encoded list (``bench eval`` times an evaluation's first encoding so)."""
    _ENCODED.clear()
