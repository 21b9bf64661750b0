"""Does the study reproduce? Compare a study recomputed from nothing (the results folder `make
reproduce` writes) with the committed one (data/results/<profile>), and print how many committed run
ids the recomputed runs.csv holds, per compared column the largest difference over the matched runs
and how many differ beyond tolerance, per metric the differing runs against the study's seed-to-seed
spread, per claim whether its verdict moved or its estimate left the committed interval, stage E's
tables, and the outcome in one line: reproduces bit for bit, reproduces within noise, or does not
reproduce (paper_repro.drivers.reproduce). Exits 0 for the first two, 1 for the third.
--simulate N: the rule's operating characteristic on N simulated copies of the committed study per
scenario (paper_repro.drivers.reproduce_oc); compares nothing."""

from __future__ import annotations

import argparse

from paper_repro.commands._options import add_command, positive_int

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
    p.add_argument(
        "--part",
        action="store_true",
        help="the recomputed folder holds a part of the study (runs rerun by paper-repro cells): compare "
        "the committed runs it holds, and the claims only where it has a claims table",
    )
    p.add_argument(
        "--simulate",
        type=positive_int,
        default=None,
        metavar="N",
        help="print the rule's operating characteristic on N simulated recomputations per scenario "
        "(copies of the committed study reseeded, or with an effect moved); compare nothing",
    )
    p.add_argument("--seed", type=int, default=0, help="with --simulate: the simulation's random seed")
    return p


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from paper_repro.common.paths import repo_relative
    from paper_repro.common.results import results_dir
    from paper_repro.drivers.reproduce import compare, reproduced_dir, words

    if args.where:
        print(repo_relative(reproduced_dir(args.profile)))
        return 0
    if args.simulate:
        return _simulate(args)
    new_dir = Path(args.results) if args.results else reproduced_dir(args.profile)
    result = compare(args.profile, new_dir, args.committed, part=args.part)
    print(words(result, repo_relative(new_dir), repo_relative(results_dir(args.profile, args.committed))))
    return 0 if result.reproduces else 1


def _simulate(args: argparse.Namespace) -> int:
    import pandas as pd

    from paper_repro.common.paths import repo_relative
    from paper_repro.common.results import RUN_COLUMNS, ResultTable, results_dir
    from paper_repro.drivers.reproduce_oc import simulate
    from paper_repro.run.history import full_budget_of

    root = results_dir(args.profile, args.committed)
    runs = ResultTable(root / "runs.csv", RUN_COLUMNS, full_budget=full_budget_of).frame()
    table = simulate(runs, pd.read_csv(root / "claims.csv"), args.simulate, args.seed)
    print(
        f"the rule's outcomes on simulated recomputations of {repo_relative(root)} (shares of {args.simulate}):"
    )
    print(table.to_string(index=False))
    return 0
