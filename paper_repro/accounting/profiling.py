"""Measured FLOPs, for checking the analytic model: ``torch.utils.flop_counter.FlopCounterMode``.

Two CPU traps (see DESIGN.md §3): the CPU sdpa kernel is not counted (use eager attention), and
in-place ``addmm_`` (TRL's fused LM head accumulates its backward with it) is not in the default
registry. :func:`flop_counter` maps ``addmm_`` to the ``addmm`` formula. Nor is ``_grouped_mm``, the
kernel transformers runs a mixture-of-experts' experts with by default (each token through its top-k
experts only); :func:`flop_counter` counts it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode


def _addmm_inplace_flop(self_shape, a_shape, b_shape, *args: Any, out_shape=None, **kwargs: Any) -> int:
    m, k = a_shape
    _, n = b_shape
    return 2 * m * n * k


def _grouped_mm_flop(a_shape, b_shape, *args: Any, out_shape=None, **kwargs: Any) -> int:
    """``_grouped_mm``: groups of rows (or, in a weight gradient, of the contracted dimension) each
    multiplied by their own matrix. 2D x 2D contracts the grouped dimension (each of its entries in one
    group); otherwise every output entry is one contraction over ``a``'s last dimension."""
    if len(a_shape) == 2 and len(b_shape) == 2:
        return 2 * a_shape[0] * a_shape[1] * b_shape[1]
    n = 1
    for d in out_shape:
        n *= d
    return 2 * n * a_shape[-1]


_EXTRA_MAPPING = {torch.ops.aten.addmm_: _addmm_inplace_flop, torch.ops.aten._grouped_mm: _grouped_mm_flop}


def flop_counter() -> FlopCounterMode:
    """A quiet FlopCounterMode that also counts in-place ``addmm_`` and ``_grouped_mm``."""
    return FlopCounterMode(display=False, custom_mapping=dict(_EXTRA_MAPPING))


def count_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """Run ``fn`` under :func:`flop_counter`; return its result and the matmul FLOPs it ran."""
    counter = flop_counter()
    with counter:
        result = fn(*args, **kwargs)
    return result, int(counter.get_total_flops())
