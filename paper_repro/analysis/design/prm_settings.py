"""The PRM-style settings family (``paper-repro design --candidates --family prm-settings``): designs
that add PRM-style *settings*, the only thing that moves the PRM-style regime claim's any-recipe
standard error once its cells are seeded (its variance is mostly the recipe draws of the few
PRM-style settings; :mod:`paper_repro.analysis.claims.regimes`).

What a further PRM-style setting can be in this project, in the order the ladder adds them:

- **the PRM-style rewards on the other policies** (``proxy_prm`` and ``prm`` on S and L; the committed
  ones are on M): runnable as the code stands (the planner caps each policy's rho: 0.644 S, 0.727 M,
  0.806 L), the prm-arm family's settings (:func:`paper_repro.run.design_cost.prm_arm_candidates`);
- **the other PRM aggregation** (:data:`paper_repro.rewards.Aggregate`: step scores to one reward by
  their mean, where training uses the minimum, :func:`paper_repro.rewards.build_reward`'s default) of
  both PRM-style rewards on every policy: the rewards module computes it, but a run spec carries no
  aggregation, so these settings need new code (a spec field or a registered reward per aggregation)
  before they can run. They are priced and planned as their reward (the aggregation charges
  nothing) and borrow its committed noise; their recipe draws are independent of the min setting's.

Not candidates: a fourth policy size (the testbed builds S, M and L only:
:data:`paper_repro.testbed.specs.POLICIES`), and a PRM-style reward on a second task (cpu-tiny trains on
arith alone; its math set is an evaluation target, 300 problems).

Each rung is simulated with the profile's targets and with more window recipes
(:data:`paper_repro.run.design_cost.WINDOW_TARGETS`, a second recipe at every window target), at 2 and
3 seeds a cell; the claims simulated are the regime contrasts (:data:`FAMILY_CLAIMS`), the question
the family answers.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import replace
from typing import get_args

from paper_repro.config import Profile
from paper_repro.run.design_cost import PRM_REWARDS, WINDOW_TARGETS, Candidate

LADDER = (6, 8, 10, 12)  # PRM-style settings in all (the profile's two and those added)
SEEDS = (2, 3)  # seeds per cell at each rung: the recipe draws, not the seeds, set the SE
# the claims the family simulates (id prefix): the regime contrasts at both levels
FAMILY_CLAIMS = ("regime.",)
NEW_CODE = (
    "needs new code: a run spec carries no PRM aggregation (training builds every reward with its "
    "default), so the {how} settings need a spec field or a registered reward per aggregation"
)


def trained_aggregation() -> str:
    """The PRM aggregation every committed run trained with: :func:`paper_repro.rewards.build_reward`'s
    default (the trainer passes none)."""
    from paper_repro import rewards

    return inspect.signature(rewards.build_reward).parameters["aggregation"].default


def other_aggregations() -> tuple[str, ...]:
    """The PRM aggregations the rewards module computes other than the trained one."""
    from paper_repro import rewards

    return tuple(a for a in get_args(rewards.Aggregate) if a != trained_aggregation())


def extra_settings(profile: Profile) -> list[tuple[str, ...]]:
    """The PRM-style settings beyond the profile's, in the ladder's order: its PRM-style rewards on its
    other policies (largest first: the highest rho cap reaches the update-heavy window), then each
    other aggregation on every policy (largest first); (policy, reward[, aggregation])."""
    have = {(s.policy, s.reward_system) for s in profile.all_settings()}
    rewards_run = [r for r in PRM_REWARDS if any(r == reward for _, reward in have)]
    order = list(reversed(list(profile.policies)))
    out: list[tuple[str, ...]] = [(p, r) for p in order for r in rewards_run if (p, r) not in have]
    out += [(p, r, how) for how in other_aggregations() for p in order for r in rewards_run]
    return out


def prm_settings_candidates(profile: Profile, window: Sequence[float] = ()) -> list[Candidate]:
    """The family's candidates (the module's docstring): the profile's design, then per rung of
    :data:`LADDER` that the project's settings reach, with more window recipes (``window``: the
    targets of :data:`WINDOW_TARGETS` inside the claims' windows) at each of :data:`SEEDS`, and the
    top rung with the profile's targets at its seeds."""
    chosen = Candidate.from_profile(profile, "chosen", note="the profile as written")
    base = sum(s.reward_system in PRM_REWARDS for s in profile.all_settings())
    extra = extra_settings(profile)
    at = tuple(t for t in WINDOW_TARGETS if any(abs(t - x) < 1e-9 for x in window))
    out = [chosen]
    rungs = [n for n in LADDER if 0 < n - base <= len(extra)]
    for n in rungs:
        more = tuple(extra[: n - base])
        novel = sorted({m[2] for m in more if len(m) > 2})
        note = NEW_CODE.format(how=" and ".join(novel)) if novel else ""
        wide = replace(chosen, targets=WINDOW_TARGETS, second_at=at, more_settings=more, note=note)
        for seeds in SEEDS:
            out.append(
                replace(wide, seeds=seeds, name=f"{n} PRM-style settings, window recipes, {seeds} seeds")
            )
        if n == rungs[-1]:
            out.append(
                replace(
                    chosen,
                    more_settings=more,
                    note=note,
                    name=f"{n} PRM-style settings, the profile's targets, {chosen.seeds} seeds",
                )
            )
    return out
