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

ARM_STYLES = {"pass": ":", "majority": "-", "prm": "--"}
ARM_WORDS = {"pass": "pass@k (oracle)", "majority": "majority vote", "prm": "PRM best-of-k"}
QUERIES = (1e3, 1e5)  # the deployments the frontier shifts RL's curve for


def _mean_over_seeds(arms: pd.DataFrame) -> pd.DataFrame:
    keys = ["size", "kind", "set", "arm", "k"]
    return arms.groupby(keys, as_index=False)[["accuracy", "flops_per_query", "train_flops"]].mean()


def _per_size(
    arms: pd.DataFrame, set_name: str, order: list[str], draw, xlabel: str, ylabel: str, title: str
):
    """A figure of one panel per size on ``set_name``: ``draw(ax, rows, colour)`` fills a panel (its
    curves and its x scale) from the size's rows of ``arms`` (mean over seeds) in the size's colour."""
    plt, _ = setup()
    mean = _mean_over_seeds(arms[arms.set == set_name])
    fig, axes = plt.subplots(1, len(order), figsize=(4.2 * len(order), 3.6), sharey=True, squeeze=False)
    palette = colors(order)
    for ax, size in zip(axes[0], order, strict=True):
        draw(ax, mean[mean["size"] == size], palette[size])
        ax.set_title(f"policy {size}")
        ax.set_xlabel(xlabel)
    axes[0][0].set_ylabel(ylabel)
    # beside the last panel, not over it: inside, it hid L's majority-vote curves
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title, y=1.02)
    return fig


def passk_curves(arms: pd.DataFrame, set_name: str, order: list[str]):
    """A panel per size: each arm's accuracy against k (log2), base grey and RL in the size's colour
    (mean over seeds)."""

    def draw(ax, g: pd.DataFrame, rl_color) -> None:
        for kind, color in (("base", "0.45"), ("rl", rl_color)):
            rows = g[g.kind == kind]
            for arm, ls in ARM_STYLES.items():
                a = rows[rows.arm == arm].sort_values("k")
                ax.plot(
                    a.k, a.accuracy, ls=ls, color=color, marker="o", ms=3, label=f"{kind}: {ARM_WORDS[arm]}"
                )
            greedy = rows[rows.arm == "greedy"]
            ax.scatter(
                greedy.k, greedy.accuracy, marker="*", s=90, color=color, zorder=5, label=f"{kind}: greedy"
            )
        ax.set_xscale("log", base=2)

    return _per_size(
        arms,
        set_name,
        order,
        draw,
        "k (samples per query)",
        f"{set_name}: share of problems right",
        f"Stage E: what sampling reaches, base and after RL ({set_name})",
    )


def equal_flop_frontier(arms: pd.DataFrame, set_name: str, order: list[str], arm: str = "majority"):
    """A panel per size: accuracy against FLOPs per query (log) of each policy's greedy answer (a
    star) and ``arm`` at k = 1, 2, 4, ... (a line), base grey, RL in the size's colour, RL's shifted
    right by its training FLOPs / Q at each of :data:`QUERIES` (fainter) besides Q -> inf (mean over
    seeds). The break-even Q reads the envelope of these points (mixing two of them)."""
    from matplotlib.ticker import NullFormatter

    def draw(ax, g: pd.DataFrame, rl_color) -> None:
        curves = [("base", "0.45", 0.0, 1.0, "base, test time only")]
        train = float(g[g.kind == "rl"].train_flops.iloc[0])
        curves.append(("rl", rl_color, 0.0, 1.0, "RL, Q -> inf"))
        curves += [
            ("rl", rl_color, train / q, a, f"RL + training / Q, Q = {q:.0e}")
            for q, a in zip(QUERIES, (0.35, 0.6), strict=True)
        ]
        for kind, color, shift, alpha, label in curves:
            p = g[(g.kind == kind) & (g.arm == arm)].sort_values("k")
            greedy = g[(g.kind == kind) & (g.arm == "greedy")]
            ax.plot(
                p.flops_per_query + shift, p.accuracy, color=color, alpha=alpha, marker="o", ms=3, label=label
            )
            ax.scatter(
                greedy.flops_per_query + shift, greedy.accuracy, marker="*", s=80, color=color, alpha=alpha
            )
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())

    return _per_size(
        arms,
        set_name,
        order,
        draw,
        "FLOPs per query",
        f"{set_name}: share right ({ARM_WORDS[arm]}; star: greedy)",
        f"Stage E: accuracy against FLOPs per query, {ARM_WORDS[arm]} ({set_name})",
    )


def breakeven_figure(breakeven: pd.DataFrame, order: list[str]):
    """Q* per size (x) for each deployable arm and set: each seed's a dot, their geometric mean a
    diamond with its 95% interval over seeds; a Q* of 0 (RL wins at every Q) drawn on the dotted
    floor, inf (RL never wins) on the dotted ceiling."""
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
            label = f"{set_name}, {ARM_WORDS[arm]} (dots: seeds)" if j == 0 else None
            ax.scatter([j + offset] * len(shown), shown, s=14, color=f"C{i}", alpha=0.6, label=label)
            if np.isfinite(r.q_star) and r.q_star > 0:
                finite = np.isfinite(r.q_star_low)
                err = [[r.q_star - r.q_star_low], [r.q_star_high - r.q_star]] if finite else None
                ax.errorbar(j + offset, r.q_star, yerr=err, fmt="D", color=f"C{i}", capsize=3)
    for y, words in ((floor, "0: RL wins at every Q"), (ceiling, "inf: RL never wins")):
        ax.axhline(y, color="0.6", lw=0.8, ls=":")
        ax.annotate(
            words,
            (0.99, y),
            xycoords=("axes fraction", "data"),
            ha="right",
            va="bottom",
            fontsize=7,
            color="0.4",
        )
    ax.set_yscale("log")
    ax.set_ylim(floor / 2, ceiling * 2)
    ax.set_xticks(range(len(order)), [f"policy {s}" for s in order])
    ax.set_ylabel("break-even queries Q*")
    ax.set_title("Stage E: queries beyond which RL beats test-time sampling at equal FLOPs", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the seeds, not over them
    return fig
