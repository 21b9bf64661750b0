"""Two draws of one study: the runs table is append-only, so a study rerun on another training
configuration leaves the earlier draw beside the new one (paper_repro.analysis.draws). Without
--compare, list the draws of runs_history.csv and runs.csv (the distinct training configurations, in
the order of their first run); with --compare A B, analyse draws A and B apart (each in a scratch
directory, never the committed one) and print each distinct setting's rho* verdict per target for
both, and the claims that moved."""

from __future__ import annotations

import argparse

from paper_repro.commands._options import RUNS_HELP, add_command

NAME = "draws"
HELP = "list the draws of a study's runs tables, or compare two draws' verdicts"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = add_command(subparsers, NAME, HELP, __doc__)
    p.add_argument("--profile", default="cpu-tiny", help="the profile whose runs are read")
    p.add_argument("--results", default=None, help=RUNS_HELP)
    p.add_argument("--compare", nargs=2, type=int, metavar=("A", "B"), help="the two draws to compare")
    return p


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from paper_repro.analysis import draws
    from paper_repro.common.results import results_dir
    from paper_repro.config import load_profile

    profile = load_profile(args.profile)
    runs = draws.all_runs(results_dir(profile.name, args.results))
    if args.compare is None:
        for line in draws.listing(runs):
            print(line)
        return 0
    a, b = args.compare
    side, table = draws.compare(profile, runs, a, b)
    same = int((side[f"verdict_{a}"] == side[f"verdict_{b}"]).sum())
    with pd.option_context("display.width", 220, "display.max_colwidth", 80, "display.max_rows", 200):
        print(side[[f"verdict_{a}", f"best_cells_{a}", f"verdict_{b}", f"best_cells_{b}"]].to_string())
        print(f"per-setting verdicts that agree: {same} of {len(side)}")
        print(table.to_string())
        print(f"claims that agree: {int((table.iloc[:, 0] == table.iloc[:, 1]).sum())} of {len(table)}")
    return 0
