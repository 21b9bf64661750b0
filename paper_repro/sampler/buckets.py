"""The update pass over length buckets: TRL's policy forward with less padding, the same log-probabilities.

TRL scores a batch of rollouts as one padded tensor: each row is its left-padded prompt and its
right-padded completion, ``prompt width + completion width`` wide, so a short row costs as much as the
longest prompt plus the longest completion, and the padded attention needs a 4D mask. On the cpu-tiny
policies the update is a third of a run and about a third of its positions are padding.

With ``update_layout="bucketed"`` (:class:`paper_repro.ledger.LedgerGRPOTrainer`) each row's real
tokens are moved to the start of its row, rows are grouped by length (:func:`plan_buckets`), and
each group is one forward (and backward) over a tensor as wide as its longest row, with no attention
mask: every row starts at column 0 and its padding comes after its last real token, so causal
attention alone keeps real tokens from padding. The log-probabilities (and entropies) of the
completion tokens are gathered back into TRL's ``(rows, completion width)`` layout
(:func:`bucketed_logps`), masked positions 0 as TRL's fused head gives them.

The same model scores the same tokens in the same contexts; only float rounding differs (other
matmul shapes; the rotary embedding is relative, so a row's real tokens starting at position 0 instead
of after its padding changes no attention score but by rounding). ``tests/test_buckets.py`` checks
the log-probabilities and their gradients against TRL's own padded forward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from paper_repro.accounting import flops
from paper_repro.accounting.flops import Work

# A bucket's fixed cost in token positions: one more forward and backward through every module
# (about 600 small ops on the cpu-tiny policies, 6-10 ms, what 150-250 positions cost there)
BUCKET_OVERHEAD_TOKENS = 200
# Attention's share of a position's cost grows with the row width: cost ~ width * (1 + width / this)
# (about a fifth of the update at width 96 on the cpu-tiny policies)
ATTENTION_WIDTH = 384


@dataclass(frozen=True)
class BucketPlan:
    """Where each row's real tokens are (``starts``, ``ends``: columns of TRL's padded tensor) and
    the buckets: the rows of each (indices into the batch) and its width (its longest row)."""

    starts: torch.Tensor
    ends: torch.Tensor
    buckets: tuple[tuple[torch.Tensor, int], ...]

    def executed_work(self, head_all_positions: bool, completion_tokens: int) -> Work:
        """What the buckets' forwards execute: each bucket its full ``rows x width`` square; TRL's
        fused head scores every position but the last of each row off Triton (``head_all_positions``),
        else the completion positions only."""
        total = Work()
        for rows, width in self.buckets:
            n = len(rows)
            total = total + flops.padded_batch_work(n, width, n * (width - 1) if head_all_positions else 0)
        if not head_all_positions:
            total = total + Work(0, 0, completion_tokens)
        return total


def real_spans(attention_mask: torch.Tensor, logits_to_keep: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Each row's first and one-past-last real column, or None when a row's real tokens are not the
    one contiguous run TRL's layout promises (left-padded prompt, right-padded completion)."""
    rows, width = attention_mask.shape
    mask = attention_mask.bool()
    if rows == 0 or not bool(mask.any(dim=1).all()):
        return None
    columns = torch.arange(width, device=mask.device)
    starts = torch.where(mask, columns, width).min(dim=1).values
    ends = torch.where(mask, columns + 1, 0).max(dim=1).values
    if not bool((mask.sum(dim=1) == ends - starts).all()):
        return None
    if bool((ends <= width - logits_to_keep).any()):  # a row without one completion token
        return None
    return starts, ends


def plan_buckets(
    attention_mask: torch.Tensor, logits_to_keep: int, max_rows: int | None = None
) -> BucketPlan | None:
    """Rows grouped by real length into buckets of least total cost (sorted rows, split by dynamic
    programming; a bucket costs ``rows x width x (1 + width / ATTENTION_WIDTH)`` plus
    ``BUCKET_OVERHEAD_TOKENS``), at most ``max_rows`` rows each. None: TRL's layout does not hold."""
    spans = real_spans(attention_mask, logits_to_keep)
    if spans is None:
        return None
    starts, ends = spans
    lengths = (ends - starts).cpu().numpy()
    if lengths.min() < 2:  # a one-token row scores nothing
        return None
    order = np.argsort(lengths, kind="stable")
    widths = lengths[order].astype(np.float64)
    n = len(widths)
    cap = n if max_rows is None else max(1, min(n, max_rows))
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    cut = np.zeros(n + 1, dtype=np.int64)
    for j in range(1, n + 1):
        w = widths[j - 1]  # the widest row of any bucket ending at j
        i = np.arange(max(0, j - cap), j)
        cost = best[i] + (j - i) * w * (1 + w / ATTENTION_WIDTH) + BUCKET_OVERHEAD_TOKENS
        k = int(np.argmin(cost))
        best[j], cut[j] = cost[k], i[k]
    buckets = []
    j = n
    while j > 0:
        i = int(cut[j])
        rows = torch.as_tensor(order[i:j].copy(), device=attention_mask.device)
        buckets.append((rows, int(widths[j - 1])))
        j = i
    return BucketPlan(starts, ends, tuple(reversed(buckets)))


Forward = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor | None]]


def bucketed_logps(
    forward: Forward,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    plan: BucketPlan,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probabilities (and entropies, when ``forward`` gives them) of the completion
    tokens, ``(rows, logits_to_keep)`` as TRL's ``_get_per_token_logps_and_entropies`` returns them,
    computed bucket by bucket. ``forward(ids, labels)`` runs TRL's fused-head forward on a bucket
    (no attention mask) and returns its ``log_probs`` and ``entropy``: position ``t`` scores the
    label at ``t + 1``, 0 where that label is ``-100``."""
    rows, width = input_ids.shape
    prompt_width = width - logits_to_keep
    device = input_ids.device
    logps, entropies, order = [], [], []
    for bucket_rows, bucket_width in plan.buckets:
        starts, ends = plan.starts[bucket_rows], plan.ends[bucket_rows]
        offsets = torch.arange(bucket_width, device=device)
        columns = starts[:, None] + offsets[None]
        real = columns < ends[:, None]
        columns = columns.clamp(max=width - 1)
        ids = input_ids[bucket_rows[:, None], columns]
        is_label = real & (columns >= prompt_width) & attention_mask[bucket_rows[:, None], columns].bool()
        labels = ids.masked_fill(~is_label, -100)
        # after a row's end the bucket holds whatever the clamped columns read: causal attention keeps
        # it from every real position, and its labels are -100
        bucket_logps, bucket_entropy = forward(ids, labels)
        # completion token j of a row sits at bucket column prompt_width + j - start; position one
        # before it scores it
        at = prompt_width - starts[:, None] - 1 + torch.arange(logits_to_keep, device=device)[None]
        valid = (at >= 0) & (at < bucket_width - 1)
        at = at.clamp(0, bucket_width - 2)
        logps.append(torch.where(valid, bucket_logps.gather(1, at), 0.0))
        if bucket_entropy is not None:
            entropies.append(torch.where(valid, bucket_entropy.gather(1, at), 0.0))
        order.append(bucket_rows)
    back = torch.empty(rows, dtype=torch.long, device=device)
    back[torch.cat(order)] = torch.arange(rows, device=device)
    logps_out = torch.cat(logps).index_select(0, back)
    entropy_out = torch.cat(entropies).index_select(0, back) if entropies else None
    return logps_out, entropy_out
