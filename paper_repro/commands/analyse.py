"""``paper-repro analyse``: the analysis from the result tables alone
(:func:`paper_repro.analysis.analyse`, what notebook 40 runs)."""

from __future__ import annotations

import argparse

from paper_repro.commands._options import PROFILE_HELP, RUNS_HELP, add_command, default_of

NAME = "analyse"
HELP = (
    "the analysis: frontiers, fitted optima, claims with their power, figures, from the result tables alone"
)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from paper_repro.analysis.design import POWER_REPLICATES
    from paper_repro.analysis.tables.race import RegimeThresholds

    a = add_command(
        subparsers,
        NAME,
        HELP,
        "Read runs.csv (and the step logs beside it) in --results and write frontiers, optima, "
        "rho_star_tests, fits, disagreement, race, conventions and claims tables beside it, and the figures "
        "to --figures. Notebook 40 runs the same function.",
    )
    a.add_argument("--profile", required=True, help=PROFILE_HELP)
    a.add_argument("--results", default=None, help=RUNS_HELP)
    a.add_argument("--figures", default=None, help="figures directory (default: figures/<profile>)")
    a.add_argument("--quick", action="store_true", help="analyse a quick (smoke) study's runs")
    a.add_argument(
        "--design",
        choices=["auto", "study", "folder"],
        default="auto",
        help="the runs analysed: the profile's design (study), the cells and seeds the folder holds "
        "(folder: an exploration's), or auto: study where the folder holds runs of its grid",
    )
    a.add_argument(
        "--rho-threshold",
        type=float,
        default=default_of(RegimeThresholds, "rho_threshold"),
        help="RACE: every cell that could be best at or above is update-heavy, every one below search-heavy",
    )
    a.add_argument(
        "--power-replicates",
        type=int,
        default=None,
        help=f"simulated studies per seed count for the power column (default: {POWER_REPLICATES}; 0: none)",
    )
    return a


def run(args: argparse.Namespace) -> int:
    from paper_repro.analysis import analyse
    from paper_repro.analysis.pipeline import summary
    from paper_repro.analysis.tables.race import RegimeThresholds
    from paper_repro.common.paths import repo_relative
    from paper_repro.common.results import results_dir
    from paper_repro.drivers import study

    profile = study.prepare(args.profile, args.quick)
    thresholds = RegimeThresholds(args.rho_threshold)
    root = study.results_root_for(profile, args.quick, args.results)
    result = analyse(profile, root, args.figures, thresholds, args.power_replicates, args.design)
    print(summary(result))
    print(
        f"tables in {repo_relative(results_dir(profile.name, root))}; figures in {repo_relative(result.figures_dir)}"
    )
    return 0
