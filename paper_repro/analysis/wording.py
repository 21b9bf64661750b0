"""Words the claims and the report share: a pilot budget as a fraction of the full one
(:func:`fraction_words`) and the recipe effect a best set allows for (:func:`recipe_words`). Each
claim's own words are declared with it (:mod:`paper_repro.analysis.claims`); the targets' names are
:data:`paper_repro.results.TARGET_WORDS`.
"""

from __future__ import annotations

from fractions import Fraction

from paper_repro.config import Margins


def fraction_words(fraction: float) -> str:
    """``0.125`` -> ``1/8``: a pilot budget as a fraction of the full one."""
    return str(Fraction(fraction).limit_denominator(1000))


def recipe_words(m: Margins) -> str:
    """The recipe effect the best sets allow for, as the claims' words state it."""
    if m.recipe_sd is None:
        return "the recipe effect the study's frontiers show (the unimodal fits' lack of fit)"
    return f"a recipe effect of SD {m.recipe_sd}"
