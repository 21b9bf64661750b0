"""Provenance stamped on every result row: git commit, dirty flag, package versions, time."""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
from importlib import metadata
from pathlib import Path

from paper_repro.common.paths import repo_root

# This package's distribution name (pyproject.toml's [project] name): not "paper-repro", an unrelated
# project on PyPI. The import package is paper_repro, the command paper-repro.
DISTRIBUTION = "paper-repro-rlflops"
PACKAGES = (DISTRIBUTION, "torch", "transformers", "trl", "peft", "accelerate", "datasets", "math-verify")


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


def versions(sources: dict[str, str] | None = None) -> str:
    """Installed versions of the packages results depend on, as compact JSON; with ``sources`` (a
    run's models and datasets by reference, each the hub commit or local fingerprint it resolved
    to: :func:`paper_repro.run.weights.sources`), those too, under the key ``sources``."""
    out: dict[str, object] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    if sources is not None:
        out["sources"] = dict(sources)
    return json.dumps(out, separators=(",", ":"), sort_keys=True)


def now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def stamp(sources: dict[str, str] | None = None) -> dict[str, object]:
    """The provenance columns of a result row (``sources``: see :func:`versions`)."""
    return {
        "git_sha": git_sha(),
        "git_dirty": git_dirty(),
        "versions": versions(sources),
        "created_at": now(),
    }
