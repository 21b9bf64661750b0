"""The README's words: every term of the study's jargon (:data:`paper_repro.analysis.report.glossary.TERMS`)
that the README or the generated answer uses is defined (in bold) in ``docs/glossary.md``, and a reader
of the README meets the definition before the term: the term's first use lies in or after its "Words
we use" (which points to the glossary), or is itself a definition where it is used (the term in
italics or bold, its meaning beside it, or inside a link to the words)."""

from __future__ import annotations

import re

import pytest

from paper_repro.analysis.report.glossary import TERMS
from paper_repro.common.paths import repo_root

WORDS = "## Words we use"
GLOSSARY = repo_root() / "docs" / "glossary.md"


def _prose(text: str) -> str:
    """``text`` with fenced code blocks blanked (same length, so positions keep their meaning)."""
    return re.sub(r"```.*?```", lambda m: " " * len(m.group(0)), text, flags=re.S)


def _section(text: str, heading: str) -> tuple[int, int]:
    start = text.index(heading)
    end = text.index("\n## ", start + len(heading))
    return start, end


def _glossary_terms() -> set[str]:
    return _defined(GLOSSARY.read_text())


def _defined(section: str) -> set[str]:
    """The terms some bold span of ``section`` spells (a bold span may hold an escaped star: ``**rho\\***``)."""
    spans = re.findall(r"\*\*((?:\\\*|[^*])+?)\*\*", section)
    return {term for term, spellings in TERMS.items()
            if any(re.search(s, f"**{span}**") if s.startswith(r"\*\*") else re.search(rf"(?<![\w-]){s}(?![\w-])", span)
                   for s in spellings for span in spans)}  # fmt: skip


def first_uses(text: str) -> dict[str, re.Match]:
    out = {}
    for term, spellings in TERMS.items():
        hits = [m for s in spellings for m in re.finditer(rf"(?<![\w-]){s}(?![\w-])", text)]
        if hits:
            out[term] = min(hits, key=lambda m: m.start())
    return out


def _inline_definition(text: str, m: re.Match) -> bool:
    """The term is set off where it is used: in italics or bold (the README's way of defining a word
    in passing), or inside a link to the definitions."""
    before, after = text[max(0, m.start() - 2) : m.start()], text[m.end() : m.end() + 2]
    marked = (before.endswith("*") and after.startswith("*")) or (
        before.endswith("`") and after.startswith(" =")
    )
    # defined in passing: the term (or the term and its noun), then its meaning in parentheses
    marked = marked or bool(re.match(r"(\s\w+)?\s\(", text[m.end() : m.end() + 30]))
    after = text[m.end() : m.end() + 200]
    link = re.search(r"\[[^\]]*$", text[max(0, m.start() - 200) : m.start()]) and (
        "(#words-we-use)" in after or "glossary.md" in after
    )
    return bool(marked or link)


def test_every_term_the_readme_uses_is_defined_before_its_first_use():
    text = _prose((repo_root() / "README.md").read_text())
    start, _ = _section(text, WORDS)
    assert "docs/glossary.md" in text[start:], f"README's {WORDS!r} must point to docs/glossary.md"
    defined = _glossary_terms()
    used = first_uses(text)
    undefined = sorted(set(used) - defined)
    assert not undefined, f"README uses terms docs/glossary.md does not define: {undefined}"
    early = [f"{t!r} at line {text.count(chr(10), 0, m.start()) + 1}" for t, m in used.items()
             if m.start() < start and not _inline_definition(text, m)]  # fmt: skip
    assert not early, (
        f"terms used before {WORDS!r} points to their definitions (define them where used, in italics): {early}"
    )


def test_every_term_the_documents_use_is_in_the_glossary():
    """The usage documents speak the glossary's words too."""
    for path in sorted((repo_root() / "docs").glob("*.md")):
        missing = sorted(set(first_uses(_prose(path.read_text()))) - _glossary_terms())
        assert not missing, f"{path.name} uses terms docs/glossary.md does not define: {missing}"


def test_the_answer_blocks_terms_are_in_the_glossary():
    """Every term the generated answer (the plain one and the detailed one) uses is defined."""
    from paper_repro.analysis.report import readme

    defined = _glossary_terms()
    for make in (readme.summary_block, readme.detail_block):
        if not (repo_root() / "data/results/cpu-tiny/claims.csv").exists():
            pytest.skip("no committed claims table")
        missing = sorted(set(first_uses(make("cpu-tiny"))) - defined)
        assert not missing, f"{make.__name__} uses terms the glossary does not define: {missing}"


def test_the_check_fails_on_a_term_used_before_its_definition(tmp_path, monkeypatch):
    """The rule can fail: a README whose intro uses "regret" before the words section is caught."""
    text = (repo_root() / "README.md").read_text()
    start, _ = _section(_prose(text), WORDS)
    bad = text[:start] + text[start:]
    bad = bad.replace("## What we found", "The regret of RACE.\n\n## What we found", 1)
    used = first_uses(_prose(bad))
    assert used["regret"].start() < _prose(bad).index(WORDS)
    assert not _inline_definition(_prose(bad), used["regret"])
