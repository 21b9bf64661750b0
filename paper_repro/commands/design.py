"""``paper-repro design``: the design's operating characteristics, simulated before any run
(:func:`paper_repro.analysis.simulate_design`); ``--candidates`` compares candidate designs at their
cost (:mod:`paper_repro.commands._candidates`)."""

from __future__ import annotations

import argparse

from paper_repro.commands._options import PROFILE_HELP, RUNS_HELP, add_command, positive_int

NAME = "design"
HELP = "operating characteristics: how often each claim's test is wrong, simulated before any run"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from paper_repro.analysis.design import REPLICATES
    from paper_repro.commands import _candidates

    d = add_command(
        subparsers,
        NAME,
        HELP,
        "Simulate the study's design (its settings, cells and seeds) under known truths (flat, peaks at "
        "0.45 and 0.72, a plateau, monotone, the paper's world), with the seed noise and recipe effect the "
        "committed runs show (or the values given), run the claims' own tests, and write design.csv beside "
        "runs.csv: per truth and claim the share held / not held / inconclusive / heterogeneous, the wrong "
        "share, the two-draw agreement and the rho* interval coverage.",
    )
    d.add_argument("--profile", required=True, help=PROFILE_HELP)
    d.add_argument("--results", default=None, help=RUNS_HELP)
    d.add_argument("--quick", action="store_true", help="the quick (smoke) study's design")
    d.add_argument(
        "--recipe-sd",
        type=float,
        default=None,
        help="the recipe effect's SD (default: estimated from the committed runs)",
    )
    d.add_argument(
        "--seed-sd",
        type=float,
        default=None,
        help="one seed SD for every cell (default: each cell's, from the committed runs)",
    )
    d.add_argument(
        "--amplitude",
        type=float,
        default=None,
        help="the truths' height (default: the committed frontiers' median range)",
    )
    d.add_argument(
        "--replicates", type=positive_int, default=None, help=f"study pairs per truth (default: {REPLICATES})"
    )
    d.add_argument(
        "--replace-registered",
        action="store_true",
        help="overwrite design.csv's pre-registered block although the results folder already holds grid "
        "runs (the block is the design's registration: written before the runs, never after)",
    )
    d.add_argument(
        "--more-seeds",
        type=positive_int,
        nargs="*",
        default=[],
        help="also simulate the design with these seeds per cell",
    )
    d.add_argument(
        "--recipes",
        type=positive_int,
        nargs="*",
        default=[],
        help="also simulate r recipes averaged per cell (recipe SD / sqrt(r))",
    )
    _candidates.add_options(d)
    return d


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from paper_repro.analysis import simulate_design
    from paper_repro.drivers import study

    profile = study.prepare(args.profile, args.quick)
    variants = {f"{n} seeds": (n, 1.0) for n in args.more_seeds}
    variants.update({f"{r} recipes per cell": (profile.seeds, float(r) ** 0.5) for r in args.recipes})
    if args.candidates or args.price_only:
        from paper_repro.commands import _candidates

        return _candidates.run(args, profile, variants)
    table = simulate_design(
        profile,
        args.results,
        args.recipe_sd,
        args.seed_sd,
        args.amplitude,
        args.replicates,
        variants,
        progress=lambda step: print(f"simulating {step}", flush=True),
        replace_registered=args.replace_registered,
    )
    now = table[table["design"] == "committed"]
    worst = now.groupby("claim", sort=False).agg(
        wrong_max=("wrong", "max"), agreement_min=("agreement", "min")
    )
    with pd.option_context("display.width", 200, "display.max_colwidth", 90):
        print(worst.to_string())
    print(f"design.csv in {args.results or 'data/results/' + profile.name}: {len(table)} rows")
    return 0
