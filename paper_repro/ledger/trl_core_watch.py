"""The hooks of the ledger's pull-request-sized core: :class:`CoreWatcher`, which sees every pass a TRL
``GRPOTrainer`` or ``RLOOTrainer`` runs on its own models and hands each to a *charge point* the ledger
implements (:class:`~paper_repro.ledger.trl_core.FlopLedgerCoreCallback` with the analytic FLOP model,
:class:`~paper_repro.ledger.callback.FlopLedgerCallback` with measured families, seconds and the
down-sampling-aware ledger): one copy of the hooks, two ledgers.

* the policy's ``generate`` (and ``generate_batch``, transformers' continuous batching) wrapped on the
  instance: inside it a forward pre-hook sees every prefill and decode call (``executed``: rows x width
  tokens, every query against every key of its mask, the head at the positions its module ran);
  ``useful`` is read from the output (real prompt tokens, the completion up to its first EOS).
  Charge point :meth:`_charge_rollouts`;
* any other policy forward in training mode: with grad a loss pass (:meth:`_charge_loss`), without it
  the old-policy forward or, with the PEFT adapters disabled or the ``"ref"`` adapter active, the
  reference one (:meth:`_charge_no_grad`);
* the trainer's separate reference model (:meth:`_charge_ref`) and the ``nn.Module`` reward models in
  its ``reward_funcs`` (:meth:`_charge_reward`), read from its public attributes.

Every hook sits on one of the trainer's own models, from ``on_train_begin`` to ``on_train_end``: no
process-wide hook, so a model outside the trainer is never touched and a module call outside the
watched models costs nothing. A run whose ``train()`` raised never reaches ``on_train_end``; the next
watcher of one of its models removes the hooks it left (:meth:`CoreWatcher._claim`). Nothing is
installed at import.
"""

from __future__ import annotations

import functools
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import torch

from paper_repro.accounting.flops import Work, generation_work
from paper_repro.ledger.trl_core_read import (
    Call,
    arg,
    base_model,
    calling_trainer,
    first_eos_lengths,
    forward_work,
    lead_the_log_readers,
    read_call,
    real_rows_work,
    trainer_models,
)

# Which watcher holds hooks on which model (weakly: a model or a watcher that is gone drops out).
_WATCHED: weakref.WeakKeyDictionary[torch.nn.Module, weakref.ref] = weakref.WeakKeyDictionary()


class CoreWatcher:
    """The hooks that see a run's passes (module docstring). The host sets :attr:`ledger` (None: not
    counting), :attr:`_policy` and :attr:`_lora_layer` in ``on_train_begin``, sets :attr:`_busy` while
    it runs a model itself, and implements the charge points."""

    ledger: Any

    def _init_watch(self, watch_models: bool = True) -> None:
        """The hooks' state, none installed; ``watch_models``: hook the trainer's reference and reward
        models too."""
        self.watch_models = watch_models
        self.ledger = None
        self._trainer: Any = None  # a weak reference to the trainer given to attach(): no cycle through it
        self._handles: list[Any] = []
        self._restore: list[tuple[Any, str, Any]] = []
        self._policy: Any = None
        self._lora_layer: Any = None
        self._call: Call | None = None
        self._ref_call: Call | None = None
        self._in_generate = False
        self._gen_executed = Work()
        self._foreign: Any = None  # the reward model whose forward is running
        self._foreign_start = 0.0
        self._busy = False  # the host runs a model itself (a measurement): its calls are not charged

    # --- the charge points ------------------------------------------------------------------------
    def _charge_rollouts(self, p_lens: list[int], c_lens: list[int], work: dict[str, Work], seconds: float):
        raise NotImplementedError

    def _charge_loss(self, call: Call, work: dict[str, Work]) -> None:
        raise NotImplementedError

    def _charge_no_grad(self, call: Call, work: dict[str, Work], part: str, adapters: bool) -> None:
        raise NotImplementedError

    def _charge_ref(self, module: Any, call: Call, work: dict[str, Work]) -> None:
        raise NotImplementedError

    def _charge_reward(self, module: Any, useful: Work, executed: Work, seconds: float) -> None:
        raise NotImplementedError

    def _clock(self) -> float:
        """Seconds now, for timed passes (the full ledger synchronises CUDA first)."""
        return time.perf_counter()

    # --- the trainer ------------------------------------------------------------------------------
    def attach(self, trainer: Any) -> Any:
        """Watch ``trainer``'s models (its policy, its separate reference model and its reward models)
        when it trains, and add this callback to it, ahead of the callbacks that report its logs
        (:func:`~paper_repro.ledger.trl_core_read.lead_the_log_readers`); returns the callback. A
        callback given to the trainer's ``callbacks`` instead finds its trainer itself
        (:func:`~paper_repro.ledger.trl_core_read.calling_trainer`)."""
        if not any(cb is self for cb in trainer.callback_handler.callbacks):
            trainer.add_callback(self)
        lead_the_log_readers(self, trainer.callback_handler)
        self._trainer = weakref.ref(trainer)
        return self

    def watched_trainer(self) -> Any:
        """The trainer given to :meth:`attach`, else the one calling this callback now, else None."""
        return (self._trainer and self._trainer()) or calling_trainer(self)

    # --- installing -------------------------------------------------------------------------------
    def _install(self, model: Any) -> None:
        """Hooks on ``model`` (the policy) and, with ``watch_models``, on the trainer's other models;
        the callback moved ahead of the trainer's log readers."""
        base = base_model(model)
        self._claim(base)
        self._watch_forwards(base, self._policy_pre, self._policy_post, "_call")
        for name in ("generate", "generate_batch"):
            if hasattr(base, name):
                original, had_own = getattr(base, name), name in vars(base)
                setattr(base, name, self._generate_wrapper(original, batched=name == "generate_batch"))
                self._restore.append((base, name, original if had_own else None))
        trainer = self.watched_trainer()
        if trainer is not None:
            lead_the_log_readers(self, trainer.callback_handler)
        if not self.watch_models:
            return
        if trainer is None:
            warnings.warn(
                f"{type(self).__name__} found no Trainer calling it: it watches the policy only, and a "
                "separate reference model or a reward model is not charged; call `callback.attach(trainer)`",
                stacklevel=4,
            )
            return
        ref, rewards = trainer_models(trainer)
        if ref is not None and ref is not base:
            self._claim(ref)
            self._watch_forwards(ref, self._ref_pre, self._ref_post, "_ref_call")
        for reward_model in rewards:
            self._claim(reward_model)
            self._handles.append(reward_model.register_forward_pre_hook(self._reward_pre))
            self._handles.append(reward_model.register_forward_hook(self._reward_post, with_kwargs=True))

    def _watch_forwards(self, model: Any, pre: Callable, post: Callable, slot: str) -> None:
        """``pre`` / ``post`` on ``model``'s forward and a pre-hook on its output head counting the
        positions it scores into the call held in ``slot``."""
        self._handles.append(model.register_forward_pre_hook(pre, with_kwargs=True))
        self._handles.append(model.register_forward_hook(post, always_call=True))
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None

        def head_pre(module: Any, args: tuple) -> None:
            call = getattr(self, slot)
            if call is not None:
                call.count_head(args)

        if isinstance(head, torch.nn.Module):
            self._handles.append(head.register_forward_pre_hook(head_pre))

    def _claim(self, model: torch.nn.Module) -> None:
        """Take ``model`` for this watcher: hooks another watcher left on it (a run whose ``train()``
        raised, so that its ``on_train_end`` never ran) are removed first, with a warning. Another
        callback of the same trainer is not stale: it watches this run too (each callback of a trainer
        is called at its train begin, which reinstalls its hooks)."""
        holder = _WATCHED.get(model)
        stale = holder() if holder is not None else None
        trainer = self.watched_trainer()
        together = trainer is not None and any(cb is stale for cb in trainer.callback_handler.callbacks)
        if stale is not None and stale is not self and stale._handles and not together:
            warnings.warn(
                f"{type(self).__name__}: removing the hooks an earlier run left on this model (its train() "
                "ended without on_train_end, e.g. by an exception)",
                stacklevel=5,
            )
            stale._remove_hooks()
        _WATCHED[model] = weakref.ref(self)

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        for obj, name, previous in reversed(self._restore):
            if previous is None:
                vars(obj).pop(name, None)
            else:
                setattr(obj, name, previous)
        self._handles, self._restore = [], []
        self._call = self._ref_call = self._foreign = None
        self._in_generate = False

    # --- when a pass counts -----------------------------------------------------------------------
    def _live(self) -> bool:
        """Whether the policy's passes now are charged: a ledger, the policy in training, the host not
        running a model itself."""
        return (
            self.ledger is not None and not self._busy and self._policy is not None and self._policy.training
        )

    def _counting(self) -> bool:
        """Whether a forward of the reference or a reward model now is charged: live and outside
        generation."""
        return self._live() and not self._in_generate

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

    # --- generation -------------------------------------------------------------------------------
    def _generate_wrapper(self, original: Callable[..., Any], batched: bool) -> Callable[..., Any]:
        @functools.wraps(original)
        def generate(*args: Any, **kwargs: Any) -> Any:
            if self._in_generate or not self._live():
                return original(*args, **kwargs)
            start = self._clock()
            self._in_generate, self._gen_executed = True, Work()
            try:
                out = original(*args, **kwargs)
            finally:
                self._in_generate = False
            seconds = self._clock() - start
            lengths = self._batched_lengths(out) if batched else self._generated_lengths(args, kwargs, out)
            if lengths is not None:
                p_lens, c_lens = lengths
                useful = Work()
                for p, c in zip(p_lens, c_lens, strict=True):
                    useful = useful + generation_work(p, c)
                # continuous batching runs no padded batch: executed = useful, from the token counts
                work = {"useful": useful, "executed": useful if batched else self._gen_executed}
                self._charge_rollouts(p_lens, c_lens, work, seconds)
            return out

        return generate

    def _generated_lengths(self, args: tuple, kwargs: dict, out: Any) -> tuple[list[int], list[int]] | None:
        """Each row's real prompt tokens and completion up to its first EOS, read from ``generate``'s
        call and output; None without ``input_ids`` (nothing to count from)."""
        ids = arg(args, kwargs, "input_ids", 0)
        if not isinstance(ids, torch.Tensor):
            return None
        mask, width = kwargs.get("attention_mask"), ids.size(1)
        p_lens = mask.sum(dim=1).tolist() if mask is not None else [width] * ids.size(0)
        config = kwargs.get("generation_config") or getattr(
            base_model(self._policy), "generation_config", None
        )
        sequences = getattr(out, "sequences", out)
        return p_lens, first_eos_lengths(sequences[:, width:], getattr(config, "eos_token_id", None))

    @staticmethod
    def _batched_lengths(out: Any) -> tuple[list[int], list[int]]:
        outputs = list(out.values()) if isinstance(out, dict) else []
        return [len(o.prompt_ids) for o in outputs], [len(o.generated_tokens) for o in outputs]

    # --- policy forwards --------------------------------------------------------------------------
    def _policy_pre(self, module: Any, args: tuple, kwargs: dict) -> None:
        if self._call is None and self._live():
            self._call = read_call(args, kwargs)

    def _policy_post(self, module: Any, args: tuple, output: Any) -> None:
        call, self._call = self._call, None
        if call is None or self.ledger is None:
            return
        if self._in_generate:  # a prefill or decode call: what it ran
            self._gen_executed = self._gen_executed + Work(
                call.rows * call.width, call.rows * call.width * call.keys, call.head
            )
        elif call.grad:  # the loss pass: its backward follows
            self._charge_loss(call, forward_work(call))
        else:  # old-policy or reference log-probs
            part, adapters = self._no_grad_role()
            self._charge_no_grad(call, forward_work(call), part, adapters)

    # --- the trainer's other models ---------------------------------------------------------------
    def _ref_pre(self, module: Any, args: tuple, kwargs: dict) -> None:
        self._ref_call = read_call(args, kwargs) if self._counting() else None

    def _ref_post(self, module: Any, args: tuple, output: Any) -> None:
        """A reference log-prob forward: C_learning's ``ref`` part, read as the policy's are."""
        call, self._ref_call = self._ref_call, None
        if call is not None and self.ledger is not None:
            self._charge_ref(module, call, forward_work(call))

    def _reward_pre(self, module: Any, args: tuple) -> None:
        if self._busy:  # the host measuring the model inside the forward being charged: leave that be
            return
        self._foreign = module if self._counting() else None
        if self._foreign is not None:
            self._foreign_start = self._clock()

    def _reward_post(self, module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        """A reward model's forward: C_reward, one forward over its ``input_ids`` and mask (useful: each
        row's real tokens; executed: the padded rows, every position scored)."""
        if module is not self._foreign:
            return
        self._foreign = None
        ids = arg(args, kwargs, "input_ids", 0)
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
            return
        mask = kwargs.get("attention_mask")
        mask = mask if isinstance(mask, torch.Tensor) and mask.dim() == 2 else torch.ones_like(ids)
        rows, width = ids.shape
        executed = Work(rows * width, rows * width * width, rows * width)
        self._charge_reward(module, real_rows_work(mask), executed, self._clock() - self._foreign_start)
