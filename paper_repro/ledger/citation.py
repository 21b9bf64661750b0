"""Where a compute card's run came from and what it ran on: what a citation of the run needs.

The card (:mod:`paper_repro.ledger.card`) counts what a ledger-wrapped GRPO run computed; this module
owns its blocks that say which run it was and where it ran. ``provenance`` (:func:`provenance`): the
installed versions of the packages that matter (:func:`package_versions`), the model by hub id, path
or class (:func:`model_name`) and its hub commit, found without the network (:func:`model_revision`),
the train dataset's name, split, revision, fingerprint and rows, never iterating it
(:func:`dataset_provenance`), the seeds, the generation backend (:func:`generation_backend`) and
sampling settings, and the world size. ``hardware`` (:func:`hardware`): the CPU and GPU by name and
count, the processes and the platform. ``versions`` (:func:`library_versions`): the libraries as
imported. And their lines in the card's Markdown (:func:`provenance_lines`, :func:`hardware_line`).
Whatever cannot be known is null with the reason beside it. FLOPs, seconds, peaks and MFU / HFU stay
in :mod:`paper_repro.ledger.card`.
"""

from __future__ import annotations

import json
import os
import platform
import re
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from paper_repro.accounting.devices import cpu_model

if TYPE_CHECKING:
    from paper_repro.ledger.trainer import LedgerGRPOTrainer


def model_name(model: Any, model_type: str, ledger_name: str) -> dict[str, Any]:
    """The model's hub id or path; an in-memory model (empty ``_name_or_path``) by class and type."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    path = getattr(base.config, "_name_or_path", "") or ledger_name
    cls = type(base).__name__
    if path:
        return {"name": str(path), "in_memory": False, "class": cls}
    return {"name": f"in-memory {cls} ({model_type})", "in_memory": True, "class": cls}


def library_versions() -> dict[str, str]:
    """The card's ``versions``: TRL, transformers and torch as imported, and Python."""
    import transformers
    import trl

    return {
        "trl": trl.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def hardware(device: torch.device, processes: int) -> dict[str, Any]:
    """The machine by name and count: the CPU (model, logical CPUs, the ones this process may use,
    torch's threads), the GPU (model, how many the run used: one per process, and how many this
    process sees; ``None`` off CUDA) and the number of processes."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gpu = None
    if device.type == "cuda":
        gpu = {
            "model": torch.cuda.get_device_name(device),
            "count": processes,
            "visible_to_process": torch.cuda.device_count(),
        }
    return {
        "cpu": {
            "model": cpu_model(),
            "logical_cpus": os.cpu_count(),
            "usable_cpus": usable,
            "torch_threads": torch.get_num_threads(),
        },
        "gpu": gpu,
        "processes": processes,
        "platform": platform.platform(),
    }


# The packages a card names, by import name (paper_repro's distribution: paper_repro.common.provenance).
PROVENANCE_PACKAGES = ("paper_repro", "trl", "transformers", "torch", "peft", "accelerate", "datasets")
COMMIT = re.compile(r"[0-9a-f]{40}")


def package_versions() -> dict[str, str | None]:
    """The installed versions of :data:`PROVENANCE_PACKAGES` and Python (None: not installed)."""
    from paper_repro.common.provenance import DISTRIBUTION

    out: dict[str, str | None] = {}
    for name in PROVENANCE_PACKAGES:
        try:
            out[name] = metadata.version(DISTRIBUTION if name == "paper_repro" else name)
        except metadata.PackageNotFoundError:
            out[name] = None
    if out["paper_repro"] is None:  # run from a checkout that is not installed
        import paper_repro

        out["paper_repro"] = paper_repro.__version__
    out["python"] = platform.python_version()
    return out


def model_revision(model: Any, requested: str | None = None) -> dict[str, Any]:
    """The policy's hub commit, where it can be known without the network: ``config._commit_hash``
    (transformers before 5 kept it), the ``.../snapshots/<commit>`` folder it loaded from, or the local
    hub cache's ``refs/<revision>`` for a hub id (``requested``: the ``revision`` TRL was asked to load,
    else ``main``; a model loaded by hand with another ``revision=`` is not seen); else null with the
    reason."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = base.config
    path = str(getattr(config, "_name_or_path", "") or "")
    commit = getattr(config, "_commit_hash", None)
    if commit:
        return {"revision": commit, "revision_source": "config._commit_hash", "revision_missing": None}
    if not path:
        return {
            "revision": None,
            "revision_source": None,
            "revision_missing": "an in-memory model (empty _name_or_path): no hub commit",
        }
    found = re.search(r"snapshots/([0-9a-f]{40})(/|$)", path.replace(os.sep, "/"))
    if found:
        return {
            "revision": found.group(1),
            "revision_source": "the hub snapshot folder it loaded from",
            "revision_missing": None,
        }
    if Path(path).exists():
        return {
            "revision": None,
            "revision_source": None,
            "revision_missing": "loaded from a local path that is not a hub snapshot: no hub commit",
        }
    if requested and COMMIT.fullmatch(requested):
        return {
            "revision": requested,
            "revision_source": "model_init_kwargs['revision']",
            "revision_missing": None,
        }
    ref = requested or "main"
    try:
        from paper_repro.common.paths import hub_cache

        refs = hub_cache() / f"models--{path.replace('/', '--')}" / "refs" / ref
        commit = refs.read_text().strip() if refs.is_file() else None
    except (OSError, ImportError):
        commit = None
    if commit and COMMIT.fullmatch(commit):
        return {
            "revision": commit,
            "revision_source": f"the local hub cache's refs/{ref} (what loading "
            f"{path} at {ref!r} resolved to)",
            "revision_missing": None,
        }
    return {
        "revision": None,
        "revision_source": None,
        "revision_missing": f"{path} at {ref!r} is not in the local hub cache, and transformers "
        "keeps no commit on the config",
    }


def dataset_provenance(dataset: Any) -> dict[str, Any]:
    """The train dataset, without iterating it: name, config, builder and split (``dataset.info``),
    the hub revision where the download records one, datasets' ``_fingerprint`` (map-style
    ``Dataset`` only) and the number of rows (``len`` of a map-style one; an ``IterableDataset``'s
    from its split metadata, else null: it is never iterated); each null with its reason."""
    if dataset is None:
        return {"missing": "no train dataset"}
    info = getattr(dataset, "info", None)
    split = getattr(dataset, "split", None)
    iterable = isinstance(dataset, torch.utils.data.IterableDataset) or not hasattr(dataset, "__len__")
    out: dict[str, Any] = {
        "class": type(dataset).__name__,
        "iterable": iterable,
        "name": getattr(info, "dataset_name", None),
        "config_name": getattr(info, "config_name", None),
        "builder_name": getattr(info, "builder_name", None),
        "split": None if split is None else str(split),
    }
    missing: dict[str, str] = {}
    if out["name"] is None and out["builder_name"] is None:
        missing["name"] = "built in memory (not loaded by name): its fingerprint identifies it"
    revision = None
    for key in getattr(info, "download_checksums", None) or {}:
        found = re.search(r"@([0-9a-f]{40})", str(key))
        if found:
            revision = found.group(1)
            break
    if revision is None:
        for f in getattr(dataset, "cache_files", None) or []:
            found = re.search(r"/([0-9a-f]{40})/", str(f.get("filename", "")).replace(os.sep, "/"))
            if found:
                revision = found.group(1)
                break
    out["revision"] = revision
    if revision is None:
        missing["revision"] = (
            "no hub commit recorded on the dataset (not loaded from the hub, or datasets kept none)"
        )
    fingerprint = getattr(dataset, "_fingerprint", None)
    out["fingerprint"] = fingerprint
    if fingerprint is None:
        missing["fingerprint"] = (
            "an IterableDataset has no fingerprint (datasets fingerprints map-style Datasets only)"
            if iterable
            else f"a {type(dataset).__name__} has no datasets fingerprint"
        )
    rows = None
    if not iterable:
        rows = len(dataset)
    else:
        splits = getattr(info, "splits", None) or {}
        known = splits.get(str(split)) if split is not None and hasattr(splits, "get") else None
        rows = getattr(known, "num_examples", None) or None
        if rows is None:
            missing["rows"] = (
                "an iterable dataset without split metadata: its length is unknown (not iterated)"
            )
    out["rows"] = rows
    out["missing"] = missing
    return out


def generation_backend(trainer: Any) -> str:
    """What generated the rollouts: vLLM (server or colocate), transformers' continuous batching,
    the ledger's lean or fused sampler, or transformers' ``generate``."""
    if getattr(trainer, "use_vllm", False):
        return f"vLLM {getattr(trainer.args, 'vllm_mode', None) or 'colocate'}"
    if getattr(trainer, "use_transformers_continuous_batching", False):
        return "transformers continuous batching"
    sampler = getattr(trainer, "sampler", "hf")
    if sampler in ("lean", "fused"):
        return (
            f"the ledger's {sampler} sampler (paper_repro.sampler; transformers generate where it cannot run)"
        )
    return "transformers generate"


def jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def provenance(trainer: LedgerGRPOTrainer) -> dict[str, Any]:
    """What a citation of the run needs: package versions, the model's revision
    (:func:`model_revision`), the dataset (:func:`dataset_provenance`), the seeds, the generation
    backend (:func:`generation_backend`) and sampling settings, and the world size."""
    args = trainer.args
    requested = (getattr(args, "model_init_kwargs", None) or {}).get("revision")
    policy = trainer.ledger.policy
    name = model_name(trainer.model, policy.model_type, policy.name)["name"]
    sampling = {
        k: getattr(args, k, None)
        for k in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_completion_length")
    }
    sampling["num_generations"] = trainer.num_generations
    sampling["generation_kwargs"] = jsonable(getattr(args, "generation_kwargs", None))
    generation = {
        "backend": generation_backend(trainer),
        "sampler": getattr(trainer, "sampler", None),
        "use_vllm": bool(getattr(trainer, "use_vllm", False)),
        "vllm_mode": getattr(args, "vllm_mode", None) if getattr(trainer, "use_vllm", False) else None,
        # why the last rollout fell back to HF generate
        "lean_fallback": getattr(trainer, "lean_fallback", None),
    }
    return {
        "packages": package_versions(),
        "model": {"name": name, **model_revision(trainer.model, requested)},
        "dataset": dataset_provenance(getattr(trainer, "train_dataset", None)),
        "seed": args.seed,
        "data_seed": args.data_seed,
        "generation": generation,
        "sampling": sampling,
        "world_size": trainer.accelerator.num_processes,
    }


def hardware_line(card: dict[str, Any]) -> str:
    """The card's ``hardware`` as one Markdown list item (the device's type where it is neither CPU
    nor CUDA)."""
    hw, dev = card["hardware"], card["device"]
    cpu = hw["cpu"]
    line = (
        f"- hardware: CPU {cpu['model']} ({cpu['logical_cpus']} logical CPUs, {cpu['usable_cpus']} usable, "
        f"{cpu['torch_threads']} torch threads)"
    )
    gpu = hw["gpu"]
    if gpu is not None:
        line += f"; GPU {gpu['count']} x {gpu['model']} ({gpu['visible_to_process']} visible to the process)"
    elif dev["type"] not in ("cpu", "cuda"):
        line += f"; device {dev['type']}"
    return line + f"; {hw['processes']} process(es); {hw['platform']}"


def provenance_lines(prov: dict[str, Any]) -> list[str]:
    """The card's ``provenance`` as Markdown list items: packages, model revision, dataset, seeds,
    generation and sampling (:func:`paper_repro.ledger.card.card_markdown` places them)."""
    pk, mod, ds, gen = prov["packages"], prov["model"], prov["dataset"], prov["generation"]
    revision = mod["revision"] or f"none ({mod['revision_missing']})"
    rows = ds.get("rows") if ds.get("rows") is not None else "unknown"
    return [
        "- provenance: " + ", ".join(f"{k} {v}" for k, v in pk.items()),
        f"- model revision: {revision}" + (f" ({mod['revision_source']})" if mod["revision"] else ""),
        f"- dataset: {ds.get('name') or ds.get('builder_name') or 'in memory'}"
        f"{'/' + ds['config_name'] if ds.get('config_name') else ''}, split {ds.get('split')}, "
        f"{rows} rows, revision {ds.get('revision') or '–'}, fingerprint {ds.get('fingerprint') or '–'}",
        f"- seed {prov['seed']}, data_seed {prov['data_seed']}; generation by {gen['backend']}; sampling "
        + ", ".join(f"{k}={v}" for k, v in prov["sampling"].items())
        + f"; world size {prov['world_size']}",
    ]
