"""Is the committed study bit-reproducible on this machine? Rerun a random sample of the committed runs
of the profile's current study (the study's own specs) into an empty scratch table and compare every
metric, FLOP count, round and step count with the committed row (paper_repro.drivers.recheck). Exits 1 when a
row differs beyond tolerance."""

from __future__ import annotations

import argparse

from paper_repro.commands._options import add_command, default_of, positive_int

NAME = "recheck"
HELP = "rerun a sample of the committed runs and compare them row by row"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from paper_repro.drivers.recheck import recheck

    p = add_command(subparsers, NAME, HELP, __doc__)
    p.add_argument("--profile", default=default_of(recheck, "profile_name"), help="the profile rechecked")
    p.add_argument(
        "--scratch", default=None, help="where the reruns' table goes (default: a temporary folder)"
    )
    p.add_argument("--jobs", type=positive_int, default=default_of(recheck, "jobs"), help="runs in parallel")
    p.add_argument("--seed", type=int, default=default_of(recheck, "seed"), help="the sample's random seed")
    return p


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from paper_repro.drivers.recheck import recheck, words

    table = recheck(args.profile, args.scratch, args.jobs, args.seed)
    print(words(table))
    with pd.option_context("display.width", 200):
        print(table.to_string())
    return 1 if (table["verdict"] == "differs").any() else 0
