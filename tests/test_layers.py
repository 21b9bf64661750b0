"""The package's floors: no module over 600 lines, no import cycle (lazy imports inside functions
included, a package and its children included), and the analysis the study imports loads no
statistics library. The layers themselves are import-linter's (``make lint``, ``.importlinter``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from paper_repro.paths import repo_root

MAX_LINES = 600
PACKAGE = repo_root() / "paper_repro"


def test_no_module_passes_600_lines():
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def _cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(edges.get(w, []))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    part = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        part.append(w)
                        if w == v:
                            break
                    if len(part) > 1:
                        out.append(sorted(part))
    return out


def test_no_import_cycle():
    grimp = pytest.importorskip("grimp")
    # every import statement, those inside functions included; a child that imports its package's
    # names (``from paper_repro.analysis import x``) imports the package
    graph = grimp.build_graph("paper_repro", exclude_type_checking_imports=True)
    assert _cycles(graph) == []


def test_a_cycle_is_found():
    grimp = pytest.importorskip("grimp")
    graph = grimp.ImportGraph()
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=a, imported=b)
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_the_analysis_the_study_imports_loads_no_statistics_library():
    code = (
        "import sys; import paper_repro.study, paper_repro.analysis.tables.frontiers; "
        "print(sorted(m for m in ('scipy', 'statsmodels', 'matplotlib', 'seaborn') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
