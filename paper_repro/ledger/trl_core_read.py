"""What the ledger's pull-request-sized core (:mod:`paper_repro.ledger.trl_core`) reads of a model, a
trainer and a forward call, priced by the project's FLOP model (:mod:`paper_repro.accounting.flops`).

Stdlib, torch and transformers only, beside the FLOP model (itself stdlib only): a TRL maintainer reads
it with the callback and the FLOP model beside it.

* The model: :func:`analytic_shape` (a Qwen2 / Llama / Mistral / Qwen3 decoder's matmul shapes, its
  output head read from the module), :func:`lora_spec_of` (its active LoRA adapters) and
  :func:`checkpointing_of` (the replay a run's ``activation_checkpointing_kwargs`` ask for), which
  :func:`train_spec_of` joins into the run's :class:`~paper_repro.accounting.flops.TrainSpec`.
* The trainer: :func:`trainer_models` (its separate reference model and its reward models),
  :func:`calling_trainer` and :func:`lead_the_log_readers`.
* A call: :func:`read_call` (what a forward's pre-hook reads), :func:`forward_work` (the useful and
  executed :class:`~paper_repro.accounting.flops.Work` of a full-sequence forward), :func:`real_rows_work`
  and :func:`first_eos_lengths` (generated lengths up to the first EOS).

The richer ledger (:mod:`paper_repro.ledger.cost_models`, :mod:`paper_repro.ledger.watch`) reads models
and calls through these functions too: each is the one owner of what it reads.
"""

from __future__ import annotations

import inspect
import json
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

import torch

from paper_repro.accounting.flops import LoRASpec, ModelShape, Recompute, TrainSpec, Work, causal_pairs

# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------


def base_model(model: Any) -> Any:
    """The model inside a PEFT wrapper (the model itself without one)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def unwrap(module: Any) -> Any:
    """The model inside accelerate's, DDP's or DeepSpeed's wrapper (their ``.module``): the module whose
    own forward runs, so its hooks see every call through the wrapper."""
    from transformers import PreTrainedModel

    while not isinstance(module, PreTrainedModel) and isinstance(
        getattr(module, "module", None), torch.nn.Module
    ):
        module = module.module
    return module


def analytic_shape(model: Any) -> ModelShape | None:
    """The analytic shape of a plain (not PEFT-wrapped) HF model, with its output head read from the
    module; None outside the families the FLOP model knows, or for a backbone that is not transformers'
    own class for its model type (whose matmuls the formula cannot vouch for)."""
    config = getattr(model, "config", None)
    try:
        shape = ModelShape.from_config(config)
    except (ValueError, KeyError, AttributeError, TypeError):
        return None
    backbone = getattr(model, "base_model", model)
    kind = shape.model_type
    if backbone is model or type(backbone).__module__ != f"transformers.models.{kind}.modeling_{kind}":
        return None
    head = head_of(model, backbone)
    return replace(shape, head=head) if head else None


def head_of(model: torch.nn.Module, backbone: torch.nn.Module) -> tuple[tuple[int, int], ...]:
    """(in, out) of the linear layers a model has outside its backbone, in order: its output head
    (``lm_head``; a classifier's ``score``; a process reward model's ``score`` MLP), read from the module,
    not from ``config.architectures`` (which says ``...ForCausalLM`` for a checkpoint loaded with
    ``AutoModelForSequenceClassification`` and nothing for a model built in code)."""
    inside = {id(m) for m in backbone.modules()}
    return tuple(
        (m.in_features, m.out_features)
        for m in model.modules()
        if isinstance(m, torch.nn.Linear) and id(m) not in inside
    )


def lora_ranks(model: Any) -> tuple[dict[str, set[int]], dict[str, int]]:
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


def lora_spec_of(model: Any, num_layers: int) -> LoRASpec | None:
    """The active LoRA adapters of a PEFT model (None for a plain model: full training), read from the
    adapted modules themselves; a ValueError for adapters the FLOP model cannot describe (several ranks,
    modules not in every layer or not among a layer's linears)."""
    ranks, counts = lora_ranks(model)
    if not ranks:
        return None
    every = set().union(*ranks.values())
    if len(every) != 1 or any(n != num_layers for n in counts.values()):
        raise ValueError(
            "the analytic FLOP model supports one LoRA rank on the same modules of every layer; "
            f"found ranks {sorted(every)} on {dict(counts)} (of {num_layers} layers)"
        )
    return LoRASpec(rank=every.pop(), target_modules=tuple(sorted(ranks)))


def checkpointing_of(kwargs: dict[str, Any] | str | None) -> tuple[Recompute, int]:
    """What a run's ``activation_checkpointing_kwargs`` make transformers 5 and torch 2 run: the recompute
    (:attr:`~paper_repro.accounting.flops.TrainSpec.recompute`) and every how many decoder layers one is
    checkpointed. As ``Trainer`` reads them: ``every_n_layers`` and ``offload`` (no FLOPs) are its own,
    the rest go to ``torch.utils.checkpoint.checkpoint``, and none left means ``use_reentrant=False``;
    torch's ``use_reentrant`` unset means reentrant, and non-reentrant stops early unless
    ``early_stop=False``. (``torch.utils.checkpoint.set_checkpoint_early_stop(False)`` around the
    training is not seen here.)"""
    torch_kwargs = dict(json.loads(kwargs) if isinstance(kwargs, str) else kwargs or {})
    every_n_layers = int(torch_kwargs.pop("every_n_layers", 1))
    torch_kwargs.pop("offload", None)
    torch_kwargs = torch_kwargs or {"use_reentrant": False}
    reentrant = torch_kwargs.get("use_reentrant") is None or bool(torch_kwargs["use_reentrant"])
    early_stop = not reentrant and bool(torch_kwargs.get("early_stop", True))
    return ("early_stop" if early_stop else "full"), every_n_layers


def checkpointing_args(args: Any) -> tuple[bool, dict[str, Any] | str | None]:
    """(on, kwargs) of a run's activation checkpointing, under transformers 5's names or the older
    ``gradient_checkpointing`` ones."""
    on = getattr(args, "activation_checkpointing", getattr(args, "gradient_checkpointing", False))
    kwargs = getattr(
        args, "activation_checkpointing_kwargs", getattr(args, "gradient_checkpointing_kwargs", None)
    )
    return bool(on), kwargs


def train_spec_of(
    lora: Any, checkpointing: bool, checkpointing_kwargs: dict[str, Any] | str | None = None
) -> TrainSpec:
    """How the policy trains: ``lora`` (None: full fine-tuning), TRL's fused LM head recomputing its
    logits in backward, and under activation checkpointing the replay ``checkpointing_kwargs`` ask for
    (:func:`checkpointing_of`)."""
    spec: dict[str, Any] = dict(gradient_checkpointing=checkpointing, head_recompute=True)
    if checkpointing:
        recompute, every_n_layers = checkpointing_of(checkpointing_kwargs)
        spec.update(recompute=recompute, checkpoint_every_n_layers=every_n_layers)
    return TrainSpec(lora=lora, **spec)


# --------------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------------


def trainer_models(trainer: Any) -> tuple[Any, list[Any]]:
    """(the separate reference model or None, the reward models) of a TRL ``GRPOTrainer`` or
    ``RLOOTrainer``, read from its public attributes ``ref_model`` (None with PEFT, whose reference is
    the policy with its adapters disabled, and with ``beta=0``) and ``reward_funcs`` (the ``nn.Module``
    entries; the rest are reward functions), each unwrapped (:func:`unwrap`)."""
    ref = getattr(trainer, "ref_model", None)
    rewards = [f for f in getattr(trainer, "reward_funcs", None) or () if isinstance(f, torch.nn.Module)]
    return (None if ref is None else unwrap(ref)), [unwrap(f) for f in rewards]


def calling_trainer(callback: Any) -> Any:
    """The ``transformers.Trainer`` whose callback handler is calling ``callback`` now (the caller's
    frame whose ``self`` is a Trainer holding it), else None: how a callback given to a trainer's
    ``callbacks`` finds it in ``on_train_begin``, as transformers hands a callback the trainer's model,
    optimizer and data loaders but not the trainer. ``attach(trainer)`` is the route that needs no
    frame: this is the fallback for ``callbacks=[...]``."""
    from transformers import Trainer

    frame = inspect.currentframe()
    try:
        while frame is not None:
            owner = frame.f_locals.get("self")
            if isinstance(owner, Trainer) and any(cb is callback for cb in owner.callback_handler.callbacks):
                return owner
            frame = frame.f_back
        return None
    finally:
        del frame  # a frame kept alive holds every local of the stack


def lead_the_log_readers(callback: Any, handler: Any) -> None:
    """Move ``callback`` ahead of the first callback in ``handler.callbacks`` (transformers'
    ``CallbackHandler``) that reads the logs, one with its own ``on_log``: the ``report_to`` backends
    (TensorBoard, W&B, ...), which Trainer lists before any user callback, and the printers. They then
    receive the logs with what ``callback.on_log`` adds to them. Moving a callback earlier leaves every
    later callback at its index, so a handler looping over the list while this runs calls each once."""
    from transformers import TrainerCallback

    callbacks = handler.callbacks
    here = next(i for i, cb in enumerate(callbacks) if cb is callback)
    readers = (i for i, cb in enumerate(callbacks[:here]) if type(cb).on_log is not TrainerCallback.on_log)
    first = next(readers, None)
    if first is not None:
        callbacks.insert(first, callbacks.pop(here))


# --------------------------------------------------------------------------------------------
# A call
# --------------------------------------------------------------------------------------------


@dataclass
class Call:
    """One forward in flight: what its pre-hook read (rows, width, attended keys, the 2-d mask, the
    shifted labels, whether TRL's fused head runs, whether grad is on) and ``head``, the positions the
    output head module ran, counted by the head's pre-hook."""

    rows: int
    width: int
    keys: int
    mask: torch.Tensor | None
    labels: torch.Tensor | None
    fused: bool
    grad: bool
    head: int = 0

    def count_head(self, args: tuple) -> None:
        """Add the positions of the output head's input (its first argument)."""
        if args and isinstance(args[0], torch.Tensor):
            self.head += args[0].numel() // max(args[0].size(-1), 1)


def arg(args: tuple, kwargs: dict, name: str, position: int | None = None) -> Any:
    """The call's argument ``name``, given by keyword or at ``position``."""
    if name in kwargs:
        return kwargs[name]
    return args[position] if position is not None and len(args) > position else None


def read_call(args: tuple, kwargs: dict) -> Call | None:
    """What a full model forward's pre-hook reads; None when the call has neither ``input_ids`` nor
    ``inputs_embeds`` (nothing to count from)."""
    x = arg(args, kwargs, "input_ids", 0)
    x = x if isinstance(x, torch.Tensor) else kwargs.get("inputs_embeds")
    if not isinstance(x, torch.Tensor):
        return None
    rows, width = x.shape[:2]
    mask = kwargs.get("attention_mask")
    if isinstance(mask, torch.Tensor) and mask.dim() in (2, 4):
        keys = mask.size(-1)
    else:  # no mask (no padding): every cached key ("cache" in transformers 5, "past_key_values" before)
        mask, past = None, kwargs.get("cache", kwargs.get("past_key_values"))
        keys = width + (int(past.get_seq_length()) if hasattr(past, "get_seq_length") else 0)
    labels = kwargs.get("shift_labels")
    if labels is None and isinstance(kwargs.get("labels"), torch.Tensor):
        labels = kwargs["labels"][:, 1:]
    return Call(
        rows=int(rows),
        width=int(width),
        keys=int(keys),
        mask=mask if mask is not None and mask.dim() == 2 else None,
        labels=labels,
        fused=bool(kwargs.get("fused_lm_head", False)),
        grad=torch.is_grad_enabled(),
    )


def compact_head(device: torch.device) -> bool:
    """Whether TRL's fused head scores only the labelled positions (its Triton path, CUDA or XPU)."""
    from transformers.utils import is_triton_available

    return device.type in ("cuda", "xpu") and is_triton_available()


def real_rows_work(mask: torch.Tensor, head_tokens: int | None = None) -> Work:
    """Useful work of a forward over padded rows whose real tokens (``mask``: rows x width, 1 = real) are
    contiguous: each row's real tokens attend causally; ``head_tokens`` defaults to every real one."""
    lengths = mask.sum(dim=1).tolist()
    tokens = sum(lengths)
    return Work(tokens, sum(causal_pairs(n) for n in lengths), tokens if head_tokens is None else head_tokens)


def forward_work(call: Call) -> dict[str, Work]:
    """Useful and executed work of a full-sequence forward (its keys: the call's attended keys), from
    its mask and labels. TRL's fused head scores the labelled positions on CUDA/XPU with Triton and
    every position but the last elsewhere; a head run as a module, the positions its hook saw (useful:
    a real position scoring a real next token)."""
    rows, width = call.rows, call.width
    if call.fused and call.labels is not None:
        head_useful = int((call.labels != -100).sum())
        head_executed = head_useful if compact_head(call.labels.device) else rows * (width - 1)
    else:
        head_executed = call.head
        per_row = head_executed // rows if rows else 0
        if call.mask is not None and 0 < per_row <= width:
            low = width - per_row
            head_useful = int((call.mask[:, low : width - 1] * call.mask[:, low + 1 :]).sum())
        else:
            head_useful = head_executed
    if call.mask is not None:
        useful = real_rows_work(call.mask, head_useful)
    else:
        useful = Work(rows * width, rows * causal_pairs(width), head_useful)
    return {"useful": useful, "executed": Work(rows * width, rows * width * call.keys, head_executed)}


def first_eos_lengths(completions: torch.Tensor, eos: Any) -> list[int]:
    """Each row's completion length up to and including its first EOS (the whole width without one)."""
    width = completions.size(1)
    if eos is None or width == 0:
        return [width] * completions.size(0)
    eos_ids = torch.tensor([eos] if isinstance(eos, int) else list(eos), device=completions.device)
    is_eos = torch.isin(completions, eos_ids)
    return torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1) + 1, width).tolist()
