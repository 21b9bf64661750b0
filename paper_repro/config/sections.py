"""The sections of a profile, one frozen dataclass each, validated when built: ``train``
(:class:`TrainConfig`), ``grid`` and ``allowed`` (:class:`Grid`), ``resources``
(:class:`Resources`), ``estimate`` (:class:`Estimate`), ``predicted_lengths``
(:class:`PredictedLengths`), ``curves`` (:class:`Curves`) and ``margins`` (:class:`Margins`); and
the stages' design: :data:`STAGES`, what a stage runs (:class:`StageDesign`) and one setting of it
(:class:`Setting`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from paper_repro.common import choices
from paper_repro.common.choices import check_choice

# The paper's stages: A varies the policy size at one reward; B the reward system (rule-based and
# proxy-PRM) and D the real PRM, on one policy. Every stage list in the code comes from here.
STAGES: tuple[str, ...] = ("A", "B", "D")


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
    # moved to the row's start: the same log-probabilities to float rounding (paper_repro/sampler/buckets.py);
    # "fused": over the same buckets, by a flat forward of the policy's weights (paper_repro/sampler/fused_update.py)
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
    peak_tflops: float | None = None  # None: the GPU's dense 16-bit peak from paper_repro.accounting.devices
    mfu_train: float = 0.35  # model FLOPs utilisation of policy updates and reward-model forwards
    mfu_generate_hf: float = 0.03  # HF generate: decode-bound, far below peak
    mfu_generate_vllm: float = 0.25
    eval_problems: int = 0  # greedy answers per evaluation (held-out + downstream sets)

    def __post_init__(self) -> None:
        if self.peak_tflops is None:
            from paper_repro.accounting.devices import gpu_peak

            known = gpu_peak(self.gpu)
            if known is None:
                raise ValueError(f"estimate: GPU {self.gpu!r} has no known peak; give peak_tflops")
            object.__setattr__(self, "peak_tflops", known[1] / 1e12)
        mfus = (self.mfu_train, self.mfu_generate_hf, self.mfu_generate_vllm)
        if not (self.peak_tflops > 0 and all(0 < m <= 1 for m in mfus) and self.eval_problems >= 0):
            raise ValueError(f"invalid estimate settings: {self}")

    def mfu_generate(self, backend: str) -> float:
        return self.mfu_generate_vllm if backend == "vllm" else self.mfu_generate_hf


LENGTH_ROLES = ("prompt", "completion", "reward")  # tokens per generated completion, by who reads them


@dataclass(frozen=True)
class PredictedLengths:
    """``predicted_lengths:`` of a profile: the tokens per generated completion at which the planner
    predicts a cell's rounds, steps and FLOP split (:func:`paper_repro.run.allocation.plan_setting`).
    Not the lengths it chooses cells at (``expected_lengths``: part of the registered design, since P,
    G, K and mu enter every run's id).

    ``source``: ``measured`` (``settings`` holds each setting's ``prompt`` and ``completion`` tokens,
    and ``reward``, the PRM's, where a PRM is charged, measured on the profile's committed runs by
    :mod:`paper_repro.run.calibration`) or ``assumed`` (no run yet: a setting is predicted at
    ``expected_lengths``, and ``completion_range`` is the span of completion lengths whose GPU-hours
    the dry run reports beside). A setting ``settings`` does not name is predicted at
    ``expected_lengths``; a name the profile has no setting of is not read (a profile that
    ``extends:`` another and changes its stages inherits its lengths)."""

    source: Literal["measured", "assumed"] = "assumed"
    settings: dict[str, dict[str, int]] = field(default_factory=dict)
    completion_range: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.source not in ("measured", "assumed"):
            raise ValueError(f"predicted_lengths.source must be measured or assumed, got {self.source!r}")
        if self.source == "measured" and not self.settings:
            raise ValueError("predicted_lengths: measured lengths name their settings (settings: {S: ...})")
        for name, lengths in self.settings.items():
            where = f"predicted_lengths.settings.{name}"
            unknown = sorted(set(lengths) - set(LENGTH_ROLES))
            if unknown or not {"prompt", "completion"} <= set(lengths):
                raise ValueError(f"{where}: prompt and completion tokens (and reward), got {dict(lengths)}")
            if not all(isinstance(v, int) and v > 0 for v in lengths.values()):
                raise ValueError(f"{where}: token counts are positive integers, got {dict(lengths)}")
        span = self.completion_range
        if span is not None and not (len(span) == 2 and 0 < span[0] <= span[1]):
            raise ValueError(f"predicted_lengths.completion_range: [shortest, longest] tokens, got {span}")


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
    regime: float = 0.02  # a window contrast's advantage: "not held" when it is ruled out
    allocation: float = 0.02  # "allocation matters": two cells differ by more; "flat": all within
    recipe_sd: float | None = None  # a cell's recipe effect beyond seed noise; None: the study's own estimate

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if name == "recipe_sd":
                if value is not None and not value >= 0:
                    raise ValueError(f"margin recipe_sd must be >= 0 (or null: estimated), got {value}")
            elif not value > 0:
                raise ValueError(f"margin {name} must be positive, got {value}")
