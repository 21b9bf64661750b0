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

    from paper_repro import testbed
    from paper_repro.config import load_profile

    root = Path(root)
    tokenizer = testbed.build_tokenizer()
    spec = testbed.ModelSpec("tiny", hidden=32, intermediate=64, layers=1, heads=2, kv_heads=1)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(testbed.qwen2_config(spec, tokenizer))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(root / "policy")
    tokenizer.save_pretrained(root / "policy")
    from transformers import Qwen2ForTokenClassification

    prm = Qwen2ForTokenClassification(testbed.qwen2_config(spec, tokenizer, num_labels=2))
    prm.save_pretrained(root / "prm")
    tokenizer.save_pretrained(root / "prm")
    text = Path(load_profile("cpu-tiny").source).read_text()
    text = text.replace("prm: data/models/prm", f"prm: {root / 'prm'}")
    for size in ("S", "M", "L"):
        text = text.replace(f"data/models/policy-{size}", str(root / "policy"))
    replacements = {
        "name: cpu-tiny": f"name: {name}",
        "testbed: true ": "testbed: false",  # its models are built here, not by notebook 00
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


HUB_ROWS = {
    # a few rows of each gpu-paper dataset, in the hub's own columns
    "polaris": [{"problem": f"What is {a} + {b}?", "answer": str(a + b), "difficulty": "1/8"} for a, b in
                [(1, 2), (3, 4), (5, 6), (7, 8), (2, 9), (4, 4), (6, 1), (8, 3), (9, 9), (5, 2)]],
    "gsm8k": [{"question": "Tom has 3 apples and buys 39 more. How many?", "answer": "3+39=<<3+39=42>>42\n#### 42"},
              {"question": "A shop sells 1,000 pens a day. How many in 2 days?", "answer": "2*1000=2000\n#### 2,000"}],
    "math500": [{"problem": "Compute $\\frac{2}{4}$.", "solution": "...", "answer": "\\frac{1}{2}",
                 "subject": "Algebra", "level": 1, "unique_id": "test/algebra/1.json"},
                {"problem": "What is $3^2$?", "solution": "...", "answer": "9", "subject": "Algebra",
                 "level": 1, "unique_id": "test/algebra/2.json"}],
}  # fmt: skip


def write_tiny_gpu_profile(root, name: str = "test-gpu-paper"):
    """The gpu-paper profile, shrunk: its policy and PRM are tiny random checkpoints with the
    Qwen2.5-Instruct and Qwen2.5-Math-PRM interfaces, its datasets local files of the hub datasets'
    own columns (``<hub id>=<file>``), fp32 on the CPU. Every other setting is gpu-paper's (chat
    template, prm_judge, math-verify grading). Returns the YAML path."""
    import json
    from pathlib import Path

    import yaml

    from paper_repro import tiny
    from paper_repro.config import load_profile

    root = Path(root)
    policy = tiny.write_tiny_qwen25(root / "qwen2.5-tiny-instruct")
    prm = tiny.write_tiny_math_prm(root / "qwen2.5-math-prm-tiny")
    files = {}
    for key, rows in HUB_ROWS.items():
        files[key] = root / "hub" / f"{key}.jsonl"
        files[key].parent.mkdir(parents=True, exist_ok=True)
        files[key].write_text("".join(json.dumps(r) + "\n" for r in rows))
    raw = yaml.safe_load(Path(load_profile("gpu-paper").source).read_text())
    raw["name"] = name
    raw["policies"] = {"1.5B": str(policy)}
    raw["stages"] = {"A": {"reward": "sparse"}, "B": {"policy": "1.5B", "rewards": raw["stages"]["B"]["rewards"]},
                     "D": {"policy": "1.5B", "rewards": ["prm"]}}  # fmt: skip
    raw["prm"] = str(prm)
    raw["data"] = {
        "train": f"POLARIS-Project/Polaris-Dataset-53K={files['polaris']}",
        "heldout": f"POLARIS-Project/Polaris-Dataset-53K={files['polaris']}",
        "gsm": f"openai/gsm8k={files['gsm8k']}",
        "math": f"HuggingFaceH4/MATH-500={files['math500']}",
    }
    raw["eval"] = {"limit": 2, "heldout_limit": 2, "max_new_tokens": 16, "batch_size": 8}
    raw["train"].update(max_completion_length=16, dtype="float32")
    raw["expected_lengths"] = {"prompt": 90, "completion": 16}
    raw["resources"] = {}
    raw["budget"]["full_flops"] = 1.0e9
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path
