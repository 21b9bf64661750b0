"""The study in words, generated from its tables: the answer the README and notebook 40 open with
(:mod:`~paper_repro.analysis.report.answer`), the claims told one by one and a line per figure
(:mod:`~paper_repro.analysis.report.story`), and the README's generated blocks
(:mod:`~paper_repro.analysis.report.readme`; ``paper-repro report``).
"""
