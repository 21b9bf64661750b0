"""Tasks: what a reward or a judge needs to know about a problem and a completion.

A :class:`Grader` reads a completion against one dataset row (the columns TRL passes to reward
functions: ``answer``, and for arith ``start`` and ``ops``):

- ``is_correct``: the final answer matches (arith: exact integer; math: ``math-verify``);
- ``steps``: the completion's reasoning steps, as the PRM sees them;
- ``step_verdicts`` / ``process_score``: exact per-step verdicts and the share of steps right, where
  the task has a step checker (arith: ``has_step_checker``);
- ``format_checks``: steps present, final-answer marker present, nothing after the final answer.

Every method takes any completion string and never raises on it; a malformed *row* is a
configuration error and does raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from paper_repro.tasks import arith

TaskName = Literal["arith", "math"]


class ArithGrader:
    """The cpu-tiny task: exact integers and an exact step checker."""

    name = "arith"
    has_step_checker = True
    answer_columns = ("answer",)
    process_columns = ("start", "ops")

    def is_correct(self, completion: str, row: Mapping[str, Any]) -> bool:
        return arith.is_correct(completion, row["answer"])

    def final_answer(self, completion: str) -> str | None:
        """The completion's final answer as a vote (majority voting compares these), or None."""
        answer = arith.extract_answer(completion)
        return None if answer is None else str(answer)

    def steps(self, completion: str) -> list[str]:
        return list(arith.parse_solution(completion).step_texts)

    def step_verdicts(self, completion: str, row: Mapping[str, Any]) -> list[bool] | None:
        return arith.step_verdicts(_problem(row), completion)

    def process_score(self, completion: str, row: Mapping[str, Any]) -> float:
        """Share of the problem's steps written right (missing and extra steps count against)."""
        return arith.process_score(_problem(row), completion)

    def format_checks(self, completion: str) -> tuple[bool, bool, bool]:
        parsed = arith.parse_solution(completion)
        steps_ok = bool(parsed.steps) and all(s is not None for s in parsed.steps)
        marker = arith.ANSWER_MARKER in completion and parsed.answer is not None
        _, _, tail = completion.partition(arith.ANSWER_MARKER)
        nothing_after = marker and tail.strip().lstrip("-").isdigit()
        return steps_ok, marker, nothing_after


class MathGrader:
    """The gpu-paper tasks: ``math-verify`` answers, steps split on blank lines, no step checker."""

    name = "math"
    has_step_checker = False
    answer_columns = ("answer",)
    process_columns = ()

    def is_correct(self, completion: str, row: Mapping[str, Any]) -> bool:
        from paper_repro.tasks.hub import is_equivalent

        return is_equivalent(completion, str(row["answer"]))

    def final_answer(self, completion: str) -> str | None:
        """The completion's final answer as ``math-verify`` parses it (its first reading), or None;
        never raises (unparseable gives None, as :func:`~paper_repro.tasks.hub.is_equivalent` does)."""
        from math_verify import parse

        try:
            parsed = parse(completion)
        except Exception:  # math-verify raises on some malformed LaTeX: no vote
            return None
        return str(parsed[0]) if parsed else None

    def steps(self, completion: str) -> list[str]:
        # Qwen2.5-Math-PRM's convention: one step per paragraph.
        return [s.strip() for s in completion.split("\n\n") if s.strip()]

    def step_verdicts(self, completion: str, row: Mapping[str, Any]) -> list[bool] | None:
        return None

    def process_score(self, completion: str, row: Mapping[str, Any]) -> float:
        raise ValueError("the math task has no exact step checker")

    def format_checks(self, completion: str) -> tuple[bool, bool, bool]:
        marker = "\\boxed{" in completion
        tail = completion.rsplit("\\boxed{", 1)[-1] if marker else ""
        # nothing but the box's close, punctuation or a short closing sentence after the final answer
        nothing_after = marker and len(tail.split("}", 1)[-1].strip()) <= 40
        return len(self.steps(completion)) >= 2, marker, nothing_after


GRADERS = {"arith": ArithGrader(), "math": MathGrader()}


def grader(task: str):
    if task not in GRADERS:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(GRADERS)}")
    return GRADERS[task]


def _problem(row: Mapping[str, Any]) -> arith.Problem:
    return arith.record_to_problem(row)
