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


class _GlobalOnly:
    """A stand-in for FlopCounterMode's module tracker that files every FLOP under "Global": the
    tracker's hooks fail on a module whose inputs require grad under ``no_grad`` (a PRM scoring in a
    training loop), and the total is all that is read."""

    parents = frozenset({"Global"})

    def __enter__(self) -> _GlobalOnly:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def flop_counter(by_module: bool = True) -> FlopCounterMode:
    """A quiet FlopCounterMode that also counts in-place ``addmm_`` and ``_grouped_mm``; with
    ``by_module`` False it keeps only the total (no module hooks: safe around a whole training loop)."""
    counter = FlopCounterMode(display=False, custom_mapping=dict(_EXTRA_MAPPING))
    if not by_module:
        counter.mod_tracker = _GlobalOnly()
    return counter


def count_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """Run ``fn`` under :func:`flop_counter`; return its result and the matmul FLOPs it ran."""
    counter = flop_counter()
    with counter:
        result = fn(*args, **kwargs)
    return result, int(counter.get_total_flops())


class LiveBytes:
    """Bytes of tensor storage allocated by torch ops while it is entered, live and at their peak: on
    the CPU, the analogue of ``torch.cuda.max_memory_allocated`` (what the memory model predicts),
    without the process's Python heap, the BLAS threads' buffers or what glibc keeps, which the RSS
    includes. Storages that exist before entering (the weights) are not counted; a storage is counted
    once however many tensors view it, from the op that makes it until it is freed. Scratch a kernel
    allocates and frees inside one op is not seen (on a GPU: kernels' workspace).

    ``with LiveBytes() as live: ...`` then ``live.peak`` (bytes); :meth:`phase` restarts the peak at
    the bytes live now, for the next phase's peak above them."""

    def __init__(self) -> None:
        import weakref

        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self
        self._weakref = weakref
        self._sizes: dict[int, int] = {}
        self.live = 0
        self.peak = 0

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                tracker._see(out, (args, kwargs))
                return out

        self._mode = _Mode()

    def _see(self, out: Any, inputs: Any) -> None:
        """Count the storages ``out`` holds that no input holds (a view or an in-place result is its
        input's storage, made before or counted already)."""
        from torch.utils._pytree import tree_flatten

        held = {
            t.untyped_storage().data_ptr() for t in tree_flatten(inputs)[0] if isinstance(t, torch.Tensor)
        }
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                continue
            storage = t.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
            if not size or key in self._sizes or key in held:
                continue
            self._sizes[key] = size
            self.live += size
            self.peak = max(self.peak, self.live)
            self._weakref.finalize(storage, self._free, key)

    def _free(self, key: int) -> None:
        self.live -= self._sizes.pop(key, 0)

    def phase(self) -> int:
        """Start a new phase: its peak counts from the bytes live now; returns them."""
        self.peak = self.live
        return self.live

    def __enter__(self) -> LiveBytes:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)
