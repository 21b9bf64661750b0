"""Tables built from the result tables: the frontiers and the runs the analysis reads
(:mod:`~paper_repro.analysis.tables.frontiers`), reward hacking, the FLOP conventions, the compute
cards and the recipe pairs. (The compute curves and RACE are :mod:`paper_repro.analysis.curves` and
:mod:`paper_repro.analysis.race`.)"""
