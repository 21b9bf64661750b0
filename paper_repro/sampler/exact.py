"""The HF-exact decoder: :class:`Decoder`, the lean sampler's default.

It runs HF's computation bit for bit: the same ops on the same shapes, in the same order, as HF's
Qwen2/Llama forward and PEFT's unmerged LoRA layers (base linear, then ``lora_B(lora_A(x)) * scaling``
added), the model's own rotary module and HF's own attention functions (sdpa or eager) with the masks
HF builds (none when a batch has no padding, as HF drops them), over a preallocated KV cache holding
what ``DynamicCache`` holds. With HF's sampling (:mod:`paper_repro.sampler.sampling`) it reproduces HF
``generate`` token for token on CPU from the same random state, and consumes the global torch RNG as
HF does (``tests/test_sampler.py`` checks both on the shipped policies, with LoRA adapters, sampled and
greedy). :func:`kept` keeps a cache's rows, for both decoders.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from paper_repro.sampler.weights import Projection, base_model, norm_weights, projection, rms_norm


def _linear(x: torch.Tensor, p: Projection, base: torch.Tensor | None = None) -> torch.Tensor:
    """``p`` applied to ``x`` as PEFT computes it; ``base``: its base output, computed already."""
    y = F.linear(x, p.weight, p.bias) if base is None else base
    if not p.loras:
        return y
    dtype = y.dtype
    for a_w, a_b, b_w, b_b, scaling in p.loras:
        xa = x if x.dtype == a_w.dtype else x.to(a_w.dtype)
        if scaling is None:  # folded into b_w, exactly (a power of two)
            y = y + F.linear(F.linear(xa, a_w, a_b), b_w, b_b)
        else:
            y = y + F.linear(F.linear(xa, a_w, a_b), b_w, b_b) * scaling
    return y.to(dtype)


@dataclass(frozen=True)
class _Fused:
    """Projections that read the same input, their base weights concatenated into one matmul (each
    output column is the same dot product as in its own matmul; ``tests/test_sampler.py`` checks the
    outputs are bit-identical), their LoRA adapters applied one by one."""

    parts: tuple[Projection, ...]
    weight: torch.Tensor
    bias: torch.Tensor | None
    sizes: tuple[int, ...]

    @classmethod
    def of(cls, parts: Sequence[Projection]) -> _Fused:
        biases = [p.bias for p in parts]
        if any(b is None for b in biases) and not all(b is None for b in biases):
            biases = [
                p.weight.new_zeros(p.weight.shape[0]) if b is None else b
                for p, b in zip(parts, biases, strict=True)
            ]
        bias = None if biases[0] is None else torch.cat(biases)
        weight = torch.cat([p.weight for p in parts])
        return cls(tuple(parts), weight, bias, tuple(p.weight.shape[0] for p in parts))

    def __call__(self, x: torch.Tensor) -> list[torch.Tensor]:
        bases = F.linear(x, self.weight, self.bias).split(self.sizes, dim=-1)
        return [_linear(x, p, base) for p, base in zip(self.parts, bases, strict=True)]


@dataclass(frozen=True)
class _Layer:
    attn: Any  # the attention module (HF's attention functions read its attributes)
    in_norm: tuple[torch.Tensor, float]
    post_norm: tuple[torch.Tensor, float]
    qkv: _Fused
    o: Projection
    gate_up: _Fused
    down: Projection
    act: Any


class Decoder:
    """The model's forward as a flat function of its weights, with a concatenated KV cache."""

    def __init__(self, model: Any, capacity: int) -> None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        lm = base_model(model)
        self.config = lm.config
        inner = lm.model
        self.embed = inner.embed_tokens.weight
        self.rotary = inner.rotary_emb
        self.final_norm = norm_weights(inner.norm)
        self.head = projection(lm.lm_head)
        self.layers = [
            _Layer(
                attn=layer.self_attn,
                in_norm=norm_weights(layer.input_layernorm),
                post_norm=norm_weights(layer.post_attention_layernorm),
                qkv=_Fused.of([projection(getattr(layer.self_attn, f"{n}_proj")) for n in "qkv"]),
                o=projection(layer.self_attn.o_proj),
                gate_up=_Fused.of([projection(layer.mlp.gate_proj), projection(layer.mlp.up_proj)]),
                down=projection(layer.mlp.down_proj),
                act=layer.mlp.act_fn,
            )
            for layer in inner.layers[: self.config.num_hidden_layers]
        ]
        self.head_dim = self.layers[0].attn.head_dim
        self.eager = self.config._attn_implementation == "eager"
        if self.eager:
            self.attention = sys.modules[type(self.layers[0].attn).__module__].eager_attention_forward
        else:
            self.attention = sdpa_attention_forward
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.capacity = capacity  # decode steps the cache has room for after the prompt
        self.length = 0

    def forward(
        self, ids: torch.Tensor, position_ids: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Float32 logits of the last position of each row; appends the step's keys and values."""
        h = F.embedding(ids, self.embed)
        cos, sin = self.rotary(h, position_ids)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        shape = (*ids.shape, -1, self.head_dim)
        first = not self.keys
        half = self.head_dim // 2
        for i, layer in enumerate(self.layers):
            residual = h
            x = rms_norm(h, layer.in_norm)
            q, k, v = (t.reshape(shape).transpose(1, 2) for t in layer.qkv(x))
            q = (q * cos) + (torch.cat((-q[..., half:], q[..., :half]), dim=-1) * sin)
            k = (k * cos) + (torch.cat((-k[..., half:], k[..., :half]), dim=-1) * sin)
            k, v = self._cache(i, k, v, first)
            out, _ = self.attention(layer.attn, q, k, v, mask, dropout=0.0, scaling=layer.attn.scaling)
            out = out.reshape(*ids.shape, -1).contiguous()
            h = residual + _linear(out, layer.o)
            residual = h
            x = rms_norm(h, layer.post_norm)
            gate, up = layer.gate_up(x)
            h = residual + _linear(layer.act(gate) * up, layer.down)
        h = rms_norm(h, self.final_norm)
        return _linear(h[:, -1:, :], self.head)[:, -1].to(copy=True, dtype=torch.float32)

    def _cache(
        self, i: int, k: torch.Tensor, v: torch.Tensor, first: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append a step's keys and values to layer ``i``'s cache; return the cached ones so far.

        The cache is preallocated for ``capacity`` positions and written in place (``DynamicCache``
        concatenates, copying the whole cache every step); attention reads a view of the filled part,
        which holds the same values as the concatenated tensor."""
        if first:
            rows, heads, width, dim = k.shape
            shape = (rows, heads, width + self.capacity, dim)
            self.keys.append(k.new_empty(shape))
            self.values.append(v.new_empty(shape))
            self.length = 0
        start = self.length
        end = start + k.shape[2]
        self.keys[i][:, :, start:end] = k
        self.values[i][:, :, start:end] = v
        if i == len(self.layers) - 1:
            self.length = end
        return self.keys[i][:, :, :end], self.values[i][:, :, :end]

    def keep(self, rows: torch.Tensor) -> None:
        """Drop every cached row not in ``rows`` (copying the filled part only)."""
        self.keys = [kept(k, rows, self.length) for k in self.keys]
        self.values = [kept(v, rows, self.length) for v in self.values]

    def mask(self, pad: torch.Tensor, q_length: int) -> torch.Tensor | None:
        """The 4D mask HF builds from the 2D padding mask ``pad`` for ``q_length`` new positions: none
        under sdpa when nothing is padded, boolean under sdpa, additive float under eager."""
        padded = not bool(pad.all())
        if not padded and not self.eager:
            return None
        kv = pad.shape[1]
        allowed = pad.bool()[:, None, None, :]
        if q_length > 1:
            causal = torch.ones(q_length, kv, dtype=torch.bool, device=pad.device).tril(kv - q_length)
            allowed = allowed & causal[None, None]
        allowed = allowed.expand(pad.shape[0], 1, q_length, kv).contiguous()
        if not self.eager:
            return allowed
        dtype = self.embed.dtype
        return torch.where(allowed, torch.tensor(0.0, device=pad.device, dtype=dtype), torch.finfo(dtype).min)


def kept(cache: torch.Tensor, rows: torch.Tensor, length: int, axis: int = 2) -> torch.Tensor:
    """``cache[rows]`` (rows dropped, or repeated) of a ``(rows, ...)`` cache whose positions run along
    ``axis``, its first ``length`` positions copied."""
    out = cache.new_empty((len(rows), *cache.shape[1:]))
    out.narrow(axis, 0, length).copy_(cache.narrow(axis, 0, length)[rows])
    return out
