"""The figure registry (:mod:`paper_repro.analysis.figures.registry`): a figure is one declared function
that the analysis draws, reads (its one-line reading, notebook 40's) and lists, from the tables it
names; a figure with nothing to draw says why."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from paper_repro.analysis.figures.registry import (
    FIGURES,
    Context,
    draw_figures,
    figure_listing,
    figure_readings,
    figures,
    register_figure,
)
from paper_repro.analysis.tables.frontiers import frontier_table
from paper_repro.analysis.tables.registry import TABLES
from tests.worlds import frontier_runs

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "data" / "results" / "cpu-tiny"


def test_every_figure_draws_tables_the_analysis_writes():
    for figure in figures():
        unknown = set(figure.reads.values()) - {*TABLES.names(), "curves"}
        assert not unknown, f"{figure.name} reads {unknown}, which the analysis does not write"


def test_every_committed_figure_has_its_reading():
    """notebook 40 prints a reading under each figure: every committed figure has one, read off the
    committed tables (a figure drawn with no reading under it fails here)."""
    names = {*TABLES.names(), "curves"} & {p.stem for p in COMMITTED.glob("*.csv")}
    readings = figure_readings({name: pd.read_csv(COMMITTED / f"{name}.csv") for name in names})
    # stage E's figures (test_time_*) are notebook 60's, read there from its own tables
    drawn = {
        p.stem for p in (ROOT / "figures" / "cpu-tiny").glob("*.png") if not p.stem.startswith("test_time_")
    }
    assert drawn and drawn <= set(readings)
    assert all(line.endswith(".") and len(line) > 40 for line in readings.values())
    assert "held" in readings["regime_contrasts"] and "RACE:" in readings["race_pilot_vs_full_rho_star"]


def test_a_new_figure_is_one_declared_function(tmp_path):
    """Declared once, a figure is drawn, read and listed with no other change."""

    def reading(tables) -> str:
        return f"{len(tables['fits'])} frontiers fitted."

    @register_figure("toy_fits", "fits per setting", reads={"fits": "fits"}, reading=reading)
    def toy_fits(fits: pd.DataFrame, out_dir, order=()):
        from paper_repro.analysis.figures.style import save_figure, setup

        plt, _ = setup()
        fig, ax = plt.subplots()
        ax.bar(list(order), [int((fits["setting"] == s).sum()) for s in order])
        return save_figure(fig, out_dir, "toy_fits")

    try:
        fits = pd.DataFrame({"setting": ["S", "S", "M"]})
        written = draw_figures({"fits": fits}, tmp_path, Context(order=["S", "M"]), only=["toy_fits"])
        assert list(written) == ["toy_fits"] and (tmp_path / "toy_fits.pdf").exists()
        assert figures()[-1].name == "toy_fits"  # declared outside the figure modules: drawn last
        assert "- ``toy_fits``: fits per setting (from ``fits.csv``);" in figure_listing()
        tables = {name: pd.DataFrame() for f in figures() for name in f.reads.values()}
        assert figure_readings(tables | {"fits": fits}) == {"toy_fits": "3 frontiers fitted."}
    finally:
        FIGURES.remove("toy_fits")
    assert "toy_fits" not in figure_listing()


def test_a_family_skips_the_files_it_has_nothing_for(tmp_path):
    """A stage with no row in the frontier: its two figures are not written, and say why."""
    frontier = frontier_table(frontier_runs())
    frontier = frontier[frontier["stage"] == "A"]
    optima = pd.DataFrame(columns=["setting", "target", "stage"])
    written = draw_figures(
        {"frontiers": frontier, "optima": optima}, tmp_path, Context(), only=["targets_vs_rho"]
    )
    assert list(written) == ["targets_vs_rho_stage_A", "targets_vs_rho_time_stage_A"]
    assert written.skipped == dict.fromkeys(
        ["targets_vs_rho_stage_BD", "targets_vs_rho_time_stage_BD"], "no stage B or D row in the frontier"
    )


def test_an_unknown_figure_or_table_is_named():
    with pytest.raises(KeyError, match=r"no figure 'nope'; registered: .*regime_contrasts"):
        draw_figures({}, "unused", Context(), only=["nope"])
    with pytest.raises(KeyError, match="reads the table 'claims', which is not given"):
        draw_figures({}, "unused", Context(), only=["regime_contrasts"])
