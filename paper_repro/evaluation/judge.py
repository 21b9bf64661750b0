"""The common judge: one process-quality score in [0, 1] that rates every run the same way.

- cpu-tiny (``StepVerifierJudge``): an exact step verifier. A step counts when its arithmetic is
  right, it applies the problem's operation, and it chains: it starts from the value the solution
  holds (the start, or its own previous result). The score is the share of the problem's steps that
  count; missing and extra steps count against (:func:`paper_repro.tasks.arith.process_score`).
- gpu-paper (``PRMJudge``): a judge model, by default the PRM's per-step scores aggregated by
  their mean. Its FLOPs are reported as evaluation compute (``eval_flops``), never charged to the
  training budget.

Neither raises on any completion: an unreadable one scores 0. A row without the problem is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from paper_repro.rewards.prm_scorer import PRMScorer, aggregate
from paper_repro.tasks import arith
from paper_repro.tasks.graders import grader


class StepVerifierJudge:
    """The cpu-tiny judge: exact, free (0 FLOPs)."""

    name = "step_verifier"

    def __init__(self) -> None:
        self.eval_flops = 0.0

    def score(self, prompts: Sequence[str], completions: Sequence[str], rows: Sequence[Mapping[str, Any]]):
        return [
            arith.process_score(arith.record_to_problem(row), c if isinstance(c, str) else "")
            for c, row in zip(completions, rows, strict=True)
        ]


class PRMJudge:
    """The gpu-paper judge: a PRM's step scores, aggregated (mean by default)."""

    name = "prm_judge"

    def __init__(self, scorer: PRMScorer, task: str = "math", aggregation: str = "mean") -> None:
        self.scorer, self.grader, self.aggregation = scorer, grader(task), aggregation
        self.eval_flops = 0.0  # accumulated over calls, reported as evaluation compute

    def score(self, prompts: Sequence[str], completions: Sequence[str], rows: Sequence[Mapping[str, Any]]):
        steps = [self.grader.steps(c if isinstance(c, str) else "") for c in completions]
        self.eval_flops += self.scorer.flop_cost(prompts, steps)["useful"]
        return [aggregate(s, self.aggregation) for s in self.scorer.step_scores(prompts, steps)]


def build_judge(profile_judge: str = "step_verifier", scorer: PRMScorer | None = None, task: str = "math"):
    """The judge named in a profile: ``step_verifier`` (cpu-tiny) or ``prm_judge`` (needs a scorer)."""
    if profile_judge == "step_verifier":
        return StepVerifierJudge()
    if profile_judge == "prm_judge":
        if scorer is None:
            raise ValueError("the prm_judge needs a PRM scorer (the judge model)")
        return PRMJudge(scorer, task)
    raise ValueError(f"unknown judge {profile_judge!r}; known: step_verifier, prm_judge")
