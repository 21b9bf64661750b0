"""Reward systems: named module-level functions in one registry, each declaring its cost and columns.

| name | reward in [0, 1] | reads | C_reward charged |
|---|---|---|---|
| ``sparse`` | 1 if the final answer is right | answer | 0 |
| ``structured`` | 0.2 x format (steps, marker, nothing after it) + 0.8 x correct | answer | 0 |
| ``dense`` | 0.5 x share of steps right + 0.5 x correct | problem (exact step checker) | 0 |
| ``proxy_prm`` | the exact step checker's verdicts, aggregated like the PRM (min or mean) | problem | the PRM's forward |
| ``prm`` | the learned PRM's step scores, aggregated (min or mean) | the prompt and steps | the PRM's forward |

``proxy_prm`` is our design choice (docs/DESIGN.md, reward systems): it gives the *signal* of a
perfect process checker at the *cost* of the configured PRM, so proxy vs real isolates the effect of
the PRM's signal at matched cost, and rule-based vs proxy the effect of paying for feedback.

**Adding a reward system** is one function here and one entry in a profile's stage list::

    @reward_system(reads="answer")
    def terse(completions, rows, ctx):
        \"\"\"1 for a right answer in at most 40 characters.\"\"\"
        return [float(ctx.grader.is_correct(c, r) and len(c) <= 40) for c, r in zip(completions, rows)]

A function takes the completions' texts, their dataset rows and a :class:`Context` (the task's
grader, the prompts, the PRM scorer when the system is PRM-based, the aggregation) and returns one
score per completion. Its ``__name__`` is its registry name, which TRL uses to label its logs.
``cost="prm"`` makes it PRM-based: it is charged the PRM's forward over every completion, its runs
need the PRM's weights, and the planner, the runner and the claims all read that from here.

**A reward that pays for its own model** (a judge model, a second PRM) passes a :class:`RewardCost`
as ``cost``: :class:`ModelForward` charges one forward of a checkpoint over each completion's prompt
and completion tokens, and the planner, the budget check and the ledger price it through that one
object. Such a reward can live outside the package: a profile names it by its dotted import path
(``mypkg.rewards.judged``), which imports the module and so registers it::

    @reward_system(reads="nothing", cost=ModelForward("org/judge-1.5b"))
    def judged(completions, rows, ctx): ...

TRL calls a reward as ``f(prompts=..., completions=..., completion_ids=..., **columns)`` where
``columns`` are the dataset's other columns (``answer``; for arith ``start`` and ``ops``); the ledger
reads ``f.flop_cost(prompts=..., completions=...)``. The same objects score training and evaluation
(native reward = the training reward on held-out prompts), so the two cannot drift apart.
Malformed, empty or runaway completions get 0 (or a defined partial score) and never raise; a
dataset without the columns a reward reads is refused with their names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from paper_repro.rewards.prm_scorer import PRMScorer, aggregate
from paper_repro.tasks.graders import grader

Aggregate = Literal["min", "mean"]
Reads = Literal["nothing", "answer", "problem"]  # dataset columns: none, the answer, the whole problem


class RewardCost:
    """What scoring costs, for a reward that pays for a model of its own: :meth:`planned`, the
    FLOPs of scoring one completion of given token lengths (what the planner and the budget check
    price), and :meth:`charged`, the FLOPs of one call on real completions (what the ledger counts)."""

    def planned(self, prompt_tokens: int, completion_tokens: int) -> float:
        raise NotImplementedError

    def charged(self, prompts: Sequence[str], completions: Sequence[str]) -> dict[str, float]:
        raise NotImplementedError


class ModelForward(RewardCost):
    """One forward of the checkpoint ``model`` (a local path or a hub id, resolved as every model
    is) over each completion with its prompt: the cost of a judge or reward model that reads them."""

    def __init__(self, model: str) -> None:
        self.model = model

    @functools.cached_property
    def shape(self):
        """The model's shape, read once from its config (the planner prices many cells)."""
        from paper_repro import models

        return models.shape(self.model)

    def planned(self, prompt_tokens: int, completion_tokens: int) -> float:
        from paper_repro.accounting.flops import forward_flops, sequence_work

        return forward_flops(self.shape, sequence_work(prompt_tokens + completion_tokens))

    @functools.cached_property
    def tokenizer(self):
        """The model's tokenizer, loaded once (the ledger charges every reward call)."""
        from transformers import AutoTokenizer

        from paper_repro import models

        return AutoTokenizer.from_pretrained(models.checkpoint(self.model))

    def charged(self, prompts: Sequence[str], completions: Sequence[str]) -> dict[str, float]:
        tokenizer = self.tokenizer
        useful = sum(
            self.planned(len(tokenizer(p)["input_ids"]), len(tokenizer(c)["input_ids"]))
            for p, c in zip(prompts, completions, strict=True)
        )
        return {"useful": useful, "executed": useful}

    def __repr__(self) -> str:
        return f"ModelForward({self.model!r})"


# FLOPs charged per call: none, the PRM's forward over the completions, or the reward's own cost
Cost = Literal["free", "prm"] | RewardCost


@dataclass(frozen=True)
class Context:
    """What a reward function may use besides the completions and their rows."""

    grader: Any  # paper_repro.tasks.graders: the task's answer check, steps and step checker
    prompts: Sequence[str]
    prm: PRMScorer | None = None  # set for PRM-based systems
    aggregation: Aggregate = "min"  # step scores -> one score (PRM-style systems)


ScoreFn = Callable[[Sequence[str], Sequence[Mapping[str, Any]], Context], list[float]]


@dataclass(frozen=True)
class RewardSystem:
    """One registry entry: the function, what it reads and what it costs."""

    fn: ScoreFn
    reads: Reads
    cost: Cost

    @property
    def name(self) -> str:
        return self.fn.__name__

    @property
    def prm_based(self) -> bool:
        """Charged the PRM's forward, so its runs need the PRM's weights and its rho is capped."""
        return self.cost == "prm"

    @property
    def own_cost(self) -> RewardCost | None:
        """The :class:`RewardCost` of a reward that pays for a model of its own (None otherwise)."""
        return self.cost if isinstance(self.cost, RewardCost) else None

    @property
    def needs_step_checker(self) -> bool:
        return self.reads == "problem"


REGISTRY: dict[str, RewardSystem] = {}


def reward_system(reads: Reads = "answer", cost: Cost = "free") -> Callable[[ScoreFn], ScoreFn]:
    """Register a reward function under its ``__name__``."""

    def register(fn: ScoreFn) -> ScoreFn:
        if fn.__name__ in REGISTRY:
            raise ValueError(f"reward system {fn.__name__!r} is registered twice")
        REGISTRY[fn.__name__] = RewardSystem(fn, reads, cost)
        return fn

    return register


@reward_system(reads="answer")
def sparse(completions, rows, ctx):
    """1 if the final answer is right, else 0."""
    return [float(ctx.grader.is_correct(c, r)) for c, r in zip(completions, rows, strict=True)]


@reward_system(reads="answer")
def structured(completions, rows, ctx):
    """0.2 x the share of format checks passed (steps, final-answer marker, nothing after it) +
    0.8 x correct."""
    g = ctx.grader
    return [
        0.2 * sum(g.format_checks(c)) / 3 + 0.8 * g.is_correct(c, r)
        for c, r in zip(completions, rows, strict=True)
    ]


@reward_system(reads="problem")
def dense(completions, rows, ctx):
    """0.5 x the share of the problem's steps written right + 0.5 x correct."""
    g = ctx.grader
    return [
        0.5 * g.process_score(c, r) + 0.5 * g.is_correct(c, r) for c, r in zip(completions, rows, strict=True)
    ]


@reward_system(reads="problem", cost="prm")
def proxy_prm(completions, rows, ctx):
    """The exact step checker's verdicts, aggregated like the PRM's scores; charged the PRM."""
    return [
        aggregate([float(v) for v in ctx.grader.step_verdicts(c, r) or []], ctx.aggregation)
        for c, r in zip(completions, rows, strict=True)
    ]


@reward_system(reads="nothing", cost="prm")
def prm(completions, rows, ctx):
    """The learned PRM's step scores (one batched forward), aggregated."""
    scores = ctx.prm.step_scores(ctx.prompts, [ctx.grader.steps(c) for c in completions])
    return [aggregate(s, ctx.aggregation) for s in scores]


REWARD_SYSTEMS: tuple[str, ...] = tuple(REGISTRY)


def get(name: str) -> RewardSystem:
    """The registry entry ``name``: a registered name, or the dotted import path of a function
    registered with :func:`reward_system` in a module outside the package (importing it registers
    it). An unknown name is refused with the known ones."""
    if name not in REGISTRY and "." in name:
        import importlib

        module, _, attr = name.rpartition(".")
        try:
            fn = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as err:
            raise ValueError(f"reward system {name!r}: cannot import it ({err})") from err
        entry = REGISTRY.get(getattr(fn, "__name__", ""))
        if entry is None or entry.fn is not fn:
            raise ValueError(
                f"reward system {name!r} is not registered: decorate it with @reward_system(...)"
            )
        REGISTRY[name] = entry
    if name not in REGISTRY:
        known = ", ".join(n for n in REGISTRY if "." not in n)
        raise ValueError(f"unknown reward system {name!r}; known: {known}, or a dotted import path")
    return REGISTRY[name]


def is_prm_based(name: str) -> bool:
    return get(name).prm_based


class RewardFunction:
    """A registry entry bound to a task (and a PRM): the TRL reward callable, with its FLOP cost."""

    def __init__(
        self, system: RewardSystem, task_grader, prm: PRMScorer | None, aggregation: Aggregate
    ) -> None:
        self.__name__ = system.name  # TRL labels its logs by it
        self.system, self.grader, self.prm, self.aggregation = system, task_grader, prm, aggregation
        columns = {"nothing": (), "answer": task_grader.answer_columns}
        self.requires = columns.get(system.reads, task_grader.answer_columns + task_grader.process_columns)

    def __call__(self, prompts=None, completions=None, completion_ids=None, **columns) -> list[float]:
        texts = [_text(c) for c in completions or []]
        missing = [c for c in self.requires if c not in columns]
        if missing and texts:
            raise ValueError(
                f"reward {self.__name__!r} needs dataset columns {list(self.requires)}; missing {missing}"
            )
        prompts = [_text(p) for p in prompts or [""] * len(texts)]
        ctx = Context(self.grader, prompts, self.prm, self.aggregation)
        return [float(s) for s in self.system.fn(texts, _rows(columns, len(texts)), ctx)]

    def flop_cost(self, prompts=None, completions=None, completion_ids=None) -> dict[str, float]:
        """FLOPs of one call, ``{"useful": ..., "executed": ...}``: the PRM's forward over these
        completions' steps for a PRM-based system (what ``prm`` runs; ``proxy_prm`` is charged the
        same), the reward's own :class:`RewardCost` for one that has it, else 0."""
        texts = [_text(c) for c in completions or []]
        prompts = [_text(p) for p in prompts or [""] * len(texts)]
        if self.system.own_cost is not None:
            return self.system.own_cost.charged(prompts, texts)
        if not self.system.prm_based:
            return {"useful": 0.0, "executed": 0.0}
        return self.prm.flop_cost(prompts, [self.grader.steps(c) for c in texts])

    def __repr__(self) -> str:
        return f"RewardFunction({self.__name__!r})"


def build_reward(
    name: str, task: str = "arith", prm: PRMScorer | None = None, aggregation: Aggregate = "min"
) -> RewardFunction:
    """The reward system ``name`` for ``task`` ("arith" or "math"). PRM-based systems need ``prm``:
    the real PRM scores with it, the proxy is charged its FLOPs."""
    system = get(name)
    if aggregation not in ("min", "mean"):
        raise ValueError(f"aggregation must be 'min' or 'mean', got {aggregation!r}")
    g = grader(task)
    if system.needs_step_checker and not g.has_step_checker:
        raise ValueError(f"{name} needs an exact step checker; task {task!r} has none")
    if system.prm_based and prm is None:
        raise ValueError(f"reward system {name!r} needs a PRM (its FLOPs are what {name} is charged)")
    return RewardFunction(system, g, prm if system.prm_based else None, aggregation)


def _rows(columns: Mapping[str, Sequence[Any]], n: int) -> list[dict[str, Any]]:
    """TRL passes each extra dataset column as a list, one entry per completion."""
    return [{key: values[i] for key, values in columns.items() if _indexable(values, n)} for i in range(n)]


def _indexable(values: Any, n: int) -> bool:
    return isinstance(values, (list, tuple)) and len(values) == n


def _text(completion: Any) -> str:
    """Plain text of a completion: a string, or TRL's conversational ``[{"content": ...}]`` form."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return "" if completion is None else str(completion)
