"""Drawing each decode step's tokens from the processed scores.

HF's sampling: float32 logits, HF's warpers in HF's order (:func:`hf_warpers`: temperature, top-k,
top-p, min-p), ``softmax`` and one ``torch.multinomial`` over the whole batch per step
(:func:`multinomial`, which still draws the whole batch's random numbers once finished rows have left
it); greedy is ``argmax``. The fused decoder's tokens are drawn by :func:`inverse_cdf` instead: one
uniform per row, from the distribution ``multinomial`` draws from, not its draws.
"""

from __future__ import annotations

from typing import Any

import torch


def hf_warpers(do_sample: bool, temperature, top_k, top_p, min_p) -> list[Any]:
    """HF's sampling warpers, in the order HF's ``_get_logits_processor`` applies them."""
    from transformers.generation.logits_process import (
        MinPLogitsWarper,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    if not do_sample:
        return []
    out = []
    if temperature is not None and temperature != 1.0:
        out.append(TemperatureLogitsWarper(temperature))
    if top_k is not None and top_k != 0:
        out.append(TopKLogitsWarper(top_k=top_k, min_tokens_to_keep=1))
    if top_p is not None and top_p < 1.0:
        out.append(TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1))
    if min_p is not None:
        out.append(MinPLogitsWarper(min_p=min_p, min_tokens_to_keep=1))
    return out


def multinomial(probs: torch.Tensor, rows: int, alive: torch.Tensor) -> torch.Tensor:
    """``torch.multinomial(probs, 1)`` for the batch's rows, drawing the random numbers of a batch of
    ``rows`` rows (the whole batch, finished rows included, as HF generate's batch).

    For one sample torch draws by the exponential trick: ``argmax(p / q)`` with ``q ~ Exp(1)`` of the
    shape of ``p`` (ATen ``multinomial``, CPU and CUDA). Drawing ``q`` for all ``rows`` rows and using
    those of the rows still decoding consumes the generator exactly as ``multinomial`` over the full
    batch does, and gives each row the token it would get there."""
    if probs.shape[0] == rows:
        return torch.multinomial(probs, num_samples=1).squeeze(1)
    q = probs.new_empty((rows, probs.shape[1])).exponential_(1)
    return torch.argmax(probs / q[alive], dim=-1)


def inverse_cdf(
    probs: torch.Tensor, rows: int | None = None, alive: torch.Tensor | None = None
) -> torch.Tensor:
    """One token per row of ``probs`` (the batch's rows ``alive`` of ``rows``; default all) drawn by inverting its
    cumulative sum at a uniform draw: the categorical distribution ``multinomial`` draws from (to float
    rounding), for one uniform number per row where ``multinomial`` draws one exponential per row and
    vocabulary entry. Uniforms are drawn for all ``rows`` rows, finished ones included, so dropping
    finished rows from the batch changes no row's draw. A token of probability 0 (filtered by top-k
    or top-p) has an empty interval and is never drawn (on CPU, where the cumulative sum is a
    sequential, monotone sum)."""
    cumulative = probs.cumsum(dim=-1)
    u = torch.rand((probs.shape[0] if rows is None else rows, 1), dtype=cumulative.dtype, device=probs.device)
    if alive is not None and rows != probs.shape[0]:
        u = u[alive]
    u = u * cumulative[:, -1:]
    return torch.searchsorted(cumulative, u, right=True).squeeze(1).clamp_(max=probs.shape[1] - 1)
