"""The model hooks of :class:`~paper_repro.ledger.callback.FlopLedgerCallback`: the core's hooks
(:class:`~paper_repro.ledger.trl_core_watch.CoreWatcher`, one copy for both callbacks) charged to the full
ledger (:class:`~paper_repro.ledger.core.FlopLedger`).

:class:`PassWatcher`, a mixin of the callback, implements the core's charge points with what the full
ledger adds to the core's:

* C_search: the rollout's seconds, its executed tokens, and the ``(prompt, completion)`` tokens of the
  round's rows (:attr:`_round_rows`, which the callback's budget stop reads and resets through
  :attr:`_new_round`);
* C_learning: the loss pass priced by the ledger's training spec, the old-policy and reference forwards
  (a separate reference model at the policy's price: it is the policy's architecture), with executed
  token counts;
* C_reward: a reward model priced by :func:`~paper_repro.ledger.cost_models.reward_model_cost` (analytic,
  else measured on its module, with its calls not charged while it is measured), and its seconds;
* the CUDA sync that brackets timed work (:meth:`_sync`).

The host (the callback) sets :attr:`ledger`, :attr:`_policy`, :attr:`_device` and :attr:`_lora_layer`
in ``on_train_begin`` and sets :attr:`_busy` while it prices the policy. Like the callback, it touches
no private TRL name (``paper_repro.ledger.callback.PRIVATE_TRL_NAMES``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from paper_repro.accounting import flops
from paper_repro.accounting.flops import Work
from paper_repro.ledger.core import FlopLedger
from paper_repro.ledger.cost_models import check_priced, reward_model_cost
from paper_repro.ledger.trl_core_read import Call
from paper_repro.ledger.trl_core_watch import CoreWatcher


class PassWatcher(CoreWatcher):
    """The core's hooks charged to the full ledger (module docstring)."""

    ledger: FlopLedger | None

    def _init_watch(self, watch_models: bool = True) -> None:
        super()._init_watch(watch_models)
        self._reward_costs: dict[int, Any] = {}
        self._round_rows: list[tuple[int, int]] = []  # (prompt, completion) tokens of this round's rows
        self._new_round = True
        self._device: torch.device | None = None

    # --- the charge points ------------------------------------------------------------------------
    def _charge_rollouts(self, p_lens: list[int], c_lens: list[int], work: dict[str, Work], seconds: float):
        self.ledger.add_seconds("search", seconds)
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

    def _charge_loss(self, call: Call, work: dict[str, Work]) -> None:
        # TRL's fused head recomputes its logits in backward; a head run as a module (TRL before 1.14's
        # fused head) keeps them: the executed count has no recompute, useful is the planner's
        ledger = self.ledger
        ledger.charge_training_pass(work, None if call.fused else replace(ledger.train, head_recompute=False))
        ledger.count(
            loss_rows=call.rows,
            loss_tokens=work["useful"].tokens,
            loss_executed_tokens=work["executed"].tokens,
        )

    def _charge_no_grad(self, call: Call, work: dict[str, Work], part: str, adapters: bool) -> None:
        self.ledger.charge_forward(work, adapters_active=adapters, part=part)
        self.ledger.count(**{f"{part}_forward_rows": call.rows})

    def _charge_ref(self, module: Any, call: Call, work: dict[str, Work]) -> None:
        self.ledger.charge_forward(work, adapters_active=False, part="ref")
        self.ledger.count(ref_forward_rows=call.rows)

    def _charge_reward(self, module: Any, useful: Work, executed: Work, seconds: float) -> None:
        cost = self._reward_cost(module)
        work = {"useful": useful, "executed": executed}
        self.ledger.charge("reward", {c: flops.forward_flops(cost, w) for c, w in work.items()})
        self.ledger.count(reward_tokens=useful.tokens)
        self.ledger.add_seconds("reward", seconds)

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

    # --- timing -----------------------------------------------------------------------------------
    def _clock(self) -> float:
        self._sync()
        return super()._clock()

    def _sync(self) -> None:
        device = self._device
        if device is not None and getattr(device, "type", None) == "cuda" and torch.cuda.is_available():
            torch.cuda.synchronize()
