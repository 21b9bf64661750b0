"""``paper-repro bench run``: whole full-budget cpu-tiny runs (:func:`paper_repro.run.train.run_cell`)
of stage A cells, a search-heavy and an update-heavy cell per policy size, on the old path (HF
``generate`` for rollouts and evaluation, TRL's padded update: ``Resources.sampler="hf"``,
``TrainConfig.generation="hf"``, ``update_layout="padded"``, ``eval_decoding="exact"``) and the new one
(the profile's: the fused decoder of :mod:`paper_repro.sampler` for rollouts and evaluation, the
update over the length buckets of :mod:`paper_repro.sampler.buckets` by the forward of
:mod:`paper_repro.sampler.fused_update`), alternating in one process on one torch thread, after
a warm-up run. Prints, per cell and path, the median seconds of search, learning, reward, the rest of
training, evaluation and set-up (the run's seconds outside training and evaluation), and the ratio
old / new of the run's total. The new path computes the same runs to float rounding, so the two
paths' rollouts part after a few tokens: each path's rounds, useful FLOPs and native reward are
printed beside its seconds (the budget, not the path, sets the rounds, up to one round).
"""

from __future__ import annotations

import statistics
import tempfile
from typing import Any

import torch

from paper_repro.bench.common import RUN_SIZES, base_folder, without_ladder

# Stage A cells of the committed study: r15 is the most search-heavy (K=2 of G=24), r90 the most
# update-heavy (K=G=8, mu=3; P=4 for L)
RUN_CELLS = ("r15", "r90")
PATHS = ("old", "new")
PARTS = ("search", "learning", "reward", "train_other", "evaluation", "setup", "total")
# printed beside each path's seconds: what the run bought with its budget
RUN_FACTS = ("rounds", "C_total", "rho", "native_reward")


def old_path(spec):
    """``spec`` on the path before the throughput work: HF generate, TRL's padded update."""
    import dataclasses

    return dataclasses.replace(
        spec,
        eval_decoding="exact",
        train=dataclasses.replace(spec.train, generation="hf", update_layout="padded"),
        runtime=dataclasses.replace(spec.runtime, sampler="hf"),
    )


def _breakdown(row: dict[str, Any]) -> dict[str, float]:
    f = {
        k: float(row[k])
        for k in (
            "seconds_search",
            "seconds_learning",
            "seconds_reward",
            "seconds_train",
            "seconds_eval",
            "seconds_total",
        )
    }
    return {
        "search": f["seconds_search"],
        "learning": f["seconds_learning"],
        "reward": f["seconds_reward"],
        "train_other": f["seconds_train"] - f["seconds_search"] - f["seconds_learning"] - f["seconds_reward"],
        "evaluation": f["seconds_eval"],
        "setup": f["seconds_total"] - f["seconds_train"] - f["seconds_eval"],
        "total": f["seconds_total"],
    }


def bench_runs(
    sizes: tuple[str, ...] = RUN_SIZES, cells: tuple[str, ...] = RUN_CELLS, repeats: int = 1, seed: int = 0
) -> dict[str, Any]:
    """Old and new path on each (size, cell), alternating, ``repeats`` times each, one torch thread."""
    import shutil
    from pathlib import Path

    from paper_repro.drivers import study
    from paper_repro.run.run_eval import base_metrics
    from paper_repro.run.spec import setting_specs
    from paper_repro.run.train import run_cell
    from paper_repro.run.trainer import load_parts

    torch.set_num_threads(1)
    profile = study.prepare("cpu-tiny")
    out: dict[str, Any] = {"cells": {}, "torch_threads": 1, "repeats": repeats}
    with tempfile.TemporaryDirectory() as tmp:
        base = base_folder(Path(tmp))

        def run(spec, path: str, tag: str) -> dict[str, Any]:
            root = Path(tmp) / tag
            root.mkdir()
            # the base policy's metrics: evaluated once per study, not per run
            shutil.copy(base / "base_metrics.csv", root / "base_metrics.csv")
            return run_cell(old_path(spec) if path == "old" else spec, root, threads=1, raise_errors=True)

        specs = {  # a run of budget C without its ladder, as before the ladder (bench_ladder times it)
            (size, cell): without_ladder(setting_specs(profile, size, [seed], cells=[cell], extend=False)[0])
            for size in sizes
            for cell in cells
        }
        for spec in {s.policy: s for s in specs.values()}.values():  # each path's base metrics, untimed
            for path_spec in (spec, old_path(spec)):
                base_metrics(path_spec, load_parts(path_spec), base)
        first = next(iter(specs.values()))
        run(first, "new", "warmup")  # imports, allocator, tokenizer caches: not any path's cost
        for (size, cell), spec in specs.items():
            seconds: dict[str, list[dict[str, float]]] = {p: [] for p in PATHS}
            rows: dict[str, dict[str, Any]] = {}
            for i in range(repeats):
                order = ("old", "new") if i % 2 == 0 else ("new", "old")
                for path in order:
                    row = run(spec, path, f"{size}-{cell}-{path}-{i}")
                    seconds[path].append(_breakdown(row))
                    rows[path] = row
            medians = {p: {k: statistics.median(b[k] for b in seconds[p]) for k in PARTS} for p in PATHS}
            out["cells"][f"{size}/{cell}"] = {
                "P": spec.P,
                "G": spec.G,
                "K": spec.K,
                "mu": spec.mu,
                "runs": {p: {k: float(rows[p][k]) for k in RUN_FACTS} for p in PATHS},
                "seconds": medians,
                "ratio": medians["old"]["total"] / medians["new"]["total"],
            }
    cells_out = out["cells"].values()
    out["ratio_of_totals"] = sum(c["seconds"]["old"]["total"] for c in cells_out) / sum(
        c["seconds"]["new"]["total"] for c in cells_out
    )
    out["median_ratio"] = statistics.median(c["ratio"] for c in cells_out)
    return out


def print_runs(result: dict[str, Any]) -> None:
    head = " ".join(f"{k:>10}" for k in PARTS)
    print(f"seconds per run, median of {result['repeats']}, one torch thread")
    print(f"{'cell':<8} {'P G K mu':<12} {'path':<4} {head}")
    for name, cell in result["cells"].items():
        layout = f"{cell['P']} {cell['G']} {cell['K']} {cell['mu']}"
        for path in PATHS:
            vals = " ".join(f"{cell['seconds'][path][k]:10.2f}" for k in PARTS)
            print(f"{name:<8} {layout:<12} {path:<4} {vals}")
        facts = "; ".join(
            f"{p}: {r['rounds']:.0f} rounds, C_total {r['C_total']:.3g}, rho {r['rho']:.3f}, "
            f"native {r['native_reward']:.3f}"
            for p, r in cell["runs"].items()
        )
        print(f"{'':<8} {'':<12} old/new total {cell['ratio']:.2f}x  ({facts})")
    print(
        f"ratio old/new: {result['ratio_of_totals']:.2f}x over the summed runs, "
        f"median over cells {result['median_ratio']:.2f}x"
    )
