"""``paper-repro bench eval-noise``: how noisy a run's evaluation on 300 problems is
(:func:`bench_eval_noise`, ``NOISE_BLOCK``). ``--seeds`` runs (default 6) of one stage A cell (``--policy`` M,
``--cell`` r50: reward ``sparse``, target rho 0.50) are trained as the study trains them, at the full
budget without the ladder; each trained policy is evaluated, as a run's evaluation is (greedy, the
profile's decoder), on the three disjoint blocks of 300 problems of the 900-problem held-out and
gsm sets (rows 0-299, 300-599 and 600-899; the first was the study's whole evaluation when the noise was
measured, before the study moved to all 900). From each target's seed x block table, a
two-way random-effects ANOVA (:func:`eval_noise_components`) splits the evaluation noise at 300
problems into the part shared by the cell's seeds (the block's own difficulty) and the part each
run has of its own, and says which share of the seed variance the study sees at 300 problems is
evaluation noise. Prints a table and writes ``data/results/cpu-tiny/eval_noise.csv`` (``--out``).
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from typing import Any

import torch

from paper_repro.bench.common import base_folder, without_ladder

NOISE_TARGETS = {"native_reward": "heldout", "gsm_pass1": "gsm"}  # target -> the set it is scored on
NOISE_COLUMNS = (
    "target",
    "policy",
    "reward_system",
    "cell",
    "k",
    "blocks",
    "problems_per_block",
    "mean",
    "per_run_eval_var",
    "shared_bias_var",
    "nonshared_eval_var",
    "seed_var_300",
    "seed_var_900",
    "true_seed_var",
    "eval_noise_share_300",
    "binomial_var_300",
    "clipped",
    "df_shared",
    "df_nonshared",
    "shared_bias_var_raw",
    "true_seed_var_raw",
    "block_means",
    "block0_matches_runs_csv",
    "scores",
    "seconds",
    "git_sha",
    "git_dirty",
    "created_at",
)


def eval_noise_components(scores) -> dict[str, Any]:
    """The evaluation noise in a ``(seeds, blocks)`` table of one cell's scores: seed ``s``'s policy
    scored on block ``b`` of disjoint, equally sized problem blocks. The model is two-way random
    effects without replication, ``y[s, b] = mu + a[s] + c[b] + e[s, b]``: ``a`` the seed's own
    score (what seeds change), ``c`` the block's difficulty (the evaluation bias every seed of the
    cell shares), ``e`` what a run's evaluation adds of its own (the seed x block interaction and
    each problem's chance). With ``MS_seed``, ``MS_block`` and ``MS_res`` the ANOVA mean squares:

    - ``nonshared_eval_var`` = ``MS_res`` (var e);
    - ``shared_bias_var`` = ``(MS_block - MS_res) / seeds`` (var c), clipped at 0;
    - ``true_seed_var`` = ``(MS_seed - MS_res) / blocks`` (var a), clipped at 0;
    - ``per_run_eval_var``: each run's variance between its blocks (ddof 1), averaged over the runs,
      unbiased for var c + var e: the whole evaluation noise of one run on one block;
    - ``seed_var_300``: the variance between seeds on one block (ddof 1), averaged over the blocks,
      unbiased for var a + var e: the seed variance a cell shows on one set of problems (the shared
      bias moves every seed alike);
    - ``seed_var_900``: the variance between seeds of their mean over all blocks (var a + var e / blocks);
    - ``eval_noise_share_300``: ``nonshared_eval_var / seed_var_300``, clipped to [0, 1].

    ``clipped`` names the estimates that came out negative (or a share above 1) and were clipped;
    ``shared_bias_var_raw`` and ``true_seed_var_raw`` are the two before clipping (unbiased)."""
    import numpy as np

    y = np.asarray(scores, dtype=float)
    if y.ndim != 2 or min(y.shape) < 2:
        raise ValueError(f"need a (seeds, blocks) table with at least 2 of each, got shape {y.shape}")
    k, b = y.shape
    grand, seed_means, block_means = y.mean(), y.mean(axis=1), y.mean(axis=0)
    resid = y - seed_means[:, None] - block_means[None, :] + grand
    ms_seed = b * ((seed_means - grand) ** 2).sum() / (k - 1)
    ms_block = k * ((block_means - grand) ** 2).sum() / (b - 1)
    ms_res = (resid**2).sum() / ((k - 1) * (b - 1))
    raw = {"shared_bias_var": (ms_block - ms_res) / k, "true_seed_var": (ms_seed - ms_res) / b}
    seed_var_300 = float(y.var(axis=0, ddof=1).mean())
    share = ms_res / seed_var_300 if seed_var_300 > 0 else float("nan")
    clipped = [name for name, v in raw.items() if v < 0]
    if share > 1:
        clipped.append("eval_noise_share_300")
    return {
        "mean": float(grand),
        "per_run_eval_var": float(y.var(axis=1, ddof=1).mean()),
        "shared_bias_var": float(max(raw["shared_bias_var"], 0.0)),
        "nonshared_eval_var": float(ms_res),
        "seed_var_300": seed_var_300,
        "seed_var_900": float(seed_means.var(ddof=1)),
        "true_seed_var": float(max(raw["true_seed_var"], 0.0)),
        "eval_noise_share_300": float(min(share, 1.0)),
        "clipped": clipped,
        "df_shared": b - 1,  # the shared bias rests on the block means alone
        "df_nonshared": (k - 1) * (b - 1),
        "shared_bias_var_raw": float(raw["shared_bias_var"]),  # before clipping
        "true_seed_var_raw": float(raw["true_seed_var"]),
        "block_means": [float(m) for m in block_means],
    }


def train_policy(spec, base_root, threads: int = 1):
    """``spec``'s run trained as :func:`paper_repro.run.train.run_cell` trains it (the seed set, the base
    metrics read from ``base_root`` first, the ledger-wrapped trainer to the budget), without
    writing a row: the merged policy and the run's parts."""
    from pathlib import Path

    from transformers import set_seed

    from paper_repro.run.run_eval import base_metrics
    from paper_repro.run.trainer import build_trainer, load_parts

    torch.set_num_threads(threads)
    set_seed(spec.seed)
    parts = load_parts(spec)
    base_metrics(spec, parts, base_root)  # a cache read, as in a run (the committed base metrics)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer(spec, parts, Path(tmp) / "steps" / f"{spec.run_id}.jsonl")
        trainer.train()
        policy = trainer.model.merge_and_unload()
    return policy, parts


NOISE_BLOCK = 300  # problems per block: the evaluation size the noise is measured at (the sets hold 900)


def bench_eval_noise(
    k: int = 6,
    policy: str = "M",
    cell: str = "r50",
    blocks: int = 3,
    threads: int = 1,
    block: int = NOISE_BLOCK,
) -> dict[str, Any]:
    """Train ``k`` seeds (0 .. k-1) of stage A's ``policy`` setting's ``cell`` at the full budget
    (no ladder, no extension past C) and evaluate each on ``blocks`` disjoint blocks of ``block``
    problems of the held-out and gsm sets; one row per target (:data:`NOISE_TARGETS`) with
    :func:`eval_noise_components` of its seed x block table. Where the study evaluates ``block``
    problems, block 0 is its evaluation, checked against the committed rows of the same runs."""
    import dataclasses
    from pathlib import Path

    import numpy as np

    from paper_repro.common.paths import repo_root
    from paper_repro.drivers import study
    from paper_repro.evaluation.evaluate import EvalSets
    from paper_repro.run.run_eval import evaluate_run
    from paper_repro.run.spec import setting_specs
    from paper_repro.tasks import load_examples

    started = time.perf_counter()
    profile = study.prepare("cpu-tiny")
    specs = [without_ladder(s) for s in setting_specs(profile, policy, k, cells=[cell], extend=False)]
    if len(specs) != k:
        raise ValueError(f"cell {cell} of setting {policy} gave {len(specs)} runs for {k} seeds")
    first = specs[0]
    sizes = {"heldout": block, "gsm": block}
    study_sized = first.heldout_limit == block and first.eval_limit == block
    sets = {}
    for name, size in sizes.items():
        sets[name] = load_examples(first.data_map[name], limit=blocks * size)
        if len(sets[name]) < blocks * size:
            raise ValueError(
                f"{first.data_map[name]} holds {len(sets[name])} problems, not {blocks} x {size}"
            )
    committed = _committed_rows(repo_root() / "data" / "results" / profile.name / "runs.csv")
    table = {t: np.full((k, blocks), np.nan) for t in NOISE_TARGETS}
    matches = {t: 0 for t in NOISE_TARGETS}
    known = 0
    with tempfile.TemporaryDirectory() as tmp:
        base = base_folder(Path(tmp))
        for i, spec in enumerate(specs):
            t0 = time.perf_counter()
            model, parts = train_policy(spec, base, threads)
            t1 = time.perf_counter()
            for j in range(blocks):
                cut = {n: sets[n][j * sizes[n] : (j + 1) * sizes[n]] for n in sizes}
                block = dataclasses.replace(
                    parts, eval_sets=EvalSets(heldout=cut["heldout"], gsm=cut["gsm"], math=())
                )
                metrics = evaluate_run(spec, block, model)
                for target in NOISE_TARGETS:
                    table[target][i, j] = metrics[target]
            row = committed.get(spec.run_id) if study_sized else None
            if row is not None:  # block 0 is the study's evaluation: the same run gives the same numbers
                known += 1
                for target in NOISE_TARGETS:
                    matches[target] += abs(float(row[target]) - table[target][i, 0]) < 1e-9
            scores = ", ".join(f"{t} {' '.join(f'{v:.4f}' for v in table[t][i])}" for t in NOISE_TARGETS)
            print(
                f"seed {spec.seed}: trained {t1 - t0:.1f}s, evaluated {time.perf_counter() - t1:.1f}s; {scores}",
                flush=True,
            )
            del model, parts
    rows = _noise_rows(table, first, policy, cell, blocks, sizes, matches, known, started)
    return {
        "rows": rows,
        "seeds": [s.seed for s in specs],
        "run_ids": [s.run_id for s in specs],
        "seconds": time.perf_counter() - started,
    }


def _noise_rows(
    table: dict[str, Any],
    first: Any,
    policy: str,
    cell: str,
    blocks: int,
    sizes: dict[str, int],
    matches: dict[str, int],
    known: int,
    started: float,
) -> list[dict[str, Any]]:
    """:func:`bench_eval_noise`'s rows: per target, :func:`eval_noise_components` of its seed x block
    ``table``, the binomial variance of a 0/1 score on a block, how many block-0 scores matched the
    committed rows (``matches`` of ``known``), the seconds since ``started`` and the provenance."""
    from paper_repro.common import provenance

    stamp = provenance.stamp()

    def binary(target: str) -> bool:  # pass@1, and the native reward of the 0/1 rule
        return target.endswith("pass1") or first.reward_system == "sparse"

    rows = []
    for target, set_name in NOISE_TARGETS.items():
        comp = eval_noise_components(table[target])
        p = comp["mean"]
        rows.append(
            {
                "target": target,
                "policy": policy,
                "reward_system": first.reward_system,
                "cell": cell,
                "k": len(table[target]),
                "blocks": blocks,
                "problems_per_block": sizes[set_name],
                **comp,
                # a 0/1 score's variance on a block of random problems, whatever part of it seeds share
                "binomial_var_300": p * (1 - p) / sizes[set_name] if binary(target) else float("nan"),
                "clipped": ";".join(comp["clipped"]),
                "block_means": json.dumps([round(m, 6) for m in comp["block_means"]]),
                "block0_matches_runs_csv": f"{matches[target]}/{known}",
                "scores": json.dumps([[round(v, 6) for v in r] for r in table[target].tolist()]),
                "seconds": time.perf_counter() - started,
                "git_sha": stamp["git_sha"],
                "git_dirty": stamp["git_dirty"],
                "created_at": stamp["created_at"],
            }
        )
    return rows


def _committed_rows(path) -> dict[str, dict[str, str]]:
    """The ``ok`` rows of a committed ``runs.csv`` by run_id (the last one wins), or none."""
    import csv

    if not path.exists():
        return {}
    with path.open(newline="") as f:
        return {r["run_id"]: r for r in csv.DictReader(f) if r.get("status") == "ok"}


def write_eval_noise(rows: list[dict[str, Any]], out) -> None:
    import csv
    from pathlib import Path

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=NOISE_COLUMNS)
        writer.writeheader()
        writer.writerows({c: r[c] for c in NOISE_COLUMNS} for r in rows)
    tmp.replace(out)


def print_eval_noise(result: dict[str, Any]) -> None:
    first = result["rows"][0]
    n = first["problems_per_block"]
    print(
        f"evaluation noise: {first['policy']}/{first['cell']} ({first['reward_system']}), {first['k']} seeds x "
        f"{first['blocks']} blocks of {n} problems; variances in points^2 (sd in points in brackets)"
    )
    cols = (
        ("per_run_eval_var", f"per-run@{n}"),
        ("shared_bias_var", "shared bias"),
        ("nonshared_eval_var", "non-shared"),
        ("seed_var_300", f"seed var@{n}"),
        ("seed_var_900", f"seed var@{first['blocks'] * n}"),
        ("true_seed_var", "true seed"),
        ("binomial_var_300", f"p(1-p)/{n}"),
    )
    head = " ".join(f"{label:>15}" for _, label in cols)
    print(f"{'target':<14} {'mean':>6} {head} {'noise share':>11}  block means; block 0 = runs.csv")
    for r in result["rows"]:
        vals = " ".join(
            f"{1e4 * r[c]:7.2f} ({100 * math.sqrt(r[c]):4.2f})" if not math.isnan(r[c]) else f"{'-':>15}"
            for c, _ in cols
        )
        means = ", ".join(f"{m:.3f}" for m in json.loads(r["block_means"]))
        clipped = f"; clipped at 0: {r['clipped']}" if r["clipped"] else ""
        print(
            f"{r['target']:<14} {r['mean']:6.3f} {vals} {r['eval_noise_share_300']:11.0%}  "
            f"{means}; {r['block0_matches_runs_csv']}{clipped}"
        )
    print(
        f"the shared bias rests on {first['df_shared']} degrees of freedom (the block means), the non-shared "
        f"part on {first['df_nonshared']}; noise share = non-shared / seed var@{n}"
    )
    print(f"{result['seconds']:.0f} s")
