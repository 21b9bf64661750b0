"""A profile (:class:`Profile`): what a study runs, with its checks across sections, its settings
(:meth:`Profile.settings`) and its quick mode (:meth:`Profile.quick_variant`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paper_repro import rewards
from paper_repro.config.sections import (
    STAGES,
    Curves,
    Estimate,
    Grid,
    Margins,
    PredictedLengths,
    Resources,
    Setting,
    StageDesign,
    TrainConfig,
)

PROFILE_DIR = Path(__file__).resolve().parent.parent / "profiles"
# Quick mode (`paper-repro run --quick`): a smoke run of the whole study, not a result. Its outputs
# go to .../quick/ folders that are not committed.
QUICK_BUDGET_SCALE = 0.25
QUICK_EVAL_LIMIT = 100  # problems per evaluation set in quick mode (at most)
# Quick mode's cells: a search-heavy, a middle and an update-heavy one; r66 realises TRL's default
# allocation (K = G = 8, mu = 1) for rule-based rewards, so the RACE comparison needs no extra run there.
QUICK_CELLS: tuple[str, ...] = ("r15", "r50", "r66")


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


@dataclass(frozen=True)
class Profile:
    name: str
    task: str
    policies: dict[str, str]
    stages: dict[str, StageDesign]
    prm: str
    judge: str
    data: dict[str, str]
    eval: dict[str, Any]
    expected_lengths: dict[str, int]
    train: TrainConfig
    budget_flops: float
    pilot_fractions: tuple[float, ...]  # RACE pilot budgets as fractions of the full one; the first picks
    grid: Grid
    seeds: int = 3  # full-grid seeds per cell: 0 .. seeds - 1
    pilot_seeds: tuple[int, ...] = (100,)  # RACE pilots' seeds, none of the grid's
    fresh_seeds: tuple[int, ...] = (200, 201, 202)  # RACE's pick and the default, on neither's seeds
    margins: Margins = field(default_factory=Margins)
    offline: bool = False
    testbed: bool = False  # its models and data are built by the repo (notebook 00), not downloaded
    source: str = ""  # the YAML file it was read from
    resources: dict[str, Resources] = field(default_factory=dict)  # per policy label; missing: CPU
    estimate: Estimate = field(default_factory=Estimate)
    curves: Curves = field(default_factory=Curves)
    predicted_lengths: PredictedLengths = field(default_factory=PredictedLengths)

    def __post_init__(self) -> None:
        if not self.policies:
            raise ValueError(f"profile {self.name}: no policies")
        self._check_stages()
        if not self.budget_flops > 0:
            raise ValueError(f"profile {self.name}: budget must be positive, got {self.budget_flops}")
        if not self.pilot_fractions or not all(0 < f <= 1 for f in self.pilot_fractions):
            raise ValueError(
                f"profile {self.name}: pilot_fractions must be in (0, 1], got {list(self.pilot_fractions)}"
            )
        if len(set(self.pilot_fractions)) != len(self.pilot_fractions):
            raise ValueError(f"profile {self.name}: pilot_fractions repeat: {list(self.pilot_fractions)}")
        missing = {"train", "heldout", "gsm", "math"} - set(self.data)
        if missing:
            raise ValueError(f"profile {self.name}: data is missing {sorted(missing)}")
        if self.seeds < 1 or not self.pilot_seeds or not self.fresh_seeds:
            raise ValueError(f"profile {self.name}: the grid, the pilots and the fresh runs each need a seed")
        self._check_seeds()
        unknown = sorted(set(self.resources) - set(self.policies) - {"prm"})
        if unknown:
            raise ValueError(f"profile {self.name}: resources for unknown policies {unknown}")

    def _check_seeds(self) -> None:
        """The grid's, the pilots' and the fresh runs' seeds are disjoint: RACE picks on seeds the
        full grid does not use, and its pick is compared with the default on seeds neither used."""
        groups = {
            "grid": set(range(self.seeds)),
            "pilot": set(self.pilot_seeds),
            "fresh": set(self.fresh_seeds),
        }
        for a, b in (("grid", "pilot"), ("grid", "fresh"), ("pilot", "fresh")):
            common = sorted(groups[a] & groups[b])
            if common:
                raise ValueError(f"profile {self.name}: seeds {common} are both {a} and {b} seeds")
        for name, seeds in (("pilot", self.pilot_seeds), ("fresh", self.fresh_seeds)):
            if len(set(seeds)) != len(seeds):
                raise ValueError(f"profile {self.name}: {name} seeds repeat: {list(seeds)}")

    def _check_stages(self) -> None:
        unknown_stages = sorted(set(self.stages) - set(STAGES))
        if unknown_stages:
            raise ValueError(
                f"profile {self.name}: unknown stages {unknown_stages}; stages: {', '.join(STAGES)}"
            )
        for stage, design in self.stages.items():
            where = f"profile {self.name}, stage {stage}"
            unknown = [p for p in design.policies if p not in self.policies]
            if unknown or not design.policies:
                raise ValueError(
                    f"{where}: policies {list(design.policies)} must be some of {list(self.policies)}"
                )
            if not design.rewards:
                raise ValueError(f"{where}: no reward systems")
            for reward in design.rewards:
                rewards.get(reward)  # an unknown name is refused with the known ones
            if stage != "A" and len(design.policies) != 1:
                raise ValueError(f"{where}: one policy (the reward systems are compared on it)")
            if stage == "A" and len(design.rewards) != 1:
                raise ValueError(f"{where}: one reward (the policy sizes are compared under it)")
        names = [s.name for s in self.all_settings()]
        clashes = sorted({n for n in names if names.count(n) > 1})
        if clashes:
            raise ValueError(f"profile {self.name}: setting names {clashes} appear in two stages")

    def budget_multiple(self, setting: Setting) -> float:
        """How far past C a setting's full-budget grid runs (a multiple of C): the largest
        ``curves.stage_budgets`` of any stage with a setting of the same policy and reward (they are
        one experiment, run once); 1 when none asks for more."""
        same = {
            s.stage
            for s in self.all_settings()
            if (s.policy, s.reward_system) == (setting.policy, setting.reward_system)
        }
        return max([1.0, *(m for stage, m in self.curves.stage_budgets.items() if stage in same)])

    def lengths_for(self, setting: Setting) -> tuple[dict[str, int | None], str]:
        """The tokens per generated completion the planner predicts ``setting``'s rounds at
        (:class:`~paper_repro.config.sections.PredictedLengths`), as ``{prompt, completion, reward}``
        (``reward``: the PRM's, None for the policy's prompt + completion; a completion never longer
        than ``train.max_completion_length``), with where they come from: ``measured``, or ``assumed``
        (the expected lengths)."""
        measured = self.predicted_lengths.settings.get(setting.name)
        lengths = measured or {**self.expected_lengths, "reward": None}
        completion = min(lengths["completion"], self.train.max_completion_length)
        tokens = {"prompt": lengths["prompt"], "completion": completion, "reward": lengths.get("reward")}
        return tokens, "measured" if measured else "assumed"

    def resources_for(self, policy: str) -> Resources:
        """The resources a run of ``policy`` asks for (a CPU process when the profile names none)."""
        return self.resources.get(policy, Resources())

    def quick_variant(self) -> Profile:
        """The quick mode's profile: one seed of each kind (grid, pilot, fresh) and the first pilot
        fraction only, the budget scaled by :data:`QUICK_BUDGET_SCALE`, at most
        :data:`QUICK_EVAL_LIMIT` problems per evaluation set, and the budget stop on the estimate (its
        pilots are too small to surely buy one costliest round)."""
        from dataclasses import replace

        limit = self.eval.get("limit")
        return replace(
            self,
            budget_flops=self.budget_flops * QUICK_BUDGET_SCALE,
            seeds=1,
            pilot_seeds=self.pilot_seeds[:1],
            fresh_seeds=self.fresh_seeds[:1],
            pilot_fractions=self.pilot_fractions[:1],
            train=replace(self.train, budget_stop="dearest"),
            eval={**self.eval, "limit": QUICK_EVAL_LIMIT if limit is None else min(limit, QUICK_EVAL_LIMIT)},
        )

    def quick_note(self) -> str:
        """What a quick run of this (full) profile is, in one Markdown paragraph built from quick mode's
        settings (:meth:`quick_variant`, :data:`QUICK_CELLS`): the banner of a quick study's notebooks."""
        from fractions import Fraction

        quick = self.quick_variant()
        seeds = lambda n: f"{n} seed{'s' * (n != 1)}"  # noqa: E731
        share = Fraction(QUICK_BUDGET_SCALE).limit_denominator(100)
        return (
            f"**A smoke run, not the study.** Quick mode (`quick=True`) of the {self.name} profile: "
            f"{seeds(quick.seeds)} per grid cell, {seeds(len(quick.pilot_seeds))} per pilot cell, "
            f"{seeds(len(quick.fresh_seeds))} for RACE's fresh runs; the cells {', '.join(QUICK_CELLS)} of "
            f"each grid that has them (unless `seeds` or `cells` say otherwise); {share} of the budget "
            f"(C = {quick.budget_flops:.3g} FLOPs, the study's {self.budget_flops:.3g}); the first pilot "
            f"budget only; at most {quick.eval['limit']} problems per evaluation set. It shows that the "
            "notebooks run end to end; its numbers answer none of the study's questions."
        )

    @property
    def pilot_fraction(self) -> float:
        """The pilot fraction whose pick RACE runs at the full budget (the first of ``pilot_fractions``)."""
        return self.pilot_fractions[0]

    @property
    def pilot_budget_flops(self) -> float:
        return self.budget_flops * self.pilot_fraction

    def pilot_budgets(self) -> dict[float, float]:
        """Each pilot fraction's budget in FLOPs."""
        return {f: self.budget_flops * f for f in self.pilot_fractions}

    def settings(self, stage: str) -> list[Setting]:
        """The settings of ``stage`` (one of :data:`STAGES`), in the profile's order."""
        stage = stage.upper()
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(STAGES)}")
        design = self.stages.get(stage)
        if design is None:
            return []
        if stage == "A":
            return [Setting("A", p, p, design.rewards[0]) for p in design.policies]
        return [Setting(stage, r, design.policies[0], r) for r in design.rewards]

    def all_settings(self) -> list[Setting]:
        return [s for stage in STAGES for s in self.settings(stage)]

    def setting(self, name: str) -> Setting:
        """The setting named ``name`` (a size label of stage A, a reward system of B or D)."""
        for s in self.all_settings():
            if s.name == name:
                return s
        known = ", ".join(f"{s.name} ({s.stage})" for s in self.all_settings())
        raise ValueError(f"profile {self.name} has no setting {name!r}; its settings: {known}")

    @property
    def ref(self) -> str:
        """How a notebook or a job names this profile: its name when it is a shipped profile, else
        the YAML file it was read from."""
        if not self.source:
            return self.name
        source = Path(self.source).resolve()
        return source.stem if source.parent == PROFILE_DIR else str(source)

    def needs_prm_weights(self, setting: Setting) -> bool:
        """The PRM scores the PRM-based rewards, and is the judge model of the ``prm_judge``."""
        return rewards.is_prm_based(setting.reward_system) or self.judge == "prm_judge"
