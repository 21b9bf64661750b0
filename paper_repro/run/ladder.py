"""A run's budget ladder: its policy evaluated at budget points along the run (``curves.csv``).

A full-budget run of the study carries the profile's ladder (:class:`paper_repro.config.Curves`,
``RunSpec.ladder``): budget points below its own budget, as multiples of the full budget C. At each
point B the policy is evaluated as a run of the same spec *whose budget is B* would have left it:

- **the same stop rule.** After every optimizer step the ledger prices what comes next
  (:meth:`~paper_repro.ledger.pricing.RoundPricing._price_of_next`: the next round at its ceiling,
  the dearest round so far, or the next step, by the profile's budget stop); that price does not
  depend on the budget. A run of budget B stops at the first step where ``spent + price > B``, or
  where it reaches its own ``max_steps`` cap (:func:`paper_repro.run.trainer.max_steps_for`), so point B
  is taken there. Spent and price only grow, so the points are taken in order;
- **the same policy, the same numbers.** The learning rate is constant and the recipe (P, G, K, mu)
  does not depend on the budget, so the policy at point B is the B run's final one. It is evaluated
  on a merged copy of the adapted policy (as the run's own end evaluates ``merge_and_unload()``); the
  training model, its optimizer and every random generator are left as they were (the evaluation
  is greedy and restores torch's generator), so the run goes on as if nothing had happened.
  ``tests/test_ladder.py`` checks that the C/4 point of a run equals a C/4 run, row for row;
- **what is evaluated.** At the points of ``Curves.evaluate_all_at`` every set; elsewhere the native
  reward's held-out set alone (the other metrics are NaN there, and the row says ``native``). The
  run's own budget is the last point, with the run's full evaluation.

A point whose budget cannot buy one round of the cell (:func:`paper_repro.run.preflight.budget_problem`)
has no run to equal: its row is ``infeasible``, with NaN metrics and why. Each row is appended to
``curves.csv`` as its point is reached (atomically, keyed by run and point), so a run killed between
points keeps the points it reached, and its rerun evaluates only the points that are missing and
writes no second row for any. The ladder is not part of the run's identity (the points leave the run
as it was): a run recorded without some of its points (killed after its row, or made before the
ladder reached it) is run again to measure them, and its row in ``runs.csv`` is not written twice.
"""

from __future__ import annotations

import copy
import functools
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from paper_repro.common import provenance
from paper_repro.common.console import report
from paper_repro.common.results import CURVE_COLUMNS, METRICS, ResultTable, curve_id, row_identity
from paper_repro.evaluation.evaluate import EvalSets
from paper_repro.run.preflight import budget_problem
from paper_repro.run.run_eval import evaluate_run
from paper_repro.run.spec import RunSpec
from paper_repro.run.trainer import RunParts, max_steps_for

# What a point's row takes from the ledger's summary (cumulative to the point).
SPENT = ("rho", "C_search", "C_learning", "C_reward", "C_total")


@dataclass(frozen=True)
class Point:
    """One budget point of a run's ladder."""

    multiple: float  # of the full budget C
    flops: float
    evaluation: str  # "all" or "native"


def points_of(spec: RunSpec) -> list[Point]:
    """The ladder's points below the run's own budget, in order (a spec whose budget was changed by
    hand keeps those its budget reaches)."""
    unit = spec.ladder_unit or 0.0
    points = [Point(m, m * unit, evaluation) for m, evaluation in spec.ladder]
    return [p for p in points if p.flops < spec.budget_flops * (1 - 1e-9)]


def curves_table(root: Path) -> ResultTable:
    return ResultTable(root / "curves.csv", CURVE_COLUMNS, key="curve_id")


def missing_points(spec: RunSpec, recorded: set[str]) -> list[float]:
    """The points of ``spec``'s curve (its ladder and its own budget, as multiples of C) with no row
    among the ``recorded`` curve ids: what a rerun of the run still has to measure. A run without a
    ladder has no curve."""
    if not spec.ladder:
        return []
    ends = [
        *(p.multiple for p in points_of(spec)),
        spec.budget_flops / (spec.ladder_unit or spec.budget_flops),
    ]
    return [m for m in ends if curve_id(spec.run_id, m) not in recorded]


def point_row(spec: RunSpec, multiple: float, **values: Any) -> dict[str, Any]:
    """A ``curves.csv`` row of ``spec`` at budget ``multiple`` x C: the run's identity and recipe, the
    point, and ``values`` (spent FLOPs, rounds, metrics, seconds, status)."""
    unit = spec.ladder_unit or spec.budget_flops
    identity = row_identity(spec)
    stamp = provenance.stamp()
    row = {k: identity.get(k, "") for k in CURVE_COLUMNS}
    row.update(
        curve_id=curve_id(spec.run_id, multiple),
        point=multiple,
        point_flops=multiple * unit,
        final=abs(multiple * unit - spec.budget_flops) <= 1e-9 * spec.budget_flops,
        git_sha=stamp["git_sha"],
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        error="",
    )
    row.update(values)
    return row


def spent_so_far(summary: dict[str, Any]) -> dict[str, Any]:
    """The FLOPs, rho, rounds and steps of a ledger summary, as a row's columns."""
    useful, executed = summary["useful"], summary["executed"]
    return {
        **{k: useful[k] for k in SPENT},
        "rho_executed": executed["rho"],
        "C_total_executed": executed["C_total"],
        "rho_time": summary["rho_time"],
        "rounds": summary["rounds"],
        "steps": summary["steps"],
    }


def final_row(
    spec: RunSpec, run: dict[str, Any], seconds_train: float, seconds_eval: float
) -> dict[str, Any]:
    """The ladder's last point: the run's own budget, its row's numbers and full evaluation."""
    unit = spec.ladder_unit or spec.budget_flops
    columns = (*SPENT, "rho_executed", "C_total_executed", "rho_time", "rounds", "steps", *METRICS)
    return point_row(
        spec,
        spec.budget_flops / unit,
        **{k: run[k] for k in columns},
        evaluation="all",
        seconds_train=seconds_train,
        seconds_eval=seconds_eval,
        status="ok",
    )


def evaluate_point(spec: RunSpec, parts: RunParts, policy, evaluation: str) -> dict[str, float]:
    """The run's evaluation of ``policy`` on every set (``all``) or the native reward's held-out set
    alone (``native``: the other metrics NaN)."""
    if evaluation == "native":
        sets = parts.eval_sets
        parts = replace(parts, eval_sets=EvalSets(heldout=sets.heldout, gsm=(), math=()))
    return evaluate_run(spec, parts, policy)


def budget_ladder(trainer, spec: RunSpec, parts: RunParts, root: Path) -> BudgetLadder:
    """The trainer callback that takes ``spec``'s ladder points (:class:`BudgetLadder` as a
    ``transformers.TrainerCallback``, built on first use so that importing this module, as the
    runner does, does not import transformers' trainer)."""
    return _callback_class()(trainer, spec, parts, root)


@functools.cache
def _callback_class() -> type:
    from transformers import TrainerCallback

    return type("BudgetLadderCallback", (BudgetLadder, TrainerCallback), {"__doc__": BudgetLadder.__doc__})


class BudgetLadder:
    """Takes the run's ladder points as the run reaches them (see the module's docstring), as a trainer
    callback (:func:`budget_ladder`) added after the ledger's own, whose price of what comes next it
    reads. ``seconds`` is the evaluations' wall time so far, which the run's ``seconds_train`` leaves
    out."""

    def __init__(self, trainer, spec: RunSpec, parts: RunParts, root: Path) -> None:
        self.trainer, self.spec, self.parts = trainer, spec, parts
        self.table = curves_table(root)
        done = self.table.keys()
        self.pending: list[Point] = []
        self.seconds = 0.0
        self._start = time.perf_counter()
        for point in points_of(spec):
            if curve_id(spec.run_id, point.multiple) in done:
                continue  # a rerun after a kill: this point was reached and recorded
            problem = budget_problem(spec, point.flops)
            if problem is None:
                self.pending.append(point)
            elif trainer.accelerator.is_main_process:
                self.table.append(
                    point_row(
                        spec,
                        point.multiple,
                        **{m: float("nan") for m in METRICS},
                        evaluation=point.evaluation,
                        status="infeasible",
                        error=problem,
                    )
                )

    def on_train_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        price = self.trainer.next_price
        spent = self.trainer.ledger.total("useful")
        while self.pending:
            point = self.pending[0]
            stops = price is not None and spent + price[0] > point.flops
            if not (stops or state.global_step >= max_steps_for(self.spec, point.flops)):
                break
            self._take(self.pending.pop(0))
        return control

    def on_train_end(self, args, state, control, **kwargs):
        # the train dataset ran out (or another callback stopped it): a run of any budget left
        # would have stopped here too
        while self.pending:
            self._take(self.pending.pop(0))
        return control

    def _take(self, point: Point) -> None:
        trainer = self.trainer
        if not trainer.accelerator.is_main_process:
            return
        report("evaluating a budget point", f"{point.multiple:g} C")
        t0 = time.perf_counter()
        seconds_train = t0 - self._start - self.seconds
        policy = copy.deepcopy(trainer.model).merge_and_unload()
        metrics = evaluate_point(self.spec, self.parts, policy, point.evaluation)
        del policy
        seconds_eval = time.perf_counter() - t0
        self.seconds += seconds_eval
        self.table.append(
            point_row(
                self.spec,
                point.multiple,
                **spent_so_far(trainer.ledger.summary()),
                **metrics,
                evaluation=point.evaluation,
                seconds_train=seconds_train,
                seconds_eval=seconds_eval,
                status="ok",
            )
        )
