"""The resumable runner over many specs and the `paper-repro cells` command."""

from __future__ import annotations

import dataclasses

import pytest

from paper_repro import cli, sweep, train
from paper_repro.config import load_profile
from paper_repro.results import ResultTable
from tests.conftest import write_tiny_profile


@pytest.fixture(scope="module")
def tiny_profile(tmp_path_factory):
    return write_tiny_profile(tmp_path_factory.mktemp("sweep"))


def test_a_rerun_runs_only_what_is_missing(tiny_profile, tmp_path, monkeypatch):
    profile = load_profile(tiny_profile)
    specs = [
        s for s in train.stage_specs(profile, "A", seeds=1) if s.setting == "M" and s.cell in ("r30", "r70")
    ]
    assert len(specs) == 2
    sweep.run_specs(specs[:1], tmp_path, progress=False)
    calls = []
    real = train.run_cell

    def counting(spec, *args, **kwargs):
        calls.append(spec.run_id)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(sweep, "run_cell", counting)
    rows = sweep.run_specs(specs + specs, tmp_path, progress=False)  # repeats are run once
    assert calls == [specs[1].run_id]
    assert [r["run_id"] for r in rows] == [s.run_id for s in specs + specs]
    assert len(ResultTable(tmp_path / "runs.csv").rows()) == 2
    assert sweep.pending(specs, tmp_path) == []


def test_bad_specs_are_refused_before_any_run(tiny_profile, tmp_path):
    profile = load_profile(tiny_profile)
    good = train.stage_specs(profile, "A", seeds=1)[0]
    bad = dataclasses.replace(good, model=str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError):
        sweep.run_specs([good, bad], tmp_path, progress=False)
    assert not (tmp_path / "runs.csv").exists()  # the good one did not run either


def test_cells_command_runs_a_stage_in_two_worker_processes(tiny_profile, tmp_path, capsys):
    argv = ["cells", "--profile", str(tiny_profile), "--stage", "A", "--seeds", "1", "--cells", "r70"]
    argv += ["--jobs", "2", "--results", str(tmp_path)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    rows = ResultTable(tmp_path / "runs.csv").rows()
    assert sorted(r["model"] for r in rows) == ["L", "M", "S"]
    assert all(r["status"] == "ok" for r in rows)
    assert "r70" in out and "ok" in out
