"""Does the study reproduce? Compare a study recomputed from nothing (the results folder `make
reproduce` writes) with the committed one (data/results/<profile>), and print how many committed run
ids the recomputed runs.csv holds, per compared column the largest difference over the matched runs
and how many differ beyond tolerance, and every claim whose verdict moved (paper_repro.drivers.reproduce).
Exits 0 when the study reproduces, 1 otherwise."""

from __future__ import annotations

import argparse

from paper_repro.commands._options import add_command

NAME = "reproduce"
HELP = "compare a study recomputed from nothing with the committed one (make reproduce)"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from paper_repro.drivers.reproduce import REPRODUCED

    p = add_command(subparsers, NAME, HELP, __doc__)
    p.add_argument("--profile", default="cpu-tiny", help="the profile whose study is compared")
    p.add_argument("--results", default=None, help=f"the recomputed study (default: {REPRODUCED}/<profile>)")
    p.add_argument("--committed", default=None, help="the committed study (default: data/results/<profile>)")
    p.add_argument(
        "--where",
        action="store_true",
        help="print where make reproduce recomputes the study; compare nothing",
    )
    return p


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from paper_repro.common.paths import repo_relative
    from paper_repro.common.results import results_dir
    from paper_repro.drivers.reproduce import compare, reproduced_dir, words

    if args.where:
        print(repo_relative(reproduced_dir(args.profile)))
        return 0
    new_dir = Path(args.results) if args.results else reproduced_dir(args.profile)
    result = compare(args.profile, new_dir, args.committed)
    print(words(result, repo_relative(new_dir), repo_relative(results_dir(args.profile, args.committed))))
    return 0 if result.reproduces else 1
