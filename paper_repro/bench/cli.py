"""``python -m paper_repro.bench ledger|run|eval|ladder|eval-noise``: the command line of the
benchmarks, one module a command (:data:`COMMANDS`); its help is their docstrings."""

from __future__ import annotations

import argparse
import json

from paper_repro.bench import eval_noise, evaluation, ladder, ledger, runs
from paper_repro.bench.common import RUN_SIZES

COMMANDS = {"ledger": ledger, "run": runs, "eval": evaluation, "ladder": ladder, "eval-noise": eval_noise}
DESCRIPTION = "\n\n".join(
    ["Benchmarks (``make bench`` runs them all).", *(m.__doc__ for m in COMMANDS.values())]
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m paper_repro.bench", description=DESCRIPTION)
    parser.add_argument("which", choices=list(COMMANDS))
    parser.add_argument("--repeats", type=int, default=None, help="default: 5 (ledger, eval), 1 (run)")
    parser.add_argument("--steps", type=int, default=ledger.LedgerBench.steps)
    parser.add_argument("--sizes", default=",".join(RUN_SIZES), help="run, eval: policy sizes")
    parser.add_argument("--cells", default=None, help="run: grid cells; ladder: size/cell pairs")
    parser.add_argument("--models", default="", help="eval: checkpoints too, on the M setting's sets")
    parser.add_argument("--threads", default="1", help="eval: torch thread counts; eval-noise: the first")
    parser.add_argument("--sets", choices=["all", "heldout"], default="all", help="eval: the sets")
    parser.add_argument("--limit", type=int, default=None, help="eval: problems per set (default: all)")
    parser.add_argument("--seeds", type=int, default=6, help="eval-noise: runs of the cell (seeds 0..n-1)")
    parser.add_argument("--policy", default="M", help="eval-noise: stage A's setting (a policy label)")
    parser.add_argument("--cell", default="r50", help="eval-noise: the grid cell")
    parser.add_argument(
        "--out", default=None, help="eval-noise: the CSV (default data/results/cpu-tiny/eval_noise.csv)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.which == "eval-noise":
        from transformers.utils import logging as hf_logging

        from paper_repro.paths import repo_root

        hf_logging.set_verbosity_error()
        result = eval_noise.bench_eval_noise(
            args.seeds, args.policy, args.cell, threads=int(args.threads.split(",")[0])
        )
        out = args.out or repo_root() / "data" / "results" / "cpu-tiny" / "eval_noise.csv"
        eval_noise.write_eval_noise(result["rows"], out)
        print(json.dumps(result, indent=2, default=str)) if args.json else eval_noise.print_eval_noise(result)
        print(f"wrote {out}")
        return 0
    if args.which == "eval":
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        result = evaluation.bench_eval(
            tuple(s for s in args.sizes.split(",") if s),
            tuple(m for m in args.models.split(",") if m),
            args.repeats or 5,
            tuple(int(t) for t in args.threads.split(",")),
            args.sets,
            args.limit,
        )
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            evaluation.print_eval(result)
        return 0
    if args.which == "ladder":
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        cells = tuple(args.cells.split(",")) if args.cells else ladder.LADDER_CELLS
        result = ladder.bench_ladder(cells, args.repeats or 3)
        print(json.dumps(result, indent=2)) if args.json else ladder.print_ladder(result)
        return 0
    if args.which == "run":
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        result = runs.bench_runs(
            tuple(args.sizes.split(",")),
            tuple((args.cells or ",".join(runs.RUN_CELLS)).split(",")),
            args.repeats or 1,
        )
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            runs.print_runs(result)
        return 0
    result = ledger.bench_ledger(
        ledger.LedgerBench(repeats=args.repeats or ledger.LedgerBench.repeats, steps=args.steps)
    )
    print(json.dumps(result, indent=2)) if args.json else ledger.print_ledger(result)
    return 0
