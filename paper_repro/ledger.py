"""A FLOP ledger for TRL's ``GRPOTrainer`` (TRL 1.16): C_search / C_learning / C_reward per step.

Drop it into any GRPO run by swapping the trainer class::

    from paper_repro.ledger import LedgerConfig, LedgerGRPOTrainer

    trainer = LedgerGRPOTrainer(
        model=model, reward_funcs=reward_fn, args=grpo_args, train_dataset=ds, peft_config=lora,
        ledger=LedgerConfig(budget_flops=3e15, log_path="run/ledger.jsonl"),
    )
    trainer.train()
    print(trainer.ledger.summary())

What it hooks (see ``docs/DESIGN.md`` §3.7):

* ``_generate_single_turn``: the prompt and completion tokens of every rollout (C_search);
* ``_get_per_token_logps_and_entropies``: every policy forward over prompt+completion. With grad
  off it is the old-policy or reference forward (adapters disabled = reference); with grad on it is
  the loss pass, whose backward follows (C_learning);
* ``_calculate_rewards``: the reward functions; a reward model's cost comes from its own token
  counts (TRL's ``nn.Module`` path) or from the function's ``flop_cost`` attribute (C_reward);
* a ``TrainerCallback`` closes each optimizer step: one JSONL line, wall seconds per component,
  and the budget check.

Token counts become FLOPs through :mod:`paper_repro.flops` under two conventions: ``useful`` (real
tokens, causal attention: what the paper counts, and what the budget is charged in) and
``executed`` (padding, rows HF ``generate`` keeps decoding after EOS, full attention squares, and
TRL's fused head scoring every position on CPU).

Down-sampling: with ``kept < num_generations`` the ledger keeps K of the G completions of each
prompt after scoring (PODS max-variance selection, arXiv 2504.13818, or random), recomputes the
group advantages and the loss normaliser over the kept rows and trims all-padding columns. The
old/ref forwards have already run on all G rows: down-sampling does not save them.

Budget: the IsoFLOP contract. A run stops at the end of a generation round when the next round,
predicted as the most expensive round so far, would take the useful C_total past
``budget_flops``. Before any compute the trainer prices the costliest round it can meet from what it
sees (:meth:`LedgerGRPOTrainer.price_round_ceiling`) and refuses a budget below it.

What else reaches the outside:

* TRL's metrics path: every optimizer step sets ``flops/*`` and ``tokens/*`` in
  ``GRPOTrainer._metrics``, so every ``report_to`` backend and ``state.log_history`` carry them
  (:data:`METRIC_NAMES`);
* ``state.total_flos`` is the ledger's useful C_total, so the trainer's end-of-training summary is right;
* a compute card (JSON and Markdown) written at the end of training (:func:`compute_card`).

It hooks private methods of TRL: it refuses a TRL version outside :data:`SUPPORTED_TRL_VERSIONS`.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer
from trl.trainer.utils import nanstd

from paper_repro import flops
from paper_repro.flops import CONVENTIONS, GRPOStep, ModelShape, TrainSpec, Work

# The TRL versions whose private methods (``_generate_single_turn``, ``_get_per_token_logps_and_entropies``,
# ``_calculate_rewards``, ``_generate_and_score_completions``, ``_metrics``) the ledger was tested with.
SUPPORTED_TRL_VERSIONS: tuple[str, ...] = ("1.16.0",)

Component = Literal["search", "learning", "reward"]
COMPONENTS: tuple[Component, ...] = ("search", "learning", "reward")
# The token and row counts a step records (summed over processes in a multi-GPU run).
TOKEN_COUNTS = ("gen_rows", "gen_prompt_tokens", "gen_completion_tokens", "gen_executed_tokens",
                "loss_rows", "loss_tokens", "loss_executed_tokens", "old_forward_rows",
                "ref_forward_rows", "reward_tokens", "kept_rows")  # fmt: skip


@dataclass(frozen=True)
class LedgerConfig:
    """Options of the ledger; every field has a working default."""

    budget_flops: float | None = None  # stop before the round that would pass this (useful FLOPs)
    kept: int | None = None  # K completions kept per prompt for the update; None keeps all G
    downsample: Literal["max_variance", "random"] = "max_variance"
    log_path: str | Path | None = None  # one JSONL line per optimizer step
    prefix_cache: bool | None = None  # prompt prefilled once per prompt; default: on with vLLM
    first_round_flops: float | None = None  # the planner's estimate, to refuse a budget below one round
    # The most one round can cost (the longest prompt, every completion at the maximum length). With
    # it the budget stop is a guarantee: the run stops while another round could pass the budget.
    # Without it the next round is priced as the dearest so far, which completions that grow under
    # RL can outrun.
    round_ceiling_flops: float | None = None
    seed: int = 0  # for random down-sampling
    # Max-variance down-sampling compares rewards rounded to this many decimals (None: exact): float
    # noise in a learned reward then cannot change which completions are kept.
    selection_decimals: int | None = None
    # The compute card: written to ``<card_path>.json`` and ``<card_path>.md`` at the end of training;
    # default ``<output_dir>/compute_card``. ``write_card=False`` writes none.
    card_path: str | Path | None = None
    write_card: bool = True
    # The peak the card states utilisation against (FLOP/s); default: the table of known GPU peaks for a
    # GPU, a matmul peak measured in the process on CPU.
    peak_flops: float | None = None

    def __post_init__(self) -> None:
        if self.budget_flops is not None and not self.budget_flops > 0:
            raise ValueError(f"budget_flops must be positive, got {self.budget_flops}")
        if self.kept is not None and self.kept < 1:
            raise ValueError(f"kept must be >= 1, got {self.kept}")
        if self.downsample not in ("max_variance", "random"):
            raise ValueError(f"downsample must be 'max_variance' or 'random', got {self.downsample!r}")


# ---------------------------------------------------------------------------------------------
# Work counted from masks
# ---------------------------------------------------------------------------------------------


def real_rows_work(mask: torch.Tensor, head_tokens: int | None = None) -> Work:
    """Useful work of a forward over padded rows whose real tokens are contiguous: each row's real
    tokens attend causally; ``head_tokens`` defaults to every real position."""
    lengths = mask.sum(dim=1).tolist()
    tokens = sum(lengths)
    return Work(
        tokens, sum(flops.causal_pairs(n) for n in lengths), tokens if head_tokens is None else head_tokens
    )


UPDATE_LAYOUTS = ("padded", "bucketed", "fused")


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
# Down-sampling
# ---------------------------------------------------------------------------------------------


def max_variance_subset(rewards: Sequence[float], k: int, decimals: int | None = None) -> list[int]:
    """Indices of the k rewards with the largest variance: the best mix of the j highest and the
    k - j lowest (PODS max-variance down-sampling, arXiv 2504.13818). Ties keep input order.

    ``decimals``: compare the rewards rounded to this many decimals, so that rewards a float's noise
    apart (a learned PRM's scores differ by 1e-9 across machines) are ties, kept in input order,
    rather than an order the noise decides."""
    n = len(rewards)
    if not 1 <= k <= n:
        raise ValueError(f"cannot keep {k} of {n} completions")
    if decimals is not None:
        rewards = [round(float(r), decimals) for r in rewards]
    order = sorted(range(n), key=lambda i: (rewards[i], i))
    best, best_var = None, -math.inf
    for j in range(k + 1):  # j from the top, k - j from the bottom
        chosen = order[: k - j] + (order[n - j :] if j else [])
        vals = [rewards[i] for i in chosen]
        mean = sum(vals) / k
        var = sum((v - mean) ** 2 for v in vals) / k
        if var > best_var + 1e-12:
            best, best_var = chosen, var
    return sorted(best)


def group_advantages(rewards: torch.Tensor, group: int, scale: str) -> torch.Tensor:
    """GRPO advantages over groups of ``group`` consecutive rows, as TRL computes them
    (``scale_rewards`` in {"group", "batch", "none"}; NaN rewards excluded, advantage 0)."""
    grouped = rewards.view(-1, group)
    adv = grouped - torch.nanmean(grouped, dim=1, keepdim=True)
    if scale == "group":
        std = nanstd(grouped, dim=1, keepdim=True) if group > 1 else torch.zeros_like(adv[:, :1])
        adv = adv / (std + 1e-4)
    elif scale == "batch":
        adv = adv / (nanstd(rewards) + 1e-4)
    elif scale != "none":
        raise ValueError(f"unknown scale_rewards {scale!r}")
    return torch.nan_to_num(adv.flatten(), nan=0.0)


_PER_ROW_TOKEN_KEYS = (
    "completion_ids",
    "completion_mask",
    "old_per_token_logps",
    "ref_per_token_logps",
    "sampling_per_token_logps",
    "tool_mask",
    "importance_sampling_ratio",
)


def downsample_batch(
    batch: dict[str, Any], keep: torch.Tensor, advantages: torch.Tensor, num_items: torch.Tensor
) -> dict[str, Any]:
    """Keep the rows ``keep`` of a TRL generation batch, set their advantages and loss normaliser,
    and trim the columns that are padding in every kept row."""
    out = dict(batch)
    rows = batch["prompt_ids"].size(0)
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.size(0) == rows:
            out[key] = value[keep]
    out["advantages"] = advantages
    out["num_items_in_batch"] = num_items
    prompt_cols = out["prompt_mask"].any(dim=0).nonzero()
    first = int(prompt_cols.min()) if len(prompt_cols) else out["prompt_mask"].size(1)
    out["prompt_ids"], out["prompt_mask"] = out["prompt_ids"][:, first:], out["prompt_mask"][:, first:]
    completion_cols = out["completion_mask"].any(dim=0).nonzero()
    last = int(completion_cols.max()) + 1 if len(completion_cols) else 1
    for key in _PER_ROW_TOKEN_KEYS:
        value = out.get(key)
        if isinstance(value, torch.Tensor) and value.dim() == 2 and value.size(1) > 1:
            out[key] = value[:, :last]
    return out


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
        # running totals of the steps' records (added in step order, as a sum over them would be): the
        # summary, the per-step metrics and total_flos all read these
        self._totals = {c: dict.fromkeys(COMPONENTS, 0.0) for c in CONVENTIONS}
        self._token_totals: dict[str, float] = defaultdict(float)
        self._seconds_totals = dict.fromkeys((*COMPONENTS, "total"), 0.0)
        if self.config.log_path:
            Path(self.config.log_path).parent.mkdir(parents=True, exist_ok=True)
            Path(self.config.log_path).write_text("")

    # --- charging ------------------------------------------------------------------------------
    def charge(self, component: Component, cost: dict[str, float]) -> None:
        for convention in CONVENTIONS:
            self._current.flops[convention][component] += cost[convention]

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

    def charge_forward(self, work: dict[str, Work], adapters_active: bool) -> None:
        lora = self.train.lora if adapters_active else None
        self.charge("learning", {c: flops.forward_flops(self.policy, work[c], lora) for c in CONVENTIONS})

    def charge_training_pass(self, work: dict[str, Work], executed_train: TrainSpec | None = None) -> None:
        """A loss pass (forward and backward); ``executed_train``: how the executed pass trained where
        that differs from the planner's ``self.train`` (no head recompute in backward)."""
        trains = {"useful": self.train, "executed": executed_train or self.train}
        self.charge("learning", {c: flops.train_flops(self.policy, work[c], trains[c]) for c in CONVENTIONS})

    def reduce_step(self, reduce_sum: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Sum the open step's FLOPs and token counts over processes (``reduce_sum``: an all-reduce,
        e.g. ``accelerator.reduce(t, "sum")``), so that on every process the ledger holds the whole
        run's totals and the budget stops every process at the same step. Seconds stay per process."""
        acc = self._current
        keys = [(c, k) for c in CONVENTIONS for k in COMPONENTS]
        values = [acc.flops[c][k] for c, k in keys] + [acc.tokens.get(k, 0.0) for k in TOKEN_COUNTS]
        values.append(float(acc.generated))
        summed = reduce_sum(torch.tensor(values, dtype=torch.float64)).tolist()
        for (c, k), v in zip(keys, summed, strict=False):
            acc.flops[c][k] = v
        for k, v in zip(TOKEN_COUNTS, summed[len(keys) :], strict=False):
            if v or k in acc.tokens:
                acc.tokens[k] = v
        acc.generated = summed[-1] > 0

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
        if round_complete:
            self.rounds.append(self._round_cost)
            self._round_cost = 0.0
        self.steps.append(record)
        if self.config.log_path:
            with open(self.config.log_path, "a") as fh:
                fh.write(json.dumps(record) + "\n")
        self._current = _StepAccumulator()
        return record

    def should_stop(self) -> bool:
        """True when the next generation round could take the useful C_total past the budget:
        priced at ``round_ceiling_flops`` when set (a bound: the total never passes the budget),
        else as the dearest round so far (an estimate)."""
        budget = self.config.budget_flops
        if budget is None or not self.rounds:
            return False
        next_round = self.config.round_ceiling_flops or max(self.rounds)
        if self._useful_total + next_round > budget:
            self.stopped_by_budget = True
            return True
        return False

    def metrics(self) -> dict[str, float]:
        """The run so far as TRL-style metrics (:data:`METRIC_NAMES`): cumulative useful FLOPs per
        component (``flops/search`` ...), the same under ``executed`` (``flops/executed/search`` ...),
        rho under each, the time-based rho and the tokens of each component. Values, not deltas."""
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
        out["tokens/reward"] = tokens.get("reward_tokens", 0.0)
        return out

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
        out["max_round_flops"] = max(self.rounds) if self.rounds else float("nan")
        out["tokens"] = dict(self._token_totals)
        return out

    def write_summary(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.summary(), indent=2) + "\n")


# What :meth:`FlopLedger.metrics` puts into TRL's metrics each optimizer step (cumulative values).
METRIC_NAMES: tuple[str, ...] = (
    *(f"flops/{k}" for k in (*COMPONENTS, "total", "rho")),
    *(f"flops/executed/{k}" for k in (*COMPONENTS, "total", "rho")),
    "flops/rho_time",
    *(f"tokens/{k}" for k in COMPONENTS),
)


class _LedgerCallback(TrainerCallback):
    def __init__(self, trainer: LedgerGRPOTrainer) -> None:
        self.trainer = trainer

    def on_step_begin(self, args, state, control, **kwargs):
        self.trainer._sync()
        self.trainer.ledger.begin_step()

    def on_train_end(self, args, state, control, **kwargs):
        trainer = self.trainer
        log_path = trainer.ledger.config.log_path
        if log_path:
            trainer.ledger.write_summary(Path(log_path).with_suffix(".summary.json"))
        if trainer.ledger.config.write_card and trainer.accelerator.is_main_process:
            trainer.write_compute_card()

    def on_step_end(self, args, state, control, **kwargs):
        trainer = self.trainer
        trainer._sync()
        generate_every = args.steps_per_generation * trainer.num_iterations
        round_complete = trainer._step % generate_every == 0
        accelerator = trainer.accelerator
        if accelerator.num_processes > 1:
            trainer.ledger.reduce_step(lambda t: accelerator.reduce(t.to(accelerator.device), "sum").cpu())
        trainer.ledger.end_step(state.global_step, round_complete)
        # cumulative values, set (not appended) as TRL sets num_tokens: the logged value is the
        # total at the logging step, whatever logging_steps is
        metrics = trainer._metrics["train"]
        for name, value in trainer.ledger.metrics().items():
            metrics[name] = [value]
        if round_complete and trainer.ledger.should_stop():
            control.should_training_stop = True
        return control


# ---------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------


def _lora_spec_of(model: Any, num_layers: int) -> flops.LoRASpec | None:
    """The active LoRA adapters of a PEFT model as a LoRASpec (None for a plain model: full
    training), read from the adapted modules themselves."""
    ranks: dict[str, set[int]] = defaultdict(set)
    for name, module in model.named_modules():
        lora_a = getattr(module, "lora_A", None)
        if isinstance(lora_a, torch.nn.ModuleDict) and len(lora_a):
            for adapter in module.active_adapters:
                if adapter in lora_a:
                    ranks[name.rsplit(".", 1)[-1]].add(lora_a[adapter].out_features)
    if not ranks:
        return None
    all_ranks = set().union(*ranks.values())
    counts = defaultdict(int)
    for name, module in model.named_modules():
        if isinstance(getattr(module, "lora_A", None), torch.nn.ModuleDict) and len(module.lora_A):
            counts[name.rsplit(".", 1)[-1]] += 1
    if len(all_ranks) != 1 or any(n != num_layers for n in counts.values()):
        raise ValueError(
            "the FLOP ledger supports one LoRA rank on the same modules of every layer; "
            f"found ranks {sorted(all_ranks)} on {dict(counts)} (of {num_layers} layers)"
        )
    return flops.LoRASpec(rank=all_ranks.pop(), target_modules=tuple(sorted(ranks)))


class LedgerGRPOTrainer(GRPOTrainer):
    """``trl.GRPOTrainer`` with a FLOP ledger, a FLOP budget and K-of-G down-sampling.

    Takes every ``GRPOTrainer`` argument plus ``ledger`` (a :class:`LedgerConfig`). After
    ``train()``, ``trainer.ledger`` holds the per-step records and ``trainer.ledger.summary()``
    the totals. On the way:

    * construction refuses a TRL version outside :data:`SUPPORTED_TRL_VERSIONS`, and a budget below
      one round (the user's ``first_round_flops`` / ``round_ceiling_flops``, else the round the
      trainer prices itself: :meth:`price_round_ceiling`);
    * every optimizer step puts the run's running totals into TRL's metrics (:data:`METRIC_NAMES`,
      e.g. ``flops/search``, ``flops/executed/total``, ``flops/rho``, ``flops/rho_time``,
      ``tokens/learning``). They are cumulative values, set as TRL sets ``num_tokens``: what a
      logging step shows is the total up to that step, whatever ``logging_steps`` is; differences of
      consecutive log entries are the window's FLOPs;
    * ``state.total_flos`` is the useful C_total (:meth:`store_flos`);
    * at the end of training the compute card is written (:func:`compute_card`) to
      ``LedgerConfig.card_path`` + ``.json`` / ``.md`` (default ``<output_dir>/compute_card``).
    """

    def __init__(
        self,
        *args: Any,
        ledger: LedgerConfig | None = None,
        sampler: str = "hf",
        update_layout: str = "padded",
        **kwargs: Any,
    ) -> None:
        check_trl_version()
        from paper_repro.sampler import SAMPLERS

        if sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
        if update_layout not in UPDATE_LAYOUTS:
            raise ValueError(f"update_layout must be one of {UPDATE_LAYOUTS}, got {update_layout!r}")
        super().__init__(*args, **kwargs)
        # "lean": rollouts by paper_repro.sampler where it reproduces HF generate (else HF generate);
        # "fused": by its fused decoder (the same model and distribution, other roundings)
        self.sampler = sampler
        # "bucketed": TRL's policy forwards over length buckets (paper_repro.buckets); "fused": over
        # the same buckets by paper_repro.fused_update's forward instead of HF's and TRL's fused head
        self.update_layout = update_layout
        self.fused_update_fallback: str | None = None  # why the last "fused" forward ran HF's instead
        self.lean_fallback: str | None = None  # why the last rollout fell back to HF generate
        config = ledger or LedgerConfig()
        base = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        shape = ModelShape.from_config(base.config)
        lora = _lora_spec_of(self.model, shape.num_layers)
        train = TrainSpec(
            lora=lora,
            # the flag Trainer enables checkpointing by (`gradient_checkpointing` is its deprecated alias)
            gradient_checkpointing=bool(self.args.activation_checkpointing),
            head_recompute=True,  # TRL's fused LM head recomputes logits in backward
        )
        self.ledger = FlopLedger(shape, train, config)
        self._kept = config.kept or self.num_generations
        self._prefix_cache = self.use_vllm if config.prefix_cache is None else config.prefix_cache
        self._downsample_rng = torch.Generator().manual_seed(config.seed)
        self._last_rewards: torch.Tensor | None = None
        self._adapter_layer = next(
            (m for m in self.model.modules() if isinstance(getattr(m, "lora_A", None), torch.nn.ModuleDict)),
            None,
        )
        self._check_downsampling()
        self.round_price: dict[str, Any] | None = None  # the self-priced ceiling (price_round_ceiling)
        self._check_first_round()
        if config.write_card and config.peak_flops is None and self.accelerator.device.type != "cuda":
            # measured now, not in the card at the end: inside train() the matmuls would show in any
            # FlopCounterMode around it and in its wall time (cached: once per process)
            from paper_repro.compute_card import cpu_matmul_peak

            cpu_matmul_peak()
        self.add_callback(_LedgerCallback(self))

    # --- validation ----------------------------------------------------------------------------
    def _check_downsampling(self) -> None:
        g, k = self.num_generations, self._kept
        if k > g:
            raise ValueError(f"kept K={k} cannot exceed num_generations G={g}")
        if k == g:
            return
        rows = self.args.per_device_train_batch_size * self.args.steps_per_generation
        if rows % g:
            raise ValueError(
                f"down-sampling needs whole groups on each process: per-device generation batch {rows} "
                f"is not a multiple of G={g}"
            )
        kept_rows = rows // g * k
        if kept_rows % self.args.steps_per_generation:
            raise ValueError(
                f"{kept_rows} kept rows (K={k} of G={g}) do not split into steps_per_generation="
                f"{self.args.steps_per_generation} micro-batches; TRL would silently drop rows"
            )
        if self.multi_objective_aggregation != "sum_then_normalize":
            raise ValueError("down-sampling supports multi_objective_aggregation='sum_then_normalize' only")

    def _check_first_round(self) -> None:
        """Refuse a budget below one round before any compute: against the user's
        ``first_round_flops`` / ``round_ceiling_flops`` when given, else against the ceiling the
        trainer prices itself (:meth:`price_round_ceiling`)."""
        config = self.ledger.config
        budget, first, ceiling = config.budget_flops, config.first_round_flops, config.round_ceiling_flops
        if budget is not None and first is None and ceiling is None:
            self.round_price = self.price_round_ceiling()
            if self.round_price is not None and self.round_price["C_total"] > budget:
                price = self.round_price
                raise ValueError(
                    f"budget {budget:.3g} FLOPs does not surely buy one generation round: one round needs up "
                    f"to {price['C_total']:.3g} useful FLOPs (P={price['P']} prompts x G={price['G']}, "
                    f"K={price['K']}, mu={price['mu']}; the longest prompt, {price['prompt_tokens']} tokens, "
                    f"and every completion at max_completion_length={price['completion_tokens']}). Raise "
                    "the budget, or pass first_round_flops / round_ceiling_flops to price the round yourself"
                )
        if budget is not None and first is not None and first > budget:
            raise ValueError(
                f"budget {budget:.3g} FLOPs buys 0 generation rounds: one round needs about {first:.3g}"
            )
        if budget is not None and ceiling is not None and ceiling > budget:
            raise ValueError(
                f"budget {budget:.3g} FLOPs does not surely buy one generation round: the costliest "
                f"round (every completion at the maximum length) needs {ceiling:.3g}"
            )

    def price_round_ceiling(self) -> dict[str, Any] | None:
        """The most one generation round can cost (useful FLOPs), priced with the analytic FLOP model
        (:func:`paper_repro.flops.grpo_step_cost`) from what the trainer sees, before any compute:

        * the batch layout: a round is ``per_device_train_batch_size x steps_per_generation x world
          size`` rows, P = rows / G prompts of G = ``num_generations`` completions, K kept
          (``LedgerConfig.kept``), mu = ``num_iterations`` update epochs;
        * the longest prompt of the train dataset, tokenized as TRL tokenizes it
          (``_tokenize_prompts``: through the chat template for conversational prompts), and every
          completion at ``max_completion_length``;
        * the policy's shape from its config, LoRA from its PEFT adapters, gradient checkpointing;
          the old-policy forward by TRL's rule (mu > 1, or vLLM importance sampling), the reference
          forward when beta != 0 (priced with the adapters on: a bound), prefix caching as counted;
        * reward models (``nn.Module``) from their config, one forward over the longest prompt plus
          ``max_completion_length`` tokens per completion (assumes the reward tokenizer splits no
          finer than the policy's); reward functions with ``flop_cost`` by calling it on a worst-case
          batch: the longest prompt and a ``max_completion_length`` completion of one repeated
          ordinary token in each of the P x G rows. A function without ``flop_cost`` costs 0.

        Returns the priced round (``C_*``, ``rho`` and the layout), or None, with a warning, when the
        train dataset's prompts cannot be read (an iterable dataset): then nothing is refused."""
        args = self.args
        world = self.accelerator.num_processes
        rows = args.per_device_train_batch_size * args.steps_per_generation * world
        g, k, mu = self.num_generations, self._kept, self.num_iterations
        longest = self._longest_prompt()
        if longest is None:
            warnings.warn(
                "the FLOP ledger cannot read the train dataset's prompts to price a round: the budget is "
                "not checked before training; pass round_ceiling_flops",
                stacklevel=3,
            )
            return None
        prompt, prompt_tokens = longest
        c = args.max_completion_length
        old = args.gradient_accumulation_steps % (args.steps_per_generation * mu) != 0 or bool(
            self.use_vllm and self.vllm_importance_sampling_correction
        )
        step = GRPOStep(
            prompts=rows // g, generations=g, kept=k, epochs=mu, prompt_tokens=prompt_tokens,
            completion_tokens=c, beta=self.beta, old_logprobs=old, prefix_cache=self._prefix_cache,
        )  # fmt: skip
        cost = flops.grpo_step_cost(self.ledger.policy, step, train=self.ledger.train)
        reward = self._reward_ceiling(prompt, prompt_tokens, rows)
        total = cost.C_total + reward
        return {
            "C_search": float(cost.C_search), "C_learning": float(cost.C_learning),
            "C_reward": float(reward), "C_total": float(total),
            "rho": cost.C_learning / total if total > 0 else float("nan"),
            "P": rows // g, "G": g, "K": k, "mu": mu, "rows": rows,
            "prompt_tokens": prompt_tokens, "completion_tokens": c,
        }  # fmt: skip

    def _longest_prompt(self) -> tuple[Any, int] | None:
        """The train dataset's longest prompt and its tokens as TRL tokenizes it, or None."""
        dataset = self.train_dataset
        try:
            prompts = list(dataset["prompt"])
        except Exception:  # no dataset, an iterable one, or no prompt column
            return None
        if not prompts:
            return None
        best, best_len = None, -1
        for start in range(0, len(prompts), 1024):
            chunk = prompts[start : start + 1024]
            ids = self._tokenize_prompts(chunk)[0]
            for prompt, row in zip(chunk, ids, strict=True):
                if len(row) > best_len:
                    best, best_len = prompt, len(row)
        return best, best_len

    def _reward_ceiling(self, prompt: Any, prompt_tokens: int, rows: int) -> float:
        """Useful FLOPs of the reward functions on ``rows`` worst-case completions (see
        :meth:`price_round_ceiling`)."""
        c = self.args.max_completion_length
        total = 0.0
        completions = completion_ids = None
        for func in self.reward_funcs:
            if isinstance(func, torch.nn.Module):
                shape = ModelShape.from_config(func.config)
                total += rows * flops.forward_flops(shape, flops.sequence_work(prompt_tokens + c))
                continue
            cost_fn = getattr(func, "flop_cost", None)
            if cost_fn is None:
                continue
            if completions is None:
                completions, completion_ids = self._worst_completions(prompt, rows)
            try:
                cost = cost_fn(
                    prompts=[prompt] * rows, completions=completions, completion_ids=completion_ids
                )
                total += _as_conventions(cost)["useful"]
            except Exception as err:  # a cost model that cannot read a synthetic completion
                warnings.warn(
                    f"could not price reward {getattr(func, '__name__', func)!r} on a worst-case batch "
                    f"({type(err).__name__}: {err}); the round ceiling leaves it out",
                    stacklevel=4,
                )
        return total

    def _worst_completions(self, prompt: Any, rows: int) -> tuple[list[Any], list[list[int]]]:
        """``rows`` completions of ``max_completion_length`` tokens (one ordinary token repeated), as
        TRL hands them to reward functions: text, or an assistant turn for conversational prompts."""
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        token = next(i for i in range(len(tokenizer)) if i not in special)
        ids = [token] * self.args.max_completion_length
        text = tokenizer.decode(ids)
        conversational = isinstance(prompt, list)
        completion = [{"role": "assistant", "content": text}] if conversational else text
        return [completion] * rows, [list(ids) for _ in range(rows)]

    # --- TRL's FLOP count ----------------------------------------------------------------------
    def floating_point_ops(self, inputs: Any) -> int:
        """0: the ledger, not Trainer's 6N per input token, counts this run (see :meth:`store_flos`)."""
        return 0

    def store_flos(self) -> None:
        """``state.total_flos`` is the ledger's C_total in the ``useful`` convention (real tokens,
        causal attention: the paper's accounting and what the budget is charged in), summed over
        processes and all three components, so the trainer's end-of-training summary
        (``train_output.metrics["total_flos"]``) is right; TRL's GRPO reports 0. The ``executed``
        C_total is in the ledger's summary and the compute card. On a resumed run it counts this
        session's steps only."""
        self.state.total_flos = self.ledger.total("useful")
        self.current_flos = 0

    # --- the compute card ----------------------------------------------------------------------
    def card_paths(self) -> tuple[Path, Path]:
        stem = self.ledger.config.card_path or Path(self.args.output_dir) / "compute_card"
        return Path(f"{stem}.json"), Path(f"{stem}.md")

    def compute_card(self) -> dict[str, Any]:
        from paper_repro.compute_card import compute_card

        return compute_card(self)

    def write_compute_card(self) -> dict[str, Any]:
        """Write the compute card (:func:`compute_card`) as JSON and Markdown; return it."""
        from paper_repro.compute_card import card_markdown, compute_card

        card = compute_card(self)
        json_path, md_path = self.card_paths()
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(card, indent=2) + "\n")
        md_path.write_text(card_markdown(card))
        return card

    # --- helpers -------------------------------------------------------------------------------
    def _sync(self) -> None:
        if torch.cuda.is_available() and self.accelerator.device.type == "cuda":
            torch.cuda.synchronize()

    def _is_reference(self, model: Any) -> bool:
        """A no-grad forward is the reference one when it runs the separate reference model, or the
        PEFT policy with its adapters disabled; otherwise it is the old-policy forward."""
        if model is self.ref_model and model is not None:
            return True
        return self._adapter_layer is not None and bool(self._adapter_layer.disable_adapters)

    # --- hooks ---------------------------------------------------------------------------------
    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs):
        self._sync()
        start = time.perf_counter()
        lean = None
        if self._lean_reason(images, multimodal_fields, *args, **kwargs) is None:
            from paper_repro.sampler import LeanStats

            lean = LeanStats()
            completion_ids, logprobs = self._lean_generate(prompt_ids, lean), None  # None: as TRL's HF path
        else:
            completion_ids, logprobs = super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, *args, **kwargs
            )
        self._sync()
        self.ledger.add_seconds("search", time.perf_counter() - start)
        if self.model.training:
            p_lens = [len(p) for p in prompt_ids]
            c_lens = [len(c) for c in completion_ids]
            padded = not (self.use_vllm or self.use_transformers_continuous_batching)
            work = generation_pass_work(p_lens, c_lens, num_generations, self._prefix_cache, padded, lean)
            if lean is not None and self.sampler == "fused":
                # the fused decoder runs merged weights: the adapters' matmuls are executed once, in the
                # merge, not per token; the useful count is the policy's, adapters included, as HF's
                from paper_repro.sampler import merge_flops

                self.ledger.charge_generation(
                    work, adapters_active=True, merged_executed=merge_flops(self.model)
                )
            else:
                # vLLM runs merged weights; HF generate runs the unmerged adapters
                self.ledger.charge_generation(work, adapters_active=not self.use_vllm)
            self.ledger.count(
                gen_rows=len(p_lens),
                gen_prompt_tokens=sum(p_lens),
                gen_completion_tokens=sum(c_lens),
                gen_executed_tokens=work["executed"].tokens,
            )
        return completion_ids, logprobs

    def _lean_reason(self, images, multimodal_fields, *args, **kwargs) -> str | None:
        """Why this rollout goes through TRL's own path instead of the lean sampler (None: it does not)."""
        from paper_repro.sampler import unsupported

        if self.sampler == "hf":
            return "sampler='hf'"
        if self.use_vllm or self.use_transformers_continuous_batching:
            return "vLLM or continuous batching"
        if self.is_deepspeed_enabled or self.is_fsdp_enabled:
            return "DeepSpeed or FSDP"
        if self._is_vlm or (images is not None and any(i is not None for i in images)) or multimodal_fields:
            return "a vision-language model or multimodal inputs"
        if args or any(kwargs.values()):
            return "tool images"
        reason = unsupported(
            self.accelerator.unwrap_model(self.model_wrapped),
            self.generation_config,
            fused=self.sampler == "fused",
        )
        self.lean_fallback = reason
        return reason

    def _lean_generate(self, prompt_ids: list[list[int]], stats: Any) -> list[list[int]]:
        """TRL's HF-generate rollout (``_generate_single_turn``'s regular path) by the lean sampler:
        the same model unwrapped the same way, the same ``GenerationConfig``, the same left padding, the
        same completions (each up to its first EOS) from the same random state. Finished rows leave the
        batch; ``stats`` records the rows each step ran, for the ``executed`` count."""
        from trl.models.utils import unwrap_model_for_generation

        from paper_repro.sampler import generate_like

        with (
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                generation_kwargs=self.generation_kwargs,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
            ) as unwrapped_model,
            torch.no_grad(),
        ):
            return generate_like(
                unwrapped_model, self.generation_config, prompt_ids, pad_to_multiple_of=self.pad_to_multiple_of,
                compact=True, stats=stats, fused=self.sampler == "fused",
            )  # fmt: skip

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *a, **kw):
        compact = input_ids.device.type in ("cuda", "xpu")
        plan = self._bucket_plan(input_ids, attention_mask, logits_to_keep, a, kw)
        fused = None
        if plan is not None and self.update_layout == "fused":
            fused = self._fused_forward(model)
        if self.model.training:
            work = forward_pass_work(attention_mask, logits_to_keep, compact_head=compact)
            if plan is not None:
                completion = work["useful"].head_tokens
                work["executed"] = plan.executed_work(
                    head_all_positions=not compact and fused is None, completion_tokens=completion
                )
                self.ledger.count(update_buckets=len(plan.buckets))
            if torch.is_grad_enabled():  # the loss pass: its backward follows
                # the fused forward's head keeps its logits for backward: no recompute there
                executed_train = None if fused is None else replace(self.ledger.train, head_recompute=False)
                self.ledger.charge_training_pass(work, executed_train)
                self.ledger.count(
                    loss_rows=input_ids.size(0),
                    loss_tokens=work["useful"].tokens,
                    loss_executed_tokens=work["executed"].tokens,
                )
            else:  # old-policy or reference log-probs
                reference = self._is_reference(model)
                self.ledger.charge_forward(work, adapters_active=not reference)
                self.ledger.count(**{f"{'ref' if reference else 'old'}_forward_rows": input_ids.size(0)})
        if plan is None:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *a, **kw
            )
        from paper_repro.buckets import bucketed_logps

        entropy = bool(kw.get("compute_entropy", False))
        if fused is not None:
            logps, entropies = bucketed_logps(fused, input_ids, attention_mask, logits_to_keep, plan)
            return logps, entropies if entropy else None, None

        def forward(ids: torch.Tensor, labels: torch.Tensor):
            with self.accelerator.autocast():
                out = model(input_ids=ids, labels=labels, fused_lm_head=True)
            return out.log_probs, out.entropy if entropy else None

        logps, entropies = bucketed_logps(forward, input_ids, attention_mask, logits_to_keep, plan)
        return logps, entropies, None

    def _fused_forward(self, model):
        """:mod:`paper_repro.fused_update`'s forward of ``model``, or None (HF's forward over the same
        buckets) where it cannot compute it; ``fused_update_fallback`` says why."""
        from paper_repro.fused_update import FusedUpdateForward, unsupported

        why = unsupported(model)
        self.fused_update_fallback = why
        if why is not None:
            return None
        return FusedUpdateForward(
            model, self.temperature, head_in_float32=bool(self.args.cast_lm_head_to_fp32)
        )

    def _bucket_plan(self, input_ids, attention_mask, logits_to_keep, args: tuple, kwargs: dict):
        """The length buckets of this forward (:mod:`paper_repro.buckets`), or None for TRL's own padded
        forward: another layout asked for, or inputs beyond text rows (images, token types, an MoE aux
        loss), or rows that are not TRL's left-padded prompt and right-padded completion."""
        if self.update_layout == "padded":
            return None
        batch_size = kwargs.get("batch_size", args[0] if args else None)
        extra = {k: v for k, v in kwargs.items() if k not in ("batch_size", "compute_entropy")}
        if len(args) > 1 or any(v is not None and v is not False for v in extra.values()):
            return None
        from paper_repro.buckets import plan_buckets

        return plan_buckets(attention_mask, logits_to_keep, max_rows=batch_size)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        self._sync()
        start = time.perf_counter()
        hooks = [
            func.register_forward_pre_hook(self._reward_model_hook(func), with_kwargs=True)
            for func in self.reward_funcs
            if isinstance(func, torch.nn.Module)
        ]
        try:
            rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        finally:
            for h in hooks:
                h.remove()
        if self.model.training:
            for func in self.reward_funcs:
                cost_fn: Callable[..., Any] | None = getattr(func, "flop_cost", None)
                if cost_fn is not None:
                    cost = cost_fn(
                        prompts=prompts, completions=completions, completion_ids=completion_ids_list
                    )
                    self.ledger.charge("reward", _as_conventions(cost))
        self._sync()
        self.ledger.add_seconds("reward", time.perf_counter() - start)
        self._last_rewards = rewards
        return rewards

    def _reward_model_hook(self, module: torch.nn.Module) -> Callable[..., None]:
        shape = ModelShape.from_config(module.config)

        def hook(mod, args, kwargs):
            mask = kwargs.get("attention_mask")
            ids = kwargs.get("input_ids", args[0] if args else None)
            if ids is None or not self.model.training:
                return
            if mask is None:
                mask = torch.ones_like(ids)
            useful = real_rows_work(mask)
            executed = flops.padded_batch_work(ids.size(0), ids.size(1), ids.numel())
            self.ledger.charge(
                "reward",
                {c: flops.forward_flops(shape, w) for c, w in (("useful", useful), ("executed", executed))},
            )
            self.ledger.count(reward_tokens=useful.tokens)

        return hook

    def _generate_and_score_completions(self, inputs):
        batch = super()._generate_and_score_completions(inputs)
        if not self.model.training or self._kept == self.num_generations:
            return batch
        return self._downsample(batch)

    def _downsample(self, batch: dict[str, Any]) -> dict[str, Any]:
        g, k = self.num_generations, self._kept
        rows = batch["prompt_ids"].size(0)
        start = self.accelerator.process_index * rows
        per_func = self._last_rewards[start : start + rows]
        weights = self.reward_weights.to(per_func.device).unsqueeze(0)
        rewards = (per_func * weights).nansum(dim=1)
        rewards[torch.isnan(per_func).all(dim=1)] = torch.nan
        keep = []
        for group_start in range(0, rows, g):
            group = rewards[group_start : group_start + g]
            if self.ledger.config.downsample == "max_variance":
                values = torch.nan_to_num(group, nan=0.0).tolist()
                chosen = max_variance_subset(values, k, self.ledger.config.selection_decimals)
            else:
                chosen = sorted(torch.randperm(g, generator=self._downsample_rng)[:k].tolist())
            keep.extend(group_start + i for i in chosen)
        keep_t = torch.tensor(keep, device=batch["prompt_ids"].device)
        advantages = group_advantages(rewards[keep_t].to(batch["advantages"].device), k, self.scale_rewards)
        loss_mask = batch["completion_mask"][keep_t]
        if "tool_mask" in batch:
            loss_mask = loss_mask * batch["tool_mask"][keep_t]
        num_items = self.accelerator.gather(loss_mask.sum()).sum()
        self.ledger.count(kept_rows=len(keep))
        return downsample_batch(batch, keep_t, advantages.to(batch["advantages"].dtype), num_items)


def _as_conventions(cost: Any) -> dict[str, float]:
    """A reward function's ``flop_cost`` result as {useful, executed}: a number counts for both."""
    if isinstance(cost, dict):
        return {c: float(cost[c]) for c in CONVENTIONS}
    if isinstance(cost, (tuple, list)):
        return dict(zip(CONVENTIONS, map(float, cost), strict=True))
    return dict.fromkeys(CONVENTIONS, float(cost))


# ---------------------------------------------------------------------------------------------
# TRL versions
# ---------------------------------------------------------------------------------------------


def _trl_version() -> str:
    import trl

    return str(trl.__version__)


def check_trl_version() -> None:
    """Refuse a TRL version the ledger has not been tested with: it hooks TRL's private methods,
    whose names, arguments and call order can change in any release, and would count wrong."""
    version = _trl_version()
    if version not in SUPPORTED_TRL_VERSIONS:
        raise RuntimeError(
            f"the FLOP ledger hooks private methods of TRL's GRPOTrainer and supports TRL "
            f"{', '.join(SUPPORTED_TRL_VERSIONS)} only; found trl {version}. Install a supported version "
            f"(pip install trl=={SUPPORTED_TRL_VERSIONS[-1]})"
        )
