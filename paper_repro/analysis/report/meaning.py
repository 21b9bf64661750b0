"""What the plain answer's words mean (:mod:`paper_repro.analysis.report.plain`), in paragraphs for the
README's first screen and notebook 40, each built from the table or the file that owns its facts:

- the margin behind a "No" (:func:`margin_paragraph`: the profile's ``margins.regime``, never typed here,
  and the file that sets it);
- the verdicts that move when one grid seed is left out (:func:`moves`, :func:`other_moves`:
  ``claims.csv``'s ``leave_one_seed_out``);
- how the FLOP convention moves rho* and whether the convention claim decides anything
  (:func:`convention_paragraph`: ``conventions.csv`` and ``claims.csv``'s ``conventions.robust`` row);
- the testbed's size beside the paper-scale models' (:func:`testbed_line`: parameter counts from the
  models' configs, :func:`paper_repro.models.shape`).
"""

from __future__ import annotations

import re

import pandas as pd

from paper_repro.analysis.claims.additions import PER_CONVENTION
from paper_repro.analysis.tables.conventions import CONVENTIONS, NOTHING_DECIDED
from paper_repro.analysis.wording import finite, num
from paper_repro.config import Profile

# where docs/CHOICES.md says why the margin is the value it is (named, not linked: the words are read in
# the README and in notebook 40's executed copy, whose folders differ)
MARGIN_WHY = "docs/CHOICES.md, *The claims the study can decide*"
EVERY_CLAIM = (
    "RESULTS.md, *Every claim*"  # every claim with its leave-one-seed-out column (paper-repro report)
)
CONVENTION_CLAIM = "conventions.robust"
# each FLOP convention (conventions.csv's names, paper_repro.analysis.tables.conventions) in a reader's words
CONVENTION_WORDS = {
    "useful": "useful FLOPs (the paper's count)",
    "executed": "executed FLOPs (padding included)",
    "6N": "6N per token",
    "wall time": "wall time",
}
_MOVE = re.compile(r"seed (\d+): ([a-z ]+)")


def moves(cell) -> list[tuple[int, str]]:
    """The (seed, verdict) pairs of a ``leave_one_seed_out`` cell that says the verdict changes
    (``changes without seed 0: inconclusive; seed 2: not held``); [] where it stays the same, or
    was not recomputed."""
    text = cell if isinstance(cell, str) else ""
    if not text.startswith("changes without"):
        return []
    return [(int(seed), verdict.strip()) for seed, verdict in _MOVE.findall(text)]


def other_moves(claims: pd.DataFrame, named: set[str]) -> str:
    """One sentence on how many claims outside ``named`` (the ids the answer already states) change
    verdict without one seed, pointing to where each is listed; "" where none does. (Their names carry
    the study's jargon, which the README's first screen does not define.)"""
    if "leave_one_seed_out" not in claims or "id" not in claims:
        return ""
    rest = claims[~claims["id"].astype(str).isin(named)]
    moving = sum(bool(moves(v)) for v in rest["leave_one_seed_out"])
    if not moving:
        return ""
    return f"Of the other claims, {moving} change verdict without one seed ({EVERY_CLAIM}, its last column)."


def _where(profile: Profile) -> str:
    """The file ``profile`` was read from, relative to the checkout where it lies inside it."""
    from pathlib import Path

    from paper_repro.common.paths import repo_root

    path = Path(profile.source) if profile.source else None
    if path is None:
        return f"the {profile.name} profile"
    return f"`{path.relative_to(repo_root()) if path.is_relative_to(repo_root()) else path}`"


def margin_paragraph(profile: Profile | None, fragile: bool, others: str) -> str:
    """What "Yes", "No" and "Cannot tell" mean (the regime rule, with ``profile``'s ``margins.regime``,
    and the file it is set in; None: the margin named, not valued), and what a verdict that moves without
    one seed means (``fragile``: some stated verdict does), then ``others`` (:func:`other_moves`)."""
    size = (
        f" ({profile.margins.regime:g} native reward, set in {_where(profile)} under `margins:` before the runs)"
        if profile is not None
        else ""
    )
    said = (
        f'**What the words mean.** "No" means not by the *margin*, the smallest advantage that counts{size}: '
        "the 90% interval rules out an advantage that large or larger in the paper's direction; it does not "
        f"say there is none (a smaller advantage, none or the reverse all fit; why this margin: {MARGIN_WHY}). "
        '"Yes" means the interval lies wholly above 0; "Cannot tell", neither: the interval spans both 0 and '
        "the margin."
    )
    if fragile:
        said += (
            " A verdict said to turn without one seed rests on that seed: the same rule on the study less that "
            "seed gives the other verdict (`claims.csv`'s `leave_one_seed_out`)."
        )
    return f"{said} {others}".strip()


def _spans(rows: pd.DataFrame) -> list[tuple[str, dict[str, float]]]:
    """Per group of ``conventions.csv`` in its order, rho* under each convention, for the groups whose
    rho* is identified under every convention."""
    out = []
    for group, g in rows.groupby("group", sort=False):
        stars = {str(r["convention"]): r["rho_star"] for _, r in g.iterrows() if finite(r.get("rho_star"))}
        if set(stars) == set(CONVENTIONS):
            out.append((str(group), {c: float(stars[c]) for c in CONVENTIONS}))
    return out


def _convention_verdict(claims: pd.DataFrame) -> str:
    """What the convention claim (``conventions.robust``) says: no share and why (in plain words where
    the reason is that no convention decided anything, else its note's reason), or its verdict and share."""
    row = claims[claims["id"].astype(str) == CONVENTION_CLAIM] if "id" in claims else claims.iloc[0:0]
    if row.empty:
        return ""
    r = row.iloc[0]
    if not finite(r.get("our_value")):
        note = str(r["note"]) if isinstance(r.get("note"), str) else ""
        why = (
            "under every count, every verdict on where the best update share lies is *cannot tell*, so there "
            "is no decision to keep or lose"
            if note.startswith(NOTHING_DECIDED)
            else note.partition(f"; {PER_CONVENTION}")[0].removeprefix("not computable: ")
        )
        if "id" in claims and (claims["id"].astype(str) == "convention.regimes_agree").any():
            # the regime contrasts under each count are decided (the answer's paragraph on the count)
            return f"Where the best update share lies, the rho* windows (the ranges of update share the paper names as best), stays undecided under every count: {why}."
        return f"Whether the verdicts survive a change of count is not decided: {why}."
    return (
        f"The convention claim is {r['verdict']}: the verdicts under {num(float(r['our_value']) * 100, 3)}% "
        "of the counts match the useful count's."
    )


def convention_paragraph(conventions: pd.DataFrame | None, claims: pd.DataFrame) -> str:
    """How the FLOP convention moves rho* (``conventions.csv``: the first group identified under every
    convention in full, the others' spans) and whether the convention claim decides anything."""
    spans = _spans(conventions) if conventions is not None and len(conventions) else []
    verdict = _convention_verdict(claims)
    if not spans:
        return f"**How compute is counted.** {verdict}".strip() if verdict else ""
    (first, stars), rest = spans[0], spans[1:]
    each = ", ".join(f"{stars[c]:.2f} counting {CONVENTION_WORDS.get(c, c)}" for c in stars)
    others = "; ".join(f"{g}'s {min(s.values()):.2f}–{max(s.values()):.2f}" for g, s in rest)
    return (
        f"**How compute is counted moves rho itself.** {first}'s fitted best update share reads {each}"
        + (f" ({others}; `conventions.csv`)" if others else " (`conventions.csv`)")
        + ": compare a rho with another study's only under the same count. "
        + verdict
    ).strip()


def _listed(words: list[str]) -> str:
    """``a, b and c``."""
    return f"{', '.join(words[:-1])} and {words[-1]}" if len(words) > 1 else "".join(words)


def size_words(parameters: int) -> str:
    """A parameter count to two or three digits: ``79k``, ``412k``, ``1.5B``."""
    if parameters < 1e6:
        return f"{parameters / 1e3:.0f}k"
    if parameters < 1e9:
        return f"{parameters / 1e6:.3g}M"
    return f"{parameters / 1e9:.2g}B"


def model_sizes(profile: Profile) -> tuple[dict[str, int], int]:
    """The parameters of ``profile``'s policies (by label) and of its PRM, counted from their configs
    (:func:`paper_repro.models.shape`; no weights are read)."""
    from paper_repro import models

    policies = {label: models.shape(ref).parameter_count() for label, ref in profile.policies.items()}
    return policies, models.shape(profile.prm).parameter_count()


def _paper_scale() -> Profile | None:
    """The first shipped profile that is not a testbed (the paper's models), or None."""
    from paper_repro.config import load_profile
    from paper_repro.config.profile import profile_names

    return next((p for p in map(load_profile, profile_names()) if not p.testbed), None)


def testbed_line(profile: Profile) -> str:
    """The size of ``profile``'s models, so that a reader can judge how far its answer may transfer:
    its policies' and PRM's parameters and, for a testbed, those of the first paper-scale profile."""
    policies, prm = model_sizes(profile)
    labels = list(policies)
    sizes = [size_words(policies[k]) for k in labels]
    said = (
        f"**The models' size.** These verdicts come from the `{profile.name}` profile: "
        f"{'policies ' + _listed(labels) if len(labels) > 1 else 'a policy'} of {_listed(sizes)} parameters and "
        f"a PRM of {size_words(prm)} (counted from their configs)"
    )
    paper = _paper_scale() if profile.testbed else None
    if paper is None:
        return said + "."
    big, big_prm = model_sizes(paper)
    pairs = (
        zip(sorted(big.values()), sorted(policies.values()), strict=True)  # size for size
        if len(big) == len(policies)
        else [(b, s) for b in big.values() for s in policies.values()]
    )
    ratio = [b / s for b, s in pairs]
    times = lambda x: f"{float(f'{x:.2g}'):,.0f}"  # noqa: E731  (two digits: 19,527 -> 20,000)
    return (
        f"{said}, on the task `{profile.task}`; the `{paper.name}` profile's policies have "
        f"{_listed([size_words(n) for n in big.values()])} parameters and its PRM {size_words(big_prm)}: "
        f"{times(min(ratio))} to {times(max(ratio))} times as many{', size for size' if len(big) == len(policies) else ''}. "
        "Nothing here tests whether the answer holds at that scale."
    )
