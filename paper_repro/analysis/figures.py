"""Figures, one function per figure, named by what it shows. Each takes analysis tables (never raw
runs), draws with seaborn, writes PNG and PDF to ``out_dir`` and returns the figure."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from paper_repro.analysis.frontiers import TARGET_LABELS, TARGETS


def _save(fig, out_dir: str | Path, name: str):
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for ext in ("png", "pdf"):
        fig.savefig(out / f"{name}.{ext}", dpi=150, bbox_inches="tight", metadata=_metadata(ext))
    return fig


def _metadata(ext: str) -> dict:
    # fixed metadata so that a rebuild from the same tables gives the same files
    return {"Software": None} if ext == "png" else {"Creator": None, "Producer": None, "CreationDate": None}


def _setup():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper")
    return plt, sns


def target_vs_rho_by_setting(frontier: pd.DataFrame, stage: str, out_dir, x: str = "rho"):
    """Each target (panel) against realised rho (``x="rho"``) or time-based rho (``x="rho_time"``),
    one line per setting: mean over seeds with 95% CI bars, base policy as a dotted line."""
    plt, sns = _setup()
    stages = list(stage) if len(stage) > 1 else [stage]
    data = frontier[frontier["stage"].isin(stages)]
    fig, axes = plt.subplots(1, len(TARGETS), figsize=(4 * len(TARGETS), 3.4), sharex=True)
    palette = dict(
        zip(
            data["setting"].unique(), sns.color_palette("colorblind", data["setting"].nunique()), strict=False
        )
    )
    for ax, t in zip(axes, TARGETS, strict=True):
        for setting, g in data.groupby("setting", sort=False):
            g = g.sort_values(x)
            color = palette[setting]
            yerr = [g[t] - g[f"{t}_ci_low"], g[f"{t}_ci_high"] - g[t]]
            ax.errorbar(g[x], g[t], yerr=yerr, marker="o", ms=4, capsize=2, color=color, label=setting)
            ax.axhline(g[f"base_{t}"].iloc[0], color=color, ls=":", lw=1)
        ax.set_title(TARGET_LABELS[t])
        ax.set_xlabel(
            "time-based rho (wall seconds)" if x == "rho_time" else "realised rho = C_learning / C_total"
        )
    axes[0].set_ylabel("mean over seeds (95% CI); dotted: base")
    axes[-1].legend(title="setting", fontsize=8, loc="best")
    label = "".join(stages)
    fig.suptitle(f"Stage {label}: targets against the update fraction at equal FLOPs", y=1.02)
    suffix = "_time" if x == "rho_time" else ""
    return _save(fig, out_dir, f"targets_vs_rho{suffix}_stage_{label}")


def argmax_cell_by_target(disagreement: pd.DataFrame, out_dir):
    """A settings x targets grid holding the argmax cell: where the targets disagree."""
    plt, sns = _setup()
    cells = disagreement.set_index("setting")[[f"best_{t}" for t in TARGETS]]
    rho = disagreement.set_index("setting")[[f"rho_star_{t}" for t in TARGETS]].astype(float)
    fig, ax = plt.subplots(figsize=(6.5, 0.45 * len(cells) + 1.5))
    sns.heatmap(rho, annot=cells.to_numpy(), fmt="", cmap="viridis", vmin=0, vmax=1, ax=ax,
                cbar_kws={"label": "rho* (realised)"})  # fmt: skip
    ax.set_xticklabels([TARGET_LABELS[t] for t in TARGETS], rotation=20, ha="right")
    ax.set_ylabel("setting")
    ax.set_title("Best cell per target (colour: its realised rho)")
    return _save(fig, out_dir, "argmax_cell_by_target")


def race_pilot_vs_full_rho_star(race: pd.DataFrame, out_dir):
    """Each setting's rho* from the pilot grid against the full grid's, with the regime threshold."""
    plt, sns = _setup()
    fig, ax = plt.subplots(figsize=(4.5, 4.2))
    sns.scatterplot(data=race, x="full_rho_star", y="pilot_rho_star", hue="setting", style="same_regime",
                    s=70, ax=ax)  # fmt: skip
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--")
    if len(race):
        thr = race["rho_threshold"].iloc[0]
        ax.axvline(thr, color="grey", lw=0.8, ls=":")
        ax.axhline(thr, color="grey", lw=0.8, ls=":")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("rho* of the full grid")
    ax.set_ylabel("rho* of the RACE pilot grid")
    ax.set_title("RACE: pilot vs full-grid optimum")
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, out_dir, "race_pilot_vs_full_rho_star")
