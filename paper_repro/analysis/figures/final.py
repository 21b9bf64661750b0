"""The final analysis' figures of the decisions and the frontiers, one function per figure, named by what it
shows, each declared with its tables and its one-line reading (:mod:`paper_repro.analysis.figures.registry`;
the checks' figures are :mod:`paper_repro.analysis.figures.checks`'). Each takes analysis tables (never raw
runs), draws with seaborn, writes PNG and PDF to ``out_dir`` and returns the figure. A figure of
several panels puts at most :data:`PANELS_PER_ROW` in a row, and every line and marker it draws is
named in its legend; marks that are not data (the cells that could be best, rho*: descriptions) sit
in a strip of their own under each panel, never among the points. The decisions, the regime
contrasts, have a figure of their own (:func:`regime_contrasts`). A figure with nothing to draw is not
written (:func:`~paper_repro.analysis.figures.style.skip`: a stale file of its name is removed and the
reason logged and returned). What they share with the notebooks' figures (every colour and marker
among it) is in :mod:`paper_repro.analysis.figures.style`."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.paper import PAPER_RHO  # the paper's reported optima (reference lines)
from paper_repro.analysis.claims.regimes import FAMILY as REGIMES  # the regime contrasts' ids begin so
from paper_repro.analysis.figures.registry import register_figure
from paper_repro.analysis.figures.style import (
    RHO_LABEL,
    VERDICT_COLOURS,
    colors,
    error_bars,
    panel_grid,
    paper_label,
    rho_colormap,
    save_open,
    setup,
    size_markers,
    skip,
)
from paper_repro.analysis.figures.style import legend_line as _line
from paper_repro.analysis.stats.verdict import VERDICTS
from paper_repro.analysis.tables.frontiers import TARGETS
from paper_repro.analysis.wording import finite, num
from paper_repro.common.results import TARGET_LABELS

TARGET = "native_reward"  # the target the readings speak of


RHO_TIME_LABEL = "time-based rho (wall seconds)"


def _no_contrast(rows: pd.DataFrame) -> str:
    """Why none of the regime claims ``rows`` has a contrast (their notes, once each: a claim that is not
    computable says why), or "" when some has one."""
    if rows["our_value"].map(finite).any():
        return ""
    notes = rows["note"].dropna().astype(str) if "note" in rows else pd.Series(dtype=str)
    reasons = list(dict.fromkeys(n.removeprefix("not computable: ") for n in notes if n))
    return f"no contrast can be computed: {'; '.join(reasons) or 'no claim has an estimate'}"


def _contrast_reading(tables) -> str:
    """How many of the regime claims (both levels) held, were not held and stayed open; why there is no
    contrast, where none has one."""
    claims = tables["claims"]
    rows = claims[claims["id"].astype(str).str.startswith(REGIMES)]
    if rows.empty:
        return "No regime claim in the claims table: nothing to draw."
    none = _no_contrast(rows)
    if none:
        return f"The paper's optima asked as contrasts: {none}."
    counts = rows["verdict"].value_counts()
    said = ", ".join(f"{int(counts[v])} {v}" for v in VERDICTS if v in counts)
    return (
        f"The paper's optima asked as contrasts, each with its 90% interval against 0 and the margin: {said} "
        f"of {len(rows)}."
    )


@register_figure(
    "regime_contrasts",
    "the decisions: each regime claim's contrast with its 90% interval, coloured by its verdict",
    reads={"claims": "claims"},
    reading=_contrast_reading,
)
def regime_contrasts(claims: pd.DataFrame, out_dir, margin: float, skipped: dict | None = None):
    """The decisions: each regime claim (``claims.csv``'s ``regime.*`` rows, both levels) as its
    contrast (the update-heavy window's cells minus the search-heavy window's, native reward, signed
    so that the paper's direction is positive) with its 90% interval, coloured by its verdict; 0 and
    the margin (``margins.regime``: "not held" when the interval lies below it) as reference lines.
    No regime claim in ``claims``: no figure (:func:`~paper_repro.analysis.figures.style.skip`; returns
    None); regime claims without a contrast (NaN: not computable): the figure says so on its axes, with
    their notes' reason."""
    rows = claims[claims["id"].astype(str).str.startswith(REGIMES)].iloc[::-1]
    if rows.empty:
        return skip(out_dir, "regime_contrasts", "no regime claim in the claims table", skipped)
    plt, _sns = setup()
    fig, ax = plt.subplots(figsize=(8.5, 0.45 * len(rows) + 1.6), layout="constrained")
    none = _no_contrast(rows)
    for k, (_, r) in enumerate(rows.iterrows()):
        color = VERDICT_COLOURS.get(r["verdict"], "black")
        if np.isfinite(r["ci_low"]) and np.isfinite(r["ci_high"]):
            ax.plot([r["ci_low"], r["ci_high"]], [k, k], color=color, lw=2.5, solid_capstyle="butt")
        ax.plot([r["our_value"]], [k], marker="o", color=color, ls="none")
        if not none and not finite(r["our_value"]):  # one row without a contrast says so on its line
            ax.text(0.0, k, " no estimate", fontsize=7, color="grey", va="center")
    if none:  # empty axes would read as a figure that failed: say why nothing is drawn
        box = {"facecolor": "white", "edgecolor": "grey", "boxstyle": "round"}
        ax.text(
            0.5,
            0.5,
            textwrap.fill(none, 70),
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=8,
            bbox=box,
        )
        ax.set_xlim(-2 * margin, 2 * margin)
    ax.axvline(0.0, color="black", lw=0.8)
    ax.axvline(margin, color="grey", lw=0.8, ls="--")
    labels = [
        f"{str(r['claim']).split(':')[0]} [{str(r['id']).rsplit('.', 1)[-1]}]" for _, r in rows.iterrows()
    ]
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.set_xlabel("update-heavy window minus search-heavy window, native reward (paper's direction positive)")
    marks = [
        _line(f"{v}: 90% interval", color=c, lw=2.5)
        for v, c in VERDICT_COLOURS.items()
        if v in set(rows["verdict"]) and not none
    ]
    marks += [
        _line("0: no advantage", color="black", lw=0.8),
        _line(f"margin {margin:g}: not held when the interval lies below it", ls="--", lw=0.8),
    ]
    fig.legend(handles=marks, loc="outside lower center", ncol=2, fontsize=7, frameon=False)
    fig.suptitle(
        "The paper's optima as contrasts: [any] any recipe at each rho, [these] the cells as run", fontsize=9
    )
    return save_open(fig, out_dir, "regime_contrasts")


STAGES = {"A": ("A",), "BD": ("B", "D")}  # a figure per group of stages: the policy sizes, the reward systems


def _optimum_phrase(row: pd.Series) -> str:
    if row["status"] in ("interior", "boundary") and finite(row["rho_star"]):
        interval = ""
        if finite(row["ci95_low"]) and finite(row["ci95_high"]):
            interval = f", 95% interval {num(row['ci95_low'], 2)} to {num(row['ci95_high'], 2)}"
        return f"{row['setting']} rho* {num(row['rho_star'], 2)} ({row['status']}{interval}; could be best: {row['best_cells']})"
    return f"{row['setting']} not identified ({row['reason']})"


def _targets_reading(tables, stage: str, x: str) -> str:
    """The native reward's unimodal optimum per distinct setting of ``stage`` (``x="rho"``), or how
    much larger the update's time share is than its FLOP share (``x="rho_time"``)."""
    optima, names = tables["optima"], STAGES[stage]
    native = optima[(optima["target"] == TARGET) & (optima["same_runs_as"].fillna("") == "")]
    rows = native[native["stage"].isin(names)]
    if rows.empty:
        return f"No distinct setting of stage {' or '.join(names)} has a native-reward frontier: nothing to read."
    if x == "rho":
        return f"Native reward's unimodal optimum per setting: {'; '.join(_optimum_phrase(r) for _, r in rows.iterrows())}."
    f = tables["frontiers"][tables["frontiers"]["stage"].isin(names)]
    ratio = (f["rho_time"] / f["rho"]).median() if len(f) else float("nan")
    return (
        f"The same frontiers against rho counted in wall time: per cell, the time share of the update "
        f"is {num(ratio, 2)} times its FLOP share (median over cells)."
    )


@register_figure(
    "targets_vs_rho",
    "per stage, each target against realised rho (and against time-based rho), a line per setting",
    reads={"frontier": "frontiers", "optima": "optima"},
    reading=_targets_reading,
    variants={
        f"targets_vs_rho{'_time' if x == 'rho_time' else ''}_stage_{stage}": {"stage": stage, "x": x}
        for stage in STAGES
        for x in ("rho", "rho_time")
    },
)
def target_vs_rho_by_setting(
    frontier: pd.DataFrame,
    stage: str,
    out_dir,
    x: str = "rho",
    optima: pd.DataFrame | None = None,
    order: list[str] | None = None,
    skipped: dict | None = None,
):
    """Each target (a panel; two in a row) against realised rho (``x="rho"``) or time-based rho
    (``x="rho_time"``), one line per setting (in ``order``: the profile's, sizes smallest first):
    mean over seeds with 95% CI bars (a proportion's clipped to [0, 1]), the base policy dotted, the
    paper's rho* as grey dashed lines (``x="rho"``). With ``optima`` (and ``x="rho"``), a strip under
    each panel holds per setting the rho span of its cells that could be best at 95% (a bar) and its
    unimodal rho* where identified (a diamond: filled inside the grid, open at its edge). No row of
    ``stage`` in ``frontier``: no figure (:func:`~paper_repro.analysis.figures.style.skip`; returns
    None)."""
    stages = list(stage) if len(stage) > 1 else [stage]
    data = frontier[frontier["stage"].isin(stages)]
    label = "".join(stages)
    suffix = "_time" if x == "rho_time" else ""
    if data.empty:
        reason = f"no stage {' or '.join(stage)} row in the frontier"
        return skip(out_dir, f"targets_vs_rho{suffix}_stage_{label}", reason, skipped)
    plt, _sns = setup()
    names = [s for s in (order or []) if s in set(data["setting"])] or list(data["setting"].unique())
    palette, shapes = colors(names), size_markers(names)
    strip = optima is not None and x == "rho"
    nrows, ncols = panel_grid(len(TARGETS))
    panel_h, strip_h = 2.7, (0.17 * len(names) + 0.25 if strip else 0.0)
    fig = plt.figure(
        figsize=(4.4 * ncols + 1.6, nrows * (panel_h + strip_h + 0.5) + 1.0), layout="constrained"
    )
    outer = fig.add_gridspec(nrows, ncols)
    for i, t in enumerate(TARGETS):
        slot = outer[i // ncols, i % ncols]
        if strip:
            inner = slot.subgridspec(2, 1, height_ratios=[panel_h, strip_h])
            ax = fig.add_subplot(inner[0])
            bottom = fig.add_subplot(inner[1], sharex=ax)
            _best_strip(bottom, optima, data, names, t, palette)
            ax.tick_params(labelbottom=False)
        else:
            ax = bottom = fig.add_subplot(slot)
        for setting in names:
            g = data[data["setting"] == setting].sort_values(x)
            color = palette[setting]
            ax.errorbar(
                g[x],
                g[t],
                yerr=error_bars(g, t),
                marker=shapes[setting],
                ms=4,
                capsize=2,
                color=color,
                label=setting,
            )
            ax.axhline(g[f"base_{t}"].iloc[0], color=color, ls=":", lw=1)
        if x == "rho":
            for value in PAPER_RHO.values():
                ax.axvline(value, color="grey", lw=0.8, ls="--", zorder=0)
        ax.set_title(TARGET_LABELS[t])
        ax.set_xlim(0, 1)
        if i % ncols == 0:
            ax.set_ylabel("mean over seeds (95% CI)")
        if i + ncols >= len(TARGETS):  # nothing under it: the x label goes here
            bottom.set_xlabel(RHO_TIME_LABEL if x == "rho_time" else RHO_LABEL)
    settings = [_line(s, color=palette[s], marker=shapes[s], ms=4) for s in names]
    fig.legend(handles=settings, title="setting", loc="outside right upper", fontsize=8)
    marks = [
        _line("base policy (dotted, in the setting's colour)", ls=":", lw=1),
        _line("error bars: 95% interval over seeds", marker="|", ms=8, ls="none"),
    ]
    if x == "rho":
        marks.append(_line(paper_label(), ls="--", lw=0.8))
    if strip:
        marks += [
            _line(
                "strip under each panel, a description: the setting's cells that could be best at 95% (ticks,\n"
                "at their realised rho) and their span (bar); the decisions: regime_contrasts",
                lw=4,
                alpha=0.35,
                solid_capstyle="butt",
                marker="|",
                ms=7,
                mew=1.5,
                mec="grey",
            ),
            _line("unimodal rho* inside the grid (interior)", marker="D", ms=4.5, ls="none"),
            _line("unimodal rho* at the grid's edge (boundary)", marker="D", ms=4.5, ls="none", mfc="white"),
        ]
    fig.legend(handles=marks, loc="outside lower center", ncol=2, fontsize=7, frameon=False)
    which = "time-based rho (wall seconds)" if x == "rho_time" else "realised rho in FLOPs"
    fig.suptitle(f"Stage {label}: each target against {which}, at equal FLOPs", fontsize=10)
    return save_open(fig, out_dir, f"targets_vs_rho{suffix}_stage_{label}")


def _best_strip(
    ax, optima: pd.DataFrame, data: pd.DataFrame, names: list[str], target: str, palette: dict
) -> None:
    """A strip under a panel, one row per setting: the cells of (setting, target) that could be best at
    95% (a description of which cells could be best, not the decision; a tick at each one's realised
    rho in ``data``, a bar over their span), and the unimodal rho* where it is identified (filled
    diamond: interior; open: boundary)."""
    for k, setting in enumerate(names):
        row = optima[(optima["setting"] == setting) & (optima["target"] == target)]
        if row.empty:
            continue
        r, color = row.iloc[0], palette[setting]
        ax.plot([r["best_low"], r["best_high"]], [k, k], color=color, lw=4, alpha=0.35, solid_capstyle="butt")
        mine = data[data["setting"] == setting]
        best = mine[mine["cell"].astype(str).isin(str(r["best_cells"]).split())]
        ax.plot(best["rho"], [k] * len(best), ls="none", marker="|", ms=7, mew=1.5, color=color)
        if r["status"] in ("interior", "boundary"):
            face = color if r["status"] == "interior" else "white"
            ax.plot([r["rho_star"]], [k], marker="D", ms=4.5, color=color, mfc=face, ls="none")
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_yticks(range(len(names)), names, fontsize=6)
    ax.grid(axis="y", visible=False)
    ax.tick_params(axis="y", length=0, pad=1)


def _disagreement_reading(tables) -> str:
    table = tables["disagreement"]
    return (
        f"The four targets' best cells differ in {int(table['targets_disagree'].sum())} of {len(table)} "
        "settings (the claims table tests whether that is more than seed noise)."
    )


@register_figure(
    "argmax_cell_by_target",
    "per setting and target, the best-mean cell and its realised rho",
    reads={"disagreement": "disagreement"},
    reading=_disagreement_reading,
)
def argmax_cell_by_target(disagreement: pd.DataFrame, out_dir):
    """A settings x targets grid: the cell with the best mean for each target (its label) and that
    cell's realised rho (the colour): where the targets disagree."""
    plt, sns = setup()
    cells = disagreement.set_index("setting")[[f"best_{t}" for t in TARGETS]]
    rho = disagreement.set_index("setting")[[f"rho_star_{t}" for t in TARGETS]].astype(float)
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(cells) + 1.5))
    sns.heatmap(
        rho,
        annot=cells.to_numpy(),
        fmt="",
        cmap=rho_colormap(),
        vmin=0,
        vmax=1,
        ax=ax,
        cbar_kws={"label": "realised rho of the best-mean cell"},
    )
    ax.set_xticklabels([TARGET_LABELS[t] for t in TARGETS], rotation=20, ha="right")
    ax.set_ylabel("setting")
    ax.set_title("Cell with the best mean per target (label) and its realised rho (colour)", fontsize=9)
    return save_open(fig, out_dir, "argmax_cell_by_target")
