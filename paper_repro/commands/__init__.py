"""The commands of ``paper-repro``, one module each (as trl's ``trl/cli.py`` dispatches to
``trl/scripts/<command>.py``). A command module holds

- ``NAME``: the command (``paper-repro NAME``), and ``HELP``: its line in ``paper-repro --help``;
- ``add_parser(subparsers)``: its parser and options, defaults read from the config or function they
  mirror (:mod:`paper_repro.commands._options`);
- ``run(args) -> int``: what it does, its exit status.

:func:`command_modules` finds every module of this package that is not private (``_name``), so a new
command is one new module here. ``python -m paper_repro <command>`` runs the same parsers
(``paper_repro/__main__.py``)."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def command_modules() -> list[ModuleType]:
    """Every command module of this package, in the order of their names."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))
    modules = [importlib.import_module(f"{__name__}.{name}") for name in names]
    for module in modules:
        missing = [a for a in ("NAME", "HELP", "add_parser", "run") if not hasattr(module, a)]
        if missing:
            raise TypeError(
                f"{module.__name__} lacks {', '.join(missing)}: a command module defines NAME, HELP, "
                "add_parser and run; a helper module's name starts with an underscore"
            )
    return modules
