"""``paper-repro run``: the study, its notebooks executed with papermill (:mod:`paper_repro.drivers.sweep`),
resuming where it stopped; ``--dry-run`` checks every run without weights (:mod:`paper_repro.drivers.dryrun`)."""

from __future__ import annotations

import argparse

from paper_repro.commands._options import PROFILE_HELP, RESULTS_HELP, add_command, default_of, positive_int
from paper_repro.config import QUICK_BUDGET_SCALE, QUICK_CELLS, QUICK_EVAL_LIMIT

NAME = "run"
HELP = "run the study: execute its notebooks with papermill, resuming where it stopped"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from paper_repro.drivers import sweep

    r = add_command(
        subparsers,
        NAME,
        HELP,
        "Execute the study notebooks with papermill: testbed (notebook 00, only when the testbed is "
        "missing), A (notebook 10, per policy size), B and D (notebook 20, per reward system), race "
        "(notebook 30, per setting), analysis (notebook 40). Executed copies go to "
        "notebooks/executed/<profile>/. Finished runs and notebooks are skipped, so a killed study "
        "reruns only what is missing.",
    )
    r.add_argument("--profile", required=True, help=PROFILE_HELP)
    r.add_argument(
        "--stage",
        nargs="+",
        default=["all"],
        choices=[*sweep.STUDY_STEPS, "all"],
        help="the study steps to run",
    )
    r.add_argument(
        "--seeds", type=positive_int, default=None, help="seeds per full-budget cell (default: the profile's)"
    )
    r.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: 1 seed, the cells {' '.join(QUICK_CELLS)}, {QUICK_BUDGET_SCALE:g} of the budget, at most "
        f"{QUICK_EVAL_LIMIT} problems per evaluation set; outputs in .../quick/",
    )
    r.add_argument("--jobs", type=positive_int, default=1, help="notebooks executed in parallel")
    r.add_argument(
        "--executor",
        choices=["local", "slurm"],
        default=default_of(sweep.run_study, "executor"),
        help="local threads, or one SLURM job per notebook (submitit)",
    )
    r.add_argument(
        "--cluster",
        default=None,
        help="submitit cluster for --executor slurm (default: auto; 'local' for tests)",
    )
    r.add_argument("--partition", default=None, help="SLURM partition for --executor slurm")
    r.add_argument(
        "--retries",
        type=int,
        default=default_of(sweep.run_study, "retries"),
        help="resubmissions of a failed SLURM job",
    )
    r.add_argument("--results", default=None, help=RESULTS_HELP)
    r.add_argument(
        "--executed", default=None, help="executed notebooks (default: notebooks/executed/<profile>)"
    )
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="validate every run without weights, estimate GPU-hours per stage and list each notebook's "
        "SLURM resources (as --executor slurm would submit them, with --jobs and --partition); runs nothing",
    )
    return r


def run(args: argparse.Namespace) -> int:
    from paper_repro.common.paths import repo_relative
    from paper_repro.common.results import results_dir
    from paper_repro.drivers import study, sweep

    if args.dry_run:
        return _dry_run(args)
    profile = study.prepare(args.profile)
    jobs = sweep.study_jobs(profile, args.stage, args.seeds, args.quick, args.results, args.executed)
    written = sweep.run_study(
        jobs,
        n_jobs=args.jobs,
        executor=args.executor,
        cluster=args.cluster,
        retries=args.retries,
        slurm_partition=args.partition,
    )
    for path in written:
        print(f"executed {repo_relative(path)}")
    root = study.results_root_for(profile, args.quick, args.results)
    if any(job.stage == "analysis" for job in jobs):
        from paper_repro.analysis import figures_folder

        figures = repo_relative(figures_folder(profile, root))
        print(f"tables in {repo_relative(results_dir(profile.name, root))}, figures in {figures}")
    return 0


def _dry_run(args: argparse.Namespace) -> int:
    from paper_repro.config import load_profile
    from paper_repro.drivers import dryrun

    profile = load_profile(args.profile)
    wanted = set(args.stage)
    stages = [s for s in dryrun.STAGE_ORDER if "all" in wanted or s in wanted]
    if not stages:
        raise ValueError(
            f"stages {sorted(wanted)} run no GPU work; a dry run covers {', '.join(dryrun.STAGE_ORDER)}"
        )
    result = dryrun.dry_run(profile, stages, args.seeds, args.quick, args.jobs, args.partition)
    print(dryrun.format_report(result))
    return 0
