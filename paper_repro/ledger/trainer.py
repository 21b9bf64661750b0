"""``LedgerGRPOTrainer``: TRL's ``GRPOTrainer`` (TRL 1.16) with the FLOP ledger hooked in.

What it hooks (see ``docs/DESIGN.md`` §3.7):

* ``_generate_single_turn``: the prompt and completion tokens of every rollout (C_search);
* ``_get_per_token_logps_and_entropies``: every policy forward over prompt+completion. With grad
  off it is the old-policy or reference forward (the reference model, the adapters disabled, or a
  pre-wrapped PeftModel's ``"ref"`` adapter = reference); with grad on it is the loss pass, whose
  backward follows (C_learning);
* ``_calculate_rewards``: the reward functions; a reward model's cost comes from its own token
  counts (TRL's ``nn.Module`` path) or from the function's ``flop_cost`` attribute (C_reward);
* ``_generate_and_score_completions``: K-of-G down-sampling of each generation batch;
* a ``TrainerCallback`` closes each optimizer step (one JSONL line, wall seconds per component, the
  budget stop) and, at the end, logs one line that says why the run stopped.

Each pass is priced by the policy's cost model (:mod:`~paper_repro.ledger.cost_models`): the analytic
FLOP model for the families it knows, a one-off measurement of the module at construction otherwise;
reward models likewise, from the module that runs.

What else reaches the outside:

* TRL's metrics path: every optimizer step sets ``flops/*`` and ``tokens/*`` in
  ``GRPOTrainer._metrics``, so every ``report_to`` backend and ``state.log_history`` carry them
  (:data:`~paper_repro.ledger.core.METRIC_NAMES`);
* ``state.total_flos`` is the ledger's useful C_total, so the trainer's end-of-training summary is right;
* a compute card (JSON and Markdown) written at the end of training (:func:`compute_card`).

It hooks private methods of TRL: :mod:`~paper_repro.ledger.compat` checks the TRL release and the hooked
methods' signatures when the trainer is built.

The class's other jobs are mixins from the modules beside this one: K-of-G down-sampling
(:class:`~paper_repro.ledger.downsample.Downsampling`), pricing the costliest round before training
(:class:`~paper_repro.ledger.pricing.RoundPricing`) and choosing the lean/fused sampler and the
bucketed/fused update (:class:`~paper_repro.ledger.kernels.KernelDispatch`).
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState
from trl import GRPOTrainer

from paper_repro.accounting import flops
from paper_repro.ledger.card import utilisation_metrics
from paper_repro.ledger.compat import check_config_places, check_trl
from paper_repro.ledger.config import show_run_lines
from paper_repro.ledger.core import (
    FlopLedger,
    LedgerConfig,
    as_conventions,
    forward_pass_work,
    generation_pass_work,
    real_rows_work,
)
from paper_repro.ledger.cost_models import check_priced, policy_cost, reward_model_cost
from paper_repro.ledger.downsample import Downsampling
from paper_repro.ledger.kernels import KernelDispatch, check_kernel_choice
from paper_repro.ledger.pricing import RoundPricing
from paper_repro.ledger.probes import install_dtype_probes
from paper_repro.ledger.resume import (
    check_not_rebuilt,
    ledger_state,
    mismatch,
    new_run_id,
    restore,
    saved_state,
    state_beside,
    trainer_state_of,
)

logger = logging.getLogger(__name__)


class _LedgerCallback(TrainerCallback, ExportableState):
    def __init__(self, trainer: LedgerGRPOTrainer) -> None:
        self.trainer = trainer
        self.run_id = new_run_id()  # the run's identity, kept in its saved state across resumes

    def state(self) -> dict[str, Any]:
        """transformers' ``ExportableState``: the ledger's state, saved into every checkpoint's
        ``trainer_state.json`` (:func:`~paper_repro.ledger.resume.ledger_state`)."""
        trainer = self.trainer
        return ledger_state(trainer.ledger, self.run_id, trainer.state, trainer._ledger_extra_state())

    def on_train_begin(self, args, state, control, **kwargs):
        # a checkpoint written without the ledger has no entry for it, which Trainer's save expects
        state.stateful_callbacks.setdefault(type(self).__name__, self.state())

    def on_step_begin(self, args, state, control, **kwargs):
        self.trainer._sync()
        self.trainer.ledger.begin_step()

    def on_train_end(self, args, state, control, **kwargs):
        trainer = self.trainer
        if trainer.accelerator.is_main_process:
            trainer._report_stop(state)
        log_path = trainer.ledger.config.log_path
        if log_path:
            trainer.ledger.write_summary(Path(log_path).with_suffix(".summary.json"))
        if trainer.ledger.config.write_card and trainer.accelerator.is_main_process:
            trainer.write_compute_card()

    def on_step_end(self, args, state, control, **kwargs):
        trainer = self.trainer
        trainer._sync()
        generate_every = args.steps_per_generation * trainer.num_iterations
        round_complete = trainer._step % generate_every == 0
        accelerator = trainer.accelerator
        if accelerator.num_processes > 1:
            trainer.ledger.reduce_step(lambda t: accelerator.reduce(t.to(accelerator.device), "sum").cpu())
        trainer.ledger.end_step(state.global_step, round_complete)
        # cumulative values, set (not appended) as TRL sets num_tokens: the logged value is the
        # total at the logging step, whatever logging_steps is
        metrics = trainer._metrics["train"]
        for name, value in trainer.ledger.metrics().items():
            metrics[name] = [value]
        # MFU and HFU so far, in percent beside TRL's own perf/ keys; none without a known peak
        for name, value in utilisation_metrics(trainer).items():
            metrics[name] = [value]
        if trainer._stops_before_next_step(round_complete):
            control.should_training_stop = True
        return control


# ---------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------


class LedgerGRPOTrainer(RoundPricing, Downsampling, KernelDispatch, GRPOTrainer):
    """``trl.GRPOTrainer`` with a FLOP ledger, a FLOP budget and K-of-G down-sampling.

    Takes every ``GRPOTrainer`` argument plus ``ledger`` (a :class:`LedgerConfig`). After
    ``train()``, ``trainer.ledger`` holds the per-step records and ``trainer.ledger.summary()``
    the totals. On the way:

    * construction refuses a config in the wrong place, a TRL outside :data:`~paper_repro.ledger.compat.SUPPORTED_TRL`
      (unless opted in) or with other hooked signatures, and a budget below
      one round (the user's ``first_round_flops`` / ``round_ceiling_flops``, else the round the
      trainer prices itself: :meth:`price_round_ceiling`);
    * every optimizer step puts the run's running totals into TRL's metrics (:data:`METRIC_NAMES`,
      e.g. ``flops/search``, ``flops/executed/total``, ``flops/rho``, ``flops/rho_time``,
      ``tokens/learning``). They are cumulative values, set as TRL sets ``num_tokens``: what a
      logging step shows is the total up to that step, whatever ``logging_steps`` is; differences of
      consecutive log entries are the window's FLOPs;
    * ``state.total_flos`` is the useful C_total (:meth:`store_flos`);
    * at the end of training the compute card is written (:func:`compute_card`) to
      ``LedgerConfig.card_path`` + ``.json`` / ``.md`` (default ``<output_dir>/compute_card``).
    """

    def __init__(
        self,
        *args: Any,
        ledger: LedgerConfig | None = None,
        sampler: str = "hf",
        update_layout: str = "padded",
        **kwargs: Any,
    ) -> None:
        check_config_places(args, kwargs, ledger)
        check_trl(allow_untested=bool(ledger and ledger.allow_untested_trl))
        check_kernel_choice(sampler, update_layout)
        super().__init__(*args, **kwargs)
        # "lean": rollouts by paper_repro.sampler where it reproduces HF generate (else HF generate);
        # "fused": by its fused decoder (the same model and distribution, other roundings)
        self.sampler = sampler
        # "bucketed": TRL's policy forwards over length buckets (paper_repro.sampler.buckets); "fused": over
        # the same buckets by paper_repro.sampler.fused_update's forward instead of HF's and TRL's fused head
        self.update_layout = update_layout
        self.fused_update_fallback: str | None = None  # why the last "fused" forward ran HF's instead
        self.lean_fallback: str | None = None  # why the last rollout fell back to HF generate
        config = ledger or LedgerConfig()
        # analytic where the FLOP model knows the policy, else measured (paper_repro.ledger.cost_models);
        # `activation_checkpointing` is the flag Trainer enables checkpointing by
        policy, train = policy_cost(
            self.model, bool(self.args.activation_checkpointing), self.args.activation_checkpointing_kwargs
        )
        self.ledger = FlopLedger(policy, train, config)
        # reward models (nn.Module reward functions) priced once, from the modules that run
        self.reward_model_costs = {
            func: reward_model_cost(func) for func in self.reward_funcs if isinstance(func, torch.nn.Module)
        }
        check_priced(
            self.priced_models(),
            config.budget_flops,
            ["the vision encoder of this vision-language model"] if self._is_vlm else [],
        )
        self._kept = config.kept or self.num_generations
        self._prefix_cache = self.use_vllm if config.prefix_cache is None else config.prefix_cache
        self._downsample_rng = torch.Generator().manual_seed(config.downsample_seed)
        self._last_rewards: torch.Tensor | None = None
        self._adapter_layer = next(
            (m for m in self.model.modules() if isinstance(getattr(m, "lora_A", None), torch.nn.ModuleDict)),
            None,
        )
        self._check_downsampling()
        self.round_price: dict[str, Any] | None = None  # the self-priced ceiling (price_round_ceiling)
        self._check_first_round()
        if config.write_card and self.accelerator.device.type == "cpu":
            # the CPU matmul throughput the card shows beside the run, measured now, not in the card at
            # the end: inside train() the matmuls would show in any FlopCounterMode around it and in its
            # wall time (cached: once per process)
            from paper_repro.ledger.card import cpu_matmul_throughput

            cpu_matmul_throughput()
        install_dtype_probes(self)  # the compute dtype of each phase, as it runs (for the card)
        self.add_callback(_LedgerCallback(self))

    # --- resuming -------------------------------------------------------------------------------
    def train(self, resume_from_checkpoint: str | bool | None = None, *args: Any, **kwargs: Any):
        """Trainer's ``train``; resuming from a checkpoint, the ledger's state saved with it is restored
        first (:mod:`paper_repro.ledger.resume`), so the budget counts every step the run has taken.
        A resume whose next step could pass the budget (the run had stopped by its budget there, or
        the budget was lowered) runs no step: it logs why and returns."""
        check_not_rebuilt(self.args, "LedgerGRPOTrainer")
        show_run_lines()
        folder = resume_from_checkpoint
        if folder is True:
            from transformers.trainer_utils import get_last_checkpoint

            folder = get_last_checkpoint(self.args.output_dir)  # None: Trainer raises below
        if isinstance(folder, (str, Path)) and Path(folder).is_dir():
            stopped = self._restore_ledger(Path(folder))
            if stopped is not None:
                return stopped
        return super().train(resume_from_checkpoint, *args, **kwargs)

    def _ledger_extra_state(self) -> dict[str, Any]:
        """What the trainer saves beside the ledger's own state: the self-priced round ceiling and
        the random down-sampling generator."""
        return {
            "round_price": self.round_price,
            "downsample_rng": self._downsample_rng.get_state().tolist(),
        }

    def _restore_ledger(self, folder: Path) -> Any:
        """Restore the ledger from a checkpoint folder (its ``trainer_state.json``, else the file an
        older version wrote beside it, when it is this checkpoint's); return Trainer's output when the
        budget leaves nothing to run, else None."""
        trainer_state = trainer_state_of(folder) or {}
        saved = saved_state(trainer_state.get("stateful_callbacks"), _LedgerCallback.__name__)
        if saved is None:
            saved = state_beside(folder)
        step = trainer_state.get("global_step")
        reason = None
        if saved is not None and step is not None:
            reason = mismatch(saved, step, trainer_state.get("total_flos"))
        if saved is None or reason is not None:
            message = (
                f"the checkpoint {folder} holds no FLOP ledger state of its own ("
                + (
                    reason
                    if reason
                    else "it was written without the ledger, or by a version before it saved one"
                )
                + "): the ledger counts only the steps of this session"
            )
            if self.ledger.config.budget_flops is not None:
                raise ValueError(message + ", so the budget could not be kept; resume without a budget")
            warnings.warn(message, stacklevel=3)
            return None
        if step is None:  # no trainer_state.json: the last step the ledger logged
            step = saved["ledger"]["steps"][-1]["step"] if saved["ledger"]["steps"] else 0
        extra = restore(self.ledger, saved, str(folder), step)
        callback = next(cb for cb in self.callback_handler.callbacks if isinstance(cb, _LedgerCallback))
        callback.run_id = saved.get("run_id") or callback.run_id
        if extra.get("round_price") is not None:
            self._set_round_price(extra["round_price"])
        self._downsample_rng.set_state(torch.tensor(extra["downsample_rng"], dtype=torch.uint8))
        # TRL does not save its buffer of rollouts: the first step after a resume opens a new round
        self.current_gradient_accumulation_steps = self.args.gradient_accumulation_steps
        # asked again, of this session's budget: a run the budget stopped at this checkpoint stops
        # again (a new round costs at least what stopped it), one given more budget goes on
        self.ledger.stopped_by_budget, self.ledger.stop_reason = False, None
        if self._stops_before_next_step(round_complete=True):
            from transformers.trainer_utils import TrainOutput

            logger.info(
                self.ledger.stop_message(
                    f"resumed from {folder} (step {self.ledger.resumed_from[-1]['step']}), the budget "
                    f"stopped it before its first step: {self.ledger.stop_reason}; nothing left to run"
                )
            )
            if self.ledger.config.log_path:
                self.ledger.write_summary(Path(self.ledger.config.log_path).with_suffix(".summary.json"))
            self._close_spent_resume(folder)
            # no step ran in this session, so there is no training loss to report: NaN, not 0
            return TrainOutput(
                self.ledger.resumed_from[-1]["step"],
                float("nan"),
                {"total_flos": self.ledger.total("useful")},
            )
        return None

    def _close_spent_resume(self, folder: Path) -> None:
        """A resume that runs no step (its budget is spent) still ends as a run does: ``self.state`` is
        the checkpoint's (its ``global_step``, ``log_history``; ``total_flos`` the ledger's useful
        C_total, every session's), and the compute card is written again, with the resume in it."""
        from transformers import TrainerState

        state_file = folder / "trainer_state.json"
        if state_file.is_file():
            self.state = TrainerState.load_from_json(str(state_file))
        self.store_flos()
        if self.ledger.config.write_card and self.accelerator.is_main_process:
            self.write_compute_card()

    # --- TRL's FLOP count ----------------------------------------------------------------------
    def floating_point_ops(self, inputs: Any) -> int:
        """0: the ledger, not Trainer's 6N per input token, counts this run (see :meth:`store_flos`)."""
        return 0

    def store_flos(self) -> None:
        """``state.total_flos`` is the ledger's C_total in the ``useful`` convention (real tokens,
        causal attention: the paper's accounting and what the budget is charged in), summed over
        processes and all three components, so the trainer's end-of-training summary
        (``train_output.metrics["total_flos"]``) is right; TRL's GRPO reports 0. The ``executed``
        C_total is in the ledger's summary and the compute card. On a resumed run it counts every
        step of the run, the sessions before the resume included (the ledger's state is restored
        from the checkpoint)."""
        self.state.total_flos = self.ledger.total("useful")
        self.current_flos = 0

    # --- the compute card ----------------------------------------------------------------------
    def card_paths(self) -> tuple[Path, Path]:
        stem = self.ledger.config.card_path or Path(self.args.output_dir) / "compute_card"
        return Path(f"{stem}.json"), Path(f"{stem}.md")

    def compute_card(self) -> dict[str, Any]:
        from paper_repro.ledger.card import compute_card

        return compute_card(self)

    def write_compute_card(self) -> dict[str, Any]:
        """Write the compute card (:func:`compute_card`) as JSON and Markdown; return it."""
        from paper_repro.ledger.card import card_markdown, compute_card

        card = compute_card(self)
        json_path, md_path = self.card_paths()
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(card, indent=2) + "\n")
        md_path.write_text(card_markdown(card))
        return card

    # --- the end of a run ---------------------------------------------------------------------
    def _report_stop(self, state) -> None:
        """Log the one line that says how the run ended (rounds, spent / budget, why, the learning
        rate there), and warn when the useful C_total passed the budget."""
        ledger = self.ledger
        if ledger.stopped_by_budget:
            why = f"the budget stopped it: {ledger.stop_reason}"
        elif state.max_steps and state.global_step >= state.max_steps:
            why = f"max_steps={state.max_steps} reached"
        else:
            why = "the train dataset ran out, or another callback stopped it"
        if self.lr_scheduler is not None:
            lr = self.lr_scheduler.get_last_lr()[0]
            why += (
                f"; learning rate there {lr:.3g} of {self.args.learning_rate:.3g} "
                f"({getattr(self.args.lr_scheduler_type, 'value', self.args.lr_scheduler_type)} schedule over max_steps={state.max_steps}, not over the budget)"
            )
        logger.info(ledger.stop_message(why))
        ledger.warn_if_over_budget()

    # --- helpers -------------------------------------------------------------------------------
    def _sync(self) -> None:
        if torch.cuda.is_available() and self.accelerator.device.type == "cuda":
            torch.cuda.synchronize()

    def _forward_role(self, model: Any) -> tuple[bool, bool]:
        """(is it the reference forward, does it run LoRA adapters) for a no-grad policy forward. TRL
        runs the reference as the separate reference model (full fine-tuning), as the PEFT policy with
        its adapters disabled (a ``peft_config`` given to the trainer), or, for a model passed already
        wrapped as a ``PeftModel``, through the copy of its adapter TRL adds under the name ``"ref"``;
        any other no-grad forward is the old-policy one, with the policy's own adapters."""
        if model is self.ref_model and model is not None:
            return True, False
        layer = self._adapter_layer
        if layer is None:
            return False, False
        if layer.disable_adapters:
            return True, False
        return "ref" in layer.active_adapters, True

    # --- hooks ---------------------------------------------------------------------------------
    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs):
        self._sync()
        start = time.perf_counter()
        lean = None
        self.ledger.phase = "search"
        try:
            if self._lean_reason(images, multimodal_fields, *args, **kwargs) is None:
                from paper_repro.sampler import LeanStats

                lean = LeanStats()
                completion_ids, logprobs = (
                    self._lean_generate(prompt_ids, lean),
                    None,
                )  # None: as TRL's HF path
            else:
                completion_ids, logprobs = super()._generate_single_turn(
                    prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs
                )
        finally:
            self.ledger.phase = None
        self._sync()
        self.ledger.add_seconds("search", time.perf_counter() - start)
        if self.model.training:
            p_lens = [len(p) for p in prompt_ids]
            c_lens = [len(c) for c in completion_ids]
            padded = not (self.use_vllm or self.use_transformers_continuous_batching)
            work = generation_pass_work(p_lens, c_lens, num_generations, self._prefix_cache, padded, lean)
            if lean is not None and self.sampler == "fused":
                # the fused decoder runs merged weights: the adapters' matmuls are executed once, in the
                # merge, not per token; the useful count is the policy's, adapters included, as HF's
                from paper_repro.sampler import merge_flops

                self.ledger.charge_generation(
                    work, adapters_active=True, merged_executed=merge_flops(self.model)
                )
            else:
                # vLLM runs merged weights; HF generate runs the unmerged adapters
                self.ledger.charge_generation(work, adapters_active=not self.use_vllm)
            self._see_prompts(prompt_ids)
            self.ledger.count(
                gen_rows=len(p_lens),
                gen_prompt_tokens=sum(p_lens),
                gen_completion_tokens=sum(c_lens),
                gen_executed_tokens=work["executed"].tokens,
            )
        return completion_ids, logprobs

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *a, **kw):
        compact = input_ids.device.type in ("cuda", "xpu")
        plan = self._bucket_plan(input_ids, attention_mask, logits_to_keep, a, kw)
        fused = None
        if plan is not None and self.update_layout == "fused":
            fused = self._fused_forward(model)
        if self.model.training:
            work = forward_pass_work(attention_mask, logits_to_keep, compact_head=compact)
            if plan is not None:
                completion = work["useful"].head_tokens
                work["executed"] = plan.executed_work(
                    head_all_positions=not compact and fused is None, completion_tokens=completion
                )
                self.ledger.count(update_buckets=len(plan.buckets))
            if torch.is_grad_enabled():  # the loss pass: its backward follows
                executed_train = None if fused is None else self._fused_train_spec()
                self.ledger.charge_training_pass(work, executed_train)
                self.ledger.count(
                    loss_rows=input_ids.size(0),
                    loss_tokens=work["useful"].tokens,
                    loss_executed_tokens=work["executed"].tokens,
                )
            else:  # old-policy or reference log-probs
                reference, adapters = self._forward_role(model)
                self.ledger.charge_forward(work, adapters_active=adapters, part="ref" if reference else "old")
                self.ledger.count(**{f"{'ref' if reference else 'old'}_forward_rows": input_ids.size(0)})
        if torch.is_grad_enabled():
            self.ledger.phase = "loss"
        else:
            self.ledger.phase = "ref" if self._forward_role(model)[0] else "old"
        try:
            return self._policy_logps(model, input_ids, attention_mask, logits_to_keep, plan, fused, a, kw)
        finally:
            self.ledger.phase = None

    def _policy_logps(self, model, input_ids, attention_mask, logits_to_keep, plan, fused, a, kw):
        """TRL's policy forward, or the same over length buckets (``update_layout``)."""
        if plan is None:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *a, **kw
            )
        from paper_repro.sampler.buckets import bucketed_logps

        entropy = bool(kw.get("compute_entropy", False))
        if fused is not None:
            logps, entropies = bucketed_logps(fused, input_ids, attention_mask, logits_to_keep, plan)
            return logps, entropies if entropy else None, None

        def forward(ids: torch.Tensor, labels: torch.Tensor):
            with self.accelerator.autocast():
                out = model(input_ids=ids, labels=labels, fused_lm_head=True)
            return out.log_probs, out.entropy if entropy else None

        logps, entropies = bucketed_logps(forward, input_ids, attention_mask, logits_to_keep, plan)
        return logps, entropies, None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        self._sync()
        start = time.perf_counter()
        hooks = [
            func.register_forward_pre_hook(self._reward_model_hook(func), with_kwargs=True)
            for func in self.reward_funcs
            if isinstance(func, torch.nn.Module)
        ]
        self.ledger.phase = "reward"
        try:
            rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        finally:
            self.ledger.phase = None
            for h in hooks:
                h.remove()
        if self.model.training:
            for func in self.reward_funcs:
                cost_fn: Callable[..., Any] | None = getattr(func, "flop_cost", None)
                if cost_fn is not None:
                    cost = cost_fn(
                        prompts=prompts, completions=completions, completion_ids=completion_ids_list
                    )
                    name = getattr(func, "__name__", func)
                    self.ledger.charge_priced_reward(
                        as_conventions(cost, f"reward function {name!r}'s flop_cost"), len(completions)
                    )
        self._sync()
        self.ledger.add_seconds("reward", time.perf_counter() - start)
        self._last_rewards = rewards
        return rewards

    def _fused_train_spec(self) -> flops.TrainSpec:
        """How the fused update forward (paper_repro.sampler.fused_update) trains: its head keeps its logits
        for backward (no recompute there), and its LoRA linears are autograd Functions that save their
        tensors after their forward, so under non-reentrant checkpointing the replay of a layer whose
        down_proj carries LoRA runs to its end (torch's early stop skips nothing there)."""
        train = replace(self.ledger.train, head_recompute=False)
        lora = train.lora
        if train.recompute == "early_stop" and lora is not None and "down_proj" in lora.target_modules:
            train = replace(train, recompute="full")
        return train

    def priced_models(self) -> dict[str, Any]:
        """The cost model of each model the ledger prices, by name: the policy and each reward model."""
        rewards = {
            f"reward model {name!r}": self.reward_model_costs[func]
            for func, name in zip(self.reward_funcs, self.reward_func_names, strict=True)
            if isinstance(func, torch.nn.Module)
        }
        return {"the policy": self.ledger.policy, **rewards}

    def _reward_model_hook(self, module: torch.nn.Module) -> Callable[..., None]:
        cost = self.reward_model_costs[module]

        def hook(mod, args, kwargs):
            mask = kwargs.get("attention_mask")
            ids = kwargs.get("input_ids", args[0] if args else None)
            if ids is None or not self.model.training:
                return
            if mask is None:
                mask = torch.ones_like(ids)
            useful = real_rows_work(mask)
            executed = flops.padded_batch_work(ids.size(0), ids.size(1), ids.numel())
            self.ledger.charge(
                "reward",
                {c: flops.forward_flops(cost, w) for c, w in (("useful", useful), ("executed", executed))},
            )
            self.ledger.count(reward_tokens=useful.tokens)

        return hook

    def _generate_and_score_completions(self, inputs):
        batch = super()._generate_and_score_completions(inputs)
        if not self.model.training or self._kept == self.num_generations:
            return batch
        return self._downsample(batch)
