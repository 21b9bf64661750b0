"""A lean sampler for small decoder-only policies: HF ``generate``'s sampling, without its per-step work.

On the cpu-tiny policies (hidden size 48-96, three layers) a decode step is bound by Python and
dispatch overhead and by tiny matmuls, not arithmetic: HF ``generate`` spends most of a step in module
calls, PEFT's LoRA wrappers, mask building and its generation loop. :func:`lean_generate` runs the
model as a flat loop over its own weights, with one of two decoders:

* :class:`_Decoder` (the default) runs HF's computation bit for bit: the same ops on the same shapes,
  in the same order, as HF's Qwen2/Llama forward and PEFT's unmerged LoRA layers (base linear, then
  ``lora_B(lora_A(x)) * scaling`` added), the model's own rotary module and HF's own attention
  functions (sdpa or eager) with the masks HF builds (none when a batch has no padding, as HF drops
  them), over a preallocated KV cache holding what ``DynamicCache`` holds. Sampling is HF's: float32
  logits, HF's warpers in HF's order (temperature, top-k, top-p, min-p), ``softmax`` and one
  ``torch.multinomial`` over the whole batch per step (greedy: ``argmax``), finished rows fed the pad
  token, stopping when every row has produced an EOS or at ``max_new_tokens``. So on CPU it
  reproduces HF ``generate`` token for token from the same random state, and consumes the global
  torch RNG as HF does (``tests/test_sampler.py`` checks both on the shipped policies, with LoRA
  adapters, sampled and greedy).
* :class:`_FusedDecoder` (``fused=True``) computes the same model with other roundings and far fewer
  ops: LoRA merged into the weights, one matmul for q/k/v and one for gate/up, rotary
  on queries and keys at once, attention as two batched matmuls over the cache, and each distinct
  prompt prefilled once for all the rows that share it (TRL's G rows per prompt). It samples each
  token by inverting the cumulative distribution at one uniform draw per row (:func:`_inverse_cdf`),
  the distribution ``multinomial`` draws from. Its tokens are HF's distribution, not HF's draws:
  ``tests/test_sampler.py`` checks greedy outputs identical to HF generate, sampled tokens' log-
  probabilities within 1e-4 of an HF forward, and the draws against HF's processed probabilities.

With ``compact=True`` finished rows leave the batch once few enough are still decoding; the random
numbers of the whole batch are still drawn each step, so no row's tokens change. What each step
then runs is reported in :class:`LeanStats`, which the ledger's ``executed`` count reads.

Anything it does not reproduce (another architecture, sliding windows, LoRA dropout or DoRA, LoRA
biases for the fused decoder, a repetition penalty, suppressed tokens, beams ...) is refused by
:func:`unsupported`, and the callers fall back to HF ``generate``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

SAMPLERS = ("hf", "lean", "fused")
# With ``compact``, finished rows are dropped from the batch once at most this share of it is still
# decoding (each drop copies the KV cache's filled part)
COMPACT_AT = 0.75
SUPPORTED_MODEL_TYPES = ("qwen2", "llama")
# GenerationConfig fields the lean loop implements (or that do not change what generate computes here).
_HANDLED = {
    "max_new_tokens", "do_sample", "pad_token_id", "bos_token_id", "eos_token_id", "temperature", "top_p",
    "top_k", "min_p", "repetition_penalty", "cache_implementation", "disable_compile", "use_cache",
    "output_attentions", "output_hidden_states", "transformers_version", "return_dict_in_generate",
    "output_scores", "output_logits", "num_return_sequences", "num_beams",
}  # fmt: skip


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


# ------------------------------------------------------------------------------------- support


def base_model(model: Any) -> Any:
    """The ``*ForCausalLM`` under a PEFT wrapper (or the model itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def unsupported(model: Any, generation_config: Any = None, fused: bool = False) -> str | None:
    """Why :func:`lean_generate` cannot reproduce HF ``generate`` for this model and config (None: it can);
    ``fused``: why it cannot decode it with :class:`_FusedDecoder`."""
    lm = base_model(model)
    config = getattr(lm, "config", None)
    if config is None or getattr(config, "model_type", None) not in SUPPORTED_MODEL_TYPES:
        return (
            f"model type {getattr(config, 'model_type', None)!r} (lean sampler knows {SUPPORTED_MODEL_TYPES})"
        )
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder model"
    if config._attn_implementation not in ("sdpa", "eager"):
        return f"attention implementation {config._attn_implementation!r}"
    layer_types = getattr(config, "layer_types", None) or ["full_attention"]
    if any(t != "full_attention" for t in layer_types) or getattr(config, "use_sliding_window", False):
        return "sliding-window attention"
    if getattr(config, "pretraining_tp", 1) not in (None, 1):
        return "pretraining_tp > 1"
    inner = getattr(lm, "model", None)
    if inner is None or not hasattr(inner, "layers") or not hasattr(lm, "lm_head"):
        return "not a decoder-only *ForCausalLM layout"
    try:
        for module in _linears(lm):
            weights = projection(module)
            if fused and _lora_biases(weights):
                raise Unsupported("LoRA adapters with biases")
    except Unsupported as err:
        return str(err)
    if getattr(lm, "hf_device_map", None) and len(set(lm.hf_device_map.values())) > 1:
        return "model split across devices"
    if generation_config is not None:
        return _unsupported_config(generation_config)
    return None


def _unsupported_config(gc: Any) -> str | None:
    from transformers import GenerationConfig

    default = GenerationConfig()
    for key, value in gc.to_dict().items():
        if key in _HANDLED or key.startswith("_"):
            continue
        if value != getattr(default, key, None):
            return f"generation option {key}={value!r}"
    if gc.repetition_penalty not in (None, 1.0):
        return f"repetition_penalty={gc.repetition_penalty}"
    if (gc.num_beams or 1) != 1 or (gc.num_return_sequences or 1) != 1:
        return "beam search or several sequences per prompt"
    if gc.return_dict_in_generate:
        return "return_dict_in_generate"
    if gc.max_new_tokens is None:
        return "max_new_tokens unset"
    return None


class Unsupported(ValueError):
    pass


def _linears(lm: Any):
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


# ------------------------------------------------------------------------------------- weights


@dataclass(frozen=True)
class _Proj:
    weight: torch.Tensor
    bias: torch.Tensor | None
    # (lora_A weight, lora_A bias, lora_B weight, lora_B bias, scaling) per active adapter
    loras: tuple[tuple[Any, ...], ...] = ()


def projection(module: Any) -> _Proj:
    """A linear layer (plain, or PEFT LoRA as PEFT computes it) as weights."""
    lora_a = getattr(module, "lora_A", None)
    if isinstance(lora_a, torch.nn.ModuleDict):
        base = module.base_layer
        if not isinstance(base, torch.nn.Linear):
            raise Unsupported(f"LoRA on {type(base).__name__}")
        if module.disable_adapters or module.merged or not len(lora_a):
            if module.disable_adapters and module.merged:
                raise Unsupported("merged adapters with adapters disabled")
            return _Proj(base.weight, base.bias)
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
        return _Proj(base.weight, base.bias, tuple(loras))
    if type(module) is not torch.nn.Linear:
        raise Unsupported(f"projection {type(module).__name__}")
    return _Proj(module.weight, module.bias)


def _linear(x: torch.Tensor, p: _Proj, base: torch.Tensor | None = None) -> torch.Tensor:
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


def _exact_scale(b_w: torch.Tensor, b_b: torch.Tensor | None, scaling: float) -> tuple[Any, ...]:
    """``lora_B`` with a power-of-two ``scaling`` folded in: ``(B a) * 2^k == (2^k B) a`` bit for bit
    (scaling by a power of two is exact in floating point, short of overflow), one op fewer per step."""
    mantissa, _ = math.frexp(scaling)
    if scaling > 0 and mantissa == 0.5 and b_b is None and torch.isfinite(b_w * scaling).all():
        return b_w * scaling, None, None
    return b_w, b_b, scaling


@dataclass(frozen=True)
class _Fused:
    """Projections that read the same input, their base weights concatenated into one matmul (each
    output column is the same dot product as in its own matmul; ``tests/test_sampler.py`` checks the
    outputs are bit-identical), their LoRA adapters applied one by one."""

    parts: tuple[_Proj, ...]
    weight: torch.Tensor
    bias: torch.Tensor | None
    sizes: tuple[int, ...]

    @classmethod
    def of(cls, parts: Sequence[_Proj]) -> _Fused:
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
    o: _Proj
    gate_up: _Fused
    down: _Proj
    act: Any


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


class _Decoder:
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
        self.keys = [_kept(k, rows, self.length) for k in self.keys]
        self.values = [_kept(v, rows, self.length) for v in self.values]

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


def _lora_biases(p: _Proj) -> bool:
    """Whether an adapter of ``p`` has a bias (``lora_bias``), which :func:`_merged` does not merge."""
    return any(a_b is not None or b_b is not None for _, a_b, _, b_b, _ in p.loras)


def _merged(p: _Proj) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``p``'s weight with its LoRA adapters merged in (``W + scaling * B A``, what PEFT's ``merge``
    computes) and its bias: one matmul per projection instead of three."""
    if _lora_biases(p):
        raise Unsupported("LoRA adapters with biases")
    weight = p.weight
    for a_w, _, b_w, _, scaling in p.loras:
        delta = b_w.to(a_w.dtype) @ a_w
        weight = weight + (delta if scaling is None else delta * scaling).to(weight.dtype)
    return weight, p.bias


def merge_flops(model: Any) -> float:
    """Matmul FLOPs of merging the active LoRA adapters into the weights (``B A`` per projection), what
    :class:`_FusedDecoder` computes once per :func:`lean_generate` call."""
    total = 0.0
    for module in _linears(base_model(model)):
        for a_w, _, b_w, _, _ in projection(module).loras:
            total += 2.0 * a_w.shape[0] * a_w.shape[1] * b_w.shape[0]
    return total


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


class _FusedDecoder:
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
        self.keys = [_kept(k, rows, self.length, axis=3) for k in self.keys]
        self.values = [_kept(v, rows, self.length) for v in self.values]
        self.additive = self.additive[rows]


def _kept(cache: torch.Tensor, rows: torch.Tensor, length: int, axis: int = 2) -> torch.Tensor:
    """``cache[rows]`` (rows dropped, or repeated) of a ``(rows, ...)`` cache whose positions run along
    ``axis``, its first ``length`` positions copied."""
    out = cache.new_empty((len(rows), *cache.shape[1:]))
    out.narrow(axis, 0, length).copy_(cache.narrow(axis, 0, length)[rows])
    return out


# ------------------------------------------------------------------------------------- sampling


def _warpers(do_sample: bool, temperature, top_k, top_p, min_p) -> list[Any]:
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


def _multinomial(probs: torch.Tensor, rows: int, alive: torch.Tensor) -> torch.Tensor:
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


def _inverse_cdf(
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
) -> list[list[int]]:
    """Completions of ``prompt_ids`` (one per row), each up to and including its first EOS, without
    padding: what TRL's ``_generate_single_turn`` returns from HF ``generate`` for the same rows.

    Prompts are left-padded with ``pad_token_id`` (to a multiple of ``pad_to_multiple_of``, as TRL
    pads them). ``compact`` drops finished rows from the batch (their random numbers are still drawn).
    ``fused``: decode by :class:`_FusedDecoder` (the same model with other roundings; a decode step of
    192 rows of policy S about 3.3 instead of 4.9 ms), each distinct prompt prefilled once and its
    cache copied to each of its rows (``stats.prefill_rows``), instead of :class:`_Decoder` (HF's
    computation, bit for bit, every row its own prefill)."""
    device = base_model(model).lm_head.weight.device
    rows = len(prompt_ids)
    if rows == 0:
        return []
    width = max(len(p) for p in prompt_ids)
    if pad_to_multiple_of:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    prefill, repeat = list(prompt_ids), None
    if fused:  # each distinct prompt is prefilled once, its cache then repeated for each of its rows
        first: dict[tuple[int, ...], int] = {}
        inverse = [first.setdefault(tuple(p), len(first)) for p in prompt_ids]
        if len(first) < rows:
            prefill, repeat = [list(p) for p in first], torch.tensor(inverse, device=device)
    ids = torch.full((len(prefill), width), pad_token_id, dtype=torch.long)
    pad = torch.zeros((len(prefill), width), dtype=torch.long)
    for r, p in enumerate(prefill):
        if len(p):
            ids[r, width - len(p) :] = torch.as_tensor(list(p), dtype=torch.long)
            pad[r, width - len(p) :] = 1
    ids, pad = ids.to(device), pad.to(device)
    warpers = _warpers(do_sample, temperature, top_k, top_p, min_p)
    eos = torch.tensor(list(eos_token_ids), device=device)
    if stats is not None:
        stats.rows, stats.prompt_width, stats.prefill_rows = rows, width, len(prefill)

    decoder = (_FusedDecoder if fused else _Decoder)(model, capacity=max_new_tokens)
    position = (pad.cumsum(-1) - 1).masked_fill(pad == 0, 0)
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
            tokens = _inverse_cdf(F.softmax(scores, dim=-1), rows, alive)
        elif do_sample:
            tokens = _multinomial(F.softmax(scores, dim=-1), rows, alive)
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
        pad = torch.cat([pad, pad.new_ones((pad.shape[0], 1))], dim=-1)
        position = position + 1
        if stats is not None:
            stats.decode_rows.append(int(tokens.shape[0]))
        logits = decoder.forward(tokens[:, None], position, decoder.mask(pad, 1))
    completions = []
    is_eos = torch.isin(out, eos)
    for r in range(rows):
        hits = is_eos[r].nonzero()
        end = int(hits[0]) + 1 if len(hits) else max_new_tokens
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
