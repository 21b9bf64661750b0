"""The compute-curve claims (our addition), declared in the registry: does the best allocation move
with the budget, and does the best policy grow with it? Both read the grid runs' points on their
budget ladders (``curves.csv``) at the ladder's two ends; their rules, truths and simulation are in
:mod:`paper_repro.analysis.curves`, which calls the same decisions on its simulated ends.
"""

from __future__ import annotations

from paper_repro.analysis.claims.registry import OwnSimulation, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.verdict import Result

TARGET = "native_reward"


def _size_order(study: Study) -> list[str]:
    """Stage A's policy labels, smallest first (the profile's, then any other the curves name)."""
    from paper_repro.analysis import curves as cv

    grid = cv.pairs(study.curve_rows)
    found = cv.size_order(grid["size"]) if len(grid) else []
    sizes = study.classes.sizes
    return [*sizes, *(s for s in found if s not in sizes)]


def _replicates(study: Study) -> dict:
    return {} if study.replicates is None else {"replicates": study.replicates}


def _moves_ends(study: Study):
    from paper_repro.analysis import curves as cv

    return cv.setting_ends(study.curve_rows, TARGET, study.classes.shared)


def _moves_operating(study: Study) -> dict:
    from paper_repro.analysis import curves as cv

    return cv.moves_operating(_moves_ends(study), study.curve_tau, **_replicates(study))


def _grows_operating(study: Study) -> dict:
    from paper_repro.analysis import curves as cv

    ends = cv.size_ends(study.curve_rows, TARGET)
    return cv.grows_operating(ends, _size_order(study), study.curve_tau, **_replicates(study))


def _moves_words(study: Study) -> str:
    from paper_repro.analysis import curves as cv

    return cv.moves_test(TARGET, study.curve_tau)


def _grows_words(study: Study) -> str:
    from paper_repro.analysis import curves as cv

    return cv.grows_test(TARGET, study.curve_tau)


@register_claim("curves.moves", sentence="the best allocation moves with the budget", kind="our addition",
                paper="not tested", reads=("curves",), margins=("recipe_sd",), words=_moves_words,
                simulation=OwnSimulation(_moves_operating, "observed, static, moving"))  # fmt: skip
def _curves_moves(study: Study) -> Result:
    from paper_repro.analysis import curves as cv

    return cv.moves_decide(_moves_ends(study), study.curve_tau)


@register_claim("curves.grows", sentence="as the budget grows, the best policy gets bigger", kind="our addition",
                paper="not tested", reads=("curves",), margins=("recipe_sd",), words=_grows_words,
                simulation=OwnSimulation(_grows_operating, "observed, static, growing"))  # fmt: skip
def _curves_grows(study: Study) -> Result:
    from paper_repro.analysis import curves as cv

    return cv.grows_decide(cv.size_ends(study.curve_rows, TARGET), _size_order(study), study.curve_tau)
