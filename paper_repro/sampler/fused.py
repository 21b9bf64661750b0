"""The fused decoder: :class:`FusedDecoder` (``lean_generate(fused=True)``), HF's model with other
roundings and far fewer ops.

LoRA merged into the weights (:func:`merge_flops`: what the merge costs), one matmul for q/k/v and one
for gate/up, rotary on queries and keys at once, attention as two batched matmuls over the cache, and
each distinct prompt prefilled once for all the rows that share it (TRL's G rows per prompt). Its
tokens are drawn by inverting the cumulative distribution at one uniform draw per row
(:func:`paper_repro.sampler.sampling.inverse_cdf`), the distribution ``multinomial`` draws from: HF's
distribution, not HF's draws. ``tests/test_sampler.py`` checks greedy outputs
identical to HF generate, sampled tokens' log-probabilities within 1e-4 of an HF forward, and the
draws against HF's processed probabilities.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from paper_repro.sampler.exact import kept
from paper_repro.sampler.weights import (
    Projection,
    Unsupported,
    base_model,
    linears,
    lora_biases,
    norm_weights,
    projection,
    rms_norm,
    rotary_tables,
)


def _merged(p: Projection) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``p``'s weight with its LoRA adapters merged in (``W + scaling * B A``, what PEFT's ``merge``
    computes) and its bias: one matmul per projection instead of three."""
    if lora_biases(p):
        raise Unsupported("LoRA adapters with biases")
    weight = p.weight
    for a_w, _, b_w, _, scaling in p.loras:
        delta = b_w.to(a_w.dtype) @ a_w
        weight = weight + (delta if scaling is None else delta * scaling).to(weight.dtype)
    return weight, p.bias


def merge_flops(model: Any) -> float:
    """Matmul FLOPs of merging the active LoRA adapters into the weights (``B A`` per projection), what
    :class:`FusedDecoder` computes once per :func:`lean_generate` call."""
    total = 0.0
    for module in linears(base_model(model)):
        for a_w, _, b_w, _, _ in projection(module).loras:
            total += 2.0 * a_w.shape[0] * a_w.shape[1] * b_w.shape[0]
    return total


@dataclass(frozen=True)
class _FusedLayer:
    in_norm: tuple[torch.Tensor, float]
    post_norm: tuple[torch.Tensor, float]
    qkv: tuple[torch.Tensor, torch.Tensor | None]  # q, k, v merged, concatenated
    o: torch.Tensor  # transposed, for addmm
    o_bias: torch.Tensor | None
    gate_up: torch.Tensor  # gate and up merged, concatenated
    gate_up_bias: torch.Tensor | None
    down: torch.Tensor  # transposed, for addmm
    down_bias: torch.Tensor | None
    act: Any


class FusedDecoder:
    """The model's forward as few ops as it takes: the same model (the same weights, adapters, rotary
    embedding, grouped-query attention and norms), computed with other roundings than HF's. The LoRA
    adapters are merged into the weights, each layer's q/k/v and gate/up projections are one matmul,
    the attention scale is folded into the rotary tables of the queries, rotary is applied to queries and keys at once, and attention over the preallocated cache
    is two batched matmuls and a softmax with an additive padding mask (no repeated keys). On the
    cpu-tiny policies that takes a decode step from dispatch-bound to bound by its (tiny) matmuls.

    Its logits match HF's to float rounding, not bit for bit: a sampled token can differ from HF
    generate's from the same random state where two candidates are within rounding of each other
    (``tests/test_sampler.py`` checks greedy outputs identical and per-token log-probabilities within
    1e-4 of an HF forward on the shipped policies)."""

    def __init__(self, model: Any, capacity: int) -> None:
        lm = base_model(model)
        config = lm.config
        inner = lm.model
        self.embed = inner.embed_tokens.weight
        self.rotary = inner.rotary_emb
        self.final_norm = norm_weights(inner.norm)
        self.head = _merged(projection(lm.lm_head))
        attn = inner.layers[0].self_attn
        self.head_dim = attn.head_dim
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.scaling = attn.scaling
        self.layers = []
        for layer in inner.layers[: config.num_hidden_layers]:
            a, m = layer.self_attn, layer.mlp
            q, k, v = (_merged(projection(getattr(a, f"{n}_proj"))) for n in "qkv")
            biases = [b for _, b in (q, k, v)]
            if any(b is None for b in biases) and not all(b is None for b in biases):
                biases = [
                    w.new_zeros(w.shape[0]) if b is None else b
                    for (w, _), b in zip((q, k, v), biases, strict=True)
                ]
            qkv_bias = None if biases[0] is None else torch.cat(biases)
            o_w, o_b = _merged(projection(a.o_proj))
            g_w, g_b = _merged(projection(m.gate_proj))
            u_w, u_b = _merged(projection(m.up_proj))
            if (g_b is None) != (u_b is None):
                raise Unsupported("a bias on only one of gate and up")
            d_w, d_b = _merged(projection(m.down_proj))
            self.layers.append(
                _FusedLayer(
                    in_norm=norm_weights(layer.input_layernorm),
                    post_norm=norm_weights(layer.post_attention_layernorm),
                    qkv=(torch.cat([q[0], k[0], v[0]]), qkv_bias),
                    o=o_w.t(), o_bias=o_b,
                    gate_up=torch.cat([g_w, u_w]), gate_up_bias=None if g_b is None else torch.cat([g_b, u_b]),
                    down=d_w.t(), down_bias=d_b,
                    act=m.act_fn,
                )
            )  # fmt: skip
        self.intermediate = self.layers[0].gate_up.shape[0] // 2
        self.capacity = capacity
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.length = 0
        self.additive: torch.Tensor | None = None  # (rows, width + capacity): 0 attended, min padded
        self.cos: torch.Tensor | None = None  # (positions, heads + kv_heads, head_dim) rotary tables
        self.sin: torch.Tensor | None = None

    def mask(self, pad: torch.Tensor, q_length: int) -> torch.Tensor:
        """The padding of the rows so far (``pad``: 1 real, 0 padding), as this decoder reads it."""
        return pad

    def forward(self, ids: torch.Tensor, position_ids: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        """Float32 logits of the last position of each row; appends the step's keys and values."""
        rows, width = ids.shape
        first = not self.keys
        if first:
            self.cos, self.sin = rotary_tables(
                self.rotary, self.embed, width + self.capacity, self.heads, self.kv_heads, self.scaling
            )
            minimum = torch.finfo(self.embed.dtype).min
            self.additive = self.embed.new_zeros((rows, width + self.capacity))
            self.additive[:, :width].masked_fill_(pad == 0, minimum)
        h = F.embedding(ids, self.embed)
        cos, sin = self.cos[position_ids], self.sin[position_ids]  # (rows, width, heads + kv, dim)
        heads, kv, dim, half = self.heads, self.kv_heads, self.head_dim, self.head_dim // 2
        rep = heads // kv
        start, end = self.length, self.length + width
        if width == 1:
            mask = self.additive[:, None, None, :end]
        else:  # the prefill: causal within the prompt, padding masked
            causal = torch.ones(width, width, dtype=torch.bool, device=ids.device).tril()
            allowed = causal[None] & (pad[:, None, :] != 0)
            mask = torch.zeros(allowed.shape, dtype=h.dtype, device=ids.device)
            mask.masked_fill_(~allowed, torch.finfo(h.dtype).min)
            mask = mask[:, None, None]  # (rows, 1, 1, width, width)
        hidden = h.shape[-1]
        for i, layer in enumerate(self.layers):
            x = rms_norm(h, layer.in_norm)
            qkv = F.linear(x, *layer.qkv).view(rows, width, heads + 2 * kv, dim)
            qk = qkv[:, :, : heads + kv]
            qk = qk * cos + qk.roll(half, dims=-1) * sin
            # (rows, kv, rep * width, dim): each key head's query heads, then positions
            q = qk[:, :, :heads].reshape(rows, width, kv, rep, dim).permute(0, 2, 3, 1, 4)
            q = q.reshape(rows, kv, rep * width, dim)
            if first:  # keys stored transposed, (rows, kv, dim, positions): the score matmul reads them so
                self.keys.append(qk.new_empty((rows, kv, dim, width + self.capacity)))
                self.values.append(qk.new_empty((rows, kv, width + self.capacity, dim)))
            self.keys[i][:, :, :, start:end] = qk[:, :, heads:].permute(0, 2, 3, 1)
            self.values[i][:, :, start:end] = qkv[:, :, heads + kv :].transpose(1, 2)
            scores = torch.matmul(q, self.keys[i][:, :, :, :end])
            if width == 1:
                scores = scores + mask
            else:
                scores = (scores.view(rows, kv, rep, width, end) + mask).view(rows, kv, rep * width, end)
            out = torch.matmul(
                F.softmax(scores, dim=-1), self.values[i][:, :, :end]
            )  # (rows, kv, rep * width, dim)
            out = (
                out.view(rows, kv, rep, width, dim).permute(0, 3, 1, 2, 4).reshape(rows * width, heads * dim)
            )
            h = h.reshape(rows * width, hidden)
            h = (
                torch.addmm(h, out, layer.o)
                if layer.o_bias is None
                else h + F.linear(out, layer.o.t(), layer.o_bias)
            )
            x = rms_norm(h, layer.post_norm)
            gate, up = F.linear(x, layer.gate_up, layer.gate_up_bias).split(self.intermediate, dim=-1)
            act = layer.act(gate) * up
            h = (
                torch.addmm(h, act, layer.down)
                if layer.down_bias is None
                else h + F.linear(act, layer.down.t(), layer.down_bias)
            )
            h = h.view(rows, width, hidden)
        self.length = end
        last = rms_norm(h[:, -1], self.final_norm)
        return F.linear(last, *self.head).float()

    def keep(self, rows: torch.Tensor) -> None:
        """Keep the cached rows ``rows`` (copying the filled part only): dropping finished rows, or
        repeating a shared prompt's prefill for each of its rows."""
        self.keys = [kept(k, rows, self.length, axis=3) for k in self.keys]
        self.values = [kept(v, rows, self.length) for v in self.values]
        self.additive = self.additive[rows]
