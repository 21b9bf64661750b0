"""Profiles and stages: what a study runs, read from small YAML files in ``paper_repro/profiles/``.

A **profile** (``cpu-tiny``, ``gpu-paper``) names the policies, the PRM, the data, the training
hyperparameters, the budgets, the allocation grid, and the study's design: which **settings** each
**stage** holds. A setting is one (policy, reward system) pair whose IsoFLOP frontier the study
measures. The stages are the paper's (:data:`STAGES`); what is in them is the profile's ``stages:``

| stage | settings | policy | reward system |
|---|---|---|---|
| ``A`` | one per policy size (``stages.A.policies``, default all) | each size | ``stages.A.reward`` |
| ``B`` | one per reward system in ``stages.B.rewards`` | ``stages.B.policy`` | the setting's |
| ``D`` | one per reward system in ``stages.D.rewards`` (the real PRM) | ``stages.D.policy`` | the setting's |

A setting is named by its size label in stage A and by its reward system in B and D; the names are
unique over the profile, so a name alone finds its setting (:meth:`Profile.setting`). Stage A's
middle-size setting and stage B's ``sparse`` setting are the same experiment; a run is identified by
what it computes (its ``run_id``), so it runs once and serves both.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import yaml

from paper_repro import choices, rewards
from paper_repro.choices import check_choice

PROFILE_DIR = Path(__file__).resolve().parent / "profiles"
# The paper's stages: A varies the policy size at one reward; B the reward system (rule-based and
# proxy-PRM) and D the real PRM, on one policy. Every stage list in the code comes from here.
STAGES: tuple[str, ...] = ("A", "B", "D")
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
class TrainConfig:
    """GRPO + LoRA hyperparameters shared by every run of a profile."""

    lora_rank: int = 16
    lora_alpha: int = 32
    lora_targets: str = "all-linear"
    learning_rate: float = 1e-3
    lr_scheduler: str = "constant"
    temperature: float = 1.0
    max_completion_length: int = 96
    beta: float = 0.0  # KL coefficient; != 0 adds a reference forward (C_learning)
    dtype: Literal["float32", "bfloat16"] = "float32"
    chat_template: bool = False  # prompts as chat turns through the tokenizer's template (Instruct models)
    # rollouts by HF generate (or its bit-exact lean reproduction, Resources.sampler), by TRL's vLLM
    # colocate mode, or by the lean sampler's fused decoder: the same policy and sampling distribution
    # with other float roundings, LoRA merged (paper_repro/sampler/; docs/CHOICES.md, throughput)
    generation: Literal["hf", "vllm", "fused"] = "hf"
    # TRL's policy forwards as its one padded batch, or over length buckets with each row's tokens
    # moved to the row's start: the same log-probabilities to float rounding (paper_repro/buckets.py);
    # "fused": over the same buckets, by a flat forward of the policy's weights (paper_repro/fused_update.py)
    update_layout: Literal["padded", "bucketed", "fused"] = "padded"
    # When the ledger stops a run: "ceiling" while the costliest possible round (longest prompt,
    # every completion at max_completion_length) could pass the budget, so C_total never does;
    # "dearest" while the dearest round so far could (more of the budget spent, but completions that
    # grow under RL can take the last round past it); "step" before the optimizer step that could (a
    # step inside a round priced exactly, one that opens a round at its ceiling: never passes the
    # budget, and can end part-way through a round).
    budget_stop: Literal["dearest", "ceiling", "step"] = "dearest"
    # Max-variance down-sampling compares rewards rounded to this many decimals (None: exact), so
    # that float noise in a learned reward (1e-9 apart across machines) cannot change which
    # completions are kept; equal rounded rewards keep input order (docs/CHOICES.md).
    selection_decimals: int | None = None

    def __post_init__(self) -> None:
        if self.selection_decimals is not None and self.selection_decimals < 0:
            raise ValueError(f"selection_decimals must be >= 0 or None, got {self.selection_decimals}")
        check_choice("budget_stop", self.budget_stop, choices.BUDGET_STOPS)
        check_choice("generation", self.generation, choices.GENERATIONS)
        check_choice("update_layout", self.update_layout, choices.UPDATE_LAYOUTS)
        if self.lora_rank < 1 or self.lora_alpha <= 0:
            raise ValueError(f"LoRA rank and alpha must be positive, got {self.lora_rank}, {self.lora_alpha}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.temperature <= 0 or self.max_completion_length < 1 or self.beta < 0:
            raise ValueError(f"invalid sampling settings: {self}")
        if self.dtype not in ("float32", "bfloat16"):
            raise ValueError(f"dtype must be float32 or bfloat16, got {self.dtype!r}")


@dataclass(frozen=True)
class Grid:
    """The allocation grid: target rhos, the planner's tolerance and the allowed (P, G, K, mu)."""

    targets: tuple[float, ...] = (0.15, 0.30, 0.50, 0.70, 0.85)
    tolerance: float = 0.03
    P: tuple[int, ...] = (8,)
    G: tuple[int, ...] = (2, 4, 8, 16)
    K: tuple[int, ...] = (2, 4, 8, 16)
    mu: tuple[int, ...] = (1, 2, 3, 4)
    preferred_G: int = 8  # ties between equal-rho cells go to the G nearest this (TRL's default)
    # second recipes: (policy, reward system, targets) -> each target also run by a second (P, G, K, mu)
    # of the same predicted rho (allocation.Planner.second_cell), cell label + "b", in whichever
    # stage's setting has that policy and reward (none: the entry runs nothing)
    recipes: tuple[tuple[str, str, tuple[float, ...]], ...] = ()

    def __post_init__(self) -> None:
        if not self.targets or not all(0 < t < 1 for t in self.targets):
            raise ValueError(f"target rhos must lie in (0, 1), got {self.targets}")
        if not 0 < self.tolerance < 0.5:
            raise ValueError(f"tolerance must be in (0, 0.5), got {self.tolerance}")
        for name in ("P", "G", "K", "mu"):
            values = getattr(self, name)
            if not values or min(values) < 1:
                raise ValueError(f"allowed {name} must be positive integers, got {values}")
        if min(self.K) < 2:
            # a group of one completion has zero reward variance, hence zero advantage
            raise ValueError("K must be >= 2: GRPO's group advantage of a single completion is 0")
        for policy, reward, targets in self.recipes:
            stray = [t for t in targets if t not in self.targets]
            if stray or not targets:
                raise ValueError(
                    f"grid.recipes ({policy}, {reward}): targets {list(targets)} must be grid targets "
                    f"{list(self.targets)}"
                )

    def second_targets(self, policy: str, reward: str) -> tuple[float, ...]:
        """The targets run by a second recipe in the setting of ``policy`` under ``reward``."""
        return tuple(t for p, r, targets in self.recipes if (p, r) == (policy, reward) for t in targets)


@dataclass(frozen=True)
class Resources:
    """What one run of a policy size asks of a machine (gpu-paper; cpu-tiny runs on the CPU).

    ``gpus`` processes are launched with ``accelerate launch --config_file accelerate_config``; the
    rollout batch (P x G) and the optimizer batch stay the same at any GPU count (each process takes
    P x G / gpus rows, in micro-batches of at most ``micro_batch`` rows, accumulated into one step).
    """

    gpus: int = 0  # 0: no accelerator (CPU)
    accelerate_config: str | None = None  # repo-relative path; None: a single process
    micro_batch: int | None = None  # rows per forward/backward on one device; None: the whole share
    gradient_checkpointing: bool = False
    vllm_gpu_memory_utilization: float = 0.3
    # how HF-path rollouts and evaluation decode: "lean" (paper_repro.sampler: HF generate's tokens
    # without its per-step overhead, falling back to HF generate where it cannot reproduce it) or "hf"
    sampler: str = "lean"
    cpus_per_task: int = 2
    mem_gb: int = 8
    timeout_min: int = 60  # per notebook job on SLURM

    def __post_init__(self) -> None:
        if self.gpus < 0 or self.cpus_per_task < 1 or self.mem_gb < 1 or self.timeout_min < 1:
            raise ValueError(f"invalid resources: {self}")
        if self.gpus > 1 and not self.accelerate_config:
            raise ValueError(f"{self.gpus} GPUs need an accelerate_config to launch with")
        if self.micro_batch is not None and self.micro_batch < 1:
            raise ValueError(f"micro_batch must be positive, got {self.micro_batch}")
        check_choice("sampler", self.sampler, choices.RUNTIME_SAMPLERS)
        if not 0 < self.vllm_gpu_memory_utilization < 1:
            raise ValueError("vllm_gpu_memory_utilization must be in (0, 1)")


@dataclass(frozen=True)
class Estimate:
    """How ``paper-repro run --dry-run`` turns FLOPs into GPU-hours: a peak and a stated MFU."""

    gpu: str = "H100 SXM"
    peak_tflops: float | None = None  # None: the GPU's dense 16-bit peak from paper_repro.devices
    mfu_train: float = 0.35  # model FLOPs utilisation of policy updates and reward-model forwards
    mfu_generate_hf: float = 0.03  # HF generate: decode-bound, far below peak
    mfu_generate_vllm: float = 0.25
    eval_problems: int = 0  # greedy answers per evaluation (held-out + downstream sets)

    def __post_init__(self) -> None:
        if self.peak_tflops is None:
            from paper_repro.devices import gpu_peak

            known = gpu_peak(self.gpu)
            if known is None:
                raise ValueError(f"estimate: GPU {self.gpu!r} has no known peak; give peak_tflops")
            object.__setattr__(self, "peak_tflops", known[1] / 1e12)
        mfus = (self.mfu_train, self.mfu_generate_hf, self.mfu_generate_vllm)
        if not (self.peak_tflops > 0 and all(0 < m <= 1 for m in mfus) and self.eval_problems >= 0):
            raise ValueError(f"invalid estimate settings: {self}")

    def mfu_generate(self, backend: str) -> float:
        return self.mfu_generate_vllm if backend == "vllm" else self.mfu_generate_hf


@dataclass(frozen=True)
class Setting:
    """One (policy, reward system) pair of a stage: one IsoFLOP frontier."""

    stage: str
    name: str  # the size label in stage A, the reward system in B and D
    policy: str  # the policy label (a key of Profile.policies)
    reward_system: str


@dataclass(frozen=True)
class StageDesign:
    """What one stage runs: stage A one setting per policy in ``policies`` with ``rewards[0]``;
    stages B and D one setting per reward in ``rewards`` on ``policies[0]``."""

    policies: tuple[str, ...]
    rewards: tuple[str, ...]


@dataclass(frozen=True)
class Curves:
    """Every full-budget run evaluated along its budget (docs/CHOICES.md, compute curves).

    ``points`` is the budget ladder, as multiples of the full budget C (``0.0625`` is C/16): a run is
    evaluated at every point up to its own budget, each on the policy after the last round a run
    whose budget is that point would train. At ``evaluate_all_at`` (and at a run's own budget) every
    set is evaluated; elsewhere the native reward's held-out set alone. ``stage_budgets``: a stage
    whose grid runs on past C, as a multiple of C (a point of the ladder); its C point is its
    frontier at C, and a setting another stage shares (stage B's ``sparse`` is stage A's middle
    policy) runs once, to the larger budget."""

    points: tuple[float, ...] = ()
    evaluate_all_at: tuple[float, ...] = (1.0,)
    stage_budgets: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        points = self.points
        if not points:
            if self.stage_budgets:
                raise ValueError("curves: stage_budgets needs a ladder (curves.points)")
            return
        if not all(p > 0 for p in points) or list(points) != sorted(set(points)):
            raise ValueError(f"curves.points must be positive multiples of C, increasing, got {list(points)}")
        if 1.0 not in points:
            raise ValueError(f"curves.points must hold 1 (the full budget C), got {list(points)}")
        stray = [p for p in self.evaluate_all_at if p not in points]
        if stray:
            raise ValueError(f"curves.evaluate_all_at {stray} are not points of the ladder {list(points)}")
        for stage, multiple in self.stage_budgets.items():
            if stage not in STAGES:
                raise ValueError(
                    f"curves.stage_budgets: unknown stage {stage!r}; stages: {', '.join(STAGES)}"
                )
            if multiple < 1 or multiple not in points:
                raise ValueError(
                    f"curves.stage_budgets.{stage} = {multiple}: a stage runs to C or past it, to a point of "
                    f"the ladder {list(points)}"
                )

    def ladder(self, budget_multiple: float) -> tuple[tuple[float, str], ...]:
        """The points below a run's own budget (a multiple of C), each with what is evaluated there
        (``"all"`` or ``"native"``)."""
        return tuple(
            (p, "all" if p in self.evaluate_all_at else "native")
            for p in self.points
            if p < budget_multiple * (1 - 1e-9)
        )


@dataclass(frozen=True)
class Margins:
    """The claim tests' margins, fixed in the profile before the runs (docs/CHOICES.md, the claims)."""

    rho: float = 0.10  # "rho* ~ x": every cell that could be best inside [x - rho, x + rho]
    gain: float = 0.02  # RACE's "no stable gain": TOST margin on the paired native-reward gain
    aicc: float = 2.0  # a fitted form wins a frontier by this much AICc
    gaming: float = 0.10  # the PRM's excess gaming share ruled out below this
    recipe: float = 0.03  # "at equal rho, the recipe does not matter": the recipes' equivalence margin
    recipe_sd: float | None = None  # a cell's recipe effect beyond seed noise; None: the study's own estimate

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if name == "recipe_sd":
                if value is not None and not value >= 0:
                    raise ValueError(f"margin recipe_sd must be >= 0 (or null: estimated), got {value}")
            elif not value > 0:
                raise ValueError(f"margin {name} must be positive, got {value}")


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


def load_profile(name: str | Path) -> Profile:
    """The profile ``name`` (a shipped name such as ``cpu-tiny``, or a path to a YAML file)."""
    path = Path(name)
    if path.suffix not in (".yaml", ".yml"):
        path = PROFILE_DIR / f"{name}.yaml"
        if not path.is_file():
            raise ValueError(f"unknown profile {name!r}; known: {', '.join(profile_names())}")
    elif not path.is_file():
        raise FileNotFoundError(f"profile file {path} does not exist")
    raw = _read_raw(path)
    return _profile_from_dict(raw, source=str(path))


def _read_raw(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A profile's YAML, with ``extends: <profile>`` resolved: the base profile's values, then this
    file's on top (mappings merged key by key, anything else replaced). A hardware variant such as
    ``gpu-paper-1gpu`` extends ``gpu-paper`` and changes only ``resources``: the same runs (a run's id
    ignores where it runs), the same results table."""
    if path.resolve() in seen:
        raise ValueError(f"profile {path} extends itself (through {' -> '.join(map(str, seen))})")
    raw = yaml.safe_load(path.read_text()) or {}
    base = raw.pop("extends", None)
    if base is None:
        return raw
    base_path = Path(base) if Path(base).suffix in (".yaml", ".yml") else PROFILE_DIR / f"{base}.yaml"
    if not base_path.is_absolute() and not base_path.is_file():
        base_path = path.parent / base_path
    if not base_path.is_file():
        raise ValueError(f"profile {path} extends {base!r}, which is not a profile ({base_path})")
    return _merge(_read_raw(base_path, (*seen, path.resolve())), raw)


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "resources":
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _profile_from_dict(raw: dict[str, Any], source: str = "") -> Profile:
    raw = dict(raw)
    train = TrainConfig(**_known(TrainConfig, raw.pop("train", {})))
    grid_raw = dict(raw.pop("grid", {}))
    allowed = raw.pop("allowed", {})
    grid = Grid(
        targets=tuple(float(t) for t in grid_raw.get("targets", Grid.targets)),
        tolerance=float(grid_raw.get("tolerance", Grid.tolerance)),
        preferred_G=int(grid_raw.get("preferred_G", Grid.preferred_G)),
        recipes=tuple(
            (str(r["policy"]), str(r["reward"]), tuple(float(t) for t in r["targets"]))
            for r in grid_raw.get("recipes", ())
        ),
        **{k: tuple(int(v) for v in allowed[k]) for k in ("P", "G", "K", "mu") if k in allowed},
    )
    budget = raw.pop("budget")
    policies = {str(k): _reference(v, f"policies.{k}") for k, v in raw["policies"].items()}
    return Profile(
        name=raw["name"],
        task=raw["task"],
        policies=policies,
        stages=_stages(raw.get("stages", {}), list(policies)),
        prm=_reference(raw["prm"], "prm"),
        judge=raw.get("judge", "step_verifier"),
        data={str(k): _reference(v, f"data.{k}") for k, v in raw["data"].items()},
        eval=dict(raw.get("eval", {})),
        expected_lengths={k: int(v) for k, v in raw["expected_lengths"].items()},
        train=train,
        budget_flops=float(budget["full_flops"]),
        pilot_fractions=_pilot_fractions(budget),
        grid=grid,
        **_seeds(raw.get("seeds", 3)),
        margins=Margins(**_known(Margins, raw.get("margins", {}))),
        offline=bool(raw.get("offline", False)),
        testbed=bool(raw.get("testbed", False)),
        source=source,
        resources={str(k): Resources(**_known(Resources, v)) for k, v in raw.get("resources", {}).items()},
        estimate=Estimate(**_known(Estimate, raw.get("estimate", {}))),
        curves=_curves(raw.get("curves", {})),
    )


def _curves(raw: dict[str, Any]) -> Curves:
    """``curves:`` of a profile: ``points``, ``evaluate_all_at`` and ``stage_budgets`` (:class:`Curves`)."""
    raw = _known(Curves, dict(raw or {}))
    return Curves(
        points=tuple(float(p) for p in raw.get("points", ())),
        evaluate_all_at=tuple(float(p) for p in raw.get("evaluate_all_at", (1.0,))),
        stage_budgets={str(k): float(v) for k, v in (raw.get("stage_budgets") or {}).items()},
    )


def _reference(raw: Any, where: str) -> str:
    """A model or dataset of a profile: a string (a local path, a shipped split, ``<hub id>=<path>``
    or a hub reference ``owner/name[@revision]``), or a hub id with its revision,
    ``{id: owner/name, revision: <40-hex commit, branch or tag, or null>}``, as the reference
    ``owner/name@revision`` (the bare id when the revision is null: a run refuses it until pinned)."""
    from paper_repro.tasks import hub

    if not isinstance(raw, dict):
        return str(raw)
    unknown = sorted(set(raw) - {"id", "revision"})
    if unknown or "id" not in raw or "revision" not in raw:
        raise ValueError(
            f"{where}: a hub id with its revision is {{id: owner/name, revision: <commit> or null}}, "
            f"got {raw!r}"
        )
    repo, revision = str(raw["id"]), raw["revision"]
    if "@" in repo or "=" in repo or repo.count("/") != 1:
        raise ValueError(f"{where}: id must be a hub id owner/name, got {repo!r}")
    if revision is None:
        return repo
    ref = f"{repo}@{revision}"
    hub.parse_ref(ref)  # an empty or malformed revision is refused here
    return ref


def _pilot_fractions(budget: dict[str, Any]) -> tuple[float, ...]:
    """``budget.pilot_fractions`` (a list; the first picks), or a single ``pilot_fraction``."""
    if "pilot_fractions" in budget and "pilot_fraction" in budget:
        raise ValueError("budget: give pilot_fractions or pilot_fraction, not both")
    raw = budget.get("pilot_fractions", [budget.get("pilot_fraction", 0.125)])
    return tuple(float(f) for f in (raw if isinstance(raw, list | tuple) else [raw]))


def _seeds(raw: Any) -> dict[str, Any]:
    """``seeds:`` of a profile: a count of grid seeds, or ``{grid: n, pilot: [...], fresh: [...]}``."""
    if isinstance(raw, int):
        return {"seeds": raw}
    if not isinstance(raw, dict):
        raise ValueError(f"seeds: a count or a mapping with grid, pilot and fresh, got {raw!r}")
    unknown = sorted(set(raw) - {"grid", "pilot", "fresh"})
    if unknown:
        raise ValueError(f"seeds: unknown keys {unknown}; allowed: fresh, grid, pilot")
    out: dict[str, Any] = {"seeds": int(raw.get("grid", 3))}
    for key, name in (("pilot", "pilot_seeds"), ("fresh", "fresh_seeds")):
        if key in raw:
            out[name] = tuple(int(s) for s in raw[key])
    return out


def _stages(raw: dict[str, Any], policies: list[str]) -> dict[str, StageDesign]:
    """``stages:`` of a profile. Stage A: ``{policies: [...], reward: r}`` (policies default to all);
    stages B and D: ``{policy: p, rewards: [...]}``."""
    unknown_stages = sorted(set(map(str, raw)) - set(STAGES))
    if unknown_stages:
        raise ValueError(f"unknown stages {unknown_stages}; stages: {', '.join(STAGES)}")
    out = {}
    for stage, spec in raw.items():
        spec = dict(spec or {})
        allowed = {"policies", "reward"} if stage == "A" else {"policy", "rewards"}
        unknown = sorted(set(spec) - allowed)
        if unknown:
            raise ValueError(f"stage {stage}: unknown keys {unknown}; allowed: {sorted(allowed)}")
        if stage == "A":
            chosen = tuple(str(p) for p in spec.get("policies", policies))
            out[str(stage)] = StageDesign(chosen, (str(spec.get("reward", "")),))
        else:
            out[str(stage)] = StageDesign(
                (str(spec.get("policy", "")),), tuple(str(r) for r in spec.get("rewards", []))
            )
    return out


def _known(cls, values: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} fields {unknown}; known: {sorted(names)}")
    return dict(values)


__all__ = [
    "STAGES",
    "Curves",
    "Estimate",
    "Grid",
    "Margins",
    "Profile",
    "Resources",
    "Setting",
    "StageDesign",
    "TrainConfig",
    "load_profile",
    "profile_names",
]
