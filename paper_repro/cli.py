"""paper-repro: where should RL post-training compute go? Plan, run and analyse IsoFLOP GRPO studies.

Commands: `flops` prices one GRPO round; `plan` lays out a stage's allocation grid; `cells` runs grid
cells directly; `run` runs the whole study (its notebooks, with papermill), resuming where it stopped.
Run `paper-repro <command> --help` for a command's options.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from paper_repro import flops
from paper_repro.config import QUICK_BUDGET_SCALE, QUICK_CELLS, QUICK_EVAL_LIMIT, STAGES


def _flops_command(args: argparse.Namespace) -> int:
    from paper_repro import models

    policy = models.shape(args.model)
    reward = models.shape(args.reward_model) if args.reward_model else None
    lora = flops.LoRASpec(rank=args.lora_rank)
    train = flops.TrainSpec(lora=lora, gradient_checkpointing=args.gradient_checkpointing)
    step = flops.GRPOStep(
        prompts=args.prompts,
        generations=args.generations,
        kept=args.kept,
        epochs=args.epochs,
        prompt_tokens=args.prompt_tokens,
        completion_tokens=args.completion_tokens,
        beta=args.beta,
        prefix_cache=args.prefix_cache,
    )
    cost = flops.grpo_step_cost(policy, step, train=train, reward_model=reward)
    per_token = flops.per_token_flops(policy, lora)
    out = {
        "model": policy.name,
        "reward_model": reward.name if reward else None,
        "convention": "useful",
        **cost.as_dict(),
        "per_token": {
            "forward": per_token.forward,
            "lora_train": per_token.lora_train,
            "full_train": per_token.full_train,
            "attention_per_pair": per_token.attention_per_pair,
        },
        "non_embedding_params": policy.body_matmul_params,
        "step": {
            "prompts": step.prompts,
            "generations": step.generations,
            "kept": step.kept,
            "epochs": step.epochs,
            "prompt_tokens": step.prompt_tokens,
            "completion_tokens": step.completion_tokens,
            "beta": step.beta,
            "old_logprobs": step.runs_old_logprobs,
            "prefix_cache": step.prefix_cache,
            "lora_rank": lora.rank,
        },
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"model {out['model']}  (non-embedding matmul params {policy.body_matmul_params:,})")
        for key in ("C_search", "C_learning", "C_reward", "C_total"):
            print(f"  {key:<11} {out[key]:.4e} FLOPs")
        print(f"  rho         {out['rho']:.4f}")
        pt = out["per_token"]
        print(
            f"  per token: forward {pt['forward']:.4e}, LoRA train {pt['lora_train']:.4e}, "
            f"full train {pt['full_train']:.4e} FLOPs"
        )
    return 0


def _plan_command(args: argparse.Namespace) -> int:
    from paper_repro import allocation
    from paper_repro.config import load_profile

    profile = load_profile(args.profile)
    budget = profile.pilot_budget_flops if args.pilot else profile.budget_flops
    if args.budget is not None:
        budget = args.budget
    planned = allocation.plan_stage(profile, args.stage, budget)
    out = {
        "profile": profile.name,
        "stage": args.stage,
        "budget_flops": budget,
        "convention": "useful",
        "expected_lengths": profile.expected_lengths,
        "settings": [
            {
                "setting": p.setting.name,
                "policy": p.setting.policy,
                "reward_system": p.setting.reward_system,
                "feasible_rho": list(p.feasible),
                "cells": [c.as_dict() for c in p.cells],
                "infeasible": [
                    {"target_rho": e.target, "nearest_rho": e.nearest, "reason": str(e)} for e in p.infeasible
                ],
            }
            for p in planned
        ],
    }
    empty = [p for p in planned if not p.cells]
    status = 0
    if empty:
        status = 2
        first = empty[0]
        print(
            f"paper-repro plan: error: setting {first.setting.name} has no cell at budget {budget:.3g}: "
            f"{first.infeasible[0]}",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(out, indent=2))
        return status
    print(
        f"profile {profile.name}, stage {args.stage}: budget {budget:.3g} FLOPs (useful), "
        f"expected lengths {profile.expected_lengths['prompt']} prompt + "
        f"{profile.expected_lengths['completion']} completion tokens"
    )
    header = f"  {'cell':<5} {'P':>3} {'G':>3} {'K':>3} {'mu':>3} {'rounds':>6} {'steps':>6} {'rho':>6}"
    header += f" {'C_search':>10} {'C_learning':>10} {'C_reward':>10}"
    for p in out["settings"]:
        lo, hi = p["feasible_rho"]
        print(
            f"\n{p['setting']} (policy {p['policy']}, reward {p['reward_system']}): "
            f"feasible rho {lo:.3f}-{hi:.3f}"
        )
        print(header)
        for c in p["cells"]:
            print(
                f"  {c['cell']:<5} {c['P']:>3} {c['G']:>3} {c['K']:>3} {c['mu']:>3} {c['predicted_rounds']:>6} "
                f"{c['predicted_steps']:>6} {c['predicted_rho']:>6.3f} {c['C_search']:>10.3e} "
                f"{c['C_learning']:>10.3e} {c['C_reward']:>10.3e}"
            )
        for e in p["infeasible"]:
            print(f"  {allocation.cell_label(e['target_rho']):<5} refused: {e['reason']}")
    return status


def _cells_command(args: argparse.Namespace) -> int:
    import pandas as pd

    from paper_repro import runner, study
    from paper_repro.spec import setting_specs

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
    columns = ["stage", "setting", "cell", "seed", "P", "G", "K", "mu", "rounds", "target_rho", "rho",
               "C_total", "budget_flops", "gsm_pass1", "base_gsm_pass1", "seconds_total", "status"]  # fmt: skip
    table = pd.DataFrame(rows, columns=columns)
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(table.to_string(index=False))
    return 0 if (table["status"] == "ok").all() else 1


def _run_command(args: argparse.Namespace) -> int:
    from paper_repro import study, sweep

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
    from paper_repro.paths import repo_relative
    from paper_repro.results import results_dir

    for path in written:
        print(f"executed {repo_relative(path)}")
    root = study.results_root_for(profile, args.quick, args.results)
    if any(job.stage == "analysis" for job in jobs):
        from paper_repro.analysis import figures_folder

        figures = repo_relative(figures_folder(profile, root))
        print(f"tables in {repo_relative(results_dir(profile.name, root))}, figures in {figures}")
    return 0


def _analyse_command(args: argparse.Namespace) -> int:
    from paper_repro import study
    from paper_repro.analysis import analyse
    from paper_repro.analysis.pipeline import summary
    from paper_repro.analysis.tables.race import RegimeThresholds
    from paper_repro.paths import repo_relative
    from paper_repro.results import results_dir

    profile = study.prepare(args.profile, args.quick)
    thresholds = RegimeThresholds(args.rho_threshold)
    root = study.results_root_for(profile, args.quick, args.results)
    result = analyse(profile, root, args.figures, thresholds, args.power_replicates, args.design)
    print(summary(result))
    print(
        f"tables in {repo_relative(results_dir(profile.name, root))}; figures in {repo_relative(result.figures_dir)}"
    )
    return 0


def _split_history_command(args: argparse.Namespace) -> int:
    from paper_repro import study
    from paper_repro.history import split_history

    moved, points = split_history(study.prepare(args.profile), args.results, args.before)
    which = f"not runs of the {args.profile} design" + (
        f" or made before {args.before}" if args.before else ""
    )
    print(f"moved {moved} rows that are {which} to runs_history.csv and "
          f"{points} of their curve points to curves_history.csv; runs.csv holds the study's rows alone")  # fmt: skip
    return 0


def _design_command(args: argparse.Namespace) -> int:
    from paper_repro import study
    from paper_repro.analysis import simulate_design

    profile = study.prepare(args.profile, args.quick)
    variants = {f"{n} seeds": (n, 1.0) for n in args.more_seeds}
    variants.update({f"{r} recipes per cell": (profile.seeds, float(r) ** 0.5) for r in args.recipes})
    if args.candidates or args.price_only:
        return _design_candidates(args, profile, variants)
    table = simulate_design(profile, args.results, args.recipe_sd, args.seed_sd, args.amplitude, args.replicates, variants,
                   progress=lambda step: print(f"simulating {step}", flush=True),
                   replace_registered=args.replace_registered)  # fmt: skip
    import pandas as pd

    now = table[table["design"] == "committed"]
    worst = now.groupby("claim", sort=False).agg(
        wrong_max=("wrong", "max"), agreement_min=("agreement", "min")
    )
    with pd.option_context("display.width", 200, "display.max_colwidth", 90):
        print(worst.to_string())
    print(f"design.csv in {args.results or 'data/results/' + profile.name}: {len(table)} rows")
    return 0


def _design_candidates(args: argparse.Namespace, profile, variants) -> int:
    """``paper-repro design --candidates``: today's design, the profile's and the alternatives at their
    cost (:mod:`paper_repro.planning`, :mod:`paper_repro.analysis.design.candidates`); design.csv and
    design_choices.csv."""
    import pandas as pd

    from paper_repro.analysis import design as sim
    from paper_repro.analysis.design import candidates as dc
    from paper_repro.paths import repo_relative
    from paper_repro.results import results_dir, write_table

    root = results_dir(profile.name, args.results)
    variance, source = sim.eval_variance(root / "eval_noise.csv", sim.eval_variance_arg(args.eval_var_run),
                                         sim.eval_variance_arg(args.eval_var_shared))  # fmt: skip
    print(
        f"evaluation noise: {source}"
        + ("" if variance else " (candidates at the runs' own evaluation size only)")
    )
    result = dc.compare(
        profile, root / "runs.csv", args.replicates or sim.REPLICATES, args.candidate_replicates, args.minutes,
        args.overhead_minutes, variance, source, curves_path=root / "curves.csv", variants=variants,
        progress=lambda step: print(step, flush=True), simulate=not args.price_only,
        overrides=(args.recipe_sd, args.seed_sd, args.amplitude),
        candidate_list=[dc.Candidate.from_profile(profile)] if args.registered else None,
    )  # fmt: skip
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_colwidth", 60):
        print("\ncost model (per run: train s = a + b x budget; evaluation per problem decoded):")
        print(result.cost_model.table().round(4).to_string(index=False))
        for note in result.notes:
            print(note)
        print(f"\nminutes: job-seconds / {dc.JOBS} / 60 + {args.overhead_minutes:g} min overhead (notebooks, "
              "analysis: a parameter, not measured)")  # fmt: skip
        print(_candidate_summary(result.choices).to_string(index=False))
    write_table(root / ("design_registered.csv" if args.registered else "design_choices.csv"), result.choices)
    if args.price_only:
        print(f"design_choices.csv (priced only) in {repo_relative(root)}")
        return 0
    from paper_repro.analysis.pipeline import keep_post_hoc, registered_after_runs

    if registered_after_runs(root) and not args.replace_registered:
        print(f"design.csv's pre-registered block kept ({repo_relative(root)} holds runs: the block registers a "
              "design before its runs; --replace-registered to overwrite it)")  # fmt: skip
    else:
        write_table(root / "design.csv", keep_post_hoc(root, result.design))
    pick = result.recommended
    chosen = next(c for c in result.candidates if c.name == "chosen")
    print(f"\nthe rule: within {args.minutes:g} min, every claim's largest wrong share <= {dc.WRONG_LIMIT:g}; "
          "first those meeting the regime claims' registered targets (wrong <= 0.05, agreement >= 0.85, "
          "held when true >= 0.80, not held when false >= 0.80), then their smaller power, then the mean "
          "held-when-true; ties to fewer minutes")  # fmt: skip
    for name in dict.fromkeys(result.choices.loc[result.choices["candidate"].astype(bool), "name"]):
        misses = dc.target_misses(result.choices, name)
        print(
            f"  {name}: " + ("meets the registered targets" if not misses else "misses " + "; ".join(misses))
        )
    misfit = dc.misfits(result.choices, "chosen", args.minutes)
    if misfit:
        print("the profile's design does not fit: " + "; ".join(misfit))
    held = result.choices.loc[result.choices["candidate"].astype(bool), "held_when_true"]
    if pick is None:
        print("recommended: none of the candidates meets the rule")
    elif pick.name == "chosen":
        print("recommended: chosen (the profile's design as written)")
    else:
        print(f"recommended: {pick.name}")
        verb = "cuts" if misfit else "changes (the profile's design fits, and the rule prefers this)"
        print(f"  relative to the profile's design it {verb}: " + "; ".join(dc.cuts(chosen, pick)))
    if pick is not None and not (held.fillna(0) > 0).any():
        print("  only as the cheapest: no candidate holds any claim where it is true (every held-when-true is "
              "0), so the rule cannot tell the candidates apart by power")  # fmt: skip
    print(f"design.csv ({len(result.design)} rows: today as 'committed', the profile's as 'chosen') and "
          f"{'design_registered' if args.registered else 'design_choices'}.csv ({len(result.choices)} rows) in "
          f"{repo_relative(root)}")  # fmt: skip
    return 0


def _candidate_summary(choices):
    """One line per candidate: its minutes, runs, seeds, cells and headline operating characteristics."""
    cols = {"wrong_max": "max", "held_when_true": ["min", "mean"], "not_held_when_false": ["min", "mean"],
            "agreement_min": "min"}  # fmt: skip
    have = {k: v for k, v in cols.items() if k in choices}
    head = choices.groupby("name", sort=False).agg(
        minutes=("minutes", "first"), runs=("runs", "first"), seeds=("seeds", "first"),
        problems=("eval_problems", "first"), cells=("cells", "first"), replicates=("replicates", "first"),
    )  # fmt: skip
    if have:
        oc = choices.groupby("name", sort=False).agg(have)
        oc.columns = ["_".join(c) for c in oc.columns]
        head = head.join(oc)
    if "recommended" in choices:
        head["recommended"] = choices.groupby("name", sort=False)["recommended"].any()
    return head.reset_index().round(3)


def _dry_run(args: argparse.Namespace) -> int:
    from paper_repro import dryrun
    from paper_repro.config import load_profile

    profile = load_profile(args.profile)
    wanted = set(args.stage)
    stages = [s for s in dryrun.STAGE_ORDER if "all" in wanted or s in wanted]
    if not stages:
        raise ValueError(
            f"stages {sorted(wanted)} run no GPU work; a dry run covers {', '.join(dryrun.STAGE_ORDER)}"
        )
    print(dryrun.format_report(dryrun.dry_run(profile, stages, args.seeds, args.quick)))
    return 0


def _seed(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"a seed is a non-negative integer, got {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """An option's help ends with its default unless it says it (or has none); descriptions keep
    their line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "default" in text or default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        shown = " ".join(map(str, default)) if isinstance(default, list) else default
        return f"{text} (default: {shown})"


def build_parser() -> argparse.ArgumentParser:
    from paper_repro.planning import CANDIDATE_REPLICATES, MINUTES, OVERHEAD_MINUTES
    from paper_repro.sweep import STUDY_STEPS

    parser = argparse.ArgumentParser(prog="paper-repro", description=__doc__, formatter_class=_HelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    def command(name: str, help: str, description: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=description, formatter_class=_HelpFormatter)

    f = command(
        "flops",
        "price one GRPO round in FLOPs (useful convention)",
        "Analytic FLOPs of one GRPO generation round: P prompts x G completions, K kept for the update, "
        "MU epochs, at fixed prompt and completion lengths.",
    )
    model_help = "checkpoint directory, config.json, hub id with a shipped config, or shipped config name"
    f.add_argument("--model", required=True, help=f"the policy: {model_help}")
    f.add_argument("--prompt-tokens", type=_positive_int, required=True, help="tokens per prompt")
    f.add_argument("--completion-tokens", type=_positive_int, required=True, help="tokens per completion")
    f.add_argument("--generations", type=_positive_int, required=True, help="G, completions per prompt")
    f.add_argument("--kept", type=_positive_int, required=True, help="K <= G, completions kept per prompt")
    f.add_argument("--epochs", type=_positive_int, required=True, help="mu, update epochs (num_iterations)")
    f.add_argument("--prompts", type=_positive_int, default=1, help="P, prompts per round")
    f.add_argument("--lora-rank", type=_positive_int, default=16, help="LoRA rank on every linear layer")
    f.add_argument("--beta", type=float, default=0.0, help="KL coefficient; != 0 adds a reference forward")
    f.add_argument(
        "--reward-model", default=None, help=f"the PRM ({model_help}); none: a rule-based reward, 0 FLOPs"
    )
    f.add_argument("--prefix-cache", action="store_true", help="prefill each prompt once (vLLM)")
    f.add_argument("--gradient-checkpointing", action="store_true", help="add the recompute forward")
    f.add_argument("--json", action="store_true", help="print one JSON object")
    f.set_defaults(func=_flops_command)

    profile_help = "cpu-tiny, gpu-paper, or a profile YAML file"
    p = command(
        "plan",
        "lay out a stage's allocation grid: cells, predicted steps, rho and FLOPs (no weights needed)",
        "Plan every cell of every setting of a stage at the profile's budget: P, G, K, mu, predicted "
        "generation rounds and optimizer steps, predicted rho and C_search/C_learning/C_reward. Targets "
        "the allowed cells cannot realise are listed with the nearest feasible rho.",
    )
    p.add_argument("--profile", required=True, help=profile_help)
    p.add_argument("--stage", required=True, type=str.upper, choices=STAGES, help="the stage to plan")
    p.add_argument("--pilot", action="store_true", help="plan at the RACE pilot budget")
    p.add_argument("--budget", type=float, default=None, help="a budget in FLOPs (default: the profile's)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_plan_command)

    c = command(
        "cells",
        "run grid cells directly (no notebooks), skipping finished runs",
        "Run the planned cells x seeds of the given stages or settings and append one row per run to "
        "data/results/<profile>/runs.csv (or --results DIR). Finished runs are skipped.\n\n"
        "  paper-repro cells --profile cpu-tiny --setting dense --cells r40 r66 --seed 3 4",
    )
    c.add_argument("--profile", required=True, help=profile_help)
    c.add_argument("--stage", nargs="+", type=str.upper, choices=STAGES, default=None,
                   help="every setting of these stages")  # fmt: skip
    c.add_argument("--setting", nargs="+", default=None,
                   help="these settings (a size of stage A, a reward system of B or D)")  # fmt: skip
    c.add_argument("--cells", nargs="+", default=None, help="only these cells (e.g. r40 r66); default all")
    seeds = c.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", type=_positive_int, default=None,
                       help="seeds 0..N-1 per cell (default: the profile's count)")  # fmt: skip
    seeds.add_argument("--seed", type=_seed, nargs="+", default=None, help="exactly these seeds")
    c.add_argument("--pilot", action="store_true", help="at the RACE pilot budget")
    c.add_argument("--jobs", type=_positive_int, default=1, help="runs in parallel (worker processes)")
    c.add_argument("--threads", type=_positive_int, default=None,
                   help="torch threads per run (default: the cores divided among the jobs)")  # fmt: skip
    c.add_argument("--results", default=None, help="results directory (default: data/results/<profile>)")
    c.set_defaults(func=_cells_command)

    r = command(
        "run",
        "run the study: execute its notebooks with papermill, resuming where it stopped",
        "Execute the study notebooks with papermill: testbed (notebook 00, only when the testbed is "
        "missing), A (notebook 10, per policy size), B and D (notebook 20, per reward system), race "
        "(notebook 30, per setting), analysis (notebook 40). Executed copies go to "
        "notebooks/executed/<profile>/. Finished runs and notebooks are skipped, so a killed study "
        "reruns only what is missing.",
    )
    r.add_argument("--profile", required=True, help=profile_help)
    r.add_argument("--stage", nargs="+", default=["all"], choices=[*STUDY_STEPS, "all"],
                   help="the study steps to run")  # fmt: skip
    r.add_argument("--seeds", type=_positive_int, default=None,
                   help="seeds per full-budget cell (default: the profile's)")  # fmt: skip
    r.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: 1 seed, the cells {' '.join(QUICK_CELLS)}, {QUICK_BUDGET_SCALE:g} of the budget, at most "
        f"{QUICK_EVAL_LIMIT} problems per evaluation set; outputs in .../quick/",
    )
    r.add_argument("--jobs", type=_positive_int, default=1, help="notebooks executed in parallel")
    r.add_argument("--executor", choices=["local", "slurm"], default="local",
                   help="local threads, or one SLURM job per notebook (submitit)")  # fmt: skip
    r.add_argument("--cluster", default=None,
                   help="submitit cluster for --executor slurm (default: auto; 'local' for tests)")  # fmt: skip
    r.add_argument("--partition", default=None, help="SLURM partition for --executor slurm")
    r.add_argument("--retries", type=int, default=2, help="resubmissions of a failed SLURM job")
    r.add_argument("--results", default=None, help="results directory (default: data/results/<profile>)")
    r.add_argument("--executed", default=None,
                   help="executed notebooks (default: notebooks/executed/<profile>)")  # fmt: skip
    r.add_argument("--dry-run", action="store_true",
                   help="validate every run without weights and estimate GPU-hours per stage; runs nothing")  # fmt: skip
    r.set_defaults(func=_run_command)

    a = command(
        "analyse",
        "the analysis: frontiers, fitted optima, claims with their power, figures, from the result tables alone",
        "Read runs.csv (and the step logs beside it) in --results and write frontiers, optima, "
        "rho_star_tests, fits, disagreement, race, conventions and claims tables beside it, and the figures "
        "to --figures. Notebook 40 runs the same function.",
    )
    a.add_argument("--profile", required=True, help=profile_help)
    a.add_argument("--results", default=None, help="directory of runs.csv (default: data/results/<profile>)")
    a.add_argument("--figures", default=None, help="figures directory (default: figures/<profile>)")
    a.add_argument("--quick", action="store_true", help="analyse a quick (smoke) study's runs")
    a.add_argument("--design", choices=["auto", "study", "folder"], default="auto",
                   help="the runs analysed: the profile's design (study), the cells and seeds the folder holds "
                        "(folder: an exploration's), or auto: study where the folder holds runs of its grid")  # fmt: skip
    a.add_argument(
        "--rho-threshold",
        type=float,
        default=0.6,
        help="RACE: every cell that could be best at or above is update-heavy, every one below search-heavy",
    )
    a.add_argument("--power-replicates", type=int, default=None,
                   help="simulated studies per seed count for the power column (default: 40; 0: none)")  # fmt: skip
    a.set_defaults(func=_analyse_command)

    d = command(
        "design",
        "operating characteristics: how often each claim's test is wrong, simulated before any run",
        "Simulate the study's design (its settings, cells and seeds) under known truths (flat, peaks at "
        "0.45 and 0.72, a plateau, monotone, the paper's world), with the seed noise and recipe effect the "
        "committed runs show (or the values given), run the claims' own tests, and write design.csv beside "
        "runs.csv: per truth and claim the share held / not held / inconclusive / heterogeneous, the wrong "
        "share, the two-draw agreement and the rho* interval coverage.",
    )
    d.add_argument("--profile", required=True, help=profile_help)
    d.add_argument("--results", default=None, help="directory of runs.csv (default: data/results/<profile>)")
    d.add_argument("--quick", action="store_true", help="the quick (smoke) study's design")
    d.add_argument("--recipe-sd", type=float, default=None,
                   help="the recipe effect's SD (default: estimated from the committed runs)")  # fmt: skip
    d.add_argument("--seed-sd", type=float, default=None,
                   help="one seed SD for every cell (default: each cell's, from the committed runs)")  # fmt: skip
    d.add_argument("--amplitude", type=float, default=None,
                   help="the truths' height (default: the committed frontiers' median range)")  # fmt: skip
    d.add_argument("--replicates", type=_positive_int, default=None,
                   help="study pairs per truth (default: 200)")  # fmt: skip
    d.add_argument("--replace-registered", action="store_true",
                   help="overwrite design.csv's pre-registered block although the results folder already holds grid runs "
                        "(the block is the design's registration: written before the runs, never after)")  # fmt: skip
    d.add_argument("--more-seeds", type=_positive_int, nargs="*", default=[],
                   help="also simulate the design with these seeds per cell")  # fmt: skip
    d.add_argument("--recipes", type=_positive_int, nargs="*", default=[],
                   help="also simulate r recipes averaged per cell (recipe SD / sqrt(r))")  # fmt: skip
    d.add_argument("--candidates", action="store_true",
                   help="compare candidate designs at their cost (the profile's, equal-cost alternatives trading "
                        "cells, seeds and evaluation size, stage A's budget): design_choices.csv, and design.csv "
                        "for today's and the profile's design")  # fmt: skip
    d.add_argument("--price-only", action="store_true",
                   help="with --candidates: price the candidates (the cost model's minutes), simulate none")  # fmt: skip
    d.add_argument("--registered", action="store_true", help="with --candidates: the profile's design (the pick, "
                   "once registered) and today's alone: design.csv and design_registered.csv; design_choices.csv kept")  # fmt: skip
    d.add_argument("--candidate-replicates", type=_positive_int, default=CANDIDATE_REPLICATES,
                   help="study pairs per truth for each candidate other than today's and the profile's "
                        "(default: %(default)s; those two take --replicates)")  # fmt: skip
    d.add_argument("--minutes", type=float, default=MINUTES,
                   help="the wall-minutes limit the candidates fill and the rule picks under (default: %(default)s)")  # fmt: skip
    d.add_argument("--overhead-minutes", type=float, default=OVERHEAD_MINUTES,
                   help="fixed minutes for notebooks and the analysis added to every candidate (default: %(default)s)")  # fmt: skip
    d.add_argument("--eval-var-run", nargs="+", default=None, metavar="[TARGET=]V",
                   help="per-run evaluation variance at 300 problems (native_reward, gsm_pass1; one number for "
                        "both) when eval_noise.csv is missing or to override it")  # fmt: skip
    d.add_argument("--eval-var-shared", nargs="+", default=None, metavar="[TARGET=]V",
                   help="the evaluation variance a cell's seeds share at 300 problems (as --eval-var-run)")  # fmt: skip
    d.set_defaults(func=_design_command)

    h = command("split-history", "move an earlier design's rows out of runs.csv into runs_history.csv",
                "Move the rows of runs.csv that are not runs of the profile's design (an earlier generation: other "
                "weights or recipe; a stray) to runs_history.csv beside it (same columns), and their curve points "
                "to curves_history.csv. Atomic and idempotent; the step logs stay in steps/.")  # fmt: skip
    h.add_argument("--profile", required=True, help=profile_help)
    h.add_argument("--results", default=None, help="directory of runs.csv (default: data/results/<profile>)")
    h.add_argument("--before", default=None, help="also move the rows made before this time (ISO 8601): an "
                   "earlier study of the same design, before the design's registration")  # fmt: skip
    h.set_defaults(func=_split_history_command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"paper-repro {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
