"""``paper-repro plan``: a stage's allocation grid as the planner lays it out
(:func:`paper_repro.run.allocation.plan_stage`), without weights."""

from __future__ import annotations

import argparse
import json
import sys

from paper_repro.commands._options import PROFILE_HELP, add_command
from paper_repro.config import STAGES

NAME = "plan"
HELP = "lay out a stage's allocation grid: cells, predicted steps, rho and FLOPs (no weights needed)"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = add_command(
        subparsers,
        NAME,
        HELP,
        "Plan every cell of every setting of a stage at the profile's budget: P, G, K, mu, predicted "
        "generation rounds and optimizer steps, predicted rho and C_search/C_learning/C_reward. Targets "
        "the allowed cells cannot realise are listed with the nearest feasible rho. The cells are chosen "
        "at the profile's expected lengths (the registered design's); their rounds, steps and FLOPs are "
        "predicted at its predicted lengths (measured on its committed runs, or assumed), and where the "
        "profile's results folder holds runs of a cell at that budget, beside their realised rounds.",
    )
    p.add_argument("--profile", required=True, help=PROFILE_HELP)
    p.add_argument("--stage", required=True, type=str.upper, choices=STAGES, help="the stage to plan")
    p.add_argument("--pilot", action="store_true", help="plan at the RACE pilot budget")
    p.add_argument("--budget", type=float, default=None, help="a budget in FLOPs (default: the profile's)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--measure-lengths",
        action="store_true",
        help="print the tokens per completion the profile's committed full-budget runs realised, as its "
        "predicted_lengths section (every setting; --stage is ignored)",
    )
    return p


def run(args: argparse.Namespace) -> int:
    from paper_repro.config import load_profile
    from paper_repro.run import allocation, calibration

    profile = load_profile(args.profile)
    if args.measure_lengths:
        lengths = calibration.measured_lengths(profile)
        if not lengths:
            raise ValueError(f"{profile.name}'s results folder holds no full-budget grid run to measure")
        print("predicted_lengths:\n  source: measured\n" + calibration.lengths_yaml(lengths))
        return 0
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
        "predicted_lengths": {s.setting.name: profile.lengths_for(s.setting)[0] for s in planned},
        "lengths_source": profile.predicted_lengths.source,
        "settings": [p.as_dict() for p in planned],
    }
    _add_realised(out, profile, planned, budget)
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
    _print_plan(out)
    return status


def _add_realised(out: dict, profile, planned, budget: float) -> None:
    """Each cell of ``out`` (:func:`run`'s) with the mean rounds its runs in the profile's results
    folder realised at ``budget`` (``realised_rounds``, None without runs) and ``ratio``
    (predicted / realised); and ``out["rounds_check"]``: the ratios in words (None without runs)."""
    from paper_repro.run import calibration

    realised = calibration.realised_rounds(profile, budget)
    ratios = []
    for plan, shown in zip(planned, out["settings"], strict=True):
        for cell, row in zip(plan.cells, shown["cells"], strict=True):
            mine = realised[calibration.of_cell(realised, plan.setting, cell)]
            row["realised_rounds"] = float(mine["rounds"].mean()) if len(mine) else None
            row["ratio"] = row["predicted_rounds"] / row["realised_rounds"] if len(mine) else None
            ratios += [row["ratio"]] if len(mine) else []
    out["rounds_check"] = calibration.ratio_summary(ratios) if ratios else None


def _print_plan(out: dict) -> None:
    """The plan ``out`` (what ``--json`` prints) as a table per setting."""
    lengths = out["expected_lengths"]
    print(
        f"profile {out['profile']}, stage {out['stage']}: budget {out['budget_flops']:.3g} FLOPs (useful); "
        f"cells chosen at the design's expected lengths, {lengths['prompt']} prompt + "
        f"{lengths['completion']} completion tokens; rounds, steps, rho and FLOPs predicted at the "
        f"{out['lengths_source']} lengths below"
    )
    if out["rounds_check"]:
        print(
            f"predicted / realised rounds (the profile's committed runs at this budget): {out['rounds_check']}"
        )
    header = f"  {'cell':<5} {'P':>3} {'G':>3} {'K':>3} {'mu':>3} {'rounds':>6} {'steps':>6} {'rho':>6}"
    header += f" {'C_search':>10} {'C_learning':>10} {'C_reward':>10} {'realised':>8} {'ratio':>6}"
    for p in out["settings"]:
        lo, hi = p["feasible_rho"]
        tokens = out["predicted_lengths"][p["setting"]]
        reward = f", PRM {tokens['reward']}" if tokens.get("reward") else ""
        print(
            f"\n{p['setting']} (policy {p['policy']}, reward {p['reward_system']}): "
            f"feasible rho {lo:.3f}-{hi:.3f}; predicted at {tokens['prompt']} prompt + "
            f"{tokens['completion']} completion tokens{reward} ({p['cells'][0]['lengths'] if p['cells'] else '-'})"
        )
        print(header)
        for c in p["cells"]:
            realised = (
                f"{c['realised_rounds']:>8.1f} {c['ratio']:>6.3f}"
                if c["realised_rounds"]
                else f"{'-':>8} {'-':>6}"
            )
            print(
                f"  {c['cell']:<5} {c['P']:>3} {c['G']:>3} {c['K']:>3} {c['mu']:>3} {c['predicted_rounds']:>6} "
                f"{c['predicted_steps']:>6} {c['predicted_rho']:>6.3f} {c['C_search']:>10.3e} "
                f"{c['C_learning']:>10.3e} {c['C_reward']:>10.3e} {realised}"
            )
        for e in p["infeasible"]:
            print(f"  {e['cell']:<5} refused: {e['reason']}")
