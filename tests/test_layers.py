"""The package's floors, counted as ``ruff format`` writes the code: no module over 600 lines and no
function over 100 (a ``# fmt: skip`` keeps its lines compact on disk, not here, and needs a comment
above its statement saying why alignment carries meaning); no import cycle (lazy imports inside
functions included, a package and its children included); and the analysis the study imports loads
no statistics library. The layers themselves are import-linter's (``make lint``, ``.importlinter``)."""

from __future__ import annotations

import ast
import functools
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paper_repro.common.paths import repo_root

MAX_LINES = 600
MAX_FUNCTION_LINES = 100
PACKAGE = repo_root() / "paper_repro"
SKIP = re.compile(r"\s*# fmt: (skip|off|on)\b.*$")


def _ruff() -> str:
    """The project's formatter: the ``ruff`` beside this Python (the venv's), else on PATH."""
    beside = Path(sys.executable).with_name("ruff")
    found = str(beside) if beside.exists() else shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (make install puts it in .venv)")
    return found


@functools.cache
def formatted_package(tmp_root: Path) -> dict[str, str]:
    """Every module of the package as ``ruff format`` writes it with its ``# fmt:`` markers removed,
    keyed by the path relative to the package."""
    for p in PACKAGE.rglob("*.py"):
        out = tmp_root / p.relative_to(PACKAGE)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(SKIP.sub("", line) for line in p.read_text().splitlines()) + "\n")
    config = repo_root() / "pyproject.toml"
    subprocess.run([_ruff(), "format", "--quiet", "--config", str(config), str(tmp_root)], check=True)
    return {str(p.relative_to(tmp_root)): p.read_text() for p in sorted(tmp_root.rglob("*.py"))}


@pytest.fixture(scope="module")
def formatted(tmp_path_factory) -> dict[str, str]:
    return formatted_package(tmp_path_factory.mktemp("formatted"))


def test_no_module_passes_600_formatted_lines(formatted):
    long = {name: n for name, text in formatted.items() if (n := len(text.splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines as ruff formats them: {long}"


def long_functions(text: str, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """The functions (methods and nested ones included) of a module's source longer than ``limit``
    lines, decorators excluded, by qualified name."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}."
                if not isinstance(child, ast.ClassDef) and (n := child.end_lineno - child.lineno + 1) > limit:
                    out[name[:-1]] = n
            visit(child, name)

    visit(ast.parse(text), "")
    return out


def test_no_function_passes_100_formatted_lines(formatted):
    long = {f"{name}:{fn}": n for name, text in formatted.items() for fn, n in long_functions(text).items()}
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines as ruff formats them: {long}"


def test_a_long_function_is_found():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    text = f"class A:\n    def short(self):\n        pass\n\n\ndef f():\n{body}\n    return 0\n"
    assert long_functions(text) == {"f": MAX_FUNCTION_LINES + 2}


def unexplained_skips(text: str) -> list[int]:
    """The lines of a ``# fmt: skip`` whose statement has no comment line right above it (the reason
    alignment carries meaning there)."""
    lines = text.splitlines()
    skipped = {i for i, line in enumerate(lines, 1) if "# fmt: skip" in line}
    if not skipped:
        return []
    starts = {
        node.end_lineno: node.lineno
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.stmt) and node.end_lineno in skipped
    }
    return sorted(
        line for line in skipped if not lines[min(starts.get(line, line), line) - 2].lstrip().startswith("#")
    )


def test_every_fmt_skip_says_why():
    bare = {
        str(p.relative_to(PACKAGE)): found
        for p in sorted(PACKAGE.rglob("*.py"))
        if (found := unexplained_skips(p.read_text()))
    }
    assert not bare, f"a `# fmt: skip` with no comment above its statement saying why: {bare}"


def test_an_unexplained_skip_is_found():
    table = "# a table: its columns line up\nT = {1: 2,   3: 4}  # fmt: skip\n"
    assert unexplained_skips(table) == []
    assert unexplained_skips("x = 1\nT = {1: 2,   3: 4}  # fmt: skip\n") == [2]


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
        "import sys; import paper_repro.drivers.study, paper_repro.analysis.tables.frontiers; "
        "print(sorted(m for m in ('scipy', 'statsmodels', 'matplotlib', 'seaborn') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def _layer_levels() -> dict[str, int]:
    """Each module of the layers contract (``.importlinter``) -> its height (the top layer highest)."""
    import configparser

    config = configparser.ConfigParser()
    config.read(repo_root() / ".importlinter")
    rows = [r for r in config["importlinter:contract:layers"]["layers"].splitlines() if r.strip()]
    return {m.strip(): len(rows) - i for i, row in enumerate(rows) for m in row.split(":")}


def moves_back_up(call, levels: dict[str, int]) -> set[tuple[str, str]]:
    """The (caller, callee) functions of the calls ``call()`` makes from a module of a lower layer
    straight into one of a higher layer, both the package's (a call through a library frame, a
    callback handed down, is not a move)."""

    def level(module: str) -> int | None:
        found = [m for m in levels if module == m or module.startswith(m + ".")]
        return levels[max(found, key=len)] if found else None

    moves = set()

    def profile(frame, event, arg):
        back = frame.f_back
        if event != "call" or back is None:
            return
        callee, caller = frame.f_globals.get("__name__", ""), back.f_globals.get("__name__", "")
        low, high = level(caller), level(callee)
        if low is not None and high is not None and low < high:
            moves.add((f"{caller}.{back.f_code.co_qualname}", f"{callee}.{frame.f_code.co_qualname}"))

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return moves


def test_the_budget_goes_from_the_profile_to_the_specs_without_moving_back_up_a_layer():
    """``budget_flops`` from the profile through the planner to the specs of the study (the specs
    runs.csv's rows are made from; a rule-based setting and the PRM's, whose rounds the planner prices
    with the PRM): each call goes down the layers, none back up."""
    from paper_repro.config import load_profile
    from paper_repro.run.spec import pilot_specs, setting_specs

    profile = load_profile("cpu-tiny")
    settings = [profile.settings("A")[0], profile.settings("D")[0]]

    def specs():
        for setting in settings:
            setting_specs(profile, setting)
            pilot_specs(profile, setting)

    assert moves_back_up(specs, _layer_levels()) == set()


def test_a_move_back_up_is_found():
    high: dict = {"__name__": "pkg.high"}
    exec("def helper():\n    return 1\n", high)
    low: dict = {"__name__": "pkg.low", "helper": high["helper"]}
    exec("def caller():\n    return helper()\n", low)
    assert moves_back_up(low["caller"], {"pkg.low": 1, "pkg.high": 2}) == {
        ("pkg.low.caller", "pkg.high.helper")
    }
    assert moves_back_up(low["caller"], {"pkg.low": 2, "pkg.high": 1}) == set()  # down is no move
