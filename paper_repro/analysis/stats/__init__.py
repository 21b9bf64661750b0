"""The statistics the analysis decides and describes with, on no table of the study's: a frontier's
cells that could be best and its unimodal fit (:mod:`~paper_repro.analysis.stats.optima`), the best
sets of a runs table read once (:mod:`~paper_repro.analysis.stats.best_sets`), the fitted forms by
AICc (:mod:`~paper_repro.analysis.stats.fit_forms`), and a claim's outcome
(:mod:`~paper_repro.analysis.stats.verdict`)."""
