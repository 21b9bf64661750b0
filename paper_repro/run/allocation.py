"""The allocation planner: a FLOP budget and a target rho -> a runnable GRPO cell (P, G, K, mu).

A **cell** fixes P prompts per round, G completions generated per prompt, K <= G of them kept for
the update (PODS max-variance down-sampling, in the ledger) and mu update epochs over the kept batch
(TRL ``num_iterations``). Search buys G; learning buys K x mu; a reward model is paid per completion
generated, so it scales with G. Per prompt, in units of one policy forward over a completion::

    C_search ~ G,  C_learning ~ K * mu * (fwd + bwd) + G * [mu > 1] (old log-probs),  C_reward ~ G * N_prm / N_policy

so rho = C_learning / C_total depends on the ratios K/G and mu, not on P or the budget. The planner
prices every allowed (G, K, mu) with :func:`paper_repro.accounting.flops.grpo_step_cost` at the profile's
expected lengths, picks the one whose predicted rho is nearest the target, then picks P (the largest
allowed P that still buys ``min_rounds`` rounds). A target it cannot predict within the grid's
tolerance is refused, with the reason and the nearest feasible rho. The realised rho is what the
ledger measures; tables and figures use that.

The expected lengths choose the cells (they are part of the registered design: P, G, K and mu enter
every run's id, and a run's spec keeps the round price and rho they give). What a chosen cell will
do, its rounds, steps and FLOP split (:class:`Prediction`), is predicted at the profile's
``predicted_lengths`` (measured on its committed runs, :mod:`paper_repro.run.calibration`), under
the budget stop the runs use.

Among the cells that predict the target within the tolerance, the planner prefers the plainest:
fewer epochs, then K = G (no discarded rollouts), then the nearest predicted rho (to 0.01), then the
group size nearest the grid's ``preferred_G`` (TRL's default G = 8; K = G, mu = 1 gives the same rho
for every G, and a group of 2 is a poor baseline for GRPO's advantage). So TRL's own default
(K = G = 8, mu = 1) is the grid's cell wherever its rho is within tolerance of a target.

:func:`plan_setting` is the one answer to which cells run: ``paper-repro plan`` and ``cells``, the
study's specs (:func:`paper_repro.run.spec.setting_specs`), the design simulator and the dry run all
read it. Under the ``ceiling`` budget stop it also refuses a cell whose costliest round (the longest
training prompt, every completion at the maximum length: :func:`round_ceiling`, priced by the one
function :func:`paper_repro.accounting.ceiling.round_ceiling_cost`, which the ledger calls too) the budget
cannot surely buy, so a small pilot budget leaves its most update-heavy cells out, with the reason.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from paper_repro import models, rewards
from paper_repro.accounting import flops
from paper_repro.accounting.ceiling import RoundCeiling, round_ceiling_cost
from paper_repro.accounting.flops import GRPOStep, LoRASpec, ModelShape, StepCost, TrainSpec
from paper_repro.config import Grid, Profile, Setting, TrainConfig

MIN_ROUNDS = 5  # P is the largest allowed value that still buys this many rounds
SECOND_SHARE = 0.08  # a second recipe's kept share K/G differs from the first's by this much (or its mu does)
SECOND_SUFFIX = "b"  # a second recipe's cell label: the first's plus this (r50 -> r50b)


class InfeasibleTarget(ValueError):
    """A cell the planner refuses for a setting at a budget, with the reason: a target rho no allowed
    cell predicts (carries the nearest feasible rho), or a cell whose round the budget cannot buy
    (carries the cell's predicted rho). ``label``: the refused cell's (r66, or r66b for a second
    recipe)."""

    def __init__(
        self,
        message: str,
        target: float,
        nearest: float,
        feasible: tuple[float, float],
        label: str | None = None,
    ):
        super().__init__(message)
        self.target, self.nearest, self.feasible = target, nearest, feasible
        self.label = label or cell_label(target)


@dataclass(frozen=True)
class Cell:
    """One planned allocation cell and what the planner predicts for it at its budget."""

    label: str  # r15 ... r85: the target rho in percent
    target_rho: float
    P: int
    G: int
    K: int
    mu: int
    predicted_rho: float
    round_cost: StepCost  # useful FLOPs of one generation round at the expected lengths
    budget_flops: float
    predicted_rounds: int  # generation rounds the budget buys at the expected lengths (steps = rounds x mu)
    prediction: Prediction | None = None  # at the predicted lengths (plan_setting's cells carry one)

    @property
    def predicted_flops(self) -> float:
        return self.predicted_rounds * self.round_cost.C_total

    def as_dict(self) -> dict[str, Any]:
        """The cell as ``paper-repro plan --json`` writes it: its recipe; its predicted rounds, steps,
        rho and FLOP split (at the predicted lengths when it carries a :class:`Prediction`); and the
        design's rounds and rho (at the expected lengths, which chose it)."""
        at = self.prediction
        rounds, step = (at.rounds, at.round_cost) if at else (self.predicted_rounds, self.round_cost)
        cost = step * rounds
        return {
            "cell": self.label,
            "target_rho": self.target_rho,
            "P": self.P,
            "G": self.G,
            "K": self.K,
            "mu": self.mu,
            "predicted_rounds": rounds,
            "predicted_steps": rounds * self.mu,
            "predicted_rho": step.rho,
            "C_search": cost.C_search,
            "C_learning": cost.C_learning,
            "C_reward": cost.C_reward,
            "C_total": cost.C_total,
            "budget_flops": self.budget_flops,
            "lengths": at.source if at else "expected",
            "design_rounds": self.predicted_rounds,
            "design_rho": self.predicted_rho,
        }


@dataclass(frozen=True)
class Prediction:
    """What a cell's runs are predicted to do at the profile's predicted lengths
    (:meth:`paper_repro.config.Profile.lengths_for`): ``rounds`` under the budget stop the runs use
    (:func:`predicted_rounds`), each round priced ``round_cost`` (useful FLOPs); ``source``:
    ``measured`` or ``assumed``."""

    rounds: int
    round_cost: StepCost
    source: str


def cell_label(target_rho: float) -> str:
    return f"r{round(target_rho * 100):02d}"


@dataclass(frozen=True)
class Planner:
    """Prices cells for one policy (and reward model) at fixed expected lengths."""

    policy: ModelShape
    reward_model: ModelShape | None  # the PRM whose forward C_reward pays (None: rule-based, 0)
    prompt_tokens: int
    completion_tokens: int
    grid: Grid
    train: TrainSpec = field(default_factory=lambda: TrainSpec(head_recompute=True))
    beta: float = 0.0
    prefix_cache: bool = False  # vLLM: each prompt prefilled once
    vllm_importance_sampling: bool = False  # vLLM: TRL's correction adds the old-policy forward
    reward_tokens: int | None = None  # the reward model's tokens per completion (default p + c)
    # FLOPs of scoring one completion (prompt tokens, completion tokens), for a reward that pays for a
    # model of its own (paper_repro.rewards.RewardCost.planned); None: the reward model above, or free
    reward_cost: Callable[[int, int], float] | None = None

    def step(self, P: int, G: int, K: int, mu: int) -> GRPOStep:
        if K > G:
            raise ValueError(f"K={K} completions kept cannot exceed G={G} generated")
        return GRPOStep(
            prompts=P,
            generations=G,
            kept=K,
            epochs=mu,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            beta=self.beta,
            prefix_cache=self.prefix_cache,
            vllm_importance_sampling=self.vllm_importance_sampling,
            reward_tokens=self.reward_tokens,
        )

    def round_cost(self, P: int, G: int, K: int, mu: int) -> StepCost:
        """Useful FLOPs of one generation round of cell (P, G, K, mu) at the expected lengths."""
        return flops.grpo_step_cost(
            self.policy, self.step(P, G, K, mu), self.train, self.reward_model, self.reward_cost
        )

    def round_ceiling(self, P: int, G: int, K: int, mu: int) -> RoundCeiling:
        """The costliest round of cell (P, G, K, mu) at this planner's lengths, taken as the worst case
        (the longest prompt, every completion at the maximum): :func:`paper_repro.accounting.ceiling.round_ceiling_cost`."""
        return round_ceiling_cost(
            self.policy, self.step(P, G, K, mu), self.train, self.reward_model, self.reward_cost
        )

    def shapes(self) -> list[tuple[int, int, int, StepCost]]:
        """Every allowed (G, K, mu) with K <= G, priced for one prompt."""
        return list(self._shapes)

    @cached_property
    def _shapes(self) -> tuple[tuple[int, int, int, StepCost], ...]:
        # priced once per planner: a cell, a second recipe and the feasible range each read them all
        return tuple(
            (g, k, mu, self.round_cost(1, g, k, mu))
            for g in self.grid.G
            for k in self.grid.K
            if k <= g
            for mu in self.grid.mu
        )

    def feasible_range(self) -> tuple[float, float]:
        rhos = [cost.rho for *_, cost in self.shapes()]
        return min(rhos), max(rhos)

    def cell(self, target_rho: float, budget_flops: float) -> Cell:
        """The cell for ``target_rho`` at ``budget_flops``; raises :class:`InfeasibleTarget` when no
        allowed cell predicts it within the grid's tolerance, ``ValueError`` when the budget cannot
        buy one round."""
        if not budget_flops > 0:
            raise ValueError(f"budget must be a positive number of FLOPs, got {budget_flops}")
        if not 0 < target_rho < 1:
            raise ValueError(f"target rho must lie in (0, 1), got {target_rho}")
        shapes = self.shapes()
        best = min(abs(cost.rho - target_rho) for *_, cost in shapes)
        if best > self.grid.tolerance:
            lo, hi = self.feasible_range()
            nearest = min((cost.rho for *_, cost in shapes), key=lambda r: abs(r - target_rho))
            why = (
                "a reward model's cost caps how high rho can go"
                if self.reward_model and target_rho > hi
                else ("the allowed G, K and mu do not reach it")
            )
            raise InfeasibleTarget(
                f"target rho {target_rho:.2f} is not realisable: the allowed cells reach rho "
                f"{lo:.3f}-{hi:.3f} ({why}); nearest feasible rho {nearest:.3f}",
                target_rho,
                nearest,
                (lo, hi),
            )
        g, k, mu, _ = self._ranked(target_rho)[0]
        return self._with_prompts(target_rho, g, k, mu, budget_flops)

    def _ranked(self, target_rho: float) -> list[tuple[int, int, int, StepCost]]:
        """The shapes that predict ``target_rho`` within the tolerance, plainest first."""
        near = [s for s in self.shapes() if abs(s[3].rho - target_rho) <= self.grid.tolerance]
        return sorted(
            near,
            key=lambda s: (
                s[2],
                s[1] != s[0],
                round(abs(s[3].rho - target_rho), 2),
                abs(s[0] - self.grid.preferred_G),
            ),
        )

    def second_cell(self, target_rho: float, budget_flops: float) -> Cell:
        """A second recipe for ``target_rho``: the plainest shape within the tolerance whose group
        size G differs from the first cell's and whose epochs mu or kept share K/G differ too (by at
        least :data:`SECOND_SHARE`), so that the same target rho is reached by a different (G, K, mu);
        labelled as the first plus ``b``. Raises :class:`InfeasibleTarget` when there is none."""
        label = cell_label(target_rho) + SECOND_SUFFIX
        try:
            first = self.cell(target_rho, budget_flops)
        except InfeasibleTarget as err:  # no first recipe: no second either
            raise InfeasibleTarget(str(err), target_rho, err.nearest, err.feasible, label) from err
        other = [s for s in self._ranked(target_rho) if _another_recipe(s, first)]
        if not other:
            raise InfeasibleTarget(
                f"target rho {target_rho:.2f} has no second recipe within tolerance {self.grid.tolerance} "
                f"(another G with another mu or a K/G at least {SECOND_SHARE} apart)",
                target_rho,
                first.predicted_rho,
                self.feasible_range(),
                label,
            )
        g, k, mu, _ = other[0]
        cell = self._with_prompts(target_rho, g, k, mu, budget_flops)
        return replace(cell, label=cell.label + SECOND_SUFFIX)

    def explicit(self, P: int, G: int, K: int, mu: int, budget_flops: float, label: str = "custom") -> Cell:
        """A cell given directly (e.g. TRL's defaults K = G, mu = 1), priced like the planned ones."""
        cost = self.round_cost(P, G, K, mu)
        rounds = self._rounds(cost, budget_flops, label)
        return Cell(label, float("nan"), P, G, K, mu, cost.rho, cost, budget_flops, rounds)

    def _with_prompts(self, target: float, g: int, k: int, mu: int, budget: float) -> Cell:
        label = cell_label(target)
        options = sorted(self.grid.P, reverse=True)
        for p in options:
            cost = self.round_cost(p, g, k, mu)
            if budget // cost.C_total >= MIN_ROUNDS or p == options[-1]:
                rounds = self._rounds(cost, budget, label)
                return Cell(label, target, p, g, k, mu, cost.rho, cost, budget, rounds)
        raise AssertionError("unreachable")

    def _rounds(self, cost: StepCost, budget: float, label: str) -> int:
        rounds = math.floor(budget / cost.C_total)
        if rounds < 1:
            raise ValueError(
                f"budget {budget:.3g} FLOPs buys 0 rounds of cell {label} for policy {self.policy.name}; "
                f"one round needs {cost.C_total:.3g}"
            )
        return rounds


def _another_recipe(shape: tuple[int, int, int, StepCost], first: Cell) -> bool:
    """Whether ``shape`` (G, K, mu, cost) is another recipe than ``first``: another group size G, and
    another mu or a kept share K/G at least :data:`SECOND_SHARE` apart."""
    g, k, mu, _ = shape
    return g != first.G and (mu != first.mu or abs(k / g - first.K / first.G) >= SECOND_SHARE)


@dataclass(frozen=True)
class PlannedSetting:
    """The grid of one setting: the cells it can run and the targets it cannot."""

    setting: Setting
    cells: list[Cell]
    infeasible: list[InfeasibleTarget]  # the refused cells, each with its reason
    feasible: tuple[float, float]

    def as_dict(self) -> dict[str, Any]:
        """The setting's grid as ``paper-repro plan --json`` writes it: its cells (:meth:`Cell.as_dict`)
        and its refused cells, each with its label, target, nearest feasible rho and reason."""
        s = self.setting
        return {
            "setting": s.name,
            "policy": s.policy,
            "reward_system": s.reward_system,
            "feasible_rho": list(self.feasible),
            "cells": [c.as_dict() for c in self.cells],
            "infeasible": [
                {"cell": e.label, "target_rho": e.target, "nearest_rho": e.nearest, "reason": str(e)}
                for e in self.infeasible
            ],
        }


def planner(
    policy: str,
    reward_model: str | None,
    train: TrainConfig,
    prompt_tokens: int,
    completion_tokens: int,
    grid: Grid | None = None,
    reward_tokens: int | None = None,
    reward_cost: Callable[[int, int], float] | None = None,
) -> Planner:
    """The planner of a policy (and the reward model PRM-based rewards pay for) under a profile's
    training settings, at the given lengths. The one place a :class:`Planner` is built from names:
    the grid's (:func:`planner_for`) and a run's worst round (:func:`round_ceiling_flops`)."""
    lora = LoRASpec(rank=train.lora_rank, target_modules=(train.lora_targets,))
    return Planner(
        policy=models.shape(policy),
        reward_model=models.shape(reward_model) if reward_model else None,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        grid=grid or Grid(),
        train=TrainSpec(lora=lora, head_recompute=True),
        beta=train.beta,
        prefix_cache=train.generation == "vllm",  # vLLM prefills each prompt once; the ledger prices it so
        vllm_importance_sampling=train.generation == "vllm",
        reward_tokens=reward_tokens,
        reward_cost=reward_cost,
    )


def round_ceiling_flops(
    policy: str,
    prm: str | None,
    train: TrainConfig,
    P: int,
    G: int,
    K: int,
    mu: int,
    reward_system: str,
    task: str,
    *,
    prompt_tokens: int,
    prm_prompt_tokens: int | None,
) -> float:
    """Useful FLOPs of the costliest round of cell (P, G, K, mu) of ``policy`` under ``reward_system``:
    a prompt of ``prompt_tokens`` (the longest, as the policy reads it) and every completion at
    ``train.max_completion_length``. A PRM-based reward's PRM reads the prompt in its own format
    (``prm_prompt_tokens``) and the completion's steps, a separator after each: with the arith task's
    character tokens a step and its separator take no more tokens than the step and its newline, so
    at most one more than the completion; with a BPE tokenizer, re-tokenised steps may take more, so
    twice it. A reward that prices its own model is priced at the policy's token counts."""
    completion = train.max_completion_length
    reward_model, reward_tokens = None, None
    system = rewards.get(reward_system)
    if system.prm_based:
        reward_model = prm
        reward_tokens = prm_prompt_tokens + (completion + 1 if task == "arith" else 2 * completion)
    own = system.own_cost  # a reward that prices its own model, at the policy's token counts
    worst = planner(
        policy,
        reward_model,
        train,
        prompt_tokens,
        completion,
        reward_tokens=reward_tokens,
        reward_cost=own.planned if own is not None else None,
    )
    return worst.round_ceiling(P, G, K, mu).C_total


def round_ceiling(
    model: str,
    prm: str | None,
    train_data: str,
    train: TrainConfig,
    P: int,
    G: int,
    K: int,
    mu: int,
    reward_system: str,
    task: str,
) -> float:
    """The most one generation round of cell (P, G, K, mu) can cost (useful FLOPs), for a run of
    ``model`` (and the PRM ``prm`` that a PRM-based reward pays for) on ``train_data`` under
    ``train``: the longest training prompt, as the policy reads it and as the PRM does, and every
    completion at ``max_completion_length`` (:func:`round_ceiling_flops`). The price the grid keeps a
    cell by (:func:`plan_setting`), the preflight check refuses a budget by and the ledger's budget
    stop is given (``LedgerConfig.round_ceiling_flops``). Needs tokenizers and data, no weights;
    computed once per (model, PRM, data, training recipe, cell, reward) in a process."""
    prm = prm if rewards.get(reward_system).prm_based else None  # the PRM is priced when the reward pays it
    return _round_ceiling(model, prm, train_data, train, P, G, K, mu, reward_system, task)


@functools.lru_cache(maxsize=4096)
def _round_ceiling(model, prm, train_data, train, P, G, K, mu, reward_system, task) -> float:
    longest = _longest_prompt(model, train_data, train.chat_template, "policy")
    prm_prompt = _longest_prompt(prm, train_data, False, "prm") if prm is not None else None
    return round_ceiling_flops(
        model,
        prm,
        train,
        P,
        G,
        K,
        mu,
        reward_system,
        task,
        prompt_tokens=longest,
        prm_prompt_tokens=prm_prompt,
    )


@functools.lru_cache(maxsize=32)
def _longest_prompt(model: str, data: str, chat: bool, reader: str) -> int:
    """Tokens of the longest training prompt as ``reader`` sees it: the policy (plain or through its
    chat template) or the PRM (its own input form, with no steps yet)."""
    from transformers import AutoTokenizer

    from paper_repro.rewards.prm_scorer import input_format
    from paper_repro.tasks import load_examples
    from paper_repro.tasks.hub import format_prompt

    local = models.checkpoint(model)
    tokenizer = AutoTokenizer.from_pretrained(local, trust_remote_code=models.trust_remote_code(model))
    examples = load_examples(data)
    if reader == "prm":
        fmt = input_format(local, tokenizer)
        texts = [fmt(e.prompt, []) for e in examples]
    else:
        texts = [format_prompt(tokenizer, e) if chat else e.prompt for e in examples]
    return max(len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"])


def cell_round_ceiling(profile: Profile, setting: Setting, cell: Cell) -> float:
    """The most one generation round of ``setting``'s ``cell`` can cost under ``profile`` (useful
    FLOPs; :func:`round_ceiling`), as its runs' specs price it."""
    return round_ceiling(
        profile.policies[setting.policy],
        profile.prm,
        profile.data["train"],
        profile.train,
        cell.P,
        cell.G,
        cell.K,
        cell.mu,
        setting.reward_system,
        profile.task,
    )


def ceiling_problem(profile: Profile, setting: Setting, cell: Cell) -> str | None:
    """Why ``cell`` leaves ``setting``'s grid at its budget, or None: under the ``ceiling`` budget
    stop a run must surely buy one round, so a budget below the cell's costliest round
    (:func:`round_ceiling`) refuses the cell (a small pilot budget cannot buy the costliest rounds of
    the most update-heavy cells). The other budget stops price as they go, and refuse no cell here."""
    train = profile.train
    if train.budget_stop != "ceiling":
        return None
    price = cell_round_ceiling(profile, setting, cell)
    if price <= cell.budget_flops:
        return None
    return (
        f"cell {cell.label} (P={cell.P}, G={cell.G}, K={cell.K}, mu={cell.mu}) is refused at budget "
        f"{cell.budget_flops:.3g} FLOPs: its costliest round (the longest training prompt, every "
        f"completion at max_completion_length={train.max_completion_length}) costs up to {price:.3g} "
        "FLOPs, and the ceiling budget stop runs a cell only where the budget surely buys one round; "
        "raise the budget to run it"
    )


def planner_for(profile: Profile, setting: Setting) -> Planner:
    """The planner of ``setting``'s grid, at the profile's expected lengths."""
    system = rewards.get(setting.reward_system)
    own = system.own_cost
    return planner(
        profile.policies[setting.policy],
        profile.prm if system.prm_based else None,
        profile.train,
        profile.expected_lengths["prompt"],
        profile.expected_lengths["completion"],
        profile.grid,
        reward_cost=own.planned if own is not None else None,
    )


def predictor_for(profile: Profile, setting: Setting) -> tuple[Planner, str]:
    """The planner that prices ``setting``'s rounds at the profile's predicted lengths (not the
    expected lengths its cells are chosen at, :func:`planner_for`), with where the lengths come from
    (``measured`` or ``assumed``: :meth:`paper_repro.config.Profile.lengths_for`)."""
    lengths, source = profile.lengths_for(setting)
    chooser = planner_for(profile, setting)
    return replace(
        chooser,
        prompt_tokens=lengths["prompt"],
        completion_tokens=lengths["completion"],
        reward_tokens=lengths["reward"] if chooser.reward_model is not None else None,
    ), source


def predicted_rounds(round_flops: float, budget_flops: float, ceiling_flops: float | None) -> int:
    """Generation rounds a budget buys at ``round_flops`` a round. Under the ``ceiling`` budget stop
    (``ceiling_flops``: the costliest round's price) a round starts only while the budget left buys its
    costliest form, so the last round is bought at ``budget - ceiling``; otherwise (a stop that prices
    the next round or step as it goes) the budget over the round's price."""
    if ceiling_flops is None:
        return math.floor(budget_flops / round_flops)
    return max(0, math.floor((budget_flops - ceiling_flops) / round_flops) + 1)


def predict(profile: Profile, setting: Setting, cell: Cell, predictor: tuple[Planner, str]) -> Prediction:
    """``cell``'s :class:`Prediction` at its budget, priced by ``predictor`` (:func:`predictor_for`)."""
    planner, source = predictor
    cost = planner.round_cost(cell.P, cell.G, cell.K, cell.mu)
    ceiling = cell_round_ceiling(profile, setting, cell) if profile.train.budget_stop == "ceiling" else None
    return Prediction(predicted_rounds(cost.C_total, cell.budget_flops, ceiling), cost, source)


def plan_setting(profile: Profile, setting: Setting, budget_flops: float | None = None) -> PlannedSetting:
    """The grid of ``setting`` at ``budget_flops`` (default: the profile's full budget): the one
    answer to which cells run, for ``paper-repro plan``, the study's specs
    (:func:`paper_repro.run.spec.setting_specs`), the design simulator and the dry run. Every grid
    target, then the second recipes the grid asks of the setting (``grid.recipes``;
    :meth:`Planner.second_cell`); a target the planner cannot realise, a cell whose round the budget
    cannot buy, and (under the ``ceiling`` budget stop) a cell whose costliest round it cannot surely
    buy (:func:`ceiling_problem`) are refused, each with its reason (``infeasible``). Each cell
    carries its :class:`Prediction` at the profile's predicted lengths."""
    budget = profile.budget_flops if budget_flops is None else budget_flops
    planner, predictor = planner_for(profile, setting), predictor_for(profile, setting)
    cells, infeasible = [], []
    second = profile.grid.second_targets(setting.policy, setting.reward_system)
    jobs = [(t, planner.cell, "") for t in profile.grid.targets]
    jobs += [(t, planner.second_cell, SECOND_SUFFIX) for t in second]
    for target, plan, suffix in jobs:
        try:
            cell = plan(target, budget)
        except InfeasibleTarget as err:
            infeasible.append(err)
            continue
        except ValueError as err:  # the budget buys no round of this cell, even at the smallest P
            label = cell_label(target) + suffix
            infeasible.append(
                InfeasibleTarget(str(err), target, float("nan"), planner.feasible_range(), label=label)
            )
            continue
        problem = ceiling_problem(profile, setting, cell)
        if problem is None:
            cells.append(replace(cell, prediction=predict(profile, setting, cell, predictor)))
        else:
            infeasible.append(
                InfeasibleTarget(problem, target, cell.predicted_rho, planner.feasible_range(), cell.label)
            )
    return PlannedSetting(setting, cells, infeasible, planner.feasible_range())


def plan_stage(profile: Profile, stage: str, budget_flops: float | None = None) -> list[PlannedSetting]:
    return [plan_setting(profile, s, budget_flops) for s in profile.settings(stage)]
