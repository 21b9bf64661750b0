"""One registry shape for everything the analysis lists: its claims
(:mod:`paper_repro.analysis.claims.registry`), its figures (:mod:`paper_repro.analysis.figures.registry`)
and the tables it writes (:mod:`paper_repro.analysis.tables.registry`).

A :class:`Registry` maps a name to one declaration, in the order declared (the order the analysis
writes, draws and lists them). A name is declared once; asking for one that is not there says which
are. A frozen registry takes no more declarations (a listing that must not change under a reader).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Declarations of one kind (``what``: "claim", "figure", "table"), by name, in declaration order."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._items: dict[str, T] = {}
        self._frozen = False

    def register(self, name: str, item: T) -> T:
        """Declare ``item`` as ``name``; returns it. A name declared twice, or a declaration into a
        frozen registry, is an error."""
        if self._frozen:
            raise RuntimeError(f"the {self.what} registry is frozen: {name!r} cannot be added")
        if name in self._items:
            raise ValueError(f"{self.what} {name!r} is registered twice")
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        if name not in self._items:
            raise KeyError(f"no {self.what} {name!r}; registered: {', '.join(self._items)}")
        return self._items[name]

    def remove(self, name: str) -> None:
        """Withdraw a declaration (a test's own, after the test)."""
        if self._frozen:
            raise RuntimeError(f"the {self.what} registry is frozen: {name!r} cannot be removed")
        self._items.pop(name, None)

    def freeze(self) -> None:
        self._frozen = True

    def names(self) -> list[str]:
        return list(self._items)

    def values(self) -> list[T]:
        return list(self._items.values())

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(self.values())

    def __len__(self) -> int:
        return len(self._items)
