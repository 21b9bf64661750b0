"""Whether the lean sampler reproduces HF ``generate`` for a model and a generation config.

Anything it does not reproduce (another architecture, sliding windows, LoRA dropout or DoRA, LoRA
biases for the fused decoder, a repetition penalty, suppressed tokens, beams ...) is refused by
:func:`unsupported`, and the callers fall back to HF ``generate``.
"""

from __future__ import annotations

from typing import Any

from paper_repro.sampler.weights import Unsupported, base_model, linears, lora_biases, projection

SUPPORTED_MODEL_TYPES = ("qwen2", "llama")

# GenerationConfig fields the lean loop implements (or that do not change what generate computes here).
_HANDLED = {
    "max_new_tokens",
    "do_sample",
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "cache_implementation",
    "disable_compile",
    "use_cache",
    "output_attentions",
    "output_hidden_states",
    "transformers_version",
    "return_dict_in_generate",
    "output_scores",
    "output_logits",
    "num_return_sequences",
    "num_beams",
}


def unsupported(model: Any, generation_config: Any = None, fused: bool = False) -> str | None:
    """Why :func:`lean_generate` cannot reproduce HF ``generate`` for this model and config (None: it can);
    ``fused``: why it cannot decode it with :class:`FusedDecoder`."""
    lm = base_model(model)
    config = getattr(lm, "config", None)
    if config is None or getattr(config, "model_type", None) not in SUPPORTED_MODEL_TYPES:
        return (
            f"model type {getattr(config, 'model_type', None)!r} (lean sampler knows {SUPPORTED_MODEL_TYPES})"
        )
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder model"
    if config._attn_implementation not in ("sdpa", "eager"):
        return f"attention implementation {config._attn_implementation!r}"
    layer_types = getattr(config, "layer_types", None) or ["full_attention"]
    if any(t != "full_attention" for t in layer_types) or getattr(config, "use_sliding_window", False):
        return "sliding-window attention"
    if getattr(config, "pretraining_tp", 1) not in (None, 1):
        return "pretraining_tp > 1"
    inner = getattr(lm, "model", None)
    if inner is None or not hasattr(inner, "layers") or not hasattr(lm, "lm_head"):
        return "not a decoder-only *ForCausalLM layout"
    try:
        for module in linears(lm):
            weights = projection(module)
            if fused and lora_biases(weights):
                raise Unsupported("LoRA adapters with biases")
    except Unsupported as err:
        return str(err)
    if getattr(lm, "hf_device_map", None) and len(set(lm.hf_device_map.values())) > 1:
        return "model split across devices"
    if generation_config is not None:
        return _unsupported_config(generation_config)
    return None


def _unsupported_config(gc: Any) -> str | None:
    from transformers import GenerationConfig

    default = GenerationConfig()
    for key, value in gc.to_dict().items():
        if key in _HANDLED or key.startswith("_"):
            continue
        if value != getattr(default, key, None):
            return f"generation option {key}={value!r}"
    if gc.repetition_penalty not in (None, 1.0):
        return f"repetition_penalty={gc.repetition_penalty}"
    if (gc.num_beams or 1) != 1 or (gc.num_return_sequences or 1) != 1:
        return "beam search or several sequences per prompt"
    if gc.return_dict_in_generate:
        return "return_dict_in_generate"
    if gc.max_new_tokens is None:
        return "max_new_tokens unset"
    return None
