"""The cost models the ledger prices a model's passes with: the analytic FLOP model where it knows the
model, a measurement of the module that runs everywhere else.

A cost model (:class:`paper_repro.accounting.flops.CostModel`) turns a pass's :class:`~paper_repro.accounting.flops.Work` into
FLOPs; the ledger charges every pass through :func:`paper_repro.accounting.flops.forward_flops` and
:func:`~paper_repro.accounting.flops.train_flops`, which take either kind. :func:`policy_cost` and
:func:`reward_model_cost` choose:

* **analytic** (:class:`~paper_repro.accounting.flops.ModelShape`) for a model of a family the analytic model
  knows (``qwen2``, ``llama``, ``mistral``, ``qwen3``) whose backbone is transformers' own class for it,
  with LoRA of one rank on the same modules of every layer. Its output head is read from the module:
  the linear layers after the backbone (``lm_head``, a classifier's ``score``, a process reward model's
  ``score`` MLP), not ``config.architectures``, which says ``...ForCausalLM`` for a checkpoint loaded
  with ``AutoModelForSequenceClassification`` and nothing for a model built in code.
* **measured** (:class:`MeasuredCost`) for any other model: a pass's FLOPs are linear in its work
  (tokens, attention pairs, head positions) for each kind of pass, so the module is run once on a
  one-row batch at a few widths under :func:`paper_repro.accounting.profiling.flop_counter` and the rates per
  token, per pair and per head position solved from the counts. What is measured is what runs: a
  mixture-of-experts' experts as transformers runs them (each token through its top-k experts, in every
  experts implementation of transformers 5), eager attention's full square of scores, sliding windows
  and soft-capping included (masks and caps are elementwise). Measured at construction, before
  ``train()``, on the model's device, with the random state and the gradients left as they were.

  Under activation checkpointing the loss pass is measured again with checkpointing on as the run
  turns it on (:attr:`paper_repro.accounting.flops.TrainSpec.recompute`: reentrant, replaying each checkpointed
  layer whole, or non-reentrant with torch's early stop, replaying it up to the last tensor its
  backward saved; on the layers the run checkpoints; the input embeddings' output requiring grad, as
  transformers makes it), the module's own settings put back after. What the early stop skips depends
  on the layer's code (gemma2's norm after the MLP saves the down projection's output: nothing is
  skipped), so it is measured, not assumed.

  A cost per model call that does not grow with the tokens (PEFT's LoRA on a mixture-of-experts'
  expert parameters computes every expert's delta weights in each forward) is measured too, but the
  ledger counts tokens, not calls: it is left out, and the trainer's warning says how large it is.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.utils.checkpoint

from paper_repro.accounting import flops
from paper_repro.accounting.flops import CostModel, TrainSpec, Work
from paper_repro.accounting.profiling import count_flops
from paper_repro.ledger.trl_core_read import (  # noqa: F401 (re-exported: the model readers' old home)
    analytic_shape,
    base_model,
    checkpointing_of,
    head_of,
    lora_ranks,
    lora_spec_of,
    train_spec_of,
)

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
    training spec asks. ``train`` is measured with the module as it is (``checkpointed``: with its own
    activation checkpointing on); ``checkpointed_train`` with activation checkpointing on every
    ``checkpoint_every_n_layers``-th layer, replaying them as ``recompute`` says (None: not measured,
    the run does not checkpoint or the module cannot: then the body's whole forward is added under
    checkpointing). A reward model has ``forward`` only, its head folded into the per-token rate (it
    scores every position it reads). ``unpriced``: why it could not be measured; then every rate is 0."""

    forward: Rates
    base_forward: Rates
    train: Rates
    name: str
    model_type: str
    parameters: int
    non_embedding_parameters: int
    checkpointed: bool = False
    checkpointed_train: Rates | None = None
    recompute: flops.Recompute | None = None
    checkpoint_every_n_layers: int = 1
    per_call: float = 0.0  # FLOPs per model call beyond its tokens (a loss pass's): not counted
    nonlinearity: float = 0.0  # the fit's relative error at the check width
    unpriced: str | None = None

    def forward_flops(self, work: Work, lora: Any = None) -> float:
        """With ``lora`` (any: the adapters measured) the adapters are active; None: disabled."""
        return (self.forward if lora is not None else self.base_forward)(work)

    def train_flops(self, work: Work, train: TrainSpec) -> float:
        """The loss pass as measured under the training spec's checkpointing, + TRL's head recompute."""
        if not train.gradient_checkpointing:
            total = self.train(work)
        elif self.checkpointed_train is None:  # not measured: the body's whole forward again
            total = self.train(work)
            total += 0 if self.checkpointed else self.forward(replace(work, head_tokens=0))
        elif (train.recompute, train.checkpoint_every_n_layers) == (
            self.recompute,
            self.checkpoint_every_n_layers,
        ):
            total = self.checkpointed_train(work)
        else:
            raise ValueError(
                f"measured with recompute={self.recompute!r} on every {self.checkpoint_every_n_layers} "
                f"layer(s), asked for recompute={train.recompute!r} on every "
                f"{train.checkpoint_every_n_layers}: measure_policy(model, recompute, every_n_layers)"
            )
        if train.head_recompute:
            total += self.forward.head * work.head_tokens
        return total

    def parameter_count(self, include_embeddings: bool = True) -> int:
        """Parameters counted on the module (adapters excluded); without embeddings, the input
        embedding and the output head left out, as :meth:`ModelShape.parameter_count` does."""
        return self.parameters if include_embeddings else self.non_embedding_parameters


# ---------------------------------------------------------------------------------------------
# Choosing
# ---------------------------------------------------------------------------------------------


def policy_cost(
    model: Any, gradient_checkpointing: bool, checkpointing_kwargs: dict[str, Any] | str | None = None
) -> tuple[CostModel, TrainSpec]:
    """The policy's cost model and training spec (TRL's fused LM head recomputes its logits in
    backward; under activation checkpointing, the recompute ``checkpointing_kwargs`` ask for, see
    :func:`checkpointing_of`): analytic where it knows the model and its LoRA, else measured."""
    shape = analytic_shape(base_model(model))
    if shape is not None:
        try:
            lora = lora_spec_of(model, shape.num_layers)
            return shape, train_spec_of(lora, gradient_checkpointing, checkpointing_kwargs)
        except ValueError:  # LoRA the analytic model cannot describe: measured
            pass
    recompute, every_n_layers = checkpointing_of(checkpointing_kwargs)
    measured = measure_policy(model, recompute if gradient_checkpointing else None, every_n_layers)
    return measured, train_spec_of(adapters_of(model), gradient_checkpointing, checkpointing_kwargs)


def reward_model_cost(module: Any) -> CostModel:
    """A reward model's cost model: its forward, analytic or measured; ``MeasuredCost.unpriced``
    says why when its forward cannot be run on a tiny batch."""
    shape = analytic_shape(module)
    if shape is not None:
        return shape
    return measure_reward_model(module)


def adapters_of(model: Any) -> Adapters | None:
    """The active LoRA adapters of a measured model (None: none, full training)."""
    ranks, _ = lora_ranks(model)
    if not ranks:
        return None
    all_ranks = sorted(set().union(*ranks.values()))
    return Adapters(all_ranks[0] if len(all_ranks) == 1 else tuple(all_ranks), tuple(sorted(ranks)))


# ---------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------


def measure_policy(
    model: Any, recompute: flops.Recompute | None = "early_stop", every_n_layers: int = 1
) -> MeasuredCost:
    """Measure a policy (PEFT-wrapped or plain): its backbone's forward with the adapters active and
    disabled and its forward and backward in training, per token and per pair, as it is and (unless
    ``recompute`` is None) with every ``every_n_layers``-th decoder layer checkpointed, replayed as
    ``recompute`` says (default: as transformers' default checkpointing runs); its output head's
    forward and forward-and-backward per position. Unpriced, with the reason, when it cannot run."""
    base = base_model(model)
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
            checkpointed = None
            if recompute is not None:
                checkpointed, train_fit = _checkpointed_rates(
                    base, backbone, recompute, every_n_layers, train_fit
                )
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
        checkpointed_train=None if checkpointed is None else replace(checkpointed, head=head_train),
        recompute=None if checkpointed is None else recompute,
        checkpoint_every_n_layers=every_n_layers,
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


def _checkpointed_rates(
    base: Any, backbone: Any, recompute: flops.Recompute, every_n_layers: int, fit: float
) -> tuple[Rates | None, float]:
    """The loss pass's rates with every ``every_n_layers``-th layer checkpointed and replayed as
    ``recompute`` says (``"full"``: reentrant; ``"early_stop"``: non-reentrant, torch's early stop on),
    and the worse of the fits; None where the module cannot checkpoint (transformers' ``Trainer``
    refuses it then) or not this way (an older interface)."""
    if not getattr(base, "supports_gradient_checkpointing", False):
        return None, fit
    kwargs = {"use_reentrant": True} if recompute == "full" else {"use_reentrant": False, "early_stop": True}
    try:
        with _checkpointing(base, kwargs, every_n_layers):
            rates, _, checkpointed_fit = _body_rates(backbone, train=True)
    except Exception:  # priced as the body's whole forward again
        return None, fit
    return rates, max(fit, checkpointed_fit)


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


_UNSET = object()


@contextmanager
def _checkpointing(model: Any, torch_kwargs: dict[str, Any], every_n_layers: int) -> Iterator[None]:
    """``model``'s decoder layers checkpointed as ``activation_checkpointing_enable`` does it
    (``torch.utils.checkpoint.checkpoint`` with ``torch_kwargs``, every ``every_n_layers``-th layer),
    and its input embeddings' output requiring grad as it makes it; each module's checkpointing
    attributes and the hooks put back after."""
    attrs = ("gradient_checkpointing", "_gradient_checkpointing_func")
    saved = [
        (m, {a: m.__dict__.get(a, _UNSET) for a in attrs})
        for m in model.modules()
        if hasattr(m, "gradient_checkpointing")
    ]
    func = functools.partial(torch.utils.checkpoint.checkpoint, **torch_kwargs)
    layout = {} if every_n_layers == 1 else {"every_n_layers": every_n_layers}
    hook = model.get_input_embeddings().register_forward_hook(lambda m, i, out: out.requires_grad_(True))
    try:
        model._set_gradient_checkpointing(enable=True, gradient_checkpointing_func=func, **layout)
        yield
    finally:
        hook.remove()
        for m, values in saved:
            for a, v in values.items():
                if v is not _UNSET:
                    setattr(m, a, v)
                elif a in m.__dict__:
                    delattr(m, a)


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
