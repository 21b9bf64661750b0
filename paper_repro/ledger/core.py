"""The FLOP ledger itself: C_search / C_learning / C_reward per optimizer step, the budget's stop
rule and the JSONL log.

:class:`FlopLedger` accumulates what the hooks of :class:`~paper_repro.ledger.trainer.LedgerGRPOTrainer`
charge it: FLOPs per component, token and row counts (:data:`TOKEN_COUNTS`) and wall seconds, closed
into one record per optimizer step. :class:`~paper_repro.ledger.config.LedgerConfig` holds its
options (and the trainer's); it is importable from here too.

Token counts become FLOPs through :mod:`paper_repro.accounting.flops` under two conventions: ``useful`` (real
tokens, causal attention: what the paper counts, and what the budget is charged in) and
``executed`` (padding, rows HF ``generate`` keeps decoding after EOS, full attention squares, and
TRL's fused head scoring every position on CPU). :func:`forward_pass_work` and
:func:`generation_pass_work` count the work of one pass from its masks and lengths.

Budget: the IsoFLOP contract. A run stops at the end of a generation round when the next round,
predicted as the most expensive round so far (or ``LedgerConfig.round_ceiling_flops`` when set, raised
to the dearest round so far where one cost more: :meth:`FlopLedger.round_ceiling`), would
take the useful C_total past ``budget_flops`` (:meth:`FlopLedger.should_stop`). Before any compute the
trainer prices the costliest round it can meet (:mod:`paper_repro.ledger.pricing`) and refuses a
budget below it.

Outputs: with ``LedgerConfig.log_path`` one JSONL line per optimizer step (:meth:`FlopLedger.end_step`)
and the summary beside it at the end of training; the running totals as TRL-style metrics
(:meth:`FlopLedger.metrics`, :data:`METRIC_NAMES`).
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from paper_repro.accounting import flops
from paper_repro.accounting.flops import CONVENTIONS, ModelShape, TrainSpec, Work
from paper_repro.ledger.config import BUDGET_STOPS, BudgetWarning, LedgerConfig  # noqa: F401 (re-exported)
from paper_repro.ledger.trl_core_read import real_rows_work

Component = Literal["search", "learning", "reward"]
COMPONENTS: tuple[Component, ...] = ("search", "learning", "reward")
# The token and row counts a step records (summed over processes in a multi-GPU run).
TOKEN_COUNTS = (
    "gen_rows",
    "gen_prompt_tokens",
    "gen_completion_tokens",
    "gen_executed_tokens",
    "loss_rows",
    "loss_tokens",
    "loss_executed_tokens",
    "old_forward_rows",
    "ref_forward_rows",
    "reward_tokens",  # real tokens through the reward models the ledger sees run
    "reward_priced_rows",  # completions a reward function's flop_cost priced (its tokens unseen)
    "kept_rows",
)
# C_learning's parts: the loss passes (forward and backward), the no-grad old-policy forwards
# (mu > 1) and the no-grad reference forwards (beta != 0); they sum to C_learning.
LearningPart = Literal["loss", "old", "ref"]
LEARNING_PARTS: tuple[LearningPart, ...] = ("loss", "old", "ref")


# The version of FlopLedger.state_dict(), saved with every checkpoint (paper_repro.ledger.resume).
LEDGER_STATE_VERSION = 1


def check_flop_cost(cost: dict[str, float], source: str) -> dict[str, float]:
    """``cost`` (FLOPs per convention) when every value is finite and >= 0, else a ValueError that
    names where it came from (``source``: a reward function's ``flop_cost``)."""
    bad = {c: v for c, v in cost.items() if not (math.isfinite(v) and v >= 0)}
    if bad:
        raise ValueError(
            f"{source} returned {bad}: FLOPs must be finite and >= 0 (a number, or "
            "{'useful': ..., 'executed': ...})"
        )
    return cost


# ---------------------------------------------------------------------------------------------
# Work counted from masks
# ---------------------------------------------------------------------------------------------


def forward_pass_work(
    attention_mask: torch.Tensor, logits_to_keep: int, compact_head: bool
) -> dict[str, Work]:
    """Useful and executed work of one TRL policy forward over prompt+completion rows.

    Real tokens are contiguous in each row (left-padded prompt, right-padded completion). TRL's
    fused head scores the completion positions only where Triton runs (CUDA/XPU), and every
    position but the last of each row elsewhere.
    """
    rows, width = attention_mask.shape
    head_useful = int(attention_mask[:, width - logits_to_keep :].sum())
    useful = real_rows_work(attention_mask, head_useful)
    head_executed = head_useful if compact_head else rows * (width - 1)
    executed = flops.padded_batch_work(rows, width, head_executed)
    return {"useful": useful, "executed": executed}


def generation_pass_work(
    prompt_lengths: Sequence[int],
    completion_lengths: Sequence[int],
    num_generations: int,
    prefix_cache: bool,
    padded: bool,
    sampler: Any = None,
) -> dict[str, Work]:
    """Useful and executed work of generating one completion per row.

    Rows come in groups of ``num_generations`` copies of one prompt (TRL's ``RepeatSampler``).
    With ``prefix_cache`` the first row of a group prefills the prompt, the others reuse it.
    ``padded`` is HF ``generate``: left-padded prompts, every row decoding until the longest ends;
    ``sampler`` (a :class:`paper_repro.sampler.LeanStats`): the lean sampler's padded batch, which
    drops finished rows, each decode step running the rows it records.
    """
    useful = Work()
    for i, (p, c) in enumerate(zip(prompt_lengths, completion_lengths, strict=True)):
        prefill = not prefix_cache or i % num_generations == 0
        useful = useful + flops.generation_work(p, c, prefill=prefill)
    if not padded:
        return {"useful": useful, "executed": useful}
    rows = len(prompt_lengths)
    if sampler is not None:
        executed = flops.padded_generation_work(
            rows, sampler.prompt_width, 0, sampler.decode_rows, sampler.prefill_rows or rows
        )
        return {"useful": useful, "executed": executed}
    steps = max(completion_lengths, default=0)
    executed = flops.padded_generation_work(rows, max(prompt_lengths, default=0), steps)
    return {"useful": useful, "executed": executed}


# ---------------------------------------------------------------------------------------------
# The ledger itself
# ---------------------------------------------------------------------------------------------


@dataclass
class _StepAccumulator:
    flops: dict[str, dict[str, float]] = field(
        default_factory=lambda: {c: dict.fromkeys(COMPONENTS, 0.0) for c in CONVENTIONS}
    )
    tokens: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    generated: bool = False
    # C_learning by part (LEARNING_PARTS), per convention
    learning_parts: dict[str, dict[str, float]] = field(
        default_factory=lambda: {c: dict.fromkeys(LEARNING_PARTS, 0.0) for c in CONVENTIONS}
    )


class FlopLedger:
    """Accumulates the FLOPs, token counts and wall seconds of a GRPO run, step by step."""

    def __init__(
        self,
        policy: ModelShape,
        train: TrainSpec,
        config: LedgerConfig | None = None,
    ) -> None:
        self.policy = policy
        self.train = train
        self.config = config or LedgerConfig()
        self.steps: list[dict[str, Any]] = []
        self.rounds: list[float] = []  # useful C_total of each completed generation round
        self._round_cost = 0.0
        self._useful_total = 0.0  # running sum, so the per-step budget check does not rescan the steps
        self._current = _StepAccumulator()
        self._step_start = time.perf_counter()
        self.stopped_by_budget = False
        self.stop_reason: str | None = None  # why the budget stopped the run (see stop_before)
        self._ceiling_warned = False  # a finished round cost more than the given ceiling (round_ceiling)
        # what the trainer is running now: "search", "loss", "old", "ref", "reward", or None between
        # them (set by the trainer's hooks; the card's per-phase compute dtypes read it)
        self.phase: str | None = None
        # where the round ceiling's prompt length comes from (the trainer's pricing says; None: unpriced)
        self.prompt_length_source: str | None = None
        # each resume of this run: {"checkpoint": the folder it resumed from, "step": its global step}
        self.resumed_from: list[dict[str, Any]] = []
        # running totals of the steps' records (added in step order, as a sum over them would be): the
        # summary, the per-step metrics and total_flos all read these
        self._totals = {c: dict.fromkeys(COMPONENTS, 0.0) for c in CONVENTIONS}
        self._token_totals: dict[str, float] = defaultdict(float)
        self._seconds_totals = dict.fromkeys((*COMPONENTS, "total"), 0.0)
        self._learning_parts_totals = {c: dict.fromkeys(LEARNING_PARTS, 0.0) for c in CONVENTIONS}
        if self.config.log_path:
            Path(self.config.log_path).parent.mkdir(parents=True, exist_ok=True)
            Path(self.config.log_path).write_text("")

    # --- charging ------------------------------------------------------------------------------
    def charge(self, component: Component, cost: dict[str, float]) -> None:
        for convention in CONVENTIONS:
            self._current.flops[convention][component] += cost[convention]

    def charge_priced_reward(self, cost: dict[str, float], rows: int) -> None:
        """C_reward of one call of a reward function with a ``flop_cost`` (``cost``: FLOPs per
        convention) that scored ``rows`` completions; the rows are counted (``reward_priced_rows``)
        because the tokens its model read are not the ledger's to see (see :meth:`metrics`)."""
        self.charge("reward", cost)
        self.count(reward_priced_rows=rows)

    def count(self, **tokens: float) -> None:
        for key, value in tokens.items():
            self._current.tokens[key] += value

    def add_seconds(self, component: str, seconds: float) -> None:
        self._current.seconds[component] += seconds

    def charge_generation(
        self, work: dict[str, Work], adapters_active: bool = True, merged_executed: float | None = None
    ) -> None:
        """``merged_executed``: the rollout ran merged weights, merging them cost this many FLOPs; the
        executed count then has no adapter matmuls per token, plus the merge."""
        lora = self.train.lora if adapters_active else None
        cost = {c: flops.forward_flops(self.policy, work[c], lora) for c in CONVENTIONS}
        if merged_executed is not None:
            cost["executed"] = flops.forward_flops(self.policy, work["executed"], None) + merged_executed
        self.charge("search", cost)
        self._current.generated = True

    def _charge_learning(self, part: LearningPart, cost: dict[str, float]) -> None:
        self.charge("learning", cost)
        for convention in CONVENTIONS:
            self._current.learning_parts[convention][part] += cost[convention]

    def charge_forward(
        self, work: dict[str, Work], adapters_active: bool, part: Literal["old", "ref"] | None = None
    ) -> None:
        """A no-grad policy forward: the old-policy log-probs (``part="old"``) or the reference ones
        (``"ref"``); ``part`` defaults to ``"old"`` with the adapters active, else ``"ref"``."""
        lora = self.train.lora if adapters_active else None
        part = part or ("old" if adapters_active else "ref")
        self._charge_learning(part, {c: flops.forward_flops(self.policy, work[c], lora) for c in CONVENTIONS})

    def charge_training_pass(self, work: dict[str, Work], executed_train: TrainSpec | None = None) -> None:
        """A loss pass (forward and backward); ``executed_train``: how the executed pass trained where
        that differs from the planner's ``self.train`` (no head recompute in backward)."""
        trains = {"useful": self.train, "executed": executed_train or self.train}
        self._charge_learning(
            "loss", {c: flops.train_flops(self.policy, work[c], trains[c]) for c in CONVENTIONS}
        )

    def training_pass_flops(self, work: Work) -> float:
        """Useful FLOPs of a loss pass over ``work``, as :meth:`charge_training_pass` charges it (the
        budget stop prices the next step's buffered micro-batches with it)."""
        return flops.train_flops(self.policy, work, self.train)

    def reduce_step(self, reduce_sum: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Sum the open step's FLOPs and token counts over processes (``reduce_sum``: an all-reduce,
        e.g. ``accelerator.reduce(t, "sum")``), so that on every process the ledger holds the whole
        run's totals and the budget stops every process at the same step. Seconds stay per process."""
        acc = self._current
        keys = [(c, k) for c in CONVENTIONS for k in COMPONENTS]
        part_keys = [(c, k) for c in CONVENTIONS for k in LEARNING_PARTS]
        values = [acc.flops[c][k] for c, k in keys] + [acc.tokens.get(k, 0.0) for k in TOKEN_COUNTS]
        values.append(float(acc.generated))
        values += [acc.learning_parts[c][k] for c, k in part_keys]
        summed = reduce_sum(torch.tensor(values, dtype=torch.float64)).tolist()
        for (c, k), v in zip(keys, summed, strict=False):
            acc.flops[c][k] = v
        for (c, k), v in zip(part_keys, summed[len(keys) + len(TOKEN_COUNTS) + 1 :], strict=True):
            acc.learning_parts[c][k] = v
        for k, v in zip(TOKEN_COUNTS, summed[len(keys) :], strict=False):
            if v or k in acc.tokens:
                acc.tokens[k] = v
        acc.generated = summed[len(keys) + len(TOKEN_COUNTS)] > 0

    # --- steps ---------------------------------------------------------------------------------
    def begin_step(self) -> None:
        self._step_start = time.perf_counter()

    def end_step(self, global_step: int, round_complete: bool) -> dict[str, Any]:
        """Close an optimizer step; return its record (also written to the JSONL log)."""
        wall = time.perf_counter() - self._step_start
        acc = self._current
        seconds = {
            "search": acc.seconds.get("search", 0.0),
            "reward": acc.seconds.get("reward", 0.0),
        }
        seconds["learning"] = max(wall - seconds["search"] - seconds["reward"], 0.0)
        seconds["total"] = wall
        useful = acc.flops["useful"]
        record = {
            "step": global_step,
            "generated": acc.generated,
            "flops": {c: {**acc.flops[c], "total": sum(acc.flops[c].values())} for c in CONVENTIONS},
            "tokens": dict(acc.tokens),
            "seconds": seconds,
            "learning_parts": {c: dict(acc.learning_parts[c]) for c in CONVENTIONS},
        }
        self._round_cost += sum(useful.values())
        self._useful_total += sum(useful.values())
        for c in CONVENTIONS:
            for k in COMPONENTS:
                self._totals[c][k] += acc.flops[c][k]
        for k, v in acc.tokens.items():
            self._token_totals[k] += v
        for k, v in seconds.items():
            self._seconds_totals[k] += v
        for c in CONVENTIONS:
            for k in LEARNING_PARTS:
                self._learning_parts_totals[c][k] += acc.learning_parts[c][k]
        if round_complete:
            self.rounds.append(self._round_cost)
            self._round_cost = 0.0
        self.steps.append(record)
        if self.config.log_path:
            with open(self.config.log_path, "a") as fh:
                fh.write(json.dumps(record) + "\n")
        self._current = _StepAccumulator()
        return record

    def stop_before(self, next_cost: float, what: str) -> bool:
        """True when ``next_cost`` more useful FLOPs (``what``: the step or round about to start) could
        take C_total past the budget; the run then stops, and :attr:`stop_reason` says why."""
        budget = self.config.budget_flops
        if budget is None or self._useful_total + next_cost <= budget:
            return False
        self.stopped_by_budget = True
        self.stop_reason = (
            f"{what} could cost up to {next_cost:.4g} useful FLOPs, which would pass the budget "
            f"({self._useful_total:.4g} spent + {next_cost:.4g} > {budget:.4g})"
        )
        return True

    def should_stop(self, round_ceiling: float | None = None) -> bool:
        """At the end of a generation round: True when the next round could take the useful C_total
        past the budget, priced at ``round_ceiling`` (default ``round_ceiling_flops``; a bound: the
        total never passes the budget), else as the dearest round so far (an estimate a run can
        outgrow by one round)."""
        if not self.rounds:
            return False
        ceiling = self.round_ceiling(round_ceiling or self.config.round_ceiling_flops)
        if ceiling:
            return self.stop_before(ceiling, "the next round, at its ceiling,")
        return self.stop_before(max(self.rounds), "the next round, priced as the dearest so far,")

    def round_ceiling(self, given: float | None) -> float | None:
        """The useful FLOPs the budget stop prices a next round at, from ``given`` (a round's ceiling:
        ``round_ceiling_flops``, or the trainer's own price; None: no ceiling, returned as None): the
        larger of ``given`` and the dearest round finished so far. A ceiling below what a round has cost
        is no bound, so the stop does not trust it; the first time a round passes it, a
        ``BudgetWarning`` gives both (the next round can still pass the dearest so far)."""
        if not given:
            return given
        dearest = max(self.rounds, default=0.0)
        if dearest <= given:
            return given
        if not self._ceiling_warned:
            self._ceiling_warned = True
            warnings.warn(
                f"a finished generation round cost {dearest:.4g} useful FLOPs, {dearest / given:.2f}x the "
                f"round ceiling the budget stop was given ({given:.4g}): the stop prices each next round "
                "at the dearest round so far instead, an estimate a dearer round can outrun; give a "
                "round_ceiling_flops that bounds a round (every completion at max_completion_length, the "
                "longest prompt)",
                BudgetWarning,
                stacklevel=3,
            )
        return dearest

    def warn_if_over_budget(self) -> None:
        """At the end of training: a ``BudgetWarning`` (spent / budget) when the useful C_total passed
        the budget (only ``budget_stop="overshoot"``, or a ceiling that was too low, can do it)."""
        budget, spent = self.config.budget_flops, self.total("useful")
        if budget is not None and spent > budget:
            warnings.warn(
                f"the FLOP ledger's run passed its budget: {spent:.4g} useful FLOPs of {budget:.4g} "
                f"({spent / budget - 1:+.1%}), with budget_stop={self.config.budget_stop!r}",
                BudgetWarning,
                stacklevel=3,
            )

    def stop_message(self, why: str) -> str:
        """The one line a stopped run logs: its rounds and steps, spent / budget, and ``why``."""
        spent = self.total("useful")
        budget = self.config.budget_flops
        share = f" of the budget {budget:.4g} ({spent / budget:.1%})" if budget else " (no budget)"
        generated = sum(step["generated"] for step in self.steps)
        cut = " (the last cut short)" if generated > len(self.rounds) else ""
        return (
            f"FLOP ledger: stopped after {generated} generation round(s){cut} and {len(self.steps)} "
            f"optimizer step(s), at {spent:.4g} useful FLOPs{share}: {why}"
        )

    def metrics(self) -> dict[str, float]:
        """The run so far as TRL-style metrics (:data:`METRIC_NAMES`): cumulative useful FLOPs per
        component (``flops/search`` ...), the same under ``executed`` (``flops/executed/search`` ...),
        rho under each, the time-based rho and the tokens of each component. Values, not deltas.

        ``tokens/reward`` is the real tokens the reward models read, the tokens C_reward was charged
        for: 0 with rule-based rewards, whose C_reward is 0 too. A reward function's ``flop_cost``
        charges C_reward without tokens (the ledger does not see what its model reads), so once one
        has priced a call, ``tokens/reward`` is left out of the metrics rather than logged as a 0, or
        as the reward models' part alone, beside a C_reward it does not account for; the priced
        completions are ``reward_priced_rows`` in the summary's ``tokens``."""
        out: dict[str, float] = {}
        for convention in CONVENTIONS:
            prefix = "flops/" if convention == "useful" else f"flops/{convention}/"
            comp = self._totals[convention]
            total = sum(comp.values())
            for k, v in comp.items():
                out[prefix + k] = v
            out[prefix + "total"] = total
            out[prefix + "rho"] = comp["learning"] / total if total > 0 else float("nan")
        secs = self._seconds_totals
        out["flops/rho_time"] = secs["learning"] / secs["total"] if secs["total"] > 0 else float("nan")
        tokens = self._token_totals
        out["tokens/search"] = tokens.get("gen_prompt_tokens", 0.0) + tokens.get("gen_completion_tokens", 0.0)
        out["tokens/learning"] = tokens.get("loss_tokens", 0.0)
        if not tokens.get("reward_priced_rows"):
            out["tokens/reward"] = tokens.get("reward_tokens", 0.0)
        return out

    # --- saved with a checkpoint --------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to go on as if it had not stopped: the step log, the completed
        rounds, the running totals, the budget's stop and the resumes so far (JSON-ready; floats
        round-trip exactly through ``json``)."""
        return {
            "version": LEDGER_STATE_VERSION,
            "steps": self.steps,
            "rounds": self.rounds,
            "round_cost": self._round_cost,
            "useful_total": self._useful_total,
            "totals": self._totals,
            "token_totals": dict(self._token_totals),
            "seconds_totals": self._seconds_totals,
            "learning_parts_totals": self._learning_parts_totals,
            "stopped_by_budget": self.stopped_by_budget,
            "stop_reason": self.stop_reason,
            "resumed_from": self.resumed_from,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s state, and rewrite the JSONL log (``log_path``) to the restored
        steps: a step logged after the checkpoint was written, and lost with the process, is dropped
        there as it is here. A round cut by the checkpoint is not carried over: TRL does not save its
        buffer of rollouts and opens a new round on resume, so the cut round's steps stay charged and
        the round is not counted as complete."""
        if state.get("version") != LEDGER_STATE_VERSION:
            raise ValueError(
                f"a FLOP ledger state of version {state.get('version')!r}; this ledger reads version "
                f"{LEDGER_STATE_VERSION}"
            )
        self.steps = [dict(step) for step in state["steps"]]
        self.rounds = [float(r) for r in state["rounds"]]
        self._round_cost = 0.0
        self._useful_total = float(state["useful_total"])
        self._totals = {c: {k: float(v) for k, v in state["totals"][c].items()} for c in CONVENTIONS}
        self._token_totals = defaultdict(float, {k: float(v) for k, v in state["token_totals"].items()})
        self._seconds_totals = {k: float(v) for k, v in state["seconds_totals"].items()}
        self._learning_parts_totals = {
            c: {k: float(v) for k, v in state["learning_parts_totals"][c].items()} for c in CONVENTIONS
        }
        self.stopped_by_budget = bool(state["stopped_by_budget"])
        self.stop_reason = state["stop_reason"]
        self.resumed_from = [dict(r) for r in state["resumed_from"]]
        self._current = _StepAccumulator()
        if self.config.log_path:
            path = Path(self.config.log_path)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text("".join(json.dumps(step) + "\n" for step in self.steps))
            os.replace(tmp, path)

    # --- totals --------------------------------------------------------------------------------
    def component_totals(self, convention: str = "useful") -> dict[str, float]:
        return dict(self._totals[convention])

    def total(self, convention: str = "useful") -> float:
        return sum(self.component_totals(convention).values())

    def seconds_totals(self) -> dict[str, float]:
        return dict(self._seconds_totals)

    def summary(self) -> dict[str, Any]:
        """Totals per convention with rho, wall seconds with a time-based rho, and the budget."""
        out: dict[str, Any] = {"steps": len(self.steps), "rounds": len(self.rounds)}
        for convention in CONVENTIONS:
            comp = self.component_totals(convention)
            total = sum(comp.values())
            out[convention] = {
                **{f"C_{k}": v for k, v in comp.items()},
                "C_total": total,
                "rho": comp["learning"] / total if total > 0 else float("nan"),
            }
        secs = self.seconds_totals()
        out["seconds"] = secs
        out["rho_time"] = secs["learning"] / secs["total"] if secs["total"] > 0 else float("nan")
        out["budget_flops"] = self.config.budget_flops
        out["stopped_by_budget"] = self.stopped_by_budget
        out["over_budget"] = bool(
            self.config.budget_flops and self.total("useful") > self.config.budget_flops
        )
        out["budget_stop"] = self.config.budget_stop
        out["budget_spent"] = (
            self.total("useful") / self.config.budget_flops if self.config.budget_flops else None
        )
        out["stop_reason"] = self.stop_reason
        out["max_round_flops"] = max(self.rounds) if self.rounds else float("nan")
        out["resumed_from"] = [dict(r) for r in self.resumed_from]
        out["tokens"] = dict(self._token_totals)
        # C_learning by part (loss passes, old-policy and reference forwards), per convention
        out["learning_parts"] = self.learning_parts()
        return out

    def learning_parts(self) -> dict[str, dict[str, float]]:
        """C_learning split into the loss passes (``loss``), the old-policy forwards (``old``) and the
        reference forwards (``ref``), per convention; each convention's parts sum to its C_learning."""
        return {c: dict(self._learning_parts_totals[c]) for c in CONVENTIONS}

    def write_summary(self, path: str | Path) -> None:
        """The summary as strict JSON: a ratio or maximum with nothing to measure (NaN in
        :meth:`summary`) is written as null, with the reason in ``missing``."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        summary = self.summary()
        reasons = {
            "max_round_flops": "no generation round completed",
            "rho_time": "no wall seconds recorded",
            "rho": "no FLOPs counted",
        }
        missing: dict[str, str] = {}
        for key, value in summary.items():
            if isinstance(value, float) and not math.isfinite(value):
                summary[key], missing[key] = None, reasons.get(key, "not measured")
        for convention in CONVENTIONS:
            rho = summary[convention]["rho"]
            if not math.isfinite(rho):
                summary[convention]["rho"], missing[f"{convention}.rho"] = None, reasons["rho"]
        summary["missing"] = missing
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
        os.replace(tmp, path)


# What :meth:`FlopLedger.metrics` puts into TRL's metrics each optimizer step (cumulative values);
# ``tokens/reward`` only while no reward function's flop_cost has priced C_reward (see metrics).
METRIC_NAMES: tuple[str, ...] = (
    *(f"flops/{k}" for k in (*COMPONENTS, "total", "rho")),
    *(f"flops/executed/{k}" for k in (*COMPONENTS, "total", "rho")),
    "flops/rho_time",
    *(f"tokens/{k}" for k in COMPONENTS),
)


def as_conventions(cost: Any, source: str = "a reward function's flop_cost") -> dict[str, float]:
    """A reward function's ``flop_cost`` result as {useful, executed} FLOPs: a number counts for both.
    A result of another form (None, a dict without both keys, a pair of the wrong length, a value that
    is not a number) is a TypeError, and a negative, infinite or NaN count a ValueError, each naming
    ``source`` and the forms it may take."""
    forms = "a number of FLOPs, a (useful, executed) pair, or {'useful': ..., 'executed': ...}"
    if isinstance(cost, Mapping):
        missing = [c for c in CONVENTIONS if c not in cost]
        if missing:
            raise TypeError(
                f"{source} returned a dict without {' and '.join(map(repr, missing))} (keys: "
                f"{', '.join(map(repr, cost)) or 'none'}); it must return {forms}"
            )
        values = [cost[c] for c in CONVENTIONS]
    elif isinstance(cost, (tuple, list)):
        values = list(cost) if len(cost) == len(CONVENTIONS) else None
    else:
        values = [cost] * len(CONVENTIONS)
    try:
        if values is None or any(isinstance(v, (str, bytes)) for v in values):
            raise TypeError
        out = {c: float(v) for c, v in zip(CONVENTIONS, values, strict=True)}
    except (TypeError, ValueError):
        raise TypeError(f"{source} returned {cost!r}; it must return {forms}") from None
    return check_flop_cost(out, source)
