"""The FLOP model's public import path, kept: ``paper_repro.flops`` is
:mod:`paper_repro.accounting.flops` (the same module object, so attributes read and patched through
either name are one)."""

import sys

from paper_repro.accounting import flops

sys.modules[__name__] = flops
