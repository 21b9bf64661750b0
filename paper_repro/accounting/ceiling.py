"""The price of a round's ceiling: the most one GRPO generation round can cost, in useful FLOPs.

One function, :func:`round_ceiling_cost`, prices it for everyone who needs it: the planner, which
leaves out of a budget's grid a cell whose costliest round the budget cannot buy
(:func:`paper_repro.run.allocation.plan_setting`), and the ledger's trainer, which refuses such a budget
and stops a run before a round could pass it
(:meth:`paper_repro.ledger.pricing.RoundPricing.price_round_ceiling`). Each caller measures the
worst case it can see (the longest prompt, as its tokenizer reads it; every completion at
``max_completion_length``; the reward's tokens or its own price of a worst-case batch) and hands it
over as a :class:`~paper_repro.accounting.flops.GRPOStep`; the price is :func:`paper_repro.accounting.flops.grpo_step_cost`
of that step, with the reward and the loss passes split out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from paper_repro.accounting import flops
from paper_repro.accounting.flops import CostModel, GRPOStep, ModelShape, StepCost, TrainSpec


@dataclass(frozen=True)
class RoundCeiling:
    """The costliest round of one cell: its cost by component, and the part its loss passes take."""

    cost: StepCost  # C_search, C_learning and C_reward of the round (useful FLOPs)
    C_loss: float  # the loss passes alone (mu epochs over the P x K kept): what the optimizer steps spread

    @property
    def C_total(self) -> float:
        return self.cost.C_total


def round_ceiling_cost(
    policy: ModelShape | CostModel,
    step: GRPOStep,
    train: TrainSpec | None = None,
    reward_model: ModelShape | CostModel | None = None,
    reward_cost: Callable[[int, int], float] | None = None,
    reward_flops: float = 0.0,
) -> RoundCeiling:
    """The most one generation round of ``step`` can cost, in useful FLOPs: ``step`` carries the
    worst case its caller measured (``prompt_tokens`` the longest prompt, ``completion_tokens`` the
    maximum completion length, ``reward_tokens`` the reward model's longest reading of one). The
    reward is a reward model's forward per completion (``reward_model``), a reward's own price per
    completion (``reward_cost``, FLOPs of (prompt tokens, completion tokens)), and ``reward_flops``:
    what the caller priced itself on a worst-case batch (the ledger's reward functions and reward
    modules), added to C_reward."""
    train = train or TrainSpec()
    cost = flops.grpo_step_cost(policy, step, train, reward_model, reward_cost)
    cost = StepCost(cost.C_search, cost.C_learning, cost.C_reward + float(reward_flops))
    seq = flops.sequence_work(step.prompt_tokens + step.completion_tokens, head_tokens=step.completion_tokens)
    loss = step.epochs * step.prompts * step.kept * flops.train_flops(policy, seq, train)
    return RoundCeiling(cost, loss)
