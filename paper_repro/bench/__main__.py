"""``python -m paper_repro.bench``: :func:`paper_repro.bench.cli.main`."""

import sys

from paper_repro.bench.cli import main

sys.exit(main())
