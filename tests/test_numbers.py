"""Every number the README and ``docs/`` state about the study comes from the tables: each is a fact
marker (:mod:`paper_repro.analysis.report.facts`) whose value is the fact's, and the prose states
none outside one, except in a dated record or a history block (an earlier design, said so)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from paper_repro.analysis.report import facts as F
from paper_repro.common.paths import repo_root

BLOCK = re.compile(r"<!-- (?P<name>[\w-]+):start -->.*?<!-- (?P=name):end -->", re.S)
HISTORY = re.compile(r"<!-- history -->.*?<!-- /history -->", re.S)
HEADING = re.compile(r"^(#+) (.*)$", re.M)
RECORD = re.compile(r"\d{4}-\d{2}-\d{2}|issue \d+")


def _blank(text: str, pattern: re.Pattern) -> str:
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def unmarked(text: str) -> list[tuple[int, str, str]]:
    """(line, phrase, fact) for each study number ``text`` states outside a marker, a generated block,
    a code block, a history block and a dated record."""
    for pattern in (re.compile(r"```.*?```", re.S), BLOCK, HISTORY, F.MARKER):
        text = _blank(text, pattern)
    spans, stack = [], []  # dated records: a dated heading to the next heading at its level or above
    for m in HEADING.finditer(text):
        level = len(m.group(1))
        while stack and stack[-1][0] >= level:
            _, start = stack.pop()
            spans.append((start, m.start()))
        if RECORD.search(m.group(2)) and not stack:
            stack.append((level, m.start()))
    spans += [(start, len(text)) for _, start in stack]
    out = []
    for pattern, fact in F.STATED.items():
        for m in re.finditer(pattern, text):
            if not any(a <= m.start() < b for a, b in spans):
                out.append((text.count("\n", 0, m.start()) + 1, m.group(0), fact))
    return sorted(out)


@pytest.fixture(scope="module")
def facts():
    if not (repo_root() / "data/results/cpu-tiny/claims.csv").exists():
        pytest.skip("no committed study")
    return F.study_facts("cpu-tiny")


@pytest.mark.parametrize("path", F.documents(repo_root()), ids=lambda p: p.name)
def test_every_fact_marker_holds_the_tables_value(path: Path, facts):
    text = path.read_text()
    assert F.fill_facts(text, facts) == text, (
        f"{path.name} states a study number the tables no longer give: paper-repro report"
    )


@pytest.mark.parametrize("path", F.documents(repo_root()), ids=lambda p: p.name)
def test_no_study_number_is_stated_outside_a_marker(path: Path, facts):
    found = unmarked(path.read_text())
    said = [f"line {line}: {phrase!r} (the fact {fact}, now {facts.get(fact, 'not computed')})"
            for line, phrase, fact in found]  # fmt: skip
    assert not said, (
        f"{path.name} states study numbers by hand; write them as <!-- fact:NAME -->…<!-- /fact --> "
        f"(paper-repro report fills them), or mark an earlier design's as history: {said}"
    )


def test_the_checks_catch_a_stale_or_a_typed_number(facts):
    typed = "## Status\n\nThe study has 685 distinct runs and a recipe SD of 0.0448.\n"
    assert [f for _, _, f in unmarked(typed)] == ["study.runs", "study.recipe_sd"]
    stale = "The study has <!-- fact:study.runs -->1<!-- /fact --> distinct runs."
    assert F.fill_facts(stale, facts) != stale
    assert not unmarked(stale)
    dated = "## The powered study (issue 20, 2026-12-01)\n\n705 distinct runs.\n\n## Now\n\n7 distinct runs\n"
    assert [f for _, _, f in unmarked(dated)] == ["study.runs"]
    with pytest.raises(KeyError, match="the facts are"):
        F.fill_facts("<!-- fact:study.nothing -->1<!-- /fact -->", facts)


def test_the_readmes_dry_run_printout_is_the_dry_runs(capsys, monkeypatch):
    """The gpu-paper dry run ``docs/gpu-paper.md`` shows (its GPU-hours and the picks' bound) is what
    the command prints now, line for line."""
    from paper_repro.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    text = (repo_root() / "docs" / "gpu-paper.md").read_text()
    start = text.index("```\nGPU-hours on ")
    shown = text[start + 4 : text.index("```", start + 4)].strip().splitlines()
    assert main(["run", "--profile", "gpu-paper", "--stage", "all", "--dry-run"]) == 0
    printed = {line.rstrip() for line in capsys.readouterr().out.splitlines()}
    stale = [line for line in shown if line.rstrip() not in printed]
    assert not stale, (
        f"docs/gpu-paper.md's dry-run printout is stale (rerun `paper-repro run --profile gpu-paper --dry-run`): {stale}"
    )
