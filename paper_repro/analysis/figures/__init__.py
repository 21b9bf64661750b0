"""The figures, by where they are read: the final analysis' (the decisions and frontiers'
:mod:`~paper_repro.analysis.figures.final`, the checks' :mod:`~paper_repro.analysis.figures.checks` and
the compute curves' :mod:`~paper_repro.analysis.figures.curves`, written to ``figures/<profile>/``,
each one function declared with :func:`~paper_repro.analysis.figures.registry.register_figure`: its
tables and its one-line reading; :mod:`~paper_repro.analysis.figures.registry` draws, reads and lists
them), the stage notebooks' figures and sentences
(:mod:`~paper_repro.analysis.figures.notebook`), and what every figure shares: the theme, every colour
and marker (one per reward system, policy size, cell, FLOP convention), the panel grid, the interval
bars, the budget axis, the fixed file metadata and what a figure with nothing to draw does
(:mod:`~paper_repro.analysis.figures.style`). Their names are read from here, each imported on first
use (a notebook's ``from paper_repro.analysis.figures import setting_frontiers`` loads no other part).
"""

from __future__ import annotations

from paper_repro.common.lazy import lazy_surface

# name -> the part that owns it
_OWNERS = {
    **dict.fromkeys(
        (
            "RHO_TIME_LABEL",
            "argmax_cell_by_target",
            "regime_contrasts",
            "target_vs_rho_by_setting",
        ),
        ".final",
    ),
    **dict.fromkeys(
        ("MARKERS", "race_pilot_vs_full_rho_star", "reward_change_vs_outcomes", "rho_star_by_convention"),
        ".checks",
    ),
    **dict.fromkeys(
        ("Context", "FIGURES", "draw_figures", "figure_listing", "figure_readings", "register_figure"),
        ".registry",
    ),
    **dict.fromkeys(
        (
            "INTERVAL",
            "best_cells_sentence",
            "frontier_best_set",
            "frontier_caption",
            "notebook_image",
            "pilot_frontiers",
            "pilot_pick_sentence",
            "preview_png",
            "setting_frontier",
            "setting_frontiers",
        ),
        ".notebook",
    ),
    **dict.fromkeys(
        (
            "PANELS_PER_ROW",
            "PROPORTIONS",
            "RHO_LABEL",
            "error_bars",
            "file_metadata",
            "panel_grid",
            "theme",
        ),
        ".style",
    ),
}
__all__ = sorted(_OWNERS)


__getattr__, __dir__ = lazy_surface(__name__, _OWNERS)
