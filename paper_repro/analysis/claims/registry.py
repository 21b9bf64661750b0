"""The claims registry: one declaration per claim, which everything that lists claims reads.

A claim is declared once, with :func:`register_claim` on its decision::

    @register_claim(
        "rho_star.rule_based",
        sentence="rule-based rewards: rho* ~ {paper}",
        kind="paper claim",
        paper="rho_star.rule_based",
        reads=("grid",),
        margins=("rho", "recipe_sd"),
        words=lambda study: near_words(...),
        simulation=Simulated(target="native_reward"),
    )
    def rule_based(study: Study) -> Result: ...

The declaration builds a :class:`ClaimSpec`: a stable id (nothing keys on the sentence), its
sentence, its kind (:data:`KINDS`), the paper's value (a key of
:data:`paper_repro.analysis.claims.paper.PAPER`), the tables it reads (:data:`READS`), the margins it
reads from the profile, what its estimate measures (``unit``), ``decide(study, **params) -> Result``, its words (the claims table's ``test``
column, which the README and notebook 40 print), and how its operating characteristics are
simulated:

- :class:`Simulated`: by the design simulator (:mod:`paper_repro.analysis.design`), which generates
  grid runs under known truths and calls this same ``decide`` on them (``design.csv``; the power
  columns from the committed frontiers' fits);
- :class:`OwnSimulation`: the claim simulates its own table (curves, recipe pairs) under its own
  truths and calls its own decision on it;
- :class:`NotSimulated`: with the reason.

A claim whose rows depend on the study (one per pilot budget) declares ``variants``: the study ->
the :class:`Variant` rows, each with an id suffix and the parameters its decision and sentence take.

:func:`claims` gives the registered claims of a study in declaration order; the analysis
(:func:`paper_repro.analysis.claims.table.claims_table`), leave-one-seed-out, the power and
operating-characteristics columns and the design simulator all iterate it. Adding a claim is one
declaration in one module of this package.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

from paper_repro.analysis.claims.paper import PAPER
from paper_repro.analysis.registry import Registry

if TYPE_CHECKING:
    from paper_repro.analysis.claims.study import Study
    from paper_repro.analysis.stats.verdict import Result

Kind = Literal["paper claim", "our addition", "consistency check", "description"]
# a description: a row the table keeps to say where something lies (the rho* windows, the targets'
# best cells), whose test cannot hold at the study's design, so it is not counted among the decided
# claims (docs/CHOICES.md)
KINDS: tuple[str, ...] = ("paper claim", "our addition", "consistency check", "description")
# the study's tables a claim may read: the full-budget grid runs, their per-cell frontier table, the
# RACE table (pilots), the fresh seeds' RACE picks and defaults, the grid's compute curves, the
# reward-hacking table, the run's step logs (the 6N convention's rho), stage E's per-problem rows
READS: tuple[str, ...] = ("grid", "frontier", "race", "fresh", "curves", "hacking", "steps", "test_time")
# when the rules of the claims declared here (their cells, contrasts, margins and noise model) were
# fixed (UTC): a study whose runs began after it tests them as registered, one whose runs began
# before it (the study of 2026-12-02) only as exploratory re-analysis (:func:`registration`)
RULES_FIXED = "2026-12-03T16:00:00+00:00"
# where the plain answer (README's summary, :mod:`paper_repro.analysis.report.plain`) names a claim
HEADLINES: dict[str, str] = {
    "question": "one of the paper's questions the answer opens with (asked in its plain-words question)",
    "optimum": "one of the paper's optima the answer says are decided or not",
    "check": "one of our own checks the answer names (asked in its plain-words question)",
}
Headline = Literal["question", "optimum", "check"]


@dataclass(frozen=True)
class Simulated:
    """Simulated by the design simulator on grid runs under its truths (``design.csv``).
    ``target``: the target whose rho* intervals its coverage reads (None: no coverage);
    ``truth``: what the claim is about, so what its verdict is scored against: "frontier" (the
    truth's frontier, any recipe at each rho) or "cells" (the cells as run, each with its drawn
    recipe effect: a claim about these recipes)."""

    target: str | None = None
    truth: Literal["frontier", "cells"] = "frontier"


@dataclass(frozen=True)
class OwnSimulation:
    """The claim simulates its own table under its own truths, with the same decision:
    ``operating(study, **params)`` returns the claims table's ``oc_*`` and ``power_*`` columns.
    ``design``: where its decision also reads the design simulator's grid studies (a claim on the
    grid runs' targets), how the simulator scores it there (:class:`Simulated`), so that candidate
    designs can be compared on it (``paper-repro design --candidates --with-claims``); its own
    simulation, on the committed layout, stays the claims table's."""

    operating: Callable[..., dict]
    truths: str  # the truths, in words (docs and the registry's listing)
    design: Simulated | None = None


@dataclass(frozen=True)
class NotSimulated:
    """No simulation, and why (the claims table's ``oc_note`` and ``power_note``)."""

    reason: str


Simulation = Simulated | OwnSimulation | NotSimulated


@dataclass(frozen=True)
class Variant:
    """One row of a claim with several: its id suffix, the parameters its decision takes, the words
    its sentence fills in, and where it differs from the declaration, its kind and paper value."""

    suffix: str
    params: dict[str, Any] = field(default_factory=dict)
    text: dict[str, str] = field(default_factory=dict)
    kind: str | None = None
    paper: str | None = None


@dataclass(frozen=True)
class ClaimSpec:
    """One registered claim (:func:`register_claim`)."""

    id: str
    sentence: str  # {paper} is the paper's value; {name} any of a variant's text
    kind: str
    paper: str  # a key of PAPER
    reads: tuple[str, ...]
    margins: tuple[str, ...]
    decide: Callable[..., Result]
    words: Callable[..., str]
    simulation: Simulation
    variants: Callable[[Study], list[Variant]] | None = None
    registered: str = RULES_FIXED  # when its rule was fixed (ISO 8601, UTC)
    unit: str = ""  # what the claims table's ``our_value`` (the "ours" column) measures, in words
    # the question it answers in plain words, for the README's summary ({rule}, {prm}: the paper's
    # rule-based and PRM-style optima); where the plain answer names it (:data:`HEADLINES`); whether
    # the design simulator's registered targets (paper_repro.analysis.design.candidates.TARGETS) apply
    question: str = ""
    headline: Headline | None = None
    design_target: bool = False

    def __post_init__(self) -> None:
        from paper_repro.config import Margins

        if not self.unit.strip():
            raise ValueError(f"claim {self.id}: say what its estimate measures (unit=...)")
        if self.headline is not None and self.headline not in HEADLINES:
            raise ValueError(
                f"claim {self.id}: headline {self.headline!r} is not one of {', '.join(HEADLINES)}"
            )
        if self.headline in ("question", "check") and not self.question.strip():
            raise ValueError(
                f"claim {self.id}: a {self.headline} headline is asked in words: give question=..."
            )

        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.paper not in PAPER:
            raise ValueError(
                f"claim {self.id}: no paper value {self.paper!r} (paper.PAPER has {sorted(PAPER)})"
            )
        unknown = [r for r in self.reads if r not in READS]
        if unknown or not self.reads:
            raise ValueError(f"claim {self.id}: reads {list(self.reads)}; the tables are {', '.join(READS)}")
        known = {f.name for f in fields(Margins)}
        if bad := [m for m in self.margins if m not in known]:
            raise ValueError(
                f"claim {self.id}: margins {bad} are not the profile's ({', '.join(sorted(known))})"
            )

    @property
    def paper_value(self) -> str:
        """The paper's value, as it states it."""
        return PAPER[self.paper].text

    def instances(self, study: Study | None = None) -> list[Claim]:
        """The claims table's rows of this declaration for ``study`` (one unless it has variants)."""
        if self.variants is None:
            return [Claim(self, self.id, self._sentence(self.paper, {}), self.kind, self.paper, {})]
        if study is None:
            return []
        return [
            Claim(
                self,
                f"{self.id}{v.suffix}",
                self._sentence(v.paper or self.paper, v.text),
                v.kind or self.kind,
                v.paper or self.paper,
                dict(v.params),
            )
            for v in self.variants(study)
        ]

    def _sentence(self, paper: str, text: dict[str, str]) -> str:
        return self.sentence.format(paper=PAPER[paper].text, **text)


@dataclass(frozen=True)
class Claim:
    """One row of the claims table: a declaration with its variant's parameters."""

    spec: ClaimSpec
    id: str
    sentence: str
    kind: str
    paper: str
    params: dict[str, Any]

    @property
    def paper_value(self) -> str:
        return PAPER[self.paper].text

    @property
    def simulation(self) -> Simulation:
        return self.spec.simulation

    def decide(self, study: Study) -> Result:
        return self.spec.decide(study, **self.params)

    def words(self, study: Study) -> str:
        return self.spec.words(study, **self.params)


_REGISTRY: Registry[ClaimSpec] = Registry("claim")


def register_claim(
    id: str,
    *,
    sentence: str,
    kind: Kind,
    paper: str,
    reads: tuple[str, ...],
    words: Callable[..., str],
    simulation: Simulation,
    unit: str,
    margins: tuple[str, ...] = (),
    variants: Callable[[Study], list[Variant]] | None = None,
    registered: str = RULES_FIXED,
    question: str = "",
    headline: Headline | None = None,
    design_target: bool = False,
) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
    """Declare a claim whose decision is the decorated function (``decide(study, **params)``);
    ``registered``: when its rule was fixed (ISO 8601), which :func:`registration` compares with a
    study's first run; ``unit``: what its estimate (the claims table's ``our_value``) measures, in words
    a reader of the table needs (the ``our_value_means`` column); ``question``, ``headline``: how the
    plain answer asks and names it (:data:`HEADLINES`); ``design_target``: the design simulator's
    registered targets apply to it."""

    def wrap(decide: Callable[..., Result]) -> Callable[..., Result]:
        spec = ClaimSpec(
            id,
            sentence,
            kind,
            paper,
            tuple(reads),
            tuple(margins),
            decide,
            words,
            simulation,
            variants,
            registered,
            unit,
            question,
            headline,
            design_target,
        )
        _REGISTRY.register(id, spec)
        return decide

    return wrap


def registration(claim: Claim, first_run: str | None) -> str:
    """ "pre-registered" when the claim's rule was fixed before the study's first run
    (``first_run``, ISO 8601), else "exploratory" (its contrast, cells or margin chosen after the
    runs could be seen); "" when the study's runs carry no time."""
    if not first_run:
        return ""
    import pandas as pd

    fixed, began = pd.Timestamp(claim.spec.registered), pd.Timestamp(first_run)
    fixed = fixed.tz_localize("UTC") if fixed.tzinfo is None else fixed
    began = began.tz_localize("UTC") if began.tzinfo is None else began
    return "pre-registered" if fixed < began else "exploratory"


def unregister(id: str) -> None:
    """Remove a declaration (tests that register a claim of their own)."""
    _REGISTRY.remove(id)


@contextmanager
def registered(id: str, decide: Callable[..., Result], **declaration) -> Iterator[ClaimSpec]:
    """A claim registered for the duration of a ``with`` block (a toy claim in a test)."""
    register_claim(id, **declaration)(decide)
    try:
        yield _REGISTRY.get(id)
    finally:
        unregister(id)


# the modules of declarations, in the claims table's order; a claim declared elsewhere (a user's, a
# test's) comes after them, in the order declared
FAMILIES = (
    "regimes",
    "frontier",
    "race",
    "tables",
    "additions",
    "curves",
    "sizes",
    "recipes",
    "conventions",
    "targets",
    "knobs",
    "race_null",
    "test_time",
)
_PACKAGE = "paper_repro.analysis.claims"


def specs() -> list[ClaimSpec]:
    """Every declaration: the families' in :data:`FAMILIES` order, each in the order declared, then
    any other. (The families register when their package is imported, which importing this module
    does first: :mod:`paper_repro.analysis.claims`.)"""

    def rank(s: ClaimSpec) -> int:
        module = s.decide.__module__
        family = module.rpartition(".")[2] if module.startswith(_PACKAGE) else ""
        return FAMILIES.index(family) if family in FAMILIES else len(FAMILIES)

    return sorted(_REGISTRY.values(), key=rank)


def headlines(kind: Headline) -> list[ClaimSpec]:
    """The declarations the plain answer names as ``kind`` (:data:`HEADLINES`), in the claims
    table's order."""
    return [s for s in specs() if s.headline == kind]


def design_targets() -> tuple[str, ...]:
    """The ids of the claims the design simulator's registered targets apply to."""
    return tuple(s.id for s in specs() if s.design_target)


def spec(id: str) -> ClaimSpec:
    return _REGISTRY.get(id)


def design_simulation(claim: Claim) -> Simulated | None:
    """How the design simulator scores ``claim`` on its grid studies: its :class:`Simulated`
    declaration, or an :class:`OwnSimulation`'s ``design``; None where the simulator cannot run it."""
    sim = claim.simulation
    if isinstance(sim, Simulated):
        return sim
    return sim.design if isinstance(sim, OwnSimulation) else None


def claims(
    study: Study | None = None, simulated: bool | None = None, ids: Sequence[str] | None = None
) -> list[Claim]:
    """The claims table's rows for ``study`` in declaration order; ``simulated=True``: only those the
    design simulator runs (:class:`Simulated`); ``ids``: only these (a declaration's variants are
    built only when one of them is asked for)."""
    chosen = specs() if ids is None else [s for s in specs() if any(i.startswith(s.id) for i in ids)]
    out = [c for s in chosen for c in s.instances(study)]
    if ids is not None:
        out = [c for c in out if c.id in ids]
    if simulated is not None:
        out = [c for c in out if isinstance(c.simulation, Simulated) == simulated]
    return out
