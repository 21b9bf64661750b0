"""What the analysis' saved figures (:mod:`paper_repro.analysis.figures`) and the stage notebooks'
figures (:mod:`paper_repro.analysis.figures.notebook`) share: the theme, the panel grid (at most
:data:`PANELS_PER_ROW` panels in a row), the 95% interval bars, the rho axis label, the budget axis
(:func:`budget_axis`), the fixed file metadata that makes a rebuild from the same tables give the same
files, and what happens to a figure with nothing to draw (:func:`skip`).

**The one owner of every colour and marker.** A reward system and a policy size have one colour in
every figure (:func:`colors`), a size a marker too (:func:`size_markers`); a grid cell its colour (its
target rho on :func:`rho_colormap`, the scale of the rho heatmap) and a marker of its own
(:func:`cell_styles`); a FLOP convention a grey, a marker and a line style (:func:`convention_styles`:
never a setting's colour); a pilot budget a marker (:data:`PILOT_MARKERS`); a verdict a colour
(:data:`VERDICT_COLOURS`)."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

PANELS_PER_ROW = 2  # a figure of several panels wraps after this many
PROPORTIONS = ("gsm_pass1", "math_pass1")  # targets that are shares: their intervals stay in [0, 1]
RHO_LABEL = "realised rho (FLOPs) = C_learning / C_total"

log = logging.getLogger("paper_repro.analysis.figures")

# ---------------------------------------------------------------------------------------- the palette

SIZE_CMAP = "crest"  # policy sizes, smallest lightest: S, M and L far apart on it, XS and XL at its ends
SIZE_SHADES = {"XS": 0.0, "S": 0.15, "M": 0.5, "L": 0.85, "XL": 1.0}
SIZE_MARKERS = {"XS": "v", "S": "o", "M": "s", "L": "^", "XL": "D"}
CELL_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p")  # cells, by target rho
PILOT_MARKERS = ("o", "s", "^", "D", "v", "P")  # one per pilot budget
RHO_CMAP_TOP = 0.88  # viridis cut before its palest yellows, which vanish on white
VERDICT_COLOURS = {
    "held": "#1b7837",
    "not held": "#b2182b",
    "inconclusive": "#7f7f7f",
    "heterogeneous": "#e08214",
}
# a FLOP convention (conventions.csv): shades of grey told apart by marker and line style, so that
# no convention is read as a reward system
CONVENTION_STYLES = {
    "useful": {"color": "0.05", "marker": "o", "ls": "-"},
    "executed": {"color": "0.45", "marker": "s", "ls": "--"},
    "6N": {"color": "0.25", "marker": "^", "ls": ":"},
    "wall time": {"color": "0.6", "marker": "D", "ls": "-."},
}
_SPARE_STYLES = (("0.35", "v", (0, (3, 1, 1, 1))), ("0.5", "P", (0, (5, 2))), ("0.15", "X", (0, (1, 2))))


def colors(names) -> dict[str, tuple]:
    """One colour per reward system and per policy size, the same in every figure: a setting named by
    its reward system (stage B and D's) takes the system's colour (the colour-blind palette, in the
    reward registry's order), one named by its policy size (stage A's) the size's (a sequential
    palette, smallest lightest, :data:`SIZE_SHADES`); any other name a colour of its own after them,
    in the order given."""
    import seaborn as sns

    from paper_repro.common.results import POLICY_SIZES
    from paper_repro.rewards import REWARD_SYSTEMS

    ramp = sns.color_palette(SIZE_CMAP, as_cmap=True)
    fixed = {
        **dict(zip(REWARD_SYSTEMS, sns.color_palette("colorblind", 10), strict=False)),
        **{s: tuple(ramp(SIZE_SHADES.get(s, 0.5))[:3]) for s in POLICY_SIZES},
    }
    others = [n for n in dict.fromkeys(map(str, names)) if n not in fixed]
    spare = sns.color_palette("colorblind", 10)[len(REWARD_SYSTEMS) :] or sns.color_palette("dark", 10)
    return {
        **{n: fixed[n] for n in map(str, names) if n in fixed},
        **{n: spare[i % len(spare)] for i, n in enumerate(others)},
    }


def size_markers(names) -> dict[str, str]:
    """A marker per policy size (:data:`SIZE_MARKERS`), the same in every figure; other names a circle."""
    return {n: SIZE_MARKERS.get(n, "o") for n in map(str, names)}


def rho_colormap():
    """The colour scale of a rho in [0, 1]: viridis up to :data:`RHO_CMAP_TOP` (the rho heatmap's scale and
    the cells' colours)."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap

    return ListedColormap(colormaps["viridis"](np.linspace(0.0, RHO_CMAP_TOP, 256)), name="rho")


def cell_styles(target_rhos: Mapping[str, float]) -> dict[str, dict]:
    """Per grid cell (``target_rhos``: cell -> its recipe's target rho), its ``color`` (the target rho
    on :func:`rho_colormap`) and its ``marker`` (:data:`CELL_MARKERS`, in order of target rho, then
    name): two cells of one rho (r50 and r50b) share a colour, never a marker."""
    cmap = rho_colormap()
    order = sorted(target_rhos, key=lambda c: (_finite_or(target_rhos[c], 0.5), str(c)))
    return {
        str(c): {
            "color": cmap(_finite_or(target_rhos[c], 0.5)),
            "marker": CELL_MARKERS[i % len(CELL_MARKERS)],
        }
        for i, c in enumerate(order)
    }


def _finite_or(value, default: float) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return default
    return min(max(value, 0.0), 1.0) if math.isfinite(value) else default


def convention_styles(kinds: Iterable[str]) -> dict[str, dict]:
    """Per FLOP convention, its ``color`` (a grey), ``marker`` and ``ls`` (:data:`CONVENTION_STYLES`;
    one not named there a spare style, in the order given)."""
    kinds = list(dict.fromkeys(map(str, kinds)))
    others = [k for k in kinds if k not in CONVENTION_STYLES]
    spare = {
        k: dict(zip(("color", "marker", "ls"), _SPARE_STYLES[i % len(_SPARE_STYLES)], strict=True))
        for i, k in enumerate(others)
    }
    return {k: dict(CONVENTION_STYLES.get(k) or spare[k]) for k in kinds}


# ---------------------------------------------------------------------------------------- axes


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


MIN_LABEL_GAP = math.log10(1.7)  # budget ticks nearer than this (a factor 1.7) are not both labelled


def budget_points(rows: pd.DataFrame) -> dict[float, float]:
    """The budget ladder of ``rows`` (``point``: multiples of the full budget C, ``point_flops``): point ->
    its FLOPs, smallest first."""
    pts = rows.dropna(subset=["point", "point_flops"]).groupby("point")["point_flops"].mean()
    return {float(p): float(f) for p, f in pts.sort_index().items() if f > 0}


def flops_words(flops: float) -> str:
    """``1e11`` -> ``1e11``, ``2.5e10`` -> ``2.5e10``: a FLOP count, short."""
    exponent = math.floor(math.log10(flops))
    return f"{flops / 10**exponent:.3g}e{exponent}"


def budget_label(points: Mapping[float, float]) -> str:
    """The budget axis' label: what C is."""
    full = [f / p for p, f in points.items() if p > 0]
    if not full:
        return "compute (FLOPs, log scale)"
    c = sorted(full)[len(full) // 2]
    return f"budget (log scale; C = {flops_words(c)} FLOPs, the full budget)"


def budget_axis(ax, points: Mapping[float, float], label: bool = True) -> None:
    """``ax``'s x axis as the budget ladder ``points`` (point -> FLOPs; :func:`budget_points`): log scale,
    ticks only at the ladder's budgets, labelled C/8, C/4, C/2, C, 2C (a tick nearer than a factor 1.7
    to the last labelled one left unlabelled), no minor ticks, a margin either side; the label says
    what C is (``label``)."""
    from matplotlib.ticker import FixedFormatter, FixedLocator, NullFormatter, NullLocator

    from paper_repro.analysis.wording import point_words

    if not points:
        return
    ax.set_xscale("log")
    order = sorted(points.items(), key=lambda pf: pf[1])
    flops = [f for _, f in order]
    words, last = [], None
    for p, f in order:
        crowded = last is not None and math.log10(f / last) < MIN_LABEL_GAP
        words.append("" if crowded else point_words(p))
        last = last if crowded else f
    ax.xaxis.set_major_locator(FixedLocator(flops))
    ax.xaxis.set_major_formatter(FixedFormatter(words))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    pad = 10 ** (0.08 * max(math.log10(flops[-1] / flops[0]), 1.0))
    ax.set_xlim(flops[0] / pad, flops[-1] * pad)
    if label:
        ax.set_xlabel(budget_label(points))


# ---------------------------------------------------------------------------------------- files


def file_metadata(ext: str) -> dict:
    # fixed metadata so that a rebuild from the same tables gives the same files
    return {"Software": None} if ext == "png" else {"Creator": None, "Producer": None, "CreationDate": None}


def setup():
    """pyplot on the non-interactive backend, and seaborn with the figures' theme."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt, theme()


EXTENSIONS = ("png", "pdf")


def save_figure(fig, out_dir: str | Path, name: str, close: bool = True) -> Path:
    """``fig`` as PNG and PDF in ``out_dir`` with the fixed metadata (closed unless told); the PNG's path."""
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for ext in EXTENSIONS:
        fig.savefig(out / f"{name}.{ext}", dpi=150, bbox_inches="tight", metadata=file_metadata(ext))
    if close:
        plt.close(fig)
    return out / f"{name}.png"


def save_open(fig, out_dir: str | Path, name: str):
    """``fig`` written (:func:`save_figure`) and returned open (a final figure, for its caller to read)."""
    save_figure(fig, out_dir, name, close=False)
    return fig


def paper_label() -> str:
    """The legend entry of the paper's reported optima, drawn as reference lines."""
    from paper_repro.analysis.claims.paper import PAPER_RHO

    return "the paper's rho*: " + ", ".join(f"{v:g} {k}" for k, v in PAPER_RHO.items())


def skip(out_dir: str | Path, name: str, reason: str, skipped: dict | None = None) -> None:
    """The figure ``name`` has nothing to draw: it is not written, a file of that name left in
    ``out_dir`` by an earlier build is removed (a rebuild never leaves an empty or stale figure
    behind), a line is logged saying why, and ``skipped`` (when given) records ``name -> reason``.
    Returns None, what a figure function returns for a figure it did not write."""
    out = Path(out_dir)
    stale = [out / f"{name}.{ext}" for ext in EXTENSIONS if (out / f"{name}.{ext}").exists()]
    for path in stale:
        path.unlink()
    removed = f" (removed the stale {', '.join(p.name for p in stale)})" if stale else ""
    log.warning("figure %s not written: %s%s", name, reason, removed)
    if skipped is not None:
        skipped[name] = reason


class Written(list):
    """The figures a call wrote (names or paths, a list as before), and ``skipped``: each figure it did
    not write -> why (:func:`skip`)."""

    def __init__(self, items: Iterable = (), skipped: Mapping[str, str] | None = None):
        super().__init__(items)
        self.skipped: dict[str, str] = dict(skipped or {})


def legend_line(label: str, **style):
    """A legend entry for ``style`` (a line, a marker or both; grey unless told)."""
    from matplotlib.lines import Line2D

    style.setdefault("color", "grey")
    return Line2D([], [], label=label, **style)
