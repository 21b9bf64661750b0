"""Our addition "at equal rho, the recipe does not matter", declared in the registry: whether rho
describes an allocation, from the profile's second recipes (two recipes of one target rho on the
same seeds). Its rule, truths and simulation: :mod:`paper_repro.analysis.tables.recipes`, which simulates
its pairs and calls the same decision on them.
"""

from __future__ import annotations

from paper_repro.analysis.claims.registry import OwnSimulation, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.verdict import NAN, Result


def _recipe_operating(study: Study) -> dict:
    from paper_repro.analysis.tables import recipes

    kwargs = {} if study.replicates is None else {"replicates": study.replicates}
    _, oc = recipes.recipe_operating(recipes.pairs_of(study.distinct), study.margins.recipe, **kwargs)
    return {**oc, "power_now": NAN, "seeds_for_80pct_power": NAN,
            "power_note": "see oc_held_when_true (recipes.py)"}  # fmt: skip


def _recipe_words(study: Study) -> str:
    from paper_repro.analysis.tables.recipes import recipe_test

    return recipe_test(study.margins.recipe)


@register_claim("recipes.rho_suffices", sentence="at equal rho, the recipe does not matter", kind="our addition",
                paper="report_rho", reads=("grid",), margins=("recipe",), words=_recipe_words,
                simulation=OwnSimulation(_recipe_operating, "differences of 0, 0.5, 1, 1.5 and 2 margins, "
                                         "and one pair differing by 2 margins"))  # fmt: skip
def _rho_suffices(study: Study) -> Result:
    from paper_repro.analysis.tables import recipes

    return recipes.recipe_decide(recipes.pairs_of(study.distinct), study.margins.recipe)
