"""The price half of the ledger's pull-request-sized core (:mod:`paper_repro.ledger.trl_core`): the
matmul FLOPs of a decoder-only transformer pass, as ``torch.utils.flop_counter.FlopCounterMode`` counts
them (2 per multiply-add; norms, activations, softmax and rotary embeddings left out).

Stdlib and torch only, nothing of this project: a TRL maintainer reads it with the callback beside it.

* :class:`Work`: what one pass processes (body tokens, attention (query, key) pairs, head positions).
* :class:`DecoderShape`: the matmul shapes of a Qwen2 / Llama / Mistral / Qwen3 decoder (GQA, gated MLP)
  with its output head read from the module, and :class:`LoRA` adapters read from a PEFT model.
* :func:`forward_flops` and :func:`train_flops`: a forward, and a loss pass (forward, backward as
  autograd runs it: no weight gradient for a frozen base, no input gradient where none is needed, TRL's
  fused LM head recomputing its logits in backward, and activation checkpointing's replay).
* :func:`checkpointing_of`: the replay a run's ``activation_checkpointing_kwargs`` ask for.
* :func:`read_call` and :func:`forward_work`: what a forward hook reads of a call, and the useful and
  executed work of that forward; :func:`first_eos_lengths`: generated lengths up to the first EOS.

Counted against ``FlopCounterMode`` in ``tests/test_ledger_trl_core.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("gate_proj", "up_proj", "down_proj")
LINEARS = ATTENTION + MLP
FAMILIES = ("qwen2", "llama", "mistral", "qwen3")  # dense decoders with exactly these linears

Recompute = Literal["full", "early_stop"]


@dataclass(frozen=True)
class Work:
    """``tokens`` through the body, ``attn_pairs`` (query, key) pairs scored per head group and layer,
    ``head_tokens`` positions through the output head."""

    tokens: float = 0.0
    attn_pairs: float = 0.0
    head_tokens: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(
            self.tokens + other.tokens,
            self.attn_pairs + other.attn_pairs,
            self.head_tokens + other.head_tokens,
        )


def causal_pairs(n: int, past: int = 0) -> int:
    """(query, key) pairs of ``n`` positions attending causally to ``past`` cached ones and each other."""
    return n * past + n * (n + 1) // 2


def generation_work(prompt: int, completion: int) -> Work:
    """KV-cache generation of ``completion`` tokens after ``prompt`` ones: the prompt prefilled once
    (the head at its last position), then each generated token but the last fed back once."""
    decode = max(completion - 1, 0)
    return Work(prompt, causal_pairs(prompt), 1) + Work(decode, causal_pairs(decode, prompt), decode)


def mask_work(mask: torch.Tensor, head_tokens: int | None = None) -> Work:
    """Useful work of a forward over rows whose real tokens (``mask``: rows x width, 1 = real) are
    contiguous: each row's real tokens attend causally; ``head_tokens`` defaults to every real one."""
    lengths = mask.sum(dim=1).tolist()
    tokens = sum(lengths)
    pairs = sum(causal_pairs(int(n)) for n in lengths)
    return Work(tokens, pairs, tokens if head_tokens is None else head_tokens)


@dataclass(frozen=True)
class LoRA:
    """LoRA adapters of one ``rank`` on the linears ``targets`` of every layer."""

    rank: int
    targets: tuple[str, ...]

    def params(self, shape: DecoderShape) -> int:
        """Adapter weights of one layer."""
        mods = shape.linears()
        return sum(self.rank * (mods[m][0] + mods[m][1]) for m in self.targets)


@dataclass(frozen=True)
class DecoderShape:
    """The matmul shapes of a dense decoder; ``head``: the (in, out) of each linear outside the body
    (an LM head, a classifier's ``score``)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    head: tuple[tuple[int, int], ...] = field(default=())

    def linears(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each linear of one layer."""
        h, q, kv, i = (
            self.hidden,
            self.heads * self.head_dim,
            self.kv_heads * self.head_dim,
            self.intermediate,
        )
        return {
            "q_proj": (h, q),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (q, h),
            "gate_proj": (h, i),
            "up_proj": (h, i),
            "down_proj": (i, h),
        }

    @property
    def layer_params(self) -> int:
        return sum(a * b for a, b in self.linears().values())

    @property
    def attn_width(self) -> int:
        return self.heads * self.head_dim


def base_model(model: Any) -> Any:
    """The model inside a PEFT wrapper (the model itself without one)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def decoder_shape(model: Any) -> DecoderShape | None:
    """The shape of an HF model of :data:`FAMILIES` (a PEFT wrapper unwrapped), its head read from the
    linears outside its backbone; None for another family or a backbone that is not transformers' own
    class for its ``model_type`` (whose matmuls this formula cannot vouch for)."""
    model = base_model(model)
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    backbone = getattr(model, "base_model", model)
    if kind not in FAMILIES or backbone is model:
        return None
    if type(backbone).__module__ != f"transformers.models.{kind}.modeling_{kind}":
        return None
    inside = {id(m) for m in backbone.modules()}
    head = tuple(
        (m.in_features, m.out_features)
        for m in model.modules()
        if isinstance(m, torch.nn.Linear) and id(m) not in inside
    )
    heads = int(config.num_attention_heads)
    return DecoderShape(
        hidden=int(config.hidden_size),
        layers=int(config.num_hidden_layers),
        heads=heads,
        kv_heads=int(getattr(config, "num_key_value_heads", None) or heads),
        head_dim=int(getattr(config, "head_dim", None) or config.hidden_size // heads),
        intermediate=int(config.intermediate_size),
        head=head,
    )


def lora_of(model: Any, layers: int) -> LoRA | None:
    """The active LoRA adapters of a PEFT model (None: a plain model, full fine-tuning); a ValueError
    for adapters this formula cannot describe (several ranks, a module not adapted in every layer, an
    adapter outside the layers' linears)."""
    ranks: dict[str, set[int]] = {}
    counts: dict[str, int] = {}
    for name, module in model.named_modules():
        lora_a = getattr(module, "lora_A", None)
        if isinstance(lora_a, torch.nn.ModuleDict) and len(lora_a):
            short = name.replace(".base_layer", "").rsplit(".", 1)[-1]
            counts[short] = counts.get(short, 0) + 1
            ranks.setdefault(short, set()).update(module.r[a] for a in module.active_adapters if a in lora_a)
    if not ranks:
        return None
    every = set().union(*ranks.values())
    if len(every) != 1 or any(n != layers for n in counts.values()) or not set(ranks) <= set(LINEARS):
        raise ValueError(
            f"the core FLOP formula prices one LoRA rank on the same linears of every layer; found ranks "
            f"{sorted(every)} on {counts} (of {layers} layers): use paper_repro.ledger.FlopLedgerCallback, "
            "which measures such a model"
        )
    return LoRA(rank=every.pop(), targets=tuple(sorted(ranks)))


def forward_flops(shape: DecoderShape, work: Work, lora: LoRA | None = None) -> float:
    """Forward FLOPs of ``work``: the body's linears (and ``lora``'s adapters, when active), attention's
    ``QK^T`` and ``PV`` (4 x heads x head_dim per pair and layer) and the head."""
    per_token = 2 * shape.layers * (shape.layer_params + (lora.params(shape) if lora else 0))
    head = sum(a * b for a, b in shape.head)
    return (
        per_token * work.tokens
        + 4 * shape.layers * shape.attn_width * work.attn_pairs
        + 2 * head * work.head_tokens
    )


@dataclass(frozen=True)
class Training:
    """How a loss pass trains: ``lora`` (None: full fine-tuning); ``checkpointing`` with ``recompute``
    (``"full"``: reentrant, each checkpointed layer's forward replayed whole; ``"early_stop"``:
    non-reentrant, torch stops replaying at the layer's last saved tensor, so its last matmul is not
    replayed) on every ``every_n_layers``-th layer; ``head_recompute``: TRL's fused LM head recomputes
    its logits in backward. Checkpointing makes the embeddings' output require grad
    (``enable_input_require_grads``), so the first layer's input gets a gradient."""

    lora: LoRA | None
    checkpointing: bool = False
    recompute: Recompute = "full"
    every_n_layers: int = 1
    head_recompute: bool = True


def _backward_rates(shape: DecoderShape, train: Training) -> tuple[float, float, float]:
    """Backward FLOPs per body token, per attention pair and per head position, following which
    tensors autograd computes a gradient for."""
    full, lora = train.lora is None, train.lora
    targets = set() if full else set(lora.targets)
    mods, rank, width = shape.linears(), 0 if full else lora.rank, shape.attn_width

    def linear(name: str, x_needs: bool) -> tuple[float, bool]:
        fin, fout = mods[name]
        cost = (2 * fin * fout if full else 0) + (2 * fin * fout if x_needs else 0)
        out_needs = full or x_needs
        if name in targets:  # dB, dA, the grad through B, and through A into x where x needs it
            cost += 4 * rank * fout + 2 * rank * fin + (2 * rank * fin if x_needs else 0)
            out_needs = True
        return cost, out_needs

    per_token = per_pair = 0.0
    needs = train.checkpointing or full
    for _ in range(shape.layers):
        (q, q_needs), (k, k_needs), (v, v_needs) = (linear(m, needs) for m in ("q_proj", "k_proj", "v_proj"))
        scores_need = q_needs or k_needs
        per_pair += (q_needs + k_needs + scores_need + v_needs) * 2 * width
        o, o_needs = linear("o_proj", scores_need or v_needs)
        mid = needs or o_needs
        (g, g_needs), (u, u_needs) = linear("gate_proj", mid), linear("up_proj", mid)
        d, d_needs = linear("down_proj", g_needs or u_needs)
        per_token += q + k + v + o + g + u + d
        needs = mid or d_needs
    if not needs:
        raise ValueError("nothing to train: no parameter of the policy requires a gradient")
    head = 0.0
    for i, (fin, fout) in enumerate(shape.head):
        head += 2 * fin * fout * (2 if full else 1)  # into the hidden state (+ the weight, full)
        if train.head_recompute and i == len(shape.head) - 1:
            head += 2 * fin * fout
    return per_token, per_pair, head


def recompute_flops(shape: DecoderShape, work: Work, train: Training) -> float:
    """FLOPs the backward spends replaying the checkpointed layers' forwards (the head is not
    checkpointed); under ``"early_stop"`` less each layer's last matmul (PEFT's ``lora_B`` of
    ``down_proj`` where that is adapted, else ``down_proj``), which nothing saved comes after."""
    layers = -(-shape.layers // train.every_n_layers)
    per_token = 2 * shape.layer_params + (2 * train.lora.params(shape) if train.lora else 0)
    if train.recompute == "early_stop":
        down_in, down_out = shape.linears()["down_proj"]
        lora_down = train.lora is not None and "down_proj" in train.lora.targets
        per_token -= 2 * (train.lora.rank if lora_down else down_in) * down_out
    return layers * per_token * work.tokens + 4 * layers * shape.attn_width * work.attn_pairs


def train_flops(shape: DecoderShape, work: Work, train: Training) -> float:
    """A loss pass over ``work``: forward + backward (+ the checkpointing replay)."""
    per_token, per_pair, per_head = _backward_rates(shape, train)
    total = forward_flops(shape, work, train.lora)
    total += per_token * work.tokens + per_pair * work.attn_pairs + per_head * work.head_tokens
    return total + (recompute_flops(shape, work, train) if train.checkpointing else 0.0)


def checkpointing_of(kwargs: dict[str, Any] | str | None) -> tuple[Recompute, int]:
    """(recompute, every how many layers one is checkpointed) of ``activation_checkpointing_kwargs``,
    as transformers 5 and torch 2 run them: ``every_n_layers`` and ``offload`` are Trainer's, the rest
    torch's; none left means ``use_reentrant=False``; ``use_reentrant`` unset means reentrant; a
    non-reentrant checkpoint stops early unless ``early_stop=False``."""
    torch_kwargs = dict(json.loads(kwargs) if isinstance(kwargs, str) else kwargs or {})
    every = int(torch_kwargs.pop("every_n_layers", 1))
    torch_kwargs.pop("offload", None)
    torch_kwargs = torch_kwargs or {"use_reentrant": False}
    reentrant = torch_kwargs.get("use_reentrant") is None or bool(torch_kwargs["use_reentrant"])
    early = not reentrant and bool(torch_kwargs.get("early_stop", True))
    return ("early_stop" if early else "full"), every


def arg(args: tuple, kwargs: dict, name: str, position: int) -> Any:
    return kwargs[name] if name in kwargs else (args[position] if len(args) > position else None)


def read_call(args: tuple, kwargs: dict) -> dict[str, Any] | None:
    """What a forward's pre-hook reads: rows, width, keys, the 2-d mask, the shifted labels, whether
    TRL's fused head runs and grad is on; None without ``input_ids`` or ``inputs_embeds``."""
    x = arg(args, kwargs, "input_ids", 0)
    x = x if isinstance(x, torch.Tensor) else kwargs.get("inputs_embeds")
    if not isinstance(x, torch.Tensor):
        return None
    rows, width = x.shape[:2]
    mask = kwargs.get("attention_mask")
    if isinstance(mask, torch.Tensor) and mask.dim() in (2, 4):
        keys = mask.size(-1)
    else:  # no mask: every cached key ("cache" in transformers 5, "past_key_values" before)
        mask, past = None, kwargs.get("cache", kwargs.get("past_key_values"))
        keys = width + (int(past.get_seq_length()) if hasattr(past, "get_seq_length") else 0)
    labels = kwargs.get("shift_labels")
    if labels is None and isinstance(kwargs.get("labels"), torch.Tensor):
        labels = kwargs["labels"][:, 1:]
    return dict(
        rows=int(rows), width=int(width), keys=int(keys), labels=labels, head=0,
        mask=mask if mask is not None and mask.dim() == 2 else None,
        fused=bool(kwargs.get("fused_lm_head", False)), grad=torch.is_grad_enabled(),
    )  # fmt: skip


def forward_work(call: dict[str, Any]) -> dict[str, Work]:
    """Useful and executed work of a full-sequence forward read by :func:`read_call`: TRL's fused head
    scores the labelled positions on CUDA/XPU with Triton, every position but the last elsewhere; a
    head run as a module, the positions its hook saw (useful: a real position scoring a real token)."""
    rows, width, mask, labels = call["rows"], call["width"], call["mask"], call["labels"]
    if call["fused"] and labels is not None:
        from transformers.utils import is_triton_available

        head_useful = int((labels != -100).sum())
        compact = labels.device.type in ("cuda", "xpu") and is_triton_available()
        head_executed = head_useful if compact else rows * (width - 1)
    else:
        head_executed = call["head"]
        per_row = head_executed // rows if rows else 0
        if mask is not None and 0 < per_row <= width:
            low = width - per_row
            head_useful = int((mask[:, low : width - 1] * mask[:, low + 1 :]).sum())
        else:
            head_useful = head_executed
    useful = (
        mask_work(mask, head_useful)
        if mask is not None
        else Work(rows * width, rows * causal_pairs(width), head_useful)
    )
    return {"useful": useful, "executed": Work(rows * width, rows * width * call["keys"], head_executed)}


def first_eos_lengths(completions: torch.Tensor, eos: Any) -> list[int]:
    width = completions.size(1)
    if eos is None or width == 0:
        return [width] * completions.size(0)
    ids = torch.tensor([eos] if isinstance(eos, int) else list(eos), device=completions.device)
    is_eos = torch.isin(completions, ids)
    return torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1) + 1, width).tolist()
