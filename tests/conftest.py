"""Shared helpers: tiny HF models built in memory (no network, no downloads)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from paper_repro.tiny import char_tokenizer as build_tiny_tokenizer
from paper_repro.tiny import tiny_qwen2 as build_tiny_policy

__all__ = ["build_tiny_policy", "build_tiny_tokenizer"]


def write_tiny_profile(root, name: str = "test-tiny"):
    """A copy of the cpu-tiny profile whose policies are one tiny random checkpoint and whose runs
    are tiny: end-to-end runs and notebook executions in seconds. Returns the YAML path."""
    from pathlib import Path

    import torch
    from transformers import Qwen2ForCausalLM

    from paper_repro import embedded
    from paper_repro.config import load_profile

    root = Path(root)
    tokenizer = embedded.build_tokenizer()
    spec = embedded.ModelSpec("tiny", hidden=32, intermediate=64, layers=1, heads=2, kv_heads=1)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(embedded.qwen2_config(spec, tokenizer))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(root / "policy")
    tokenizer.save_pretrained(root / "policy")
    from transformers import Qwen2ForTokenClassification

    prm = Qwen2ForTokenClassification(embedded.qwen2_config(spec, tokenizer, num_labels=2))
    prm.save_pretrained(root / "prm")
    tokenizer.save_pretrained(root / "prm")
    text = Path(load_profile("cpu-tiny").source).read_text()
    text = text.replace("prm: data/models/prm", f"prm: {root / 'prm'}")
    for size in ("S", "M", "L"):
        text = text.replace(f"data/models/policy-{size}", str(root / "policy"))
    replacements = {
        "name: cpu-tiny": f"name: {name}",
        "max_completion_length: 64": "max_completion_length: 12",
        "  limit: 300": "  limit: 4",
        "max_new_tokens: 96": "max_new_tokens: 12",
        "full_flops: 1.0e11": "full_flops: 1.5e9",
        "completion: 55": "completion: 12",
    }
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    path = root / f"{name}.yaml"
    path.write_text(text)
    return path
