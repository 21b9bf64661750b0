"""The gpu-paper rehearsal on the CPU (`make gpu-rehearsal`): Qwen2.5-1.5B/3B/7B-Instruct and
Qwen2.5-Math-PRM-7B at their real widths with their depth cut: each phase of a gpu-paper cell's round
pass by pass at every depth, and one round through the study's run path (run_cell: the ledger, TRL's
trainer, the PRM reward, the evaluation); each phase's peak memory beside the memory model, in total
and above the weights, and the ledger's FLOPs beside FlopCounterMode's
(paper_repro.drivers.rehearsal, paper_repro.drivers.rehearsal_round). Writes <out>/rehearsal.json and <out>/rehearsal.txt; exits 1 when a
check fails. With --compare SMOKE_JSON it also says what `make gpu-smoke` measured that the rehearsal
did not, and what differs.
"""

from __future__ import annotations

import argparse

from paper_repro.commands._options import add_command

NAME = "rehearse"
HELP = "the gpu-paper models at real widths on the CPU: memory and FLOPs per phase against the models"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from paper_repro.drivers.rehearsal import DEPTHS, SIZES

    p = add_command(subparsers, NAME, HELP, __doc__)
    p.add_argument("--out", default="gpu_rehearsal", help="folder for rehearsal.json and rehearsal.txt")
    p.add_argument("--sizes", nargs="+", default=list(SIZES), choices=SIZES, help="policy sizes to rehearse")
    p.add_argument(
        "--depths", nargs="+", type=int, default=list(DEPTHS), help="decoder layers, three or more"
    )
    p.add_argument("--compare", default=None, metavar="SMOKE_JSON", help="a gpu_smoke.json to set beside it")
    return p


def run(args: argparse.Namespace) -> int:
    from paper_repro.drivers.rehearsal import main
    from paper_repro.drivers.smoke_compare import compare_smoke

    if args.compare:
        return compare_smoke(args.compare, args.out)
    if len(args.depths) < 3:
        raise SystemExit("rehearse: give three depths or more (two draw the line, the deepest checks it)")
    return main(args.out, tuple(args.sizes), tuple(sorted(args.depths)))
