"""A lean sampler for small decoder-only policies: HF ``generate``'s sampling, without its per-step work.

On the cpu-tiny policies (hidden size 48-96, three layers) a decode step is bound by Python and
dispatch overhead and by tiny matmuls, not arithmetic: HF ``generate`` spends most of a step in module
calls, PEFT's LoRA wrappers, mask building and its generation loop. :func:`lean_generate` runs the
model as a flat loop over its own weights, with one of two decoders: :class:`Decoder`, HF's
computation bit for bit (so HF ``generate``'s tokens from the same random state), or
:class:`FusedDecoder`, the same model with other roundings and far fewer ops (HF's distribution, not
HF's draws). The modules:

* :mod:`~paper_repro.sampler.support`: :func:`unsupported`, why the lean sampler cannot reproduce HF
  ``generate`` for a model and a generation config (the callers then fall back to HF ``generate``);
* :mod:`~paper_repro.sampler.weights`: the model's weights as plain tensors: :func:`projection` (a
  linear layer, PEFT's LoRA adapters included, or :class:`Unsupported`), :func:`norm_weights` and
  :func:`rms_norm`, :func:`rotary_tables`; :mod:`paper_repro.sampler.fused_update` reads the policy with them
  too;
* :mod:`~paper_repro.sampler.exact`: :class:`Decoder`, the HF-exact decoder (the default);
* :mod:`~paper_repro.sampler.fused`: :class:`FusedDecoder` (``fused=True``), LoRA merged into the
  weights, and :func:`merge_flops`, what that merge costs;
* :mod:`~paper_repro.sampler.sampling`: each step's draw: HF's warpers, ``multinomial`` as HF
  generate's batch draws it, and the fused decoder's :func:`inverse_cdf`;
* :mod:`~paper_repro.sampler.generate`: the decode loop, :func:`lean_generate` and
  :func:`generate_like`, and :class:`LeanStats`, what a call ran (the ledger's ``executed`` count);
  ``lean_generate(fused=True, trim=True)`` (a run's evaluation) computes the fused decoder's results
  bit for bit with less work (:meth:`FusedDecoder.prefill` and :meth:`FusedDecoder.step`);
* :mod:`~paper_repro.sampler.tokens`: :func:`~paper_repro.sampler.tokens.encode`, prompts' token
  ids encoded once per tokenizer (a run's evaluation sets, at every budget point).
"""

from paper_repro.common.choices import SAMPLERS
from paper_repro.sampler.exact import Decoder
from paper_repro.sampler.fused import FusedDecoder, merge_flops
from paper_repro.sampler.generate import COMPACT_AT, LeanStats, generate_like, lean_generate
from paper_repro.sampler.sampling import inverse_cdf
from paper_repro.sampler.support import SUPPORTED_MODEL_TYPES, unsupported
from paper_repro.sampler.weights import (
    Unsupported,
    base_model,
    norm_weights,
    projection,
    rms_norm,
    rotary_tables,
)

__all__ = [
    "COMPACT_AT",
    "SAMPLERS",
    "SUPPORTED_MODEL_TYPES",
    "Decoder",
    "FusedDecoder",
    "LeanStats",
    "Unsupported",
    "base_model",
    "generate_like",
    "inverse_cdf",
    "lean_generate",
    "merge_flops",
    "norm_weights",
    "projection",
    "rms_norm",
    "rotary_tables",
    "unsupported",
]
