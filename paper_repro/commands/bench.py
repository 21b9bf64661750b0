"""The benchmarks (`make bench` runs them all), one a subcommand: each module of paper_repro.bench
times one thing; `paper-repro bench <bench> --help` shows its module's docstring."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
from pathlib import Path

from paper_repro.commands._options import HelpFormatter, add_command, positive_int

NAME = "bench"
HELP = (
    "the benchmarks: the ledger's overhead, whole runs, evaluation, the budget ladder, evaluation noise, "
    "the FLOP conventions"
)
# bench -> (its module in paper_repro.bench, its line in `paper-repro bench --help`)
BENCHES = {
    "ledger": ("ledger", "plain trl.GRPOTrainer against the ledger's trainer"),
    "run": ("runs", "whole full-budget runs on the old path and the new one"),
    "eval": ("evaluation", "a run's evaluation on the old path and the new one"),
    "ladder": ("ladder", "what the budget ladder adds to a full-budget run"),
    "eval-noise": ("eval_noise", "how noisy a run's evaluation on 300 problems is"),
    "trl-flops": ("trl_flops", "the ledger's FLOPs beside TRL's, transformers' and the profiler's"),
    "test-time": ("test_time", "stage E's sampling: n samples of each of 300 problems from one policy"),
}
OWN = "(default: the bench's own)"  # an option left unset takes the bench function's default


def _doc(module: str) -> str:
    """The docstring of ``paper_repro.bench.<module>``, read from its source without importing it
    (every bench imports torch: ``paper-repro --help`` should not)."""
    origin = importlib.util.find_spec(f"paper_repro.bench.{module}").origin
    return ast.get_docstring(ast.parse(Path(origin).read_text())) or ""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = add_command(subparsers, NAME, HELP, __doc__)
    benches = p.add_subparsers(dest="bench", required=True, metavar="bench")
    b = {
        name: benches.add_parser(name, help=line, description=_doc(module), formatter_class=HelpFormatter)
        for name, (module, line) in BENCHES.items()
    }
    for name in ("ledger", "run", "eval", "ladder"):
        b[name].add_argument("--repeats", type=positive_int, default=None, help=f"runs of each path {OWN}")
    b["ledger"].add_argument(
        "--steps", type=positive_int, default=None, help=f"optimizer steps per run {OWN}"
    )
    b["ledger"].add_argument(
        "--form", choices=["callback", "subclass"], default=None, help=f"the ledger's form {OWN}"
    )
    b["ledger"].add_argument("--policy", default=None, help="a checkpoint folder, e.g. data/models/policy-M")
    b["ledger"].add_argument(
        "--hidden", type=positive_int, default=None, help=f"a random policy's hidden size {OWN}"
    )
    b["ledger"].add_argument("--threads", type=positive_int, default=None, help=f"torch threads {OWN}")
    for name in ("run", "eval"):
        b[name].add_argument("--sizes", default=None, help=f"policy sizes, comma-separated {OWN}")
    b["run"].add_argument("--cells", default=None, help=f"grid cells, comma-separated {OWN}")
    b["ladder"].add_argument("--cells", default=None, help=f"size/cell pairs, comma-separated {OWN}")
    e = b["eval"]
    e.add_argument("--models", default=None, help="checkpoints too, on the M setting's sets, comma-separated")
    e.add_argument("--threads", default=None, help=f"torch thread counts, comma-separated {OWN}")
    e.add_argument("--sets", choices=["all", "heldout"], default=None, help=f"the sets evaluated {OWN}")
    e.add_argument("--limit", type=positive_int, default=None, help="problems per set (default: all)")
    n = b["eval-noise"]
    n.add_argument("--seeds", type=positive_int, default=None, help=f"runs of the cell, seeds 0..n-1 {OWN}")
    n.add_argument("--policy", default=None, help=f"stage A's setting (a policy label) {OWN}")
    n.add_argument("--cell", default=None, help=f"the grid cell {OWN}")
    n.add_argument("--threads", type=positive_int, default=None, help=f"torch threads {OWN}")
    n.add_argument("--out", default=None, help="the CSV (default: data/results/cpu-tiny/eval_noise.csv)")
    tt = b["test-time"]
    tt.add_argument("--policy", default=None, help=f"the base policy's size {OWN}")
    tt.add_argument("--n", type=positive_int, default=None, help=f"samples per problem {OWN}")
    tt.add_argument("--problems", type=positive_int, default=None, help=f"gsm problems {OWN}")
    tt.add_argument("--threads", default=None, help=f"torch thread counts, comma-separated {OWN}")
    tt.add_argument("--repeats", type=positive_int, default=None, help=f"timed repeats {OWN}")
    for parser in b.values():
        parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    return p


def _given(**options) -> dict:
    """The options the user set: the rest take the bench function's defaults."""
    return {k: v for k, v in options.items() if v is not None}


def _split(text: str | None, kind=str) -> tuple | None:
    return None if text is None else tuple(kind(t) for t in text.split(",") if t)


def run(args: argparse.Namespace) -> int:
    if args.bench != "ledger":  # the trainers' runs: transformers' warnings would bury the table
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
    if args.bench == "ledger":
        from paper_repro.bench import ledger

        options = _given(
            repeats=args.repeats,
            steps=args.steps,
            form=args.form,
            policy=args.policy,
            hidden=args.hidden,
            threads=args.threads,
        )
        result = ledger.bench_ledger(ledger.LedgerBench(**options))
        show = ledger.print_ledger
    elif args.bench == "run":
        from paper_repro.bench import runs

        result = runs.bench_runs(
            **_given(sizes=_split(args.sizes), cells=_split(args.cells), repeats=args.repeats)
        )
        show = runs.print_runs
    elif args.bench == "eval":
        from paper_repro.bench import evaluation

        result = evaluation.bench_eval(
            **_given(
                sizes=_split(args.sizes),
                models=_split(args.models),
                repeats=args.repeats,
                threads=_split(args.threads, int),
                sets=args.sets,
                limit=args.limit,
            )
        )
        show = evaluation.print_eval
    elif args.bench == "trl-flops":
        from paper_repro.bench import trl_flops

        result, show = trl_flops.bench_trl_flops(), trl_flops.print_trl_flops
    elif args.bench == "ladder":
        from paper_repro.bench import ladder

        result = ladder.bench_ladder(**_given(cells=_split(args.cells), repeats=args.repeats))
        show = ladder.print_ladder
    elif args.bench == "test-time":
        from paper_repro.bench import test_time

        result = test_time.bench_test_time(
            **_given(
                policy=args.policy,
                n=args.n,
                problems=args.problems,
                threads=_split(args.threads, int),
                repeats=args.repeats,
            )
        )
        show = test_time.print_test_time
    else:
        return _eval_noise(args)
    _show(result, show, args.json)
    return 0


def _eval_noise(args: argparse.Namespace) -> int:
    from paper_repro.bench import eval_noise
    from paper_repro.common.results import results_dir

    given = _given(k=args.seeds, policy=args.policy, cell=args.cell, threads=args.threads)
    result = eval_noise.bench_eval_noise(**given)
    out = args.out or results_dir("cpu-tiny") / "eval_noise.csv"
    eval_noise.write_eval_noise(result["rows"], out)
    _show(result, eval_noise.print_eval_noise, args.json)
    print(f"wrote {out}")
    return 0


def _show(result: dict, show, as_json: bool) -> None:
    """Print ``result`` as JSON, or as the bench's ``show`` words it."""
    if as_json:
        print(json.dumps(result, indent=2, default=str))
    else:
        show(result)
