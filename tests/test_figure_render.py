"""Every figure the analysis writes, rendered and read as a newcomer reads it: from small synthetic tables
(fast) and from the committed cpu-tiny tables (read only, written to a temporary folder; slow). For every
axes of every figure: no two visible tick labels overlap (their window extents after
``fig.canvas.draw()``), no axes is empty (an axes that is shown draws some data, not only reference
lines and words, or says on itself why it cannot), and no title overlaps a legend. A figure with nothing to draw is not written, a stale
file of its name is removed, and the call says which and why. The budget axes are the ladder (C/16 ...
4C, no minor ticks); one owner gives every colour and marker; the envelope says which size leads at
each budget and how sure that is; a rebuild gives the same bytes."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from paper_repro.analysis.figures import curves as fc
from paper_repro.analysis.figures import rho_star_by_convention, style
from paper_repro.analysis.figures.registry import Context, draw_figures, figures
from paper_repro.analysis.stats.optima import optimum_table
from paper_repro.analysis.tables import curves as cv
from paper_repro.analysis.tables.frontiers import frontier_table
from paper_repro.analysis.tables.race import disagreement_table
from paper_repro.config import load_profile
from tests.worlds import STAGE_A, curve_rows, frontier_runs, growing, moving_peak

PROFILE = load_profile("cpu-tiny")
COMMITTED = Path(__file__).resolve().parents[1] / "data" / "results" / "cpu-tiny"
# every file the registry declares, in drawing order; the compute curves' (on a budget axis) among them
FILES = [name for f in figures() for name in f.files()]
CURVES = [name for f in figures() if f.draw.__module__ == fc.__name__ for name in f.files()]
CONVENTIONS = ("useful", "executed", "6N", "wall time")
TABLES = list(dict.fromkeys(name for f in figures() for name in f.reads.values()))  # what the figures draw
CONTEXT = Context([s.name for s in PROFILE.all_settings()], PROFILE.margins.regime, sizes=["S", "M", "L"])


def tables_of(frontier, optima, disagreement, race, conventions, hacking, claims, analysis, curves) -> dict:
    """The tables the figures draw, by name, as :func:`paper_repro.analysis.pipeline.analyse` gives them."""
    return {
        "frontiers": frontier,
        "optima": optima,
        "disagreement": disagreement,
        "race": race,
        "conventions": conventions,
        "reward_hacking": hacking,
        "claims": claims,
        "curves": curves,
        "curve_fits": analysis.fits,
        "rho_star_by_budget": analysis.rho_star,
        "size_star_by_budget": analysis.size_star,
    }


# ---------------------------------------------------------------------------------------- the checks


def tick_labels(axis) -> list:
    """The tick labels ``axis`` draws: ticks inside its view, labels visible and not blank."""
    ticks = axis._update_ticks()  # the ticks matplotlib draws (inside the view interval)
    return [
        lab for t in ticks for lab in (t.label1, t.label2) if lab.get_visible() and lab.get_text().strip()
    ]


def overlap(a, b, slack: float = 0.5) -> bool:
    """Whether two window extents share more than ``slack`` pixels each way."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > slack and min(a.y1, b.y1) - max(a.y0, b.y0) > slack


def overlapping_ticks(ax, renderer) -> list[tuple[str, str]]:
    found = []
    for axis in (ax.xaxis, ax.yaxis):
        labels = tick_labels(axis)
        boxes = [lab.get_window_extent(renderer) for lab in labels]
        for i in range(len(labels)):
            for j in range(i + 1, len(labels)):
                if overlap(boxes[i], boxes[j]):
                    found.append((labels[i].get_text(), labels[j].get_text()))
    return found


def draws_data(ax) -> bool:
    """Whether ``ax`` draws data: a line, collection, patch or image in data coordinates with at least
    one finite point (a reference line across the axes, ``axvline``, and words are not data)."""
    for artist in [*ax.lines, *ax.collections, *ax.patches, *ax.images]:
        where = [
            artist.get_transform(),
            *([artist.get_offset_transform()] if hasattr(artist, "get_offsets") else []),
        ]
        if not artist.get_visible() or not any(t.contains_branch(ax.transData) for t in where):
            continue
        if isinstance(artist, Line2D):
            xy = np.column_stack(
                [np.asarray(artist.get_xdata(), float), np.asarray(artist.get_ydata(), float)]
            )
            points = np.isfinite(xy).all(axis=1).any()
        elif hasattr(artist, "get_offsets"):  # a scatter (its offsets), a mesh or line collection (its paths)
            points = np.asarray(artist.get_offsets()).size > 0 and len(artist.get_paths()) > 0
        else:  # a patch or an image
            points = True
        if points:
            return True
    return False


def says_why_empty(ax) -> bool:
    """Whether ``ax`` says on itself why it draws nothing (``no contrast can be computed: <reason>``)."""
    return any("can be computed: " in t.get_text() for t in ax.texts)


def titles_and_legends(fig) -> list:
    texts = [fig._suptitle] if fig._suptitle is not None and fig._suptitle.get_text() else []
    for ax in fig.axes:
        if ax.get_visible():
            texts += [t for t in (ax.title, ax._left_title, ax._right_title) if t.get_text()]
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() and ax.get_visible())]
    return texts + legends


def drawn(fig):
    """``fig`` drawn (on an Agg canvas: a figure closed after saving has lost its own); the renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def problems(fig) -> list[str]:
    """What a newcomer would trip on in ``fig``, in words (none: an empty list)."""
    renderer = drawn(fig)
    found = []
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison:  # turned off on purpose
            continue
        name = ax.get_title() or ax.get_ylabel() or f"axes {k}"
        found += [f"{name}: tick labels {a!r} and {b!r} overlap" for a, b in overlapping_ticks(ax, renderer)]
        if not draws_data(ax) and not says_why_empty(ax):
            found.append(f"{name}: an empty axes")
    marks = titles_and_legends(fig)
    boxes = [m.get_window_extent(renderer) for m in marks]
    for i in range(len(marks)):
        for j in range(i + 1, len(marks)):
            if overlap(boxes[i], boxes[j]):
                found.append(f"{type(marks[i]).__name__} and {type(marks[j]).__name__} overlap")
    return found


@contextlib.contextmanager
def saved_figures():
    """The figures saved inside the block: PNG name -> figure (kept open to be read after)."""
    saved: dict[str, Figure] = {}
    original = Figure.savefig

    def savefig(self, fname, *args, **kwargs):
        original(self, fname, *args, **kwargs)
        if Path(str(fname)).suffix == ".png":
            saved[Path(str(fname)).stem] = self

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Figure, "savefig", savefig)
        yield saved


# ---------------------------------------------------------------------------------------- the tables


def conventions(identified=("S",), partly=("M",), none=("L",)) -> pd.DataFrame:
    rows = []
    for group in (*identified, *partly, *none):
        for j, kind in enumerate(CONVENTIONS):
            found = group in identified or (group in partly and j % 2 == 0)
            rho = 0.4 + 0.05 * j
            rows.append({"group": group, "settings": group, "convention": kind,
                         "status": "interior" if found else "not identified",
                         "rho_star": rho if found else np.nan, "ci95_low": rho - 0.1 if found else np.nan,
                         "ci95_high": rho + 0.1 if found else np.nan})  # fmt: skip
    return pd.DataFrame(rows)


def race() -> pd.DataFrame:
    rows = []
    for k, setting in enumerate(("S", "M", "L", "sparse", "dense")):
        for fraction in (0.5, 0.25):
            rows.append({"stage": "A" if setting in "SML" else "B", "setting": setting, "pilot_fraction": fraction,
                         "full_rho_star": 0.2 + 0.15 * k, "pilot_rho_star": 0.8 - 0.1 * k - fraction / 4,
                         "pilot_moved": k % 2 == 0, "same_runs_as": np.nan, "rho_threshold": 0.6})  # fmt: skip
    return pd.DataFrame(rows)


def hacking() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    systems = np.repeat(["sparse", "structured", "dense"], 12)
    d = rng.normal(0.1, 0.1, len(systems))
    return pd.DataFrame({"reward_system": systems, "d_reward": d, "d_gsm_pass1": 0.8 * d + rng.normal(0, 0.02, len(d)),
                         "d_judge": d + rng.normal(0, 0.05, len(d)), "games": d > 0.3})  # fmt: skip


def claims() -> pd.DataFrame:
    return pd.DataFrame({"id": ["regime.rule.any", "regime.rule.these", "regime.prm.any"],
                         "claim": ["rule-based: update-heavy wins", "rule-based: update-heavy wins", "prm: search"],
                         "verdict": ["held", "inconclusive", "not held"], "our_value": [0.04, 0.01, -0.05],
                         "ci_low": [0.01, -0.02, -0.08], "ci_high": [0.07, 0.04, -0.02]})  # fmt: skip


LADDER = (0.125, 0.25, 0.5, 1.0, 2.0)  # the committed study's: C/8 to 2C, where matplotlib's log ticks crowd


def synthetic_curves() -> pd.DataFrame:
    return pd.concat([curve_rows(growing, settings=STAGE_A, points=LADDER, seeds=3),
                      curve_rows(moving_peak, settings={"dense": "B"}, points=LADDER[:-1], seeds=3)],
                     ignore_index=True)  # fmt: skip


def synthetic_tables() -> tuple[dict[str, pd.DataFrame], cv.CurveAnalysis]:
    """The synthetic tables every figure draws, by name, and their compute curves' analysis."""
    rows = frontier_runs()
    frontier = frontier_table(rows)
    optima = optimum_table(rows, frontier, {"sparse": "M"})
    disagreement, _ = disagreement_table(frontier)
    curves = synthetic_curves()
    analysis = cv.curve_analysis(curves, recipe_sd=0.0, targets=["native_reward"], bootstrap=10)
    tables = tables_of(
        frontier, optima, disagreement, race(), conventions(), hacking(), claims(), analysis, curves
    )
    return tables, analysis


def render_synthetic(out: Path) -> tuple[dict[str, Figure], list, cv.CurveAnalysis, dict[str, pd.DataFrame]]:
    tables, analysis = synthetic_tables()
    with saved_figures() as saved:
        written = draw_figures(tables, out, CONTEXT)
    return saved, written, analysis, tables


def render_committed(out: Path) -> tuple[dict[str, Figure], list]:
    tables = {name: pd.read_csv(COMMITTED / f"{name}.csv") for name in TABLES}  # read only
    with saved_figures() as saved:
        written = draw_figures(
            tables, out, Context(CONTEXT.order, CONTEXT.margin, {"sparse": "M"}, CONTEXT.sizes)
        )
    return saved, written


@pytest.fixture(autouse=True)
def closed():
    """No figure left open by another test module or by this one (a closed figure is still read)."""
    import matplotlib.pyplot as plt

    plt.close("all")
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    import matplotlib.pyplot as plt

    plt.close("all")  # what another module's tests left open
    out = tmp_path_factory.mktemp("figures")
    return out, *render_synthetic(out)


# ---------------------------------------------------------------------------------------- every figure reads


@pytest.mark.parametrize("name", FILES)
def test_every_figure_reads(synthetic, name):
    _, saved, *_ = synthetic
    assert name in saved, f"{name} was not drawn"
    assert problems(saved[name]) == []


def test_what_is_written_is_what_is_said(synthetic):
    out, _, written, *_ = synthetic
    assert list(written) == FILES and written.skipped == {}
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{n}.{e}" for n in FILES for e in ("png", "pdf"))


@pytest.mark.slow
def test_every_committed_figure_reads(tmp_path):
    """The figures of the committed cpu-tiny tables (read only; written to ``tmp_path``)."""
    saved, written = render_committed(tmp_path)
    assert set(written) == set(saved)
    for name in sorted(saved):
        assert problems(saved[name]) == [], name
    for name in written.skipped:
        assert not list(tmp_path.glob(f"{name}.*"))


# ---------------------------------------------------------------------------------------- nothing to draw


def stale(out: Path, *names: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        for ext in ("png", "pdf"):
            (out / f"{name}.{ext}").write_bytes(b"an old build's figure")


def test_a_figure_with_nothing_to_draw_is_not_written_and_its_stale_file_goes(tmp_path, caplog):
    stale(tmp_path, "rho_star_by_convention")
    nothing = conventions(identified=(), partly=(), none=("S", "M"))  # every rho* "not identified"
    empty = pd.DataFrame(columns=["stage", "setting", "id"])
    with caplog.at_level(logging.WARNING, logger="paper_repro.analysis.figures"):
        written = draw_figures(dict.fromkeys(TABLES, empty) | {"conventions": nothing}, tmp_path, CONTEXT)
    assert not list(tmp_path.iterdir())  # not written, and the old build's file is gone
    assert "rho_star_by_convention" not in written
    assert "no group's rho* is identified" in written.skipped["rho_star_by_convention"]
    assert "rho_star_by_convention not written" in caplog.text and "removed the stale" in caplog.text
    assert rho_star_by_convention(nothing, tmp_path) is None and not list(tmp_path.iterdir())


def test_the_convention_figure_draws_the_groups_with_a_rho_star_and_names_the_others(tmp_path):
    fig = rho_star_by_convention(conventions(identified=("S",), partly=("M",), none=("L", "dense")), tmp_path)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["S", "M"]
    assert "not identified under any convention, not drawn: L, dense" in ax.get_xlabel()
    assert sum(t.get_text().endswith("n.i.") for t in ax.texts) == 2  # M's two conventions without one
    assert problems(fig) == []


def test_regime_claims_without_a_contrast_say_why_on_the_axes_and_in_the_reading(tmp_path):
    """A quick study's regime claims (one seed: NaN, not computable) draw no interval; the axes say so,
    with the claims' reason, and so does the figure's reading."""
    from paper_repro.analysis.figures.final import regime_contrasts
    from paper_repro.analysis.figures.registry import figure_readings

    reason = "the grid holds 1 seed per cell"
    none = claims().assign(our_value=np.nan, ci_low=np.nan, ci_high=np.nan, note=f"not computable: {reason}")
    fig = regime_contrasts(none, tmp_path, CONTEXT.margin)
    said = [t.get_text().replace("\n", " ") for t in fig.axes[0].texts]
    assert said == [f"no contrast can be computed: {reason}"] and problems(fig) == []
    tables = dict.fromkeys(TABLES, pd.DataFrame()) | {"claims": none}
    assert figure_readings(tables)["regime_contrasts"] == (
        f"The paper's optima asked as contrasts: no contrast can be computed: {reason}."
    )
    some = none.assign(
        our_value=[0.04, np.nan, -0.05], ci_low=[0.01, np.nan, -0.08], ci_high=[0.07, np.nan, -0.02]
    )
    fig = regime_contrasts(some, tmp_path, CONTEXT.margin)  # one row without a contrast says so on its line
    assert [t.get_text().strip() for t in fig.axes[0].texts] == ["no estimate"]


def test_every_figure_of_the_committed_tables_has_a_reading():
    """Notebook 40 prints each figure's reading under it: none of the committed study's is empty."""
    from paper_repro.analysis.figures.registry import figure_readings
    from paper_repro.analysis.tables.registry import TABLES as WRITTEN

    tables = {t.name: pd.read_csv(COMMITTED / f"{t.name}.csv") for t in WRITTEN}
    readings = figure_readings(tables | {"curves": pd.read_csv(COMMITTED / "curves.csv")})
    assert [name for name in FILES if not readings.get(name)] == []


def test_empty_tables_write_no_figure_and_say_why(tmp_path):
    stale(tmp_path, *FILES)
    empty = pd.DataFrame(columns=["stage", "setting", "id"])
    written = draw_figures(dict.fromkeys(TABLES, empty), tmp_path, CONTEXT)
    assert list(written) == []
    assert set(written.skipped) == set(FILES) and all(written.skipped.values())
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------------------- budget axes


@pytest.mark.parametrize("name", CURVES)
def test_a_budget_axis_is_the_ladder(synthetic, name):
    _, saved, *_ = synthetic
    fig = saved[name]
    drawn(fig)
    logs = [ax for ax in fig.axes if ax.get_visible() and ax.get_xscale() == "log"]
    assert logs
    words = ["C/8", "C/4", "C/2", "C", "2C"]
    for ax in logs:
        assert not ax.xaxis.get_minorticklocs().size  # no minor ticks, no minor labels
        shown = [t.get_text() for t in tick_labels(ax.xaxis)]
        assert shown in ([], words), shown  # hidden (a panel above a strip) or the whole ladder


def test_crowded_budgets_leave_labels_out_rather_than_overlap():
    plt, _ = style.setup()
    fig, ax = plt.subplots(figsize=(3, 2))
    points = {p: p * 1e11 for p in (0.125, 0.25, 0.5, 0.75, 1.0, 1.25, 2.0)}
    ax.plot(list(points.values()), range(len(points)))
    style.budget_axis(ax, points)
    drawn(fig)
    assert [t.get_text() for t in tick_labels(ax.xaxis)] == ["C/8", "C/4", "C/2", "C", "2C"]
    assert problems(fig) == []
    plt.close(fig)


# ---------------------------------------------------------------------------------------- one palette


def test_one_owner_gives_every_colour_and_marker():
    from paper_repro.rewards import REWARD_SYSTEMS

    palette = style.colors([*REWARD_SYSTEMS, "S", "M", "L"])
    assert style.colors(["dense", "S"]) == {
        "dense": palette["dense"],
        "S": palette["S"],
    }  # asked alone or not
    greys = {tuple(np.round(np.asarray(__import__("matplotlib").colors.to_rgb(s["color"])), 3))
             for s in style.convention_styles(CONVENTIONS).values()}  # fmt: skip
    assert not greys & {tuple(np.round(c, 3)) for c in palette.values()}  # a convention is never a setting
    cells = {
        "r15": 0.15,
        "r40": 0.4,
        "r50": 0.5,
        "r50b": 0.5,
        "r66": 0.66,
        "r78": 0.78,
        "r78b": 0.78,
        "r90": 0.9,
    }
    styles = style.cell_styles(cells)
    assert len({s["marker"] for s in styles.values()}) == len(cells)  # more than a shade apart
    assert style.cell_styles(dict(reversed(cells.items()))) == styles  # fixed, whatever the order
    sizes = [np.asarray(palette[s]) for s in ("S", "M", "L")]
    assert min(np.abs(a - b).sum() for a, b in ((sizes[0], sizes[1]), (sizes[1], sizes[2]))) > 0.3


def test_the_figures_draw_a_setting_in_its_colour(synthetic):
    _, saved, *_ = synthetic
    palette = style.colors(["S", "M", "L", "dense"])
    rho_star = saved["rho_star_vs_budget_native_reward"]
    for ax in [a for a in rho_star.axes if a.get_title() in palette]:
        filled = [ln for ln in ax.lines if ln.get_marker() == "o" and ln.get_markerfacecolor() != "none"]
        assert filled and np.allclose(filled[0].get_color(), palette[ax.get_title()][:3])


# ---------------------------------------------------------------------------------------- the envelope


def test_the_envelope_says_which_size_leads_at_each_budget_and_how_sure(synthetic):
    _, saved, *_ = synthetic
    fig = saved["compute_optimal_envelope_native_reward"]
    strip = next(ax for ax in fig.axes if ax.get_ylabel() == "size*(C)")
    order = [t.get_text() for t in strip.get_yticklabels()]
    assert order == ["S", "M", "L"]
    assert not any(t.get_text().strip() for t in fig.axes[0].texts)  # no size names over the points
    table = synthetic[3].size_star
    flops = dict(zip(table["point_flops"], table.itertuples(), strict=True))
    leads = {(x, order[int(y)]) for ln in strip.lines if ln.get_marker() == "*"
             for x, y in zip(ln.get_xdata(), ln.get_ydata(), strict=True)}  # fmt: skip
    out = {(x, order[int(y)]) for ln in strip.lines if ln.get_marker() == "x"
           for x, y in zip(ln.get_xdata(), ln.get_ydata(), strict=True)}  # fmt: skip
    assert leads == {(f, r.argmax_size) for f, r in flops.items()}  # a leader at every budget
    assert out == {(f, s) for f, r in flops.items() for s in order if s not in str(r.best_sizes).split()}
    assert any(r.best_sizes == r.argmax_size for r in flops.values())  # somewhere the lead is sure ...
    assert any(len(str(r.best_sizes).split()) > 1 for r in flops.values())  # ... and somewhere not


# ---------------------------------------------------------------------------------------- a rebuild


def test_the_curve_figures_are_rebuilt_byte_identically(synthetic, tmp_path):
    out, *_, analysis, _ = synthetic
    again = [fc.rho_star_figure(analysis.rho_star, "native_reward", tmp_path),
             fc.envelope_figure(synthetic_curves(), analysis.size_star, "native_reward", tmp_path, ["S", "M", "L"])]  # fmt: skip
    for path in again:
        for ext in ("png", "pdf"):
            name = path.with_suffix(f".{ext}").name
            assert (tmp_path / name).read_bytes() == (out / name).read_bytes(), name
