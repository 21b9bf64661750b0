"""The compute curves' figures: each cell's curve with its fit (:func:`curves_figure`), the cells that
could be best at each budget (:func:`rho_star_figure`) and the compute-optimal envelope over policy
sizes with the size that leads at each budget and how sure that is (:func:`envelope_figure`), drawn
from the curve tables (:mod:`paper_repro.analysis.tables.curves`). Their budget axes are the ladder
(:func:`~paper_repro.analysis.figures.style.budget_axis`: ticks at C/8 ... 2C only); their colours
and markers come from :mod:`paper_repro.analysis.figures.style`. A figure with nothing to draw is not
written (:func:`~paper_repro.analysis.figures.style.skip`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro.analysis.figures.registry import register_figure
from paper_repro.analysis.figures.style import (
    budget_axis,
    budget_points,
    cell_styles,
    colors,
    save_figure,
    setup,
    size_markers,
    skip,
)
from paper_repro.analysis.figures.style import legend_line as _line
from paper_repro.analysis.stats.saturating import ok, saturating
from paper_repro.analysis.stats.verdict import NAN
from paper_repro.analysis.tables.curve_rows import prepared, size_order
from paper_repro.analysis.tables.curves import pairs
from paper_repro.analysis.wording import finite, num, point_words
from paper_repro.common.results import TARGET_WORDS

TARGETS = ("native_reward",)  # the targets whose curve figures the analysis draws, in this order


def _per_target(stem: str) -> dict[str, dict[str, str]]:
    """A curve figure's files: ``<stem>_<target>`` for each of :data:`TARGETS`."""
    return {f"{stem}_{t}": {"target": t} for t in TARGETS}


def _of(table: pd.DataFrame, target: str) -> pd.DataFrame:
    return table[table["target"] == target] if len(table) else table


def _drawn_once(table: pd.DataFrame, shared) -> pd.DataFrame:
    """``table`` without the settings that are another's runs (``shared``: stage B's sparse), drawn as
    that one."""
    shared = list(shared or {})
    return table[~table["setting"].isin(shared)] if len(table) and "setting" in table else table


DODGE = 0.012  # log10 step between the cells' points at one budget, so their intervals do not hide each other


def _panels(plt, n: int, width: float = 4.4, height: float = 3.0):
    from paper_repro.analysis.figures.style import panel_grid

    rows, cols = panel_grid(n)
    fig, axes = plt.subplots(
        rows, cols, figsize=(width * cols + 1.8, height * rows + 0.8), squeeze=False, layout="constrained"
    )
    flat = axes.ravel()
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n], cols


def _mean_ci(values: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its 95% t interval (NaN with one value)."""
    from scipy import stats

    values = values[np.isfinite(values)]
    if len(values) < 2:
        return float(values.mean()) if len(values) else NAN, NAN
    return float(values.mean()), float(
        stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    )


def _label_edges(axes, cols: int, xlabel: str, ylabel: str) -> None:
    """The x label under the bottom panel of each column, the y label left of each row."""
    n = len(axes)
    for i, ax in enumerate(axes):
        ax.set_xlabel(xlabel if i + cols >= n else "")
        ax.set_ylabel(ylabel if i % cols == 0 else "")


def _curves_reading(tables, target: str) -> str:
    """For how many cells the asymptote is identified, and how well C is predicted from C/2."""
    fits = _of(tables["curve_fits"], target)
    if not len(fits):
        return f"No cell has a compute curve of {TARGET_WORDS.get(target, target)} (`curve_fits.csv`): nothing to read."
    identified = int((fits["status"] == "identified").sum())
    summary = _of(tables["extrapolation_summary"], target)
    tail = ""
    if len(summary) and finite(summary["median_abs_error"].iloc[0]):
        tail = (
            f"; fitted on the points up to C/2, C is predicted with a median absolute error of "
            f"{num(summary['median_abs_error'].iloc[0], 2)}"
        )
    return (
        f"Native reward against the budget per cell, with ScaleRL-style saturating fits: the asymptote is "
        f"identified for {identified} of {len(fits)} cells{tail}."
    )


@register_figure(
    "curves",
    "each cell's compute curve with its saturating fit, a panel per setting",
    reads={"curves": "curves", "fits": "curve_fits"},
    reading=_curves_reading,
    variants=_per_target("curves"),
)
def curves_figure(
    curves: pd.DataFrame,
    fits: pd.DataFrame,
    target: str,
    out_dir,
    skipped: dict | None = None,
    shared=None,
) -> Path | None:
    """``target`` against the budget per cell, one panel per setting: seed means with 95% intervals
    (points, a little apart sideways so that the intervals do not hide each other) and the saturating
    fits (lines: solid where the asymptote is identified, dashed where not). A cell has its colour (its
    target rho) and a marker of its own (:func:`~paper_repro.analysis.figures.style.cell_styles`). A
    setting that is another's runs (``shared``) is drawn once, as that one."""
    name = f"curves_{target}"
    data = ok(prepared(_drawn_once(curves, shared))).dropna(subset=[target])
    if data.empty:
        return skip(out_dir, name, f"no curve measures {target}", skipped)
    plt, _sns = setup()
    data = data.assign(cell=data["cell"].astype(str))
    settings = list(dict.fromkeys(data["setting"]))
    rhos = data.groupby("cell")["target_rho"].mean()
    styles = cell_styles(rhos.to_dict())
    points = budget_points(data)
    fig, axes, cols = _panels(plt, len(settings))
    for ax, setting in zip(axes, settings, strict=True):
        rows = data[data["setting"] == setting]
        mine = [c for c in styles if c in set(rows["cell"])]
        for k, cell in enumerate(mine):
            g, style = rows[rows["cell"] == cell], styles[cell]
            stats = [
                (_mean_ci(p[target].to_numpy(float)), p["point_flops"].mean()) for _, p in g.groupby("point")
            ]
            flops = np.array([f for _, f in stats])
            mean, half = np.array([m for (m, _), _ in stats]), np.array([h for (_, h), _ in stats])
            shift = 10 ** (DODGE * (k - (len(mine) - 1) / 2))
            ax.errorbar(
                flops * shift,
                mean,
                yerr=np.nan_to_num(half, nan=0.0),
                ls="none",
                marker=style["marker"],
                ms=4.5,
                capsize=1.5,
                elinewidth=0.9,
                color=style["color"],
                mec="0.15",
                mew=0.4,
            )
            fit = fits[
                (fits["setting"] == setting) & (fits["cell"].astype(str) == cell) & (fits["target"] == target)
            ]
            if len(fit) and np.isfinite(fit["A_fit"].iloc[0]):
                r = fit.iloc[0]
                grid = np.linspace(np.log10(flops.min()), np.log10(flops.max()), 100)  # no extrapolation
                y = saturating(grid, r["A_fit"], np.log10(r["C_mid"]), r["B"], r["R0"])
                ax.plot(
                    10**grid, y, color=style["color"], lw=1.2, ls="-" if r["status"] == "identified" else "--"
                )
        budget_axis(ax, points)
        ax.set_title(f"{setting}", fontsize=9)
    _label_edges(axes, cols, axes[-1].get_xlabel(), f"{TARGET_WORDS.get(target, target)} (mean over seeds)")
    handles = [
        _line(
            f"{c} (target rho {rhos[c]:.2f})", color=s["color"], marker=s["marker"], ms=5, mec="0.15", mew=0.4
        )
        for c, s in styles.items()
    ]
    handles += [
        _line("fit: asymptote identified", lw=1.2),
        _line("fit: not identified", lw=1.2, ls="--"),
        _line("95% interval over seeds", marker="|", ms=8, ls="none"),
    ]
    fig.legend(handles=handles, title="cell", loc="outside right upper", fontsize=7)
    fig.suptitle(
        f"{TARGET_WORDS.get(target, target)} against compute, per cell: R0 + (A - R0) / (1 + (C_mid/C)^B)",
        fontsize=10,
    )
    return save_figure(fig, out_dir, name)


def _rho_star_reading(tables, target: str) -> str:
    """Per setting, the cells that could be best at the ladder's ends."""
    best, parts = _of(tables["rho_star_by_budget"], target), []
    for setting, rows in best.groupby("setting", sort=False):
        # the ends the claim reads: the points where every cell of the setting is measured
        whole = rows[rows["infeasible_cells"].fillna("").astype(str) == ""]
        rows = (whole if len(whole) else rows).sort_values("point")
        ends = [rows.iloc[0], rows.iloc[-1]] if len(rows) > 1 else [rows.iloc[0]]
        parts.append(
            f"{setting} {' -> '.join(f'{{{r.best_cells}}} at {point_words(r.point)}' for r in ends)}"
        )
    return "The cells that could be best, at the ladder's ends: " + "; ".join(parts) + "." if parts else ""


@register_figure(
    "rho_star_vs_budget",
    "rho*(C): per setting, the cells that could be best at each budget",
    reads={"rho_star": "rho_star_by_budget"},
    reading=_rho_star_reading,
    variants=_per_target("rho_star_vs_budget"),
)
def rho_star_figure(
    rho_star: pd.DataFrame, target: str, out_dir, skipped: dict | None = None, shared=None
) -> Path | None:
    """rho*(C) per setting: at each budget point every measured cell at its measured rho (open grey),
    the cells that could be best at 95% (filled, in the setting's colour) and the best-mean cell (a
    star). A setting that is another's runs (``shared``) is drawn once, as that one."""
    name = f"rho_star_vs_budget_{target}"
    data = _of(_drawn_once(rho_star, shared), target)
    if data.empty:
        return skip(out_dir, name, f"no rho*(C) row for {target}", skipped)
    plt, _ = setup()
    settings = list(dict.fromkeys(data["setting"]))
    palette = colors(settings)
    points = budget_points(data)
    fig, axes, cols = _panels(plt, len(settings), height=2.8)
    for ax, setting in zip(axes, settings, strict=True):
        marks: dict[str, list[tuple[float, float]]] = {"best": [], "other": [], "argmax": []}
        for r in data[data["setting"] == setting].itertuples():
            best = set(str(r.best_cells).split())
            for cell, rho in zip(str(r.cells).split(), map(float, str(r.cell_rhos).split()), strict=True):
                marks["best" if cell in best else "other"].append((r.point_flops, rho))
                if cell == r.argmax_cell:
                    marks["argmax"].append((r.point_flops, rho))
        for kind, style in (
            ("other", {"marker": "o", "mfc": "none", "color": "grey", "ms": 5}),
            ("best", {"marker": "o", "color": palette[str(setting)], "ms": 6}),
            ("argmax", {"marker": "*", "color": "black", "ms": 7}),
        ):
            if marks[kind]:
                ax.plot(*zip(*marks[kind], strict=True), ls="none", **style)
        budget_axis(ax, points)
        ax.set_ylim(0, 1)
        ax.set_title(setting, fontsize=9)
    _label_edges(axes, cols, axes[-1].get_xlabel(), "measured rho of the cell")
    handles = [
        _line("could be best at 95% (filled, in the setting's colour)", marker="o", ls="none", ms=6),
        _line("measured, ruled out at 95%", marker="o", mfc="none", ls="none", ms=5),
        _line("best-mean cell", color="black", marker="*", ls="none", ms=7),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    fig.suptitle(
        f"rho*(C): the cells that could be best for {TARGET_WORDS.get(target, target)} at each budget",
        fontsize=10,
    )
    return save_figure(fig, out_dir, name)


LEADS, COULD, OUT = "leads: the best mean", "could still be best (95%)", "ruled out (95%)"


def _verdicts(size_star: pd.DataFrame, target: str, measured: pd.Index) -> pd.DataFrame:
    """Per (size, point) measured, whether the size leads (``argmax_size``), could still be best
    (among ``best_sizes``) or is ruled out at that budget: ``size``, ``point``, ``verdict``."""
    stars = size_star[size_star["target"] == target] if len(size_star) else size_star
    by_point = {round(float(r.point), 6): r for r in stars.itertuples()}
    out = []
    for size, point in measured:
        r = by_point.get(round(float(point), 6))
        if r is None:
            continue
        best = str(r.best_sizes).split()
        verdict = LEADS if str(r.argmax_size) == size else COULD if size in best else OUT
        out.append({"size": size, "point": point, "verdict": verdict})
    return pd.DataFrame(out, columns=["size", "point", "verdict"])


def _size_strip(ax, verdicts: pd.DataFrame, order: list[str], flops: pd.Series, palette: dict) -> None:
    """size*(C) under the envelope: a row per size, at each budget a large star where the size leads, a
    filled marker where it could still be best at 95%, a small grey cross where it is ruled out (nothing
    where it has no feasible pair)."""
    for k, size in enumerate(order):
        mine = verdicts[verdicts["size"] == size]
        for verdict, style in (
            (LEADS, {"marker": "*", "ms": 11, "mec": "black", "mew": 0.6}),
            (COULD, {"marker": size_markers([size])[size], "ms": 6.5}),
            (OUT, {"marker": "x", "ms": 5, "color": "0.55", "mew": 1.0}),
        ):
            at = mine[mine["verdict"] == verdict]
            if len(at):
                style = {"color": palette[size], **style}
                ax.plot(flops.reindex(at["point"]).to_numpy(), [k] * len(at), ls="none", **style)
    ax.set_ylim(len(order) - 0.5, -0.5)
    ax.set_yticks(range(len(order)), order, fontsize=7)
    ax.set_ylabel("size*(C)", fontsize=7)
    ax.grid(axis="y", visible=False)
    ax.tick_params(axis="y", length=0, pad=2)


def _envelope_reading(tables, target: str) -> str:
    sizes = _of(tables["size_star_by_budget"], target)
    parts = [f"{point_words(r.point)}: {r.best_sizes}" for r in sizes.sort_values("point").itertuples()]
    return (
        "The policy sizes that could be best at equal FLOPs, by budget: " + "; ".join(parts) + "."
        if parts
        else ""
    )


@register_figure(
    "compute_optimal_envelope",
    "stage A's compute-optimal envelope over policy sizes, and the size that leads at each budget",
    reads={"curves": "curves", "size_star": "size_star_by_budget"},
    reading=_envelope_reading,
    variants=_per_target("compute_optimal_envelope"),
)
def envelope_figure(
    curves: pd.DataFrame,
    size_star: pd.DataFrame,
    target: str,
    out_dir,
    sizes: Sequence[str] | None = None,
    skipped: dict | None = None,
) -> Path | None:
    """The compute-optimal envelope: per stage A policy size, its best cell's mean against the budget (a
    line, the size's colour and marker) and the envelope (the maximum over sizes, dashed). Under it, a
    strip with a row per size says which size leads at each budget (a star: the best mean) and how sure
    that is: the others that could still be best at 95% (filled) and those ruled out (a cross), from
    size*(C) (``size_star``; no strip without it)."""
    name = f"compute_optimal_envelope_{target}"
    rows = ok(pairs(prepared(curves))).dropna(subset=[target])
    if rows.empty:
        return skip(out_dir, name, f"no stage A curve measures {target}", skipped)
    plt, _sns = setup()
    found = list(dict.fromkeys(rows["size"].astype(str)))
    order = [s for s in (list(sizes) if sizes is not None else size_order(found)) if s in found]
    palette, shapes = colors(order), size_markers(order)
    means = rows.groupby(["size", "point", "cell"])[target].mean()
    flops = rows.groupby("point")["point_flops"].mean()
    best = means.groupby(level=["size", "point"]).max()
    verdicts = _verdicts(size_star, target, best.index)
    strip = not verdicts.empty
    fig = plt.figure(figsize=(7.2, 4.9 if strip else 4.2), layout="constrained")
    grid = fig.add_gridspec(
        2 if strip else 1, 1, height_ratios=[3.2, 0.28 * len(order) + 0.35] if strip else [1]
    )
    ax = fig.add_subplot(grid[0])
    for size in order:
        line = best.loc[size]
        ax.plot(
            flops.reindex(line.index),
            line.to_numpy(),
            color=palette[size],
            marker=shapes[size],
            ms=5,
            lw=1.4,
            label=size,
        )
    envelope = best.groupby(level="point").max()
    ax.plot(flops.reindex(envelope.index), envelope.to_numpy(), "--", color="black", lw=1.1, zorder=1)
    points = {float(p): float(f) for p, f in flops.items()}
    budget_axis(ax, points)
    ax.margins(y=0.08)
    ax.set_ylabel(f"{TARGET_WORDS.get(target, target)}\n(the size's best cell, mean over seeds)")
    if strip:
        below = fig.add_subplot(grid[1], sharex=ax)
        _size_strip(below, verdicts, order, flops, palette)
        budget_axis(below, points)
        ax.tick_params(labelbottom=False)
        ax.set_xlabel("")
    handles = [_line(s, color=palette[s], marker=shapes[s], ms=5, lw=1.4) for s in order]
    handles.append(_line("envelope: the best over sizes and allocations", ls="--", color="black", lw=1.1))
    if strip:
        handles += [
            _line("size*(C), the strip below:", ls="none"),
            _line(LEADS, marker="*", ms=10, mec="black", mew=0.6, ls="none"),
            _line(f"the size's marker, filled: {COULD}", marker="o", ms=6, ls="none"),
            _line(f"{OUT}", marker="x", ms=5, mew=1.0, ls="none", color="0.55"),
        ]
    fig.legend(handles=handles, title="policy size", fontsize=7, title_fontsize=7, loc="outside right center")
    fig.suptitle(
        "The compute-optimal envelope over sizes and allocations (stage A)\n"
        "and the size that leads at each budget",
        fontsize=9,
    )
    return save_figure(fig, out_dir, name)
