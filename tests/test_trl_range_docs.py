"""The TRL versions the documents name are ones the package installs with: every "TRL 1.13 to 1.16"
or "TRL 1.16" in the README and docs/ lies within ``pyproject.toml``'s trl requirement, unless its
paragraph says how to install outside it (``--no-deps``, the package beside a TRL its requirement
excludes). A reader told "works with TRL 1.13" who runs ``pip install . trl==1.13.0`` gets
ResolutionImpossible."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from paper_repro.common.paths import repo_root

ROOT = repo_root()
# "TRL 1.16", "TRL 1.16.x", "TRL 1.13 to 1.16", "TRL 1.13.0–1.16.0": the versions a sentence names
NAMED = re.compile(r"\bTRL (\d+\.\d+(?:\.\d+)?)(?:\.x)?(?: ?(?:to|–|-) ?(\d+\.\d+(?:\.\d+)?))?")
OUTSIDE = "--no-deps"  # how a paragraph says to install the package beside a TRL its requirement excludes


def trl_requirement() -> SpecifierSet:
    """``pyproject.toml``'s requirement on trl."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (trl,) = [r for r in map(Requirement, project["dependencies"]) if r.name == "trl"]
    return trl.specifier


def outside_the_requirement(text: str, allowed: SpecifierSet) -> list[str]:
    """Each TRL version or range ``text`` names that ``allowed`` excludes (a series "1.16" read as its
    first release, 1.16.0), in a paragraph that does not say how to install outside it."""
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        if OUTSIDE in paragraph:
            continue
        for match in NAMED.finditer(paragraph):
            versions = [v if v.count(".") == 2 else f"{v}.0" for v in match.groups() if v]
            if not all(allowed.contains(v) for v in versions):
                found.append(match.group(0))
    return found


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", documents(), ids=lambda p: p.name)
def test_every_trl_version_a_document_names_is_one_the_package_installs_with(path):
    allowed = trl_requirement()
    stated = outside_the_requirement(path.read_text(), allowed)
    assert not stated, (
        f"{path.name} names TRL versions outside pyproject.toml's trl{allowed} ({stated}): "
        f"say the requirement, or in the same paragraph how to install beside such a TRL ({OUTSIDE})"
    )


def test_the_check_catches_a_range_the_requirement_excludes():
    allowed = SpecifierSet(">=1.16.0,<1.17")
    claim = "The callback works with TRL 1.13 to 1.16, and LedgerGRPOTrainer with TRL 1.16.x."
    assert outside_the_requirement(claim, allowed) == ["TRL 1.13 to 1.16"]
    assert outside_the_requirement("Tested on TRL 1.13.0–1.16.0.", allowed) == ["TRL 1.13.0–1.16.0"]
    assert outside_the_requirement("It runs TRL 1.17.", allowed) == ["TRL 1.17"]
    said = f"The callback ran on TRL 1.13 to 1.16, the package installed with `pip install {OUTSIDE} .`."
    assert outside_the_requirement(said, allowed) == []
    assert outside_the_requirement(f"TRL 1.13 to 1.16.\n\nAnother paragraph: {OUTSIDE}.", allowed)
