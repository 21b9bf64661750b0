"""``python -m paper_repro <command> ...``: the same as ``paper-repro <command> ...``
(:mod:`paper_repro.cli`), for an environment whose scripts folder is not on ``PATH``."""

import sys

from paper_repro.cli import main

sys.exit(main())
