"""Where the checkout's files live: the repository root, and paths relative to it.

Shipped data (``data/models``, ``data/tasks``, ``data/model_configs``), result tables and executed
notebooks are looked up from the checkout this package runs from; result tables record paths
relative to it so that they read the same on every machine.
"""

from __future__ import annotations

from pathlib import Path


def repo_root() -> Path:
    """The repository checkout this package runs from."""
    return Path(__file__).resolve().parents[1]


def repo_relative(path: str | Path) -> str:
    """``path`` relative to the checkout when it lies inside it, else as given."""
    path = Path(path)
    resolved = path.resolve()
    return str(resolved.relative_to(repo_root())) if resolved.is_relative_to(repo_root()) else str(path)


def in_repo(path: str | Path) -> Path:
    """A repo-relative path made absolute; an absolute path unchanged."""
    path = Path(path)
    return path if path.is_absolute() else repo_root() / path
