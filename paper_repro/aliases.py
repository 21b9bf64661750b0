"""The ``python -m paper_repro.<module>`` spellings of ``paper-repro <command>``, kept so that older
instructions still work. Each such module ends with ``run_command("<command>")`` under its
``__main__`` guard, which runs ``paper-repro <command>`` with the same arguments: one parser per
command (:mod:`paper_repro.commands`), whichever spelling started it.

The hand-over is by name (:func:`runpy.run_module`), as a shell alias would: the modules that keep an
alias sit in lower layers than the command line, which they never import (``.importlinter``)."""

from __future__ import annotations

import runpy
import sys


def run_command(name: str) -> None:
    """Run ``paper-repro <name> <this process's arguments>``; exits with the command's status."""
    sys.argv = ["paper-repro", name, *sys.argv[1:]]
    runpy.run_module("paper_repro.cli", run_name="__main__", alter_sys=True)
