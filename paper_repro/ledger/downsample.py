"""K-of-G down-sampling: the update keeps K of the G completions of each prompt.

With ``LedgerConfig.kept`` below ``num_generations`` the trainer keeps K of the G completions of each
prompt after scoring (PODS max-variance selection, arXiv 2504.13818: :func:`max_variance_subset`, or
random), recomputes the group advantages (:func:`group_advantages`) and the loss normaliser over the
kept rows and trims all-padding columns (:func:`downsample_batch`). The old/ref forwards have already
run on all G rows: down-sampling does not save them.

:class:`Downsampling` is the trainer's side of it, a mixin of
:class:`~paper_repro.ledger.trainer.LedgerGRPOTrainer`: at construction it checks that K of G leaves
whole groups and micro-batches, and it down-samples each generation batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from trl.trainer.utils import nanstd


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


class Downsampling:
    """The trainer's side of K-of-G down-sampling (a mixin of
    :class:`~paper_repro.ledger.trainer.LedgerGRPOTrainer`, which sets ``_kept``, ``_downsample_rng``
    and ``_last_rewards``)."""

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
