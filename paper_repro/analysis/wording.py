"""Words the claims, the tables and the report share: a pilot budget as a fraction of the full one
(:func:`fraction_words`), a budget point as a multiple of C (:func:`point_words`), a number to three
digits (:func:`num`), a simulated share as a percentage (:func:`percent`: every report prints the
same share the same way, 2.5%, never 2% in one place and 2.5% in another) and the recipe effect a best set allows for (:func:`recipe_words`). Each
claim's own words are declared with it (:mod:`paper_repro.analysis.claims`); the targets' names are
:data:`paper_repro.common.results.TARGET_WORDS`.
"""

from __future__ import annotations

import math
from fractions import Fraction

from paper_repro.config import Margins


def fraction_words(fraction: float) -> str:
    """``0.125`` -> ``1/8``: a pilot budget as a fraction of the full one."""
    return str(Fraction(fraction).limit_denominator(1000))


def recipe_words(m: Margins) -> str:
    """The recipe effect the best sets allow for, as the claims' words state it."""
    if m.recipe_sd is None:
        return "the recipe effect the study's runs show (the REML recipe SD of each target)"
    return f"a recipe effect of SD {m.recipe_sd}"


def num(value, digits: int = 3) -> str:
    return f"{float(value):.{digits}g}"


def finite(value) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def point_words(point: float) -> str:
    """A budget point as a multiple of C: ``C/16``, ``C``, ``4C``."""
    point = float(point)
    if point >= 1:
        return "C" if point == 1 else f"{point:g}C"
    return f"C/{1 / point:g}"


def percent(share, missing: str = "not simulated") -> str:
    """A share as a percentage to three digits (``0.025`` -> ``2.5%``, ``0.985`` -> ``98.5%``, ``1`` ->
    ``100%``), or ``missing`` when it is not a number: the one way the report writes a simulated share."""
    return f"{100 * float(share):.3g}%" if finite(share) else missing
