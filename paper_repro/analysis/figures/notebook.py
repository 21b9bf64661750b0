"""The stage notebooks' figures (10, 20 and 30): one setting's frontier with :func:`setting_frontiers`
and :func:`pilot_frontiers` (drawn for the notebook, not saved), its best cells named in one sentence
with :func:`best_cells_sentence` and :func:`pilot_pick_sentence`; :func:`notebook_image` makes such a
figure small enough to commit in an executed notebook, as :func:`preview_png` does for a saved PNG.
Each is importable from :mod:`paper_repro.analysis.figures` too, where the notebooks read them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from paper_repro.analysis.figures.style import RHO_LABEL, colors, error_bars, file_metadata, panel_grid, theme
from paper_repro.analysis.tables.frontiers import TARGETS
from paper_repro.common.results import TARGET_LABELS


def _figure(**kwargs):
    """A figure outside pyplot (the notebooks' figures: no backend is touched, nothing is left open,
    and a notebook's inline backend does not show it a second time), constrained layout."""
    from matplotlib.figure import Figure

    theme()
    return Figure(layout="constrained", **kwargs)


def frontier_best_set(frontier: pd.DataFrame, target: str = "native_reward", recipe_sd: float = 0.0):
    """The cells of one setting's frontier rows (:func:`paper_repro.analysis.tables.frontiers.frontier_table`)
    in order of realised rho, as :class:`paper_repro.analysis.stats.optima.Cells` (each cell's mean, SD and
    seed count from its row), and the mask of those that could be best at 95%
    (:func:`paper_repro.analysis.stats.optima.best_set`: Gupta's subset; ``recipe_sd`` the recipe effect
    allowed for, 0: seed noise alone). Cells without a mean are left out."""
    from paper_repro.analysis.stats.optima import Cells, best_set

    g = frontier.dropna(subset=["rho", target]).sort_values("rho", kind="stable")
    cells = Cells(
        tuple(g["cell"].astype(str)),
        g["rho"].to_numpy(float),
        g[target].to_numpy(float),
        (g[f"{target}_sd"].astype(float) ** 2).to_numpy(float),
        g["seeds"].to_numpy(int),
    )
    return cells, best_set(cells, recipe_sd)


def _one_setting(frontier: pd.DataFrame) -> None:
    if "setting" in frontier and frontier["setting"].nunique() > 1:
        raise ValueError(f"one setting's frontier rows expected, got {sorted(frontier['setting'].unique())}")


INTERVAL = "95% Student-t interval over seeds"  # what the bars are (frontiers.frontier_table)
BEST, OUT = "could be best (95%)", "ruled out (95%)"  # the filled and the hollow markers


def setting_frontier(
    frontier: pd.DataFrame,
    target: str = "native_reward",
    ax=None,
    recipe_sd: float = 0.0,
    legend: bool = True,
):
    """One setting's frontier of ``target`` on ``ax`` (a new figure when None): each cell's mean over
    seeds against realised rho, with its 95% Student-t interval over seeds (:data:`INTERVAL`; a
    proportion's clipped to [0, 1]; no bar where a cell has one seed), the base policy dashed, the
    cells that could be best at 95% filled and the others hollow (:func:`frontier_best_set`). A cell
    whose ``target`` is NaN (a metric that could not be computed) is left out and named in the panel;
    a target NaN in every cell leaves the panel empty but for saying so. ``frontier``: one setting's
    rows of :func:`paper_repro.analysis.tables.frontiers.frontier_table` (one pilot budget's, for the
    pilots). Drawn, not saved; returns ``ax``."""
    theme()
    _one_setting(frontier)
    if ax is None:
        ax = _figure(figsize=(5.0, 3.2)).add_subplot()
    label = TARGET_LABELS.get(target, target)
    name = str(frontier["setting"].iloc[0]) if len(frontier) and "setting" in frontier else "setting"
    color = colors([name])[name]  # the setting's colour, as in every figure
    everything = frontier.sort_values("rho", kind="stable")
    g = everything.dropna(subset=["rho", target])
    missing = everything.loc[everything[target].isna(), "cell"].astype(str).tolist()
    if len(g):
        ax.plot(g["rho"], g[target], color=color, lw=1.2, label="cell mean over seeds")
        bars = g.dropna(subset=[f"{target}_ci_low", f"{target}_ci_high"])
        if len(bars):
            ax.errorbar(
                bars["rho"],
                bars[target],
                yerr=error_bars(bars, target),
                fmt="none",
                capsize=2,
                color=color,
                lw=1,
                label=INTERVAL,
            )
        cells, keep = frontier_best_set(g, target, recipe_sd)
        if keep.any():
            ax.scatter(
                cells.rho[keep], cells.mean[keep], s=36, color=color, edgecolors=color, zorder=3, label=BEST
            )
        if not keep.all():
            ax.scatter(
                cells.rho[~keep],
                cells.mean[~keep],
                s=36,
                facecolors="white",
                edgecolors=color,
                linewidths=1.2,
                zorder=3,
                label=OUT,
            )
    base = g[f"base_{target}"].dropna() if f"base_{target}" in g else pd.Series(dtype=float)
    if len(base):
        ax.axhline(float(base.iloc[0]), color="grey", ls="--", lw=1, label="base policy")
    if missing and g.empty:
        ax.text(
            0.5,
            0.5,
            f"no {label} in any cell (NaN)",
            transform=ax.transAxes,
            ha="center",
            fontsize=8,
            color="dimgrey",
        )
    elif missing:
        ax.set_title(
            f"no value (NaN), left out: {' '.join(missing)}", loc="right", fontsize=7, color="dimgrey"
        )
    ax.set_xlim(0, 1)
    ax.set_xlabel(RHO_LABEL)
    ax.set_ylabel(label)
    if legend:
        ax.legend(*_in_order(ax), fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return ax


def _in_order(ax) -> tuple[list, list]:
    """``ax``'s legend entries, the data (the cell means) first."""
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: (not labels[i].startswith("cell mean"), i))
    return [handles[i] for i in order], [labels[i] for i in order]


def _legend_entries(axes) -> tuple[list, list]:
    """Every panel's legend entries once (a panel may lack one: no interval, no hollow cell), in
    :func:`_in_order`'s order."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*_in_order(ax), strict=True):
            seen.setdefault(label, handle)
    order = ["cell mean over seeds", INTERVAL, BEST, OUT, "base policy"]
    labels = sorted(seen, key=lambda x: order.index(x) if x in order else len(order))
    return [seen[x] for x in labels], labels


def frontier_caption(frontier: pd.DataFrame, recipe_sd: float = 0.0) -> str:
    """What a frontier figure shows, in a line: the seeds behind each mean, the interval (or that a
    single seed gives none) and the rule for the filled markers."""
    seeds = (
        pd.to_numeric(frontier["seeds"], errors="coerce").dropna().astype(int) if "seeds" in frontier else []
    )
    low, high = (int(min(seeds)), int(max(seeds))) if len(seeds) else (0, 0)
    rule = "Gupta's subset, " + (
        f"a recipe effect of SD {recipe_sd:.3g} allowed for" if recipe_sd else "seed noise alone"
    )
    if high <= 1:
        return (
            "cell means of one seed each: no interval, and with no seed noise to test against every cell "
            "could be best (all filled); base policy dashed"
        )
    n = f"{low}" if low == high else f"{low}-{high}"
    one = "; a cell with one seed has no interval" if low <= 1 else ""
    return (
        f"cell means over {n} seeds with their {INTERVAL}{one}; filled: could be best at 95% ({rule}), "
        "hollow: ruled out; base policy dashed"
    )


def setting_frontiers(frontier: pd.DataFrame, targets=TARGETS, recipe_sd: float = 0.0):
    """One setting's frontier of each of ``targets`` (:func:`setting_frontier`: native reward, gsm and
    math pass@1, the judge's score; two panels in a row, one legend under them, a caption
    (:func:`frontier_caption`) saying what the bars are and whether one seed leaves none); returns the
    figure (drawn for a notebook, not saved)."""
    _one_setting(frontier)
    nrows, ncols = panel_grid(len(targets))
    fig = _figure(figsize=(4.4 * ncols, 2.8 * nrows + 1.1))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for i, (ax, t) in enumerate(zip(axes.flat, targets, strict=False)):
        setting_frontier(frontier, t, ax, recipe_sd, legend=False)
        if i + ncols < len(targets):  # a panel under it carries the x label
            ax.set_xlabel("")
    for ax in axes.flat[len(targets) :]:
        ax.remove()
    fig.legend(*_legend_entries(axes.flat[: len(targets)]), loc="outside lower center", ncol=3, fontsize=8)
    name = str(frontier["setting"].iloc[0]) if len(frontier) and "setting" in frontier else "setting"
    fig.suptitle(
        f"{name}: each target against realised rho\n{frontier_caption(frontier, recipe_sd)}", fontsize=9
    )
    return fig


def pilot_frontiers(
    frontier: pd.DataFrame, pick: str | None = None, target: str = "native_reward", recipe_sd: float = 0.0
):
    """RACE's pilot frontiers of one setting, a panel per pilot budget (``pilot_fraction``; two in a
    row, the y axis shared): :func:`setting_frontier` of ``target``, with ``pick`` squared in red on
    the first budget's panel (RACE's pick comes from those pilots). Returns the figure (not saved)."""
    from paper_repro.analysis.wording import fraction_words

    _one_setting(frontier)
    fractions = list(dict.fromkeys(frontier["pilot_fraction"]))
    nrows, ncols = panel_grid(len(fractions))
    fig = _figure(figsize=(4.4 * ncols, 2.9 * nrows + 1.1))
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    for i, (ax, fraction) in enumerate(zip(axes.flat, fractions, strict=False)):
        rows = frontier[np.isclose(frontier["pilot_fraction"], fraction)]
        setting_frontier(rows, target, ax, recipe_sd, legend=False)
        if i % ncols:  # the y axis is shared: its label once per row
            ax.set_ylabel("")
        first = " (RACE picks from these)" if i == 0 and len(fractions) > 1 else ""
        ax.set_title(f"pilots at {fraction_words(fraction)} of the budget{first}", fontsize=9)
        mine = rows[rows["cell"].astype(str) == str(pick)]
        if i == 0 and len(mine):
            ax.scatter(
                mine["rho"],
                mine[target],
                s=190,
                marker="s",
                facecolors="none",
                edgecolors="red",
                linewidths=1.1,
                zorder=4,
                label=f"RACE's pick ({pick})",
            )
    for ax in axes.flat[len(fractions) :]:
        ax.remove()
    fig.legend(*_legend_entries(axes.flat[: len(fractions)]), loc="outside lower center", ncol=3, fontsize=8)
    name = str(frontier["setting"].iloc[0]) if len(frontier) and "setting" in frontier else "setting"
    fig.suptitle(f"{name}: RACE's pilot grids\n{frontier_caption(frontier, recipe_sd)}", fontsize=9)
    return fig


def _interval(row: pd.Series, target: str) -> str:
    low, high = row.get(f"{target}_ci_low"), row.get(f"{target}_ci_high")
    if low is None or pd.isna(low) or pd.isna(high):
        return "no interval (one seed)"
    return f"95% interval [{low:.3f}, {high:.3f}]"


def _set_phrase(cells, keep: np.ndarray, recipe_sd: float) -> str:
    """Which cells could be best, in words."""
    rule = "Gupta's subset on the seed noise, " + (
        f"a recipe effect of SD {recipe_sd:.3g} allowed for" if recipe_sd else "no recipe effect allowed for"
    )
    if cells.k == 1:
        return "it is the only cell"
    if not (cells.n >= 2).any():
        return "with one seed per cell there is no noise estimate, so any cell could be best"
    if keep.all():
        return f"{'both' if cells.k == 2 else f'all {cells.k}'} cells could be the best at 95% ({rule})"
    named = ", ".join(
        f"{n} (rho {r:.2f})" for n, r in zip(np.array(cells.names)[keep], cells.rho[keep], strict=True)
    )
    return f"the cells that could be best at 95% ({rule}): {named}"


def best_cells_sentence(frontier: pd.DataFrame, target: str = "native_reward", recipe_sd: float = 0.0) -> str:
    """One sentence on one setting's frontier rows: the cell with the highest mean ``target``, its
    realised rho and 95% interval, and the cells that could be best at 95% (:func:`frontier_best_set`)."""
    _one_setting(frontier)
    label = TARGET_LABELS.get(target, target)
    cells, keep = frontier_best_set(frontier, target, recipe_sd)
    if cells.k == 0:
        return f"No cell has a {label} yet."
    top = cells.names[int(np.argmax(cells.mean))]
    row = frontier[frontier["cell"].astype(str) == top].iloc[0]
    return (
        f"Highest mean {label}: cell {top} (realised rho {row['rho']:.2f}), {row[target]:.3f}, "
        f"{_interval(row, target)}; {_set_phrase(cells, keep, recipe_sd)}."
    )


def pilot_pick_sentence(race, recipe_sd: float = 0.0) -> str:
    """One sentence on RACE's pilots of one setting (a :class:`paper_repro.drivers.study.RacePilots`): the pick,
    its mean native reward and 95% interval over the first pilot budget's seeds, the cells that could be
    best there, and the pick against TRL's default allocation at the full budget on the fresh seeds."""
    from paper_repro.analysis.wording import fraction_words

    frontier, pick = race.frontier, race.pick
    if pick is None or frontier.empty:
        return "No pilot has finished with a native reward: RACE has no pick yet."
    fraction = frontier["pilot_fraction"].iloc[0]  # the first pilot budget: RACE picks from its pilots
    rows = frontier[np.isclose(frontier["pilot_fraction"], fraction)]
    cells, keep = frontier_best_set(rows, "native_reward", recipe_sd)
    row = rows[rows["cell"].astype(str) == str(pick)].iloc[0]
    text = (
        f"RACE picks cell {pick} (realised rho {row['rho']:.2f}), the highest mean native reward of the "
        f"pilots at {fraction_words(fraction)} of the budget: {row['native_reward']:.3f}, "
        f"{_interval(row, 'native_reward')}; {_set_phrase(cells, keep, recipe_sd)}"
    )
    pairs = _fresh_pairs(race.check)
    if len(pairs) == 0:
        return text + "; its full-budget runs on the fresh seeds have no result yet."
    d = pairs["pick"] - pairs["default"]
    same = ": the pick is the default allocation, the same runs" if (d == 0).all() else ""
    return (
        f"{text}; at the full budget on {len(pairs)} fresh seeds it scores {pairs['pick'].mean():.3f} "
        f"against TRL's default allocation's {pairs['default'].mean():.3f} (mean difference "
        f"{d.mean():+.3f}{same})."
    )


def _fresh_pairs(check: pd.DataFrame) -> pd.DataFrame:
    """RACE's check (per fresh seed: ``default`` and ``pick (<cell>)``) as numbers, ``default`` and
    ``pick``, the seeds with both. An entry that holds a run's rows more than once (the pick is the
    default allocation itself, so both name the same runs) counts once."""

    def number(value) -> float:
        if isinstance(value, pd.Series | np.ndarray | list | tuple):
            values = pd.to_numeric(pd.Series(value).drop_duplicates(), errors="coerce")
            return float(values.iloc[0]) if len(values) == 1 else float("nan")
        return float(pd.to_numeric(value, errors="coerce"))

    picked = [c for c in check.columns if c != "default"]
    if "default" not in check or not picked:
        return pd.DataFrame(columns=["default", "pick"], dtype=float)
    pairs = pd.DataFrame({"default": check["default"].map(number), "pick": check[picked[0]].map(number)})
    return pairs.dropna()


def notebook_image(fig, max_width: int = 900, colors: int = 32):
    """``fig`` (:func:`setting_frontiers`, :func:`pilot_frontiers`) as an image for a notebook cell to
    show: rendered at 100 dpi, then made small as :func:`preview_png` does (an executed notebook's
    output stays far under :data:`paper_repro.common.notebook_hygiene.OUTPUT_LIMIT`)."""
    import io

    from IPython.display import Image

    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100, bbox_inches="tight", metadata=file_metadata("png"))
    png.seek(0)
    return Image(data=preview_png(png, max_width, colors))


def preview_png(path, max_width: int = 800, colors: int = 32) -> bytes:
    """A small copy of the saved PNG at ``path`` (or a PNG file object) for a notebook to embed: at most
    ``max_width`` pixels wide and ``colors`` colours (a few tens of kB where the 150-dpi file is a few
    hundred). The file itself is left as it is."""
    import io

    from PIL import Image

    image = Image.open(path).convert("RGB")
    if image.width > max_width:
        image = image.resize((max_width, round(image.height * max_width / image.width)), Image.LANCZOS)
    out = io.BytesIO()
    image.quantize(colors=colors).save(out, format="PNG", optimize=True)
    return out.getvalue()
