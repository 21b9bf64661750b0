"""The gpu-paper datasets from the Hugging Face hub, mapped to the common schema.

- ``polaris``: ``POLARIS-Project/Polaris-Dataset-53K`` (train): the RL prompts.
- ``gsm8k``: ``openai/gsm8k`` (config ``main``, split ``test``): reference answers follow ``####``.
- ``math500``: ``HuggingFaceH4/MATH-500`` (test): reference answers are LaTeX.

Each row becomes an :class:`Example` whose ``prompt`` is the problem followed by the final-answer
instruction (``\\boxed{}``); :func:`chat_messages` and :func:`format_prompt` turn it into the
Qwen2.5-Instruct chat form. Answers are checked with ``math-verify`` (:func:`is_equivalent`).

A hub id may carry a revision, ``owner/name@<revision>`` (:func:`parse_ref`; a profile writes it as
``{id: owner/name, revision: <revision>}``): a commit (40 hex digits, :func:`is_commit`), or a branch
or tag. Models and datasets both resolve through :func:`snapshot`, to the Hugging Face cache's
``.../snapshots/<commit>/`` folder, whose name is the commit the run records.

Offline (``HF_HUB_OFFLINE=1``, as the cpu-tiny profile and the tests run), a dataset or model that is
not in the local cache raises :class:`HubUnavailableError`, which names the id, where it looked and
how to get it. Any loader also takes ``local_path``: a JSON/JSONL/Parquet file or directory with the
hub dataset's own columns, which is how the tests exercise the mapping without a network.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from paper_repro.common.paths import hub_cache
from paper_repro.tasks.base import Example

BOXED_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
# Qwen2.5-Instruct's chat format (ChatML), used only when a tokenizer carries no template of its own.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


class HubUnavailableError(RuntimeError):
    """A hub dataset or model is not available locally and cannot be downloaded."""


# ---------------------------------------------------------------------------------------- revisions

COMMIT = re.compile(r"[0-9a-f]{40}")


def parse_ref(ref: str) -> tuple[str, str | None]:
    """``owner/name@revision`` as (``owner/name``, ``revision``); (``ref``, None) without ``@``."""
    repo, at, revision = str(ref).partition("@")
    if at and (not revision or any(c in revision for c in "@= \t\n")):
        raise ValueError(f"hub reference {ref!r}: give a revision after '@' (a commit, a branch or a tag)")
    return repo, (revision if at else None)


def hub_ref(repo_id: str, revision: str | None) -> str:
    """The reference a profile's ``{id, revision}`` stands for: ``owner/name@revision``, or the bare
    id when the revision is null (unpinned: a run refuses it)."""
    return f"{repo_id}@{revision}" if revision else repo_id


def is_commit(revision: str | None) -> bool:
    """A full 40-hex commit hash: the one revision the hub cannot move (a branch or tag can)."""
    return bool(revision) and COMMIT.fullmatch(str(revision)) is not None


def pin_instructions(repo_id: str, kind: str = "model") -> str:
    """How to find the commit to pin ``repo_id`` to."""
    dataset = kind == "dataset"
    page = f"https://huggingface.co/{'datasets/' if dataset else ''}{repo_id}/commits/main"
    flag = " --repo-type dataset" if dataset else ""
    return (
        f"find the commit on {page}, or run `hf download {repo_id}{flag}` (or `huggingface-cli download "
        f"{repo_id}{flag}`) on a machine with internet: it prints the snapshot folder, "
        f".../snapshots/<commit>; then write {{id: {repo_id}, revision: <commit>}} in the profile "
        f"(or the reference {repo_id}@<commit>)"
    )


def snapshot(repo_id: str, revision: str | None, repo_type: str = "model") -> Path:
    """The local snapshot of ``repo_id`` at ``revision`` (None: the default branch), the cache's
    ``.../snapshots/<commit>/`` folder, downloaded first unless offline. A branch or tag is resolved
    once per process, so every load of a run sees the commit its row records."""
    return _snapshot(repo_id, revision, repo_type, str(hub_cache()), offline())


@functools.lru_cache(maxsize=64)
def _snapshot(repo_id: str, revision: str | None, repo_type: str, cache: str, local_only: bool) -> Path:
    from huggingface_hub import snapshot_download

    try:
        return Path(
            snapshot_download(
                repo_id, repo_type=repo_type, revision=revision, cache_dir=cache, local_files_only=local_only
            )
        )
    except Exception as exc:
        if local_only or is_connection_error(exc):
            raise HubUnavailableError(
                unavailable_message(repo_type, hub_ref(repo_id, revision), cache)
            ) from exc
        raise


def hub_file(repo_id: str, filename: str, revision: str | None, repo_type: str = "model") -> Path:
    """One file of ``repo_id`` at ``revision`` (downloaded first unless offline), in its snapshot
    folder: a model's ``config.json`` is read before its weights are fetched."""
    from huggingface_hub import hf_hub_download

    cache = hub_cache()
    try:
        path = hf_hub_download(
            repo_id,
            filename,
            repo_type=repo_type,
            revision=revision,
            cache_dir=cache,
            local_files_only=offline(),
        )
        return Path(path)
    except Exception as exc:
        if offline() or is_connection_error(exc):
            raise HubUnavailableError(
                unavailable_message(repo_type, hub_ref(repo_id, revision), cache)
            ) from exc
        raise


def commit_of(folder: str | Path) -> str:
    """The commit a snapshot folder (``.../snapshots/<commit>``) holds."""
    name = Path(folder).name
    if not is_commit(name):
        raise ValueError(f"{folder} is not a hub snapshot folder (.../snapshots/<40-hex commit>)")
    return name


@dataclass(frozen=True)
class HubDataset:
    """Where a dataset lives on the hub and how its rows map to the common schema."""

    repo_id: str
    config: str | None
    split: str
    question_field: str
    to_answer: Callable[[dict], str]

    @property
    def source(self) -> str:
        return f"{self.repo_id}/{self.split}"


def gsm8k_answer(row: dict) -> str:
    """GSM8K's reference is a worked solution ending ``#### 42``; the answer is what follows."""
    text = str(row["answer"])
    _, marker, final = text.rpartition("####")
    return (final if marker else text).strip().replace(",", "")


DATASETS: dict[str, HubDataset] = {
    "polaris": HubDataset(
        "POLARIS-Project/Polaris-Dataset-53K", None, "train", "problem", lambda r: str(r["answer"]).strip()
    ),
    "gsm8k": HubDataset("openai/gsm8k", "main", "test", "question", gsm8k_answer),
    "math500": HubDataset(
        "HuggingFaceH4/MATH-500", None, "test", "problem", lambda r: str(r["answer"]).strip()
    ),
}


def load_hub_dataset(
    name: str,
    *,
    local_path: str | Path | None = None,
    limit: int | None = None,
    revision: str | None = None,
) -> list[Example]:
    """Rows of dataset ``name`` (a key of :data:`DATASETS`) in the common schema, from the hub
    repository at ``revision`` (None: its default branch).

    ``local_path`` reads a local file/directory with the hub dataset's columns instead of the hub.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    spec = DATASETS[name]
    rows = _read_local(local_path) if local_path is not None else _read_hub(spec, revision)
    out = []
    for i, row in enumerate(rows):
        if limit is not None and i >= limit:
            break
        question = str(row[spec.question_field]).strip()
        out.append(
            Example(
                prompt=f"{question}\n{BOXED_INSTRUCTION}",
                answer=spec.to_answer(row),
                source=spec.source,
                meta={"question": question, "index": i},
            )
        )
    return out


def _read_local(path: str | Path):
    from datasets import load_dataset

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"local dataset file {path} does not exist")
    files = sorted(path.glob("*.json*")) + sorted(path.glob("*.parquet")) if path.is_dir() else [path]
    if not files:
        raise FileNotFoundError(f"no .json/.jsonl/.parquet files in {path}")
    kind = "parquet" if files[0].suffix == ".parquet" else "json"
    return load_dataset(kind, data_files=[str(f) for f in files], split="train")


def _read_hub(spec: HubDataset, revision: str | None = None):
    """The dataset's rows from its repository's snapshot at ``revision`` (:func:`snapshot`), read by
    ``datasets`` as a local folder (the same data files and ``configs`` of its card as from the hub):
    the rows are those of the commit the run records."""
    from datasets import load_dataset

    folder = snapshot(spec.repo_id, revision, "dataset")
    return load_dataset(str(folder), spec.config, split=spec.split)


def unavailable_message(kind: str, ref: str, cache: str | Path) -> str:
    mode = "HF_HUB_OFFLINE=1 is set" if offline() else "the hub could not be reached"
    repo_id, revision = parse_ref(ref)
    flags = (" --repo-type dataset" if kind == "dataset" else "") + (
        f" --revision {revision}" if revision else ""
    )
    at = f" at revision {revision}" if revision else ""
    return (
        f"{kind} {repo_id!r}{at} is not available: {mode} and it is not in the local cache ({cache}). "
        f"On a machine with internet, run `hf download {repo_id}{flags}` (or `huggingface-cli download`, "
        f"the same arguments; or set HF_HOME to a cache that has it), "
        f"or pass a local path. The cpu-tiny profile needs no download: it uses the models and data "
        f"shipped in data/."
    )


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes") or os.environ.get(
        "HF_DATASETS_OFFLINE", "0"
    ).lower() in ("1", "true", "yes")


def is_connection_error(exc: BaseException) -> bool:
    names = {type(e).__name__ for e in _chain(exc)}
    return bool(names & {"ConnectionError", "LocalEntryNotFoundError", "OfflineModeIsEnabled"})


def _chain(exc: BaseException | None):
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


def _datasets_cache() -> str:
    from datasets import config

    return str(config.HF_DATASETS_CACHE)


# ---------------------------------------------------------------------------------------- chat


def chat_messages(example: Example, system: str | None = QWEN_SYSTEM) -> list[dict[str, str]]:
    """The conversational form TRL takes: an optional system turn, then the user turn."""
    turns = [{"role": "system", "content": system}] if system else []
    return [*turns, {"role": "user", "content": example.prompt}]


def format_prompt(tokenizer, example: Example, system: str | None = QWEN_SYSTEM) -> str:
    """The prompt as text through the tokenizer's chat template (ChatML if it has none), ending with
    the assistant turn's opening so the model answers next."""
    template = getattr(tokenizer, "chat_template", None) or CHATML_TEMPLATE
    return tokenizer.apply_chat_template(
        chat_messages(example, system), chat_template=template, tokenize=False, add_generation_prompt=True
    )


# ---------------------------------------------------------------------------------------- answers


def is_equivalent(completion: str, reference: str) -> bool:
    """``math-verify``: does the completion's final answer (``\\boxed{}`` first, then the last
    expression) equal the reference answer? Never raises; unparseable means not equivalent."""
    from math_verify import parse, verify

    try:
        gold = parse(reference if "$" in reference or "\\boxed" in reference else f"${reference}$")
        pred = parse(completion)
        return bool(gold) and bool(pred) and bool(verify(gold, pred))
    except Exception:
        return False
