"""Words the claims, the tables and the report share: a pilot budget as a fraction of the full one
(:func:`fraction_words`), a budget point as a multiple of C (:func:`point_words`), a number to three
digits (:func:`num`) and the recipe effect a best set allows for (:func:`recipe_words`). Each
claim's own words are declared with it (:mod:`paper_repro.analysis.claims`); the targets' names are
:data:`paper_repro.results.TARGET_WORDS`.
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
