"""The runs' compute cards, read back: one row per run that wrote one (``steps/<run_id>.card.json``).

Each study run writes its ledger's compute card beside its step log (:func:`paper_repro.ledger.card.compute_card`):
FLOPs per component under both conventions, wall seconds, the device and the achieved FLOP/s
against its peak: ``mfu`` (useful FLOPs) and ``utilisation`` (executed FLOPs: the card's ``hfu``,
which cards before version 2 called ``utilisation``), empty where the card states no peak (a CPU
without ``LedgerConfig.peak_flops``). :func:`card_table` flattens them into ``compute_cards.csv``
(runs recorded before the cards existed have none and are simply absent), so the study's own compute report is
a table like every other: per run, where the FLOPs went and how fast the hardware ran them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

COLUMNS = (
    "run_id",
    "device",
    "peak_flops_per_s",
    "steps",
    "rounds",
    "rho",
    "rho_executed",
    "rho_time",
    "C_total_useful",
    "C_total_executed",
    "seconds_total",
    "achieved_flops_per_s",
    "utilisation",
    "mfu",
)


def card_table(steps_dir: str | Path, run_ids=None) -> pd.DataFrame:
    """The cards under ``steps_dir`` (of ``run_ids`` only, when given), one flat row each."""
    rows = []
    for path in sorted(Path(steps_dir).glob("*.card.json")):
        run_id = path.name.removesuffix(".card.json")
        if run_ids is not None and run_id not in run_ids:
            continue
        card = json.loads(path.read_text())
        device = card.get("device", {})
        rows.append(
            {
                "run_id": run_id,
                "device": device.get("name") or device.get("type"),
                "peak_flops_per_s": device.get("peak_flops_per_s"),
                "steps": card.get("steps"),
                "rounds": card.get("rounds"),
                "rho": card.get("rho"),
                "rho_executed": card.get("rho_executed"),
                "rho_time": card.get("rho_time"),
                "C_total_useful": card["flops"]["useful"]["C_total"],
                "C_total_executed": card["flops"]["executed"]["C_total"],
                "seconds_total": card.get("seconds", {}).get("total"),
                "achieved_flops_per_s": card.get("achieved_flops_per_s", {}).get("total"),
                "utilisation": (card.get("hfu") or card.get("utilisation") or {}).get("total"),
                "mfu": (card.get("mfu") or {}).get("total"),
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))
