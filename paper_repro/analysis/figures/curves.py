"""The compute curves' figures: each cell's curve with its fit (:func:`curves_figure`), the cells that
could be best at each budget (:func:`rho_star_figure`) and the compute-optimal envelope over policy
sizes (:func:`envelope_figure`), drawn from the curve tables (:mod:`paper_repro.analysis.tables.curves`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro.analysis.figures.style import legend_line as _line
from paper_repro.analysis.figures.style import save_figure, setup
from paper_repro.analysis.stats.saturating import ok, saturating
from paper_repro.analysis.stats.verdict import NAN
from paper_repro.analysis.tables.curves import CurveAnalysis, pairs, prepared, size_order
from paper_repro.results import TARGET_WORDS


def _panels(plt, n: int, width: float = 4.4, height: float = 3.0):
    from paper_repro.analysis.figures.style import panel_grid

    rows, cols = panel_grid(n)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols + 1.8, height * rows + 0.8), squeeze=False,
                             layout="constrained")  # fmt: skip
    flat = axes.ravel()
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _mean_ci(values: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its 95% t interval (NaN with one value)."""
    from scipy import stats

    values = values[np.isfinite(values)]
    if len(values) < 2:
        return float(values.mean()) if len(values) else NAN, NAN
    return float(values.mean()), float(
        stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    )


def _cell_palette(sns, rows: pd.DataFrame) -> dict[str, tuple]:
    order = rows.groupby("cell")["target_rho"].mean().sort_values(kind="stable").index.astype(str)
    return dict(zip(order, sns.color_palette("viridis", len(order)), strict=False))


def curves_figure(curves: pd.DataFrame, fits: pd.DataFrame, target: str, out_dir) -> Path | None:
    """``target`` against log C per cell (colour, by target rho), one panel per setting: seed means with
    95% intervals (points) and the saturating fits (lines: solid where the asymptote is identified,
    dashed where not)."""
    data = ok(prepared(curves)).dropna(subset=[target])
    if data.empty:
        return None
    plt, sns = setup()
    settings = list(dict.fromkeys(data["setting"]))
    palette = _cell_palette(sns, data)
    fig, axes = _panels(plt, len(settings))
    for ax, setting in zip(axes, settings, strict=True):
        rows = data[data["setting"] == setting]
        for cell, g in rows.groupby("cell", sort=False):
            color = palette[str(cell)]
            stats = [
                (_mean_ci(p[target].to_numpy(float)), p["point_flops"].mean()) for _, p in g.groupby("point")
            ]
            flops = np.array([f for _, f in stats])
            mean, half = np.array([m for (m, _), _ in stats]), np.array([h for (_, h), _ in stats])
            ax.errorbar(flops, mean, yerr=np.nan_to_num(half, nan=0.0), ls="none", marker="o", ms=3.5, capsize=2,
                        color=color)  # fmt: skip
            fit = fits[(fits["setting"] == setting) & (fits["cell"] == cell) & (fits["target"] == target)]
            if len(fit) and np.isfinite(fit["A_fit"].iloc[0]):
                r = fit.iloc[0]
                grid = np.linspace(np.log10(flops.min()), np.log10(flops.max()), 100)  # no extrapolation
                y = saturating(grid, r["A_fit"], np.log10(r["C_mid"]), r["B"], r["R0"])
                ax.plot(10**grid, y, color=color, lw=1.3, ls="-" if r["status"] == "identified" else "--")
        ax.set_xscale("log")
        ax.set_title(f"{setting}", fontsize=9)
        ax.set_xlabel("compute C (FLOPs, log scale)")
        ax.set_ylabel(f"{TARGET_WORDS.get(target, target)} (mean over seeds)")
    handles = [_line(c, color=col, marker="o", ms=4) for c, col in palette.items()]
    handles += [_line("fit: asymptote identified", lw=1.3), _line("fit: not identified", lw=1.3, ls="--"),
                _line("95% interval over seeds", marker="|", ms=8, ls="none")]  # fmt: skip
    fig.legend(handles=handles, title="cell", loc="outside right upper", fontsize=7)
    fig.suptitle(f"{TARGET_WORDS.get(target, target)} against compute, per cell: R0 + (A - R0) / (1 + (C_mid/C)^B)",
                 fontsize=10)  # fmt: skip
    return save_figure(fig, out_dir, f"curves_{target}")


def rho_star_figure(rho_star: pd.DataFrame, target: str, out_dir) -> Path | None:
    """rho*(C) per setting: at each budget point every measured cell at its measured rho (open grey),
    the cells that could be best at 95% (filled) and the best-mean cell (a star)."""
    data = rho_star[rho_star["target"] == target]
    if data.empty:
        return None
    plt, _ = setup()
    settings = list(dict.fromkeys(data["setting"]))
    fig, axes = _panels(plt, len(settings), height=2.8)
    for ax, setting in zip(axes, settings, strict=True):
        marks: dict[str, list[tuple[float, float]]] = {"best": [], "other": [], "argmax": []}
        for r in data[data["setting"] == setting].itertuples():
            best = set(str(r.best_cells).split())
            for cell, rho in zip(str(r.cells).split(), map(float, str(r.cell_rhos).split()), strict=True):
                marks["best" if cell in best else "other"].append((r.point_flops, rho))
                if cell == r.argmax_cell:
                    marks["argmax"].append((r.point_flops, rho))
        for kind, style in (("other", {"marker": "o", "mfc": "none", "color": "grey", "ms": 5}),
                            ("best", {"marker": "o", "color": "C0", "ms": 6}),
                            ("argmax", {"marker": "*", "color": "black", "ms": 7})):  # fmt: skip
            if marks[kind]:
                ax.plot(*zip(*marks[kind], strict=True), ls="none", **style)
        ax.set_xscale("log")
        ax.set_ylim(0, 1)
        ax.set_title(setting, fontsize=9)
        ax.set_xlabel("compute C (FLOPs, log scale)")
        ax.set_ylabel("measured rho of the cell")
    handles = [_line("could be best at 95%", color="C0", marker="o", ls="none", ms=6),
               _line("measured, not in the set", marker="o", mfc="none", ls="none", ms=5),
               _line("best-mean cell", color="black", marker="*", ls="none", ms=7)]  # fmt: skip
    fig.legend(handles=handles, loc="outside right upper", fontsize=7)
    fig.suptitle(
        f"rho*(C): the cells that could be best for {TARGET_WORDS.get(target, target)} at each budget",
        fontsize=10,
    )
    return save_figure(fig, out_dir, f"rho_star_vs_budget_{target}")


def envelope_figure(
    curves: pd.DataFrame, size_star: pd.DataFrame, target: str, out_dir, sizes: Sequence[str] | None = None
) -> Path | None:
    """The compute-optimal envelope: per stage A policy size, its best cell's mean against C (a line),
    the envelope (the maximum over sizes, dashed) and, at each point, the sizes that could be best
    (size*(C), ringed and named)."""
    rows = ok(pairs(prepared(curves))).dropna(subset=[target])
    if rows.empty:
        return None
    from paper_repro.analysis.figures.style import colors

    plt, _sns = setup()
    order = list(sizes) if sizes is not None else size_order(rows["size"])
    palette = colors(order)  # one colour per policy size, as in every figure
    means = rows.groupby(["size", "point", "cell"])[target].mean()
    flops = rows.groupby("point")["point_flops"].mean()
    best = means.groupby(level=["size", "point"]).max()
    fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
    for size in order:
        if size not in best.index.get_level_values(0):
            continue
        line = best.loc[size]
        ax.plot(flops.reindex(line.index), line.to_numpy(), "o-", color=palette[size], ms=4, label=size)
    envelope = best.groupby(level="point").max()
    ax.plot(flops.reindex(envelope.index), envelope.to_numpy(), "--", color="black", lw=1.2)
    stars = size_star[size_star["target"] == target]
    for r in stars.itertuples():
        for size in str(r.best_sizes).split():
            if (size, r.point) in best.index:
                ax.plot(r.point_flops, best.loc[(size, r.point)], "o", mfc="none", mec=palette.get(size, "grey"),
                        ms=10, mew=1.4)  # fmt: skip
        if r.point in envelope.index:
            ax.annotate(str(r.best_sizes), (r.point_flops, envelope.loc[r.point]), textcoords="offset points",
                        xytext=(0, 8), ha="center", fontsize=7)  # fmt: skip
    ax.set_xscale("log")
    ax.margins(y=0.12)  # room for the size names above the envelope
    ax.set_xlabel("compute C (FLOPs, log scale)")
    ax.set_ylabel(f"{TARGET_WORDS.get(target, target)}\n(the size's best cell, mean over seeds)")
    handles = [
        _line(s, color=palette[s], marker="o", ms=4) for s in order if s in best.index.get_level_values(0)
    ]
    handles += [_line("envelope: the best over sizes and allocations", ls="--", color="black", lw=1.2),
                _line("ringed and named: the sizes that could be best (size*(C))", marker="o", mfc="none",
                      ls="none", ms=9)]  # fmt: skip
    ax.legend(handles=handles, title="policy", fontsize=7, title_fontsize=7, loc="center left",
              bbox_to_anchor=(1.02, 0.5))  # fmt: skip
    ax.set_title("The compute-optimal envelope\nover policy sizes and allocations (stage A)", fontsize=9)
    return save_figure(fig, out_dir, f"compute_optimal_envelope_{target}")


def curve_figures(
    analysis: CurveAnalysis,
    curves: pd.DataFrame,
    out_dir,
    *,
    shared=None,
    sizes: Sequence[str] | None = None,
    targets: Sequence[str] = ("native_reward",),
) -> list[Path]:
    """The three figures of each of ``targets`` from a curve analysis of ``curves``; a setting that is
    another's runs (``shared``: stage B's sparse) is drawn once, as that setting."""
    curves = prepared(curves)
    if curves.empty:
        return []
    shared = list(shared or {})
    distinct = curves[~curves["setting"].isin(shared)] if "setting" in curves else curves
    rho_star = analysis.rho_star
    drawn = rho_star[~rho_star["setting"].isin(shared)] if len(rho_star) else rho_star
    written = []
    for t in targets:
        for path in (curves_figure(distinct, analysis.fits, t, out_dir), rho_star_figure(drawn, t, out_dir),
                     envelope_figure(curves, analysis.size_star, t, out_dir, sizes)):  # fmt: skip
            if path is not None:
                written.append(path)
    return written
