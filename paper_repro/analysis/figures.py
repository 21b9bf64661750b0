"""Figures, one function per figure, named by what it shows. Each takes analysis tables (never raw
runs), draws with seaborn, writes PNG and PDF to ``out_dir`` and returns the figure.
:func:`preview_png` makes the small copy of a saved PNG that a notebook embeds."""

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


PAPER_RHO = {"rule-based": 0.72, "PRM-style": 0.445}  # the paper's reported optima (reference lines)
PROPORTIONS = ("gsm_pass1", "math_pass1")  # targets that are shares: their intervals stay in [0, 1]


def target_vs_rho_by_setting(
    frontier: pd.DataFrame, stage: str, out_dir, x: str = "rho", optima: pd.DataFrame | None = None,
    order: list[str] | None = None,
):  # fmt: skip
    """Each target (panel) against realised rho (``x="rho"``) or time-based rho (``x="rho_time"``),
    one line per setting (in ``order``: the profile's, sizes smallest first): mean over seeds with
    95% CI bars (a proportion's clipped to [0, 1]), the base policy dotted. With ``optima`` (and
    ``x="rho"``), each setting's cells that could be best (their rho span, a bar along the panel's
    top) and its unimodal rho* (a point, where identified); the paper's rho* as grey reference lines."""

    plt, sns = _setup()
    stages = list(stage) if len(stage) > 1 else [stage]
    data = frontier[frontier["stage"].isin(stages)]
    names = [s for s in (order or []) if s in set(data["setting"])] or list(data["setting"].unique())
    fig, axes = plt.subplots(1, len(TARGETS), figsize=(4 * len(TARGETS), 3.6), sharex=True)
    palette = dict(zip(names, sns.color_palette("colorblind", len(names)), strict=False))
    for ax, t in zip(axes, TARGETS, strict=True):
        for k, setting in enumerate(names):
            g = data[data["setting"] == setting].sort_values(x)
            color = palette[setting]
            low, high = g[f"{t}_ci_low"], g[f"{t}_ci_high"]
            if t in PROPORTIONS:
                low, high = low.clip(0, 1), high.clip(0, 1)
            yerr = [(g[t] - low).clip(lower=0), (high - g[t]).clip(lower=0)]
            ax.errorbar(g[x], g[t], yerr=yerr, marker="o", ms=4, capsize=2, color=color, label=setting)
            ax.axhline(g[f"base_{t}"].iloc[0], color=color, ls=":", lw=1)
            if optima is not None and x == "rho":
                _mark_rho_star(ax, optima, setting, t, color, k, len(names))
        if x == "rho":
            for value in PAPER_RHO.values():
                ax.axvline(value, color="grey", lw=0.8, ls="--")
        ax.set_title(TARGET_LABELS[t])
        ax.set_xlabel(
            "time-based rho (wall seconds)"
            if x == "rho_time"
            else "realised rho (FLOPs) = C_learning / C_total"
        )
        ax.set_xlim(0, 1)
    axes[0].set_ylabel("mean over seeds (95% CI); dotted: base")
    fig.legend(*axes[0].get_legend_handles_labels(), title="setting", loc="center left",
               bbox_to_anchor=(1.0, 0.5), fontsize=8)  # fmt: skip
    label = "".join(stages)
    which = "time-based rho (wall seconds)" if x == "rho_time" else "realised rho in FLOPs"
    marks = (
        "; top bars: the cells that could be best (95%), points: unimodal rho*; dashed: the paper's 0.445 and 0.72"
        if x == "rho" and optima is not None
        else ""
    )
    fig.suptitle(f"Stage {label}: targets against {which} at equal FLOPs{marks}", y=1.04, fontsize=9)
    fig.tight_layout()
    suffix = "_time" if x == "rho_time" else ""
    return _save(fig, out_dir, f"targets_vs_rho{suffix}_stage_{label}")


def _mark_rho_star(ax, optima: pd.DataFrame, setting: str, target: str, color, k: int, n: int) -> None:
    """Along the top of ``ax``: the rho span of the cells of (setting, target) that could be best at
    95% (the decision), with the unimodal rho* as a point where it is identified."""
    row = optima[(optima["setting"] == setting) & (optima["target"] == target)]
    if row.empty:
        return
    r = row.iloc[0]
    y = 1.0 - 0.05 * (k + 1)  # axes fraction: one row per setting under the title
    trans = ax.get_xaxis_transform()
    ax.plot([r["best_low"], r["best_high"]], [y, y], color=color, lw=3, alpha=0.6, transform=trans,
            clip_on=False, solid_capstyle="butt")  # fmt: skip
    if r["status"] in ("interior", "boundary"):
        ax.plot([r["rho_star"]], [y], marker="D" if r["status"] == "interior" else ">", color=color, ms=4,
                transform=trans, clip_on=False)  # fmt: skip


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
    """Each setting's rho* from the pilot grid (marker: the pilot budget) against the full grid's,
    with the regime threshold."""
    plt, sns = _setup()
    from paper_repro.analysis.claims import fraction_words

    fig, ax = plt.subplots(figsize=(4.5, 4.2))
    data = race.assign(pilot_budget=race["pilot_fraction"].map(fraction_words))
    sns.scatterplot(data=data, x="full_rho_star", y="pilot_rho_star", hue="setting", style="pilot_budget",
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
    ax.set_title("RACE: pilot vs full-grid best cell (realised rho in FLOPs)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    return _save(fig, out_dir, "race_pilot_vs_full_rho_star")


def rho_star_by_convention(conventions: pd.DataFrame, out_dir):
    """rho* of the native reward per setting (and pooled class) under each FLOP convention, with its
    95% interval clipped to [0, 1]; not identified ones are listed on the right."""
    import numpy as np

    plt, sns = _setup()
    groups = list(conventions["group"].unique())
    kinds = list(conventions["convention"].unique())
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(groups) + 1.5))
    palette = dict(zip(kinds, sns.color_palette("colorblind", len(kinds)), strict=False))
    for i, group in enumerate(groups):
        for j, kind in enumerate(kinds):
            r = conventions[(conventions["group"] == group) & (conventions["convention"] == kind)]
            if r.empty:
                continue
            r = r.iloc[0]
            y = i + (j - (len(kinds) - 1) / 2) * 0.15
            if r["status"] in ("interior", "boundary"):
                lo, hi = np.clip([r["ci95_low"], r["ci95_high"]], 0, 1)
                ax.plot([lo, hi], [y, y], color=palette[kind], lw=1.2)
                ax.plot([r["rho_star"]], [y], "o", color=palette[kind], ms=4, label=kind if i == 0 else None)
            else:
                ax.text(1.02, y, f"{kind}: n.i.", color=palette[kind], fontsize=6, va="center")
    for value in (0.445, 0.72):
        ax.axvline(value, color="grey", lw=0.8, ls="--")
    ax.set_yticks(range(len(groups)), groups)
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel(
        "rho* of the native reward under each convention's rho (95% interval; n.i.: not identified)"
    )
    ax.set_title("Does rho* depend on how compute is counted?")
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, labels, title="convention", fontsize=7, loc="center left", bbox_to_anchor=(1.15, 0.5))
    return _save(fig, out_dir, "rho_star_by_convention")


def reward_change_vs_outcomes(hacking: pd.DataFrame, out_dir):
    """Reward hacking: per run, the change from base in the reward it was trained on (x) against the
    change in gsm pass@1 and in the judge's score (panels), coloured by reward system; runs that
    game their reward (reward up, both others down) ringed in black. The lower-right quadrant of
    both panels is where a reward is being gamed."""
    plt, sns = _setup()
    systems = list(hacking["reward_system"].unique())
    palette = dict(zip(systems, sns.color_palette("colorblind", len(systems)), strict=False))
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), sharex=True)
    for ax, (column, label) in zip(
        axes, (("d_gsm_pass1", "change in gsm pass@1"), ("d_judge", "change in judge score")), strict=True
    ):
        sns.scatterplot(data=hacking, x="d_reward", y=column, hue="reward_system", palette=palette, ax=ax,
                        s=22, alpha=0.8, legend=ax is axes[-1])  # fmt: skip
        gaming = hacking[hacking["games"].fillna(False).astype(bool)]
        ax.scatter(gaming["d_reward"], gaming[column], s=70, facecolors="none", edgecolors="black", lw=0.8)
        ax.axhline(0, color="grey", lw=0.8)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_xlabel("change in training (native) reward from base")
        ax.set_ylabel(label)
    axes[-1].legend(title="reward system", fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle(f"Reward hacking: {int(hacking['games'].fillna(False).sum())} of {len(hacking)} runs game "
                 "their reward (ringed: reward up, pass@1 and judge down)", fontsize=9)  # fmt: skip
    return _save(fig, out_dir, "reward_change_vs_outcomes")


def all_figures(frontier, optima, disagreement, race, conventions, hacking, profile, out_dir) -> list[str]:
    """Every figure of the analysis; returns their names."""
    order = [s.name for s in profile.all_settings()]
    written = []
    for st in [st for st in ("A", "BD") if frontier["stage"].isin(list(st)).any()]:
        for x in ("rho", "rho_time"):
            target_vs_rho_by_setting(frontier, st, out_dir, x=x, optima=optima, order=order)
            written.append(f"targets_vs_rho{'_time' if x == 'rho_time' else ''}_stage_{st}")
    one_table = ((argmax_cell_by_target, disagreement), (race_pilot_vs_full_rho_star, race),
                 (rho_star_by_convention, conventions), (reward_change_vs_outcomes, hacking))  # fmt: skip
    for draw, table in one_table:  # each figure is saved under its function's name
        if len(table):
            draw(table, out_dir)
            written.append(draw.__name__)
    import matplotlib.pyplot as plt

    plt.close("all")
    return written


def preview_png(path: str | Path, max_width: int = 1200, colors: int = 64) -> bytes:
    """A small copy of the saved PNG at ``path`` for a notebook to embed: at most ``max_width`` pixels
    wide and ``colors`` colours (a few tens of kB where the 150-dpi file is a few hundred). The file
    itself is left as it is."""
    import io

    from PIL import Image

    image = Image.open(path).convert("RGB")
    if image.width > max_width:
        image = image.resize((max_width, round(image.height * max_width / image.width)), Image.LANCZOS)
    out = io.BytesIO()
    image.quantize(colors=colors).save(out, format="PNG", optimize=True)
    return out.getvalue()
