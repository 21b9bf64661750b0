"""The FLOP ledger's pull-request-sized core: :class:`FlopLedgerCoreCallback`, a ``TrainerCallback`` for
TRL's ``GRPOTrainer`` and ``RLOOTrainer`` that counts C_search / C_learning / C_reward per optimizer step,
``useful`` (real tokens, causal attention) and ``executed`` (padding, rows decoding past EOS, full
attention squares, TRL's fused head on every position off Triton), sets ``state.total_flos``, adds its
metrics to the logs the ``report_to`` backends read, stops at a FLOP budget and keeps its state in
transformers' ``ExportableState`` (the checkpoint's ``trainer_state.json``).

::

    ledger = FlopLedgerCoreCallback(budget_flops=3e15)
    trainer = GRPOTrainer(..., callbacks=[ledger])  # or RLOOTrainer; or ledger.attach(trainer)
    trainer.train()
    ledger.ledger.summary()

The core is four modules: this one (the ledger and the callback), :mod:`~paper_repro.ledger.trl_core_watch`
(the hooks), :mod:`~paper_repro.ledger.trl_core_read` (what is read of a model, a trainer and a call) and
the FLOP model they price with, :mod:`paper_repro.accounting.flops` (with
:mod:`~paper_repro.accounting.flop_work`). They import stdlib, torch and transformers and nothing else of
the project; nothing at import installs a hook or a handler. The hooks sit on the trainer's own models
(the policy, a separate reference model, reward models) from ``on_train_begin`` to ``on_train_end``.

Budget: at the end of each generation round the run stops when the next round, priced at the larger of
``round_ceiling_flops`` and the dearest round so far, could pass ``budget_flops``; a resume whose next
round could is refused at train begin (:class:`BudgetSpentError`: Trainer runs a first step whatever a
callback says). Under ``torch.distributed`` each step's counts are summed over the processes.

The full :class:`~paper_repro.ledger.callback.FlopLedgerCallback` builds on the same hooks and price with
measured families (any model transformers runs), a per-step stop, the round ceiling priced from
``max_prompt_tokens``, reward functions' own ``flop_cost``, seconds, MFU and the compute card.
"""

from __future__ import annotations

import math
import uuid
import warnings
from dataclasses import replace
from typing import Any

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from paper_repro.accounting.flops import CostModel, TrainSpec, Work, forward_flops, train_flops
from paper_repro.ledger.trl_core_read import (
    Call,
    analytic_shape,
    base_model,
    checkpointing_args,
    lora_spec_of,
    train_spec_of,
    trainer_models,
)
from paper_repro.ledger.trl_core_watch import CoreWatcher

CONVENTIONS = ("useful", "executed")
COMPONENTS = ("search", "learning", "reward")
PARTS = ("loss", "old", "ref")  # C_learning's parts
STATE_KEY = "flop_ledger_core"
STATE_VERSION = 1


class BudgetSpentError(RuntimeError):
    """A resume whose next round (the full ledger: its next step) could pass the budget, refused at train
    begin: Trainer runs a first step whatever a callback says."""


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

    def sum_open_step_over_processes(self) -> None:
        """Sum the open step's counts over the processes of ``torch.distributed`` (each process sees its
        own share of the batch), in place; nothing in a single process."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
            return
        slots = [(self._flops[c], k) for c in CONVENTIONS for k in COMPONENTS]
        slots += [(self._parts[c], k) for c in CONVENTIONS for k in PARTS]
        names = sorted(self._tokens)  # every process counts the same kinds of tokens
        values = [table[k] for table, k in slots] + [self._tokens[n] for n in names]
        on_gpu = dist.get_backend() == "nccl"
        device = torch.device("cuda", torch.cuda.current_device()) if on_gpu else torch.device("cpu")
        summed = torch.tensor(values, dtype=torch.float64, device=device)
        dist.all_reduce(summed)
        total = summed.tolist()
        for (table, k), v in zip(slots, total[: len(slots)], strict=True):
            table[k] = v
        self._tokens = dict(zip(names, total[len(slots) :], strict=True))

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


def log_metrics(metrics: dict[str, float], logs: dict[str, Any], state: Any) -> None:
    """Add ``metrics`` to ``logs`` (what the ``report_to`` backends after the callback read) and to the
    entry Trainer appended to ``state.log_history`` for this step."""
    logs.update(metrics)
    if state.log_history and state.log_history[-1].get("step") == state.global_step:
        state.log_history[-1].update(metrics)


class FlopLedgerCoreCallback(CoreWatcher, TrainerCallback, ExportableState):
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
        self._init_watch()
        self.run_id = uuid.uuid4().hex
        self._trainer_state: Any = None
        self._costs: dict[int, CostModel] = {}

    # --- pricing: the full ledger measures what this one refuses ----------------------------------
    def price_model(self, model: Any) -> CostModel:
        """The cost model a (plain) ``model``'s forwards are priced with; a ValueError for a model
        outside the FLOP model's families."""
        shape = analytic_shape(model)
        if shape is None:
            raise ValueError(
                "the core FLOP ledger prices qwen2, llama, mistral and qwen3 decoders (transformers' own "
                f"classes); {type(model).__name__} is not one: use paper_repro.ledger.FlopLedgerCallback, "
                "which measures other models"
            )
        return shape

    def price_policy(self, model: Any, args: Any) -> tuple[CostModel, TrainSpec]:
        """The policy's cost model and how it trains (LoRA read from the model, the run's checkpointing)."""
        shape = self.price_model(base_model(model))
        on, kwargs = checkpointing_args(args)
        return shape, train_spec_of(lora_spec_of(model, shape.num_layers), on, kwargs)

    def _cost_of(self, module: Any) -> CostModel:
        cost = self._costs.get(id(module))
        if cost is None:
            cost = self._costs[id(module)] = self.price_model(module)
        return cost

    # --- the charge points ------------------------------------------------------------------------
    def _charge_rollouts(self, p_lens, c_lens, work, seconds):
        lora = self._train.lora if self._adapters_active() else None
        self.ledger.charge("search", {c: forward_flops(self._cost, w, lora) for c, w in work.items()})
        self.ledger.count(
            gen_rows=len(p_lens), gen_prompt_tokens=sum(p_lens), gen_completion_tokens=sum(c_lens)
        )

    def _charge_loss(self, call: Call, work: dict[str, Work]) -> None:
        # a head run as a module (TRL < 1.14) keeps its logits: no recompute in what executes
        executed = self._train if call.fused else replace(self._train, head_recompute=False)
        trains = {"useful": self._train, "executed": executed}
        self.ledger.charge(
            "learning", {c: train_flops(self._cost, work[c], trains[c]) for c in CONVENTIONS}, "loss"
        )
        self.ledger.count(loss_rows=call.rows, loss_tokens=work["useful"].tokens)

    def _charge_no_grad(self, call: Call, work: dict[str, Work], part: str, adapters: bool) -> None:
        lora = self._train.lora if adapters else None
        self.ledger.charge(
            "learning", {c: forward_flops(self._cost, work[c], lora) for c in CONVENTIONS}, part
        )
        self.ledger.count(**{f"{part}_forward_rows": call.rows})

    def _charge_ref(self, module: Any, call: Call, work: dict[str, Work]) -> None:
        cost = self._cost_of(module)
        self.ledger.charge("learning", {c: forward_flops(cost, work[c]) for c in CONVENTIONS}, "ref")
        self.ledger.count(ref_forward_rows=call.rows)

    def _charge_reward(self, module: Any, useful: Work, executed: Work, seconds: float) -> None:
        cost = self._cost_of(module)
        work = {"useful": useful, "executed": executed}
        self.ledger.charge("reward", {c: forward_flops(cost, w) for c, w in work.items()})
        self.ledger.count(reward_tokens=useful.tokens)

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
        self._cost, self._train = self.price_policy(model, args)
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
        trainer = self.watched_trainer()
        if trainer is not None and self.watch_models:  # a model outside the families: refused before a step
            ref, rewards = trainer_models(trainer)
            for other in ([ref] if ref is not None and ref is not base_model(model) else []) + rewards:
                self._cost_of(other)

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
        self.ledger.sum_open_step_over_processes()
        self.ledger.end_step(state.global_step, round_complete)
        state.total_flos = self._flos_at_begin + self.ledger.total("useful")
        if round_complete and self.ledger.stops_before_next_round():
            control.should_training_stop = True
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        """Add the running totals to the logs (read by the ``report_to`` backends, which this callback
        runs ahead of) and to the entry Trainer appended to ``state.log_history``."""
        if self.ledger is not None and logs is not None and self.ledger.steps:
            log_metrics(self.ledger.metrics(), logs, state)

    def on_train_end(self, args, state, control, **kwargs):
        self._remove_hooks()
