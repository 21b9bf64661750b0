"""The cost models the ledger prices a model's passes with: the analytic FLOP model where it knows the
model, a measurement of the module that runs everywhere else.

A cost model (:class:`paper_repro.flops.CostModel`) turns a pass's :class:`~paper_repro.flops.Work` into
FLOPs; the ledger charges every pass through :func:`paper_repro.flops.forward_flops` and
:func:`~paper_repro.flops.train_flops`, which take either kind. :func:`policy_cost` and
:func:`reward_model_cost` choose:

* **analytic** (:class:`~paper_repro.flops.ModelShape`) for a model of a family the analytic model
  knows (``qwen2``, ``llama``, ``mistral``, ``qwen3``) whose backbone is transformers' own class for it,
  with LoRA of one rank on the same modules of every layer. Its output head is read from the module:
  the linear layers after the backbone (``lm_head``, a classifier's ``score``, a process reward model's
  ``score`` MLP), not ``config.architectures``, which says ``...ForCausalLM`` for a checkpoint loaded
  with ``AutoModelForSequenceClassification`` and nothing for a model built in code.
* **measured** (:class:`MeasuredCost`) for any other model: a pass's FLOPs are linear in its work
  (tokens, attention pairs, head positions) for each kind of pass, so the module is run once on a
  one-row batch at a few widths under :func:`paper_repro.profiling.flop_counter` and the rates per
  token, per pair and per head position solved from the counts. What is measured is what runs: a
  mixture-of-experts' experts as transformers runs them (each token through its top-k experts, in every
  experts implementation of transformers 5), eager attention's full square of scores, sliding windows
  and soft-capping included (masks and caps are elementwise). Measured at construction, before
  ``train()``, on the model's device, with the random state and the gradients left as they were.

  A cost per model call that does not grow with the tokens (PEFT's LoRA on a mixture-of-experts'
  expert parameters computes every expert's delta weights in each forward) is measured too, but the
  ledger counts tokens, not calls: it is left out, and the trainer's warning says how large it is.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch

from paper_repro import flops
from paper_repro.flops import CostModel, ModelShape, TrainSpec, Work
from paper_repro.profiling import count_flops

# One row at each width: the first three solve cost = call + token x width + pair x width^2, the last
# checks it.
WIDTHS = (8, 16, 24, 32)
HEAD_POSITIONS = 4  # positions the output head is measured on
TOKEN_IDS = 8  # the measured rows repeat ids 8..15: ordinary tokens in any vocabulary
# The fit's relative error at the check width, and a per-call cost relative to the first width's
# count, beyond which the ledger warns
TOLERANCE = 1e-3


@dataclass(frozen=True)
class Rates:
    """FLOPs of one kind of pass per unit of its work: per body token, per (query, key) pair scored,
    per position through the output head."""

    token: float = 0.0
    pair: float = 0.0
    head: float = 0.0

    def __call__(self, work: Work) -> float:
        return self.token * work.tokens + self.pair * work.attn_pairs + self.head * work.head_tokens


@dataclass(frozen=True)
class Adapters:
    """The LoRA adapters of a measured model, as the compute card reports them (the price comes from
    running them): their ranks (one int when they share one) and the names of the adapted modules."""

    rank: int | tuple[int, ...]
    target_modules: tuple[str, ...]


@dataclass(frozen=True)
class MeasuredCost:
    """A model priced by measuring its module (see the module docstring).

    ``forward``: a no-grad forward with the adapters active (generation, the old-policy forward);
    ``base_forward``: with them disabled (the reference forward); ``train``: a loss pass's forward and
    backward, without TRL's head recompute, which :meth:`train_flops` adds from ``forward`` as the
    training spec asks, as it adds the body's recompute under gradient checkpointing unless the
    measurement ran with checkpointing on (``checkpointed``; transformers' ``Trainer`` turns it on in
    ``train()``, after the measurement). A reward model has ``forward`` only, its head folded into the
    per-token rate (it scores every position it reads). ``unpriced``: why it could not be measured; then
    every rate is 0."""

    forward: Rates
    base_forward: Rates
    train: Rates
    name: str
    model_type: str
    parameters: int
    non_embedding_parameters: int
    checkpointed: bool = False
    per_call: float = 0.0  # FLOPs per model call beyond its tokens (a loss pass's): not counted
    nonlinearity: float = 0.0  # the fit's relative error at the check width
    unpriced: str | None = None

    def forward_flops(self, work: Work, lora: Any = None) -> float:
        """With ``lora`` (any: the adapters measured) the adapters are active; None: disabled."""
        return (self.forward if lora is not None else self.base_forward)(work)

    def train_flops(self, work: Work, train: TrainSpec) -> float:
        total = self.train(work)
        if train.head_recompute:
            total += self.forward.head * work.head_tokens
        if train.gradient_checkpointing and not self.checkpointed:
            total += self.forward(replace(work, head_tokens=0))
        return total

    def parameter_count(self, include_embeddings: bool = True) -> int:
        """Parameters counted on the module (adapters excluded); without embeddings, the input
        embedding and the output head left out, as :meth:`ModelShape.parameter_count` does."""
        return self.parameters if include_embeddings else self.non_embedding_parameters


# ---------------------------------------------------------------------------------------------
# Choosing
# ---------------------------------------------------------------------------------------------


def policy_cost(
    model: Any, gradient_checkpointing: bool, checkpointing_kwargs: dict[str, Any] | None = None
) -> tuple[CostModel, TrainSpec]:
    """The policy's cost model and training spec (TRL's fused LM head recomputes its logits in
    backward): analytic where it knows the model and its LoRA, else measured."""
    spec = dict(gradient_checkpointing=gradient_checkpointing, head_recompute=True)
    shape = analytic_shape(_base(model))
    if shape is not None:
        try:
            return shape, TrainSpec(lora=lora_spec_of(model, shape.num_layers), **spec)
        except ValueError:  # LoRA the analytic model cannot describe: measured
            pass
    return measure_policy(model), TrainSpec(lora=adapters_of(model), **spec)


def reward_model_cost(module: Any) -> CostModel:
    """A reward model's cost model: its forward, analytic or measured; ``MeasuredCost.unpriced``
    says why when its forward cannot be run on a tiny batch."""
    shape = analytic_shape(module)
    if shape is not None:
        return shape
    return measure_reward_model(module)


def analytic_shape(model: Any) -> ModelShape | None:
    """The analytic shape of a plain (not PEFT-wrapped) HF model, with its output head read from the
    module; None outside the families the analytic model knows, or for a backbone that is not
    transformers' own class for its model type."""
    config = getattr(model, "config", None)
    try:
        shape = ModelShape.from_config(config)
    except (ValueError, KeyError, AttributeError, TypeError):
        return None
    backbone = getattr(model, "base_model", model)
    model_type = shape.model_type
    if (
        backbone is model
        or type(backbone).__module__ != f"transformers.models.{model_type}.modeling_{model_type}"
    ):
        return None
    head = head_of(model, backbone)
    return replace(shape, head=head) if head else None


def head_of(model: torch.nn.Module, backbone: torch.nn.Module) -> tuple[tuple[int, int], ...]:
    """(in, out) of the linear layers a model has outside its backbone, in order: its output head
    (``lm_head``; a classifier's ``score``; a PRM's ``score`` MLP)."""
    inside = {id(m) for m in backbone.modules()}
    return tuple(
        (m.in_features, m.out_features)
        for m in model.modules()
        if isinstance(m, torch.nn.Linear) and id(m) not in inside
    )


def _lora_ranks(model: Any) -> tuple[dict[str, set[int]], dict[str, int]]:
    """The active adapters' ranks and how many adapted modules carry them, per module name (a PEFT
    wrapper of a wrapper, as on each of an experts module's parameters, under the wrapped module's)."""
    ranks: dict[str, set[int]] = defaultdict(set)
    counts: dict[str, int] = defaultdict(int)
    for name, module in model.named_modules():
        lora_a = getattr(module, "lora_A", None)
        if isinstance(lora_a, torch.nn.ModuleDict) and len(lora_a):
            short = name.replace(".base_layer", "").rsplit(".", 1)[-1]
            counts[short] += 1
            for adapter in module.active_adapters:
                if adapter in lora_a:
                    ranks[short].add(module.r[adapter])
    return ranks, counts


def lora_spec_of(model: Any, num_layers: int) -> flops.LoRASpec | None:
    """The active LoRA adapters of a PEFT model as a LoRASpec (None for a plain model: full
    training), read from the adapted modules themselves; a ValueError for adapters the analytic model
    cannot describe (several ranks, modules not in every layer or not among its linear modules)."""
    ranks, counts = _lora_ranks(model)
    if not ranks:
        return None
    all_ranks = set().union(*ranks.values())
    if len(all_ranks) != 1 or any(n != num_layers for n in counts.values()):
        raise ValueError(
            "the analytic FLOP model supports one LoRA rank on the same modules of every layer; "
            f"found ranks {sorted(all_ranks)} on {dict(counts)} (of {num_layers} layers)"
        )
    return flops.LoRASpec(rank=all_ranks.pop(), target_modules=tuple(sorted(ranks)))


def adapters_of(model: Any) -> Adapters | None:
    """The active LoRA adapters of a measured model (None: none, full training)."""
    ranks, _ = _lora_ranks(model)
    if not ranks:
        return None
    all_ranks = sorted(set().union(*ranks.values()))
    return Adapters(all_ranks[0] if len(all_ranks) == 1 else tuple(all_ranks), tuple(sorted(ranks)))


# ---------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------


def measure_policy(model: Any) -> MeasuredCost:
    """Measure a policy (PEFT-wrapped or plain): its backbone's forward with the adapters active and
    disabled and its forward and backward in training, per token and per pair; its output head's
    forward and forward-and-backward per position. Unpriced, with the reason, when it cannot run."""
    base = _base(model)
    try:
        backbone, head = base.base_model, base.get_output_embeddings()
        if backbone is base or head is None:
            raise ValueError(f"{type(base).__name__} has no separate backbone and output head")
        with _untouched(model):
            forward, _, fit = _body_rates(backbone, train=False)
            base_forward, base_fit = forward, fit
            if adapters_of(model) is not None:
                with model.disable_adapter():
                    base_forward, _, base_fit = _body_rates(backbone, train=False)
            train, per_call, train_fit = _body_rates(backbone, train=True)
            hidden = head.weight.new_zeros(1, HEAD_POSITIONS, base.config.get_text_config().hidden_size)
            head_forward = _per_position(lambda: head(hidden), train=False)
            head_train = _per_position(lambda: head(hidden.requires_grad_()), train=True)
    except Exception as err:  # a module that cannot run on a plain one-row batch
        return _unpriced(base, f"{type(err).__name__}: {err}")
    return MeasuredCost(
        forward=replace(forward, head=head_forward),
        base_forward=replace(base_forward, head=head_forward),
        train=replace(train, head=head_train),
        checkpointed=bool(getattr(base, "is_activation_checkpointing", False)),
        per_call=per_call,
        nonlinearity=max(fit, base_fit, train_fit),
        **_identity(base),
    )


def measure_reward_model(module: Any) -> MeasuredCost:
    """Measure a reward model's forward, as TRL calls it (``input_ids`` and ``attention_mask``), head
    included: it scores every position it reads. Unpriced, with the reason, when it cannot run."""
    try:
        with _untouched(module):
            rates, per_call, fit = _fit(
                lambda ids: module(input_ids=ids, attention_mask=torch.ones_like(ids)),
                next(module.parameters()).device,
                train=False,
            )
    except Exception as err:  # a module that cannot run on a plain one-row batch
        return _unpriced(module, f"{type(err).__name__}: {err}")
    return MeasuredCost(
        forward=rates,
        base_forward=rates,
        train=Rates(),
        per_call=per_call,
        nonlinearity=fit,
        **_identity(module),
    )


def _body_rates(backbone: Any, train: bool) -> tuple[Rates, float, float]:
    """Per-token and per-pair rates of the backbone's forward (``train``: and backward), see :func:`_fit`."""

    def run(ids: torch.Tensor) -> torch.Tensor:
        return backbone(input_ids=ids, use_cache=False).last_hidden_state

    return _fit(run, next(backbone.parameters()).device, train)


def _fit(run: Callable[[torch.Tensor], Any], device: torch.device, train: bool) -> tuple[Rates, float, float]:
    """``run`` on one row of ordinary token ids at each of :data:`WIDTHS` (eager attention scores
    width^2 pairs): the rates of cost = call + token x width + pair x width^2 from the first three
    widths, the per-call cost, and the fit's relative error at the last."""
    counts = []
    for width in WIDTHS:
        ids = (torch.arange(width, device=device) % TOKEN_IDS + TOKEN_IDS)[None]
        counts.append(_count(lambda ids=ids: run(ids), train))
    powers = torch.tensor([[1.0, w, w * w] for w in WIDTHS], dtype=torch.float64)
    call, token, pair = torch.linalg.solve(powers[:3], torch.tensor(counts[:3], dtype=torch.float64)).tolist()
    predicted = call + token * WIDTHS[-1] + pair * WIDTHS[-1] ** 2
    call = call if abs(call) > TOLERANCE * counts[0] else 0.0  # rounding in the solve
    return Rates(token, pair), call, abs(predicted - counts[-1]) / max(counts[-1], 1.0)


def _per_position(run: Callable[[], Any], train: bool) -> float:
    return _count(run, train) / HEAD_POSITIONS


def _count(run: Callable[[], Any], train: bool) -> float:
    """Matmul FLOPs of ``run`` (``train``: and of the backward of its output's sum, when it has one)."""

    def step() -> None:
        with torch.enable_grad() if train else torch.no_grad():
            out = run()
            out = out if isinstance(out, torch.Tensor) else out[0]
            if train and out.requires_grad:
                out.sum().backward()

    return float(count_flops(step)[1])


@contextmanager
def _untouched(model: torch.nn.Module) -> Iterator[None]:
    """Measure in training mode (as the ledger's passes run), leaving the mode, the gradients and the
    random state as they were."""
    params = [p for p in model.parameters() if p.requires_grad]
    grads = [p.grad for p in params]
    device = next(model.parameters()).device
    training = model.training
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        try:
            model.train()
            yield
        finally:
            model.train(training)
            for p, g in zip(params, grads, strict=True):
                p.grad = g


def _base(model: Any) -> Any:
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _identity(model: Any) -> dict[str, Any]:
    """Name, model type and parameter counts (adapters excluded) of a measured model; the input
    embedding and the output head are the embedding parameters."""
    total = sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n)
    ends = [getattr(model, f, lambda: None)() for f in ("get_input_embeddings", "get_output_embeddings")]
    weights = {id(m.weight): m.weight for m in ends if isinstance(getattr(m, "weight", None), torch.Tensor)}
    config = getattr(model, "config", None)
    return {
        "name": str(getattr(config, "_name_or_path", "") or ""),
        "model_type": str(getattr(config, "model_type", "") or type(model).__name__),
        "parameters": total,
        "non_embedding_parameters": total - sum(w.numel() for w in weights.values()),
    }


def _unpriced(model: Any, reason: str) -> MeasuredCost:
    return MeasuredCost(Rates(), Rates(), Rates(), unpriced=reason, **_identity(model))


# ---------------------------------------------------------------------------------------------
# What cannot be priced
# ---------------------------------------------------------------------------------------------


def unpriced_parts(costs: Mapping[str, CostModel]) -> list[str]:
    """``name (why)`` for each of these cost models that could not be measured (priced at 0)."""
    return [f"{name} ({cost.unpriced})" for name, cost in costs.items() if getattr(cost, "unpriced", None)]


def check_priced(
    costs: Mapping[str, CostModel], budget: float | None, unmodelled: Sequence[str] = ()
) -> None:
    """Say once, as a warning, what the ledger cannot price (``costs`` it could not measure and the
    ``unmodelled`` parts of the run: counted as 0 FLOPs) and what it prices by a linear fit that missed
    its check width. With a budget, refuse what it cannot price: the budget could not be kept."""
    gaps = unpriced_parts(costs) + list(unmodelled)
    if gaps and budget is not None:
        raise ValueError(
            f"the FLOP ledger cannot price {'; '.join(gaps)}, so it cannot keep budget_flops={budget:.3g}; "
            "run without a budget to count the rest"
        )
    measured = {name: cost for name, cost in costs.items() if isinstance(cost, MeasuredCost)}
    rough = [
        f"{name} (off by {cost.nonlinearity:.2%} at width {WIDTHS[-1]})"
        for name, cost in measured.items()
        if cost.nonlinearity > TOLERANCE
    ]
    per_call = [
        f"{name} costs {cost.per_call:.3g} FLOPs per model call beyond its tokens"
        for name, cost in measured.items()
        if cost.per_call
    ]
    notes = [f"it cannot price {'; '.join(gaps)}: counted as 0 FLOPs"] if gaps else []
    if rough:
        notes.append(
            f"the measured cost of {'; '.join(rough)} is not linear in tokens and pairs: priced by a fit"
        )
    if per_call:
        notes.append(
            f"{'; '.join(per_call)} (e.g. PEFT's LoRA on expert parameters computing their delta "
            "weights in each forward): not counted, the ledger counts tokens, not calls"
        )
    if notes:
        warnings.warn(f"FLOP ledger: {'. '.join(notes)}", stacklevel=3)
