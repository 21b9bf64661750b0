"""What one pass over a batch processes, in the units FLOPs are priced in: a :class:`Work` is tokens
through the transformer body, (query, key) pairs scored by attention and positions through the output
head, counted from token lengths under the two conventions (:mod:`paper_repro.accounting.flops` prices it):
real sequences with causal attention (:func:`sequence_work`, :func:`generation_work`), and what padded
kernels run (:func:`padded_batch_work`, :func:`padded_generation_work`). Importable from
:mod:`paper_repro.accounting.flops` too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Work:
    """What a pass over a batch processes.

    ``tokens``: positions through the transformer body; ``attn_pairs``: (query, key) pairs scored,
    summed over query positions and counted once per head group (the attention cost per pair is
    ``4 x heads x head_dim`` per layer: ``QK^T`` and ``PV``); ``head_tokens``: positions through the
    output head.
    """

    tokens: float = 0.0
    attn_pairs: float = 0.0
    head_tokens: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(
            self.tokens + other.tokens,
            self.attn_pairs + other.attn_pairs,
            self.head_tokens + other.head_tokens,
        )

    def __mul__(self, k: float) -> Work:
        return Work(self.tokens * k, self.attn_pairs * k, self.head_tokens * k)

    __rmul__ = __mul__


def causal_pairs(n: int, past: int = 0) -> int:
    """(query, key) pairs of ``n`` new positions attending causally to ``past`` cached ones and to
    each other: position ``j`` (0-based) sees ``past + j + 1`` keys."""
    return n * past + n * (n + 1) // 2


def sequence_work(length: int, head_tokens: int | None = None) -> Work:
    """One causal forward over a real sequence of ``length`` tokens (no padding)."""
    return Work(length, causal_pairs(length), length if head_tokens is None else head_tokens)


def generation_work(prompt_tokens: int, completion_tokens: int, prefill: bool = True) -> Work:
    """KV-cache generation of ``completion_tokens`` tokens after a prompt, for one sequence.

    The prefill runs the prompt once (logits at its last position only) and yields the first
    token; each later token is fed back once and attends to everything before it. The last
    generated token is never fed back. With ``prefill=False`` the prompt's KV cache already exists
    (prefix caching: it was prefilled for an earlier sequence), and only its last position is run
    again to get the first token's logits, as vLLM does on a full cache hit.
    """
    first = Work(prompt_tokens, causal_pairs(prompt_tokens), 1) if prefill else Work(1, prompt_tokens, 1)
    decode = max(completion_tokens - 1, 0)
    return first + Work(decode, causal_pairs(decode, past=prompt_tokens), decode)


def padded_generation_work(
    rows: int,
    prompt_width: int,
    steps: int,
    decode_rows: Sequence[int] | None = None,
    prefill_rows: int | None = None,
) -> Work:
    """What HF ``generate`` executes for ``rows`` left-padded prompts of width ``prompt_width``
    decoding ``steps`` tokens: every row keeps decoding until the longest one ends, and eager
    attention scores the full prefill square and every cached (padded) key. ``decode_rows``: the rows
    each decode step really ran, for a sampler that drops finished rows (``paper_repro.sampler``);
    default every row at each of the ``steps - 1`` decode steps. ``prefill_rows``: the rows the
    prefill ran, for a sampler that prefills each distinct prompt once (default ``rows``)."""
    n = rows if prefill_rows is None else prefill_rows
    prefill = Work(n * prompt_width, n * prompt_width * prompt_width, n)
    if decode_rows is None:
        decode_rows = [rows] * max(steps - 1, 0)
    # decode step s (1-based) feeds one token per row against prompt_width + s keys
    tokens = sum(decode_rows)
    pairs = sum(n * (prompt_width + s) for s, n in enumerate(decode_rows, start=1))
    return prefill + Work(tokens, pairs, tokens)


def padded_batch_work(rows: int, width: int, head_tokens: int) -> Work:
    """A full-sequence forward over ``rows`` padded rows of ``width``: eager attention scores the
    full ``width x width`` square in every row."""
    return Work(rows * width, rows * width * width, head_tokens)
