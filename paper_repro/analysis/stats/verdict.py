"""A claim's outcome: the four verdicts and the record every claim test returns."""

from __future__ import annotations

from dataclasses import dataclass

NAN = float("nan")
VERDICTS = ("held", "not held", "inconclusive", "heterogeneous")  # heterogeneous: settings contradict


@dataclass(frozen=True)
class Result:
    """One claim's estimate, its interval, its verdict (one of :data:`VERDICTS`) and a note saying why."""

    value: float = NAN
    low: float = NAN
    high: float = NAN
    verdict: str = "inconclusive"
    note: str = ""
    best_cells: str = ""  # the cells that could be best behind the verdict, per setting
    unanimous: str = ""  # a class claim: "held" / "not held" when every setting says so (heterogeneous too)
    also: str = (
        ""  # a truth inside a rule's grey zone: the other verdict that is right too (not scored wrong)
    )

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}: one of {', '.join(VERDICTS)}")
