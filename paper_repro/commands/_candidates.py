"""``paper-repro design --candidates``: today's design, the profile's and the alternatives at their
cost (:mod:`paper_repro.run.design_cost`, :mod:`paper_repro.analysis.design.candidates`); design.csv and
design_choices.csv. Part of the ``design`` command (:mod:`paper_repro.commands.design`)."""

from __future__ import annotations

import argparse

from paper_repro.commands._options import positive_int


def add_options(d: argparse.ArgumentParser) -> None:
    """The ``design`` command's options for ``--candidates``; their defaults are the pre-run cost
    model's (:mod:`paper_repro.run.design_cost`)."""
    from paper_repro.analysis.design.candidates import FAMILIES
    from paper_repro.run.cost_model import OVERHEAD_MINUTES
    from paper_repro.run.design_cost import CANDIDATE_REPLICATES, MINUTES

    d.add_argument(
        "--candidates",
        action="store_true",
        help="compare candidate designs at their cost (the profile's, equal-cost alternatives trading cells, "
        "seeds and evaluation size, stage A's budget): design_choices.csv, and design.csv for today's and "
        "the profile's design",
    )
    d.add_argument(
        "--family",
        choices=FAMILIES,
        default="all",
        help="with --candidates: which candidates (all: the trades of cells, seeds, evaluation size, stage A and "
        "pilots; prm-arm: the designs that could decide the PRM-style arm, PRM-style rewards on every policy "
        "and more window recipes, seeds to the limit; prm-settings: more PRM-style settings, up to every one "
        "the project can run, each at 2 and 3 seeds, the regime claims alone simulated) (default: %(default)s)",
    )
    d.add_argument(
        "--with-claims",
        nargs="+",
        default=(),
        metavar="PREFIX",
        help="with --candidates: also simulate the claims whose id starts with PREFIX that simulate their own "
        "table on the committed layout but whose decision the design simulator can run too (targets.: the "
        "target claims), so the candidates can be compared on them",
    )
    d.add_argument(
        "--choices",
        default="design_choices.csv",
        help="with --candidates: the file the choices table is written to, beside runs.csv (default: "
        "%(default)s, the registered study's pick; another name keeps it)",
    )
    d.add_argument(
        "--price-only",
        action="store_true",
        help="with --candidates: price the candidates (the cost model's minutes), simulate none",
    )
    d.add_argument(
        "--registered",
        action="store_true",
        help="with --candidates: the profile's design (the pick, once registered) and today's alone: "
        "design.csv and design_registered.csv; design_choices.csv kept",
    )
    d.add_argument(
        "--candidate-replicates",
        type=positive_int,
        default=CANDIDATE_REPLICATES,
        help="study pairs per truth for each candidate other than today's and the profile's "
        "(default: %(default)s; those two take --replicates)",
    )
    d.add_argument(
        "--coverage-replicates",
        type=int,
        default=None,
        help="with --candidates: simulated studies whose rho* intervals are bootstrapped, for today's and the "
        "profile's design (default: the simulator's; 0: none, a faster comparison)",
    )
    d.add_argument(
        "--minutes",
        type=float,
        default=MINUTES,
        help="the wall-minutes limit the candidates fill and the rule picks under (default: %(default)s)",
    )
    d.add_argument(
        "--overhead-minutes",
        type=float,
        default=OVERHEAD_MINUTES,
        help="fixed minutes for notebooks and the analysis added to every candidate (default: %(default)s)",
    )
    d.add_argument(
        "--eval-var-run",
        nargs="+",
        default=None,
        metavar="[TARGET=]V",
        help="per-run evaluation variance at 300 problems (native_reward, gsm_pass1; one number for both) "
        "when eval_noise.csv is missing or to override it",
    )
    d.add_argument(
        "--eval-var-shared",
        nargs="+",
        default=None,
        metavar="[TARGET=]V",
        help="the evaluation variance a cell's seeds share at 300 problems (as --eval-var-run)",
    )


def run(args: argparse.Namespace, profile, variants: dict[str, tuple[int, float]]) -> int:
    """Compare the candidates, print the cost model, each candidate's line and the rule's pick, and
    write design_choices.csv (design_registered.csv with ``--registered``) and design.csv."""
    import pandas as pd

    from paper_repro.analysis import design as sim
    from paper_repro.analysis.design import candidates as dc
    from paper_repro.common.paths import repo_relative
    from paper_repro.common.results import results_dir, write_table

    root = results_dir(profile.name, args.results)
    variance, source = sim.eval_variance(
        root / "eval_noise.csv",
        sim.eval_variance_arg(args.eval_var_run),
        sim.eval_variance_arg(args.eval_var_shared),
    )
    print(
        f"evaluation noise: {source}"
        + ("" if variance else " (candidates at the runs' own evaluation size only)")
    )
    result = dc.compare(
        profile,
        root / "runs.csv",
        args.replicates or sim.REPLICATES,
        args.candidate_replicates,
        args.minutes,
        args.overhead_minutes,
        variance,
        source,
        curves_path=root / "curves.csv",
        variants=variants,
        progress=lambda step: print(step, flush=True),
        simulate=not args.price_only,
        overrides=(args.recipe_sd, args.seed_sd, args.amplitude),
        candidate_list=[dc.Candidate.from_profile(profile)] if args.registered else None,
        family=args.family,
        more_claims=tuple(args.with_claims),
        **({} if args.coverage_replicates is None else {"coverage_replicates": args.coverage_replicates}),
    )
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.max_colwidth", 60):
        print("\ncost model (per run: train s = a + b x budget; evaluation per problem decoded):")
        print(result.cost_model.table().round(4).to_string(index=False))
        print(
            "\nthe cost model on the committed runs (job-seconds; fitted on all, and leaving each setting out):"
        )
        print(result.cost_check.round(3).to_string(index=False))
        for note in result.notes:
            print(note)
        print(
            f"\nminutes: job-seconds / {result.cost_model.parallel:.2f} (job-seconds per wall second, measured) / 60 "
            f"+ {args.overhead_minutes:g} min overhead (notebooks, analysis)"
        )
        print(_candidate_summary(result.choices).to_string(index=False))
    choices_name = "design_registered.csv" if args.registered else args.choices
    write_table(root / choices_name, result.choices)
    write_table(root / "design_cost.csv", result.cost_check)
    if args.price_only:
        print(f"{choices_name} (priced only) and design_cost.csv in {repo_relative(root)}")
        return 0
    from paper_repro.analysis.pipeline import keep_post_hoc, registered_after_runs

    if registered_after_runs(root) and not args.replace_registered:
        print(
            f"design.csv's pre-registered block kept ({repo_relative(root)} holds runs: the block registers a "
            "design before its runs; --replace-registered to overwrite it)"
        )
    else:
        write_table(root / "design.csv", keep_post_hoc(root, result.design))
    _print_pick(result, args.minutes)
    print(
        f"design.csv ({len(result.design)} rows: today as 'committed', the profile's as 'chosen') and "
        f"{choices_name} ({len(result.choices)} rows) and design_cost.csv in "
        f"{repo_relative(root)}"
    )
    return 0


def _print_pick(result, minutes: float) -> None:
    """The rule, each candidate against the registered targets, and the rule's pick."""
    from paper_repro.analysis.design import candidates as dc

    pick = result.recommended
    chosen = next(c for c in result.candidates if c.name == "chosen")
    print("\n" + dc.rule_words(minutes))
    if result.extra:
        print(
            f"  ({len(result.extra)} claims simulated besides the family's, --with-claims: reported, not ruled on)"
        )
    for name in dict.fromkeys(result.choices.loc[result.choices["candidate"].astype(bool), "name"]):
        misses = dc.target_misses(result.choices, name)
        print(
            f"  {name}: " + ("meets the registered targets" if not misses else "misses " + "; ".join(misses))
        )
    misfit = dc.misfits(dc.ruled(result.choices, result.extra), "chosen", minutes)
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
        print(
            "  only as the cheapest: no candidate holds any claim where it is true (every held-when-true is "
            "0), so the rule cannot tell the candidates apart by power"
        )


def _candidate_summary(choices):
    """One line per candidate: its minutes, runs, seeds, cells and headline operating characteristics."""
    cols = {
        "wrong_max": "max",
        "held_when_true": ["min", "mean"],
        "not_held_when_false": ["min", "mean"],
        "agreement_min": "min",
    }
    have = {k: v for k, v in cols.items() if k in choices}
    head = choices.groupby("name", sort=False).agg(
        minutes=("minutes", "first"),
        runs=("runs", "first"),
        seeds=("seeds", "first"),
        problems=("eval_problems", "first"),
        cells=("cells", "first"),
        replicates=("replicates", "first"),
    )
    if have:
        oc = choices.groupby("name", sort=False).agg(have)
        oc.columns = ["_".join(c) for c in oc.columns]
        head = head.join(oc)
    if "recommended" in choices:
        head["recommended"] = choices.groupby("name", sort=False)["recommended"].any()
    return head.reset_index().round(3)
