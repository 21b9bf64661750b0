"""Your runs beside a committed frontier (``paper-repro analyse --results out/mine --beside committed``):
per setting your folder holds, the committed frontier of that setting
(:func:`~paper_repro.analysis.figures.notebook.setting_frontier`) with each of your runs marked at its
realised rho, labelled with its cell, rho and value. Not one of the study's registered figures: it
is written into your folder's ``figures/``, never beside the committed ones."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd

from paper_repro.analysis.figures.notebook import _figure, frontier_caption, setting_frontier
from paper_repro.analysis.figures.style import file_metadata, panel_grid

NAME = "beside_committed"
# your runs' points: drawn over the frontier, in a colour no frontier marker uses
OWN = dict(marker="*", s=170, color="crimson", edgecolors="black", linewidths=0.6, zorder=5)


def beside_table(own: pd.DataFrame, frontier: pd.DataFrame, target: str = "native_reward") -> pd.DataFrame:
    """One row per run of ``own`` (runs at the full budget, numbers parsed) whose setting the committed
    ``frontier`` has: its setting, cell, recipe, seed, realised rho and ``target``, beside the
    committed frontier's best cell by mean ``target`` in that setting (its label, rho and mean) and
    the difference (yours minus that mean, in the target's units)."""
    rows = []
    for setting, runs in own.groupby("setting", sort=False):
        cells = frontier[frontier["setting"] == setting]
        if cells.empty:
            continue
        best = cells.loc[cells[target].idxmax()]
        for _, run in runs.iterrows():
            rows.append(
                {
                    **{k: run[k] for k in ("setting", "cell", "P", "G", "K", "mu", "seed", "rho", target)},
                    "committed_best": best["cell"],
                    "committed_best_rho": best["rho"],
                    f"committed_best_{target}": best[target],
                    "minus_committed_best": run[target] - best[target],
                }
            )
    return pd.DataFrame(rows)


def beside_figure(own: pd.DataFrame, frontier: pd.DataFrame, target: str = "native_reward"):
    """The figure: a panel per setting of ``own`` that the committed ``frontier`` holds (two in a
    row), the committed frontier of ``target`` drawn as the study draws it, your runs as stars
    labelled ``cell, rho, value``. Returns the figure (not saved); raises ValueError when no
    setting of ``own`` is on the frontier."""
    settings = [s for s in dict.fromkeys(own["setting"]) if (frontier["setting"] == s).any()]
    if not settings:
        raise ValueError(
            f"none of your runs' settings ({', '.join(map(str, dict.fromkeys(own['setting'])))}) is on the "
            f"committed frontier ({', '.join(map(str, dict.fromkeys(frontier['setting'])))})"
        )
    nrows, ncols = panel_grid(len(settings))
    fig = _figure(figsize=(5.2 * ncols, 3.4 * nrows + 0.6))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax, setting in zip(axes.flat, settings, strict=False):
        setting_frontier(frontier[frontier["setting"] == setting], target, ax, legend=False)
        mine = own[own["setting"] == setting]
        ax.scatter(mine["rho"], mine[target], label="your runs", **OWN)
        for _, run in mine.iterrows():
            text = f"{run['cell']} (seed {run['seed']:g})\nrho {run['rho']:.2f}: {run[target]:.3f}"
            ax.annotate(
                text, (run["rho"], run[target]), xytext=(6, 6), textcoords="offset points", fontsize=7
            )
        ax.set_title(f"{setting}: the committed frontier and your runs", fontsize=9)
        ax.legend(fontsize=7, loc="best")
    for ax in axes.flat[len(settings) :]:
        ax.remove()
    shown = frontier[frontier["setting"].isin(settings)]
    caption = "\n".join(textwrap.wrap(frontier_caption(shown), 70 * ncols))  # as wide as the panels
    fig.suptitle(f"Your runs (stars) on the committed frontier\n{caption}", fontsize=9)
    return fig


def write_beside(fig, folder: str | Path) -> list[Path]:
    """Save ``fig`` as ``beside_committed.png`` and ``.pdf`` in ``folder``; returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{NAME}.{ext}" for ext in ("png", "pdf")]
    for path in paths:
        fig.savefig(path, dpi=150, bbox_inches="tight", metadata=file_metadata(path.suffix[1:]))
    return paths
