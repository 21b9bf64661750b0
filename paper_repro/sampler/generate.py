"""The lean sampler's decode loop: :func:`lean_generate` (and :func:`generate_like`, with a
``GenerationConfig``'s settings).

It left-pads and prefills the prompts, then decodes with :class:`~paper_repro.sampler.exact.Decoder`
(HF's computation bit for bit, the default) or :class:`~paper_repro.sampler.fused.FusedDecoder`
(``fused=True``), sampling as HF does (:mod:`paper_repro.sampler.sampling`): finished rows fed the pad
token, stopping when every row has produced an EOS or at ``max_new_tokens``.

With ``compact=True`` finished rows leave the batch once few enough are still decoding; the random
numbers of the whole batch are still drawn each step, so no row's tokens change. What each step then
runs is reported in :class:`LeanStats`, which the ledger's ``executed`` count reads. ``SAMPLERS``: the
ledger's choices, HF ``generate`` or this loop with either decoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from paper_repro.sampler.exact import Decoder
from paper_repro.sampler.fused import FusedDecoder
from paper_repro.sampler.sampling import hf_warpers, inverse_cdf, multinomial
from paper_repro.sampler.weights import base_model

# With ``compact``, finished rows are dropped from the batch once at most this share of it is still
# decoding (each drop copies the KV cache's filled part)
COMPACT_AT = 0.75


@dataclass
class LeanStats:
    """What one :func:`lean_generate` call ran: the prefill (rows x prompt width) and each decode step's
    rows (every row while sampling; the unfinished rows with greedy ``compact``)."""

    rows: int = 0
    prompt_width: int = 0
    prefill_rows: int = 0  # rows the prefill ran: each distinct prompt once on the fused decoder
    decode_rows: list[int] = field(default_factory=list)
    # set to a list to collect each row's per-token log-probabilities of its tokens under the processed
    # scores it was sampled from (what HF's ``output_scores`` gives, log-softmaxed), up to its first EOS
    logprobs: list[list[float]] | None = None


@torch.no_grad()
def lean_generate(
    model: Any,
    prompt_ids: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    eos_token_ids: Sequence[int],
    pad_token_id: int,
    do_sample: bool = True,
    temperature: float | None = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    compact: bool = False,
    pad_to_multiple_of: int | None = None,
    stats: LeanStats | None = None,
    fused: bool = False,
    trim: bool = False,
) -> list[list[int]]:
    """Completions of ``prompt_ids`` (one per row), each up to and including its first EOS, without
    padding: what TRL's ``_generate_single_turn`` returns from HF ``generate`` for the same rows.

    Prompts are left-padded with ``pad_token_id`` (to a multiple of ``pad_to_multiple_of``, as TRL
    pads them). ``compact`` drops finished rows from the batch (their random numbers are still drawn).
    ``fused``: decode by :class:`FusedDecoder` (the same model with other roundings; a decode step of
    192 rows of policy S about 3.3 instead of 4.9 ms), each distinct prompt prefilled once and its
    cache copied to each of its rows (``stats.prefill_rows``), instead of :class:`Decoder` (HF's
    computation, bit for bit, every row its own prefill). ``trim`` (fused only): the fused decoder's
    tokens, logits and log-probabilities bit for bit, computing less (:meth:`FusedDecoder.prefill`
    runs on the prompts' tokens only, :meth:`FusedDecoder.step` over a cache that grows as it fills);
    a run's evaluation about 1.5x faster (``paper-repro bench eval``)."""
    trim = trim and fused
    device = base_model(model).lm_head.weight.device
    rows = len(prompt_ids)
    if rows == 0:
        return []
    width = max(len(p) for p in prompt_ids)
    if pad_to_multiple_of:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    ids, pad, repeat = _left_padded(prompt_ids, width, pad_token_id, fused, device)
    warpers = hf_warpers(do_sample, temperature, top_k, top_p, min_p)
    eos = torch.tensor(list(eos_token_ids), device=device)
    if stats is not None:
        stats.rows, stats.prompt_width, stats.prefill_rows = rows, width, len(ids)

    decoder = (FusedDecoder if fused else Decoder)(model, capacity=max_new_tokens)
    position = (pad.cumsum(-1) - 1).masked_fill(pad == 0, 0)
    if trim:
        logits = decoder.prefill(ids, position, pad)
    else:
        logits = decoder.forward(ids, position, decoder.mask(pad, width))
    position = position[:, -1:]
    if repeat is not None:
        decoder.keep(repeat)
        logits, pad, position = logits[repeat], pad[repeat], position[repeat]
    out = torch.full((rows, max_new_tokens), pad_token_id, dtype=torch.long, device=device)
    logprobs = torch.zeros((rows, max_new_tokens), dtype=torch.float32, device=device)
    alive = torch.arange(rows, device=device)  # the batch's rows (all of them unless compacting)
    unfinished = torch.ones(rows, dtype=torch.long, device=device)
    for step in range(max_new_tokens):
        scores = logits
        for warper in warpers:
            scores = warper(None, scores)  # HF's warpers here read the scores only
        if do_sample and fused:
            tokens = inverse_cdf(F.softmax(scores, dim=-1), rows, alive)
        elif do_sample:
            tokens = multinomial(F.softmax(scores, dim=-1), rows, alive)
        else:
            tokens = torch.argmax(scores, dim=-1)
        tokens = tokens * unfinished + pad_token_id * (1 - unfinished)
        out[alive, step] = tokens
        if stats is not None and stats.logprobs is not None:
            chosen = F.log_softmax(scores, dim=-1).gather(1, tokens[:, None]).squeeze(1)
            logprobs[alive, step] = chosen.to(logprobs.dtype)
        unfinished = unfinished & ~torch.isin(tokens, eos)
        if step + 1 == max_new_tokens or not bool(unfinished.any()):
            break
        left = int(unfinished.sum())
        if compact and left < len(unfinished) and left <= COMPACT_AT * len(unfinished):
            keep = unfinished.nonzero().squeeze(1)
            alive, tokens, unfinished = alive[keep], tokens[keep], unfinished[keep]
            pad, position = pad[keep], position[keep]
            decoder.keep(keep)
        position = position + 1
        if stats is not None:
            stats.decode_rows.append(int(tokens.shape[0]))
        if trim:  # the fused decoder reads the padding of the prompts only
            logits = decoder.step(tokens[:, None], position)
            continue
        pad = torch.cat([pad, pad.new_ones((pad.shape[0], 1))], dim=-1)
        logits = decoder.forward(tokens[:, None], position, decoder.mask(pad, 1))
    return _completions(out, logprobs, eos, stats)


def _left_padded(
    prompt_ids: Sequence[Sequence[int]], width: int, pad_token_id: int, fused: bool, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The prompts to prefill, left-padded to ``width``: their ids and attention mask ``(prefilled,
    width)`` on ``device``, and the prefilled row each prompt reads (None: every prompt its own row).
    ``fused``: each distinct prompt is prefilled once, its cache then repeated for each of its rows."""
    prefill, repeat = list(prompt_ids), None
    if fused:
        first: dict[tuple[int, ...], int] = {}
        inverse = [first.setdefault(tuple(p), len(first)) for p in prompt_ids]
        if len(first) < len(prompt_ids):
            prefill, repeat = [list(p) for p in first], torch.tensor(inverse, device=device)
    ids = torch.full((len(prefill), width), pad_token_id, dtype=torch.long)
    pad = torch.zeros((len(prefill), width), dtype=torch.long)
    for r, p in enumerate(prefill):
        if len(p):
            ids[r, width - len(p) :] = torch.as_tensor(list(p), dtype=torch.long)
            pad[r, width - len(p) :] = 1
    return ids.to(device), pad.to(device), repeat


def _completions(
    out: torch.Tensor, logprobs: torch.Tensor, eos: torch.Tensor, stats: LeanStats | None
) -> list[list[int]]:
    """Each row of ``out`` up to and including its first EOS (the whole row without one); its
    log-probabilities appended to ``stats.logprobs`` when that is kept."""
    completions = []
    is_eos = torch.isin(out, eos)
    for r in range(out.shape[0]):
        hits = is_eos[r].nonzero()
        end = int(hits[0]) + 1 if len(hits) else out.shape[1]
        completions.append(out[r, :end].tolist())
        if stats is not None and stats.logprobs is not None:
            stats.logprobs.append(logprobs[r, :end].tolist())
    return completions


def generate_like(model: Any, generation_config: Any, prompt_ids, **kwargs: Any) -> list[list[int]]:
    """:func:`lean_generate` with the sampling settings of a ``GenerationConfig`` (TRL's)."""
    gc = generation_config
    eos = gc.eos_token_id
    eos = [eos] if isinstance(eos, int) else list(eos or [])
    return lean_generate(
        model,
        prompt_ids,
        max_new_tokens=gc.max_new_tokens,
        eos_token_ids=eos,
        pad_token_id=gc.pad_token_id,
        do_sample=bool(gc.do_sample),
        temperature=gc.temperature,
        top_k=gc.top_k,
        top_p=gc.top_p,
        min_p=gc.min_p,
        **kwargs,
    )
