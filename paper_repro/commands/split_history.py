"""``paper-repro split-history``: an earlier design's rows moved out of runs.csv
(:func:`paper_repro.run.history.split_history`)."""

from __future__ import annotations

import argparse

from paper_repro.commands._options import PROFILE_HELP, RUNS_HELP, add_command

NAME = "split-history"
HELP = "move an earlier design's rows out of runs.csv into runs_history.csv"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    h = add_command(
        subparsers,
        NAME,
        HELP,
        "Move the rows of runs.csv that are not runs of the profile's design (an earlier generation: other "
        "weights or recipe; a stray) to runs_history.csv beside it (same columns), and their curve points "
        "to curves_history.csv. Atomic and idempotent; the step logs stay in steps/.",
    )
    h.add_argument("--profile", required=True, help=PROFILE_HELP)
    h.add_argument("--results", default=None, help=RUNS_HELP)
    h.add_argument(
        "--before",
        default=None,
        help="also move the rows made before this time (ISO 8601): an earlier study of the same design, "
        "before the design's registration",
    )
    return h


def run(args: argparse.Namespace) -> int:
    from paper_repro.drivers import study
    from paper_repro.run.history import split_history

    moved, points = split_history(study.prepare(args.profile), args.results, args.before)
    which = f"not runs of the {args.profile} design" + (
        f" or made before {args.before}" if args.before else ""
    )
    print(
        f"moved {moved} rows that are {which} to runs_history.csv and {points} of their curve points to "
        "curves_history.csv; runs.csv holds the study's rows alone"
    )
    return 0
