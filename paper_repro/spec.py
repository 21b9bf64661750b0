"""A run's spec: everything one run computes with, its ``run_id``, and the specs a setting asks for.

A :class:`RunSpec`'s ``run_id`` is the sha256 of its canonical JSON: every field that changes what
the run computes, and none of the labels of who asked for it. :func:`setting_specs` is the one place
that turns a profile's setting into its runs (grid cells x seeds, at the full or pilot budget);
:func:`default_cell_spec` is TRL's default allocation, the fixed cell RACE's pick is compared with.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from paper_repro import rewards
from paper_repro.allocation import Cell, plan_setting, planner_for
from paper_repro.choices import EVAL_DECODINGS, check_choice
from paper_repro.config import QUICK_CELLS, Profile, Resources, Setting, TrainConfig
from paper_repro.weights import weights_fingerprint

BudgetKind = Literal["full", "pilot"]
# Labels of who asked for a run, the planner's predictions and where the run is measured along the
# way (its ladder: the points leave the run as it was, tests/test_ladder.py): not what it computes.
HASH_EXCLUDES = ("stage", "setting", "cell", "target_rho", "predicted_rho", "first_round_flops", "runtime",
                 "ladder", "ladder_unit")  # fmt: skip
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
    # ("all" or "native"): config.Curves.ladder; its rows go to curves.csv (paper_repro.ladder)
    ladder: tuple[tuple[float, str], ...] = ()
    ladder_unit: float | None = None
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
        runtime=profile.resources_for(setting.policy),
        # a reward that pays for a model of its own (a judge) scores with its weights too
        weights=weights_fingerprint(profile.policies[setting.policy], prm, _own_model(setting.reward_system)),
    )


def _own_model(reward_system: str) -> str | None:
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
    every planned cell (or ``cells``, or the quick subset) that surely buys one round
    (:func:`buys_a_round`) x ``seeds`` (a count from 0, or explicit seeds; None: the profile's). A
    cell that is not in the setting's grid is refused with the grid's labels. The cells are planned
    at the budget; at the full budget, with ``extend``, a setting whose stage runs past C
    (:meth:`~paper_repro.config.Profile.budget_multiple`) trains the same recipes on to its multiple
    of C, its C point on the ladder being its frontier at C."""
    s = profile.setting(setting) if isinstance(setting, str) else setting
    planned = plan_setting(profile, s, budget_of(profile, budget_kind, fraction))
    grid = [c.label for c in planned.cells]
    if cells:
        unknown = [c for c in cells if c not in grid]
        if unknown:
            raise ValueError(f"cells {unknown} are not in the grid of setting {s.name} ({', '.join(grid)})")
    chosen = cells or (QUICK_CELLS if quick else grid)
    multiple = profile.budget_multiple(s) if budget_kind == "full" and extend else 1.0
    surely = [
        c
        for c in planned.cells
        if c.label in chosen and buys_a_round(spec_for(profile, s, c, 0, budget_kind))
    ]
    return [
        spec_for(profile, s, c, seed, budget_kind, multiple)
        for c in surely
        for seed in seed_list(profile, seeds)
    ]


def buys_a_round(spec: RunSpec) -> bool:
    """Whether the run's budget surely buys one round: always with the ``dearest`` budget stop; with
    ``ceiling``, when the costliest round it could meet fits the budget. A grid cell that does not is
    left out of that budget's grid (a small pilot budget cannot buy the costliest rounds of the
    most update-heavy cells), as a target the planner cannot realise is."""
    from paper_repro.preflight import round_ceiling

    return spec.train.budget_stop != "ceiling" or round_ceiling(spec) <= spec.budget_flops


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


# --------------------------------------------------------------------------------------------
# The profile's design: which runs belong to the study a profile defines
# --------------------------------------------------------------------------------------------

# What varies between the runs of one setting of a design: the rest of a run's canonical spec
# (weights, training recipe, data, evaluation, profile) is the design's, shared by all of them.
PER_RUN_FIELDS = ("seed", "budget_kind", "budget_flops", "P", "G", "K", "mu")


def design_key(spec: RunSpec | dict[str, Any]) -> dict[str, Any]:
    """What a run shares with every run of its setting's design: its canonical spec (a
    :class:`RunSpec`'s, or a row's recorded ``spec``) without the seed, the budget and the
    allocation (:data:`PER_RUN_FIELDS`)."""
    canonical = dict(spec.canonical() if isinstance(spec, RunSpec) else spec)
    for key in PER_RUN_FIELDS:
        canonical.pop(key, None)
    return json.loads(json.dumps(canonical, sort_keys=True, default=str))


def _differences(key: dict[str, Any], design: dict[str, Any]) -> list[str]:
    """The fields (``train.x`` for the training recipe's) where a run's design key differs."""
    out = []
    for name in sorted(set(key) | set(design)):
        a, b = key.get(name), design.get(name)
        if isinstance(a, dict) and isinstance(b, dict):
            out += [f"{name}.{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif a != b:
            out.append(name)
    return out


class Design:
    """The runs of ``profile``'s design, and why a run is not one of them (:meth:`problem`).

    A run of the design is computed with the profile's weights, training recipe, data and
    evaluation (the :func:`design_key` of one of its settings), at the full budget or a pilot
    budget, on a seed that budget's runs use: the grid's ``0 .. seeds-1`` or the fresh seeds at the
    full budget, the pilot seeds at a pilot budget. A quick run (a quarter budget, a smaller
    evaluation, the estimate's budget stop), a run on another seed or with another recipe is not."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.keys = {
            (s.policy, s.reward_system): design_key(default_cell_spec(profile, s, 0))
            for s in profile.all_settings()
        }

    def problem(self, spec: RunSpec | str, any_seed: bool = False) -> str | None:
        """Why ``spec`` (a :class:`RunSpec`, or a row's recorded canonical spec as JSON) is not a
        run of the design, or None when it is one. ``any_seed``: a run on a seed the design does not
        use counts too (an exploration folder's runs, analysed as the design they make up)."""
        profile = self.profile
        if isinstance(spec, RunSpec):
            spec = spec.canonical()
        else:
            try:
                spec = json.loads(spec)
            except (TypeError, ValueError):
                return "it records no readable spec"
        if spec.get("profile") != profile.name:
            return f"it belongs to profile {spec.get('profile')!r}, not {profile.name!r}"
        policy, reward = spec.get("policy"), spec.get("reward_system")
        key = self.keys.get((policy, reward))
        if key is None:
            return f"no setting of the design trains policy {policy} with reward {reward}"
        differ = _differences(design_key(spec), key)
        if differ:
            return f"its {', '.join(differ)} {'differ' if len(differ) > 1 else 'differs'} from the design's"
        kind, budget, seed = spec.get("budget_kind"), float(spec.get("budget_flops", "nan")), spec.get("seed")
        if kind == "full":
            setting = next(
                s for s in profile.all_settings() if (s.policy, s.reward_system) == (policy, reward)
            )
            multiples = sorted({1.0, profile.budget_multiple(setting)})
            budgets = [profile.budget_flops * m for m in multiples]
            seeds = [*range(profile.seeds), *profile.fresh_seeds]
        else:
            budgets, seeds = list(profile.pilot_budgets().values()), list(profile.pilot_seeds)
        if not any(abs(budget - b) <= 1e-9 * b for b in budgets):
            allowed = ", ".join(f"{b:.3g}" for b in budgets)
            return f"its {kind} budget {budget:.3g} is not the design's ({allowed})"
        if seed not in seeds and not any_seed:
            return f"seed {seed} is not one of the design's {kind}-budget seeds {_ranges(seeds)}"
        return None


def check_committed(specs: Sequence[RunSpec], results_root: str | Path | None = None) -> None:
    """Refuse, before any compute, a run that would go into a shipped profile's committed table
    (``data/results/<profile>``) without being a run of that profile's design
    (:class:`paper_repro.spec.Design`): a quick run, a seed or budget the design does not use, a
    changed recipe. Such a run is exploration, and goes into a results folder of its own."""
    from paper_repro.config import load_profile, profile_names
    from paper_repro.paths import repo_relative
    from paper_repro.results import quick_dir, results_dir

    for name in sorted({s.profile for s in specs} & set(profile_names())):
        table = results_dir(name, results_root)
        if table.resolve() != results_dir(name).resolve():
            continue
        design = Design(load_profile(name))
        refused = [(s, why) for s in specs if s.profile == name and (why := design.problem(s))]
        if refused:
            first, why = refused[0]
            raise ValueError(
                f"refused: {len(refused)} run(s) are not runs of the {name} design and would be written "
                f"into its committed table {repo_relative(table / 'runs.csv')} (e.g. setting {first.setting}, "
                f"cell {first.cell}, seed {first.seed}: {why}). Explore in a results folder of your own: "
                f"results_root='out/explore' (papermill: -p results_root out/explore; paper-repro: "
                f"--results out/explore), or quick=True, which writes to {repo_relative(quick_dir(name))}."
            )


def split_history(
    profile: Profile, results_root: str | Path | None = None, before: str | None = None
) -> tuple[int, int]:
    """Move the rows of ``profile``'s runs table (``runs.csv`` in ``results_root``; None: the
    committed one) that are not runs of its design (:class:`Design`: an earlier generation's, a
    stray) to ``runs_history.csv`` beside it, and the points of those runs' curves to
    ``curves_history.csv`` (:func:`paper_repro.results.move_rows`: atomic, idempotent; the step logs
    stay in ``steps/``). ``runs.csv`` then holds the study alone, which every later run keeps so
    (:func:`check_committed`). ``before`` (ISO 8601): also move every row made before that time, an
    earlier study of the same design (a design registered after those runs is tested on runs made
    after it: its rerun makes the same run ids again). Returns the rows and the curve points moved."""
    from paper_repro.results import (
        CURVE_COLUMNS,
        RUN_COLUMNS,
        ResultTable,
        history_path,
        move_rows,
        results_dir,
    )

    root = results_dir(profile.name, results_root)
    design = Design(profile)
    runs = ResultTable(root / "runs.csv", RUN_COLUMNS)
    import pandas as pd

    cut = pd.Timestamp(before) if before else None
    if cut is not None and cut.tzinfo is None:
        cut = cut.tz_localize("UTC")

    def earlier(row: dict[str, str]) -> bool:
        made = pd.to_datetime(row.get("created_at") or None, utc=True, errors="coerce")
        return cut is not None and pd.notna(made) and made < cut

    moved = move_rows(runs, lambda row: design.problem(row["spec"]) is not None or earlier(row))
    # a curve point moves with its run's row: the points of a run that has no row yet wait for it
    gone = ResultTable(history_path(runs.path), RUN_COLUMNS).keys() - runs.keys()
    points = move_rows(ResultTable(root / "curves.csv", CURVE_COLUMNS, key="curve_id"),
                       lambda row: row["run_id"] in gone)  # fmt: skip
    return moved, points


def _ranges(seeds: Sequence[int]) -> str:
    """``[0..9, 200..204]`` for a list of seeds."""
    runs: list[list[int]] = []
    for s in sorted(seeds):
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return "[" + ", ".join(f"{r[0]}..{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs) + "]"
