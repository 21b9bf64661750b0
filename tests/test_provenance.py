"""Provenance: regenerated outputs leave a checkout clean; a code change makes it dirty."""

from __future__ import annotations

import json
import subprocess

from paper_repro.common import provenance


def test_git_dirty_ignores_outputs_but_not_code(tmp_path, monkeypatch):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "paper_repro").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "paper_repro" / "x.py").write_text("a = 1\n")
    (tmp_path / "data" / "runs.csv").write_text("run_id\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    monkeypatch.setattr(provenance, "repo_root", lambda: tmp_path)
    assert not provenance.git_dirty()
    (tmp_path / "data" / "runs.csv").write_text("run_id\nabc\n")
    assert not provenance.git_dirty()
    (tmp_path / "paper_repro" / "x.py").write_text("a = 2\n")
    assert provenance.git_dirty()
    assert len(provenance.git_sha()) == 40
    assert json.loads(provenance.versions())["torch"].startswith("2.13.0")


def test_recorded_paths_are_repo_relative_inside_the_checkout_only(tmp_path, monkeypatch):
    from paper_repro.common.paths import repo_relative, repo_root

    assert repo_relative(repo_root() / "data/models/policy-M") == "data/models/policy-M"
    monkeypatch.chdir(repo_root())
    assert repo_relative("data/models/../models/prm") == "data/models/prm"
    assert repo_relative(tmp_path / "elsewhere") == str(tmp_path / "elsewhere")
