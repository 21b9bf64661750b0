"""One run inside ``accelerate launch``: what :func:`paper_repro.run.train.run_cell` starts for a spec
that asks for more than one GPU. Every process trains; the main process evaluates and appends the
row.

    accelerate launch --config_file configs/accelerate/8gpu_zero2.yaml \\
        -m paper_repro.run.worker data/results/gpu-paper/launch/<run_id>.json --results data/results/gpu-paper

Not a ``paper-repro`` command: :mod:`paper_repro.run.launch` starts it, with a spec file it wrote, in each
process ``accelerate launch`` spawns (which runs a module, ``-m``); a user asks for the same run with
``paper-repro cells`` or ``paper-repro run``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from paper_repro.common.quiet import quiet_libraries
    from paper_repro.run.spec import spec_from_json
    from paper_repro.run.train import run_cell

    parser = argparse.ArgumentParser(prog="python -m paper_repro.run.worker", description=__doc__)
    parser.add_argument("spec", help="a RunSpec as JSON (RunSpec.to_json)")
    parser.add_argument("--results", required=True, help="the results directory")
    parser.add_argument("--executed", default="", help="the notebook that asked for the run")
    args = parser.parse_args(argv)
    quiet_libraries()  # its output lands in the notebook that launched it
    spec = spec_from_json(Path(args.spec).read_text())
    row = run_cell(spec, args.results, executed_notebook=args.executed)
    return 0 if row.get("status") in ("ok", "worker") else 1


if __name__ == "__main__":
    sys.exit(main())
