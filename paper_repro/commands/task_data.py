"""Regenerate the arith task's shipped splits (JSONL under data/tasks/arith/), every split built
deterministically from its seed at the shipped corpora's slip rates (paper_repro.tasks.arith
write_splits). Notebook 00 does the same as part of the testbed."""

from __future__ import annotations

import argparse

from paper_repro.commands._options import add_command

NAME = "task-data"
HELP = "regenerate the arith task's shipped splits (data/tasks/arith/)"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from paper_repro.tasks.arith import TASK_DIR

    p = add_command(subparsers, NAME, HELP, __doc__)
    p.add_argument("--out", default=None, help=f"the folder the splits go to (default: {TASK_DIR})")
    return p


def run(args: argparse.Namespace) -> int:
    from paper_repro.tasks.arith import write_splits

    for split, written in write_splits(args.out).items():
        print(f"{split:<10} {written}")
    return 0
