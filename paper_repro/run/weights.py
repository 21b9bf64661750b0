"""Weight fingerprints: a local checkpoint enters a run's id by a hash of its weight files.

A rebuilt testbed (new weights at the same path) is then a new run, while a hub id is named by its id
and revision (``owner/name@<commit>``). The digest of a checkpoint is cached by its files' names,
sizes and modification times, so a sweep hashes each checkpoint once.

:func:`sources` is what a run's models and datasets resolved to (the hub commit, or the local
fingerprint), which its row records (``versions``, key ``sources``).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from pathlib import Path

from paper_repro import models as _models
from paper_repro.models import local as _local


def weights_fingerprint(*models: str | None) -> str | None:
    """A short sha256 over the weight files of the local checkpoints among ``models``; None when
    none is local (hub ids)."""
    digests = [_checkpoint_digest(_local(m), _files_stamp(_local(m))) for m in models if m is not None]
    digests = [d for d in digests if d]
    if not digests:
        return None
    return hashlib.sha256("".join(digests).encode()).hexdigest()[:16]


def sources(model_refs: Iterable[str | None], data_refs: Iterable[str] = ()) -> dict[str, str]:
    """What each model and dataset a run names resolved to, by its reference: a hub id (``owner/name``
    or ``owner/name@revision``) the commit of the snapshot it loads from (:func:`paper_repro.tasks.hub.snapshot`;
    a branch is resolved once per process, so this is the commit the run loaded); a local checkpoint
    ``local:<fingerprint>`` (:func:`weights_fingerprint`); local rows (a shipped split, ``<id>=<path>``)
    ``local``. A reference that cannot be resolved is recorded as ``unresolved: <error>``, never raised
    (the checks before compute have resolved each one already)."""
    from paper_repro.tasks import hub, hub_dataset

    out: dict[str, str] = {}
    for ref in (m for m in model_refs if m is not None):
        try:
            if _models.is_hub_id(ref):
                out[ref] = hub.commit_of(_models.checkpoint(ref))
            else:
                out[ref] = f"local:{weights_fingerprint(ref) or 'no weight files'}"
        except Exception as err:
            out[ref] = f"unresolved: {type(err).__name__}"
    for ref in data_refs:
        remote = hub_dataset(ref)
        try:
            out[ref] = hub.commit_of(hub.snapshot(*hub.parse_ref(remote), "dataset")) if remote else "local"
        except Exception as err:
            out[ref] = f"unresolved: {type(err).__name__}"
    return out


def _weight_files(path: str) -> list[Path]:
    """The files that fix what a checkpoint computes: its weights and any modelling code it ships
    (the testbed PRM's ``likelihood_prm.py``, Qwen2.5-Math-PRM's remote code)."""
    folder = Path(path)
    if not folder.is_dir():
        return []
    return [
        *sorted(folder.glob("*.safetensors")),
        *sorted(folder.glob("*.bin")),
        *sorted(folder.glob("*.py")),
    ]


def _files_stamp(path: str) -> tuple:
    """Names, sizes and mtimes: a rebuilt checkpoint gets a new cache entry of the digest."""
    return tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in _weight_files(path))


@functools.lru_cache(maxsize=64)
def _checkpoint_digest(path: str, stamp: tuple) -> str | None:
    files = _weight_files(path)
    if not files:
        return None
    digest = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
