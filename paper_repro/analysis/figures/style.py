"""What the analysis' saved figures (:mod:`paper_repro.analysis.figures`) and the stage notebooks'
figures (:mod:`paper_repro.analysis.figures.notebook`) share: the theme, the panel grid (at most
:data:`PANELS_PER_ROW` panels in a row), the 95% interval bars, the rho axis label and the fixed file
metadata that makes a rebuild from the same tables give the same files."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

PANELS_PER_ROW = 2  # a figure of several panels wraps after this many
PROPORTIONS = ("gsm_pass1", "math_pass1")  # targets that are shares: their intervals stay in [0, 1]
RHO_LABEL = "realised rho (FLOPs) = C_learning / C_total"


def file_metadata(ext: str) -> dict:
    # fixed metadata so that a rebuild from the same tables gives the same files
    return {"Software": None} if ext == "png" else {"Creator": None, "Producer": None, "CreationDate": None}


def colors(names) -> dict[str, tuple]:
    """One colour per reward system and per policy size, the same in every figure: a setting named by
    its reward system (stage B and D's) takes the system's colour (the colour-blind palette, in the
    reward registry's order), one named by its policy size (stage A's) the size's (a sequential
    palette, smallest lightest); any other name a colour of its own after them, in the order given."""
    import seaborn as sns

    from paper_repro.results import POLICY_SIZES
    from paper_repro.rewards import REWARD_SYSTEMS

    fixed = {
        **dict(zip(REWARD_SYSTEMS, sns.color_palette("colorblind", 10), strict=False)),
        **dict(zip(POLICY_SIZES, sns.color_palette("crest", len(POLICY_SIZES)), strict=True)),
    }
    others = [n for n in dict.fromkeys(map(str, names)) if n not in fixed]
    spare = sns.color_palette("colorblind", 10)[len(REWARD_SYSTEMS) :] or sns.color_palette("dark", 10)
    return {**{n: fixed[n] for n in map(str, names) if n in fixed},
            **{n: spare[i % len(spare)] for i, n in enumerate(others)}}  # fmt: skip


def theme():
    """seaborn, with the figures' theme set."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper")
    return sns


def panel_grid(n: int) -> tuple[int, int]:
    """Rows and columns of a figure of ``n`` panels, at most :data:`PANELS_PER_ROW` in a row."""
    cols = max(1, min(n, PANELS_PER_ROW))
    return max(1, math.ceil(n / cols)), cols


def error_bars(rows: pd.DataFrame, target: str) -> list[pd.Series]:
    """The 95% interval of ``target`` per row as error bar lengths (a proportion's clipped to [0, 1];
    NaN, no bar, where a cell has one seed)."""
    low, high = rows[f"{target}_ci_low"], rows[f"{target}_ci_high"]
    if target in PROPORTIONS:
        low, high = low.clip(0, 1), high.clip(0, 1)
    return [(rows[target] - low).clip(lower=0), (high - rows[target]).clip(lower=0)]


def setup():
    """pyplot on the non-interactive backend, and seaborn with the figures' theme."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt, theme()


def save_figure(fig, out_dir: str | Path, name: str, close: bool = True) -> Path:
    """``fig`` as PNG and PDF in ``out_dir`` with the fixed metadata (closed unless told); the PNG's path."""
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for ext in ("png", "pdf"):
        fig.savefig(out / f"{name}.{ext}", dpi=150, bbox_inches="tight", metadata=file_metadata(ext))
    if close:
        plt.close(fig)
    return out / f"{name}.png"


def legend_line(label: str, **style):
    """A legend entry for ``style`` (a line, a marker or both; grey unless told)."""
    from matplotlib.lines import Line2D

    style.setdefault("color", "grey")
    return Line2D([], [], label=label, **style)
