"""``FlopLedgerCallback``: the FLOP ledger as a ``transformers.TrainerCallback``, for TRL's
``GRPOTrainer`` and ``RLOOTrainer`` without subclassing either.

::

    from trl import GRPOTrainer  # or RLOOTrainer
    from paper_repro.ledger import FlopLedgerCallback, LedgerConfig

    ledger = FlopLedgerCallback(LedgerConfig(budget_flops=3e15, log_path="run/ledger.jsonl"))
    trainer = GRPOTrainer(model=model, reward_funcs=reward_fn, args=args, train_dataset=ds,
                          callbacks=[ledger])  # or trainer.add_callback(ledger)
    trainer.train()
    ledger.ledger.summary()  # C_search / C_learning / C_reward, useful and executed

Where :class:`~paper_repro.ledger.trainer.LedgerGRPOTrainer` overrides private ``GRPOTrainer`` methods,
this callback watches the models instead, with hooks installed in ``on_train_begin`` (on the policy it
finds in the callback's ``model`` argument) and removed in ``on_train_end``, and prices every pass that
runs from its shapes, with the policy's cost model (:func:`~paper_repro.ledger.cost_models.policy_cost`);
the hooks and the work they count are the ledger's core's (:class:`~paper_repro.ledger.trl_core_watch.CoreWatcher`,
the same hooks :class:`~paper_repro.ledger.trl_core.FlopLedgerCoreCallback` runs), charged to the full
ledger by :class:`~paper_repro.ledger.watch.PassWatcher`, a mixin of the callback:

* **C_search**: the policy's ``generate`` (and ``generate_batch``, transformers' continuous batching) is
  wrapped on the model instance. Inside it, a forward pre-hook on the policy sees every prefill and
  decode call: ``executed`` is what those calls ran (rows x width tokens, every query against every
  key of its attention mask, the LM head at the positions the head module was called on); ``useful`` is
  counted from ``generate``'s output when it returns (each row's real prompt tokens, and its completion
  up to and including the first EOS), as :func:`~paper_repro.ledger.core.generation_pass_work` counts it.
* **C_learning**: any other policy forward while the policy is in training mode. With grad on it is a
  loss pass, whose backward follows (forward + backward + TRL's head recompute + the checkpointing
  recompute, as :meth:`~paper_repro.ledger.core.FlopLedger.charge_training_pass` prices it); with grad
  off it is the old-policy forward, or the reference forward when the PEFT adapters are disabled or the
  ``"ref"`` adapter is active. The work is read from the call's ``attention_mask`` and ``labels``
  (TRL's fused LM head scores the positions whose label is not -100), as
  :func:`~paper_repro.ledger.core.forward_pass_work` counts it.
* **The trainer's other models** (``watch_models=True``, the default): the trainer's public
  ``ref_model`` (the separate reference model of full fine-tuning with ``beta != 0``) gets the
  policy's forward hooks (C_learning, ``ref``); each ``nn.Module`` in its ``reward_funcs`` a forward
  hook (C_reward, priced by :func:`~paper_repro.ledger.cost_models.reward_model_cost` from the module
  that runs, one forward over its ``input_ids`` and ``attention_mask``). No hook is process-wide: a
  model outside the trainer is never touched. The trainer is the one given to
  :meth:`FlopLedgerCallback.attach`, else the one calling ``on_train_begin``
  (:func:`~paper_repro.ledger.trl_core_read.calling_trainer`). A reward *function* is invisible to a
  callback: :meth:`FlopLedgerCallback.attach` wraps the trainer's reward functions that have a
  ``flop_cost`` (or wrap one with :meth:`FlopLedgerCallback.priced_reward`) so that it is charged; a
  callback never attached warns at train begin that it cannot see them.

Each optimizer step is closed in ``on_step_end`` (:meth:`FlopLedger.end_step`, summed over processes
under ``torch.distributed``); ``on_log`` adds the running totals (:meth:`FlopLedger.metrics`) to the
logs, which reach the ``report_to`` backends (the callback runs ahead of them,
:func:`~paper_repro.ledger.trl_core_read.lead_the_log_readers`), and to ``state.log_history``; ``state.total_flos`` becomes the useful C_total; the budget stops the
run through ``control.should_training_stop``; ``on_train_end`` logs why the run stopped and writes the
summary (:meth:`FlopLedgerCallback.summary_path`).

Its state travels inside every checkpoint, as transformers' ``ExportableState``
(``trainer_state.json``'s ``stateful_callbacks``), and is restored from the checkpoint the run resumes
from, whatever the ``output_dir`` (:mod:`~paper_repro.ledger.resume`). A resume whose next step could
pass the budget is refused at train begin with :class:`BudgetSpentError` (Trainer runs a first step
whatever a callback says, so a callback cannot stop it more quietly), after logging why and rewriting
the summary.

Each ``LedgerConfig`` field is honoured or refused when the callback is built
(:mod:`~paper_repro.ledger.callback_fields`, which also writes the compute card, states MFU against
``peak_flops`` and prices the costliest round from ``max_prompt_tokens``). What it cannot do that the
subclass does: K-of-G down-sampling (``LedgerConfig.kept``), the lean and fused samplers and the
bucketed update, pricing the costliest round from the train dataset (pass ``round_ceiling_flops`` or
``max_prompt_tokens`` for a guaranteed budget stop) and seeing vLLM's generation (its engine runs
outside the model).

It touches no private TRL name (:data:`PRIVATE_TRL_NAMES`); the TRL behaviours it relies on are
:data:`TRL_CONVENTIONS`.
"""

from __future__ import annotations

import functools
import inspect
import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from paper_repro.accounting import flops
from paper_repro.accounting.flops import Work
from paper_repro.ledger.callback_fields import CallbackFields
from paper_repro.ledger.config import show_run_lines
from paper_repro.ledger.core import BudgetWarning, FlopLedger, LedgerConfig, as_conventions
from paper_repro.ledger.cost_models import check_priced, policy_cost
from paper_repro.ledger.resume import (
    STATE_NAME,
    check_not_rebuilt,
    checkpoint_dir,
    ledger_state,
    mismatch,
    new_run_id,
    restore,
    saved_state,
    state_beside,
)
from paper_repro.ledger.trl_core import BudgetSpentError, log_metrics
from paper_repro.ledger.watch import PassWatcher

logger = logging.getLogger("paper_repro.ledger")

# Every private (underscore) TRL name the callback reads, writes, calls or overrides, with why: none.
# (LedgerGRPOTrainer's are in paper_repro.ledger.compat.HOOKED_METHODS and its attribute reads.)
PRIVATE_TRL_NAMES: dict[str, str] = {}

# What the callback assumes of TRL's public behaviour (GRPOTrainer and RLOOTrainer, TRL 1.13 to 1.16):
# a TRL that changes one of these is counted wrong, not refused; tests/test_trl_releases.py checks them
# against the profiler, release by release.
TRL_CONVENTIONS: dict[str, str] = {
    "generate": "HF-path rollouts run model.generate (or generate_batch) on the unwrapped policy, whose "
    "PEFT wrapper calls the base model's generate; a rollout loop that calls the model's forward itself "
    "(LedgerGRPOTrainer's lean sampler) would be read as old-policy forwards",
    "fused_lm_head": "log-prob forwards call the model with labels=... and fused_lm_head=True "
    "(trl.trainer.utils.add_fused_lm_head, TRL >= 1.14), whose head scores the positions whose shifted "
    "label is not -100 on CUDA/XPU with Triton, every position but the last elsewhere (mirrors "
    "trl.kernels.chunked_logprob._use_triton, read, not imported), and recomputes its logits in "
    "backward; without that kwarg (TRL 1.13: logits_to_keep) the LM head runs as a module, counted by "
    "a hook on it, with no recompute",
    "grad": "the loss forward runs with grad enabled and its backward follows; the old-policy and "
    "reference forwards run under no_grad",
    "reference": "with PEFT the reference is the policy with its adapters disabled, or its 'ref' adapter; "
    "without PEFT it is a separate PreTrainedModel called like the policy",
    "rounds": "one generation every steps_per_generation x num_iterations micro-batches "
    "(GRPOConfig / RLOOConfig fields), per_device_train_batch_size rows each",
    "eval": "evaluation runs with the policy in eval mode (not charged)",
}


class FlopLedgerCallback(CallbackFields, PassWatcher, TrainerCallback, ExportableState):
    """The FLOP ledger for ``trl.GRPOTrainer`` and ``trl.RLOOTrainer`` as a callback (module docstring).

    ``config``: the ledger's options (:class:`LedgerConfig`): each field is honoured or refused here,
    with why (:data:`~paper_repro.ledger.callback_fields.CALLBACK_REFUSES`: the down-sampling fields,
    which need :class:`~paper_repro.ledger.trainer.LedgerGRPOTrainer`, and ``prefix_cache=True``); a TRL
    outside the tested releases is refused unless ``allow_untested_trl``. ``watch_models``: also charge
    models other than the policy (the trainer's separate reference model and its reward models), hooked
    while training runs. ``callback.attach(trainer)`` adds it to a built trainer (:meth:`attach`). After
    ``train()``, :attr:`ledger` holds the run (a :class:`FlopLedger`)."""

    def attach(self, trainer: Any) -> FlopLedgerCallback:
        """Attach the ledger to a built ``trainer`` (TRL's ``GRPOTrainer`` or ``RLOOTrainer``): its
        reward functions with a ``flop_cost`` are wrapped so that they are charged
        (:meth:`~paper_repro.ledger.callback_fields.CallbackFields.attach_rewards`), its models are
        watched when it trains, and the callback is added ahead of the callbacks that report its logs
        (:meth:`~paper_repro.ledger.watch.PassWatcher.attach`). Returns the callback."""
        self.attach_rewards(trainer)
        return PassWatcher.attach(self, trainer)

    def __init__(self, config: LedgerConfig | None = None, watch_models: bool = True) -> None:
        if config is not None and not isinstance(config, LedgerConfig):
            raise TypeError(f"FlopLedgerCallback takes a LedgerConfig, got a {type(config).__name__}")
        self.config = config or LedgerConfig()
        self._init_fields()  # each field the callback refuses, and the TRL release
        self._init_watch(watch_models)
        self._session_steps = 0
        self._flos_at_begin = 0.0
        self.run_id: str | None = None  # the run's identity, kept in its saved state across resumes
        self._trainer_state: Any = None  # the TrainerState being trained (state() saves its step)
        # useful FLOPs of each finished round outside and inside its loss passes (the budget stop prices
        # a round's opening from them without a ceiling), and of the open round
        self._round_parts: list[tuple[float, float]] = []
        self._open_round = [0.0, 0.0]

    # --- reward functions ----------------------------------------------------------------------
    def priced_reward(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """``func`` (a TRL reward function with a ``flop_cost`` attribute, see docs/ledger.md) wrapped so
        that each call in training charges C_reward what ``flop_cost`` says; pass the wrapper to the
        trainer (or let :meth:`attach` wrap the trainer's). Name, signature and async-ness are kept. A
        ``flop_cost`` that raises, or returns anything but FLOPs, fails naming the reward function."""
        name = getattr(func, "__name__", None) or repr(func)
        cost_fn = getattr(func, "flop_cost", None)
        if not callable(cost_fn):
            raise ValueError(
                f"reward function {name!r} has no callable flop_cost attribute "
                f"(got {type(cost_fn).__name__}): give it one (docs/ledger.md, priced reward functions), "
                "or pass the function to the trainer as it is"
            )
        if all(known is not cost_fn for _, known in self._priced_funcs):
            self._priced_funcs.append((name, cost_fn))  # priced in the round's ceiling
        source = f"reward function {name!r}'s flop_cost"

        def charge(kwargs: dict[str, Any]) -> None:
            if self.ledger is None or self._policy is None or not self._policy.training:
                return
            try:
                cost = cost_fn(
                    prompts=kwargs.get("prompts"),
                    completions=kwargs.get("completions"),
                    completion_ids=kwargs.get("completion_ids"),
                )
            except Exception as err:
                err.add_note(f"raised by {source} (FlopLedgerCallback.priced_reward)")
                raise
            self.ledger.charge_priced_reward(
                as_conventions(cost, source), len(kwargs.get("completions") or ())
            )

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
                out = await func(*args, **kwargs)
                charge(kwargs)
                return out

            wrapped = wrapped_async
        else:

            @functools.wraps(func)
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                out = func(*args, **kwargs)
                charge(kwargs)
                return out

        del wrapped.flop_cost  # functools.wraps copied it: the trainer must not see a second price
        return wrapped

    # --- the events ----------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is None:
            raise RuntimeError(
                "FlopLedgerCallback needs the trainer's model (the callback's `model` argument)"
            )
        check_not_rebuilt(args, "FlopLedgerCallback")
        show_run_lines()
        self._remove_hooks()
        checkpointing = bool(
            getattr(args, "activation_checkpointing", getattr(args, "gradient_checkpointing", False))
        )
        ckpt_kwargs = getattr(
            args, "activation_checkpointing_kwargs", getattr(args, "gradient_checkpointing_kwargs", None)
        )
        self._busy = True
        try:
            policy, train = policy_cost(model, checkpointing, ckpt_kwargs)
        finally:
            self._busy = False
        self._check_config(args, policy)
        self.ledger = FlopLedger(policy, train, self.config)
        self._begin_fields(args, model, kwargs)  # the card's view, max_prompt_tokens' ceiling, rewards unseen
        self._policy = model
        self._device = getattr(args, "device", None)
        self._lora_layer = next(
            (m for m in model.modules() if isinstance(getattr(m, "lora_A", None), torch.nn.ModuleDict)), None
        )
        self._session_steps = 0
        self._round_rows, self._new_round = [], True
        self._flos_at_begin = float(state.total_flos or 0.0)
        self._trainer_state, self.run_id = state, new_run_id()
        self._round_parts, self._open_round = [], [0.0, 0.0]
        if state.global_step > 0:  # resumed from a checkpoint: the ledger's state saved with it
            self._resume(args, state)
            self._refuse_if_spent(args, state)
        # a checkpoint written without this callback has no entry for it, which Trainer's save expects
        state.stateful_callbacks.setdefault(type(self).__name__, self.state())
        self._install(model)

    def state(self) -> dict[str, Any]:
        """transformers' ``ExportableState``: what Trainer saves into every checkpoint's
        ``trainer_state.json`` (``stateful_callbacks["FlopLedgerCallback"]``): the ledger's state, the
        run's identity and the checkpoint's step and ``total_flos`` (:func:`~paper_repro.ledger.resume.ledger_state`)."""
        return ledger_state(self.ledger, self.run_id, self._trainer_state, {"round_parts": self._round_parts})

    def _resume(self, args: Any, state: Any) -> None:
        """Restore the ledger from the checkpoint this run resumed from: its ``TrainerState`` (which
        Trainer read from the folder given to ``train``), else, for a checkpoint written before the
        state moved there, ``<output_dir>/checkpoint-<step>/flop_ledger.json`` when it is this
        checkpoint's (its step and FLOPs are the trainer state's). A checkpoint without it refuses a
        budget and warns without one."""
        saved, where = saved_state(state.stateful_callbacks, type(self).__name__), "its trainer state"
        if saved is None:
            folder = checkpoint_dir(args.output_dir, state.global_step)
            saved, where = state_beside(folder), str(folder / STATE_NAME)
        reason = None if saved is None else mismatch(saved, state.global_step, state.total_flos)
        if saved is not None and reason is None:
            extra = restore(self.ledger, saved, None, state.global_step)
            self.run_id = saved.get("run_id") or self.run_id
            self._round_parts = [tuple(p) for p in extra.get("round_parts", [])]
            self._flos_at_begin = 0.0  # the restored ledger counts the steps before the resume
            return
        message = (
            f"resumed at step {state.global_step} from a checkpoint without this run's FLOP ledger state"
            + (f" ({where} is not this checkpoint's: {reason})" if reason else "")
            + ": the ledger counts only the steps of this session"
        )
        if self.config.budget_flops is not None:
            raise ValueError(message + ", so the budget could not be kept; resume without a budget")
        warnings.warn(message, stacklevel=3)

    def _refuse_if_spent(self, args: Any, state: Any) -> None:
        """Raise :class:`BudgetSpentError` when the run's first step could pass the budget (the budget
        stopped the run at this checkpoint, or was lowered), after logging why and rewriting the
        summary; asked again of this session's budget, so a run given more goes on."""
        ledger = self.ledger
        if not ledger.steps:
            return
        ledger.stopped_by_budget, ledger.stop_reason = False, None
        # TRL does not save its buffer of rollouts: the first step after a resume opens a new round
        if not self._stops_before_next_step(args, round_complete=True):
            return
        line = ledger.stop_message(
            f"resumed at step {state.global_step}, the budget stopped it before its first step: "
            f"{ledger.stop_reason}; nothing left to run"
        )
        path = self.summary_path(args)
        if state.is_world_process_zero:
            logger.info(line)
            if path is not None:
                ledger.write_summary(path)
        raise BudgetSpentError(
            f"{line}. Trainer runs a first step whatever a callback says, so FlopLedgerCallback refuses "
            "the resume rather than pass the budget: raise LedgerConfig.budget_flops to go on"
            + (f" (the summary, {path}, says where it stopped)" if path is not None else "")
        )

    def on_step_begin(self, args, state, control, **kwargs):
        if self.ledger is not None:
            self._sync()
            self.ledger.begin_step()

    def on_step_end(self, args, state, control, **kwargs):
        ledger = self.ledger
        if ledger is None:
            return control
        self._sync()
        self._session_steps += 1
        per_round = self._micro_per_round(args)
        accumulation = max(int(getattr(args, "gradient_accumulation_steps", 1) or 1), 1)
        round_complete = (self._session_steps * accumulation) % per_round == 0
        world = self._world_size()
        if world > 1:
            ledger.reduce_step(self._reduce_sum)
        record = ledger.end_step(state.global_step, round_complete)
        loss = record["learning_parts"]["useful"]["loss"]
        self._open_round[0] += record["flops"]["useful"]["total"] - loss
        self._open_round[1] += loss
        if round_complete:
            self._new_round = True
            self._round_parts.append(tuple(self._open_round))
            self._open_round = [0.0, 0.0]
        state.total_flos = self._flos_at_begin + ledger.total("useful")
        if self._stops_before_next_step(args, round_complete):
            control.should_training_stop = True
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        """Add the running totals to the logs (cumulative values, as TRL logs ``num_tokens``;
        :data:`~paper_repro.ledger.core.METRIC_NAMES`): the ``report_to`` backends read them there, as
        this callback runs ahead of them (moved there in ``on_train_begin``, or by :meth:`attach`); the
        entry Trainer appended to ``state.log_history`` before calling back gets them too."""
        if self.ledger is None or logs is None or not self.ledger.steps:
            return
        log_metrics({**self.ledger.metrics(), **self._utilisation_metrics()}, logs, state)

    def on_train_end(self, args, state, control, **kwargs):
        ledger = self.ledger
        self._remove_hooks()
        if ledger is None:
            return
        if state.is_world_process_zero:
            logger.info(ledger.stop_message(self._why_stopped(state)))
        path = self.summary_path(args)
        if path is not None and state.is_world_process_zero:
            ledger.write_summary(path)
        if state.is_world_process_zero:
            self.write_compute_card(args)
        ledger.warn_if_over_budget()

    def summary_path(self, args: Any) -> Path | None:
        """Where ``on_train_end`` writes the summary: beside the step log (``<log_path>.summary.json``),
        else ``<output_dir>/flop_ledger.summary.json`` (in the compute card's place; none with
        ``write_card=False``)."""
        if self.config.log_path:
            return Path(self.config.log_path).with_suffix(".summary.json")
        if self.config.write_card and getattr(args, "output_dir", None):
            return Path(args.output_dir) / "flop_ledger.summary.json"
        return None

    # --- setup ---------------------------------------------------------------------------------
    def _check_config(self, args: Any, policy: Any) -> None:
        config = self.config
        budget = config.budget_flops
        check_priced({"the policy": policy}, budget)
        if budget is not None:
            for name in ("first_round_flops", "round_ceiling_flops"):
                value = getattr(config, name)
                if value is not None and value > budget:
                    raise ValueError(
                        f"budget {budget:.3g} FLOPs does not buy one generation round: {name}={value:.3g}"
                    )
            if (
                config.round_ceiling_flops is None
                and config.max_prompt_tokens is None
                and config.budget_stop != "overshoot"
            ):
                warnings.warn(
                    "FlopLedgerCallback prices the next generation round as the dearest so far without "
                    "LedgerConfig(round_ceiling_flops=...) or max_prompt_tokens=...: a run whose completions "
                    "grow can pass its budget by up to one round (LedgerGRPOTrainer prices the ceiling itself)",
                    BudgetWarning,
                    stacklevel=3,
                )
        if getattr(args, "use_vllm", False):
            warnings.warn(
                "FLOP ledger: generation under vLLM runs outside the policy module, where FlopLedgerCallback "
                "cannot see it: C_search is not counted (LedgerGRPOTrainer prices it from token counts)",
                stacklevel=3,
            )

    # --- steps and the budget ------------------------------------------------------------------
    @staticmethod
    def _micro_per_round(args: Any) -> int:
        """Micro-batches per generation round: steps_per_generation x num_iterations (one optimizer
        step's micro-batches for a trainer without those fields)."""
        spg = getattr(args, "steps_per_generation", None)
        if spg is None:
            return max(int(getattr(args, "gradient_accumulation_steps", 1) or 1), 1)
        return max(int(spg) * int(getattr(args, "num_iterations", 1) or 1), 1)

    def _stops_before_next_step(self, args: Any, round_complete: bool) -> bool:
        """At the end of an optimizer step, whether the budget stops the run here, by the subclass's rule
        (:meth:`~paper_repro.ledger.pricing.RoundPricing._price_of_next`, docs/ledger.md: the two forms):
        at the end of a round, the next round at its ceiling (``round_ceiling_flops``, raised to the
        dearest finished round where one cost more), or, without a ceiling, under ``"step"`` the
        opening of the next round as the dearest finished round opened (an estimate) and under
        ``"round"`` / ``"overshoot"`` the dearest finished round; inside a round (``"step"`` only), the
        next step's loss passes over the round's dearest rows."""
        ledger, config = self.ledger, self.config
        if config.budget_flops is None:
            return False
        if round_complete:
            # the round's ceiling: round_ceiling_flops, or priced from max_prompt_tokens (callback_fields)
            ceiling = None if config.budget_stop == "overshoot" else self._round_ceiling()
            if ceiling is not None:
                return ledger.stop_before(
                    ledger.round_ceiling(ceiling),
                    "the next round, at its ceiling (LedgerConfig.round_ceiling_flops or max_prompt_tokens),",
                )
            if config.budget_stop != "step" or not self._round_parts:
                return ledger.should_stop()
            return ledger.stop_before(
                self._opening_estimate(args),
                "the next optimizer step, which starts a generation round (priced as the dearest "
                "finished round opened: an estimate without round_ceiling_flops),",
            )
        if config.budget_stop != "step":
            return False
        # inside a round: the next step's loss passes, bounded by this round's dearest rows
        bound = self._next_step_bound(args)
        if self._world_size() > 1:
            bound = float(self._reduce_sum(torch.tensor([bound], dtype=torch.float64))[0])
        return ledger.stop_before(
            bound, "the next optimizer step (loss passes over rollouts already generated)"
        )

    def _opening_estimate(self, args: Any) -> float:
        """Useful FLOPs the opening step of a round costs, estimated from the finished rounds as the
        subclass prices it from its ceiling: the round's generation, rewards and no-grad forwards, and
        the share of its loss passes the step's micro-batches run, the dearest of the rounds so far."""
        accumulation = max(int(getattr(args, "gradient_accumulation_steps", 1) or 1), 1)
        share = accumulation / self._micro_per_round(args)
        return max(outside + loss * share for outside, loss in self._round_parts)

    def _next_step_bound(self, args: Any) -> float:
        """Useful FLOPs the next step's loss passes can cost on this process: its micro-batches over the
        dearest rows of the round's rollouts."""
        rows = int(getattr(args, "per_device_train_batch_size", 1)) * max(
            int(getattr(args, "gradient_accumulation_steps", 1) or 1), 1
        )
        dearest = sorted(self._round_rows, key=lambda pc: pc[0] + pc[1], reverse=True)[:rows]
        work = Work()
        for p, c in dearest:
            work = work + flops.sequence_work(p + c, head_tokens=c)
        return self.ledger.training_pass_flops(work)

    def _why_stopped(self, state: Any) -> str:
        ledger = self.ledger
        if ledger.stopped_by_budget:
            return f"the budget stopped it: {ledger.stop_reason}"
        if state.max_steps and state.global_step >= state.max_steps:
            return f"max_steps={state.max_steps} reached"
        return "the train dataset ran out, or another callback stopped it"

    # --- processes -----------------------------------------------------------------------------
    @staticmethod
    def _world_size() -> int:
        dist = torch.distributed
        return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1

    def _reduce_sum(self, t: torch.Tensor) -> torch.Tensor:
        dist = torch.distributed
        device = self._device if dist.get_backend() == "nccl" and self._device is not None else "cpu"
        t = t.to(device)
        dist.all_reduce(t)
        return t.cpu()
