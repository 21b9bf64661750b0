"""Every cell, tag or commit, path and command the README, ``docs/`` and the notebooks name exists:
cells in the cpu-tiny profile, commits and tags in git, paths in the tree (or ignored outputs a run
writes), ``make`` targets in the Makefile, ``paper-repro`` commands in its parser and ``python -m``
modules in the package. Dated records and history blocks (:mod:`tests.test_numbers`) may name an
earlier design's cells."""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
import shlex
import subprocess
from functools import cache
from pathlib import Path

import pytest

from paper_repro.common.paths import repo_root
from tests.test_numbers import BLOCK, HEADING, HISTORY, RECORD, _blank

ROOT = repo_root()
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TOP = ("data/", "notebooks/", "docs/", "paper_repro/", "tests/", "figures/", "configs/", ".ci/")
CELL = re.compile(r"(?<![\w/.-])r\d{2}b?(?![\w-])")
PLACEHOLDER = re.compile(r"[<>{}*…]|\.\.\.|\$")


def _current(text: str) -> str:
    """``text`` without history blocks and dated records (an earlier design's words)."""
    text = _blank(text, HISTORY)
    out = []
    for m in HEADING.finditer(text):
        out.append((m.start(), len(m.group(1)), bool(RECORD.search(m.group(2)))))
    spans, stack = [], []
    for start, level, dated in out:
        while stack and stack[-1][0] >= level:
            spans.append((stack.pop()[1], start))
        if dated and not stack:
            stack.append((level, start))
    spans += [(s, len(text)) for _, s in stack]
    chars = list(text)
    for a, b in spans:
        chars[a:b] = re.sub(r"[^\n]", " ", text[a:b])
    return "".join(chars)


def _notebook_text(path: Path) -> str:
    return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])


def _sources() -> list[tuple[str, str]]:
    docs = [(p.name, p.read_text()) for p in DOCUMENTS]
    return docs + [(p.name, _notebook_text(p)) for p in NOTEBOOKS]


@cache
def _cells(profile: str = "cpu-tiny") -> set[str]:
    from paper_repro.config import load_profile

    grid = load_profile(profile).grid
    names = {f"r{round(100 * t):02d}" for t in grid.targets}
    return names | {f"r{round(100 * t):02d}b" for _, _, targets in grid.recipes for t in targets}


def _code_spans(text: str) -> list[str]:
    text = _blank(text, re.compile(r"```.*?```", re.S))
    return re.findall(r"`([^`\n]+)`", text)


COMMAND = re.compile(
    r"^(?:[A-Z_]+=\S+ )*(?:\.venv/bin/|/usr/bin/time -v )?(?:make|paper-repro|python|papermill)\b"
)


def _commands(text: str) -> list[str]:
    """The commands ``text`` shows: the lines of its shell blocks, and code spans that are commands."""
    fenced = re.findall(r"```(?:bash|sh)?\n(.*?)```", text, re.S)
    lines = [ln.split("#")[0].strip() for block in fenced for ln in block.splitlines()]
    return [c for c in lines + _code_spans(text) if c and COMMAND.match(c)]


@cache
def _make_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))


@cache
def _subcommands() -> set[str]:
    from paper_repro.cli import build_parser

    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return set(action.choices)


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _ignored(path: str) -> bool:
    done = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT, capture_output=True)
    return done.returncode == 0


def _path_exists(token: str) -> bool:
    """In the tree (from the root, or from the package for ``analysis/...``), an output git ignores, or
    an output of another profile's runs (``data/results/<profile>/``)."""
    token = token.rstrip("/.,;:")
    if (
        re.match(r"data/results/([\w-]+)/", token)
        and (ROOT / "paper_repro/profiles" / (token.split("/")[2] + ".yaml")).exists()
    ):
        return True
    if (ROOT / token).exists() or (ROOT / "paper_repro" / token).exists():
        return True
    return _ignored(token) or _ignored(token + "/")


def stale_cells(text: str, profiles: tuple[str, ...] = ("cpu-tiny",)) -> list[str]:
    """The cells ``text`` names that its profiles' grids lack (a document about gpu-paper names the
    cells of both grids, which differ); a line that runs ``--profile gpu-paper`` is read against
    gpu-paper's grid alone."""
    stale = set()
    for line in _blank(_current(text), BLOCK).splitlines():
        known = _cells("gpu-paper") if "--profile gpu-paper" in line else set().union(*map(_cells, profiles))
        stale |= {m.group(0) for m in CELL.finditer(line)} - known
    return sorted(stale)


def missing_paths(text: str) -> list[str]:
    spans = [
        s for s in _code_spans(text) + _commands(text) if "git checkout" not in s
    ]  # history brought back
    tokens = {t for span in spans for t in span.split()}
    paths = {t.strip("`'\"(),").rstrip("`'\").,;:") for t in tokens if t.strip("`'\"(").startswith(TOP)}
    return sorted(p for p in paths if not PLACEHOLDER.search(p) and ":" not in p and not _path_exists(p))


def bad_commands(text: str) -> list[str]:
    bad = []
    for command in _commands(text):
        try:
            words = shlex.split(command)
        except ValueError:
            continue
        for w, nxt in itertools.pairwise(w.strip("`'\"(),;.") for w in words):
            if w == "make" and re.fullmatch(r"[\w-]+", nxt) and nxt not in _make_targets():
                bad.append(f"make {nxt}")
            if w.endswith("paper-repro") and not nxt.startswith("-") and nxt not in _subcommands():
                bad.append(f"paper-repro {nxt}")
            if w == "-m" and nxt.startswith("paper_repro") and not _module_exists(nxt):
                bad.append(f"python -m {nxt}")
    return sorted(set(bad))


def missing_refs(text: str) -> list[str]:
    refs = set(re.findall(r"(?:tag|commit|at|git checkout|git show) `?([0-9a-f]{7,40})\b", text))
    refs |= set(re.findall(r"git (?:checkout|show) ([\w.-]+?)(?:~\d+)?[ :]", text))
    refs |= set(re.findall(r"\btag `([\w.-]+)`", text))
    return [r for r in sorted(refs)
            if subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{r}^{{commit}}"], cwd=ROOT,
                              capture_output=True).returncode != 0]  # fmt: skip


@pytest.mark.parametrize("name,text", _sources(), ids=[n for n, _ in _sources()])
def test_every_cell_named_is_in_the_profile(name, text):
    profiles = ("cpu-tiny", "gpu-paper") if name == "gpu-paper.md" else ("cpu-tiny",)
    unknown = stale_cells(text, profiles)
    assert not unknown, f"{name} names cells the {' and '.join(profiles)} grids lack: {unknown}"


@pytest.mark.parametrize("name,text", _sources(), ids=[n for n, _ in _sources()])
def test_every_path_named_exists(name, text):
    missing = missing_paths(text)
    assert not missing, f"{name} names paths that are not in the tree: {missing}"


@pytest.mark.parametrize("name,text", _sources(), ids=[n for n, _ in _sources()])
def test_every_command_named_exists(name, text):
    bad = bad_commands(text)
    assert not bad, f"{name} names commands that do not exist: {bad}"


def _full_clone() -> bool:
    done = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() == "false"


@pytest.mark.parametrize("name,text", _sources(), ids=[n for n, _ in _sources()])
def test_every_tag_and_commit_named_exists(name, text):
    if not _full_clone():
        pytest.skip("not a full git clone")
    missing = missing_refs(text)
    assert not missing, f"{name} names tags or commits git does not have: {missing}"


def test_the_checks_catch_stale_pointers():
    """Each check fails on what the newcomer found: a cell of an earlier grid, a path and a command
    that do not exist, a tag that was never made; and passes an earlier design's cell in a history block."""
    text = (
        "Rerun with `-y 'cells: [r30, r70]'`.\n\n<!-- history -->the grid r15 … r85<!-- /history -->\n\n"
        "It is in `notebooks/executed/cpu-tiny/50_ledger_example.ipynb`; run `make nothing` or "
        "`.venv/bin/paper-repro explore --results x`; see the tag `results-archive-testbed-v3`.\n"
    )
    assert stale_cells(text) == ["r30", "r70"]
    assert stale_cells("`paper-repro cells --profile gpu-paper --setting 1.5B --cells r70`") == []
    assert stale_cells("`paper-repro cells --profile gpu-paper --setting 1.5B --cells r66`") == ["r66"]
    assert stale_cells("r70 and r66", ("cpu-tiny", "gpu-paper")) == []
    assert missing_paths(text) == ["notebooks/executed/cpu-tiny/50_ledger_example.ipynb"]
    assert bad_commands(text) == ["make nothing", "paper-repro explore"]
    if _full_clone():
        assert missing_refs(text) == ["results-archive-testbed-v3"]
