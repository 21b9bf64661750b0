"""The ledger's state saved with every checkpoint, and restored when a run resumes from one.

The state travels inside the checkpoint Trainer writes, as transformers' ``ExportableState``: a
callback that implements ``state()`` is saved into ``trainer_state.json``
(``TrainerState.stateful_callbacks[<its class name>]``, which ``push_to_hub`` uploads too), so a
checkpoint copied to another folder, or resumed into another ``output_dir``, carries its ledger. The
saved state (:func:`ledger_state`) is :meth:`~paper_repro.ledger.core.FlopLedger.state_dict` (the step
log, the completed rounds, the running totals, the budget's stop, the resumes so far), what the
trainer adds (``extra``: the self-priced round ceiling, the down-sampling generator's state), the run's
identity (a random ``run_id`` kept across resumes) and the global step and ``total_flos`` of the
``TrainerState`` it was saved with.

On resume, the state is read from the ``TrainerState`` of the checkpoint the run resumes from
(:func:`saved_state`) and checked against it (:func:`mismatch`): a state whose step or FLOPs are not that
checkpoint's is another run's and is never loaded. Checkpoints written before this (a
:data:`STATE_NAME` file beside ``trainer_state.json``) are still read (:func:`state_beside`), checked
the same way against their ``trainer_state.json``.

Transformers' own restore of stateful callbacks (``restore_callback_states_from_checkpoint=True``)
rebuilds a callback from its saved arguments, which would detach the ledger from the trainer and
from the callback the user holds: the ledger refuses it (:func:`check_not_rebuilt`) and restores
itself.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from paper_repro.ledger.core import FlopLedger

# The file the ledger wrote beside a checkpoint's trainer_state.json before its state moved into it;
# read on resume (old checkpoints), no longer written.
STATE_NAME = "flop_ledger.json"
# The key of the ledger's state in its callback's exported attributes.
STATE_KEY = "flop_ledger"
# transformers.trainer.TRAINER_STATE_NAME, not imported: that module imports the whole Trainer
TRAINER_STATE_NAME = "trainer_state.json"


def checkpoint_dir(output_dir: str | Path, global_step: int) -> Path:
    """The folder Trainer saves the checkpoint of ``global_step`` in (``PREFIX_CHECKPOINT_DIR``)."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    return Path(output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{global_step}"


def new_run_id() -> str:
    """A random identity for a run, kept in its saved state across every resume."""
    return uuid.uuid4().hex


def ledger_state(
    ledger: FlopLedger | None, run_id: str, trainer_state: Any, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What a ledger callback's ``state()`` returns (transformers' ``ExportableState``): no constructor
    arguments, and the ledger's state under :data:`STATE_KEY` with the run's identity and the step and
    ``total_flos`` of ``trainer_state`` (the ``TrainerState`` being saved), JSON-ready. Before the
    first step (no ledger yet) the attributes are empty."""
    if ledger is None or trainer_state is None:
        return {"args": {}, "attributes": {}}
    saved = {
        "run_id": run_id,
        "step": int(trainer_state.global_step),
        "total_flos": float(trainer_state.total_flos or 0.0),
        "ledger": ledger.state_dict(),
        "extra": extra or {},
    }
    return {"args": {}, "attributes": {STATE_KEY: saved}}


def saved_state(stateful_callbacks: Mapping[str, Any] | None, name: str) -> dict[str, Any] | None:
    """The ledger's state a ``TrainerState`` carries for the callback class ``name``, or None (a
    checkpoint written without it). Transformers keeps a list where a run had two callbacks of one
    class; the last entry is the latest."""
    entry = (stateful_callbacks or {}).get(name)
    if isinstance(entry, list):
        entry = entry[-1] if entry else None
    if not isinstance(entry, Mapping):
        return None
    return entry.get("attributes", {}).get(STATE_KEY)


def state_beside(folder: str | Path) -> dict[str, Any] | None:
    """The ledger's state an older checkpoint holds in a :data:`STATE_NAME` file, or None."""
    path = Path(folder) / STATE_NAME
    return json.loads(path.read_text()) if path.is_file() else None


def trainer_state_of(folder: str | Path) -> dict[str, Any] | None:
    """A checkpoint folder's ``trainer_state.json``, or None."""
    path = Path(folder) / TRAINER_STATE_NAME
    return json.loads(path.read_text()) if path.is_file() else None


def mismatch(saved: Mapping[str, Any], step: int, total_flos: float | None) -> str | None:
    """Why ``saved`` is not the ledger state of the checkpoint whose ``TrainerState`` is at global step
    ``step`` with ``total_flos`` (None: not checked), or None when it is. A state records the step and
    ``total_flos`` it was saved with; an older file is checked by its last step and its useful total
    (which the ledger wrote into ``total_flos``)."""
    ledger = saved["ledger"]
    saved_step = saved.get("step", ledger["steps"][-1]["step"] if ledger["steps"] else 0)
    saved_flos = saved.get("total_flos", ledger["useful_total"])
    if saved_step != step:
        return f"its ledger state is of step {saved_step}, its trainer state of step {step}"
    if total_flos is not None and not math.isclose(saved_flos, total_flos, rel_tol=1e-9, abs_tol=1e-6):
        return (
            f"its ledger state counts {saved_flos:.6g} FLOPs, its trainer state's total_flos {total_flos:.6g}"
        )
    return None


def restore(
    ledger: FlopLedger, saved: Mapping[str, Any], checkpoint: str | None, step: int
) -> dict[str, Any]:
    """Load ``saved`` into ``ledger`` and record the resume (``checkpoint``: the folder it resumed from,
    None where the caller cannot see it; ``step``: its global step); return the trainer's ``extra``."""
    ledger.load_state_dict(saved["ledger"])
    ledger.resumed_from.append({"checkpoint": checkpoint, "step": step})
    return dict(saved.get("extra") or {})


def check_not_rebuilt(args: Any, who: str) -> None:
    """Refuse ``restore_callback_states_from_checkpoint=True``: transformers would rebuild ``who``'s
    callback from its saved arguments, detached from the trainer and from the callback the user holds
    (and its ``priced_reward`` wrappers), so the resumed run would be counted by a ledger nobody reads."""
    if getattr(args, "restore_callback_states_from_checkpoint", False):
        raise ValueError(
            f"{who} restores the FLOP ledger's state from the checkpoint itself; "
            "restore_callback_states_from_checkpoint=True would make transformers replace its callback "
            "with a new one, detached from the run. Leave restore_callback_states_from_checkpoint=False "
            "(the default)"
        )
