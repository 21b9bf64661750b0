"""The figures the analysis draws (:func:`paper_repro.analysis.pipeline.analyse`), one declaration
each, in the order drawn: a new figure is one function in a figure module (:data:`MODULES`),
decorated with :func:`register_figure`, which says what it shows (``about``), the tables it draws
(``reads``) and its one-line reading (``reading``, the line notebook 40 prints under it).
:func:`draw_figures` draws them all, :func:`figure_readings` reads them all, and
:func:`figure_listing` is the listing the docstrings and notebook 40 show.

How a figure is called: ``draw(**{parameter: tables[name] for parameter, name in reads.items()},
out_dir=..., **variant, **context)``, where ``variant`` is one entry of its ``variants`` (a figure
that writes several files, one per variant: its file name -> the keywords that draw it) and
``context`` holds those of :class:`Context`'s fields (and ``skipped``) the function names as its
parameters. It returns None when it had nothing to draw (it called
:func:`~paper_repro.analysis.figures.style.skip`), anything else when it wrote its file. A figure
whose first table is empty is not called: its file is skipped, with that reason. Its reading is
``reading(tables, **variant)``: a line read off the tables (any the analysis writes, by name), or
"" where there is nothing to say.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from paper_repro.analysis.registry import Registry

if TYPE_CHECKING:  # the listing is read without drawing anything: no pandas for it
    import pandas as pd

    from paper_repro.analysis.figures.style import Written

# The modules that declare figures, in drawing order (a new figure module is added here)
MODULES = (
    "paper_repro.analysis.figures.final",
    "paper_repro.analysis.figures.checks",
    "paper_repro.analysis.figures.curves",
)


@dataclass(frozen=True)
class Context:
    """What a figure may need besides its tables, from the profile and the study: the settings in the
    profile's order (``order``), the regime claims' margin (``margin``), the settings that are
    another's runs (``shared``: stage B's sparse is stage A's M; drawn once) and stage A's policy
    sizes, smallest first (``sizes``)."""

    order: Sequence[str] = ()
    margin: float = 0.0
    shared: Mapping[str, str] = field(default_factory=dict)
    sizes: Sequence[str] | None = None


@dataclass(frozen=True)
class Figure:
    """One figure of the analysis: its ``name`` (the file's, or a family's whose ``variants`` name the
    files), what it shows (``about``), the tables it draws (``reads``: the function's parameter ->
    the table's name, ``<name>.csv``; ``curves`` is the runs' compute curves), its one-line
    ``reading`` and its drawing (``draw``)."""

    name: str
    about: str
    reads: Mapping[str, str]
    reading: Callable[..., str]
    draw: Callable[..., Any]
    variants: Mapping[str, Mapping[str, Any]]

    def files(self) -> list[str]:
        """The file names (no extension) it writes, in order."""
        return list(self.variants)


FIGURES: Registry[Figure] = Registry("figure")


def register_figure(
    name: str,
    about: str,
    reads: Mapping[str, str],
    reading: Callable[..., str],
    variants: Mapping[str, Mapping[str, Any]] | None = None,
) -> Callable[[Callable], Callable]:
    """Declare the decorated function as the figure ``name`` (module docstring: how it is called);
    returns the function unchanged, so that it stays callable on its own tables."""

    def declare(draw: Callable) -> Callable:
        FIGURES.register(name, Figure(name, about, dict(reads), reading, draw, dict(variants or {name: {}})))
        return draw

    return declare


def figures() -> list[Figure]:
    """Every declared figure, in drawing order: by module as :data:`MODULES` lists them (one declared
    elsewhere last), within one in declaration order, whichever module was imported first."""
    for module in MODULES:
        importlib.import_module(module)
    rank = {module: i for i, module in enumerate(MODULES)}
    return sorted(FIGURES, key=lambda f: rank.get(f.draw.__module__, len(MODULES)))


def _context(draw: Callable, context: Context, skipped: dict) -> dict[str, Any]:
    """The keywords of ``context`` (and ``skipped``) that ``draw`` names as its parameters."""
    wanted = inspect.signature(draw).parameters
    given = {f.name: getattr(context, f.name) for f in fields(context)} | {"skipped": skipped}
    return {k: v for k, v in given.items() if k in wanted}


def draw_figures(
    tables: Mapping[str, pd.DataFrame],
    out_dir: str | Path,
    context: Context,
    only: Sequence[str] | None = None,
) -> Written:
    """Every figure (``only``: those declared by these names, in that order) from ``tables`` (by name: the tables the
    analysis writes, and ``curves``) into ``out_dir``; returns the file names written (a :class:`~paper_repro.analysis.figures.style.Written`:
    ``skipped`` names each figure with nothing to draw and why; no file of its name is left in
    ``out_dir``, and a line is logged)."""
    import matplotlib.pyplot as plt

    from paper_repro.analysis.figures.style import Written, skip

    written = Written()
    every = figures()
    for figure in every if only is None else [FIGURES.get(name) for name in only]:
        data = {parameter: _table(tables, name) for parameter, name in figure.reads.items()}
        first, drawn = next(iter(figure.reads.values())), next(iter(data.values()))
        extra = _context(figure.draw, context, written.skipped)
        for file, variant in figure.variants.items():
            if not len(drawn):
                skip(out_dir, file, f"the {first} table is empty", written.skipped)
            elif figure.draw(**data, out_dir=out_dir, **variant, **extra) is not None:
                written.append(file)
    plt.close("all")
    return written


def figure_readings(tables: Mapping[str, pd.DataFrame]) -> dict[str, str]:
    """One line per figure file (by its name), read off ``tables`` (by name); a figure whose first table
    is empty, or whose reading has nothing to say, has none."""
    out = {}
    for figure in figures():
        if not len(_table(tables, next(iter(figure.reads.values())))):
            continue
        for file, variant in figure.variants.items():
            line = figure.reading(tables, **variant)
            if line:
                out[file] = line
    return out


def _table(tables: Mapping[str, pd.DataFrame], name: str) -> pd.DataFrame:
    if name not in tables:
        raise KeyError(f"a figure reads the table {name!r}, which is not given; given: {', '.join(tables)}")
    return tables[name]


def figure_listing() -> str:
    """The figures :func:`draw_figures` draws, as a Markdown list (the docstrings' and notebook 40's)."""
    lines = []
    for f in figures():
        files = ", ".join(f"``{n}``" for n in f.files())
        reads = ", ".join(f"``{n}.csv``" for n in dict.fromkeys(f.reads.values()))
        lines.append(f"- {files}: {f.about} (from {reads});")
    return "\n".join(lines)
