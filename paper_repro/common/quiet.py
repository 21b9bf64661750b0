"""What keeps third-party noise out of an executed notebook: known library warnings, library progress
bars, and the trainer callbacks that print every log dict.

:func:`quiet_libraries` runs in every process a run or a testbed build starts in (through
:func:`paper_repro.drivers.study.prepare`, the testbed's ``build_all``, the runner's worker processes,
stage E's worker processes and :mod:`paper_repro.run.worker`); :func:`quiet_trainer` wraps every trainer the package builds. Only the
warnings listed in :func:`quiet_warnings` are silenced: the package's own, and any other library's,
still show.
"""

from __future__ import annotations

import logging
import warnings


def quiet_libraries() -> None:
    """Silence the third-party warnings known to say nothing about a run (:func:`quiet_warnings`), and
    turn off the datasets/transformers progress bars, which would fill an executed notebook."""
    quiet_warnings()
    # after the filters: importing transformers and datasets imports tqdm.auto, which warns
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    # the ledger's line at the end of every run: the runner reports each run itself, and the stop's
    # reason stays in the run's ledger summary; a run past its budget still warns
    logging.getLogger("paper_repro.ledger").setLevel(logging.WARNING)


def quiet_warnings() -> None:
    """Silence the third-party warnings known to say nothing about a run; imports no library of
    them (what imports one first, such as loading a profile, which asks transformers for its GPUs'
    peak, calls this before)."""
    from tqdm import TqdmWarning

    for category, message, module in (
        # tqdm.auto imported in a kernel without ipywidgets (transformers and datasets import it);
        # no widget bar is wanted: the progress bars are off and the runner reports in plain text
        (TqdmWarning, "IProgress not found", ""),
        # TRL calls transformers' deprecated aliases of `is_activation_checkpointing` (in every run)
        # and of `activation_checkpointing_enable`/`_disable` (in a run with checkpointing on)
        (
            FutureWarning,
            r"`(is_gradient_checkpointing|gradient_checkpointing_(en|dis)able)` is deprecated",
            r"transformers\.",
        ),
    ):
        warnings.filterwarnings("ignore", message=message, category=category, module=module)


def quiet_trainer(trainer):
    """``trainer`` without the callbacks that print each log dict (transformers' printer, used with
    ``disable_tqdm``, and its progress bar); what is logged still goes to ``state.log_history`` and
    to every other callback (the FLOP ledger's among them)."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for printer in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(printer)
    return trainer
