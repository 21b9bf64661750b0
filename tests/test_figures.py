"""The figures on small synthetic tables (never the committed results): multi-panel figures wrap at
two panels a row, the marks that are not data sit outside the data panels and are named in a legend,
the RACE figure shows every setting it names, the stage notebooks' frontier figure draws a panel per
target with 95% Student-t bars over seeds (none with one seed, as its caption says), the base policy
dashed, the cells that could be best filled and the others hollow, a NaN metric left out and named, and
a rebuild gives the same bytes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from paper_repro.analysis import figures
from paper_repro.analysis.stats.optima import Cells, best_set, optimum_table
from paper_repro.analysis.tables.frontiers import TARGETS, frontier_table
from tests.worlds import FIGURE_CELLS as CELLS
from tests.worlds import frontier_runs


@pytest.fixture(scope="module")
def tables():
    rows = frontier_runs()
    frontier = frontier_table(rows)
    optima = optimum_table(rows, frontier, {"sparse": "M"})
    return rows, frontier, optima


def rows_of_axes(fig) -> list[list]:
    """The figure's axes grouped into rows: axes whose vertical extents overlap share a row (a panel
    and the strip under it do not; a heatmap and its colour bar do)."""
    boxes = [ax.get_position() for ax in fig.axes if ax.get_visible()]
    return [[b for b in boxes if b.y0 < a.y1 - 1e-6 and a.y0 < b.y1 - 1e-6] for a in boxes]


def panels(fig) -> list:
    """The data panels of a figure: its axes with a title."""
    return [ax for ax in fig.axes if ax.get_title()]


def legend_texts(fig) -> list[str]:
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    return [t.get_text() for legend in legends for t in legend.get_texts()]


# ------------------------------------------------------------------------------ the analysis figures


@pytest.mark.parametrize("stage", ["A", "BD"])
@pytest.mark.parametrize("x", ["rho", "rho_time"])
def test_target_figures_wrap_at_two_panels_a_row(tables, tmp_path, stage, x):
    _, frontier, optima = tables
    fig = figures.target_vs_rho_by_setting(frontier, stage, tmp_path, x=x, optima=optima)
    assert len(panels(fig)) == len(TARGETS)
    assert max(len(row) for row in rows_of_axes(fig)) <= 2
    width, height = fig.get_size_inches()
    assert width <= 12 and height <= 14
    suffix = "_time" if x == "rho_time" else ""
    assert (tmp_path / f"targets_vs_rho{suffix}_stage_{stage}.png").exists()


def test_the_best_cells_and_rho_star_sit_in_a_strip_under_each_panel_and_are_named(tables, tmp_path):
    _, frontier, optima = tables
    fig = figures.target_vs_rho_by_setting(frontier, "A", tmp_path, optima=optima, order=["S", "M", "L"])
    data = panels(fig)
    strips = [ax for ax in fig.axes if ax not in data]
    assert len(strips) == len(data)
    diamonds = lambda ax: [ln for ln in ax.lines if ln.get_marker() == "D"]  # noqa: E731
    assert all(not diamonds(ax) for ax in data)  # no rho* among the points
    assert sum(len(diamonds(ax)) for ax in strips) > 0  # the synthetic peak is identified somewhere
    ticks = sum(len(ln.get_xdata()) for ax in strips for ln in ax.lines if ln.get_marker() == "|")
    mine = optima[optima["setting"].isin(["S", "M", "L"])]
    assert ticks == sum(
        len(cells.split()) for cells in mine["best_cells"]
    )  # a tick per cell that could be best
    for panel in data:  # each strip is its own box, under its panel and outside it
        boxes = [s.get_position() for s in strips]
        p = panel.get_position()
        assert any(b.y1 <= p.y0 + 1e-6 and abs(b.x0 - p.x0) < 0.05 for b in boxes)
    text = " ".join(legend_texts(fig))
    for words in ("could be best", "interior", "boundary", "the paper's rho*", "base policy", "95%"):
        assert words in text, words
    assert {"S", "M", "L"} <= set(legend_texts(fig))


def test_the_time_figure_has_no_strip_and_no_paper_lines(tables, tmp_path):
    _, frontier, optima = tables
    fig = figures.target_vs_rho_by_setting(frontier, "A", tmp_path, x="rho_time", optima=optima)
    assert len(fig.axes) == len(TARGETS)
    assert not any("paper" in t for t in legend_texts(fig))


def race_rows(sparse_like_m: bool = True) -> pd.DataFrame:
    rec = []
    for setting, points, same in (
        ("S", [(0.48, 0.84, True), (0.48, 0.49, False)], ""),
        ("M", [(0.52, 0.52, False), (0.52, 0.31, False)], ""),
        ("sparse", [(0.52, 0.52, False), (0.52, 0.31 if sparse_like_m else 0.7, False)], "M"),
        ("dense", [(0.15, 0.68, True), (0.15, 0.30, True)], ""),
    ):
        for fraction, (full, pilot, moved) in zip((0.125, 0.0625), points, strict=True):
            rec.append({"stage": "A", "setting": setting, "pilot_fraction": fraction, "full_rho_star": full,
                        "pilot_rho_star": pilot, "pilot_moved": moved, "same_runs_as": same or np.nan,
                        "rho_threshold": 0.6})  # fmt: skip
    return pd.DataFrame(rec)


def plotted_points(ax) -> int:
    return sum(len(c.get_offsets()) for c in ax.collections)


def test_the_race_figure_draws_shared_settings_once_and_names_every_mark(tmp_path):
    fig = figures.race_pilot_vs_full_rho_star(race_rows(), tmp_path)
    ax = fig.axes[0]
    labels = legend_texts(fig)
    assert {"S", "M = sparse", "dense"} <= set(labels)  # an entry per plotted setting
    assert "sparse" not in labels and "M" not in labels  # one experiment, one entry
    assert plotted_points(ax) == 6  # sparse's points are M's: drawn once
    colours = {tuple(np.round(c.get_edgecolor()[0][:3], 3)) for c in ax.collections}
    handles = ax.get_legend().legend_handles
    for handle, label in zip(handles, labels, strict=True):
        if label in {"S", "M = sparse", "dense"}:  # each setting's colour is on the plot
            assert tuple(np.round(np.asarray(handle.get_color())[:3], 3)) in colours, label
    assert any("regime threshold rho = 0.6" in t for t in labels)
    assert any("pilots at 1/8 of the budget" in t for t in labels)
    assert any("uninformative" in t for t in labels)


def test_a_shared_setting_whose_points_differ_keeps_its_own_entry(tmp_path):
    fig = figures.race_pilot_vs_full_rho_star(race_rows(sparse_like_m=False), tmp_path)
    assert {"S", "M", "sparse", "dense"} <= set(legend_texts(fig))
    assert plotted_points(fig.axes[0]) == 8


def test_the_argmax_heatmap_says_what_its_colour_is(tmp_path):
    disagreement = pd.DataFrame(
        {"setting": ["S", "M"], **{f"best_{t}": ["r50", "r30"] for t in TARGETS},
         **{f"rho_star_{t}": [0.5, 0.3] for t in TARGETS}}
    )  # fmt: skip
    fig = figures.argmax_cell_by_target(disagreement, tmp_path)
    heat, bar = fig.axes
    assert bar.get_ylabel() == "realised rho of the best-mean cell"
    assert "best mean" in heat.get_title() and "realised rho" in heat.get_title()
    assert max(len(row) for row in rows_of_axes(fig)) <= 2


def test_every_figure_is_rebuilt_byte_identically(tables, tmp_path):
    _, frontier, optima = tables
    for out in (tmp_path / "a", tmp_path / "b"):
        figures.target_vs_rho_by_setting(frontier, "A", out, optima=optima)
        figures.race_pilot_vs_full_rho_star(race_rows(), out)
    for path in sorted((tmp_path / "a").iterdir()):
        assert path.read_bytes() == (tmp_path / "b" / path.name).read_bytes(), path.name


# ------------------------------------------------------------------------------ the stage notebooks


def one(frontier: pd.DataFrame, setting: str = "M") -> pd.DataFrame:
    return frontier[frontier["setting"] == setting]


def test_setting_frontier_draws_a_95_percent_error_bar_per_cell(tables):
    _, frontier, _ = tables
    rows = one(frontier)
    ax = figures.setting_frontier(rows, "native_reward")
    bars = [c for c in ax.containers if getattr(c, "has_yerr", False)]
    assert len(bars) == 1
    segments = bars[0].lines[2][0].get_segments()
    assert len(segments) == len(CELLS)
    ordered = rows.sort_values("rho")
    for (low, high), (_, r) in zip((sorted(s[:, 1]) for s in segments), ordered.iterrows(), strict=True):
        assert low == pytest.approx(r["native_reward_ci_low"]) and high == pytest.approx(
            r["native_reward_ci_high"]
        )
    assert "could be best (95%)" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_a_proportions_bars_stay_in_0_1(tables):
    _, frontier, _ = tables
    rows = one(frontier).copy()
    rows["gsm_pass1_ci_high"] = 1.3
    ax = figures.setting_frontier(rows, "gsm_pass1")
    bar = next(c for c in ax.containers if getattr(c, "has_yerr", False))
    assert max(s[:, 1].max() for s in bar.lines[2][0].get_segments()) <= 1.0


def test_setting_frontiers_is_one_panel_per_target_two_a_row(tables):
    _, frontier, _ = tables
    fig = figures.setting_frontiers(one(frontier))
    figures.notebook_image(fig)  # lays the figure out
    assert len(fig.axes) == len(TARGETS)
    assert max(len(row) for row in rows_of_axes(fig)) <= 2
    three = figures.setting_frontiers(one(frontier), targets=TARGETS[:3])
    figures.notebook_image(three)
    assert len(three.axes) == 3  # the fourth slot is removed, not left empty


def markers(ax) -> tuple[int, int]:
    """The filled and the hollow cell markers on a panel."""
    filled = hollow = 0
    for c in ax.collections:
        if not len(c.get_offsets()) or not hasattr(c, "get_sizes"):
            continue
        faces = c.get_facecolor()
        white = len(faces) and np.allclose(faces[0][:3], 1.0)
        hollow += len(c.get_offsets()) if white else 0
        filled += 0 if white else len(c.get_offsets())
    return filled, hollow


def interval_bars(ax) -> int:
    return sum(len(c.lines[2][0].get_segments()) for c in ax.containers if getattr(c, "has_yerr", False))


def test_the_stage_figure_has_a_panel_per_target_a_marker_per_cell_and_the_best_filled(tables):
    _, frontier, _ = tables
    rows = one(frontier)
    fig = figures.setting_frontiers(rows)
    figures.notebook_image(fig)
    assert len(fig.axes) == len(TARGETS)
    hollow = 0
    for ax, t in zip(fig.axes, TARGETS, strict=True):
        _, keep = figures.frontier_best_set(rows, t)
        assert markers(ax) == (int(keep.sum()), int((~keep).sum())), t  # filled: could be best
        hollow += int((~keep).sum())
        assert interval_bars(ax) == len(CELLS)
        assert [ln.get_linestyle() for ln in ax.lines if ln.get_label() == "base policy"] == ["--"]
    assert hollow  # the synthetic peak rules some cells out
    caption = fig.get_suptitle()
    assert "95% Student-t interval over seeds" in caption and "3 seeds" in caption
    assert "filled: could be best at 95%" in caption and "hollow: ruled out" in caption
    labels = legend_texts(fig)
    assert labels[0] == "cell mean over seeds"
    for words in ("95% Student-t interval over seeds", "could be best (95%)", "base policy"):
        assert words in labels, words


def test_the_stage_figure_leaves_out_a_nan_metric_and_says_so(tables):
    _, frontier, _ = tables
    rows = one(frontier).copy()
    rows["judge_score"] = np.nan  # a metric that could not be computed, in every cell
    rows.loc[rows["cell"] == "r70", "math_pass1"] = np.nan  # and in one cell
    fig = figures.setting_frontiers(rows)
    figures.notebook_image(fig)
    native, _, math, judge = fig.axes
    assert sum(markers(judge)) == 0 and interval_bars(judge) == 0
    assert any("no judge score in any cell (NaN)" in t.get_text() for t in judge.texts)
    assert sum(markers(math)) == len(CELLS) - 1 and interval_bars(math) == len(CELLS) - 1
    assert math.get_title(loc="right") == "no value (NaN), left out: r70"
    assert sum(markers(native)) == len(CELLS) and not native.get_title(loc="right")


def test_with_one_seed_the_stage_figure_draws_no_interval_and_says_why():
    rows = one(frontier_table(frontier_runs(seeds=1)))
    fig = figures.setting_frontiers(rows)
    figures.notebook_image(fig)
    for ax in fig.axes:
        assert interval_bars(ax) == 0
        assert markers(ax) == (len(CELLS), 0)  # no seed noise to test against: every cell could be best
    assert "one seed each: no interval" in fig.get_suptitle()
    assert "95% Student-t interval over seeds" not in legend_texts(fig)


def test_setting_frontiers_refuses_several_settings(tables):
    _, frontier, _ = tables
    with pytest.raises(ValueError, match="one setting"):
        figures.setting_frontiers(frontier)


def test_the_notebook_image_fits_an_executed_notebook(tables):
    from paper_repro.common.notebook_hygiene import OUTPUT_LIMIT

    _, frontier, _ = tables
    image = figures.notebook_image(figures.setting_frontiers(one(frontier)))
    assert image.data.startswith(b"\x89PNG") and len(image.data) * 4 / 3 < OUTPUT_LIMIT / 2


@pytest.mark.parametrize("recipe_sd", [0.0, 0.01, 0.05])
def test_the_frontiers_best_set_is_the_runs_best_set(tables, recipe_sd):
    rows, frontier, _ = tables
    for setting in ("S", "M", "L", "dense"):
        for t in TARGETS:
            cells, keep = figures.frontier_best_set(one(frontier, setting), t, recipe_sd)
            truth = Cells.of(rows[rows["setting"] == setting], t)
            assert cells.names == truth.names
            assert list(keep) == list(best_set(truth, recipe_sd))


def test_the_sentence_names_the_best_cell_and_the_cells_that_could_be_best():
    frontier = frontier_table(frontier_runs(peak=0.5, sd=0.005))
    rows = one(frontier)
    cells, keep = figures.frontier_best_set(rows, "native_reward")
    sentence = figures.best_cells_sentence(rows)
    top = rows.loc[rows["native_reward"].idxmax()]
    assert sentence.startswith(f"Highest mean native reward (held-out): cell {top['cell']} ")
    assert f"[{top['native_reward_ci_low']:.3f}, {top['native_reward_ci_high']:.3f}]" in sentence
    assert not keep.all()  # a sharp peak: some cells are out ...
    for name, kept in zip(cells.names, keep, strict=True):  # ... and the sentence names exactly the others
        assert (f"{name} (rho" in sentence) == bool(kept), name
    assert sentence.count(".") >= 1 and sentence.endswith(".")


def test_with_one_seed_the_sentence_says_there_is_no_interval():
    rows = one(frontier_table(frontier_runs(seeds=1)))
    sentence = figures.best_cells_sentence(rows)
    assert "no interval (one seed)" in sentence and "any cell could be best" in sentence


class Race:
    def __init__(self, frontier, pick, check):
        self.frontier, self.pick, self.check = frontier, pick, check


def pilots() -> pd.DataFrame:
    rows = frontier_runs(peak=0.3, sd=0.005)
    rows = rows[rows["setting"] == "M"]
    return pd.concat(
        [frontier_table(rows).assign(pilot_fraction=f) for f in (0.125, 0.0625)], ignore_index=True
    )


def test_pilot_frontiers_is_a_panel_per_budget_with_the_pick_marked():
    frontier = pilots()
    fig = figures.pilot_frontiers(frontier, pick="r30")
    figures.notebook_image(fig)
    assert len(fig.axes) == 2 and max(len(row) for row in rows_of_axes(fig)) <= 2
    assert "RACE's pick (r30)" in legend_texts(fig)
    assert all(any(getattr(c, "has_yerr", False) for c in ax.containers) for ax in fig.axes)


def test_the_pilot_sentence_names_the_pick_and_its_check():
    check = pd.DataFrame({"default": [0.5, 0.6], "pick (r30)": [0.55, 0.7]}, index=[200, 201])
    sentence = figures.pilot_pick_sentence(Race(pilots(), "r30", check))
    assert sentence.startswith("RACE picks cell r30 (realised rho 0.31)")
    assert "pilots at 1/8 of the budget" in sentence
    assert "on 2 fresh seeds it scores 0.625 against TRL's default allocation's 0.550" in sentence
    assert "(mean difference +0.075)" in sentence


def test_the_pilot_sentence_when_the_pick_is_the_default():
    run = lambda v: pd.Series([v, v], index=["id", "id"])  # noqa: E731 (one run listed twice)
    check = pd.DataFrame(
        {"default": [run(0.5), run(0.6)], "pick (r30)": [run(0.5), run(0.6)]}, index=[200, 201]
    )
    sentence = figures.pilot_pick_sentence(Race(pilots(), "r30", check))
    assert "mean difference +0.000: the pick is the default allocation, the same runs" in sentence
    assert figures.pilot_pick_sentence(Race(pilots(), None, check)).startswith("No pilot has finished")
