"""The tables the analysis writes beside the runs (:func:`paper_repro.analysis.pipeline.analyse`), one
declaration each, in the order written: a new table is one :func:`register_table` call here, whose
``of`` takes what the analysis computed (a namespace: ``study``, ``frontier``, ``optima``, ``claims``,
``curve``, ...) and returns the table. :func:`table_listing` is the listing the docstrings and
notebook 40 show.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING

from paper_repro.analysis.registry import Registry

if TYPE_CHECKING:  # the listing is read at import (the package docstrings): no pandas for it
    import pandas as pd


@dataclass(frozen=True)
class Table:
    """One table the analysis writes beside the runs: ``<name>.csv``, what a row holds (``about``,
    the listing in :mod:`paper_repro.analysis` and notebook 40), and ``of``: the table, from what the
    analysis computed (:func:`paper_repro.analysis.pipeline.analyse` builds it: its names are the attributes the declarations read)."""

    name: str
    about: str
    of: Callable[[SimpleNamespace], pd.DataFrame]


TABLES: Registry[Table] = Registry("table")


def register_table(name: str, about: str, of: Callable[[SimpleNamespace], pd.DataFrame]) -> Table:
    """Declare a table :func:`analyse` writes as ``<name>.csv``, in declaration order."""
    return TABLES.register(name, Table(name, about, of))


register_table(
    "frontiers",
    "per setting and cell, every target's mean with a 95% interval over seeds",
    lambda m: m.frontier,
)
register_table(
    "optima",
    "per setting and target, the cells that could be best at 95% (the decision), rho* of the unimodal fit with its seed-bootstrap interval and status, and as descriptions the quadratic's vertex, the F test of the cells and the argmax cell",
    lambda m: m.optima,
)
register_table(
    "rho_star_tests",
    "per distinct setting, its best set tested against its class's paper value",
    lambda m: m.rho_star_tests,
)
register_table("fits", "constant, log-linear and quadratic fits by AICc per frontier", lambda m: m.fits)
register_table(
    "disagreement", "per setting, whether the targets' best cells disagree", lambda m: m.disagreement
)
register_table("race", "per setting and pilot budget, RACE's pilots against the full grid", lambda m: m.race)
register_table(
    "conventions", "rho* under the useful, executed, 6N and wall-time conventions", lambda m: m.convention
)
register_table(
    "reward_hacking",
    "per run, the change from base in its training reward, gsm pass@1 and the judge's score, and whether it games its reward",
    lambda m: m.hacked,
)
register_table(
    "reward_hacking_summary",
    "per reward system, the share of runs that game their reward",
    lambda m: m.hacked_summary,
)
register_table(
    "claims",
    "one row per registered claim: its verdict, its test, its operating characteristics and its power",
    lambda m: m.claims,
)
register_table("compute_cards", "the runs' compute cards, flattened", lambda m: m.cards)
register_table(
    "curve_fits",
    "per setting, cell and target, a saturating fit against log C: its asymptote with a seed-bootstrap interval, or not identified",
    lambda m: m.curve.fits,
)
register_table(
    "rho_star_by_budget",
    "rho*(C): the cells that could be best at each budget point",
    lambda m: m.curve.rho_star,
)
register_table(
    "size_star_by_budget",
    "size*(C): stage A's (policy, cell) pairs that could be best at equal FLOPs",
    lambda m: m.curve.size_star,
)
register_table("extrapolation", "each curve fitted up to C/2, C predicted", lambda m: m.curve.extrapolation)
register_table(
    "extrapolation_summary",
    "per target, the extrapolation's median error and coverage",
    lambda m: m.curve.extrapolation_summary,
)
register_table("recipe_pairs", "two recipes of one target rho, second minus first", lambda m: m.recipe_pairs)
register_table(
    "recipe_sd", "per target, the REML recipe SD at equal rho (the noise model)", lambda m: m.recipe_sd
)
register_table(
    "recipe_sd_check",
    "the REML recipe SD's bias and coverage in studies simulated at this design",
    lambda m: m.recipe_check,
)
register_table("race_plus", "per setting, RACE+ beside RACE and TRL's default", lambda m: m.plus.settings)
register_table("race_plus_cells", "per setting and cell, RACE+'s curve-based scores", lambda m: m.plus.cells)
register_table("race_plus_summary", "RACE+ over the settings", lambda m: m.plus.summary)


def table_listing() -> str:
    """The tables :func:`analyse` writes, as a Markdown list (the docstrings' and notebook 40's)."""
    return "\n".join(f"- ``{t.name}.csv``: {t.about};" for t in TABLES) + (
        "\n- ``design.csv``: its post-hoc block, regenerated (the pre-registered block is ``paper-repro design``'s)."
    )
