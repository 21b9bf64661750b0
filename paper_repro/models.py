"""One resolver from a model name to its checkpoint and its shape.

A profile, a run spec or a command line names a model in one of three ways, and every caller
resolves them by the same rules:

- a **checkpoint directory** holding a ``config.json``: absolute, or relative to the checkout
  (``data/models/policy-M``);
- a **hub id** (``Qwen/Qwen2.5-7B-Instruct``), with a revision (``Qwen/Qwen2.5-7B-Instruct@<commit>``,
  :func:`paper_repro.tasks.hub.parse_ref`): its weights come from the local Hugging Face cache
  (downloaded first unless offline); its *shape* needs no weights, because the repo ships the
  configs of the gpu-paper models in ``data/model_configs/`` (named by the id's last part, lower-cased);
- a **shipped config name** (``qwen2.5-7b-instruct``) or a ``config.json`` path: a shape only.

:func:`checkpoint` gives the local directory to load weights from; :func:`shape` the
:class:`~paper_repro.accounting.flops.ModelShape` the FLOP model prices. Neither loads weights.

A checkpoint's own modelling code (``trust_remote_code``, as Qwen2.5-Math-PRM ships) runs only from
a local checkpoint or from a hub model pinned to a 40-hex commit (:func:`trust_remote_code`):
:func:`checkpoint` refuses a hub model that ships code at a branch, a tag or no revision, before its
weights are fetched, since the hub could change that code, and with it the study's reward, under the
same name.
"""

from __future__ import annotations

from pathlib import Path

from paper_repro.accounting.flops import ModelShape
from paper_repro.common.paths import in_repo, repo_root

SHIPPED_CONFIGS = Path("data") / "model_configs"


def local(name: str | Path) -> str:
    """``name`` as a path when it is a local file or directory (a repo-relative one made absolute);
    otherwise unchanged (a hub id)."""
    path = in_repo(name)
    return str(path) if path.exists() else str(name)


class RemoteCodeError(ValueError):
    """A hub model that ships its own code, asked for at a revision that is not a commit."""


def is_hub_id(name: str | Path) -> bool:
    """``owner/name`` (or ``owner/name@revision``) that is not a local path."""
    from paper_repro.tasks import hub

    text = str(name)
    if in_repo(text).exists() or text.startswith((".", "/", "~")):
        return False
    try:
        repo, _ = hub.parse_ref(text)
    except ValueError:
        return False
    return repo.count("/") == 1


def trust_remote_code(name: str | Path) -> bool:
    """Whether model ``name``'s own code may run (``trust_remote_code``): a local checkpoint's (the
    files are the user's, and their fingerprint names the run), or a hub model's pinned to a full
    40-hex commit; never a hub branch's, tag's or default branch's, which the hub can change."""
    from paper_repro.tasks import hub

    return not is_hub_id(name) or hub.is_commit(hub.parse_ref(str(name))[1])


def ships_code(folder: str | Path) -> bool:
    """A checkpoint folder with modelling code of its own: Python files, or an ``auto_map`` in its
    ``config.json`` or ``tokenizer_config.json``."""
    import json

    folder = Path(folder)
    if any(folder.glob("*.py")):
        return True
    for name in ("config.json", "tokenizer_config.json"):
        file = folder / name
        if file.is_file() and json.loads(file.read_text()).get("auto_map"):
            return True
    return False


def _refuse_unpinned_code(name: str, folder: Path) -> None:
    from paper_repro.tasks import hub

    if trust_remote_code(name) or not ships_code(folder):
        return
    repo, revision = hub.parse_ref(name)
    at = f"revision {revision!r}, not a commit" if revision else "no revision (the hub's default branch)"
    raise RemoteCodeError(
        f"refused: model {repo} ships its own code (trust_remote_code) and is asked for at {at}: the hub "
        f"can change that code, and with it what the study computes, under the same name. Pin it to a "
        f"full 40-hex commit (and review the code at that commit): {hub.pin_instructions(repo)}."
    )


def checkpoint(name: str | Path) -> Path:
    """A local directory holding the model ``name``: the checkpoint directory itself, or the hub
    snapshot (``.../snapshots/<commit>``) of ``owner/name@revision`` in the local cache (downloaded
    first unless ``HF_HUB_OFFLINE`` is set; no revision: the default branch).

    Raises ``FileNotFoundError`` for a directory without ``config.json`` or a path that does not
    exist, :class:`~paper_repro.tasks.hub.HubUnavailableError` (which says how to get it) for a
    hub id that is not cached and cannot be downloaded, and :class:`RemoteCodeError` for a hub model
    that ships code at a revision that is not a commit (its ``config.json`` is read first, so the
    weights of a refused model are not fetched)."""
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
    repo, revision = hub.parse_ref(str(name))
    if not trust_remote_code(name):  # its config first: refuse unpinned code before fetching weights
        _refuse_unpinned_code(str(name), hub.hub_file(repo, "config.json", revision).parent)
    folder = hub.snapshot(repo, revision)
    _refuse_unpinned_code(str(name), folder)
    return folder


def shipped_config(name: str | Path) -> Path:
    """Where the repo would ship the config of ``name`` (a hub id or a shipped name)."""
    from paper_repro.tasks import hub

    repo = hub.parse_ref(str(name))[0] if is_hub_id(name) else str(name)
    return repo_root() / SHIPPED_CONFIGS / f"{repo.split('/')[-1].lower().removesuffix('.json')}.json"


def shipped_names() -> list[str]:
    return sorted(p.stem for p in (repo_root() / SHIPPED_CONFIGS).glob("*.json"))


def shape(name: str | Path | ModelShape) -> ModelShape:
    """The shape of model ``name``: from its checkpoint's or file's ``config.json`` when local, else
    from the config the repo ships for it (a hub id or a shipped name), else from a hub id's
    ``config.json`` in the local hub cache. No weights are read."""
    if isinstance(name, ModelShape):
        return name
    path = in_repo(name)
    if path.is_file() or (path / "config.json").is_file():
        return ModelShape.from_config(path)
    shipped = shipped_config(name)
    if shipped.is_file():
        return ModelShape.from_config(shipped, name=str(name))
    cached = _cached_config(name)
    if cached is not None:
        return ModelShape.from_config(cached, name=str(name))
    if path.is_relative_to(repo_root() / "data" / "models"):
        raise FileNotFoundError(
            f"no checkpoint {path}: the cpu-tiny testbed's models are built by the repo; run `make models` "
            "(notebook 00_embedded_models) to build it"
        )
    raise FileNotFoundError(
        f"no config for model {str(name)!r}: looked for {path / 'config.json'}, the shipped "
        f"{shipped} and the local hub cache. Pass a checkpoint directory, a config.json, a hub id with a "
        f"shipped or cached config, or one of the shipped names: {', '.join(shipped_names())}"
    )


def _cached_config(name: str | Path) -> Path | None:
    """A hub model's ``config.json`` at its revision in the local hub cache, if there (never fetched)."""
    if not is_hub_id(name):
        return None
    from huggingface_hub import try_to_load_from_cache

    from paper_repro.tasks import hub

    repo, revision = hub.parse_ref(str(name))
    found = try_to_load_from_cache(repo, "config.json", cache_dir=hub.hub_cache(), revision=revision)
    return Path(found) if isinstance(found, str) else None
