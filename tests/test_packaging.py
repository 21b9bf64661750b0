"""The package installs into a user's own environment without rewriting it: its requirements are
ranges, the study's exact pins live in ``constraints.txt`` (what ``make install`` installs with), the
study-only libraries are the ``study`` extra, and the ledger imports and runs without them.

The slow test installs the bare package (no extras) into a fresh venv beside a CPU torch and runs the
README's ledger example there; it needs the package registry (minutes).
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from paper_repro.paths import repo_root
from tests.test_readme import _ledger_example

ROOT = repo_root()
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# The libraries only the study uses (notebooks, analysis, figures, SLURM, the gpu-paper answer check),
# by import name: a module the ledger or the FLOP model imports must not import them.
STUDY_ONLY = ("jupyterlab", "papermill", "nbformat", "seaborn", "matplotlib", "statsmodels", "submitit",
              "math_verify")  # fmt: skip
LIBRARY = ("paper_repro.ledger", "paper_repro.ledger.card", "paper_repro.flops", "paper_repro.testbed",
           "paper_repro.allocation", "paper_repro.cli")  # fmt: skip


def requirements(extras: tuple[str, ...] = ()) -> dict[str, Requirement]:
    reqs = [*PROJECT["dependencies"], *(r for e in extras for r in PROJECT["optional-dependencies"][e])]
    return {canonicalize_name(r.name): r for r in map(Requirement, reqs)}


def pins() -> dict[str, str]:
    """``constraints.txt`` as {name: version}."""
    lines = (line.split("#")[0].strip() for line in (ROOT / "constraints.txt").read_text().splitlines())
    return {canonicalize_name(n): v for n, v in (line.split("==") for line in lines if line)}


def test_every_pin_is_a_requirement_inside_its_range():
    reqs = requirements(("study", "dev"))
    for name, version in pins().items():
        assert name in reqs, f"constraints.txt pins {name}, which no requirement names"
        assert reqs[name].specifier.contains(version), f"{name}=={version} is outside {reqs[name]}"


def supported_trl_versions() -> tuple[str, ...]:
    """``paper_repro.ledger.SUPPORTED_TRL_VERSIONS``, read from the source (no torch import)."""
    tree = ast.parse((ROOT / "paper_repro/ledger/trainer.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(getattr(t, "id", None) == "SUPPORTED_TRL_VERSIONS" for t in targets):
                return tuple(ast.literal_eval(node.value))
    raise AssertionError("paper_repro/ledger/trainer.py lost SUPPORTED_TRL_VERSIONS")


def test_the_trl_requirement_is_what_the_ledger_accepts():
    """The ledger refuses a TRL outside SUPPORTED_TRL_VERSIONS: the requirement admits those and not
    their neighbours, so pip never installs a TRL the ledger refuses."""
    spec = requirements()["trl"].specifier
    supported = supported_trl_versions()
    for version in supported:
        major, minor, patch = map(int, version.split("."))
        assert spec.contains(version), (version, str(spec))
        for neighbour in (
            f"{major}.{minor}.{patch + 1}",
            f"{major}.{minor + 1}.0",
            f"{major}.{minor}.{patch}.post1",
        ):
            assert spec.contains(neighbour) == (neighbour in supported), (neighbour, str(spec))


def test_the_package_pins_nothing_but_trl_and_leaves_the_study_to_its_extra():
    core = requirements()
    pinned = [str(r) for r in core.values() if any(s.operator == "==" for s in r.specifier)]
    assert pinned in ([], [str(core["trl"])]), pinned
    study = {canonicalize_name(n) for n in ("jupyterlab", "papermill", "seaborn", "submitit")}
    assert study <= set(requirements(("study",))) and not study & set(core)


def test_this_environment_has_the_pinned_versions():
    """What the tests run on is what constraints.txt pins (a local build of torch, e.g. +cpu, counts)."""
    installed = {name: metadata.version(name) for name in pins()}
    off = {n: (v, installed[n]) for n, v in pins().items() if installed[n].split("+")[0] != v}
    assert not off, f"installed versions differ from constraints.txt (pinned, installed): {off}"


def test_the_library_imports_without_the_study_libraries():
    blocker = f"""
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {STUDY_ONLY!r}:
                    raise ImportError(f"{{name}} is a study-only library")
        sys.meta_path.insert(0, Block())
        for module in {LIBRARY!r}:
            __import__(module)
    """
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(blocker)], capture_output=True, text=True,
                          cwd=ROOT, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_the_bare_package_installs_into_a_fresh_venv_and_runs_the_ledger_example(tmp_path):
    """A fresh venv with torch 2.13.0 (the CPU wheel on the project machines: an unpinned torch would
    pull a CUDA build), then ``pip install <package>`` with no extras and no constraints: the ranges
    resolve against the registry, torch stays, no study library comes in, and the README's ledger
    example runs."""
    source = tmp_path / "src"  # a copy, so the build leaves nothing in the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "paper_repro", source / "paper_repro", ignore=shutil.ignore_patterns("__pycache__")
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")

    def pip(*args: str) -> None:
        done = subprocess.run(
            [python, "-m", "pip", "install", "--quiet", *args], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]

    pip(f"torch=={pins()['torch']}")
    pip(str(source))
    check = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout

    probe = f"""
        import importlib.util, torch
        print(torch.__version__)
        print([m for m in {STUDY_ONLY!r} if importlib.util.find_spec(m)])
    """
    done = subprocess.run([python, "-c", textwrap.dedent(probe)], capture_output=True, text=True, check=True)
    version, study = done.stdout.split("\n")[:2]
    assert version.split("+")[0] == pins()["torch"] and study == "[]", done.stdout

    run = tmp_path / "run"
    run.mkdir()
    (run / "example.py").write_text(_ledger_example())
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": ""}  # fmt: skip
    done = subprocess.run([python, "example.py"], capture_output=True, text=True, cwd=run, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "'C_search'" in done.stdout and "'rho'" in done.stdout, done.stdout
    assert (run / "out" / "ledger.jsonl").read_text().count("\n") == 2
    shutil.rmtree(venv)  # 1.5 GB; left in place when the test fails
