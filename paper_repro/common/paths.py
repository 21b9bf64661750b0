"""Where the checkout's files live: the repository root, and paths relative to it.

Shipped data (``data/models``, ``data/tasks``, ``data/model_configs``), result tables and executed
notebooks are looked up from the checkout this package runs from; result tables record paths
relative to it so that they read the same on every machine.
"""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The repository checkout this package runs from."""
    return Path(__file__).resolve().parents[2]


def repo_relative(path: str | Path) -> str:
    """``path`` relative to the checkout when it lies inside it, else as given."""
    path = Path(path)
    resolved = path.resolve()
    return str(resolved.relative_to(repo_root())) if resolved.is_relative_to(repo_root()) else str(path)


def in_repo(path: str | Path) -> Path:
    """A repo-relative path made absolute; an absolute path unchanged."""
    path = Path(path)
    return path if path.is_absolute() else repo_root() / path


def hub_cache() -> Path:
    """The Hugging Face hub cache, read from the environment now (``HF_HUB_CACHE``, else
    ``HF_HOME/hub``), not when ``huggingface_hub`` was imported."""
    from huggingface_hub import constants

    cache = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if not cache and os.environ.get("HF_HOME"):
        cache = os.path.join(os.environ["HF_HOME"], "hub")
    return Path(os.path.expanduser(os.path.expandvars(cache or constants.HF_HUB_CACHE)))
