"""The trimmed prefill's layout of queries (:meth:`paper_repro.sampler.fused.FusedDecoder.prefill`):
which rows attend together, and which positions the last layer reads, so that every matmul keeps
enough rows to round as :meth:`~paper_repro.sampler.fused.FusedDecoder.forward` rounds."""

from __future__ import annotations

import torch

# FusedDecoder.prefill: prompt lengths are grouped in bands of this many tokens for the attention's
# queries (fewer, larger matmuls, each row computing up to PACKED_BAND - 1 padding queries)
PACKED_BAND = 8


def query_groups(
    pad: torch.Tensor,
    slot: torch.Tensor,
    lengths: torch.Tensor,
    real: torch.Tensor,
    causal: torch.Tensor,
    min_queries: int,
) -> tuple[list[tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]], torch.Tensor]:
    """:meth:`FusedDecoder.prefill`'s attention queries: the rows in bands of prompt lengths
    (:data:`PACKED_BAND`), each band's rows the queries of their last ``band`` positions (at least
    ``min_queries`` per row, so that each matmul has 16 rows). Returns the groups (the band's rows,
    None for all; the tokens of its queries; its blocked mask ``(rows, band, width)``) and, for each
    prompt token, its row among the groups' queries concatenated."""
    rows, width = pad.shape
    bands = ((lengths + PACKED_BAND - 1) // PACKED_BAND * PACKED_BAND).clamp(min=min_queries, max=width)
    groups = []
    for band in torch.unique(bands).tolist():
        members = (bands == band).nonzero().squeeze(1)
        if len(members) == rows:
            members = None
        member_pad = pad if members is None else pad[members]
        blocked = ~(causal[width - band :] & (member_pad[:, None, :] != 0))  # (rows, band, width)
        groups.append(
            (members, slot[members if members is not None else slice(None), width - band :], blocked)
        )
    # each token's row among the groups' queries, concatenated
    starts = [(torch.arange(rows) if m is None else m)[:, None] * width for m, _, _ in groups]
    order = torch.cat(
        [
            (start + torch.arange(width - w.shape[1], width)).reshape(-1)
            for start, (_, w, _) in zip(starts, groups, strict=True)
        ]
    )
    pick = torch.empty(rows * width, dtype=torch.long)
    pick[order] = torch.arange(len(order))
    return groups, pick[real]


def final_queries(
    pad: torch.Tensor, causal: torch.Tensor, floor: int, min_queries: int
) -> tuple[bool, int, torch.Tensor, torch.Tensor]:
    """:meth:`FusedDecoder.prefill`'s last layer: its queries are the last ``tail`` positions of every
    row, and its MLP reads the last position only once that is rows enough (``floor``), else all
    ``tail``. Returns (last position only, tail, the blocked mask ``(rows, tail, width)``, the
    positions the last MLP reads in forward's layout)."""
    rows, width = pad.shape
    last_only = rows >= floor
    tail = min(width, max(min_queries, 1 if last_only else -(-floor // rows)))
    final_blocked = ~(causal[width - tail :] & (pad[:, None, :] != 0))
    final_at = (torch.arange(rows)[:, None] * width + torch.arange(width - tail, width)).reshape(-1)
    if last_only:
        final_at = final_at.view(rows, tail)[:, -1]  # the rows the last MLP reads, in forward's layout
    return last_only, tail, final_blocked, final_at
