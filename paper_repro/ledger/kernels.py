"""Kernel dispatch: which rollouts run on the lean or fused sampler, and which policy forwards run
over length buckets or by the fused update forward.

* ``sampler``: ``"hf"`` (TRL's HF ``generate``); ``"lean"`` (:mod:`paper_repro.sampler` where it
  reproduces HF ``generate``, else HF ``generate``); ``"fused"`` (its fused decoder: the same model and
  distribution, other roundings). A rollout the sampler cannot run goes through TRL's own path
  (``lean_fallback`` says why).
* ``update_layout`` (:data:`UPDATE_LAYOUTS`): ``"padded"`` (TRL's padded forward); ``"bucketed"``
  (TRL's policy forwards over length buckets, :mod:`paper_repro.sampler.buckets`); ``"fused"`` (the same
  buckets by :mod:`paper_repro.sampler.fused_update`'s forward instead of HF's and TRL's fused head;
  ``fused_update_fallback`` says why when it cannot).

:func:`check_kernel_choice` refuses an unknown choice; :class:`KernelDispatch`, a mixin of
:class:`~paper_repro.ledger.trainer.LedgerGRPOTrainer`, makes the choice for each rollout and forward.
A kernel module is imported only when a kernel of its own is asked for. What the kernels run is
charged by the trainer's hooks (:mod:`paper_repro.ledger.trainer`).
"""

from __future__ import annotations

from typing import Any

import torch

from paper_repro.common.choices import SAMPLERS, UPDATE_LAYOUTS


def check_kernel_choice(sampler: str, update_layout: str) -> None:
    """Refuse a sampler or an update layout that does not exist (:mod:`paper_repro.common.choices`)."""
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    if update_layout not in UPDATE_LAYOUTS:
        raise ValueError(f"update_layout must be one of {UPDATE_LAYOUTS}, got {update_layout!r}")


class KernelDispatch:
    """Chooses the kernels of each rollout and policy forward (a mixin of
    :class:`~paper_repro.ledger.trainer.LedgerGRPOTrainer`, which sets ``sampler``, ``update_layout``,
    ``lean_fallback`` and ``fused_update_fallback``)."""

    def _lean_reason(self, images, multimodal_fields, *args, **kwargs) -> str | None:
        """Why this rollout goes through TRL's own path instead of the lean sampler (None: it does not)."""
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
        from paper_repro.sampler import unsupported

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
                unwrapped_model,
                self.generation_config,
                prompt_ids,
                pad_to_multiple_of=self.pad_to_multiple_of,
                compact=True,
                stats=stats,
                fused=self.sampler == "fused",
            )

    def _fused_forward(self, model):
        """:mod:`paper_repro.sampler.fused_update`'s forward of ``model``, or None (HF's forward over the same
        buckets) where it cannot compute it; ``fused_update_fallback`` says why."""
        from paper_repro.sampler.fused_update import FusedUpdateForward, unsupported

        why = unsupported(model)
        self.fused_update_fallback = why
        if why is not None:
            return None
        return FusedUpdateForward(
            model, self.temperature, head_in_float32=bool(self.args.cast_lm_head_to_fp32)
        )

    def _bucket_plan(self, input_ids, attention_mask, logits_to_keep, args: tuple, kwargs: dict):
        """The length buckets of this forward (:mod:`paper_repro.sampler.buckets`), or None for TRL's own padded
        forward: another layout asked for, or inputs beyond text rows (images, token types, an MoE aux
        loss), or rows that are not TRL's left-padded prompt and right-padded completion."""
        if self.update_layout == "padded":
            return None
        batch_size = kwargs.get("batch_size", args[0] if args else None)
        extra = {k: v for k, v in kwargs.items() if k not in ("batch_size", "compute_entropy")}
        if len(args) > 1 or any(v is not None and v is not False for v in extra.values()):
            return None
        from paper_repro.sampler.buckets import plan_buckets

        return plan_buckets(attention_mask, logits_to_keep, max_rows=batch_size)
