"""Reward systems: TRL reward callables, in a registry by name, each declaring its FLOP cost.

| name | reward in [0, 1] | C_reward charged |
|---|---|---|
| ``sparse`` | 1 if the final answer is right | 0 |
| ``structured`` | 0.2 x format (steps, marker, nothing after it) + 0.8 x correct | 0 |
| ``dense`` | 0.5 x share of steps right + 0.5 x correct | 0 |
| ``proxy_prm`` | the exact step checker's verdicts, aggregated like the PRM (min or mean) | the PRM's forward |
| ``prm`` | the learned PRM's step scores, aggregated (min or mean) | the PRM's forward |

``proxy_prm`` is our design choice (DESIGN §5): it gives the *signal* of a perfect process checker
at the *cost* of the configured PRM, so proxy vs real isolates the effect of the PRM's signal at
matched cost, and rule-based vs proxy the effect of paying for feedback.

TRL calls a reward as ``f(prompts=..., completions=..., completion_ids=..., **columns)`` where
``columns`` are the dataset's other columns (``answer``; for arith ``start`` and ``ops``). The
ledger reads ``f.flop_cost(prompts=..., completions=..., completion_ids=...)``. The same objects
score training and evaluation (native reward = the training reward on held-out prompts), so the two
cannot drift apart. Malformed, empty or runaway completions get 0 (or a defined partial score) and
never raise; a dataset without the columns a reward reads is refused with their names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from paper_repro.rewards.prm import PRMScorer, aggregate
from paper_repro.tasks.graders import grader

Aggregate = Literal["min", "mean"]
RULE_BASED = ("sparse", "structured", "dense")
PRM_BASED = ("proxy_prm", "prm")
REWARD_SYSTEMS = (*RULE_BASED, *PRM_BASED)


class RewardFunction:
    """A named TRL reward callable with a declared FLOP cost."""

    def __init__(
        self,
        name: str,
        score: Callable[[str, Mapping[str, Any]], float],
        requires: tuple[str, ...] = (),
        cost=None,
    ) -> None:
        self.__name__ = name
        self._score = score
        self.requires = requires  # dataset columns the reward reads
        self._cost = cost

    def __call__(self, prompts=None, completions=None, completion_ids=None, **columns) -> list[float]:
        completions = completions or []
        missing = [c for c in self.requires if c not in columns]
        if missing and completions:
            raise ValueError(
                f"reward {self.__name__!r} needs dataset columns {list(self.requires)}; missing {missing}"
            )
        rows = _rows(columns, len(completions))
        return [float(self._score(_text(c), row)) for c, row in zip(completions, rows, strict=True)]

    def flop_cost(self, prompts=None, completions=None, completion_ids=None) -> dict[str, float]:
        """FLOPs of one call, ``{"useful": ..., "executed": ...}`` (0 for rule-based rewards)."""
        if self._cost is None:
            return {"useful": 0.0, "executed": 0.0}
        return self._cost([_text(p) for p in prompts or []], [_text(c) for c in completions or []])

    def __repr__(self) -> str:
        return f"RewardFunction({self.__name__!r})"


def build_reward(
    name: str, task: str = "arith", prm: PRMScorer | None = None, aggregation: Aggregate = "min"
) -> RewardFunction:
    """The reward system ``name`` for ``task`` ("arith" or "math"). PRM-based systems need ``prm``:
    the real PRM scores with it, the proxy is charged its FLOPs."""
    if name not in REWARD_SYSTEMS:
        raise ValueError(f"unknown reward system {name!r}; known: {', '.join(REWARD_SYSTEMS)}")
    if aggregation not in ("min", "mean"):
        raise ValueError(f"aggregation must be 'min' or 'mean', got {aggregation!r}")
    g = grader(task)
    if name in ("dense", "proxy_prm") and not g.has_step_checker:
        raise ValueError(f"{name} needs an exact step checker; task {task!r} has none")
    answer, process = g.answer_columns, g.answer_columns + g.process_columns
    if name == "sparse":
        return RewardFunction(name, lambda c, row: g.is_correct(c, row), answer)
    if name == "structured":
        return RewardFunction(
            name, lambda c, row: 0.2 * sum(g.format_checks(c)) / 3 + 0.8 * g.is_correct(c, row), answer
        )
    if name == "dense":
        return RewardFunction(
            name, lambda c, row: 0.5 * g.process_score(c, row) + 0.5 * g.is_correct(c, row), process
        )
    if prm is None:
        raise ValueError(f"reward system {name!r} needs a PRM (its FLOPs are what {name} is charged)")
    if name == "proxy_prm":

        def proxy(c: str, row: Mapping[str, Any]) -> float:
            return aggregate([float(v) for v in g.step_verdicts(c, row) or []], aggregation)

        cost = lambda prompts, comps: prm.flop_cost(prompts, _steps(g, comps))  # noqa: E731
        return RewardFunction(name, proxy, process, cost)
    return PRMReward(prm, g, aggregation)


class PRMReward(RewardFunction):
    """The learned PRM run for real: one batched forward over every completion's steps."""

    def __init__(self, prm: PRMScorer, task_grader, aggregation: Aggregate) -> None:
        super().__init__("prm", score=lambda c, row: float("nan"))  # __call__ scores in one batch
        self.prm, self.grader, self.aggregation = prm, task_grader, aggregation
        self._cost = lambda prompts, comps: prm.flop_cost(prompts, _steps(task_grader, comps))

    def __call__(self, prompts=None, completions=None, completion_ids=None, **columns) -> list[float]:
        texts = [_text(c) for c in completions or []]
        prompts = [_text(p) for p in prompts or [""] * len(texts)]
        scores = self.prm.step_scores(prompts, _steps(self.grader, texts))
        return [aggregate(s, self.aggregation) for s in scores]


def _steps(g, completions: Sequence[str]) -> list[list[str]]:
    return [g.steps(c) for c in completions]


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
