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
        "--beside",
        default=None,
        help="also place the folder's runs on another study's frontier, read and never written: 'committed' "
        "(data/results/<profile>) or a results folder; writes beside_committed.png into the figures folder; "
        "the folder's runs are then read as its own design (--design folder) unless --design says otherwise",
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
    from paper_repro.run.study_design import check_named

    profile = study.prepare(args.profile, args.quick)
    thresholds = RegimeThresholds(args.rho_threshold)
    root = study.results_root_for(profile, args.quick, args.results)
    check_named(profile, root)  # a changed copy of a shipped profile never rewrites its committed tables
    # beside another study, your folder's runs are their own design (--design folder) unless told otherwise
    design = "folder" if args.beside and args.design == "auto" else args.design
    result = analyse(profile, root, args.figures, thresholds, args.power_replicates, design)
    print(summary(result))
    print(
        f"tables in {repo_relative(results_dir(profile.name, root))}; figures in {repo_relative(result.figures_dir)}"
    )
    if args.beside:
        _beside(profile, root, args.beside, result.figures_dir)
    return 0


def _beside(profile, root, beside: str, figures_dir) -> None:
    """Your folder's full-budget runs (at C) on the frontier of ``beside`` ('committed': the profile's
    committed tables; else a results folder): the table printed, the figure written to ``figures_dir``.
    The other folder's ``frontiers.csv`` is read, never written."""
    import pandas as pd

    from paper_repro.analysis.figures.beside import beside_figure, beside_table, write_beside
    from paper_repro.analysis.tables.frontiers import at_full_budget, load_curves, numeric
    from paper_repro.common.paths import repo_relative
    from paper_repro.common.results import RUN_COLUMNS, ResultTable, results_dir

    other = results_dir(profile.name, None if beside == "committed" else beside)
    mine = results_dir(profile.name, root)
    if other.resolve() == mine.resolve():
        raise ValueError(
            f"--beside {beside} is the folder analysed itself ({repo_relative(mine)}): name another"
        )
    if not (other / "frontiers.csv").is_file():
        raise ValueError(
            f"--beside {beside}: {repo_relative(other)} holds no frontiers.csv (analyse it first)"
        )
    frontier = numeric(pd.read_csv(other / "frontiers.csv"))
    runs = numeric(ResultTable(mine / "runs.csv", RUN_COLUMNS).frame())
    runs = runs[(runs["status"] == "ok") & (runs["budget_kind"] == "full")]
    runs = at_full_budget(runs, load_curves(mine / "curves.csv", runs), profile.budget_flops)
    with pd.option_context("display.width", 200):
        print(f"your runs beside the frontier of {repo_relative(other)} (native reward at C):")
        print(beside_table(runs, frontier).to_string(index=False, float_format="{:.3f}".format))
    paths = write_beside(beside_figure(runs, frontier), figures_dir)
    print(f"figure: {repo_relative(paths[0])}")
