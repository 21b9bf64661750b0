"""A run's spec: everything one run computes with, its ``run_id``, and the specs a setting asks for.

A :class:`RunSpec`'s ``run_id`` is the sha256 of its canonical JSON: every field that changes what
the run computes, and none of the labels of who asked for it. :func:`setting_specs` is the one place
that turns a profile's setting into its runs: the cells the planner runs at the full or a pilot
budget (:func:`paper_repro.run.allocation.plan_setting`, which decides the grid) x seeds;
:func:`default_cell_spec` is TRL's default allocation, the fixed cell RACE's pick is compared with.
Which runs belong to a profile's design is :mod:`paper_repro.run.study_design`'s.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from paper_repro import rewards
from paper_repro.common.choices import EVAL_DECODINGS, check_choice
from paper_repro.config import QUICK_CELLS, Profile, Resources, Setting, TrainConfig
from paper_repro.run.allocation import Cell, plan_setting, planner_for
from paper_repro.run.weights import weights_fingerprint

BudgetKind = Literal["full", "pilot"]
# Labels of who asked for a run, the planner's predictions, where the run is measured along the way
# (its ladder: the points leave the run as it was, tests/test_ladder.py) and the unit its budget is
# read in (full_budget, C): not what it computes.
HASH_EXCLUDES = (
    "stage",
    "setting",
    "cell",
    "target_rho",
    "predicted_rho",
    "first_round_flops",
    "runtime",
    "ladder",
    "ladder_unit",
    "full_budget",
)
# Fields added after results were recorded hash only when set away from their default, so the run ids
# of earlier runs (which computed with those defaults) do not change.
HASH_IF_SET = {"eval_heldout_limit": None, "weights": None, "eval_decoding": "exact"}
TRAIN_HASH_IF_SET = {
    "chat_template": False,
    "generation": "hf",
    "budget_stop": "dearest",
    "selection_decimals": None,
    "update_layout": "padded",
}


@dataclass(frozen=True)
class RunSpec:
    """Everything one run computes with. Its ``run_id`` hashes all of it except the labels of who
    asked for it (``stage``, ``setting``, ``cell``, ``target_rho``) and the planner's predictions, so
    the same experiment asked for twice (stage A's M and stage B's sparse; TRL's default cell and the
    grid cell with the same P, G, K, mu) runs once, and its row carries the first asker's labels."""

    profile: str
    stage: str
    setting: str
    cell: str
    seed: int
    budget_kind: BudgetKind
    budget_flops: float
    policy: str  # the policy label (S/M/L, 1.5B/3B/7B)
    model: str  # its checkpoint: a repo-relative path or a hub id
    reward_system: str
    prm: str | None  # the PRM checkpoint (PRM-based reward systems only)
    task: str
    P: int
    G: int
    K: int
    mu: int
    target_rho: float
    train: TrainConfig
    data: tuple[tuple[str, str], ...]  # (role, dataset) for train, heldout, gsm, math
    eval_limit: int | None = None
    eval_max_new_tokens: int = 128
    eval_batch_size: int = 256
    judge: str = "step_verifier"
    predicted_rho: float = float("nan")
    first_round_flops: float | None = None
    eval_heldout_limit: int | None = None  # held-out prompts for the native reward (None: eval_limit)
    # greedy evaluation by HF generate's computation ("exact": HF generate or its bit-exact lean
    # reproduction, Resources.sampler) or by the lean sampler's fused decoder (other roundings)
    eval_decoding: str = "exact"
    # sha256 of the local checkpoints' weight files (policy, PRM): a rebuilt testbed is a new run.
    # Hub ids are named by their id alone.
    weights: str | None = None
    # the budget points below its own budget at which the run is evaluated along the way, as multiples
    # of ``ladder_unit`` (the profile's full budget C, in FLOPs), each with what is evaluated there
    # ("all" or "native"): config.Curves.ladder; its rows go to curves.csv (paper_repro.run.ladder)
    ladder: tuple[tuple[float, str], ...] = ()
    ladder_unit: float | None = None
    # the profile's full budget C in FLOPs, whatever the run's own budget: its row's budget_multiple is
    # budget_flops / full_budget (2.0 for a grid run to 2C, 0.5 for a pilot at C/2); None: not known
    full_budget: float | None = None
    # where it runs (GPUs, micro-batches): not what it computes, so not in the run_id
    runtime: Resources = field(default_factory=Resources)

    def __post_init__(self) -> None:
        rewards.get(self.reward_system)  # an unknown name is refused with the known ones
        if not self.budget_flops > 0:
            raise ValueError(f"budget must be a positive number of FLOPs, got {self.budget_flops}")
        if min(self.P, self.G, self.K, self.mu) < 1:
            raise ValueError(f"P, G, K and mu must be positive, got {self.P}, {self.G}, {self.K}, {self.mu}")
        if self.K > self.G:
            raise ValueError(f"K={self.K} completions kept cannot exceed G={self.G} generated")
        check_choice("eval_decoding", self.eval_decoding, EVAL_DECODINGS)
        if self.budget_kind not in ("full", "pilot"):
            raise ValueError(f"budget_kind must be 'full' or 'pilot', got {self.budget_kind!r}")
        if self.ladder:
            if not self.ladder_unit or not self.ladder_unit > 0:
                raise ValueError("a ladder needs its unit (ladder_unit: the full budget C in FLOPs)")
            points = [p for p, _ in self.ladder]
            if points != sorted(set(points)) or points[0] <= 0:
                raise ValueError(f"ladder points {points} must be positive and increase")
            bad = sorted({e for _, e in self.ladder} - {"all", "native"})
            if bad:
                raise ValueError(f"a ladder point evaluates 'all' or 'native', got {bad}")

    def canonical(self) -> dict[str, Any]:
        spec = asdict(self)
        for key in HASH_EXCLUDES:
            spec.pop(key)
        for key, default in HASH_IF_SET.items():
            if spec[key] == default:
                spec.pop(key)
        for key, default in TRAIN_HASH_IF_SET.items():
            if spec["train"][key] == default:
                spec["train"].pop(key)
        spec["data"] = dict(self.data)
        return spec

    def to_json(self) -> str:
        """The whole spec (labels and runtime included), for :func:`spec_from_json`."""
        return json.dumps(asdict(self), default=str)

    @property
    def run_id(self) -> str:
        text = json.dumps(self.canonical(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def decoder(self, role: Literal["rollouts", "evaluation"]) -> str:
        """The sampler that decodes this run's rollouts or its greedy evaluation: the fused decoder
        when the profile asks for it (``train.generation``, ``eval_decoding``), else the machine's
        HF-compatible sampler (``runtime.sampler``)."""
        fused = self.train.generation == "fused" if role == "rollouts" else self.eval_decoding == "fused"
        return "fused" if fused else self.runtime.sampler

    @property
    def data_map(self) -> dict[str, str]:
        return dict(self.data)

    @property
    def heldout_limit(self) -> int | None:
        return self.eval_heldout_limit if self.eval_heldout_limit is not None else self.eval_limit


def spec_from_json(text: str) -> RunSpec:
    raw = json.loads(text)
    raw["train"] = TrainConfig(**raw["train"])
    raw["runtime"] = Resources(**raw["runtime"])
    raw["data"] = tuple(tuple(pair) for pair in raw["data"])
    raw["predicted_rho"] = float(raw["predicted_rho"])
    raw["ladder"] = tuple((float(p), str(e)) for p, e in raw.get("ladder", ()))
    return RunSpec(**raw)


def spec_for(
    profile: Profile,
    setting: Setting,
    cell: Cell,
    seed: int,
    budget_kind: BudgetKind = "full",
    multiple: float = 1.0,
) -> RunSpec:
    """The run of ``cell`` (planned for ``setting`` at its budget) with ``seed``, trained to
    ``multiple`` times that budget with the same recipe. A run carries the profile's ladder
    (:meth:`paper_repro.config.Curves.ladder`): the points below its budget it is evaluated at, as
    multiples of the full budget C; of the pilots, only the first pilot fraction's, whose points RACE+
    extrapolates from (a pilot at C/2: C/8 and C/4)."""
    prm = profile.prm if profile.needs_prm_weights(setting) else None
    # the pilots RACE+ extrapolates from (the first pilot fraction's) carry the ladder; the others do not
    first_pilots = budget_kind != "pilot" or math.isclose(cell.budget_flops, profile.pilot_budget_flops)
    ladder = (
        profile.curves.ladder(cell.budget_flops * multiple / profile.budget_flops) if first_pilots else ()
    )
    return RunSpec(
        profile=profile.name,
        stage=setting.stage,
        setting=setting.name,
        cell=cell.label,
        seed=seed,
        budget_kind=budget_kind,
        budget_flops=cell.budget_flops * multiple,
        policy=setting.policy,
        model=profile.policies[setting.policy],
        reward_system=setting.reward_system,
        prm=prm,
        task=profile.task,
        P=cell.P,
        G=cell.G,
        K=cell.K,
        mu=cell.mu,
        target_rho=cell.target_rho,
        train=profile.train,
        data=tuple(sorted(profile.data.items())),
        eval_limit=profile.eval.get("limit"),
        eval_max_new_tokens=int(profile.eval.get("max_new_tokens", 128)),
        eval_batch_size=int(profile.eval.get("batch_size", 256)),
        eval_decoding=str(profile.eval.get("decoding", "exact")),
        judge=profile.judge,
        predicted_rho=cell.predicted_rho,
        first_round_flops=cell.round_cost.C_total,
        eval_heldout_limit=profile.eval.get("heldout_limit"),
        ladder=ladder,
        ladder_unit=profile.budget_flops if ladder else None,
        full_budget=profile.budget_flops,
        runtime=profile.resources_for(setting.policy),
        # a reward that pays for a model of its own (a judge) scores with its weights too
        weights=weights_fingerprint(profile.policies[setting.policy], prm, own_model(setting.reward_system)),
    )


def own_model(reward_system: str) -> str | None:
    """The checkpoint a reward that pays for its own model scores with (None for the others)."""
    return getattr(rewards.get(reward_system).own_cost, "model", None)


def budget_of(profile: Profile, budget_kind: BudgetKind, fraction: float | None = None) -> float:
    """The full budget, or a pilot budget (``fraction`` of the full one; None: the first pilot fraction)."""
    if budget_kind == "full":
        return profile.budget_flops
    if fraction is not None and fraction not in profile.pilot_fractions:
        raise ValueError(
            f"pilot fraction {fraction} is not one of the profile's {list(profile.pilot_fractions)}"
        )
    return profile.budget_flops * (fraction if fraction is not None else profile.pilot_fraction)


def seed_list(profile: Profile, seeds: int | Sequence[int] | None) -> list[int]:
    """Seeds ``0 .. n-1`` for a count (None: the profile's count), or the given seeds."""
    if seeds is None:
        return list(range(profile.seeds))
    if isinstance(seeds, int):
        return list(range(seeds))
    return list(dict.fromkeys(int(s) for s in seeds))


def setting_specs(
    profile: Profile,
    setting: Setting | str,
    seeds: int | Sequence[int] | None = None,
    budget_kind: BudgetKind = "full",
    cells: Sequence[str] | None = None,
    quick: bool = False,
    fraction: float | None = None,
    extend: bool = True,
) -> list[RunSpec]:
    """The runs of one setting's grid at the full or a pilot budget (``fraction``; None: the first):
    every cell the planner runs at that budget (:func:`paper_repro.run.allocation.plan_setting`), or
    ``cells``, or the quick subset, x ``seeds`` (a count from 0, or explicit seeds; None: the
    profile's). A cell that is not in the setting's grid at that budget is refused with the grid's
    labels, and the planner's reason where it refused that cell. At the full budget, with ``extend``,
    a setting whose stage runs past C (:meth:`~paper_repro.config.Profile.budget_multiple`) trains
    the same recipes on to its multiple of C, its C point on the ladder being its frontier at C."""
    s = profile.setting(setting) if isinstance(setting, str) else setting
    planned = plan_setting(profile, s, budget_of(profile, budget_kind, fraction))
    grid = [c.label for c in planned.cells]
    if cells:
        unknown = [c for c in cells if c not in grid]
        if unknown:
            why = "".join(f"; {e.label}: {e}" for e in planned.infeasible if e.label in unknown)
            raise ValueError(
                f"cells {unknown} are not in the grid of setting {s.name} ({', '.join(grid)}){why}"
            )
    chosen = cells or (QUICK_CELLS if quick else grid)
    multiple = profile.budget_multiple(s) if budget_kind == "full" and extend else 1.0
    return [
        spec_for(profile, s, c, seed, budget_kind, multiple)
        for c in planned.cells
        if c.label in chosen
        for seed in seed_list(profile, seeds)
    ]


def pilot_specs(profile: Profile, setting: Setting | str, quick: bool = False) -> list[RunSpec]:
    """RACE's pilot grids of one setting: every pilot fraction's grid x the profile's pilot seeds."""
    return [
        spec
        for fraction in profile.pilot_fractions
        for spec in setting_specs(
            profile, setting, profile.pilot_seeds, "pilot", quick=quick, fraction=fraction
        )
    ]


def race_check_specs(
    profile: Profile, setting: Setting | str, pick: str | None, plus_pick: str | None = None
) -> list[RunSpec]:
    """RACE's check on fresh seeds: TRL's default allocation and (once the pilots have named them)
    RACE's pick and RACE+'s pick, the full-grid cells ``pick`` and ``plus_pick``, each at the full
    budget (C, not past it) on the profile's fresh seeds. The same experiment is one run: a pick that
    is the other pick, or the default allocation's cell, adds none (the list holds each run id once,
    the first asker's labels kept: the default, then RACE's pick). They carry no ladder: the compute
    curves are the grid's, and the fresh runs are compared at C alone."""
    s = profile.setting(setting) if isinstance(setting, str) else setting
    specs = [default_cell_spec(profile, s, seed) for seed in profile.fresh_seeds]
    for cell in dict.fromkeys(c for c in (pick, plus_pick) if c):
        specs += setting_specs(profile, s, profile.fresh_seeds, "full", cells=[cell], extend=False)
    unique: dict[str, RunSpec] = {}
    for spec in specs:
        unique.setdefault(spec.run_id, replace(spec, ladder=(), ladder_unit=None))
    return list(unique.values())


def default_cell_spec(
    profile: Profile, setting: Setting, seed: int, budget_kind: BudgetKind = "full"
) -> RunSpec:
    """TRL's default allocation (K = G = the grid's preferred G, mu = 1, P the grid's largest), the
    fixed cell RACE's pick is compared against."""
    budget = budget_of(profile, budget_kind)
    g = profile.grid.preferred_G
    cell = planner_for(profile, setting).explicit(max(profile.grid.P), g, g, 1, budget, label="default")
    return spec_for(profile, setting, cell, seed, budget_kind)
