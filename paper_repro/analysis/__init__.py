"""The final analysis: every table and figure from the result tables alone.

:func:`analyse` (``paper-repro analyse``, notebook 40) reads ``runs.csv`` (and the step logs beside
it) and writes, beside them:

- ``frontiers.csv``: per setting and cell, every target's mean with a 95% interval over seeds;
- ``optima.csv``: per setting and target, the cells that could be best at 95% (the decision), rho*
  of the unimodal fit with its seed-bootstrap interval and status (interior, boundary, not
  identified), and as descriptions the quadratic's vertex with Fieller's interval, the F test of the
  cells and the argmax cell (:mod:`paper_repro.analysis.stats.optima`);
- ``rho_star_tests.csv``: per distinct setting, its best set tested against its class's paper value;
- ``fits.csv``: constant, log-linear and quadratic fits by AICc per frontier;
- ``disagreement.csv``, ``race.csv``;
- ``conventions.csv``: rho* under the useful, executed, 6N and wall-time conventions;
- ``reward_hacking.csv``: per run, the change from base in its training reward, gsm pass@1 and the
  judge's score, and whether it games its reward (:mod:`paper_repro.analysis.tables.hacking`);
  ``reward_hacking_summary.csv`` per reward system;
- ``claims.csv``: one row per claim, its verdict, its test, its operating characteristics (from
  ``design.csv``, written by ``paper-repro design``: :mod:`paper_repro.analysis.design`) and its
  power: one row per claim declared in the registry (:mod:`paper_repro.analysis.claims`);
- ``compute_cards.csv``: the runs' compute cards, flattened (:mod:`paper_repro.analysis.tables.cards`; runs
  recorded before the ledger wrote cards have none);
- from ``curves.csv`` (each grid run at the points of its budget ladder, :mod:`paper_repro.ladder`;
  :mod:`paper_repro.analysis.tables.curves`): ``curve_fits.csv`` (per setting and cell, a saturating fit of
  each target against log C, its asymptote with a seed-bootstrap interval or *not identified*),
  ``rho_star_by_budget.csv`` (rho*(C): the cells that could be best at each budget point),
  ``size_star_by_budget.csv`` (size*(C): the (policy, cell) pairs of stage A that could be best at
  equal FLOPs), ``extrapolation.csv`` and its summary (each curve fitted up to C/2, C predicted), and
  the curve claims (:mod:`paper_repro.analysis.claims.curves`, :mod:`paper_repro.analysis.claims.sizes`). A
  stage whose runs go on past C counts at C by its point there (:func:`frontiers.at_full_budget`);

and the figures to ``figures/<profile>/``. Deleting every output and rerunning rebuilds them from the
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

from paper_repro.lazy import lazy_surface

if TYPE_CHECKING:
    from paper_repro.analysis.pipeline import REQUIRED, Analysis, analyse, figures_folder, simulate_design
    from paper_repro.analysis.tables.frontiers import default_rows, study_rows
    from paper_repro.planning import shared_settings

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
    "shared_settings": "paper_repro.planning",
}


__getattr__, __dir__ = lazy_surface(__name__, _LAZY)
