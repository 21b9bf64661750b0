"""Stage E's figures (notebook 60), drawn from its tables (:mod:`paper_repro.analysis.tables.test_time`):

- :func:`passk_curves`: pass@k (the checker's oracle), majority vote and PRM best-of-k against k,
  base and RL, a panel per size, the greedy answers as points at k = 1;
- :func:`equal_flop_frontier`: accuracy against FLOPs per query, each policy's envelope (its arms
  mixed), RL's shifted right by its training FLOPs amortised over Q queries at a few Q;
- :func:`breakeven_figure`: Q* per size and deployable arm, with its interval over RL seeds.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from paper_repro.analysis.figures.style import colors, setup
from paper_repro.analysis.tables.test_time import arm_envelope

ARM_STYLES = {"pass": ":", "majority": "-", "prm": "--"}
ARM_WORDS = {"pass": "pass@k (oracle)", "majority": "majority vote", "prm": "PRM best-of-k"}
QUERIES = (1e3, 1e5)  # the deployments the frontier shifts RL's curve for


def _mean_over_seeds(arms: pd.DataFrame) -> pd.DataFrame:
    keys = ["size", "kind", "set", "arm", "k"]
    return arms.groupby(keys, as_index=False)[["accuracy", "flops_per_query", "train_flops"]].mean()


def passk_curves(arms: pd.DataFrame, set_name: str, order: list[str]):
    """A panel per size: each arm's accuracy against k (log2), base grey and RL in the size's colour
    (mean over seeds)."""
    plt, _ = setup()
    mean = _mean_over_seeds(arms[arms.set == set_name])
    fig, axes = plt.subplots(1, len(order), figsize=(4.2 * len(order), 3.6), sharey=True, squeeze=False)
    palette = colors(order)
    for ax, size in zip(axes[0], order, strict=True):
        for kind, color in (("base", "0.45"), ("rl", palette[size])):
            g = mean[(mean["size"] == size) & (mean.kind == kind)]
            for arm, ls in ARM_STYLES.items():
                a = g[g.arm == arm].sort_values("k")
                ax.plot(
                    a.k, a.accuracy, ls=ls, color=color, marker="o", ms=3, label=f"{kind}: {ARM_WORDS[arm]}"
                )
            greedy = g[g.arm == "greedy"]
            ax.scatter(
                greedy.k, greedy.accuracy, marker="*", s=90, color=color, zorder=5, label=f"{kind}: greedy"
            )
        ax.set_xscale("log", base=2)
        ax.set_title(f"policy {size}")
        ax.set_xlabel("k (samples per query)")
    axes[0][0].set_ylabel(f"{set_name}: share of problems right")
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Stage E: what sampling reaches, base and after RL ({set_name})", y=1.02)
    return fig


def equal_flop_frontier(arms: pd.DataFrame, set_name: str, order: list[str], arm: str = "majority"):
    """A panel per size: accuracy against FLOPs per query (log) of the base's envelope (greedy and
    ``arm`` at every k, mixed) and RL's, RL's shifted by its training FLOPs / Q at each of :data:`QUERIES`
    and at Q -> inf (mean over seeds)."""
    plt, _ = setup()
    mean = _mean_over_seeds(arms[arms.set == set_name])
    fig, axes = plt.subplots(1, len(order), figsize=(4.2 * len(order), 3.6), sharey=True, squeeze=False)
    palette = colors(order)
    for ax, size in zip(axes[0], order, strict=True):
        g = mean[mean["size"] == size]
        base = arm_envelope(g[g.kind == "base"], arm)[1:]  # without the origin: a log axis
        ax.plot(*zip(*base, strict=True), color="0.45", marker="o", ms=3, label="base, test-time only")
        rl = g[g.kind == "rl"]
        hull = arm_envelope(rl, arm)[1:]
        train = float(rl.train_flops.iloc[0])
        for q, alpha in ((math.inf, 1.0), *((q, a) for q, a in zip(QUERIES, (0.45, 0.7), strict=True))):
            shift = 0.0 if math.isinf(q) else train / q
            xs = [x + shift for x, _ in hull]
            label = "RL, Q -> inf" if math.isinf(q) else f"RL + training / Q, Q = {q:.0e}"
            ax.plot(xs, [y for _, y in hull], color=palette[size], alpha=alpha, marker="o", ms=3, label=label)
        ax.set_xscale("log")
        ax.set_title(f"policy {size}")
        ax.set_xlabel("FLOPs per query")
    axes[0][0].set_ylabel(f"{set_name}: share right ({ARM_WORDS[arm]})")
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Stage E: equal-FLOP frontier, greedy + {ARM_WORDS[arm]} ({set_name})", y=1.02)
    return fig


def breakeven_figure(breakeven: pd.DataFrame, order: list[str]):
    """Q* per size (x) for each deployable arm and set, with its interval over RL seeds; a Q* of 0
    (RL wins at every Q) drawn at the axis' floor, inf (RL never wins) at its ceiling."""
    plt, _ = setup()
    rows = breakeven[breakeven.deployable.astype(bool)]
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    combos = list(rows.groupby(["set", "arm"]).groups)
    finite = rows.q_star[np.isfinite(rows.q_star) & (rows.q_star > 0)]
    floor = 10 ** math.floor(math.log10(finite.min()) - 1) if len(finite) else 1.0
    ceiling = 10 ** math.ceil(math.log10(finite.max()) + 1) if len(finite) else 1e6
    for i, (set_name, arm) in enumerate(combos):
        offset = (i - (len(combos) - 1) / 2) * 0.12
        for j, size in enumerate(order):
            r = rows[(rows["size"] == size) & (rows.set == set_name) & (rows.arm == arm)]
            if r.empty:
                continue
            r = r.iloc[0]
            seeds = [float(v) for v in str(r.q_star_seeds).split()]
            shown = [min(max(v, floor), ceiling) for v in seeds]
            ax.scatter([j + offset] * len(shown), shown, s=12, color=f"C{i}", alpha=0.5)
            if np.isfinite(r.q_star):
                err = (
                    [[r.q_star - r.q_star_low], [r.q_star_high - r.q_star]]
                    if np.isfinite(r.q_star_low)
                    else None
                )
                label = f"{set_name}, {ARM_WORDS[arm]}" if j == 0 else None
                ax.errorbar(j + offset, r.q_star, yerr=err, fmt="o", color=f"C{i}", capsize=3, label=label)
    ax.set_yscale("log")
    ax.set_ylim(floor / 2, ceiling * 2)
    ax.set_xticks(range(len(order)), [f"policy {s}" for s in order])
    ax.set_ylabel("break-even queries Q*")
    ax.set_title("Stage E: queries beyond which RL beats test-time sampling at equal FLOPs", fontsize=10)
    ax.legend(fontsize=7)
    return fig
