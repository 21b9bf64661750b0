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

``lean_generate(trim=True)`` (a run's evaluation) computes the same decoder's results bit for bit
with less work: :meth:`FusedDecoder.prefill` runs the prompts' tokens only (not their padding) and
the last layer at the last positions only, and :meth:`FusedDecoder.step` decodes over a cache that
grows as it fills; ``tests/test_sampler_trim.py`` checks logits, cache, tokens and
log-probabilities against :meth:`FusedDecoder.forward`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from paper_repro.sampler.exact import kept
from paper_repro.sampler.prefill import final_queries, query_groups
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


# FusedDecoder.prefill allocates the cache for this many decode steps; it grows by as many at a time
CACHE_STEP = 16


def _rotated(qk: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, half: int) -> torch.Tensor:
    """:meth:`FusedDecoder.forward`'s ``qk * cos + qk.roll(half, dims=-1) * sin``, the same values
    (the same elementwise products and sum), in two temporaries fewer."""
    rolled = qk.roll(half, dims=-1).mul_(sin)
    return (qk * cos).add_(rolled)


GRAIN = 32768  # torch's at::internal::GRAIN_SIZE: elementwise ops smaller than this run on one thread
# (activation, rows, width, threads, dtype) -> whether _thread_activation is forward's activation there
_SPLIT_CHECKED: dict[tuple, bool] = {}


def _thread_splits(total: int, width: int, threads: int) -> list[tuple[int, int]]:
    """Where torch shares an elementwise op over a ``(total, width)`` tensor between ``threads``
    threads (``at::parallel_for``: ``min(threads, ceil(elements / GRAIN))`` equal shares), as (row,
    column) of each share's start that falls inside a row."""
    elements = total * width
    if threads == 1 or elements < GRAIN:
        return []
    shares = min(threads, -(-elements // GRAIN))
    size = -(-elements // shares)
    return [(b // width, b % width) for b in range(size, elements, size) if b % width]


def _laid_out(act: Any, gate: torch.Tensor, at: torch.Tensor, total: int) -> torch.Tensor:
    """``act(gate)`` of rows ``at`` computed in forward's ``(total, 2 * width)`` layout."""
    width = gate.shape[1]
    full = gate.new_empty((total, 2 * width))
    full[at, :width] = gate
    return act(full[:, :width])[at]


def _thread_activation(act: Any, gate: torch.Tensor, at: torch.Tensor, total: int) -> torch.Tensor:
    """``act(gate)`` of rows ``at`` as forward's ``(total, 2 * width)`` layout computes it on this
    many threads: the rows in blocks under :data:`GRAIN` elements (each on one thread, row by row), the
    rows that the threads' shares split (:func:`_thread_splits`) in their two parts."""
    width = gate.shape[1]
    if gate.stride(0) == width:  # rows one after another: torch would run them as one long row
        gate = gate.new_empty((gate.shape[0], 2 * width))[:, :width].copy_(gate)
    block = max(1, (GRAIN - 1) // width)
    out = torch.cat([act(gate[i : i + block]) for i in range(0, gate.shape[0], block)])
    for row, column in _thread_splits(total, width, torch.get_num_threads()):
        i = int(torch.searchsorted(at, row))
        if i < len(at) and int(at[i]) == row:
            out[i, :column] = act(gate[i, :column])
            out[i, column:] = act(gate[i, column:])
    return out


def _splits_as_forward(act: Any, total: int, width: int, dtype: torch.dtype) -> bool:
    """Whether :func:`_thread_activation` computes every row of a ``(total, 2 * width)`` layout as
    the layout itself does on this many threads, on values the activation rounds otherwise in torch's
    vectorised loop than in its scalar one (so that any element computed in the other loop shows)."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(1 << 16, generator=generator, dtype=dtype)
    strided = x.new_empty((len(x), 2))
    strided[:, 0] = x
    sensitive = x[act(x) != act(strided[:, 0])]  # contiguous: vectorised; strided: scalar
    if not len(sensitive):  # both loops round alike here: where the threads' shares meet is moot
        return True
    pick = torch.randint(len(sensitive), (total, 2 * width), generator=generator)
    values = sensitive[pick]
    with torch.inference_mode():
        return torch.equal(
            _thread_activation(act, values[:, :width], torch.arange(total), total), act(values[:, :width])
        )


def trimmable(tensor: torch.Tensor) -> bool:
    """Whether :meth:`FusedDecoder.prefill` and :meth:`FusedDecoder.step` may compute less than
    :meth:`FusedDecoder.forward` for weights like ``tensor``: float32 on the CPU with torch's MKL, the
    BLAS whose rows :func:`packed_floor` is sized for (and ``tests/test_sampler_trim.py`` checks)."""
    return tensor.device.type == "cpu" and tensor.dtype == torch.float32 and torch.backends.mkl.is_available()


def packed_floor() -> int:
    """The fewest rows :meth:`FusedDecoder.prefill` gives a matmul of the projections and MLPs: 32 per
    torch thread, well above the few rows per thread at which the CPU BLAS rounds a row otherwise."""
    return 32 * max(1, torch.get_num_threads())


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
                    o=o_w.t(),
                    o_bias=o_b,
                    gate_up=torch.cat([g_w, u_w]),
                    gate_up_bias=None if g_b is None else torch.cat([g_b, u_b]),
                    down=d_w.t(),
                    down_bias=d_b,
                    act=m.act_fn,
                )
            )
        self.intermediate = self.layers[0].gate_up.shape[0] // 2
        self.capacity = capacity
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.length = 0
        self.additive: torch.Tensor | None = None  # (rows, width + capacity): 0 attended, min padded
        self.cos: torch.Tensor | None = None  # (positions, heads + kv_heads, head_dim) rotary tables
        self.sin: torch.Tensor | None = None
        # the first layer's q/k/v projection of each token of the vocabulary (prefill and step): it
        # reads the token's embedding only
        self.first_qkv: torch.Tensor | None = None

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

    def prefill(self, ids: torch.Tensor, position_ids: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        """:meth:`forward`'s first call (the left-padded prompts) computing only what decoding reads,
        with its results bit for bit: the logits of the last positions and the keys and values of
        the prompts' tokens (``lean_generate(trim=True)``).

        :meth:`forward` runs every layer on every position of the padded batch. Here the projections,
        norms and MLPs run on the prompts' tokens only (the first layer's projection is read from
        :meth:`_first_qkv`); each layer's attention runs for the queries of the prompts' tokens only,
        the prompts grouped in bands of :data:`~paper_repro.sampler.prefill.PACKED_BAND` lengths
        (:mod:`paper_repro.sampler.prefill` lays them out), over the same keys with the same
        mask and softmax rows (the padding's keys and values are another token's: attention weighs
        them exactly 0, as it weighs forward's); the last layer's attention and MLP run for the last
        positions only; and the cache has room for :data:`CACHE_STEP` decode steps (:meth:`step`
        grows it). So each row of a matmul is computed from the same inputs in a matmul of fewer
        rows. MKL gives a row the same bits whatever the number of rows once a matmul has a few rows
        per thread (here up to 3 rows on one thread and up to 11 on two round otherwise), so every
        matmul keeps at least :func:`packed_floor` rows, an attention matmul 16 rows per batch entry;
        on more than one thread the SiLU rounds as forward's threads round it (:meth:`_activation`).
        Anything else runs :meth:`forward`: weights that are not :func:`trimmable`, fewer prompt
        tokens than the floor, an empty prompt, a cache already filled.
        ``tests/test_sampler_trim.py`` checks logits, cache, tokens and log-probabilities against
        forward's on the shipped policies, with and without LoRA, on one thread and on two."""
        rows, width = ids.shape
        floor = packed_floor()
        heads, kv, dim, half = self.heads, self.kv_heads, self.head_dim, self.head_dim // 2
        rep = heads // kv
        lengths = pad.sum(-1)
        n = int(lengths.sum())
        left_padded = width == 1 or bool((pad[:, 1:] >= pad[:, :-1]).all())
        if (
            self.keys
            or not trimmable(self.embed)
            or ids.device.type != "cpu"
            or not left_padded
            or n < floor
            or int(lengths.min()) == 0
        ):
            return self.forward(ids, position_ids, pad)
        minimum = torch.finfo(self.embed.dtype).min
        self.cos, self.sin = rotary_tables(
            self.rotary, self.embed, width + self.capacity, self.heads, self.kv_heads, self.scaling
        )
        self.additive = self.embed.new_zeros((rows, width + self.capacity))
        self.additive[:, :width].masked_fill_(pad == 0, minimum)
        real = pad.reshape(-1).nonzero().squeeze(1)  # the prompts' tokens, row by row
        # slot[r, j]: position j of row r among the tokens (padding: token 0, whose result is unread)
        slot = torch.zeros(rows * width, dtype=torch.long)
        slot[real] = torch.arange(n)
        slot = slot.view(rows, width)
        h = F.embedding(ids.reshape(-1)[real], self.embed)  # (n, hidden)
        positions = position_ids.reshape(-1)[real]
        cos, sin = self.cos[positions], self.sin[positions]  # (n, heads + kv, dim)
        causal = torch.ones(width, width, dtype=torch.bool).tril()
        groups, pick = query_groups(pad, slot, lengths, real, causal, -(-16 // rep))
        last_only, tail, final_blocked, final_at = final_queries(pad, causal, floor, -(-16 // rep))
        hidden = h.shape[-1]
        tokens = ids.reshape(-1)[real]
        padded = slot.reshape(-1)  # each position's token (padding: token 0's keys and values, which
        # attention weighs exactly 0, as it weighs forward's)
        for i, layer in enumerate(self.layers):
            if i == 0:
                qkv = self._first_qkv().index_select(0, tokens).view(n, heads + 2 * kv, dim)
            else:
                qkv = F.linear(rms_norm(h, layer.in_norm), *layer.qkv).view(n, heads + 2 * kv, dim)
            qk = qkv[:, : heads + kv]
            qk = _rotated(qk, cos, sin, half)
            self._cache_prompts(qk[:, heads:], qkv[:, heads + kv :], padded, rows, width)
            queries = qk[:, :heads]
            if i == len(self.layers) - 1:
                out = self._attend(i, queries[slot[:, width - tail :]], None, final_blocked, width)
                if last_only:
                    out, h = out[:, -1], h[slot[:, -1]]
                else:
                    out, h = out.reshape(rows * tail, heads * dim), h[slot[:, width - tail :].reshape(-1)]
                at = final_at
            else:
                out = torch.cat(
                    [
                        self._attend(i, queries[where], members, blocked, width).reshape(-1, heads * dim)
                        for members, where, blocked in groups
                    ]
                )[pick]
                at = real
            h = (
                torch.addmm(h, out, layer.o)
                if layer.o_bias is None
                else h + F.linear(out, layer.o.t(), layer.o_bias)
            )
            x = rms_norm(h, layer.post_norm)
            gate_up = F.linear(x, layer.gate_up, layer.gate_up_bias)
            act = self._activation(layer, gate_up, at, rows * width)
            h = (
                torch.addmm(h, act, layer.down)
                if layer.down_bias is None
                else h + F.linear(act, layer.down.t(), layer.down_bias)
            )
        self.length = width
        last = h if last_only else h.view(rows, tail, hidden)[:, -1]
        return F.linear(rms_norm(last, self.final_norm), *self.head).float()

    def _cache_prompts(
        self, keys: torch.Tensor, values: torch.Tensor, padded: torch.Tensor, rows: int, width: int
    ) -> None:
        """Append one layer's cache: the prompts' rotated keys and their values (``(tokens, kv_heads,
        head_dim)`` each) laid out at every padded position (``padded``: each position's token), with
        room for :data:`CACHE_STEP` decode steps."""
        kv, dim = self.kv_heads, self.head_dim
        cache_keys = keys.new_empty((rows, kv, dim, width + min(self.capacity, CACHE_STEP)))
        cache_values = keys.new_empty((rows, kv, cache_keys.shape[3], dim))
        cache_keys[:, :, :, :width] = (
            keys.index_select(0, padded).view(rows, width, kv, dim).permute(0, 2, 3, 1)
        )
        cache_values[:, :, :width] = values.index_select(0, padded).view(rows, width, kv, dim).transpose(1, 2)
        self.keys.append(cache_keys)
        self.values.append(cache_values)

    def _first_qkv(self) -> torch.Tensor:
        """The first layer's q/k/v projection (before rotary) of every token of the vocabulary,
        ``(vocabulary, (heads + 2 * kv_heads) * head_dim)``: what :meth:`forward` computes for a token
        of the prompts, or of a decode step of at least :func:`packed_floor` rows, bit for bit (the
        projection of the token's normed embedding, in a matmul of at least as many rows)."""
        if self.first_qkv is None:
            vocabulary = self.embed.shape[0]
            embed = self.embed.repeat(-(-packed_floor() // vocabulary), 1)
            qkv = F.linear(rms_norm(embed, self.layers[0].in_norm), *self.layers[0].qkv)
            self.first_qkv = qkv[:vocabulary].contiguous()
        return self.first_qkv

    def step(self, ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """A decode step of :meth:`forward` (``ids``: ``(rows, 1)``, after :meth:`prefill`), the same
        logits and cache bit for bit: the cache grows by :data:`CACHE_STEP` positions when full, and
        a step of at least :func:`packed_floor` rows reads its first layer's q/k/v projection from
        :meth:`_first_qkv`."""
        rows = ids.shape[0]
        heads, kv, dim, half = self.heads, self.kv_heads, self.head_dim, self.head_dim // 2
        rep = heads // kv
        start, end = self.length, self.length + 1
        if end > self.keys[0].shape[3]:
            self._grow(min(self.additive.shape[1], self.keys[0].shape[3] + CACHE_STEP))
        positions = position_ids.reshape(-1)
        cos = self.cos.index_select(0, positions).view(rows, 1, heads + kv, dim)
        sin = self.sin.index_select(0, positions).view(rows, 1, heads + kv, dim)
        mask = self.additive[:, None, None, :end]
        h = F.embedding(ids, self.embed)
        hidden = h.shape[-1]
        table = rows >= packed_floor() and trimmable(self.embed)
        for i, layer in enumerate(self.layers):
            if i == 0 and table:
                qkv = self._first_qkv().index_select(0, ids.reshape(-1)).view(rows, 1, heads + 2 * kv, dim)
            else:
                qkv = F.linear(rms_norm(h, layer.in_norm), *layer.qkv).view(rows, 1, heads + 2 * kv, dim)
            qk = qkv[:, :, : heads + kv]
            qk = _rotated(qk, cos, sin, half)
            q = (
                qk[:, :, :heads]
                .reshape(rows, 1, kv, rep, dim)
                .permute(0, 2, 3, 1, 4)
                .reshape(rows, kv, rep, dim)
            )
            self.keys[i][:, :, :, start:end] = qk[:, :, heads:].permute(0, 2, 3, 1)
            self.values[i][:, :, start:end] = qkv[:, :, heads + kv :].transpose(1, 2)
            scores = torch.matmul(q, self.keys[i][:, :, :, :end]) + mask
            out = torch.matmul(F.softmax(scores, dim=-1), self.values[i][:, :, :end])
            out = out.view(rows, kv, rep, 1, dim).permute(0, 3, 1, 2, 4).reshape(rows, heads * dim)
            h = h.reshape(rows, hidden)
            h = (
                torch.addmm(h, out, layer.o)
                if layer.o_bias is None
                else h + F.linear(out, layer.o.t(), layer.o_bias)
            )
            x = rms_norm(h, layer.post_norm)
            gate, up = F.linear(x, layer.gate_up, layer.gate_up_bias).split(self.intermediate, dim=-1)
            act = layer.act(gate).mul_(up)
            h = (
                torch.addmm(h, act, layer.down)
                if layer.down_bias is None
                else h + F.linear(act, layer.down.t(), layer.down_bias)
            )
            h = h.view(rows, 1, hidden)
        self.length = end
        return F.linear(rms_norm(h[:, -1], self.final_norm), *self.head).float()

    def _activation(
        self, layer: _FusedLayer, gate_up: torch.Tensor, at: torch.Tensor, total: int
    ) -> torch.Tensor:
        """``act(gate) * up`` of the MLP's rows ``gate_up``, the rows ``at`` (ascending) of
        :meth:`forward`'s ``(total, 2 * intermediate)`` layout, as forward computes them.

        The activation (SiLU: an ``exp``) rounds otherwise in torch's vectorised loop than in its
        scalar one, which takes each row's last elements and, on more than one thread, the elements on
        either side of where the threads' shares of the tensor meet, which depend on its size. On one
        thread a row is a row wherever it is. On more, :func:`_thread_activation` computes each row as
        one thread computes it, and the rows that forward's layout splits between threads as its
        threads compute them; checked once per layout against the activation computed in forward's
        layout (the rows scattered into a tensor of its shape and strides), which is used instead
        where they differ."""
        gate, up = gate_up.split(self.intermediate, dim=-1)
        threads = torch.get_num_threads()
        if threads == 1:
            return layer.act(gate).mul_(up)
        key = (type(layer.act), total, self.intermediate, threads, gate.dtype)
        if key not in _SPLIT_CHECKED:
            _SPLIT_CHECKED[key] = _splits_as_forward(layer.act, total, self.intermediate, gate.dtype)
        if _SPLIT_CHECKED[key]:
            return _thread_activation(layer.act, gate, at, total).mul_(up)
        return _laid_out(layer.act, gate, at, total).mul_(up)

    def _attend(
        self, i: int, queries: torch.Tensor, members: torch.Tensor | None, blocked: torch.Tensor, width: int
    ) -> torch.Tensor:
        """Layer ``i``'s attention output, ``(rows, positions, heads * dim)``, of ``queries``
        (``(rows, positions, heads, dim)``: the last positions of the rows ``members``, None: all), over
        the cached keys and values of the prompts (``blocked``: the masked ones), as :meth:`forward`'s
        prefill computes it: the same matmuls of fewer rows, the same mask and softmax rows."""
        heads, kv, dim = self.heads, self.kv_heads, self.head_dim
        rep = heads // kv
        rows, length = queries.shape[:2]
        q = (
            queries.view(rows, length, kv, rep, dim)
            .permute(0, 2, 3, 1, 4)
            .reshape(rows, kv, rep * length, dim)
        )
        keys, values = self.keys[i][:, :, :, :width], self.values[i][:, :, :width]
        if members is not None:
            keys, values = keys[members], values[members]
        scores = torch.matmul(q, keys).view(rows, kv, rep, length, width)
        # forward adds the additive mask: minimum + a score is the minimum, as filled here
        scores.masked_fill_(blocked[:, None, None], torch.finfo(scores.dtype).min)
        out = torch.matmul(F.softmax(scores.view(rows, kv, rep * length, width), dim=-1), values)
        return out.view(rows, kv, rep, length, dim).permute(0, 3, 1, 2, 4).reshape(rows, length, heads * dim)

    def _grow(self, positions: int) -> None:
        """Room for ``positions`` positions in the cache (its filled part copied): :meth:`prefill`
        allocates the cache for :data:`CACHE_STEP` decode steps and it grows by as many, so that the
        attention reads keys and values packed close together rather than spread over room for
        ``capacity`` steps (the same matmuls over the same values, in less memory)."""
        grown = []
        for k in self.keys:
            out = k.new_empty((*k.shape[:3], positions))
            out[..., : self.length] = k[..., : self.length]
            grown.append(out)
        self.keys = grown
        grown = []
        for v in self.values:
            out = v.new_empty((v.shape[0], v.shape[1], positions, v.shape[3]))
            out[:, :, : self.length] = v[:, :, : self.length]
            grown.append(out)
        self.values = grown

    def keep(self, rows: torch.Tensor) -> None:
        """Keep the cached rows ``rows`` (copying the filled part only): dropping finished rows, or
        repeating a shared prompt's prefill for each of its rows."""
        self.keys = [kept(k, rows, self.length, axis=3) for k in self.keys]
        self.values = [kept(v, rows, self.length) for v in self.values]
        self.additive = self.additive[rows]
