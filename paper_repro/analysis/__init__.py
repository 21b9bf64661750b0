"""The final analysis: every table and figure from the result tables alone.

:func:`analyse` (``paper-repro analyse``, notebook 40) reads ``runs.csv`` (and the step logs beside
it) and writes beside them the tables listed at the end of this docstring (one declaration each,
:mod:`paper_repro.analysis.tables.registry`; the listing is generated from it), and the figures to ``figures/<profile>/``. Deleting every output and rerunning rebuilds them from the
committed runs. Settings that share runs (stage B's ``sparse`` is stage A's middle policy) appear
in the per-setting tables with ``same_runs_as`` and count once in every claim.

The package is split by job, and its surface is lazy (PEP 562: a name is imported on first use), so
that importing one part (the study imports :mod:`~paper_repro.analysis.tables.frontiers`) loads no
statistics library:

- statistics (:mod:`~paper_repro.analysis.stats`): best sets and unimodal fits, the fitted forms, the
  saturating compute curve, a claim's outcome;
- tables from runs (:mod:`~paper_repro.analysis.tables`): frontiers, compute curves, RACE and RACE+,
  reward hacking, conventions, compute cards, recipe pairs;
- the claims registry (:mod:`~paper_repro.analysis.claims`): one declaration per claim, the claims
  table built from it;
- design simulation (:mod:`~paper_repro.analysis.design`): each simulated claim's own decision on
  studies of known truth, and candidate designs at their cost;
- figures (:mod:`~paper_repro.analysis.figures`) and the study in words
  (:mod:`~paper_repro.analysis.report`), with the words every part shares
  (:mod:`~paper_repro.analysis.wording`);
- the pipeline that runs them: :mod:`~paper_repro.analysis.pipeline`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from paper_repro.common.lazy import lazy_surface

if TYPE_CHECKING:
    from paper_repro.analysis.pipeline import REQUIRED, Analysis, analyse, figures_folder, simulate_design
    from paper_repro.analysis.tables.frontiers import default_rows, study_rows
    from paper_repro.run.design_cost import shared_settings

__all__ = [
    "REQUIRED",
    "Analysis",
    "analyse",
    "default_rows",
    "figures_folder",
    "shared_settings",
    "simulate_design",
    "study_rows",
]
# name -> the module that owns it, imported on first use
_LAZY = {
    **dict.fromkeys(__all__, "paper_repro.analysis.pipeline"),
    **dict.fromkeys(("default_rows", "study_rows"), "paper_repro.analysis.tables.frontiers"),
    "shared_settings": "paper_repro.run.design_cost",
}


__getattr__, __dir__ = lazy_surface(__name__, _LAZY)


def _listing() -> str:
    from paper_repro.analysis.tables.registry import table_listing

    return "\n\nThe tables :func:`analyse` writes, in order:\n\n" + table_listing()


__doc__ = (__doc__ or "") + _listing()  # generated from the table registry, never typed twice
