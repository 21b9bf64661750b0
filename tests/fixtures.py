"""What the test fixtures build, offline: tiny random checkpoints and tiny copies of the profiles.

- :func:`save_random_model`: a random tiny Qwen2 over the testbed tokenizer (a policy or a PRM),
  saved in HF format (:func:`paper_repro.testbed.random_model`).
- :func:`write_tiny_profile`: cpu-tiny whose policies and PRM are such checkpoints and whose runs
  are tiny (end-to-end runs and notebook executions in seconds).
- :func:`tiny_m_profile`: cpu-tiny in memory with such a checkpoint as policy M and short runs (one
  run of M in a few seconds, in this process).
- :func:`shared`: what a test module builds once (a study run, an analysis) built once per test
  session, once in all under pytest-xdist, for the tests that only read it.
- :func:`write_tiny_gpu_profile`: gpu-paper, shrunk, over tiny checkpoints with the interfaces of
  Qwen2.5-Instruct (:func:`write_tiny_qwen25`) and Qwen2.5-Math-PRM (:func:`write_tiny_math_prm`,
  with its remote code) and local files in the hub datasets' own columns.

``tests/conftest.py`` wraps them in session fixtures (``tiny_policy``, ``tiny_prm``,
``tiny_profile``, ``tiny_m_profile``, ``tiny_gpu_profile``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from filelock import FileLock

from paper_repro import testbed
from paper_repro.config import load_profile
from paper_repro.testbed.qwen_interface import (
    PRM_CONFIG_KEYS,
    qwen25_style_tokenizer,
    write_hub_rows,
    write_prm_code,
)

# ------------------------------------------------------------------------------- once per session


def shared(tmp_path_factory, name: str, build: Callable[[Path], Any]) -> Any:
    """``build(folder)``'s value, built once per test session in ``folder`` (a session folder named
    ``name``) and pickled there: under pytest-xdist the first worker to ask builds it under a file
    lock in the session's base folder (shared by its workers), the others read what it left. For
    tests that only read the value and the folder; a test that changes either needs its own."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    done = root / "value.pickle"
    with FileLock(f"{root}.lock"):
        if not done.exists():
            root.mkdir(parents=True, exist_ok=True)
            done.write_bytes(pickle.dumps(build(root)))
    return pickle.loads(done.read_bytes())


# ------------------------------------------------------------------------------- the cpu-tiny copy

TINY_PROFILE_NAME = "test-tiny"


def save_random_model(out_dir, head: str = "lm", seed: int = 0) -> Path:
    """:func:`paper_repro.testbed.random_model` of :data:`paper_repro.testbed.TINY` (``head`` "lm" or
    "prm") and the testbed tokenizer, saved to ``out_dir``; returns the path."""
    out = Path(out_dir)
    tokenizer = testbed.build_tokenizer()
    testbed.random_model(testbed.TINY, tokenizer, seed=seed, head=head).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def tiny_profile_dict(policy, prm, name: str = TINY_PROFILE_NAME) -> dict:
    """cpu-tiny's YAML as a dict, changed to run tiny: every policy ``policy``, the PRM ``prm``,
    12-token completions, 4-problem evaluations and a 1.5e9-FLOP budget; its runs carry the ladder,
    and stage A stops at C."""
    raw = yaml.safe_load(Path(load_profile("cpu-tiny").source).read_text())
    raw["name"] = name
    raw["testbed"] = False  # its models are built here, not by notebook 00
    raw["policies"] = {size: str(policy) for size in raw["policies"]}
    raw["prm"] = str(prm)
    raw["train"]["max_completion_length"] = 12
    raw["eval"].update(limit=4, max_new_tokens=12)
    raw["budget"]["full_flops"] = 1.5e9
    raw["expected_lengths"]["completion"] = 12
    raw["curves"]["stage_budgets"] = {}  # the ladder stays; stage A stops at C (tests/test_ladder.py has 4C)
    return raw


def write_tiny_profile(root, policy, prm, name: str = TINY_PROFILE_NAME) -> Path:
    """:func:`tiny_profile_dict` saved as ``<root>/<name>.yaml``; returns the path."""
    path = Path(root) / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(tiny_profile_dict(policy, prm, name), sort_keys=False))
    return path


def tiny_m_profile(policy):
    """cpu-tiny (a Profile, not a file) with ``policy`` as policy M, 16-token completions and
    8-problem evaluations."""
    base = load_profile("cpu-tiny")
    return dataclasses.replace(
        base,
        policies={**base.policies, "M": str(policy)},
        train=dataclasses.replace(base.train, max_completion_length=16),
        expected_lengths={"prompt": 30, "completion": 16},
        eval={"limit": 8, "max_new_tokens": 16, "batch_size": 64},
    )


# ------------------------------------------------------------------------------- the gpu-paper copy


def write_tiny_gpu_profile(root, name: str = "test-gpu-paper") -> Path:
    """The gpu-paper profile, shrunk: its policy and PRM are tiny random checkpoints with the
    Qwen2.5-Instruct and Qwen2.5-Math-PRM interfaces, its datasets local files of the hub datasets'
    own columns (``<hub id>=<file>``), fp32 on the CPU. Every other setting is gpu-paper's (chat
    template, prm_judge, math-verify grading). Returns the YAML path."""
    root = Path(root)
    policy = write_tiny_qwen25(root / "qwen2.5-tiny-instruct")
    prm = write_tiny_math_prm(root / "qwen2.5-math-prm-tiny")
    files = write_hub_rows(root)
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


# Tiny checkpoints with the gpu-paper models' interfaces: the same random tiny Qwen2 as the testbed's
# (hidden 32, two layers), over a byte-level tokenizer in Qwen2.5's form.
QWEN_TINY = testbed.ModelSpec("qwen2.5-tiny", hidden=32, intermediate=80, layers=2)


def write_tiny_qwen25(out_dir, seed: int = 0) -> Path:
    """Save a random tiny policy with Qwen2.5-Instruct's interface (Qwen2ForCausalLM, the tokenizer
    of :func:`qwen25_style_tokenizer`, generation stopping at ``<|im_end|>`` or ``<|endoftext|>``)
    to ``out_dir``; return the path."""
    out = Path(out_dir)
    tokenizer = qwen25_style_tokenizer()
    model = testbed.random_model(QWEN_TINY, tokenizer, seed=seed)
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.pad_token_id]
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def write_tiny_math_prm(out_dir, seed: int = 0) -> Path:
    """Save a random tiny PRM with Qwen2.5-Math-PRM-7B's interface to ``out_dir``: its remote code
    (``Qwen2ForProcessRewardModel``, loaded by ``AutoModel`` with ``trust_remote_code``), its
    config's ``architectures``/``auto_map`` and a tokenizer with ``<extra_0>``; return the path."""
    import torch
    from transformers import AutoConfig, AutoModel

    out = Path(out_dir)
    write_prm_code(out)
    tokenizer = qwen25_style_tokenizer()
    config = testbed.qwen2_config(QWEN_TINY, tokenizer).to_dict()
    config.update(tie_word_embeddings=False, **PRM_CONFIG_KEYS)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    torch.manual_seed(seed)
    model = AutoModel.from_config(
        AutoConfig.from_pretrained(out, trust_remote_code=True), trust_remote_code=True
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
