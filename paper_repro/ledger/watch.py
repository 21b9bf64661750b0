"""The model hooks of :class:`~paper_repro.ledger.callback.FlopLedgerCallback`: what sees the passes.

:class:`PassWatcher`, a mixin of the callback, owns every hook the callback installs on the models and
the work it counts from them (the callback's module docstring says what each pass is charged):

* the ``generate`` / ``generate_batch`` wrapper on the policy instance (C_search: its wall time, the
  executed work its prefill and decode forwards ran, the useful work read from its output, and the
  ``(prompt, completion)`` tokens of the round's rows, :attr:`_round_rows`, which the callback's budget
  stop reads and resets through :attr:`_new_round`);
* the forward pre/post hooks on the policy and the pre-hook on its LM head (C_learning: loss,
  old-policy and reference forwards, their useful and executed work from mask and labels);
* the same hooks on the trainer's separate reference model (C_learning, ``ref``) and forward hooks on
  its reward models (C_reward, priced by :func:`~paper_repro.ledger.cost_models.reward_model_cost`),
  both read from the trainer's public ``ref_model`` and ``reward_funcs`` (:func:`trainer_models`);
* installing and removing all of them (:meth:`_install`, :meth:`_remove_hooks`) and the CUDA sync
  that brackets timed work (:meth:`_sync`).

Every hook sits on one of the trainer's own models, put there in ``on_train_begin`` and taken off in
``on_train_end``: no process-wide hook, so a model outside the trainer is never touched, and a
module call outside the watched models costs nothing. The trainer is the one given to
:meth:`PassWatcher.attach`, else the one whose callback handler calls ``on_train_begin``
(:func:`calling_trainer`: a callback is never handed its trainer).

The host (the callback) sets :attr:`ledger`, :attr:`_policy`, :attr:`_device` and :attr:`_lora_layer`
in ``on_train_begin`` and sets :attr:`_busy` while it prices the policy. Like the callback, it touches
no private TRL name (``paper_repro.ledger.callback.PRIVATE_TRL_NAMES``).
"""

from __future__ import annotations

import functools
import inspect
import time
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from paper_repro.accounting import flops
from paper_repro.accounting.flops import Work
from paper_repro.ledger.core import FlopLedger, generation_pass_work, real_rows_work
from paper_repro.ledger.cost_models import check_priced, reward_model_cost

# Which watcher holds hooks on which model (weakly: a model or a watcher that is gone drops out). A run
# whose train() raised (an interrupt, an out-of-memory error) never reaches on_train_end, so its hooks
# stay on its models; the next watcher of one of those models removes them before it installs its own,
# so that no pass is charged twice or to a finished run.
_WATCHED: weakref.WeakKeyDictionary[torch.nn.Module, weakref.ref] = weakref.WeakKeyDictionary()


@dataclass
class _Call:
    """One policy forward in flight: what the pre-hook read, the head positions the LM head ran."""

    rows: int
    width: int
    keys: int
    mask: torch.Tensor | None
    labels: torch.Tensor | None
    fused: bool
    grad: bool
    head: int = 0


def _kwarg(args: tuple, kwargs: dict, name: str, position: int | None = None) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[position] if position is not None and len(args) > position else None


def _base(model: Any) -> Any:
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _compact_head(device: torch.device) -> bool:
    """Whether TRL's fused head scores only the labelled positions (its Triton path)."""
    from transformers.utils import is_triton_available

    return device.type in ("cuda", "xpu") and is_triton_available()


def _first_eos_lengths(completions: torch.Tensor, eos: Any) -> list[int]:
    """Each row's completion length up to and including its first EOS (the whole width without one)."""
    width = completions.size(1)
    if eos is None or width == 0:
        return [width] * completions.size(0)
    eos_ids = torch.tensor([eos] if isinstance(eos, int) else list(eos), device=completions.device)
    is_eos = torch.isin(completions, eos_ids)
    first = torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1) + 1, width)
    return first.tolist()


def _read_call(args: tuple, kwargs: dict) -> _Call | None:
    """What a full model forward's pre-hook reads: rows, width, keys, mask, labels; None when the call
    has neither ``input_ids`` nor ``inputs_embeds`` (nothing to count from)."""
    ids = _kwarg(args, kwargs, "input_ids", 0)
    embeds = kwargs.get("inputs_embeds")
    if isinstance(ids, torch.Tensor):
        rows, width = ids.shape[:2]
    elif isinstance(embeds, torch.Tensor):
        rows, width = embeds.shape[:2]
    else:
        return None
    mask = kwargs.get("attention_mask")
    if isinstance(mask, torch.Tensor) and mask.dim() in (2, 4):
        keys = mask.size(-1)
    else:
        # no mask (no padding): every cached key ("cache" in transformers 5, "past_key_values" before)
        mask, past = None, kwargs.get("cache", kwargs.get("past_key_values"))
        keys = width + (int(past.get_seq_length()) if hasattr(past, "get_seq_length") else 0)
    labels = kwargs.get("shift_labels")
    if labels is None and isinstance(kwargs.get("labels"), torch.Tensor):
        labels = kwargs["labels"][:, 1:]
    return _Call(
        rows=int(rows),
        width=int(width),
        keys=int(keys),
        mask=mask if mask is not None and mask.dim() == 2 else None,
        labels=labels,
        fused=bool(kwargs.get("fused_lm_head", False)),
        grad=torch.is_grad_enabled(),
    )


def _unwrap(module: Any) -> Any:
    """The model inside accelerate's, DDP's or DeepSpeed's wrapper (their ``.module``): the module whose
    own forward runs, so its hooks see every call through the wrapper."""
    from transformers import PreTrainedModel

    while not isinstance(module, PreTrainedModel) and isinstance(
        getattr(module, "module", None), torch.nn.Module
    ):
        module = module.module
    return module


def trainer_models(trainer: Any) -> tuple[Any, list[Any]]:
    """(the separate reference model or None, the reward models) of a TRL ``GRPOTrainer`` or
    ``RLOOTrainer``, read from its public attributes ``ref_model`` (None with PEFT, whose reference is
    the policy with its adapters disabled, and with ``beta=0``) and ``reward_funcs`` (the ``nn.Module``
    entries; the rest are reward functions), each unwrapped (:func:`_unwrap`)."""
    ref = getattr(trainer, "ref_model", None)
    rewards = [f for f in getattr(trainer, "reward_funcs", None) or () if isinstance(f, torch.nn.Module)]
    return (None if ref is None else _unwrap(ref)), [_unwrap(f) for f in rewards]


def calling_trainer(callback: Any) -> Any:
    """The ``transformers.Trainer`` whose callback handler is calling ``callback`` now (the caller's
    frame whose ``self`` is a Trainer holding it), else None: how a callback given to a trainer's
    ``callbacks`` (or ``add_callback``) finds it in ``on_train_begin``, as transformers hands a callback
    the trainer's model, optimizer and data loaders but not the trainer."""
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


class PassWatcher:
    """The hooks that see a run's passes and charge them to :attr:`ledger` (module docstring)."""

    ledger: FlopLedger | None

    def _init_watch(self, watch_models: bool) -> None:
        """The hooks' state, none installed; ``watch_models``: also hook the trainer's reference and
        reward models."""
        self.watch_models = watch_models
        self.ledger = None
        self._trainer: Any = None  # a weak reference to the trainer given to attach(): no cycle through it
        self._handles: list[Any] = []
        self._restore: list[tuple[Any, str, Any]] = []
        self._policy: Any = None
        self._lora_layer: Any = None
        self._call: _Call | None = None
        self._ref_call: _Call | None = None
        self._in_generate = False
        self._gen_executed = Work()
        self._foreign: Any = None  # the reward model whose forward is running
        self._foreign_start = 0.0
        self._reward_costs: dict[int, Any] = {}
        self._busy = False  # pricing a model (a measurement runs it): its calls are not charged
        self._round_rows: list[tuple[int, int]] = []  # (prompt, completion) tokens of this round's rows
        self._new_round = True
        self._device: torch.device | None = None

    # --- the trainer --------------------------------------------------------------------------
    def attach(self, trainer: Any) -> Any:
        """Watch ``trainer``'s models (its policy, its separate reference model and its reward models,
        :func:`trainer_models`) when it trains, and add this callback to it, ahead of the callbacks that
        report its logs (:func:`lead_the_log_readers`); returns the callback. A callback given to the
        trainer's ``callbacks`` instead finds its trainer itself (:func:`calling_trainer`)."""
        if not any(cb is self for cb in trainer.callback_handler.callbacks):
            trainer.add_callback(self)
        lead_the_log_readers(self, trainer.callback_handler)
        self._trainer = weakref.ref(trainer)
        return self

    # --- installing ----------------------------------------------------------------------------
    def _install(self, model: Any) -> None:
        """Hooks on ``model`` (the policy) and, with ``watch_models``, on the trainer's other models;
        this callback moved ahead of the trainer's log readers."""
        base = _base(model)
        self._claim(base)
        self._handles.append(base.register_forward_pre_hook(self._policy_pre, with_kwargs=True))
        self._handles.append(base.register_forward_hook(self._policy_post, always_call=True))
        head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
        if isinstance(head, torch.nn.Module):
            self._handles.append(head.register_forward_pre_hook(self._head_pre))
        for name in ("generate", "generate_batch"):
            if hasattr(base, name):
                self._wrap_method(base, name)
        trainer = (self._trainer and self._trainer()) or calling_trainer(self)
        if trainer is not None:
            lead_the_log_readers(self, trainer.callback_handler)
        if not self.watch_models:
            return
        if trainer is None:
            warnings.warn(
                "FlopLedgerCallback found no Trainer calling it: it watches the policy only, and a separate "
                "reference model or a reward model is not charged; call `callback.attach(trainer)`",
                stacklevel=4,
            )
            return
        ref, rewards = trainer_models(trainer)
        if ref is not None and ref is not base:
            self._claim(ref)
            self._watch_ref(ref)
        for reward_model in rewards:
            self._claim(reward_model)
            self._handles.append(reward_model.register_forward_pre_hook(self._reward_pre))
            self._handles.append(reward_model.register_forward_hook(self._reward_post, with_kwargs=True))

    def _claim(self, model: torch.nn.Module) -> None:
        """Take ``model`` for this watcher: hooks another watcher left on it (a run whose ``train()``
        raised, so that its ``on_train_end`` never ran) are removed first, with a warning."""
        holder = _WATCHED.get(model)
        stale = holder() if holder is not None else None
        if stale is not None and stale is not self and stale._handles:
            warnings.warn(
                "FlopLedgerCallback: removing the hooks an earlier run left on this model (its train() "
                "ended without on_train_end, e.g. by an exception)",
                stacklevel=5,
            )
            stale._remove_hooks()
        _WATCHED[model] = weakref.ref(self)

    def _watch_ref(self, model: Any) -> None:
        """The policy's hooks on a separate reference model: its log-prob forwards, its LM head."""
        self._handles.append(model.register_forward_pre_hook(self._ref_pre, with_kwargs=True))
        self._handles.append(model.register_forward_hook(self._ref_post))
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        if isinstance(head, torch.nn.Module):
            self._handles.append(head.register_forward_pre_hook(self._ref_head_pre))

    def _wrap_method(self, obj: Any, name: str) -> None:
        original = getattr(obj, name)
        had_own = name in vars(obj)
        wrapper = self._generate_wrapper(original, batched=name == "generate_batch")
        setattr(obj, name, wrapper)
        self._restore.append((obj, name, original if had_own else None))

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        for obj, name, previous in reversed(self._restore):
            if previous is None:
                vars(obj).pop(name, None)
            else:
                setattr(obj, name, previous)
        self._restore = []
        self._call = self._ref_call = self._foreign = None
        self._in_generate = False

    # --- generation ----------------------------------------------------------------------------
    def _generate_wrapper(self, original: Callable[..., Any], batched: bool) -> Callable[..., Any]:
        @functools.wraps(original)
        def generate(*args: Any, **kwargs: Any) -> Any:
            if self._in_generate or self.ledger is None or not self._policy.training:
                return original(*args, **kwargs)
            self._sync()
            start = time.perf_counter()
            self._in_generate, self._gen_executed = True, Work()
            try:
                out = original(*args, **kwargs)
            finally:
                self._in_generate = False
            self._sync()
            self.ledger.add_seconds("search", time.perf_counter() - start)
            if batched:
                self._charge_batched_generation(args, kwargs, out)
            else:
                self._charge_generation(args, kwargs, out)
            return out

        return generate

    def _charge_generation(self, args: tuple, kwargs: dict, out: Any) -> None:
        ids = _kwarg(args, kwargs, "input_ids", 0)
        if not isinstance(ids, torch.Tensor):  # inputs_embeds only: nothing to count from
            return
        mask = kwargs.get("attention_mask")
        width = ids.size(1)
        p_lens = mask.sum(dim=1).tolist() if mask is not None else [width] * ids.size(0)
        sequences = getattr(out, "sequences", out)
        config = kwargs.get("generation_config") or getattr(_base(self._policy), "generation_config", None)
        c_lens = _first_eos_lengths(sequences[:, width:], getattr(config, "eos_token_id", None))
        useful = generation_pass_work(p_lens, c_lens, 1, prefix_cache=False, padded=False)["useful"]
        self._charge_rollouts(p_lens, c_lens, {"useful": useful, "executed": self._gen_executed})

    def _charge_batched_generation(self, args: tuple, kwargs: dict, out: Any) -> None:
        """Continuous batching: no padded batch to count; useful = executed from the token counts."""
        outputs = list(out.values()) if isinstance(out, dict) else []
        p_lens = [len(o.prompt_ids) for o in outputs]
        c_lens = [len(o.generated_tokens) for o in outputs]
        work = generation_pass_work(p_lens, c_lens, 1, prefix_cache=False, padded=False)
        self._charge_rollouts(p_lens, c_lens, work)

    def _charge_rollouts(self, p_lens: list[int], c_lens: list[int], work: dict[str, Work]) -> None:
        self.ledger.charge_generation(work, adapters_active=self._adapters_active())
        self.ledger.count(
            gen_rows=len(p_lens),
            gen_prompt_tokens=sum(p_lens),
            gen_completion_tokens=sum(c_lens),
            gen_executed_tokens=work["executed"].tokens,
        )
        if self._new_round:
            self._round_rows, self._new_round = [], False
        self._round_rows += list(zip(p_lens, c_lens, strict=True))

    # --- policy forwards -----------------------------------------------------------------------
    def _policy_pre(self, module: Any, args: tuple, kwargs: dict) -> None:
        if self._call is not None or self._busy or self.ledger is None or not self._policy.training:
            return
        self._call = _read_call(args, kwargs)

    def _head_pre(self, module: Any, args: tuple) -> None:
        if self._call is not None and args and isinstance(args[0], torch.Tensor):
            x = args[0]
            self._call.head += x.numel() // max(x.size(-1), 1)

    def _policy_post(self, module: Any, args: tuple, output: Any) -> None:
        call, self._call = self._call, None
        if call is None or self.ledger is None:
            return
        if self._in_generate:
            self._gen_executed = self._gen_executed + Work(
                call.rows * call.width, call.rows * call.width * call.keys, call.head
            )
            return
        work = self._forward_work(call)
        ledger = self.ledger
        if call.grad:  # the loss pass: its backward follows
            # TRL's fused head recomputes its logits in backward; a head run as a module (TRL before
            # 1.14's fused head) keeps them: the executed count has no recompute, useful is the planner's
            executed_train = None if call.fused else replace(ledger.train, head_recompute=False)
            ledger.charge_training_pass(work, executed_train)
            ledger.count(
                loss_rows=call.rows,
                loss_tokens=work["useful"].tokens,
                loss_executed_tokens=work["executed"].tokens,
            )
        else:  # old-policy or reference log-probs
            part, adapters = self._no_grad_role()
            ledger.charge_forward(work, adapters_active=adapters, part=part)
            ledger.count(**{f"{part}_forward_rows": call.rows})

    def _forward_work(self, call: _Call) -> dict[str, Work]:
        """Useful and executed work of a full-sequence forward (keys = width), from its mask and labels."""
        rows, width = call.rows, call.width
        if call.fused and call.labels is not None:
            head_useful = int((call.labels != -100).sum())
            head_executed = head_useful if _compact_head(call.labels.device) else rows * (width - 1)
        else:  # the head ran as a module, on the last `per_row` positions of each row
            head_executed = call.head
            per_row = head_executed // rows if rows else 0
            if call.mask is not None and 0 < per_row <= width:
                # useful: a real position scoring a real next token
                low = width - per_row
                head_useful = int((call.mask[:, low : width - 1] * call.mask[:, low + 1 :]).sum())
            else:
                head_useful = head_executed
        if call.mask is not None:
            useful = real_rows_work(call.mask, head_useful)
        else:
            useful = Work(rows * width, rows * flops.causal_pairs(width), head_useful)
        executed = Work(rows * width, rows * width * call.keys, head_executed)
        return {"useful": useful, "executed": executed}

    def _adapters_active(self) -> bool:
        layer = self._lora_layer
        return layer is not None and not layer.disable_adapters

    def _no_grad_role(self) -> tuple[str, bool]:
        """("old" or "ref", adapters active) of a no-grad policy forward in training."""
        layer = self._lora_layer
        if layer is None:
            return "old", False
        if layer.disable_adapters:
            return "ref", False
        return ("ref" if "ref" in layer.active_adapters else "old"), True

    # --- the trainer's other models -----------------------------------------------------------
    def _counting(self) -> bool:
        """Whether a forward of the reference or a reward model now is charged: in training, outside
        generation and outside a measurement the ledger runs itself."""
        return not (self._busy or self._in_generate or self.ledger is None or not self._policy.training)

    def _ref_pre(self, module: Any, args: tuple, kwargs: dict) -> None:
        self._ref_call = _read_call(args, kwargs) if self._counting() else None

    def _ref_head_pre(self, module: Any, args: tuple) -> None:
        if self._ref_call is not None and args and isinstance(args[0], torch.Tensor):
            x = args[0]
            self._ref_call.head += x.numel() // max(x.size(-1), 1)

    def _ref_post(self, module: Any, args: tuple, output: Any) -> None:
        """A reference log-prob forward: C_learning's ``ref`` part, read as the policy's forwards are."""
        call, self._ref_call = self._ref_call, None
        if call is None or self.ledger is None:
            return
        self.ledger.charge_forward(self._forward_work(call), adapters_active=False, part="ref")
        self.ledger.count(ref_forward_rows=call.rows)

    def _reward_pre(self, module: Any, args: tuple) -> None:
        if self._busy:  # the ledger measuring the model inside the forward being charged: leave that be
            return
        self._foreign = module if self._counting() else None
        if self._foreign is not None:
            self._sync()
            self._foreign_start = time.perf_counter()

    def _reward_post(self, module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        """A reward model's forward: C_reward, one forward over its ``input_ids`` and mask."""
        if module is not self._foreign:
            return
        self._foreign = None
        ids = _kwarg(args, kwargs, "input_ids", 0)
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
            return
        mask = kwargs.get("attention_mask")
        mask = mask if isinstance(mask, torch.Tensor) and mask.dim() == 2 else torch.ones_like(ids)
        rows, width = ids.shape
        cost = self._reward_cost(module)
        useful = real_rows_work(mask)
        executed = flops.padded_batch_work(rows, width, rows * width)
        self.ledger.charge(
            "reward",
            {c: flops.forward_flops(cost, w) for c, w in (("useful", useful), ("executed", executed))},
        )
        self.ledger.count(reward_tokens=useful.tokens)
        self._sync()
        self.ledger.add_seconds("reward", time.perf_counter() - self._foreign_start)

    def _reward_cost(self, module: Any) -> Any:
        cost = self._reward_costs.get(id(module))
        if cost is None:
            self._busy = True  # a measured model runs here: its calls are not charged
            try:
                cost = self._reward_costs[id(module)] = reward_model_cost(module)
            finally:
                self._busy = False
            check_priced({f"reward model {type(module).__name__}": cost}, None)
        return cost

    # --- timing --------------------------------------------------------------------------------
    def _sync(self) -> None:
        device = self._device
        if device is not None and getattr(device, "type", None) == "cuda" and torch.cuda.is_available():
            torch.cuda.synchronize()
