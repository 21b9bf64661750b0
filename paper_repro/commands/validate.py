"""The analytic FLOP model against FlopCounterMode on real passes of small models (paper_repro.accounting.validate):
one row per case, measured and predicted FLOPs and their ratio; exits 1 when a ratio is off by more
than the tolerance the tests assert."""

from __future__ import annotations

import argparse
from pathlib import Path

from paper_repro.commands._options import add_command

NAME = "validate"
HELP = "check the FLOP model against torch's FlopCounterMode on real passes of small models"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = add_command(subparsers, NAME, HELP, __doc__)
    p.add_argument("--out", type=Path, default=None, help="write the table as CSV here")
    return p


def run(args: argparse.Namespace) -> int:
    from paper_repro.accounting import validate

    table = validate.table()
    print(table.to_string(index=False, float_format=lambda x: f"{x:.6g}"))
    worst = validate.worst(table)
    print(f"worst |measured/predicted - 1| = {worst:.2e} over {len(table)} cases")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
    return 0 if worst <= validate.TOLERANCE else 1
