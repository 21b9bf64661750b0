"""The ledger's state saved with every checkpoint, and restored when a run resumes from one.

Trainer saves a checkpoint as ``<output_dir>/checkpoint-<global step>``; the ledger adds one file to
it, :data:`STATE_NAME`, written atomically: :meth:`~paper_repro.ledger.core.FlopLedger.state_dict`
(the step log, the completed rounds, the running totals, the budget's stop, the resumes so far) and
what the trainer adds (``extra``: the self-priced round ceiling, the down-sampling generator's state).
On ``train(resume_from_checkpoint=...)`` the ledger reads it back before the first step, so the budget
is charged with every step the run has taken, across any number of resumes, and the summary and the
compute card say where each resume started (``resumed_from``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from paper_repro.ledger.core import FlopLedger

STATE_NAME = "flop_ledger.json"


def checkpoint_dir(output_dir: str | Path, global_step: int) -> Path:
    """The folder Trainer saves the checkpoint of ``global_step`` in (``PREFIX_CHECKPOINT_DIR``)."""
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    return Path(output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{global_step}"


def save_ledger_state(ledger: FlopLedger, directory: str | Path, extra: dict[str, Any] | None = None) -> Path:
    """Write the ledger's state (and ``extra``) into a checkpoint folder, atomically; return the file."""
    path = Path(directory) / STATE_NAME
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"ledger": ledger.state_dict(), "extra": extra or {}}) + "\n")
    os.replace(tmp, path)
    return path


def load_ledger_state(ledger: FlopLedger, directory: str | Path, step: int | None) -> dict[str, Any] | None:
    """Restore the ledger from a checkpoint folder and record the resume (the folder and ``step``, its
    global step); return the trainer's ``extra``, or None when the folder holds no ledger state (a
    checkpoint written without the ledger)."""
    path = Path(directory) / STATE_NAME
    if not path.is_file():
        return None
    saved = json.loads(path.read_text())
    ledger.load_state_dict(saved["ledger"])
    last = ledger.steps[-1]["step"] if ledger.steps else 0
    ledger.resumed_from.append({"checkpoint": str(directory), "step": last if step is None else step})
    return saved["extra"]
