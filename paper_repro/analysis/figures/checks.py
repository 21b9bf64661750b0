"""The figures of the checks beside the decisions, one function per figure: RACE's pilots against
the full grid (:func:`race_pilot_vs_full_rho_star`), rho* under each FLOP convention
(:func:`rho_star_by_convention`) and reward hacking (:func:`reward_change_vs_outcomes`). Each is
declared with its tables and its one-line reading (:mod:`paper_repro.analysis.figures.registry`),
takes analysis tables (never raw runs), writes PNG and PDF to ``out_dir`` and returns the figure; as
:mod:`paper_repro.analysis.figures.final`'s, every mark is named in its legend and a figure with
nothing to draw is not written (:func:`~paper_repro.analysis.figures.style.skip`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.paper import PAPER_RHO  # the paper's reported optima (reference lines)
from paper_repro.analysis.figures.registry import register_figure
from paper_repro.analysis.figures.style import (
    PILOT_MARKERS,
    colors,
    convention_styles,
    paper_label,
    save_open,
    setup,
    skip,
)
from paper_repro.analysis.figures.style import legend_line as _line
from paper_repro.analysis.wording import fraction_words


def _shared_once(race: pd.DataFrame) -> pd.DataFrame:
    """``race`` with a ``label`` per row, a setting that reuses another's runs (``same_runs_as``: stage
    B's sparse is stage A's M) drawn once: where its points are the other's, its rows are dropped and
    the other's label names both ("M = sparse")."""
    data = race.assign(label=race["setting"].astype(str))
    if "same_runs_as" not in data:
        return data
    keys = [c for c in ("pilot_fraction", "pilot_rho_star", "full_rho_star", "pilot_moved") if c in data]
    shared = data.loc[
        data["same_runs_as"].astype(object).fillna("").astype(str) != "", ["setting", "same_runs_as"]
    ]
    for setting, original in shared.drop_duplicates().itertuples(index=False):
        mine = data[data["setting"] == setting].sort_values("pilot_fraction")
        theirs = data[data["setting"] == original].sort_values("pilot_fraction")
        same = len(mine) == len(theirs) and all(
            np.allclose(mine[c].to_numpy(float), theirs[c].to_numpy(float), equal_nan=True) for c in keys
        )
        if same:
            data = data.drop(index=mine.index)
            data.loc[theirs.index, "label"] = data.loc[theirs.index, "label"] + f" = {setting}"
    return data


MARKERS = PILOT_MARKERS  # one per pilot budget (the style's)


def _race_reading(tables) -> str:
    """Per pilot budget, in how many distinct settings the pilots moved and named the full grid's regime."""
    race, parts = tables["race"], []
    for fraction, rows in race[race["same_runs_as"].fillna("") == ""].groupby("pilot_fraction", sort=False):
        moved = rows[rows["pilot_moved"].astype(bool)]
        head = (
            f"at {fraction_words(fraction)} of the budget the pilots moved off the base policy in "
            f"{len(moved)} of {len(rows)} distinct settings"
        )
        if "same_best_regime" in rows:  # the paper's definition: the best cell's side, every setting
            same = rows["same_best_regime"] == True  # noqa: E712 (NaN in an older table)
            parts.append(
                f"{head}; their best cell lies on the full grid's best cell's side of the regime "
                f"threshold (the paper's same regime) in {int(same.sum())} of {len(rows)} "
                f"({int(same[moved.index].sum())} of the {len(moved)} that moved)"
            )
        else:  # an older race.csv: the regime named by the best sets, where the pilots moved
            parts.append(
                f"{head}, and name the full grid's regime in "
                f"{int((moved['same_regime'] == True).sum())} of those"  # noqa: E712 (NaN where uninformative)
            )
    return "RACE: " + "; ".join(parts) + "."


@register_figure(
    "race_pilot_vs_full_rho_star",
    "per setting and pilot budget, the realised rho of the pilots' best cell against the full grid's",
    reads={"race": "race"},
    reading=_race_reading,
)
def race_pilot_vs_full_rho_star(race: pd.DataFrame, out_dir):
    """Per setting (colour) and pilot budget (marker), the realised rho of the pilot grid's best-mean
    cell (RACE's pick) against the full grid's; hollow where the pilots did not move off the base
    policy (uninformative). Settings that are one experiment asked for twice are drawn once
    (:func:`_shared_once`). The dotted lines: the regime threshold in realised rho."""
    plt, _sns = setup()
    data = _shared_once(race)
    labels = list(dict.fromkeys(data["label"]))
    by_setting = colors(data["setting"])  # a label is named by its setting ("M = sparse": M's colour)
    tint = {label: by_setting[str(s)] for label, s in zip(data["label"], data["setting"], strict=True)}
    fractions = list(dict.fromkeys(data["pilot_fraction"]))
    shapes = {f: MARKERS[i % len(MARKERS)] for i, f in enumerate(fractions)}
    moved = (
        data["pilot_moved"].fillna(False).astype(bool)
        if "pilot_moved" in data
        else pd.Series(True, data.index)
    )
    fig, ax = plt.subplots(figsize=(4.5, 4.2))
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--", zorder=0)
    thr = float(race["rho_threshold"].iloc[0]) if len(race) and "rho_threshold" in race else None
    if thr is not None:
        ax.axvline(thr, color="0.3", lw=1, ls=":", zorder=1)
        ax.axhline(thr, color="0.3", lw=1, ls=":", zorder=1)
    for (label, fraction, has_moved), g in data.groupby(["label", "pilot_fraction", moved], sort=False):
        color = tint[label]
        ax.scatter(
            g["full_rho_star"],
            g["pilot_rho_star"],
            s=55,
            marker=shapes[fraction],
            linewidths=1.4,
            facecolors=color if has_moved else "none",
            edgecolors=color,
            alpha=0.9,
            zorder=3,
        )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("full grid: realised rho of its best-mean cell")
    ax.set_ylabel("pilot grid: realised rho of its best-mean cell (RACE's pick)")
    ax.set_title("RACE: the pilots' best cell against the full grid's", fontsize=9)
    handles = [_line(label, color=tint[label], marker="o", ls="none", ms=6) for label in labels]
    handles += [
        _line(f"pilots at {fraction_words(f)} of the budget", marker=shapes[f], ls="none", ms=6)
        for f in fractions
    ]
    if "pilot_moved" in data:
        handles += [
            _line("filled: the pilots moved off the base policy", marker="o", ls="none", ms=6),
            _line("hollow: they did not (uninformative)", marker="o", ls="none", ms=6, mfc="none"),
        ]
    handles.append(_line("pilot = full", ls="--", lw=1))
    if thr is not None:
        handles.append(
            _line(
                f"regime threshold rho = {thr:g}: best cells all at or above\n"
                "are update-heavy, all below search-heavy",
                ls=":",
                lw=1,
                color="0.3",
            )
        )
    ax.legend(
        handles=handles,
        title="setting (=: the same runs)",
        fontsize=7,
        title_fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        borderaxespad=0,
    )
    return save_open(fig, out_dir, "race_pilot_vs_full_rho_star")


IDENTIFIED = ("interior", "boundary")
NOTHING_IDENTIFIED = "no group's rho* is identified under any FLOP convention: nothing to draw"


def _convention_reading(tables) -> str:
    conventions = tables["conventions"]
    useful = conventions[conventions["convention"] == "useful"].set_index("group")["status"]
    identified = int(useful.isin(IDENTIFIED).sum())
    return (
        f"Under the useful convention rho* is identified for {identified} of {len(useful)} groups; the "
        "other conventions move each estimate by the shift shown."
    )


@register_figure(
    "rho_star_by_convention",
    "rho* of the native reward per group under each FLOP convention, with its 95% interval",
    reads={"conventions": "conventions"},
    reading=_convention_reading,
)
def rho_star_by_convention(conventions: pd.DataFrame, out_dir, skipped: dict | None = None):
    """rho* of the native reward per setting (and pooled class) under each FLOP convention (a grey, a
    marker and a line style each, :func:`~paper_repro.analysis.figures.style.convention_styles`), with
    its 95% interval clipped to [0, 1]: a row per group with rho* identified under some convention
    ("n.i." on the right for a convention it is not identified under); the groups with none are named
    under the plot. Nothing identified anywhere: no figure (:func:`~paper_repro.analysis.figures.style.skip`;
    returns None)."""
    name = "rho_star_by_convention"
    found = conventions["status"].astype(str).isin(IDENTIFIED)
    if not found.any():
        return skip(out_dir, name, NOTHING_IDENTIFIED, skipped)
    plt, _sns = setup()
    every = list(dict.fromkeys(conventions["group"].astype(str)))
    groups = list(dict.fromkeys(conventions.loc[found, "group"].astype(str)))
    none = [g for g in every if g not in groups]
    kinds = list(dict.fromkeys(conventions["convention"].astype(str)))
    styles = convention_styles(kinds)
    fig, ax = plt.subplots(figsize=(8.5, 0.6 * len(groups) + 1.6), layout="constrained")
    for i, group in enumerate(groups):
        for j, kind in enumerate(kinds):
            r = conventions[
                (conventions["group"].astype(str) == group) & (conventions["convention"].astype(str) == kind)
            ]
            if r.empty:
                continue
            r, style = r.iloc[0], styles[kind]
            y = i + (j - (len(kinds) - 1) / 2) * 0.17
            if r["status"] in IDENTIFIED:
                lo, hi = np.clip([r["ci95_low"], r["ci95_high"]], 0, 1)
                ax.plot([lo, hi], [y, y], color=style["color"], ls=style["ls"], lw=1.3)
                ax.plot([r["rho_star"]], [y], marker=style["marker"], color=style["color"], ms=5, ls="none")
            else:
                ax.text(
                    1.01,
                    y,
                    f"{kind}: n.i.",
                    color=style["color"],
                    fontsize=6,
                    va="center",
                    transform=ax.get_yaxis_transform(),
                )
    for value in PAPER_RHO.values():
        ax.axvline(value, color="grey", lw=0.8, ls="--", zorder=0)
    for i in range(len(groups) - 1):  # a line between groups, none through them
        ax.axhline(i + 0.5, color="0.85", lw=0.8, zorder=0)
    ax.set_yticks(range(len(groups)), groups)
    ax.grid(axis="y", visible=False)
    ax.set_ylim(len(groups) - 0.5, -0.5)
    ax.set_xlim(0, 1)
    missing = f"\nnot identified under any convention, not drawn: {', '.join(none)}" if none else ""
    ax.set_xlabel(
        f"rho* of the native reward under each convention (95% interval; n.i.: not identified){missing}"
    )
    ax.set_title("Does rho* depend on how compute is counted?")
    handles = [
        _line(k, color=s["color"], marker=s["marker"], ls=s["ls"], ms=5, lw=1.3) for k, s in styles.items()
    ]
    handles.append(_line(paper_label(), ls="--", lw=0.8))
    fig.legend(
        handles=handles,
        title="convention: rho* and its 95% interval",
        fontsize=7,
        title_fontsize=7,
        loc="outside right center",
    )
    return save_open(fig, out_dir, name)


def _hacking_reading(tables) -> str:
    summary = tables["reward_hacking_summary"]
    parts = [
        f"{r['reward_system']} {int(r['gaming_runs'])} of {int(r['classed'])}" for _, r in summary.iterrows()
    ]
    return "Runs that game their reward, per reward system: " + ", ".join(parts) + "." if parts else ""


@register_figure(
    "reward_change_vs_outcomes",
    "per run, the change in its training reward against the changes in gsm pass@1 and the judge's score",
    reads={"hacking": "reward_hacking"},
    reading=_hacking_reading,
)
def reward_change_vs_outcomes(hacking: pd.DataFrame, out_dir):
    """Reward hacking: per run, the change from base in the reward it was trained on (x) against the
    change in gsm pass@1 and in the judge's score (panels), coloured by reward system; runs that
    game their reward (reward up, both others down) ringed in black. The lower-right quadrant of
    both panels is where a reward is being gamed."""
    plt, sns = setup()
    systems = list(hacking["reward_system"].unique())
    palette = colors(systems)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), sharex=True)
    for ax, (column, label) in zip(
        axes, (("d_gsm_pass1", "change in gsm pass@1"), ("d_judge", "change in judge score")), strict=True
    ):
        sns.scatterplot(
            data=hacking,
            x="d_reward",
            y=column,
            hue="reward_system",
            palette=palette,
            ax=ax,
            s=22,
            alpha=0.8,
            legend=ax is axes[-1],
        )
        gaming = hacking[hacking["games"].fillna(False).astype(bool)]
        ax.scatter(gaming["d_reward"], gaming[column], s=70, facecolors="none", edgecolors="black", lw=0.8)
        ax.axhline(0, color="grey", lw=0.8)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_xlabel("change in training (native) reward from base")
        ax.set_ylabel(label)
    axes[-1].legend(title="reward system", fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle(
        f"Reward hacking: {int(hacking['games'].fillna(False).sum())} of {len(hacking)} runs game "
        "their reward (ringed: reward up, pass@1 and judge down)",
        fontsize=9,
    )
    return save_open(fig, out_dir, "reward_change_vs_outcomes")
