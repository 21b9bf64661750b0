"""``python -m paper_repro.analysis.report [profile]``: rewrite the README's generated blocks from
the committed tables (:mod:`paper_repro.analysis.report.readme`)."""

from paper_repro.analysis.report.readme import main

raise SystemExit(main())
