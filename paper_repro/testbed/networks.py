"""The testbed's Qwen2 networks: a :class:`~paper_repro.testbed.specs.ModelSpec` as a ``transformers``
config (a policy's, or the likelihood PRM's), randomly initialised, and its size."""

from __future__ import annotations

from paper_repro.rewards.prm_scorer import STEP_TOKEN
from paper_repro.testbed.specs import PRM_LABELS, TINY, ModelSpec
from paper_repro.testbed.tokenizer import build_tokenizer, byte_level


def qwen2_config(spec: ModelSpec, tokenizer, **extra):
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden,
        intermediate_size=spec.intermediate,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        **extra,
    )


def prm_config(spec: ModelSpec, tokenizer):
    """The likelihood PRM's config: a Qwen2 LM's, plus the tokens that end a step (``<extra_0>``)
    and the problem (the newline that ends an arith prompt)."""
    return qwen2_config(
        spec,
        tokenizer,
        architectures=["Qwen2LikelihoodPRM"],
        step_token_id=tokenizer.convert_tokens_to_ids(STEP_TOKEN),
        problem_end_token_id=tokenizer.convert_tokens_to_ids(byte_level("\n")),
    )


def random_model(
    spec: ModelSpec = TINY,
    tokenizer=None,
    *,
    seed: int = 0,
    head: str = "lm",
    attn_implementation: str | None = None,
):
    """A randomly initialised Qwen2 of ``spec`` over ``tokenizer`` (default :func:`build_tokenizer`),
    seeded with ``seed``: a causal LM (``head="lm"``, a policy), the testbed's likelihood PRM
    (``head="prm"``, :func:`prm_config`) or a 2-way token classifier (``head="token-classification"``,
    the generic PRM interface); a policy's generation config pads and stops with the tokenizer's pad
    and eos.

    ``attn_implementation="eager"`` for passes counted with FlopCounterMode, which cannot see the CPU
    sdpa kernel. :func:`pretrain_policy` and :func:`train_prm` start from this model."""
    import torch
    from transformers import Qwen2ForCausalLM, Qwen2ForTokenClassification

    from paper_repro.rewards.likelihood_prm import Qwen2LikelihoodPRM

    tokenizer = tokenizer if tokenizer is not None else build_tokenizer()
    if head == "lm":
        cls, config = Qwen2ForCausalLM, qwen2_config(spec, tokenizer)
    elif head == "prm":
        cls, config = Qwen2LikelihoodPRM, prm_config(spec, tokenizer)
    elif head == "token-classification":
        labels = {"id2label": PRM_LABELS, "label2id": {v: k for k, v in PRM_LABELS.items()}}
        cls, config = Qwen2ForTokenClassification, qwen2_config(spec, tokenizer, num_labels=2, **labels)
    else:
        raise ValueError(f"head must be 'lm', 'prm' or 'token-classification', got {head!r}")
    torch.manual_seed(seed)
    model = cls(config)
    if attn_implementation is not None:
        model.config._attn_implementation = attn_implementation
    if head == "prm":
        model.register_for_auto_class("AutoModel")  # save_pretrained ships likelihood_prm.py
    if head == "lm":
        model.generation_config.pad_token_id = tokenizer.pad_token_id
        model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def non_embedding_params(model) -> int:
    """Parameters outside the token embedding (the tied LM head is the embedding)."""
    embed = model.get_input_embeddings().weight
    return sum(p.numel() for p in model.parameters() if p is not embed)
