"""``paper-repro cells``: grid cells run directly (:func:`paper_repro.run.runner.run_specs`), no notebooks."""

from __future__ import annotations

import argparse

from paper_repro.commands._options import PROFILE_HELP, RESULTS_HELP, add_command, positive_int, seed
from paper_repro.config import STAGES

NAME = "cells"
HELP = "run grid cells directly (no notebooks), skipping finished runs"
RECIPE = ("P", "G", "K", "mu")  # a recipe's fields, in the order --recipe's value is read
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
        "data/results/<profile>/runs.csv (or --results DIR). Finished runs are skipped. A run that is not "
        "one of the study's (another seed, an allocation of your own) goes into a folder of your own.\n\n"
        "  paper-repro cells --profile cpu-tiny --setting dense --cells r40 r66 --seed 0\n"
        "  paper-repro cells --profile cpu-tiny --setting dense --cells r40 r66 --seed 3 4 --results out/explore\n"
        "  paper-repro cells --profile cpu-tiny --setting dense --recipe P=4,G=8,K=4,mu=2 --rho 0.6 --seed 0 "
        "--results out/mine",
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
    c.add_argument(
        "--recipe",
        nargs="+",
        type=recipe,
        default=[],
        help="allocations of your own, each given literally as P=8,G=8,K=4,mu=2 (needs --results)",
    )
    c.add_argument(
        "--rho",
        nargs="+",
        type=float,
        default=[],
        help="target update shares of your own (e.g. 0.6), each realised by the planner (needs --results)",
    )
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


def recipe(text: str) -> tuple[int, int, int, int]:
    """``P=8,G=8,K=4,mu=2`` as (P, G, K, mu)."""
    example = "P=8,G=8,K=4,mu=2"
    try:
        pairs = [(k.strip(), int(v)) for k, v in (part.split("=") for part in text.split(","))]
    except ValueError:
        raise argparse.ArgumentTypeError(f"a recipe is written {example}, got {text!r}") from None
    given = dict(pairs)
    if len(pairs) != len(RECIPE) or sorted(given) != sorted(RECIPE) or min(given.values()) < 1:
        raise argparse.ArgumentTypeError(
            f"a recipe names P, G, K and mu once each, positive: {example}; got {text!r}"
        )
    return tuple(given[k] for k in RECIPE)


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from paper_repro.drivers import study
    from paper_repro.run import runner
    from paper_repro.run.study_design import check_named

    profile = study.prepare(args.profile)
    check_named(profile, args.results)
    specs = _specs(profile, args)
    rows = runner.run_specs(specs, args.results, jobs=args.jobs, threads=args.threads)
    table = pd.DataFrame(rows, columns=list(SHOWN))
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(table.to_string(index=False))
    return 0 if (table["status"] == "ok").all() else 1


def _specs(profile, args: argparse.Namespace) -> list:
    """The runs the options ask for: the planned cells of the settings (``--cells``: some of them), or
    the allocations of your own (``--recipe``, ``--rho``: :func:`paper_repro.drivers.study.own_cells`)."""
    from paper_repro.common.results import results_dir
    from paper_repro.drivers import study
    from paper_repro.run.spec import setting_specs

    kind = "pilot" if args.pilot else "full"
    settings = [profile.setting(name) for name in args.setting] if args.setting else []
    settings += [s for stage in args.stage or [] for s in profile.settings(stage)]
    if not settings:
        raise ValueError("say what to run: --stage A B D and/or --setting NAME ...")
    seeds = args.seed if args.seed else args.seeds
    if args.recipe or args.rho:
        if args.cells:
            raise ValueError("give the grid's --cells or allocations of your own (--recipe, --rho), not both")
        committed = results_dir(profile.name)
        if results_dir(profile.name, args.results).resolve() == committed.resolve():
            raise ValueError(
                f"refused: allocations of your own go into a folder of your own, never the committed "
                f"{committed.name} study: add --results out/mine"
            )
        return [
            spec
            for s in dict.fromkeys(settings)
            for spec in study.own_specs(
                profile, s.name, study.own_cells(profile, s.name, args.recipe, args.rho, kind), seeds, kind
            )
        ]
    specs = [spec for s in dict.fromkeys(settings) for spec in setting_specs(profile, s, seeds, kind)]
    if args.cells:
        grid = {s.cell for s in specs}
        unknown = [c for c in args.cells if c not in grid]
        if unknown:
            raise ValueError(
                f"cells {unknown} are in none of these settings' grids ({', '.join(sorted(grid))}); "
                "an allocation of your own: --recipe P=8,G=8,K=4,mu=2 or --rho 0.6, with --results out/mine"
            )
        specs = [s for s in specs if s.cell in args.cells]
    return specs
