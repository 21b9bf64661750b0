"""The testbed's models, declared: the policy sizes (:data:`POLICIES`, the one place the sizes and
their checkpoint names are written), the PRM, the tiny Qwen2 of tests, what a build makes
(:class:`BuildConfig`), and where they are saved.

Pretraining runs each size well up its learning curve on a corpus with slips and shortcut answers
(:mod:`paper_repro.tasks.arith`): the room for RL is in the corpus, not in stopping training early.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from paper_repro.common.paths import repo_root

MODELS_DIR = Path("data") / "models"


@dataclass(frozen=True)
class ModelSpec:
    """A Qwen2 architecture for the testbed and how long to pretrain it."""

    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int = 4
    kv_heads: int = 2
    steps: int = 600  # optimizer steps of pretraining
    batch_size: int = 64
    learning_rate: float = 3e-3

    def __post_init__(self) -> None:
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"{self.name}: hidden must divide by heads, heads by kv_heads")


# The testbed's policy sizes, label -> architecture; a size's checkpoint is its spec's name under
# data/models (policy_dir). Code reads the sizes from here (the build, the benchmarks); the cpu-tiny
# profile names their checkpoints under `policies:`.
POLICIES: dict[str, ModelSpec] = {
    "S": ModelSpec("policy-S", hidden=48, intermediate=128, layers=3, steps=1200),
    "M": ModelSpec("policy-M", hidden=64, intermediate=176, layers=3, steps=1000),
    "L": ModelSpec("policy-L", hidden=96, intermediate=256, layers=3, steps=1000),
}
# Pretraining runs each size well up its learning curve on a corpus with slips and shortcut answers
# (paper_repro.tasks.arith): the room for RL is in the corpus, not in stopping training early. S is
# deep and narrow: a 2-layer S (hidden 56) stayed at gsm pass@1 0.11 and RL could not move it (+2
# points); 3 layers at hidden 48 reach 0.35 and RL lifts them like M (docs/CHOICES.md, *Policy S*).
# Greedy pass@1 is capped near (share of problems whose greedy solution works the steps) x accuracy,
# so M and L end close on it; they differ in pass@8 and in what RL makes of them (docs/CHOICES.md).
# The PRM: one layer deeper than policy L, so it costs more per token than every policy (as
# Qwen2.5-Math-PRM-7B does against the 1.5B-7B policies), trained from scratch on fresh step data.
PRM = ModelSpec("prm", hidden=96, intermediate=256, layers=4, steps=1000, learning_rate=3e-3)
PRM_ERROR_RATE = 0.3  # share of slipped steps in the PRM's step-labelled data
PRM_DATA_SEED = 108  # the stream of fresh PRM training problems (disjoint from every split's prompts)
PRM_LABELS = {0: "wrong", 1: "right"}  # the PRM's two classes: class 1 is a step judged right

# The smallest Qwen2 the pipeline runs end to end: random tiny policies and PRMs for tests and examples.
TINY = ModelSpec("tiny", hidden=32, intermediate=64, layers=1, heads=2, kv_heads=1)


@dataclass(frozen=True)
class BuildConfig:
    """What notebook 00 builds. ``steps_scale`` shrinks every training run (smoke tests use ~0.02)."""

    models_dir: str | None = None  # None: the repo's data/models
    tasks_dir: str | None = None  # None: the repo's data/tasks/arith
    results_csv: str | None = None  # None: data/results/cpu-tiny/base_models.csv
    sizes: tuple[str, ...] | None = None  # None: every size of POLICIES
    prm: bool = True  # train the PRM (from scratch; its error profile samples the built policies)
    steps_scale: float = 1.0
    error_rate: float = 0.05  # share of pretraining steps whose result carries a slip
    seed: int = 0
    pass_k: int = 8  # pass@k at temperature 1.0
    # evaluate on the first N problems of each split (None: each split as first shipped, its
    # SplitSpec.first_size: the first 300 of the 900-problem held-out and gsm sets, as the committed
    # base_models.csv was measured)
    eval_limit: int | None = None
    prm_heldout: float = 0.1  # share of the step-labelled set kept out of PRM training

    def __post_init__(self) -> None:
        if self.sizes is None:
            object.__setattr__(self, "sizes", tuple(POLICIES))
        unknown = [s for s in self.sizes if s not in POLICIES]
        if unknown:
            raise ValueError(f"unknown policy sizes {unknown}; known: {', '.join(POLICIES)}")
        if not 0 < self.steps_scale <= 10:
            raise ValueError(f"steps_scale must be in (0, 10], got {self.steps_scale}")
        if not 0 < self.prm_heldout < 1:
            raise ValueError(f"prm_heldout must be in (0, 1), got {self.prm_heldout}")

    def steps(self, spec: ModelSpec) -> int:
        return max(2, round(spec.steps * self.steps_scale))

    def build_words(self) -> str:
        """What an execution with this config rebuilds and what it keeps, in one Markdown sentence
        (notebook 00 opens its results with it, so an executed copy says which build it shows)."""
        kept = [s for s in POLICIES if s not in self.sizes]
        rebuilt = [f"policy {s}" for s in self.sizes] + (["the PRM"] if self.prm else [])
        said = f"**This execution rebuilt {', '.join(rebuilt) if rebuilt else 'nothing'}**"
        if kept:
            said += (
                f"; the policies {', '.join(kept)} are the committed checkpoints, not rebuilt here (their rows "
                "below are read from the table; a policy rebuilt on another machine is a new policy, with new "
                "run ids)"
            )
        if self.steps_scale != 1.0:
            said += f"; training steps scaled by {self.steps_scale:g} (a smoke build)"
        return said + "."


def models_dir(root: str | Path | None = None) -> Path:
    return Path(root) if root is not None else repo_root() / MODELS_DIR


def policy_dir(size: str, root: str | Path | None = None) -> Path:
    """The checkpoint directory of policy ``size`` under :func:`models_dir` ``(root)``."""
    return models_dir(root) / POLICIES[size].name


def repo_path(spec: ModelSpec) -> str:
    """``spec``'s checkpoint as the repo names it (``data/models/policy-S``), on every machine."""
    return (MODELS_DIR / spec.name).as_posix()
