"""One resolver from a model name to its checkpoint and its shape.

A profile, a run spec or a command line names a model in one of three ways, and every caller
resolves them by the same rules:

- a **checkpoint directory** holding a ``config.json``: absolute, or relative to the checkout
  (``data/models/policy-M``);
- a **hub id** (``Qwen/Qwen2.5-7B-Instruct``): its weights come from the local Hugging Face cache
  (downloaded first unless offline); its *shape* needs no weights, because the repo ships the
  configs of the gpu-paper models in ``data/model_configs/`` (named by the id's last part, lower-cased);
- a **shipped config name** (``qwen2.5-7b-instruct``) or a ``config.json`` path: a shape only.

:func:`checkpoint` gives the local directory to load weights from; :func:`shape` the
:class:`~paper_repro.flops.ModelShape` the FLOP model prices. Neither loads weights.
"""

from __future__ import annotations

from pathlib import Path

from paper_repro.flops import ModelShape
from paper_repro.paths import in_repo, repo_root

SHIPPED_CONFIGS = Path("data") / "model_configs"


def local(name: str | Path) -> str:
    """``name`` as a path when it is a local file or directory (a repo-relative one made absolute);
    otherwise unchanged (a hub id)."""
    path = in_repo(name)
    return str(path) if path.exists() else str(name)


def is_hub_id(name: str | Path) -> bool:
    """``owner/name`` that is not a local path."""
    text = str(name)
    return not in_repo(text).exists() and not text.startswith((".", "/", "~")) and text.count("/") == 1


def checkpoint(name: str | Path) -> Path:
    """A local directory holding the model ``name``: the checkpoint directory itself, or the hub
    snapshot in the local cache (downloaded first unless ``HF_HUB_OFFLINE`` is set).

    Raises ``FileNotFoundError`` for a directory without ``config.json`` or a path that does not
    exist, and :class:`~paper_repro.tasks.hub.HubUnavailableError` (which says how to get it) for a
    hub id that is not cached and cannot be downloaded."""
    from paper_repro.tasks import hub

    path = in_repo(name)
    if path.is_dir():
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"{path} has no config.json: not a Hugging Face checkpoint directory")
        return path
    if not is_hub_id(name):
        raise FileNotFoundError(
            f"model checkpoint directory {path} does not exist (a model is a checkpoint directory, "
            "absolute or relative to the checkout, or a hub id owner/name)"
        )
    from huggingface_hub import snapshot_download
    from huggingface_hub.constants import HF_HUB_CACHE

    try:
        return Path(snapshot_download(str(name), local_files_only=hub.offline()))
    except Exception as exc:
        if hub.offline() or hub.is_connection_error(exc):
            raise hub.HubUnavailableError(hub.unavailable_message("model", str(name), HF_HUB_CACHE)) from exc
        raise


def shipped_config(name: str | Path) -> Path:
    """Where the repo would ship the config of ``name`` (a hub id or a shipped name)."""
    return repo_root() / SHIPPED_CONFIGS / f"{str(name).split('/')[-1].lower().removesuffix('.json')}.json"


def shipped_names() -> list[str]:
    return sorted(p.stem for p in (repo_root() / SHIPPED_CONFIGS).glob("*.json"))


def shape(name: str | Path | ModelShape) -> ModelShape:
    """The shape of model ``name``: from its checkpoint's or file's ``config.json`` when local, else
    from the config the repo ships for it (a hub id or a shipped name). No weights are read."""
    if isinstance(name, ModelShape):
        return name
    path = in_repo(name)
    if path.is_file() or (path / "config.json").is_file():
        return ModelShape.from_config(path)
    shipped = shipped_config(name)
    if shipped.is_file():
        return ModelShape.from_config(shipped, name=str(name))
    if path.is_relative_to(repo_root() / "data" / "models"):
        raise FileNotFoundError(
            f"no checkpoint {path}: the cpu-tiny testbed's models are built by the repo; run `make models` "
            "(notebook 00_embedded_models) to build it"
        )
    raise FileNotFoundError(
        f"no config for model {str(name)!r}: looked for {path / 'config.json'} and the shipped "
        f"{shipped}. Pass a checkpoint directory, a config.json, a hub id with a shipped config, or one "
        f"of the shipped names: {', '.join(shipped_names())}"
    )
