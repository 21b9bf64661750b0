"""The names of the computation paths a run may choose, listed once.

Every check of a profile, a spec, a sampling config or the ledger's trainer reads its allowed
values here (the modules that implement the paths register nothing: adding a path means adding its
name here and its code where it runs).
"""

from __future__ import annotations

# How a run generates its rollouts (TrainConfig.generation): HF generate (or the lean sampler,
# Resources.sampler), vLLM colocated, or the fused decoder.
GENERATIONS: tuple[str, ...] = ("hf", "vllm", "fused")
# Which sampler runs HF-generate-compatible decoding where a machine chooses (Resources.sampler).
RUNTIME_SAMPLERS: tuple[str, ...] = ("hf", "lean")
# Every sampler the ledger's trainer and the evaluation accept: HF generate, the lean sampler's
# bit-exact reproduction of it, and the fused decoder (HF's model and distribution, other roundings).
SAMPLERS: tuple[str, ...] = ("hf", "lean", "fused")
# How the policy update lays out its rows: TRL's padded batch, length buckets, or buckets through
# the flat fused forward of the weights.
UPDATE_LAYOUTS: tuple[str, ...] = ("padded", "bucketed", "fused")
# When a run stops: before a round whose estimate ("dearest" round so far) or whose ceiling (the
# costliest round it could meet) would pass the budget, or before the optimizer step that could
# ("step": the ledger's default, each step priced before it runs).
BUDGET_STOPS: tuple[str, ...] = ("dearest", "ceiling", "step")
# How evaluation decodes greedily: HF generate's computation ("exact") or the fused decoder.
EVAL_DECODINGS: tuple[str, ...] = ("exact", "fused")


def check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    """Refuse ``value`` for ``name`` unless it is one of ``allowed``, naming them."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}")
