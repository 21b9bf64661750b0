"""``python -m paper_repro.analysis.report [profile]``: an alias of ``paper-repro report``
(paper_repro/commands/report.py), which rewrites the README's generated blocks from the committed
tables (:mod:`paper_repro.analysis.report.readme`)."""

from paper_repro.aliases import run_command

run_command("report")
