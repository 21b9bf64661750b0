"""Analytic FLOP counts for decoder-only transformers, in the form GRPO post-training spends them.

Everything here counts matrix-multiply FLOPs (2 per multiply-add), the quantity that
``torch.utils.flop_counter.FlopCounterMode`` reports; norms, activations, softmax and rotary
embeddings are elementwise and left out, as every 2N/6N convention does. Embedding lookups cost 0.

A pass over a batch is described by a :class:`Work` (tokens through the body, (query, key) pairs
scored by attention, positions through the output head). Two conventions build that work from
token counts (see :mod:`paper_repro.ledger`):

* ``useful``: real tokens only, causal attention counted position by position (position *i*
  attends to *i + 1* keys). This is what the paper's accounting counts.
* ``executed``: what the kernels really run: padding, rows that HF ``generate`` keeps decoding
  after their EOS, and the full square of scores that eager attention computes before masking.

How this differs from the usual 2N / 6N:

* LoRA training does not compute weight gradients for the frozen base, so a LoRA step costs about
  4N per token, not 6N. Input gradients are computed only where autograd needs them: the first
  layer's q/k/v projections read the frozen embeddings and get no input gradient (unless
  ``input_requires_grad``, which gradient checkpointing turns on through
  ``enable_input_require_grads``).
* TRL's fused LM head (``trl.trainer.utils.add_fused_lm_head``) recomputes the logits in its
  backward, so the head costs one extra forward per scored position there (``head_recompute``).
* Generation with a KV cache prefills each prompt once (once per *prompt* with
  ``prefix_cache=True``, as vLLM's prefix caching does), then runs one token per step against the
  cache. HF ``generate`` asks for the logits of the last prompt position only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

# what one pass processes (tokens, attention pairs, head positions): its own module, named here too
from paper_repro.accounting.flop_work import (  # noqa: F401 (re-exported: flops.Work, flops.sequence_work, ...)
    Work,
    causal_pairs,
    generation_work,
    padded_batch_work,
    padded_generation_work,
    sequence_work,
)

Convention = Literal["useful", "executed"]
CONVENTIONS: tuple[Convention, ...] = ("useful", "executed")

ATTENTION_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")
LINEAR_MODULES = ATTENTION_MODULES + MLP_MODULES

_SUPPORTED_MODEL_TYPES = ("qwen2", "llama", "mistral", "qwen3")

# --------------------------------------------------------------------------------------------
# Model shape
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelShape:
    """The matmul shapes of a decoder-only transformer (Qwen2 / Llama family: GQA, gated MLP)."""

    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    # Output head as a chain of linear layers (in, out) applied at every scored position:
    # a causal LM has one (hidden, vocab); Qwen2.5-Math-PRM has (hidden, hidden), (hidden, 2).
    head: tuple[tuple[int, int], ...] = ()
    model_type: str = "qwen2"
    name: str = ""

    def __post_init__(self) -> None:
        for f in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim", "intermediate_size"):
            if getattr(self, f) <= 0:
                raise ValueError(f"ModelShape.{f} must be positive, got {getattr(self, f)}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})"
            )
        if not self.head:
            object.__setattr__(self, "head", ((self.hidden_size, self.vocab_size),))

    # --- construction ------------------------------------------------------------------------
    @classmethod
    def from_config(cls, config: Any, name: str | None = None) -> ModelShape:
        """Read a shape from a HF config: a ``PretrainedConfig``, a dict, a ``config.json`` path or
        a checkpoint directory."""
        if isinstance(config, (str, os.PathLike)):
            path = Path(config)
            if path.is_dir():
                path = path / "config.json"
            if not path.is_file():
                raise FileNotFoundError(
                    f"no model config at {path}: pass a config.json, a checkpoint directory holding one, "
                    "or one of the shipped configs under data/model_configs/"
                )
            name = name or (path.parent.name if path.name == "config.json" else path.stem)
            config = json.loads(path.read_text())
        if not isinstance(config, Mapping):
            config = config.to_dict()
        cfg = dict(config)
        if "text_config" in cfg and "hidden_size" not in cfg:
            cfg = dict(cfg["text_config"])
        model_type = str(cfg.get("model_type", ""))
        if model_type not in _SUPPORTED_MODEL_TYPES:
            raise ValueError(
                f"model_type {model_type!r} is not supported by the analytic FLOP model; "
                f"supported: {', '.join(_SUPPORTED_MODEL_TYPES)} (dense, gated-MLP decoders)"
            )
        hidden = int(cfg["hidden_size"])
        heads = int(cfg["num_attention_heads"])
        head_dim = int(cfg.get("head_dim") or hidden // heads)
        vocab = int(cfg["vocab_size"])
        archs = " ".join(cfg.get("architectures") or [])
        num_labels = len(cfg["id2label"]) if cfg.get("id2label") else int(cfg.get("num_labels", 2))
        if "ProcessRewardModel" in archs:
            # Qwen2.5-Math-PRM: score = Linear(h, h) -> ReLU -> Linear(h, 2), at every position.
            head = ((hidden, hidden), (hidden, 2))
        elif "TokenClassification" in archs or "SequenceClassification" in archs:
            # HF computes the score at every position (sequence classification then pools one).
            head = ((hidden, num_labels),)
        else:
            head = ((hidden, vocab),)
        return cls(
            hidden_size=hidden,
            num_layers=int(cfg["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=head_dim,
            intermediate_size=int(cfg["intermediate_size"]),
            vocab_size=vocab,
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            head=head,
            model_type=model_type,
            name=name or str(cfg.get("_name_or_path", "")),
        )

    # --- sizes -------------------------------------------------------------------------------
    def module_shapes(self) -> dict[str, tuple[int, int]]:
        """(in_features, out_features) of each linear module of one layer."""
        h, q, kv, i = (
            self.hidden_size,
            self.num_heads * self.head_dim,
            self.num_kv_heads * self.head_dim,
            self.intermediate_size,
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
    def layer_matmul_params(self) -> int:
        """Weights of one layer's linear modules (biases excluded)."""
        return sum(a * b for a, b in self.module_shapes().values())

    @property
    def body_matmul_params(self) -> int:
        """Weights of all layers' linear modules: the non-embedding matmul parameters."""
        return self.num_layers * self.layer_matmul_params

    @property
    def head_matmul_params(self) -> int:
        return sum(a * b for a, b in self.head)

    @property
    def attention_width(self) -> int:
        """heads x head_dim: the width of the query/score products."""
        return self.num_heads * self.head_dim

    def parameter_count(self, include_embeddings: bool = True) -> int:
        """Total parameters as a model card counts them: weights, q/k/v biases (Qwen2), norms."""
        h = self.hidden_size
        bias = (self.num_heads + 2 * self.num_kv_heads) * self.head_dim if self.model_type == "qwen2" else 0
        body = self.num_layers * (self.layer_matmul_params + bias + 2 * h) + h
        if not include_embeddings:
            return body
        embed = self.vocab_size * h
        head = (
            0
            if self.tie_word_embeddings and self.head == ((h, self.vocab_size),)
            else self.head_matmul_params
        )
        return body + embed + head


# --------------------------------------------------------------------------------------------
# Adapters and training modes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoRASpec:
    """LoRA adapters of rank ``rank`` on the named linear modules of every layer."""

    rank: int = 16
    target_modules: tuple[str, ...] = LINEAR_MODULES

    def __post_init__(self) -> None:
        if self.rank <= 0:
            raise ValueError(f"LoRA rank must be positive, got {self.rank}")
        targets = tuple(self.target_modules)
        if targets in (("all-linear",), ("all_linear",)):
            targets = LINEAR_MODULES
        unknown = sorted(set(targets) - set(LINEAR_MODULES))
        if unknown:
            raise ValueError(
                f"unknown LoRA target modules {unknown}; choose from {', '.join(LINEAR_MODULES)}"
            )
        if not targets:
            raise ValueError("LoRA needs at least one target module")
        object.__setattr__(self, "target_modules", targets)

    def adapter_params_per_layer(self, shape: ModelShape) -> int:
        mods = shape.module_shapes()
        return sum(self.rank * (mods[m][0] + mods[m][1]) for m in self.target_modules)


# --------------------------------------------------------------------------------------------
# FLOPs of a pass
# --------------------------------------------------------------------------------------------


def _lora_forward_per_token(shape: ModelShape, lora: LoRASpec | None) -> int:
    return 0 if lora is None else 2 * shape.num_layers * lora.adapter_params_per_layer(shape)


class CostModel(Protocol):
    """What turns a pass's :class:`Work` into FLOPs: :class:`ModelShape` (this module's analytic model)
    or a model priced by measuring its module (:class:`paper_repro.ledger.cost_models.MeasuredCost`).
    :func:`forward_flops`, :func:`train_flops` and :func:`grpo_step_cost` take either. ``lora``: the
    adapters active in the forward (None: none, or disabled)."""

    def forward_flops(self, work: Work, lora: LoRASpec | None = None) -> float: ...

    def train_flops(self, work: Work, train: TrainSpec) -> float: ...


def forward_flops(shape: ModelShape | CostModel, work: Work, lora: LoRASpec | None = None) -> float:
    """Forward FLOPs of ``work`` (base + adapters); a :class:`CostModel` prices itself."""
    if not isinstance(shape, ModelShape):
        return shape.forward_flops(work, lora)
    per_token = 2 * shape.body_matmul_params + _lora_forward_per_token(shape, lora)
    return (
        per_token * work.tokens
        + 4 * shape.num_layers * shape.attention_width * work.attn_pairs
        + 2 * shape.head_matmul_params * work.head_tokens
    )


@dataclass(frozen=True)
class _BackwardRates:
    per_token: float  # FLOPs per body token
    per_pair: float  # FLOPs per attention pair
    per_head_token: float  # FLOPs per head position


def _backward_rates(
    shape: ModelShape,
    lora: LoRASpec | None,
    input_requires_grad: bool,
    head_recompute: bool,
    train_head: bool,
) -> _BackwardRates:
    """Backward FLOPs per unit of work, following which tensors autograd needs gradients for.

    ``lora=None`` means full fine-tuning: every weight gets a gradient.
    """
    full = lora is None
    targets = set() if full else set(lora.target_modules)
    mods = shape.module_shapes()
    r = 0 if full else lora.rank
    d_attn = shape.attention_width

    def linear(name: str, x_needs_grad: bool) -> tuple[float, bool]:
        """Backward FLOPs per token of one linear (+ adapter) and whether its output needs grad."""
        fin, fout = mods[name]
        cost = 0.0
        if full:
            cost += 2 * fin * fout  # weight gradient
        if x_needs_grad:
            cost += 2 * fin * fout  # input gradient through the (frozen or trained) weight
        out_needs = full or x_needs_grad
        if name in targets:
            # B (out x r): grad_B and grad of A's output; A (r x in): grad_A, input grad if needed
            cost += 2 * r * fout + 2 * r * fout + 2 * r * fin + (2 * r * fin if x_needs_grad else 0)
            out_needs = True
        return cost, out_needs

    per_token = 0.0
    per_pair = 0.0
    needs = input_requires_grad or full
    for _ in range(shape.num_layers):
        q_cost, q_needs = linear("q_proj", needs)
        k_cost, k_needs = linear("k_proj", needs)
        v_cost, v_needs = linear("v_proj", needs)
        # scores = Q K^T: grad_Q, grad_K; out = P V: grad_P (if scores need it), grad_V
        scores_need = q_needs or k_needs
        attn_out_needs = scores_need or v_needs
        pair = (q_needs + k_needs + scores_need + v_needs) * 2 * d_attn
        o_cost, o_needs = linear("o_proj", attn_out_needs)
        mid_needs = needs or o_needs
        g_cost, g_needs = linear("gate_proj", mid_needs)
        u_cost, u_needs = linear("up_proj", mid_needs)
        d_cost, d_needs = linear("down_proj", g_needs or u_needs)
        per_token += q_cost + k_cost + v_cost + o_cost + g_cost + u_cost + d_cost
        per_pair += pair
        needs = mid_needs or d_needs
    if not needs:
        raise ValueError("nothing to train: no parameter of the model requires a gradient")
    head = 0.0
    for i, (fin, fout) in enumerate(shape.head):
        head += 2 * fin * fout  # gradient into the hidden state
        if full or train_head:
            head += 2 * fin * fout
        if head_recompute and i == len(shape.head) - 1:
            head += 2 * fin * fout  # the fused head recomputes its logits in backward
    return _BackwardRates(per_token, per_pair, head)


Recompute = Literal["full", "early_stop"]
RECOMPUTES: tuple[Recompute, ...] = ("full", "early_stop")


@dataclass(frozen=True)
class TrainSpec:
    """How the policy is trained: LoRA (``lora`` set) or full fine-tuning (``lora=None``).

    Under gradient checkpointing, ``recompute`` says what the backward replays of each checkpointed
    decoder layer (see :func:`recompute_flops`): ``"full"`` its whole forward (reentrant checkpointing,
    or non-reentrant with torch's early stop off); ``"early_stop"`` its forward up to the last tensor
    its backward saved (non-reentrant checkpointing, transformers' default, with torch's early stop,
    on by default). ``checkpoint_every_n_layers``: transformers' ``every_n_layers``, every n-th
    decoder layer checkpointed, from the first."""

    lora: LoRASpec | None = field(default_factory=LoRASpec)
    gradient_checkpointing: bool = False
    head_recompute: bool = False  # TRL's fused LM head recomputes logits in backward
    input_requires_grad: bool | None = None  # default: on with gradient checkpointing
    train_head: bool = False  # LoRA on the LM head (rare)
    recompute: Recompute = "full"
    checkpoint_every_n_layers: int = 1

    def __post_init__(self) -> None:
        if self.recompute not in RECOMPUTES:
            raise ValueError(f"TrainSpec.recompute must be one of {RECOMPUTES}, got {self.recompute!r}")
        if self.checkpoint_every_n_layers < 1:
            raise ValueError(
                f"TrainSpec.checkpoint_every_n_layers must be >= 1, got {self.checkpoint_every_n_layers}"
            )

    @property
    def effective_input_requires_grad(self) -> bool:
        if self.input_requires_grad is not None:
            return self.input_requires_grad
        return self.gradient_checkpointing


FULL_FINETUNE = TrainSpec(lora=None)


def backward_flops(shape: ModelShape, work: Work, train: TrainSpec) -> float:
    rates = _backward_rates(
        shape, train.lora, train.effective_input_requires_grad, train.head_recompute, train.train_head
    )
    return (
        rates.per_token * work.tokens
        + rates.per_pair * work.attn_pairs
        + rates.per_head_token * work.head_tokens
    )


def recompute_flops(shape: ModelShape, work: Work, train: TrainSpec) -> float:
    """FLOPs the backward spends replaying the forward of the checkpointed decoder layers (every
    ``train.checkpoint_every_n_layers``-th, from the first, as transformers picks them; the output head
    is not checkpointed).

    ``recompute="full"``: each such layer's whole forward. ``"early_stop"``: torch's non-reentrant
    checkpoint stops replaying a layer as soon as every tensor its backward saved is back, and autograd
    saves a matmul's inputs before it runs it; the last op of these layers that saves anything is
    their last matmul, whose output nothing saves (the residual add after it saves nothing), so that
    matmul is never replayed: PEFT's ``lora_B`` of ``down_proj`` where ``down_proj`` is adapted (PEFT
    runs the base layer first, then ``lora_B(lora_A(x))``), else ``down_proj`` itself (LoRA elsewhere,
    or full fine-tuning). Measured, not assumed: ``tests/test_ledger_checkpointing.py``."""
    layers = -(-shape.num_layers // train.checkpoint_every_n_layers)
    per_token = 2 * shape.layer_matmul_params + (
        0 if train.lora is None else 2 * train.lora.adapter_params_per_layer(shape)
    )
    if train.recompute == "early_stop":
        down_in, down_out = shape.module_shapes()["down_proj"]
        lora_down = train.lora is not None and "down_proj" in train.lora.target_modules
        per_token -= 2 * (train.lora.rank if lora_down else down_in) * down_out
    return layers * per_token * work.tokens + 4 * layers * shape.attention_width * work.attn_pairs


def train_flops(shape: ModelShape | CostModel, work: Work, train: TrainSpec) -> float:
    """Forward + backward FLOPs of a training pass (+ the checkpointed layers' recompute under gradient
    checkpointing, :func:`recompute_flops`); a :class:`CostModel` prices itself."""
    if not isinstance(shape, ModelShape):
        return shape.train_flops(work, train)
    fwd = forward_flops(shape, work, train.lora)
    total = fwd + backward_flops(shape, work, train)
    if train.gradient_checkpointing:
        total += recompute_flops(shape, work, train)
    return total


@dataclass(frozen=True)
class PerToken:
    """Context-free FLOPs per token (attention excluded: it depends on the context length)."""

    forward: float
    lora_train: float
    full_train: float
    attention_per_pair: float  # add this per (query, key) pair for the attention scores (forward)


def per_token_flops(shape: ModelShape, lora: LoRASpec | None = None) -> PerToken:
    unit = Work(1, 0, 1)
    lora = lora or LoRASpec()
    return PerToken(
        forward=float(forward_flops(shape, unit)),
        lora_train=float(train_flops(shape, unit, TrainSpec(lora=lora, input_requires_grad=True))),
        full_train=float(train_flops(shape, unit, FULL_FINETUNE)),
        attention_per_pair=float(4 * shape.num_layers * shape.attention_width),
    )


# --------------------------------------------------------------------------------------------
# A GRPO step
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepCost:
    """FLOPs of one GRPO generation round, split by component. rho = C_learning / C_total."""

    C_search: float
    C_learning: float
    C_reward: float

    @property
    def C_total(self) -> float:
        return self.C_search + self.C_learning + self.C_reward

    @property
    def rho(self) -> float:
        total = self.C_total
        return self.C_learning / total if total > 0 else float("nan")

    def __add__(self, other: StepCost) -> StepCost:
        return StepCost(
            self.C_search + other.C_search,
            self.C_learning + other.C_learning,
            self.C_reward + other.C_reward,
        )

    def __mul__(self, k: float) -> StepCost:
        return StepCost(self.C_search * k, self.C_learning * k, self.C_reward * k)

    __rmul__ = __mul__

    def as_dict(self) -> dict[str, float]:
        return {
            **{k: float(v) for k, v in asdict(self).items()},
            "C_total": float(self.C_total),
            "rho": self.rho,
        }


@dataclass(frozen=True)
class GRPOStep:
    """One GRPO generation round at fixed lengths: P prompts x G completions, K kept, mu epochs."""

    prompts: int
    generations: int
    kept: int
    epochs: int
    prompt_tokens: int
    completion_tokens: int
    beta: float = 0.0
    old_logprobs: bool | None = None  # default: TRL's rule (mu > 1, or vLLM importance sampling)
    vllm_importance_sampling: bool = False
    prefix_cache: bool = False
    reward_tokens: int | None = None  # reward model's tokens per completion; default prompt + completion

    def __post_init__(self) -> None:
        for f in ("prompts", "generations", "kept", "epochs", "prompt_tokens", "completion_tokens"):
            if getattr(self, f) <= 0:
                raise ValueError(f"{f} must be positive, got {getattr(self, f)}")
        if self.kept > self.generations:
            raise ValueError(f"kept K={self.kept} cannot exceed generations G={self.generations}")
        if self.beta < 0:
            raise ValueError(f"beta must be >= 0, got {self.beta}")

    @property
    def runs_old_logprobs(self) -> bool:
        if self.old_logprobs is not None:
            return self.old_logprobs
        return self.epochs > 1 or self.vllm_importance_sampling


def grpo_step_cost(
    policy: ModelShape | CostModel,
    step: GRPOStep,
    train: TrainSpec | None = None,
    reward_model: ModelShape | CostModel | None = None,
    reward_cost: Callable[[int, int], float] | None = None,
) -> StepCost:
    """Useful-convention FLOPs of one GRPO round (every completion ``completion_tokens`` long).

    * C_search: KV-cache generation of P x G completions (the prompt prefilled per completion, or
      once per prompt with ``prefix_cache``).
    * C_learning: mu epochs of forward + backward over the K kept completions of each prompt, the
      old-policy log-prob forward and the reference forward (beta != 0) over all G.
    * C_reward: one reward-model forward over each of the P x G completions (0 without a model),
      or, for a reward that prices itself, ``reward_cost(prompt_tokens, completion_tokens)`` FLOPs
      per completion (:class:`paper_repro.rewards.RewardCost`).
    """
    train = train or TrainSpec()
    p, c = step.prompt_tokens, step.completion_tokens
    n_gen = step.prompts * step.generations
    if step.prefix_cache:
        gen = step.prompts * generation_work(p, c) + (n_gen - step.prompts) * generation_work(
            p, c, prefill=False
        )
    else:
        gen = n_gen * generation_work(p, c)
    c_search = forward_flops(policy, gen, train.lora)

    seq = sequence_work(p + c, head_tokens=c)
    c_learn = step.epochs * step.prompts * step.kept * train_flops(policy, seq, train)
    extra_forwards = int(step.runs_old_logprobs) + int(step.beta != 0)
    c_learn += extra_forwards * n_gen * forward_flops(policy, seq, train.lora)

    c_reward = 0.0
    if reward_model is not None:
        n = step.reward_tokens or (p + c)
        c_reward = n_gen * forward_flops(reward_model, sequence_work(n))
    elif reward_cost is not None:
        c_reward = n_gen * float(reward_cost(p, c))
    return StepCost(c_search, c_learn, c_reward)
