"""The update's policy forward as a flat, differentiable function of the policy's weights.

With ``update_layout="fused"`` (:class:`paper_repro.ledger.LedgerGRPOTrainer`) the update runs over the
length buckets of :mod:`paper_repro.sampler.buckets`, and each bucket's forward is :class:`FusedUpdateForward`
instead of HF's model forward with TRL's fused LM head. It computes the same model, with the LoRA
adapters unmerged and trainable, in fewer and larger ops, and autograd takes the backward through it:

* each layer's q/k/v and gate/up base projections are one matmul each, and so are their adapters'
  ``A`` projections; each adapter's ``B`` adds PEFT's ``B(A x) * scaling`` into its projection's
  columns of the base output, and the backward takes the rank-r products in the layouts MKL runs
  fast (:class:`_LoRALinear`);
* rotary is applied to queries and keys at once, the attention scale folded into the queries' tables
  (:func:`paper_repro.sampler.rotary_tables`);
* attention is two batched matmuls, a causal additive mask and a softmax (no repeated key heads):
  on the cpu-tiny policies, a bucket of 20-26 rows x 58-92 positions, faster than the CPU flash kernel
  HF's ``sdpa`` runs, forward and backward;
* the LM head scores the completion positions only, and the log-probabilities are a ``log_softmax``
  over the whole vocabulary (50 entries on the cpu-tiny policies). TRL's fused head tiles the
  vocabulary in chunks of 32,768 columns and, off Triton, allocates a fresh ``(positions, 32768)``
  buffer on each call (forward, and again in backward): its head product took 2.5-3 ms in a run,
  against 0.12 ms into a buffer as wide as the vocabulary (a fresh 8192-column buffer already costs
  3.0 ms, a 4096-column one 0.12 ms: by all appearances pages mapped and faulted in anew past glibc's
  mmap threshold).

It takes the same tokens in the same contexts as TRL's forward: the log-probabilities, entropies and
LoRA gradients match TRL's padded forward to float rounding (``tests/test_buckets.py``). The entropy
is computed detached, as TRL's head gives it (no gradient flows through it; TRL uses it for logging and
the high-entropy token mask). What it does not compute as HF does is refused by :func:`unsupported`,
and the trainer then runs HF's forward over the same buckets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

from paper_repro.sampler.support import unsupported as _sampler_unsupported
from paper_repro.sampler.weights import (
    Unsupported,
    base_model,
    norm_weights,
    projection,
    rms_norm,
    rotary_tables,
)


def unsupported(model: Any) -> str | None:
    """Why :class:`FusedUpdateForward` cannot compute this model's forward (None: it can)."""
    why = _sampler_unsupported(model, fused=True)
    if why is not None:
        return why
    config = base_model(model).config
    for key in ("final_logit_softcapping", "logit_scale", "attn_logit_softcapping"):
        if getattr(config, key, None) is not None:
            return f"{key} set"
    if getattr(config, "attention_dropout", 0.0):
        return "attention dropout"
    return None


@dataclass(frozen=True)
class _Group:
    """Projections that read the same input: their base weights concatenated (frozen), their adapters'
    ``A`` concatenated, and each adapter's ``B`` (trainable: autograd reaches PEFT's parameters) with
    the output columns of its projection (``spans``: first column, width, rank)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    lora_a: torch.Tensor | None
    lora_bs: tuple[torch.Tensor, ...]
    spans: tuple[tuple[int, int, int], ...]
    sizes: tuple[int, ...]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.lora_a is None:
            return F.linear(x, self.weight, self.bias)
        if all(t.dtype == x.dtype for t in (self.weight, self.lora_a, *self.lora_bs)):
            return _LoRALinear.apply(x, self.weight, self.bias, self.lora_a, self.spans, *self.lora_bs)
        y = F.linear(x, self.weight, self.bias)  # mixed dtypes: as PEFT casts them
        xa = F.linear(x.to(self.lora_a.dtype), self.lora_a)
        parts, rank_start = [], 0
        for (start, width, rank), lora_b in zip(self.spans, self.lora_bs, strict=True):
            delta = F.linear(xa[..., rank_start : rank_start + rank], lora_b).to(y.dtype)
            parts.append(F.pad(delta, (start, y.shape[-1] - start - width)))
            rank_start += rank
        return y + sum(parts)


class _LoRALinear(torch.autograd.Function):
    """``x W^T + b`` plus, for each adapter, ``(x A_i^T) B_i^T`` added to its projection's columns: a
    group of base linears and their adapters as PEFT computes them (scaling folded into ``B``), with a
    backward that takes the rank-r products in the layouts MKL runs fast. Autograd's own backward of
    ``F.linear`` computes ``dy B`` as ``(n, out) @ (out, r)`` and ``dB`` as ``dy^T (x A^T)``,
    ``(out, n) @ (n, r)``: at rank 8, 650-700 us each on a 1656 x 352 output, against 140-160 us for the
    same products as ``(B^T dy^T)^T`` and ``((x A^T)^T dy)^T``. Its matmuls are those of PEFT's forward
    and backward, FLOP for FLOP."""

    @staticmethod
    def forward(ctx, x, weight, bias, lora_a, spans, *lora_bs):
        x2 = x.reshape(-1, x.shape[-1])
        xa = x2 @ lora_a.t()
        y = x2 @ weight.t() if bias is None else torch.addmm(bias, x2, weight.t())
        rank_start = 0
        for (start, width, rank), lora_b in zip(spans, lora_bs, strict=True):
            cols = y[:, start : start + width]
            torch.addmm(cols, xa[:, rank_start : rank_start + rank], lora_b.t(), out=cols)
            rank_start += rank
        ctx.save_for_backward(x2, xa, weight, lora_a, *lora_bs)
        ctx.spans, ctx.has_bias = spans, bias is not None
        return y.view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad):
        x2, xa, weight, lora_a, *lora_bs = ctx.saved_tensors
        g = grad.reshape(-1, weight.shape[0])
        need_x, need_w, need_b, need_a, _, *need_bs = ctx.needs_input_grad
        g_xa_t = xa.new_empty((xa.shape[1], xa.shape[0]))  # the gradient of x A^T, transposed
        grad_bs = []
        rank_start = 0
        for (start, width, rank), lora_b, need in zip(ctx.spans, lora_bs, need_bs, strict=True):
            g_cols = g[:, start : start + width]
            torch.mm(lora_b.t(), g_cols.t(), out=g_xa_t[rank_start : rank_start + rank])
            grad_bs.append((xa[:, rank_start : rank_start + rank].t() @ g_cols).t() if need else None)
            rank_start += rank
        grad_x = grad_w = grad_b = grad_a = None
        if need_x:
            grad_x = torch.addmm(g @ weight, g_xa_t.t(), lora_a).view(*grad.shape[:-1], x2.shape[1])
        if need_w:
            grad_w = g.t() @ x2
        if need_b and ctx.has_bias:
            grad_b = g.sum(0)
        if need_a:
            grad_a = g_xa_t @ x2
        return grad_x, grad_w, grad_b, grad_a, None, *grad_bs


def _group(modules: Sequence[Any], float32: bool = False) -> _Group:
    """``modules`` (linear layers, plain or PEFT LoRA) as one :class:`_Group` (``float32``: its weights
    cast to float32)."""
    projections = [projection(m) for m in modules]
    if float32:
        projections = [_float32(p) for p in projections]
    sizes = tuple(p.weight.shape[0] for p in projections)
    weight = torch.cat([p.weight for p in projections]) if len(projections) > 1 else projections[0].weight
    biases = [p.bias for p in projections]
    bias = None
    if any(b is not None for b in biases):
        zeros = [p.weight.new_zeros(p.weight.shape[0]) for p in projections]
        bias = torch.cat([z if b is None else b for z, b in zip(zeros, biases, strict=True)])
    a_parts, lora_bs, spans = [], [], []
    start = 0
    for p, size in zip(projections, sizes, strict=True):
        for a_w, a_b, b_w, b_b, scaling in p.loras:
            if a_b is not None or b_b is not None:
                raise Unsupported("LoRA adapters with biases")
            a_parts.append(a_w)
            lora_bs.append(b_w if scaling is None else b_w * scaling)
            spans.append((start, size, a_w.shape[0]))
        start += size
    if not a_parts:
        return _Group(weight, bias, None, (), (), sizes)
    lora_a = torch.cat(a_parts) if len(a_parts) > 1 else a_parts[0]
    return _Group(weight, bias, lora_a, tuple(lora_bs), tuple(spans), sizes)


def _float32(p: Any) -> Any:
    """A projection's weights, biases and adapters cast to float32 (``cast_lm_head_to_fp32``)."""

    def cast(t: Any) -> Any:
        return t.float() if isinstance(t, torch.Tensor) else t

    return replace(
        p, weight=p.weight.float(), bias=cast(p.bias), loras=tuple(tuple(map(cast, lo)) for lo in p.loras)
    )


@dataclass(frozen=True)
class _Shape:
    rows: int
    width: int
    heads: int
    kv: int
    dim: int


def _layer(
    layer: Any, shape: _Shape, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor, h: torch.Tensor
) -> torch.Tensor:
    """One decoder layer (HF's Qwen2/Llama layer, PEFT's adapters) on ``h``, ``(rows, width, hidden)``."""
    rows, width, heads, kv, dim = shape.rows, shape.width, shape.heads, shape.kv, shape.dim
    rep = heads // kv
    a, m = layer.self_attn, layer.mlp
    x = rms_norm(h, norm_weights(layer.input_layernorm))
    qkv = _group([a.q_proj, a.k_proj, a.v_proj])(x).view(rows, width, heads + 2 * kv, dim)
    qk = qkv[:, :, : heads + kv]
    qk = qk * cos + qk.roll(dim // 2, dims=-1) * sin
    # (rows, kv, rep * width, dim): each key head's query heads, then positions
    q = qk[:, :, :heads].reshape(rows, width, kv, rep, dim).permute(0, 2, 3, 1, 4)
    q = q.reshape(rows, kv, rep * width, dim)
    k = qk[:, :, heads:].permute(0, 2, 3, 1)  # (rows, kv, dim, width)
    v = qkv[:, :, heads + kv :].transpose(1, 2)  # (rows, kv, width, dim)
    scores = torch.matmul(q, k).view(rows, kv, rep, width, width) + mask
    probs = F.softmax(scores.view(rows, kv, rep * width, width), dim=-1, dtype=torch.float32).to(v.dtype)
    out = torch.matmul(probs, v).view(rows, kv, rep, width, dim).permute(0, 3, 1, 2, 4)
    h = h + _group([a.o_proj])(out.reshape(rows, width, heads * dim))
    x = rms_norm(h, norm_weights(layer.post_attention_layernorm))
    gate_up = _group([m.gate_proj, m.up_proj])
    gate, up = gate_up(x).split(list(gate_up.sizes), dim=-1)
    return h + _group([m.down_proj])(m.act_fn(gate) * up)


class FusedUpdateForward:
    """``forward(ids, labels)`` for :func:`paper_repro.sampler.buckets.bucketed_logps`: the per-token log-
    probabilities (and detached entropies) of the policy's forward over rows whose real tokens start at
    column 0, position ``t`` scoring the label at ``t + 1`` (0 where that label is ``-100``), as TRL's
    fused LM head gives them (``temperature``: the logits are divided by it). The weights and adapters
    are read at each call, so it follows the adapters' updates and PEFT's adapter switches."""

    def __init__(self, model: Any, temperature: float = 1.0, head_in_float32: bool = False) -> None:
        why = unsupported(model)
        if why is not None:
            raise ValueError(f"the fused update forward cannot compute this model: {why}")
        self.model = model
        self.temperature = temperature
        self.head_in_float32 = head_in_float32

    def __call__(self, ids: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        lm = base_model(self.model)
        config, inner = lm.config, lm.model
        attn = inner.layers[0].self_attn
        heads, kv, dim = config.num_attention_heads, config.num_key_value_heads, attn.head_dim
        rows, width = ids.shape
        embed = inner.embed_tokens.weight
        cos, sin = rotary_tables(inner.rotary_emb, embed, width, heads, kv, attn.scaling)
        cos, sin = cos[None], sin[None]  # (1, width, heads + kv, dim): every row starts at position 0
        causal = torch.ones(width, width, dtype=torch.bool, device=ids.device).tril()
        mask = torch.zeros((width, width), dtype=embed.dtype, device=ids.device)
        mask.masked_fill_(~causal, torch.finfo(embed.dtype).min)
        # the module itself, so that its hooks run (PEFT's enable_input_require_grads under checkpointing)
        h = inner.embed_tokens(ids)
        shape = _Shape(rows, width, heads, kv, dim)
        for layer in inner.layers[: config.num_hidden_layers]:
            if getattr(layer, "gradient_checkpointing", False) and layer.training and torch.is_grad_enabled():
                # as HF checkpoints its decoder layers: the layer's forward is replayed in backward
                h = layer._gradient_checkpointing_func(partial(_layer, layer, shape, cos, sin, mask), h)
            else:
                h = _layer(layer, shape, cos, sin, mask, h)
        h = rms_norm(h, norm_weights(inner.norm))
        targets = labels[:, 1:]
        scored = targets != -100
        states = h[:, :-1][scored]
        if self.head_in_float32:
            with torch.autocast(states.device.type, enabled=False):
                logits = _group([lm.lm_head], float32=True)(states.float())
        else:
            logits = _group([lm.lm_head])(states)
        logits = logits.float() / self.temperature
        logp = F.log_softmax(logits, dim=-1)
        chosen = logp.gather(1, targets[scored][:, None]).squeeze(1)
        with torch.no_grad():
            entropy = -(logp.exp() * logp).sum(-1)
        log_probs = chosen.new_zeros(scored.shape).masked_scatter(scored, chosen)
        entropies = entropy.new_zeros(scored.shape).masked_scatter(scored, entropy)
        return log_probs, entropies
