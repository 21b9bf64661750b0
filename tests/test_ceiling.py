"""The one price of a round's ceiling (:func:`paper_repro.accounting.ceiling.round_ceiling_cost`), on hand-worked
cases: a toy cost model of 1 FLOP per token through the body forward and 3 per token trained, so every
part of the round can be counted by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from paper_repro.accounting.ceiling import round_ceiling_cost
from paper_repro.accounting.flops import GRPOStep, TrainSpec, Work


class PerToken:
    """``forward`` FLOPs per token through the body forward, ``train`` per token trained (attention
    pairs and head positions cost nothing)."""

    def __init__(self, forward: float, train: float = 0.0) -> None:
        self.forward, self.train = forward, train

    def forward_flops(self, work: Work, lora=None) -> float:
        return self.forward * work.tokens

    def train_flops(self, work: Work, train: TrainSpec) -> float:
        return self.train * work.tokens


# P=2 prompts x G=4 completions, K=2 kept, mu=2 epochs; a 3-token prompt, 5-token completions
STEP = GRPOStep(prompts=2, generations=4, kept=2, epochs=2, prompt_tokens=3, completion_tokens=5)
POLICY = PerToken(forward=1.0, train=3.0)


def test_a_rule_based_round_is_search_and_learning_and_its_loss_passes():
    ceiling = round_ceiling_cost(POLICY, STEP)
    # search: 8 completions, each a 3-token prefill and 4 tokens fed back: 8 x 7 = 56
    assert ceiling.cost.C_search == 56
    # learning: mu x P x K = 8 passes trained over 8 tokens (8 x 24 = 192), and (mu > 1) the old
    # policy's log-probs, one forward over each of the 8 completions' 8 tokens (64)
    assert ceiling.cost.C_learning == 192 + 64
    assert ceiling.C_loss == 192  # the loss passes alone
    assert ceiling.cost.C_reward == 0 and ceiling.C_total == 56 + 256


def test_the_reward_is_a_reward_models_forward_a_rewards_own_price_or_the_callers():
    prm = PerToken(forward=1.0)
    by_model = round_ceiling_cost(POLICY, replace(STEP, reward_tokens=10), reward_model=prm)
    assert by_model.cost.C_reward == 8 * 10  # each completion read once, at the PRM's 10 tokens
    own = round_ceiling_cost(POLICY, STEP, reward_cost=lambda p, c: 2.0 * (p + c))
    assert own.cost.C_reward == 8 * 2 * (3 + 5)  # a reward's own price per completion
    given = round_ceiling_cost(POLICY, STEP, reward_model=prm, reward_flops=20.0)
    assert given.cost.C_reward == 8 * 8 + 20  # the caller's own price of a worst-case batch is added
    assert given.C_total == 56 + 256 + 84
    assert given.cost.rho == pytest.approx(256 / (56 + 256 + 84))


def test_one_epoch_skips_the_old_policys_forward_and_a_reference_model_adds_one():
    one = replace(STEP, epochs=1)
    assert round_ceiling_cost(POLICY, one).cost.C_learning == 4 * 24  # P x K = 4 passes, no old forward
    kl = replace(STEP, epochs=1, beta=0.1)
    assert round_ceiling_cost(POLICY, kl).cost.C_learning == 4 * 24 + 64  # the reference forward over all 8
