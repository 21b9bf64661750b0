"""Tasks: the arith testbed (``arith``), the hub datasets (``hub``) and their graders (``graders``)."""

from __future__ import annotations

from pathlib import Path

from paper_repro.tasks.base import Example


def load_examples(ref: str, limit: int | None = None, local_path: str | Path | None = None) -> list[Example]:
    """The examples a profile names: ``arith/<split>`` (shipped) or a hub dataset id
    (``openai/gsm8k``, ``HuggingFaceH4/MATH-500``, ``POLARIS-Project/Polaris-Dataset-53K``), with a
    revision as ``<id>@<revision>`` (a commit, a branch or a tag; none: the default branch).

    ``<hub id>=<path>`` reads that dataset's rows (its own columns) from a local JSON/JSONL/Parquet
    file or folder instead of the hub: an air-gapped cluster's copy, or a test fixture. A relative
    path is taken from the repository root."""
    from paper_repro.common.paths import repo_root
    from paper_repro.tasks import arith, hub

    if "=" in ref:
        ref, _, path = ref.partition("=")
        local_path = Path(path) if Path(path).is_absolute() else repo_root() / path
    if ref.startswith("arith/"):
        return arith.load_split(ref.split("/", 1)[1])[:limit]
    repo, revision = hub.parse_ref(ref)
    for name, spec in hub.DATASETS.items():
        if spec.repo_id == repo:
            return hub.load_hub_dataset(name, local_path=local_path, limit=limit, revision=revision)
    known = ", ".join(["arith/<split>", *(s.repo_id for s in hub.DATASETS.values())])
    raise ValueError(f"unknown dataset {ref!r}; known: {known}")


def hub_dataset(ref: str) -> str | None:
    """The hub reference (``<id>`` or ``<id>@<revision>``) that dataset ``ref`` loads from the hub, or
    None when its rows are local (``arith/<split>``, ``<id>=<path>``) or it is no known dataset."""
    from paper_repro.tasks import hub

    if "=" in ref or ref.startswith("arith/"):
        return None
    try:
        repo = hub.parse_ref(ref)[0]
    except ValueError:
        return None
    return ref if any(spec.repo_id == repo for spec in hub.DATASETS.values()) else None
