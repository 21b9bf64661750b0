"""Importing the FLOP ledger's callback is light: it loads neither the subclass nor TRL, and installs no
log handler and no hook at import; the run's stop line is set up when a run starts."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

from paper_repro.common.paths import repo_root

PROBE = """
import json, logging, sys
import torch
hooks_before = len(torch.nn.modules.module._global_forward_hooks)
from paper_repro.ledger.callback import FlopLedgerCallback
from paper_repro.ledger import LedgerConfig
logger = logging.getLogger("paper_repro.ledger")
print(json.dumps({
    "trl": "trl" in sys.modules,
    "subclass": "paper_repro.ledger.trainer" in sys.modules,
    "handlers": len(logger.handlers),
    "level": logger.level,
    "global_hooks": len(torch.nn.modules.module._global_forward_hooks) - hooks_before,
    "modules": sorted(m for m in sys.modules if m.startswith("paper_repro")),
}))
"""


def test_importing_the_callback_loads_no_trainer_no_trl_and_installs_nothing():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=repo_root(), capture_output=True, text=True, check=True
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert not seen["trl"] and not seen["subclass"], seen["modules"]
    assert seen["handlers"] == 0 and seen["level"] == logging.NOTSET
    assert seen["global_hooks"] == 0
    assert not any(
        m.startswith(("paper_repro.run", "paper_repro.analysis", "paper_repro.testbed"))
        for m in seen["modules"]
    )


def test_a_run_start_shows_the_stop_line_once_and_keeps_a_level_set_before():
    from paper_repro.ledger.config import show_run_lines

    logger = logging.getLogger("paper_repro.ledger")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    try:
        logger.handlers.clear()
        logger.setLevel(logging.WARNING)
        show_run_lines()
        show_run_lines()
        assert len(logger.handlers) == 1 and logger.level == logging.WARNING
        logger.handlers.clear()
        logger.setLevel(logging.NOTSET)
        show_run_lines()
        assert logger.level == logging.INFO and not logger.propagate
    finally:
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate
