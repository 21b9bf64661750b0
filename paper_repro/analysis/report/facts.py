"""The numbers the README and ``docs/`` state about the study, each computed in one place from the
result tables (:func:`study_facts`), and written into the text between fact markers::

    the study analysed <!-- fact:study.runs -->675<!-- /fact --> distinct runs

``paper-repro report`` rewrites every marker (:func:`fill_facts`), so the README,
the docs and the tables cannot disagree; ``tests/test_numbers.py`` fails when a marker is stale, when
a marker names no fact, or when the prose states such a number outside a marker (:data:`STATED`),
except in a dated record (a section whose heading carries its date or issue: numbers of that day) or
between ``<!-- history -->`` and ``<!-- /history -->`` (an earlier design, said so in the text).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

MARKER = re.compile(r"<!-- fact:(?P<name>[\w.]+) -->(?P<value>.*?)<!-- /fact -->")
# phrases that state a number about the study (the number is the first group): outside a marker, a
# record or a history block, the prose may not state them; each names the fact that owns it
STATED: dict[str, str] = {
    r"(\d[\d,]*) distinct runs": "study.runs",
    r"(?:study|design)(?:'s)?,? (?:of |has |had |analysed |ran |took )?\(?(\d[\d,]*) runs": "study.runs",
    r"\((\d[\d,]*) runs[:;,]": "study.runs",
    r"(\d[\d,]*) (?:full-budget )?grid runs": "study.grid_runs",
    r"(\d[\d,]*) (?:RACE )?pilot runs": "study.pilot_runs",
    r"(\d+) cells over": "study.cells",
    r"(\d+) (?:grid )?seeds per (?:full-budget )?cell": "study.seeds",
    r"recipe SD (?:of |about |is )?(0\.\d+)": "study.recipe_sd",
    r"frontier'?s? height (?:of |is )?\(?(0\.\d+)": "study.frontier_height",
    r"(\d[\d,]*) rows of (?:earlier|other) generations": "runs.history_rows",
}


def _num(value: float) -> str:
    return f"{float(value):.3g}"


def study_facts(profile: str = "cpu-tiny", root: Path | None = None) -> dict[str, str]:
    """Every fact, by name, as the text states it, from ``data/results/<profile>/`` under ``root``."""
    from paper_repro.analysis.tables.frontiers import at_full_budget, load_curves, load_runs, study_rows
    from paper_repro.common.paths import repo_root
    from paper_repro.config import load_profile

    results = (root or repo_root()) / "data" / "results" / profile
    design = load_profile(profile)
    runs = load_runs(results / "runs.csv", design)
    # a run past C (stage A's) counts by its point at C, as the analysis reads it
    rows = study_rows(
        design, at_full_budget(runs, load_curves(results / "curves.csv", runs), design.budget_flops)
    )
    ids = lambda *roles: len({i for r in roles for i in rows[r]["run_id"]})  # noqa: E731
    grid = rows["grid"].drop_duplicates("run_id")  # a run two settings share counts once
    facts = {
        "study.runs": len(runs),
        "study.grid_runs": ids("grid"),
        "study.pilot_runs": ids(*[r for r in rows if r.startswith("pilot")]),
        "study.fresh_runs": ids("fresh", "fresh_default"),
        "study.cells": grid.groupby(["setting", "cell"]).ngroups,
        "study.settings": grid["setting"].nunique(),
    }
    claims = pd.read_csv(results / "claims.csv") if (results / "claims.csv").exists() else pd.DataFrame()
    if "seeds_per_cell" in claims and len(claims):
        facts["study.seeds"] = int(claims["seeds_per_cell"].max())
    sd = pd.read_csv(results / "recipe_sd.csv") if (results / "recipe_sd.csv").exists() else pd.DataFrame()
    if len(sd):
        facts["study.recipe_sd"] = _num(sd.set_index("target").loc["native_reward", "recipe_sd"])
    post = _post_hoc(results)
    if post is not None:
        facts["study.frontier_height"] = _num(post["amplitude"].iloc[0])
    history = results / "runs_history.csv"
    if history.exists():
        facts["runs.history_rows"] = f"{len(pd.read_csv(history, usecols=['run_id'])):,}"
    return {k: f"{v:,}" if isinstance(v, int) else str(v) for k, v in facts.items()}


def _post_hoc(results: Path) -> pd.DataFrame | None:
    path = results / "design.csv"
    if not path.exists():
        return None
    d = pd.read_csv(path)
    post = d[d["block"] == "post-hoc"] if "block" in d else d.iloc[0:0]
    return post if len(post) else None


def fill_facts(text: str, facts: dict[str, str]) -> str:
    """``text`` with every fact marker's value rewritten from ``facts``; a marker naming no fact is
    an error that says which facts exist."""

    def one(m: re.Match) -> str:
        name = m.group("name")
        if name not in facts:
            raise KeyError(f"fact marker names {name!r}; the facts are {', '.join(sorted(facts))}")
        return f"<!-- fact:{name} -->{facts[name]}<!-- /fact -->"

    return MARKER.sub(one, text)


def documents(root: Path) -> list[Path]:
    """The files whose prose states the study's numbers: the README and ``docs/*.md``."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def update_documents(profile: str = "cpu-tiny", root: Path | None = None) -> list[Path]:
    """Rewrite the fact markers of :func:`documents`; returns the files that changed."""
    from paper_repro.common.paths import repo_root

    root = root or repo_root()
    facts = study_facts(profile, root)
    changed = []
    for path in documents(root):
        text = path.read_text()
        new = fill_facts(text, facts)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed
