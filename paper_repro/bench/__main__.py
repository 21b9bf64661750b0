"""``python -m paper_repro.bench <bench>``: an alias of ``paper-repro bench <bench>``
(paper_repro/commands/bench.py)."""

from paper_repro.aliases import run_command

run_command("bench")
