"""A package's lazy surface (PEP 562, as TRL's ``_LazyModule``): names read from the package, each
imported from the module that owns it on first use, so that importing one part loads no other."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module


def lazy_surface(package: str, owners: Mapping[str, str]) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``package``'s ``__init__``: ``owners`` maps a name to its module,
    absolute or relative to the package (``".noise"``)."""
    namespace = import_module(package).__dict__

    def __getattr__(name: str):
        if name not in owners:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        owner = owners[name]
        value = getattr(
            import_module(owner, package) if owner.startswith(".") else import_module(owner), name
        )
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *owners})

    return __getattr__, __dir__
