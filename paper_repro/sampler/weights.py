"""The policy's weights as plain tensors, as the lean sampler's decoders and
:mod:`paper_repro.sampler.fused_update` read them.

:func:`projection` reads a linear layer, plain or PEFT LoRA (its active adapters' A and B, a
power-of-two scaling folded into B exactly); what the decoders do not compute as PEFT does (LoRA on
another layer type, DoRA, dropout in training mode ...) raises :class:`Unsupported`. :func:`norm_weights`
and :func:`rms_norm` are HF's RMSNorm, op for op; :func:`rotary_tables` the model's rotary cos and sin
for queries and keys at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch


def base_model(model: Any) -> Any:
    """The ``*ForCausalLM`` under a PEFT wrapper (or the model itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


class Unsupported(ValueError):
    pass


def linears(lm: Any):
    """The model's linear layers: each layer's q/k/v/o and gate/up/down projections, then the LM head."""
    for layer in lm.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        yield from (
            attn.q_proj,
            attn.k_proj,
            attn.v_proj,
            attn.o_proj,
            mlp.gate_proj,
            mlp.up_proj,
            mlp.down_proj,
        )
    yield lm.lm_head


@dataclass(frozen=True)
class Projection:
    weight: torch.Tensor
    bias: torch.Tensor | None
    # (lora_A weight, lora_A bias, lora_B weight, lora_B bias, scaling) per active adapter
    loras: tuple[tuple[Any, ...], ...] = ()


def projection(module: Any) -> Projection:
    """A linear layer (plain, or PEFT LoRA as PEFT computes it) as weights."""
    lora_a = getattr(module, "lora_A", None)
    if isinstance(lora_a, torch.nn.ModuleDict):
        base = module.base_layer
        if not isinstance(base, torch.nn.Linear):
            raise Unsupported(f"LoRA on {type(base).__name__}")
        if module.disable_adapters or module.merged or not len(lora_a):
            if module.disable_adapters and module.merged:
                raise Unsupported("merged adapters with adapters disabled")
            return Projection(base.weight, base.bias)
        loras = []
        for name in module.active_adapters:
            if name not in lora_a:
                continue
            if name in getattr(module, "lora_variant", {}) or getattr(module, "use_dora", {}).get(name):
                raise Unsupported("a LoRA variant (DoRA ...)")
            dropout = module.lora_dropout[name]
            if not isinstance(dropout, torch.nn.Identity) and not (
                isinstance(dropout, torch.nn.Dropout) and (dropout.p == 0 or not dropout.training)
            ):
                raise Unsupported("LoRA dropout in training mode")
            a, b = lora_a[name], module.lora_B[name]
            loras.append((a.weight, a.bias, *_exact_scale(b.weight, b.bias, module.scaling[name])))
        return Projection(base.weight, base.bias, tuple(loras))
    if type(module) is not torch.nn.Linear:
        raise Unsupported(f"projection {type(module).__name__}")
    return Projection(module.weight, module.bias)


def _exact_scale(b_w: torch.Tensor, b_b: torch.Tensor | None, scaling: float) -> tuple[Any, ...]:
    """``lora_B`` with a power-of-two ``scaling`` folded in: ``(B a) * 2^k == (2^k B) a`` bit for bit
    (scaling by a power of two is exact in floating point, short of overflow), one op fewer per step."""
    mantissa, _ = math.frexp(scaling)
    if scaling > 0 and mantissa == 0.5 and b_b is None and torch.isfinite(b_w * scaling).all():
        return b_w * scaling, None, None
    return b_w, b_b, scaling


def lora_biases(p: Projection) -> bool:
    """Whether an adapter of ``p`` has a bias (``lora_bias``), which the fused decoder does not merge."""
    return any(a_b is not None or b_b is not None for _, a_b, _, b_b, _ in p.loras)


def norm_weights(module: Any) -> tuple[torch.Tensor, float]:
    eps = getattr(module, "variance_epsilon", None)
    if eps is None:
        eps = module.eps
    return module.weight, eps


def rms_norm(h: torch.Tensor, norm: tuple[torch.Tensor, float]) -> torch.Tensor:
    # HF's Qwen2RMSNorm / LlamaRMSNorm, op for op
    weight, eps = norm
    dtype = h.dtype
    h = h.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * h.to(dtype)


def rotary_tables(
    rotary: Any, embed: torch.Tensor, positions: int, heads: int, kv_heads: int, scaling: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's rotary cos and sin (``rotary``: its rotary module) of positions ``0 .. positions - 1``,
    ``(positions, heads + kv_heads, head_dim)``, for queries and keys at once: the queries' carry the
    attention scale ``scaling``, and the sines carry ``rotate_half``'s signs, so that
    ``rotate_half(x) * sin`` is ``x.roll(head_dim // 2) * sin``."""
    ids = torch.arange(positions, device=embed.device)[None]
    with torch.no_grad():
        cos, sin = rotary(embed[:1][None], ids)
    cos, sin = cos[0].float(), sin[0].float()
    head_dim = cos.shape[-1]
    sign = torch.ones(head_dim, device=cos.device)
    sign[: head_dim // 2] = -1
    scale = torch.ones(heads + kv_heads, device=cos.device)
    scale[:heads] = scaling
    cos = cos[:, None, :] * scale[None, :, None]
    sin = sin[:, None, :] * sign * scale[None, :, None]
    return cos.to(embed.dtype), sin.to(embed.dtype)
