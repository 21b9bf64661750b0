"""Provenance stamped on every result row: git commit, dirty flag, package versions, time."""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
from importlib import metadata
from pathlib import Path

from paper_repro.paths import repo_root

PACKAGES = ("paper-repro", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "math-verify")


def _git(*args: str, cwd: Path | None = None) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd or repo_root(), capture_output=True, text=True, check=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def git_sha() -> str:
    """The checkout's HEAD commit, or ``"unknown"`` outside a git checkout."""
    return _git("rev-parse", "HEAD") or "unknown"


# Outputs that runs write into the checkout: regenerating them does not make the code dirty.
OUTPUTS = ("data", "notebooks/executed", "figures")


def git_dirty() -> bool:
    """Whether tracked files other than outputs (:data:`OUTPUTS`) differ from HEAD: the code that
    produced a result is not exactly the commit ``git_sha`` names."""
    excludes = [f":(exclude){path}" for path in OUTPUTS]
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ".", *excludes)
    return bool(status)


def versions() -> str:
    """Installed versions of the packages results depend on, as compact JSON."""
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return json.dumps(out, separators=(",", ":"), sort_keys=True)


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def stamp() -> dict[str, object]:
    """The provenance columns of a result row."""
    return {"git_sha": git_sha(), "git_dirty": git_dirty(), "versions": versions(), "created_at": now()}
