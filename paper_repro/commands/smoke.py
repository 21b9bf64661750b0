"""One short, prepared check for a machine with a CUDA GPU (under 5 minutes, `make gpu-smoke`): a
cpu-tiny cell trained and evaluated on the GPU in bf16 with HF generate, and with TRL's vLLM colocate
rollouts when vllm is installed (paper_repro.drivers.smoke). Each check's row goes to <out>/results/ (never the
committed tables); <out>/gpu_smoke.json holds each check's status, seconds, FLOPs, rho and metrics,
<out>/gpu_smoke.log the log. Without a GPU it stops with a clear message, unless --allow-cpu.
"""

from __future__ import annotations

import argparse

from paper_repro.commands._options import add_command, default_of

NAME = "smoke"
HELP = "a short check of a cpu-tiny cell on a CUDA GPU in bf16, and with vLLM when installed"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from paper_repro.drivers.smoke import check

    p = add_command(subparsers, NAME, HELP, __doc__)
    p.add_argument("--out", default=default_of(check, "out"), help="folder for the log, summary and results")
    p.add_argument("--allow-cpu", action="store_true", help="run on the CPU when no GPU is there")
    p.add_argument(
        "--budget-scale",
        type=float,
        default=default_of(check, "budget_scale"),
        help="share of the cpu-tiny budget",
    )
    return p


def run(args: argparse.Namespace) -> int:
    from paper_repro.drivers.smoke import check

    return check(args.out, args.allow_cpu, args.budget_scale)
