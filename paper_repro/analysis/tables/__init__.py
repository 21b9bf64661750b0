"""Tables built from the result tables: the frontiers and the runs the analysis reads by role
(:mod:`~paper_repro.analysis.tables.frontiers`), the compute curves
(:mod:`~paper_repro.analysis.tables.curves`), RACE and RACE+ (:mod:`~paper_repro.analysis.tables.race`,
:mod:`~paper_repro.analysis.tables.race_plus`), reward hacking, the FLOP conventions, the compute
cards and the recipe pairs."""
