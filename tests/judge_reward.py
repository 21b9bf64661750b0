"""A reward outside the package that pays for a model of its own: what a user's judge-model reward
looks like (one module, named in a profile by its dotted path). Any local checkpoint stands in for
the judge here: the tiny policy S."""

from __future__ import annotations

from paper_repro.rewards import ModelForward, reward_system

JUDGE = "data/models/policy-S"


@reward_system(reads="nothing", cost=ModelForward(JUDGE))
def judged(completions, rows, ctx):
    """1 for a completion the judge would call short (a stand-in for a judge model's verdict)."""
    return [float(len(c) < 40) for c in completions]
