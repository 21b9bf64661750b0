"""``paper-repro bench ladder``: what the budget ladder adds to a full-budget run
(:func:`bench_ladder`): the same run of budget C with its ladder (its points below C, C/8 to C/2, the native
reward at each point) and without, alternating on one torch thread; the median seconds of each and the share
added.
"""

from __future__ import annotations

import statistics
import tempfile
from typing import Any

import torch

from paper_repro.bench.common import base_folder, without_ladder

LADDER_CELLS = ("M/r40", "M/r66", "L/r50")  # full-budget runs of a cheap, a mid and a dear cell


def bench_ladder(cells: tuple[str, ...] = LADDER_CELLS, repeats: int = 3, seed: int = 0) -> dict[str, Any]:
    """What the budget ladder adds to a full-budget run (:mod:`paper_repro.run.ladder`): each size/cell's
    run of budget C as the study runs it, with its ladder (its points below C, C/8 to C/2, the native
    reward's held-out set at each point) and without, alternating, ``repeats`` times each, one torch thread, after a
    warm-up run; the medians. Both compute the same run (``tests/test_ladder.py``): the difference is
    the points' evaluations, each on a merged copy of the policy."""
    import shutil
    from pathlib import Path

    from paper_repro.drivers import study
    from paper_repro.run.ladder import curves_table
    from paper_repro.run.run_eval import base_metrics
    from paper_repro.run.spec import setting_specs
    from paper_repro.run.train import run_cell
    from paper_repro.run.trainer import load_parts

    torch.set_num_threads(1)
    profile = study.prepare("cpu-tiny")
    out: dict[str, Any] = {"cells": {}, "torch_threads": 1, "repeats": repeats}
    with tempfile.TemporaryDirectory() as tmp:
        base = base_folder(Path(tmp))
        pairs = {}
        for name in cells:
            size, cell = name.split("/")
            spec = setting_specs(profile, size, [seed], cells=[cell], extend=False)[0]
            pairs[name] = {"ladder": spec, "plain": without_ladder(spec)}
        for spec in {p["plain"].policy: p["plain"] for p in pairs.values()}.values():
            base_metrics(spec, load_parts(spec), base)  # once per study, not per run: untimed

        def run(spec, tag: str) -> dict[str, float]:
            root = Path(tmp) / tag
            root.mkdir()
            shutil.copy(base / "base_metrics.csv", root / "base_metrics.csv")
            row = run_cell(spec, root, threads=1, raise_errors=True)
            points = [p for p in curves_table(root).rows() if p["final"] == "False" and p["status"] == "ok"]
            return {
                "total": float(row["seconds_total"]),
                "evaluation": float(row["seconds_eval"]),
                "points": float(len(points)),
                "points_evaluation": sum(float(p["seconds_eval"]) for p in points),
            }

        run(next(iter(pairs.values()))["ladder"], "warmup")
        for name, pair in pairs.items():
            seconds: dict[str, list[dict[str, float]]] = {"plain": [], "ladder": []}
            for i in range(repeats):
                for kind in ("plain", "ladder") if i % 2 == 0 else ("ladder", "plain"):
                    seconds[kind].append(run(pair[kind], f"{name.replace('/', '-')}-{kind}-{i}"))
            med = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in seconds.items()}
            spec = pair["ladder"]
            out["cells"][name] = {
                "P": spec.P,
                "G": spec.G,
                "K": spec.K,
                "mu": spec.mu,
                "problems": spec.heldout_limit,
                **med,
                "added": med["ladder"]["total"] / med["plain"]["total"] - 1,
            }
    out["median_added"] = statistics.median(c["added"] for c in out["cells"].values())
    return out


def print_ladder(result: dict[str, Any]) -> None:
    print(f"seconds per full-budget run, median of {result['repeats']}, one torch thread")
    print(
        f"{'cell':<8} {'P G K mu':<12} {'plain':>8} {'ladder':>8} {'points':>7} {'their eval':>11} {'added':>7}"
    )
    for name, c in result["cells"].items():
        layout = f"{c['P']} {c['G']} {c['K']} {c['mu']}"
        print(
            f"{name:<8} {layout:<12} {c['plain']['total']:8.2f} {c['ladder']['total']:8.2f} "
            f"{c['ladder']['points']:7.0f} {c['ladder']['points_evaluation']:11.2f} {c['added']:+7.1%}"
        )
    print(f"the ladder adds {result['median_added']:+.1%} to a full-budget run (median over cells)")
