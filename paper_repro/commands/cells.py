"""``paper-repro cells``: grid cells run directly (:func:`paper_repro.run.runner.run_specs`), no notebooks."""

from __future__ import annotations

import argparse

from paper_repro.commands._options import PROFILE_HELP, RESULTS_HELP, add_command, positive_int, seed
from paper_repro.config import STAGES

NAME = "cells"
HELP = "run grid cells directly (no notebooks), skipping finished runs"
# what the command prints of each run's row
SHOWN = (
    "stage",
    "setting",
    "cell",
    "seed",
    "P",
    "G",
    "K",
    "mu",
    "rounds",
    "target_rho",
    "rho",
    "C_total",
    "budget_flops",
    "gsm_pass1",
    "base_gsm_pass1",
    "seconds_total",
    "status",
)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    c = add_command(
        subparsers,
        NAME,
        HELP,
        "Run the planned cells x seeds of the given stages or settings and append one row per run to "
        "data/results/<profile>/runs.csv (or --results DIR). Finished runs are skipped.\n\n"
        "  paper-repro cells --profile cpu-tiny --setting dense --cells r40 r66 --seed 3 4",
    )
    c.add_argument("--profile", required=True, help=PROFILE_HELP)
    c.add_argument(
        "--stage",
        nargs="+",
        type=str.upper,
        choices=STAGES,
        default=None,
        help="every setting of these stages",
    )
    c.add_argument(
        "--setting",
        nargs="+",
        default=None,
        help="these settings (a size of stage A, a reward system of B or D)",
    )
    c.add_argument("--cells", nargs="+", default=None, help="only these cells (e.g. r40 r66); default all")
    seeds = c.add_mutually_exclusive_group()
    seeds.add_argument(
        "--seeds",
        type=positive_int,
        default=None,
        help="seeds 0..N-1 per cell (default: the profile's count)",
    )
    seeds.add_argument("--seed", type=seed, nargs="+", default=None, help="exactly these seeds")
    c.add_argument("--pilot", action="store_true", help="at the RACE pilot budget")
    c.add_argument("--jobs", type=positive_int, default=1, help="runs in parallel (worker processes)")
    c.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="torch threads per run (default: one, never more than the cores divided among the jobs: "
        "paper_repro.run.runner.threads_per_job; more cores go to --jobs)",
    )
    c.add_argument("--results", default=None, help=RESULTS_HELP)
    return c


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from paper_repro.drivers import study
    from paper_repro.run import runner
    from paper_repro.run.spec import setting_specs

    profile = study.prepare(args.profile)
    kind = "pilot" if args.pilot else "full"
    settings = [profile.setting(name) for name in args.setting] if args.setting else []
    settings += [s for stage in args.stage or [] for s in profile.settings(stage)]
    if not settings:
        raise ValueError("say what to run: --stage A B D and/or --setting NAME ...")
    seeds = args.seed if args.seed else args.seeds
    specs = [spec for s in dict.fromkeys(settings) for spec in setting_specs(profile, s, seeds, kind)]
    if args.cells:
        grid = {s.cell for s in specs}
        unknown = [c for c in args.cells if c not in grid]
        if unknown:
            raise ValueError(
                f"cells {unknown} are in none of these settings' grids ({', '.join(sorted(grid))})"
            )
        specs = [s for s in specs if s.cell in args.cells]
    rows = runner.run_specs(specs, args.results, jobs=args.jobs, threads=args.threads)
    table = pd.DataFrame(rows, columns=list(SHOWN))
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(table.to_string(index=False))
    return 0 if (table["status"] == "ok").all() else 1
