"""The package installs into a user's own environment without rewriting it: its requirements are
ranges, the study's exact pins live in ``constraints.txt`` (what ``make install`` installs with), the
study-only libraries are the ``study`` extra, and the ledger imports and runs without them.

The distribution is ``paper-repro-rlflops`` (``paper-repro`` on PyPI is an unrelated project), its
import package ``paper_repro`` and its command ``paper-repro``.

The slow tests need the package registry (minutes): one installs the bare package (no extras) into a
fresh venv beside a CPU torch and runs the README's ledger example there; one resolves the ``gpu``
extra with the pins (``pip install --dry-run``) and checks it lands on the pinned vLLM and DeepSpeed
beside the pinned torch and transformers.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from paper_repro.common.paths import repo_root
from tests.test_readme import _ledger_example

ROOT = repo_root()
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# The libraries only the study uses (notebooks, analysis, figures, SLURM, the gpu-paper answer check),
# by import name: a module the ledger or the FLOP model imports must not import them.
STUDY_ONLY = ("jupyterlab", "papermill", "nbformat", "seaborn", "matplotlib", "statsmodels", "submitit",
              "math_verify")  # fmt: skip
LIBRARY = ("paper_repro.ledger", "paper_repro.ledger.card", "paper_repro.accounting.flops", "paper_repro.testbed",
           "paper_repro.run.allocation", "paper_repro.cli")  # fmt: skip


def requirements(extras: tuple[str, ...] = ()) -> dict[str, Requirement]:
    reqs = [*PROJECT["dependencies"], *(r for e in extras for r in PROJECT["optional-dependencies"][e])]
    return {canonicalize_name(r.name): r for r in map(Requirement, reqs)}


def _package_copy(source: Path) -> Path:
    """What a build of the package reads (pyproject, README, the package), copied to ``source``."""
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "paper_repro", source / "paper_repro", ignore=shutil.ignore_patterns("__pycache__")
    )
    return source


def pins() -> dict[str, str]:
    """``constraints.txt`` as {name: version}."""
    lines = (line.split("#")[0].strip() for line in (ROOT / "constraints.txt").read_text().splitlines())
    return {canonicalize_name(n): v for n, v in (line.split("==") for line in lines if line)}


def test_every_pin_is_a_requirement_inside_its_range():
    reqs = requirements(("study", "dev", "gpu"))
    for name, version in pins().items():
        assert name in reqs, f"constraints.txt pins {name}, which no requirement names"
        assert reqs[name].specifier.contains(version), f"{name}=={version} is outside {reqs[name]}"


def supported_trl_series() -> str:
    """``paper_repro.ledger.SUPPORTED_TRL`` (the tested minor series), read from the source (no torch import)."""
    tree = ast.parse((ROOT / "paper_repro/ledger/compat.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(getattr(t, "id", None) == "SUPPORTED_TRL" for t in targets):
                return ast.literal_eval(node.value)
    raise AssertionError("paper_repro/ledger/compat.py lost SUPPORTED_TRL")


def test_the_trl_requirement_is_what_the_ledger_accepts():
    """The ledger accepts every patch release of its tested TRL series and refuses others (without
    the opt-in): the requirement admits the series and not its neighbours, so pip never installs a
    TRL the ledger refuses, and a patch release is not held back."""
    spec = requirements()["trl"].specifier
    major, minor = map(int, supported_trl_series().split("."))
    for version in (
        f"{major}.{minor}.0",
        f"{major}.{minor}.1",
        f"{major}.{minor}.7",
        f"{major}.{minor}.1.post1",
    ):
        assert spec.contains(version), (version, str(spec))
    for version in (f"{major}.{minor + 1}.0", f"{major}.{minor - 1}.9", f"{major + 1}.0.0"):
        assert not spec.contains(version), (version, str(spec))


def test_the_package_pins_nothing_and_leaves_the_study_to_its_extra():
    core = requirements()
    pinned = [str(r) for r in core.values() if any(s.operator == "==" for s in r.specifier)]
    assert pinned == [], pinned
    study = {canonicalize_name(n) for n in ("jupyterlab", "papermill", "seaborn", "submitit")}
    assert study <= set(requirements(("study",))) and not study & set(core)


def test_this_environment_has_the_pinned_versions():
    """What the tests run on is what constraints.txt pins (a local build of torch, e.g. +cpu, counts).
    The gpu extra's pins (vLLM, DeepSpeed) count where they are installed: GPU hosts only."""
    gpu_only = set(requirements(("gpu",))) - set(requirements(("study", "dev")))
    assert gpu_only == {"vllm", "deepspeed"} and gpu_only <= set(pins())
    installed = {}
    for name in pins():
        try:
            installed[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            assert name in gpu_only, f"{name} is pinned in constraints.txt but not installed"
    off = {
        n: (v, installed[n]) for n, v in pins().items() if n in installed and installed[n].split("+")[0] != v
    }
    assert not off, f"installed versions differ from constraints.txt (pinned, installed): {off}"


def test_the_distribution_has_its_own_name_and_keeps_the_import_package_and_command():
    """``paper-repro`` on PyPI is another project: the distribution is named apart from it, and the
    provenance of every result row records this package by that name."""
    from paper_repro.common import provenance

    assert PROJECT["name"] == provenance.DISTRIBUTION == "paper-repro-rlflops"
    assert provenance.PACKAGES[0] == provenance.DISTRIBUTION
    assert PROJECT["scripts"] == {"paper-repro": "paper_repro.cli:main"}
    dist = metadata.distribution(provenance.DISTRIBUTION)  # the editable install of this checkout
    assert (
        dist.version == PROJECT["version"]
        and json.loads(provenance.versions())[PROJECT["name"]] == dist.version
    )
    assert [e.value for e in dist.entry_points if e.name == "paper-repro"] == ["paper_repro.cli:main"]


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
    source = _package_copy(tmp_path / "src")  # a copy, so the build leaves nothing in the checkout
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


@pytest.mark.slow
def test_the_gpu_extra_resolves_to_the_pinned_vllm_and_deepspeed(tmp_path):
    """``pip install --dry-run -c constraints.txt "<package>[gpu]"`` against the registry: the pins of
    vLLM and DeepSpeed resolve together with torch, transformers and TRL at their pins (unpinned, the
    gpu extra once resolved to a vLLM that TRL 1.16 does not support or that needs another torch).
    On the project machines torch is the CPU wheel on local disk (2.13.0+cpu); a GPU host gets PyPI's
    CUDA build of the same version. Nothing is installed."""
    source = _package_copy(tmp_path / "src")  # a copy, so the metadata build leaves nothing in the checkout
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report",
           str(report), "-c", str(ROOT / "constraints.txt"), f"{source}[gpu]"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    resolved = {
        canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    expected = {name: pins()[name] for name in ("vllm", "deepspeed", "torch", "transformers", "trl")}
    found = {name: resolved.get(name, "missing").split("+")[0] for name in expected}
    assert found == expected, f"resolved (left) against pinned (right): {found} != {expected}"
