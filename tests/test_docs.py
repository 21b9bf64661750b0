"""The documents a reader can finish: every relative link in the README, ``docs/`` and the notebooks'
markdown resolves (a file, and a heading where it names one); the code's layout is written once
(``docs/layout.md``) and names the import contract's layers in its order and every module at the top
of the package; and the design facts (the budget ladder, the pilot budgets, the seeds, the grid)
agree with the cpu-tiny profile wherever the README, RESULTS.md, ``docs/`` or a notebook's markdown
states them, outside history blocks and dated records (an earlier design, said so)."""

from __future__ import annotations

import configparser
import json
import re
from fractions import Fraction
from functools import cache
from pathlib import Path

import pytest

from paper_repro.common.paths import repo_root
from tests.test_numbers import BLOCK, HISTORY, _blank
from tests.test_pointers import _current

ROOT = repo_root()
LAYOUT = ROOT / "docs" / "layout.md"
FENCE = re.compile(r"```.*?```", re.S)


def _documents() -> list[Path]:
    docs = [ROOT / "README.md", ROOT / "RESULTS.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [p for p in docs if p.exists()]


def _notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("*.ipynb"))


def _markdown(path: Path) -> str:
    """A document's text, or a notebook's markdown cells joined by blank lines."""
    if path.suffix != ".ipynb":
        return path.read_text()
    cells = json.loads(path.read_text())["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


# ------------------------------------------------------------------------------------------ links
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors a Markdown text defines: its headings' slugs (repeats numbered as GitHub does)."""
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6} (.+)$", _blank(text, FENCE), re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(path: Path, text: str) -> list[str]:
    """The relative links of ``text`` (a file at ``path``) whose file or heading does not exist."""
    bad = []
    for m in LINK.finditer(_blank(text, FENCE)):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(f"{target} (no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest})")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            bad.append(f"{target} (no heading #{anchor} in {dest.name})")
    return bad


@pytest.mark.parametrize("path", _documents() + _notebooks(), ids=lambda p: p.name)
def test_every_relative_link_resolves(path):
    bad = broken_links(path, _markdown(path))
    assert not bad, f"{path.name} links to what does not exist: {bad}"


def test_the_link_check_catches_a_missing_file_and_heading(tmp_path):
    (tmp_path / "b.md").write_text("# B\n\n## The `answer`, in detail\n")
    text = "[ok](b.md#the-answer-in-detail) [no](c.md) [gone](b.md#the-answer) [web](https://x.org/y)"
    assert broken_links(tmp_path / "a.md", text) == [
        "c.md (no file " + str((tmp_path / "c.md").resolve()) + ")",
        "b.md#the-answer (no heading #the-answer in b.md)",
    ]


# ----------------------------------------------------------------------------------------- layout
def contracts(config: str) -> dict[str, list[list[str]]]:
    """The layers contracts of an import-linter config: name -> its layers, top to bottom, each the
    modules of one layer (independent ``|`` and non-independent ``:`` siblings alike, optional
    parentheses dropped, containers expanded), relative to the root package."""
    parser = configparser.ConfigParser()
    parser.read_string(config)
    root = parser["importlinter"]["root_package"]
    out = {}
    for section in parser.sections():
        if not section.startswith("importlinter:contract:") or parser[section].get("type") != "layers":
            continue
        containers = parser[section].get("containers", "").split() or [""]
        layers = []
        for line in parser[section]["layers"].strip().splitlines():
            names = [n.strip().strip("()") for n in re.split(r"[:|]", line) if n.strip()]
            layers.append([_relative(f"{c}.{n}" if c else n, root) for c in containers for n in names])
        out[section.removeprefix("importlinter:contract:")] = layers
    return out


def _relative(module: str, root: str) -> str:
    return module.removeprefix(root + ".")


def documented_layers(text: str) -> dict[str, list[list[str]]]:
    """Each ``<!-- contract: NAME -->`` table of the layout document: its rows' modules (the
    backticked names of the second column, ``a/`` and ``a.py`` read as ``a``), top to bottom."""
    out = {}
    for m in re.finditer(r"<!-- contract: ([\w-]+) -->\n((?:\|.*\n?)+)", text):
        rows = [r for r in m.group(2).splitlines()[2:] if r.startswith("|")]
        out[m.group(1)] = [
            [
                re.sub(r"\.py$", "", name).strip("/").replace("/", ".")
                for name in re.findall(r"`([^`]+)`", cols[2])
            ]
            for cols in (row.split("|") for row in rows)
        ]
    return out


def top_level(package: Path) -> set[str]:
    """The package's importable children: its modules and its subpackages."""
    modules = {p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")}
    return modules | {p.name for p in package.iterdir() if (p / "__init__.py").exists()}


def layout_problems(config: str, doc: str, package: Path) -> list[str]:
    problems = []
    wanted, written = contracts(config), documented_layers(doc)
    for name, layers in wanted.items():
        if name not in written:
            problems.append(f"no table for the contract {name!r} (mark it <!-- contract: {name} -->)")
            continue
        rows = written[name]
        for i in range(max(len(layers), len(rows))):
            want = sorted(layers[i]) if i < len(layers) else []
            got = sorted(rows[i]) if i < len(rows) else []
            if want != got:
                problems.append(f"{name}, layer {i + 1}: the contract has {want}, docs/layout.md {got}")
    for extra in sorted(set(written) - set(wanted)):
        problems.append(f"a table for {extra!r}, which .importlinter has no layers contract for")
    named = {m for layers in wanted.values() for layer in layers for m in layer}
    for child in sorted(top_level(package)):
        if not any(m == child or m.startswith(child + ".") for m in named):
            problems.append(f"paper_repro/{child} is in no layer of .importlinter (nor of docs/layout.md)")
    return problems


def test_the_layout_is_the_import_contracts():
    problems = layout_problems((ROOT / ".importlinter").read_text(), LAYOUT.read_text(), ROOT / "paper_repro")
    assert not problems, "docs/layout.md and .importlinter disagree:\n" + "\n".join(problems)


def test_the_layout_is_written_once():
    """No other document lays out the package's modules: they link to docs/layout.md."""
    tree = re.compile(r"^[│├└ ]*[├└]── \w", re.M)
    for path in _documents():
        if path != LAYOUT:
            assert not tree.search(path.read_text()), f"{path.name} draws a module tree: link docs/layout.md"


def test_the_layout_check_fails_on_a_reordered_or_missing_layer(tmp_path):
    config = (
        "[importlinter]\nroot_package = pkg\n[importlinter:contract:one]\nname = x\ntype = layers\n"
        "layers =\n    pkg.top\n    (pkg.mid) | pkg.side\n    pkg.low\n"
    )
    (tmp_path / "top.py").write_text("")
    (tmp_path / "low").mkdir()
    (tmp_path / "low" / "__init__.py").write_text("")
    (tmp_path / "loose.py").write_text("")
    table = "| layer | modules | what |\n|---|---|---|\n"
    good = table + "| a | `top` | . |\n| b | `mid`, `side` | . |\n| c | `low/` | . |\n"
    assert layout_problems(config, f"<!-- contract: one -->\n{good}", tmp_path) == [
        "paper_repro/loose is in no layer of .importlinter (nor of docs/layout.md)"
    ]
    swapped = table + "| a | `top` | . |\n| c | `low/` | . |\n| b | `mid`, `side` | . |\n"
    assert len(layout_problems(config, f"<!-- contract: one -->\n{swapped}", tmp_path)) == 3
    assert layout_problems(config, good, tmp_path)[0].startswith("no table for the contract 'one'")


# ----------------------------------------------------------------------------------- design facts
WORD = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
NUMBER = r"(\d+|" + "|".join(WORD) + r")"
BUDGET = r"(?:C/\d+|\d+(?:\.\d+)?C|C)(?![\w/])"
PILOT = r"(?:C/\d+|1/\d+)"


@cache
def _design() -> dict:
    from paper_repro.config import QUICK_CELLS, load_profile

    p = load_profile("cpu-tiny")
    points = sorted(Fraction(x).limit_denominator(1000) for x in p.curves.points)
    tops = {
        min(Fraction(b).limit_denominator(1000), points[-1]) for b in (1, *p.curves.stage_budgets.values())
    }
    return {
        "points": points,
        "tops": tops,
        "pilots": {Fraction(f).limit_denominator(1000) for f in p.pilot_fractions},
        "seeds": {"grid": p.seeds, "pilot": len(p.pilot_seeds), "fresh": len(p.fresh_seeds)},
        "ranges": {
            (0, p.seeds - 1),
            (min(p.pilot_seeds), max(p.pilot_seeds)),
            (min(p.fresh_seeds), max(p.fresh_seeds)),
        },
        "targets": [round(t, 2) for t in p.grid.targets],
        "cells": [f"r{round(100 * t):02d}" for t in p.grid.targets],
        "quick": list(QUICK_CELLS),
    }


def _budget(token: str) -> Fraction:
    if token.startswith("C/"):
        return Fraction(1, int(token[2:]))
    return Fraction(token[:-1] or "1") if token.endswith("C") else Fraction(token)


def _word(token: str) -> int:
    return WORD.get(token.lower()) or int(token)


def _show(budgets) -> str:
    return ", ".join("C" if b == 1 else f"C/{b.denominator}" if b < 1 else f"{b}C" for b in budgets)


def stale_design_facts(text: str) -> list[tuple[int, str, str]]:
    """(line, phrase, the profile's value) for each statement of the ladder, the pilot budgets, the
    seeds or the grid in ``text`` that the cpu-tiny profile contradicts; fenced code, generated
    blocks (the tables' own words), history blocks and dated records are left out."""
    d = _design()
    text = _current(_blank(_blank(_blank(text, FENCE), BLOCK), HISTORY))
    found = []

    def say(m: re.Match, value: str) -> None:
        found.append((m.start(), text.count("\n", 0, m.start()) + 1, m.group(0), value))

    ladder = f"the profile's ladder {_show(d['points'])} (curves.points), to {_show(sorted(d['tops']))}"
    for m in re.finditer(rf"(C/\d+)\s*(?:to|…|\.\.\.|–)\s*({BUDGET})", text):
        low, high = _budget(m.group(1)), _budget(m.group(2))
        if low != d["points"][0] or high not in d["tops"]:
            say(m, ladder)
    for m in re.finditer(rf"(?<!to )(?<![\w/]){BUDGET}(?:(?:,\s*|,? and\s+){BUDGET}){{2,}}", text):
        listed = [_budget(t) for t in re.findall(BUDGET, m.group(0))]
        if not any(listed == [p for p in d["points"] if p <= top] for top in d["tops"]):
            say(m, ladder)
    pilots = f"the profile's pilot budgets {_show(sorted(d['pilots']))} (budget.pilot_fractions)"
    for m in re.finditer(
        rf"pilots? (?:budgets? )?(?:at|of|\()\s*(?:the budget,? )?({PILOT})(?:,? and ({PILOT}))?", text
    ):
        named = {_budget(t) if t.startswith("C") else Fraction(t) for t in m.groups() if t}
        if named != d["pilots"]:
            say(m, pilots)
    for m in re.finditer(rf"\b{NUMBER} (grid |pilot |fresh )?seeds\b(?!')", text, re.I):
        role = (m.group(2) or "").strip()
        allowed = {d["seeds"][role]} if role else set(d["seeds"].values())
        if _word(m.group(1)) not in allowed:
            say(m, f"the profile's seeds: {d['seeds']} (seeds.grid, seeds.pilot, seeds.fresh)")
    for m in re.finditer(r"\bseeds?:? \(?(\d+)\s*(?:–|-|to)\s*(\d+)\)?", text):
        if (int(m.group(1)), int(m.group(2))) not in d["ranges"]:
            say(m, f"the profile's seed ranges {sorted(d['ranges'])}")
    cells = r"`?r\d{2}`?"
    for m in re.finditer(rf"(?<![\w/]){cells}(?:(?:,\s*|/|,? and\s+){cells}){{2,}}(?![\w/])", text):
        listed = re.findall(r"r\d{2}", m.group(0))
        runs = [d["cells"][i : i + len(listed)] for i in range(len(d["cells"]))]
        if listed not in runs and listed != d["quick"]:
            say(m, f"the profile's grid {d['cells']} (grid.targets), quick cells {d['quick']}")
    for m in re.finditer(r"targets?:?\s*\(?((?:0?\.\d+,\s*){3,}0?\.\d+)", text):
        if [round(float(x), 2) for x in m.group(1).split(",")] != d["targets"]:
            say(m, f"the profile's grid.targets {d['targets']}")
    for m in re.finditer(rf"\b{NUMBER} (?:targets|cells per setting|grid cells)\b", text, re.I):
        if _word(m.group(1)) != len(d["targets"]):
            say(m, f"the profile's {len(d['targets'])} grid.targets")
    return [(line, phrase, value) for _, line, phrase, value in sorted(found)]


# RESULTS.md is generated whole from the tables (its numbers are the tables', and test_readme checks it is
# current), as the README's generated block is; its seed counts include designs it compares (20 seeds, ...)
@pytest.mark.parametrize(
    "path", [p for p in _documents() if p.name != "RESULTS.md"] + _notebooks(), ids=lambda p: p.name
)
def test_every_design_fact_stated_is_the_profiles(path):
    stale = stale_design_facts(_markdown(path))
    said = [f"{path.name}:{line}: {phrase!r} ({value})" for line, phrase, value in stale]
    assert not said, (
        "documents state the design otherwise than paper_repro/profiles/cpu-tiny.yaml (correct them, point "
        "to docs/CHOICES.md's table, or mark an earlier design as a <!-- history --> block):\n"
        + "\n".join(said)
    )


def test_the_design_check_catches_a_stale_ladder_pilot_seed_and_grid():
    """Each statement an earlier design made is caught with the profile's value; the same words in a
    history block or a dated record are not."""
    text = (
        "## Now\n\nThe ladder runs C/16 to 4C; pilots at 1/8 and 1/16, on 10 grid seeds (seeds 0–9),\n"
        "the cells r15, r30, r50, r70, r85; targets 0.15, 0.30, 0.50, 0.70, 0.85.\n"
        "Fine: C/8 to 2C, C/8 to C, C/8, C/4, C/2, C and 2C; pilots at C/2; 3 grid seeds (0–2); 5 fresh seeds.\n\n"
        "<!-- history -->pilots at 1/8 and 1/16<!-- /history -->\n\n## Then (2026-12-01)\n\n10 grid seeds\n"
    )
    stale = stale_design_facts(text)
    assert [phrase for _, phrase, _ in stale] == [
        "C/16 to 4C",
        "pilots at 1/8 and 1/16",
        "10 grid seeds",
        "seeds 0–9)",
        "r15, r30, r50, r70, r85",
        "targets 0.15, 0.30, 0.50, 0.70, 0.85",
    ]
    assert all(line == 3 or line == 4 for line, _, _ in stale)
    assert "curves.points" in stale[0][2] and "pilot_fractions" in stale[1][2]
