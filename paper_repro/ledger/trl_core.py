"""The FLOP ledger's pull-request-sized core: :class:`FlopLedgerCoreCallback`, a ``TrainerCallback`` for
TRL's ``GRPOTrainer`` and ``RLOOTrainer`` that counts C_search / C_learning / C_reward per optimizer step,
``useful`` (real tokens, causal attention) and ``executed`` (padding, rows decoding past EOS, full
attention squares, TRL's fused head on every position off Triton), sets ``state.total_flos``, adds its
metrics to the logs the ``report_to`` backends read, stops at a FLOP budget and keeps its state in
transformers' ``ExportableState`` (the checkpoint's ``trainer_state.json``).

::

    ledger = FlopLedgerCoreCallback(budget_flops=3e15)
    trainer = GRPOTrainer(..., callbacks=[ledger])  # or RLOOTrainer
    trainer.train()
    ledger.ledger.summary()

Imports stdlib, torch, transformers and :mod:`paper_repro.ledger.trl_core_flops` (the price); nothing at
import installs a hook or a handler. Hooks sit on the trainer's own models (the policy, a separate
reference model, reward models) from ``on_train_begin`` to ``on_train_end``:

* the policy's ``generate`` wrapped: C_search, executed from the forwards it runs, useful from its output
  (real prompt tokens, completion up to its first EOS);
* any other policy forward in training mode: with grad a loss pass (C_learning ``loss``), without it the
  old-policy forward, or the reference one with PEFT adapters disabled (``old`` / ``ref``);
* the reference model's forwards (``ref``) and the reward models' (C_reward).

Budget: at the end of each generation round the run stops when the next round, priced at the larger of
``round_ceiling_flops`` and the dearest round so far, could pass ``budget_flops``; a resume whose next
round could is refused at train begin (:class:`BudgetSpentError`: Trainer runs a first step whatever a
callback says). The full :class:`~paper_repro.ledger.callback.FlopLedgerCallback` builds on this with
measured families, a per-step stop, the card and the project's options.
"""

from __future__ import annotations

import functools
import inspect
import math
import uuid
import warnings
from dataclasses import replace
from typing import Any

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from paper_repro.ledger.trl_core_flops import (
    Training,
    Work,
    arg,
    base_model,
    checkpointing_of,
    decoder_shape,
    first_eos_lengths,
    forward_flops,
    forward_work,
    generation_work,
    lora_of,
    mask_work,
    read_call,
    train_flops,
)

CONVENTIONS = ("useful", "executed")
COMPONENTS = ("search", "learning", "reward")
PARTS = ("loss", "old", "ref")  # C_learning's parts
STATE_KEY = "flop_ledger_core"
STATE_VERSION = 1


class BudgetSpentError(RuntimeError):
    """A resume whose next round could pass the budget, refused at train begin."""


def _zeros(keys: tuple[str, ...]) -> dict[str, dict[str, float]]:
    return {c: dict.fromkeys(keys, 0.0) for c in CONVENTIONS}


class CoreLedger:
    """FLOPs per component and convention, C_learning's parts and token counts, per optimizer step;
    the budget's stop; a JSON-ready state."""

    def __init__(self, budget_flops: float | None = None, round_ceiling_flops: float | None = None):
        self.budget_flops, self.round_ceiling_flops = budget_flops, round_ceiling_flops
        self.steps: list[dict[str, Any]] = []
        self.rounds: list[float] = []  # useful FLOPs of each finished round
        self.totals, self.parts, self.tokens = _zeros(COMPONENTS), _zeros(PARTS), {}
        self.stop_reason: str | None = None
        self.resumed_from: list[int] = []
        self._open()
        self._round = 0.0

    def _open(self) -> None:
        self._flops, self._parts, self._tokens = _zeros(COMPONENTS), _zeros(PARTS), {}

    def charge(self, component: str, cost: dict[str, float], part: str | None = None) -> None:
        """Add ``cost`` (FLOPs per convention) to ``component`` (and C_learning's ``part``)."""
        for c in CONVENTIONS:
            self._flops[c][component] += cost[c]
            if part is not None:
                self._parts[c][part] += cost[c]

    def count(self, **tokens: float) -> None:
        for k, v in tokens.items():
            self._tokens[k] = self._tokens.get(k, 0.0) + v

    def end_step(self, step: int, round_complete: bool) -> dict[str, Any]:
        """Close an optimizer step; its record."""
        record = {"step": step, "flops": self._flops, "learning_parts": self._parts, "tokens": self._tokens}
        for c in CONVENTIONS:
            for k in COMPONENTS:
                self.totals[c][k] += self._flops[c][k]
            for k in PARTS:
                self.parts[c][k] += self._parts[c][k]
        for k, v in self._tokens.items():
            self.tokens[k] = self.tokens.get(k, 0.0) + v
        self._round += sum(self._flops["useful"].values())
        if round_complete:
            self.rounds.append(self._round)
            self._round = 0.0
        self.steps.append(record)
        self._open()
        return record

    def total(self, convention: str = "useful") -> float:
        return sum(self.totals[convention].values())

    def next_round_price(self) -> float | None:
        """What the stop prices a next round at: the larger of the given ceiling and the dearest
        finished round (a ceiling below a round's cost is no bound); None before any price is known."""
        known = [x for x in (self.round_ceiling_flops, max(self.rounds, default=None)) if x is not None]
        return max(known) if known else None

    def stops_before_next_round(self) -> bool:
        """Whether the next round could take the useful total past the budget (:attr:`stop_reason`)."""
        price = self.next_round_price()
        if self.budget_flops is None or price is None or self.total() + price <= self.budget_flops:
            return False
        self.stop_reason = (
            f"the next round could cost {price:.4g} useful FLOPs: {self.total():.4g} spent + {price:.4g} "
            f"> the budget {self.budget_flops:.4g}"
        )
        return True

    def metrics(self) -> dict[str, float]:
        """Cumulative ``flops/<component>``, ``flops/total`` and ``flops/rho`` (useful), the same under
        ``flops/executed/``, and ``tokens/search`` / ``tokens/learning`` / ``tokens/reward``."""
        out: dict[str, float] = {}
        for c in CONVENTIONS:
            prefix = "flops/" if c == "useful" else f"flops/{c}/"
            total = self.total(c)
            out.update({prefix + k: v for k, v in self.totals[c].items()})
            out[prefix + "total"] = total
            out[prefix + "rho"] = self.totals[c]["learning"] / total if total > 0 else math.nan
        t = self.tokens
        out["tokens/search"] = t.get("gen_prompt_tokens", 0.0) + t.get("gen_completion_tokens", 0.0)
        out["tokens/learning"] = t.get("loss_tokens", 0.0)
        out["tokens/reward"] = t.get("reward_tokens", 0.0)
        return out

    def summary(self) -> dict[str, Any]:
        """Totals per convention (``C_search`` ... ``C_total``, ``rho``), C_learning's parts, token
        counts, steps, rounds and the budget."""
        out: dict[str, Any] = {"steps": len(self.steps), "rounds": len(self.rounds)}
        for c in CONVENTIONS:
            total = self.total(c)
            out[c] = {**{f"C_{k}": v for k, v in self.totals[c].items()}, "C_total": total}
            out[c]["rho"] = self.totals[c]["learning"] / total if total > 0 else math.nan
        out["learning_parts"] = {c: dict(self.parts[c]) for c in CONVENTIONS}
        out["tokens"] = dict(self.tokens)
        spent = self.total() / self.budget_flops if self.budget_flops else None
        out.update(budget_flops=self.budget_flops, budget_spent=spent, stop_reason=self.stop_reason)
        out["resumed_from"] = list(self.resumed_from)
        return out

    def state_dict(self) -> dict[str, Any]:
        keys = ("steps", "rounds", "totals", "parts", "tokens", "stop_reason", "resumed_from")
        return {"version": STATE_VERSION, **{k: getattr(self, k) for k in keys}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; a round the checkpoint cut is not carried (TRL does not save its
        rollouts and opens a new round on resume)."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(
                f"a FLOP ledger core state of version {state.get('version')!r}, not {STATE_VERSION}"
            )
        for k in ("steps", "rounds", "totals", "parts", "tokens", "stop_reason", "resumed_from"):
            setattr(self, k, state[k])
        self._open()
        self._round = 0.0


def _unwrap(module: Any) -> Any:
    """The model inside accelerate's / DDP's / DeepSpeed's ``.module`` wrapper."""
    from transformers import PreTrainedModel

    while not isinstance(module, PreTrainedModel) and isinstance(
        getattr(module, "module", None), torch.nn.Module
    ):
        module = module.module
    return module


def calling_trainer(callback: Any) -> Any:
    """The Trainer whose callback handler is calling ``callback`` now, else None (a callback is handed
    the trainer's model but not the trainer, whose ``ref_model`` and ``reward_funcs`` it needs)."""
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
        del frame


def lead_the_log_readers(callback: Any, handler: Any) -> None:
    """Move ``callback`` ahead of the first callback in ``handler`` with its own ``on_log`` (the
    ``report_to`` backends, the printers), so that they log what its ``on_log`` adds."""
    callbacks = handler.callbacks
    here = next(i for i, cb in enumerate(callbacks) if cb is callback)
    readers = (i for i, cb in enumerate(callbacks[:here]) if type(cb).on_log is not TrainerCallback.on_log)
    first = next(readers, None)
    if first is not None:
        callbacks.insert(first, callbacks.pop(here))


class FlopLedgerCoreCallback(TrainerCallback, ExportableState):
    """The core ledger as a callback (module docstring). ``budget_flops``: stop before the next round
    could pass it (useful FLOPs); ``round_ceiling_flops``: a bound on one round's useful FLOPs (without
    one the next round is priced as the dearest so far, an estimate). After ``train()``, :attr:`ledger`."""

    def __init__(self, budget_flops: float | None = None, round_ceiling_flops: float | None = None):
        for name, value in (("budget_flops", budget_flops), ("round_ceiling_flops", round_ceiling_flops)):
            if value is not None and not (
                isinstance(value, (int, float)) and math.isfinite(value) and value > 0
            ):
                raise ValueError(f"{name} must be a positive number of FLOPs or None, got {value!r}")
        self.budget_flops, self.round_ceiling_flops = budget_flops, round_ceiling_flops
        self.ledger: CoreLedger | None = None
        self.run_id = uuid.uuid4().hex
        self._trainer: Any = None
        self._handles: list[Any] = []
        self._restore: list[tuple[Any, str, Any]] = []
        self._policy: Any = None
        self._call: dict[str, Any] | None = None
        self._ref_call: dict[str, Any] | None = None
        self._in_generate, self._gen_executed = False, Work()
        self._trainer_state: Any = None

    def attach(self, trainer: Any) -> FlopLedgerCoreCallback:
        """Add this callback to a built ``trainer``, ahead of its log readers; returns it."""
        if not any(cb is self for cb in trainer.callback_handler.callbacks):
            trainer.add_callback(self)
        lead_the_log_readers(self, trainer.callback_handler)
        self._trainer = trainer
        return self

    # --- pricing: the richer ledger overrides these -----------------------------------------------
    def price_model(self, model: Any) -> Any:
        """The shape :func:`~paper_repro.ledger.trl_core_flops.forward_flops` prices ``model`` with;
        a ValueError for a model outside the analytic families."""
        shape = decoder_shape(model)
        if shape is None:
            raise ValueError(
                f"the core FLOP ledger prices {', '.join(('qwen2', 'llama', 'mistral', 'qwen3'))} decoders; "
                f"{type(base_model(model)).__name__} is not one: use paper_repro.ledger.FlopLedgerCallback, "
                "which measures other models"
            )
        return shape

    # --- the events -------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is None:
            raise RuntimeError("FlopLedgerCoreCallback needs the trainer's model (the callback's `model`)")
        if getattr(args, "restore_callback_states_from_checkpoint", False):
            raise ValueError(
                "FlopLedgerCoreCallback restores its state itself; restore_callback_states_from_checkpoint=True "
                "would replace it with a new callback detached from the run: leave it False (the default)"
            )
        self._remove_hooks()
        self._shape = self.price_model(model)
        on = bool(getattr(args, "activation_checkpointing", getattr(args, "gradient_checkpointing", False)))
        ckpt = getattr(
            args, "activation_checkpointing_kwargs", getattr(args, "gradient_checkpointing_kwargs", None)
        )
        recompute, every = checkpointing_of(ckpt)
        self._train = Training(lora_of(model, self._shape.layers), on, recompute, every)
        self._lora_layer = next(
            (m for m in model.modules() if isinstance(getattr(m, "lora_A", None), torch.nn.ModuleDict)), None
        )
        self.ledger = CoreLedger(self.budget_flops, self.round_ceiling_flops)
        self._policy, self._trainer_state, self._session_steps = model, state, 0
        self._flos_at_begin = float(state.total_flos or 0.0)
        if state.global_step > 0:
            self._resume(state)
        state.stateful_callbacks.setdefault(type(self).__name__, self.state())
        self._install(model)

    def _resume(self, state: Any) -> None:
        """Restore the ledger from the ``TrainerState`` of the checkpoint the run resumed from, if it is
        this checkpoint's (same step and ``total_flos``); refuse a budget without it, and a resume whose
        next round could pass the budget."""
        entry = (state.stateful_callbacks or {}).get(type(self).__name__)
        entry = entry[-1] if isinstance(entry, list) and entry else entry
        saved = entry.get("attributes", {}).get(STATE_KEY) if isinstance(entry, dict) else None
        flos = float(state.total_flos or 0.0)
        if (
            saved
            and saved["step"] == state.global_step
            and math.isclose(saved["total_flos"], flos, rel_tol=1e-9)
        ):
            self.ledger.load_state_dict(saved["ledger"])
            self.ledger.resumed_from.append(int(state.global_step))
            self.run_id, self._flos_at_begin = saved["run_id"], 0.0
            self.ledger.stop_reason = None
            if self.ledger.stops_before_next_round():
                raise BudgetSpentError(
                    f"resumed at step {state.global_step}, the budget stops the run before its first step: "
                    f"{self.ledger.stop_reason}; raise budget_flops to go on (Trainer runs a first step "
                    "whatever a callback says, so the resume is refused)"
                )
            return
        message = (
            f"resumed at step {state.global_step} from a checkpoint without this run's FLOP ledger state"
        )
        if self.budget_flops is not None:
            raise ValueError(message + ": the budget could not be kept; resume without a budget")
        warnings.warn(message + ": the ledger counts this session's steps only", stacklevel=3)

    def state(self) -> dict[str, Any]:
        """transformers' ``ExportableState``: saved in every checkpoint's ``trainer_state.json``."""
        if self.ledger is None or self._trainer_state is None:
            return {"args": {}, "attributes": {}}
        ts = self._trainer_state
        saved = {
            "run_id": self.run_id,
            "step": int(ts.global_step),
            "total_flos": float(ts.total_flos or 0.0),
        }
        saved["ledger"] = self.ledger.state_dict()
        args = {"budget_flops": self.budget_flops, "round_ceiling_flops": self.round_ceiling_flops}
        return {"args": args, "attributes": {STATE_KEY: saved}}

    def on_step_end(self, args, state, control, **kwargs):
        if self.ledger is None:
            return control
        self._session_steps += 1
        spg = getattr(args, "steps_per_generation", None)
        accumulation = max(int(getattr(args, "gradient_accumulation_steps", 1) or 1), 1)
        per_round = accumulation if spg is None else int(spg) * int(getattr(args, "num_iterations", 1) or 1)
        round_complete = (self._session_steps * accumulation) % max(per_round, 1) == 0
        self.ledger.end_step(state.global_step, round_complete)
        state.total_flos = self._flos_at_begin + self.ledger.total("useful")
        if round_complete and self.ledger.stops_before_next_round():
            control.should_training_stop = True
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        """Add the running totals to the logs (read by the ``report_to`` backends, which this callback
        runs ahead of) and to the entry Trainer appended to ``state.log_history``."""
        if self.ledger is None or logs is None or not self.ledger.steps:
            return
        metrics = self.ledger.metrics()
        logs.update(metrics)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(metrics)

    def on_train_end(self, args, state, control, **kwargs):
        self._remove_hooks()

    # --- hooks ------------------------------------------------------------------------------------
    def _install(self, model: Any) -> None:
        base = base_model(model)
        self._hook_forwards(base, self._policy_pre, self._policy_post, "_call")
        for name in ("generate", "generate_batch"):
            if hasattr(base, name):
                original, had_own = getattr(base, name), name in vars(base)
                setattr(base, name, self._generate_wrapper(original, name == "generate_batch"))
                self._restore.append((base, name, original if had_own else None))
        trainer = self._trainer or calling_trainer(self)
        if trainer is None:
            warnings.warn(
                "FlopLedgerCoreCallback found no Trainer calling it: a separate reference model or a reward "
                "model is not charged; call `callback.attach(trainer)`",
                stacklevel=4,
            )
            return
        lead_the_log_readers(self, trainer.callback_handler)
        ref = getattr(trainer, "ref_model", None)
        if ref is not None and _unwrap(ref) is not base:
            self._ref_shape = self.price_model(_unwrap(ref))
            self._hook_forwards(_unwrap(ref), self._ref_pre, self._ref_post, "_ref_call")
        for f in getattr(trainer, "reward_funcs", None) or ():
            if isinstance(f, torch.nn.Module):
                reward = _unwrap(f)
                shape = self.price_model(reward)
                self._handles.append(reward.register_forward_hook(self._reward_post(shape), with_kwargs=True))

    def _hook_forwards(self, model: Any, pre: Any, post: Any, slot: str) -> None:
        """``pre`` / ``post`` on ``model``'s forward, and a pre-hook on its output head that counts the
        positions it scores into the call in ``slot``."""
        self._handles.append(model.register_forward_pre_hook(pre, with_kwargs=True))
        self._handles.append(model.register_forward_hook(post, always_call=True))
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None

        def head_pre(module: Any, args: tuple) -> None:
            call = getattr(self, slot)
            if call is not None and args and isinstance(args[0], torch.Tensor):
                call["head"] += args[0].numel() // max(args[0].size(-1), 1)

        if isinstance(head, torch.nn.Module):
            self._handles.append(head.register_forward_pre_hook(head_pre))

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        for obj, name, previous in reversed(self._restore):
            if previous is None:
                vars(obj).pop(name, None)
            else:
                setattr(obj, name, previous)
        self._handles, self._restore = [], []
        self._call = self._ref_call = None
        self._in_generate = False

    def _counting(self) -> bool:
        return self.ledger is not None and self._policy is not None and self._policy.training

    def _adapters(self) -> Any:
        """The LoRA adapters active now (None: none, or disabled)."""
        layer = self._lora_layer
        return self._train.lora if layer is not None and not layer.disable_adapters else None

    def _generate_wrapper(self, original: Any, batched: bool) -> Any:
        @functools.wraps(original)
        def generate(*args: Any, **kwargs: Any) -> Any:
            if self._in_generate or not self._counting():
                return original(*args, **kwargs)
            self._in_generate, self._gen_executed = True, Work()
            try:
                out = original(*args, **kwargs)
            finally:
                self._in_generate = False
            if batched:  # continuous batching: no padded batch; useful = executed, from token counts
                outs = list(out.values()) if isinstance(out, dict) else []
                p_lens, c_lens = [len(o.prompt_ids) for o in outs], [len(o.generated_tokens) for o in outs]
            else:
                ids = arg(args, kwargs, "input_ids", 0)
                if not isinstance(ids, torch.Tensor):
                    return out
                mask, width = kwargs.get("attention_mask"), ids.size(1)
                p_lens = mask.sum(dim=1).tolist() if mask is not None else [width] * ids.size(0)
                config = kwargs.get("generation_config") or getattr(
                    base_model(self._policy), "generation_config", None
                )
                sequences = getattr(out, "sequences", out)
                c_lens = first_eos_lengths(sequences[:, width:], getattr(config, "eos_token_id", None))
            useful = Work()
            for p, c in zip(p_lens, c_lens, strict=True):
                useful = useful + generation_work(p, c)
            executed = useful if batched else self._gen_executed
            lora = self._adapters()
            self.ledger.charge(
                "search",
                {
                    k: forward_flops(self._shape, w, lora)
                    for k, w in (("useful", useful), ("executed", executed))
                },
            )
            self.ledger.count(
                gen_rows=len(p_lens), gen_prompt_tokens=sum(p_lens), gen_completion_tokens=sum(c_lens)
            )
            return out

        return generate

    def _policy_pre(self, module: Any, args: tuple, kwargs: dict) -> None:
        if self._call is None and self._counting():
            self._call = read_call(args, kwargs)

    def _policy_post(self, module: Any, args: tuple, output: Any) -> None:
        call, self._call = self._call, None
        if call is None or self.ledger is None:
            return
        if self._in_generate:
            rows, width = call["rows"], call["width"]
            self._gen_executed = self._gen_executed + Work(
                rows * width, rows * width * call["keys"], call["head"]
            )
            return
        work = forward_work(call)
        if call["grad"]:  # a loss pass; a head run as a module (TRL < 1.14) recomputes nothing
            trains = {
                "useful": self._train,
                "executed": self._train if call["fused"] else replace(self._train, head_recompute=False),
            }
            self.ledger.charge(
                "learning", {c: train_flops(self._shape, work[c], trains[c]) for c in CONVENTIONS}, "loss"
            )
            self.ledger.count(loss_rows=call["rows"], loss_tokens=work["useful"].tokens)
            return
        layer = (
            self._lora_layer
        )  # no grad: the old-policy forward, or the reference one (adapters off / "ref")
        if layer is None:
            part = "old"
        else:
            part = "ref" if layer.disable_adapters or "ref" in layer.active_adapters else "old"
        self.ledger.charge(
            "learning", {c: forward_flops(self._shape, work[c], self._adapters()) for c in CONVENTIONS}, part
        )
        self.ledger.count(**{f"{part}_forward_rows": call["rows"]})

    def _ref_pre(self, module: Any, args: tuple, kwargs: dict) -> None:
        self._ref_call = read_call(args, kwargs) if self._counting() and not self._in_generate else None

    def _ref_post(self, module: Any, args: tuple, output: Any) -> None:
        call, self._ref_call = self._ref_call, None
        if call is not None and self.ledger is not None:
            work = forward_work(call)
            self.ledger.charge(
                "learning", {c: forward_flops(self._ref_shape, work[c]) for c in CONVENTIONS}, "ref"
            )
            self.ledger.count(ref_forward_rows=call["rows"])

    def _reward_post(self, shape: Any) -> Any:
        def hook(module: Any, args: tuple, kwargs: dict, output: Any) -> None:
            """A reward model's forward over its ``input_ids`` and mask: C_reward."""
            ids = arg(args, kwargs, "input_ids", 0)
            if (
                not self._counting()
                or self._in_generate
                or not isinstance(ids, torch.Tensor)
                or ids.dim() != 2
            ):
                return
            mask = kwargs.get("attention_mask")
            mask = mask if isinstance(mask, torch.Tensor) and mask.dim() == 2 else torch.ones_like(ids)
            rows, width = ids.shape
            useful, executed = mask_work(mask), Work(rows * width, rows * width * width, rows * width)
            self.ledger.charge(
                "reward", {"useful": forward_flops(shape, useful), "executed": forward_flops(shape, executed)}
            )
            self.ledger.count(reward_tokens=useful.tokens)

        return hook
