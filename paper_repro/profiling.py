"""Measured FLOPs, for checking the analytic model: ``torch.utils.flop_counter.FlopCounterMode``.

Two CPU traps (see DESIGN.md §3): the CPU sdpa kernel is not counted (use eager attention), and
in-place ``addmm_`` (TRL's fused LM head accumulates its backward with it) is not in the default
registry. :func:`flop_counter` maps ``addmm_`` to the ``addmm`` formula.
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


_INPLACE_MAPPING = {torch.ops.aten.addmm_: _addmm_inplace_flop}


def flop_counter() -> FlopCounterMode:
    """A quiet FlopCounterMode that also counts in-place ``addmm_``."""
    return FlopCounterMode(display=False, custom_mapping=dict(_INPLACE_MAPPING))


def count_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """Run ``fn`` under :func:`flop_counter`; return its result and the matmul FLOPs it ran."""
    counter = flop_counter()
    with counter:
        result = fn(*args, **kwargs)
    return result, int(counter.get_total_flops())
