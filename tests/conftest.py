"""Shared helpers: tiny HF models built in memory (no network, no downloads)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from paper_repro.tiny import char_tokenizer as build_tiny_tokenizer
from paper_repro.tiny import tiny_qwen2 as build_tiny_policy

__all__ = ["build_tiny_policy", "build_tiny_tokenizer"]
