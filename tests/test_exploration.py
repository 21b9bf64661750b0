"""Exploring never touches the committed study.

A newcomer's ``papermill notebooks/10_stage_A_model_size.ipynb out.ipynb -p setting S -p quick True``
once appended three quarter-budget runs to the committed ``runs.csv``, and the next analysis read
them as the newest generation of S and dropped every committed S run, moving two verdicts. Now a
quick run goes to its own folder, the committed table refuses a run that is not of the profile's
design, and the analysis reads only the design's runs whatever else a table holds.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import warnings

import pandas as pd
import pytest

from paper_repro.analysis import analyse
from paper_repro.common.paths import repo_root
from paper_repro.common.results import quick_dir, results_dir
from paper_repro.config import load_profile
from paper_repro.drivers import study
from paper_repro.run import runner
from paper_repro.run.spec import setting_specs
from paper_repro.run.study_design import check_committed

PROFILE = load_profile("cpu-tiny")
COMMITTED = results_dir("cpu-tiny")


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_quick_run_goes_to_its_own_folder_unless_told_otherwise(tmp_path):
    assert study.results_root_for("cpu-tiny", True, None) == quick_dir("cpu-tiny")
    assert study.results_root_for(PROFILE, True, tmp_path) == tmp_path
    assert study.results_root_for("cpu-tiny", False, None) is None  # the committed study
    assert quick_dir("cpu-tiny").is_relative_to(COMMITTED)
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(quick_dir("cpu-tiny") / "runs.csv")], cwd=repo_root()
    )
    assert ignored.returncode == 0, "the quick folder must be ignored by git"


def test_runs_outside_the_design_are_refused_from_the_committed_table(tmp_path):
    before = _digest(COMMITTED / "runs.csv")
    quick = setting_specs(PROFILE.quick_variant(), "S", quick=True)
    with pytest.raises(ValueError, match=r"refused: 3 run\(s\) are not runs of the cpu-tiny design") as err:
        runner.run_specs(quick, None)  # refused before any compute
    assert "train.budget_stop" in str(err.value) and "quick=True" in str(err.value)
    other_seed = setting_specs(PROFILE, "S", seeds=[42], cells=["r40"])
    with pytest.raises(ValueError, match="seed 42 is not one of the design's full-budget seeds"):
        check_committed(other_seed, None)
    check_committed(quick + other_seed, tmp_path)  # anywhere else, exploring is free
    check_committed(setting_specs(PROFILE, "S", cells=["r40"]), None)  # the design's own runs
    assert _digest(COMMITTED / "runs.csv") == before


@pytest.mark.slow  # test_analysis.py::test_only_the_runs_of_the_design_are_analysed covers it by default
def test_the_quick_papermill_trap_leaves_every_committed_verdict_unchanged(tmp_path):
    """A run that ``-p setting S -p quick True`` makes, appended to a copy of the committed
    table as such runs once were: the analysis leaves it out, names it, and every verdict stands."""
    # one of its cells (stage A's quick runs go on to 4x the quick budget, and one shows the trap)
    study.run_setting("cpu-tiny", "S", quick=True, cells=["r50"], results_root=tmp_path / "quick", threads=2)
    made = pd.read_csv(tmp_path / "quick" / "runs.csv")
    assert len(made) == 1 and (made["status"] == "ok").all()
    copy = tmp_path / "committed"
    copy.mkdir()
    shutil.copy(COMMITTED / "runs.csv", copy / "runs.csv")
    for table in ("design.csv", "curves.csv"):  # stage A's runs past C count by their point at C
        shutil.copy(COMMITTED / table, copy / table)
    (copy / "steps").symlink_to(COMMITTED / "steps")
    with open(copy / "runs.csv", "a") as fh:
        fh.write((tmp_path / "quick" / "runs.csv").read_text().split("\n", 1)[1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = analyse(PROFILE, copy, tmp_path / "figures", power_replicates=0, figures=False)
    named = " ".join(str(w.message) for w in caught)
    assert all(run_id in named for run_id in made["run_id"])
    committed = pd.read_csv(COMMITTED / "claims.csv").set_index("id")["verdict"]
    assert result.claims.set_index("id")["verdict"].to_dict() == committed.to_dict()


def test_a_string_where_a_list_is_expected_is_refused_with_the_yaml_form():
    with pytest.raises(TypeError, match=r"cells: expected a list .* -y .*'cells: \[r40, r66\]'"):
        study.run_setting("cpu-tiny", "S", cells='["r40"]')
    with pytest.raises(TypeError, match=r"seeds: expected .* got 'three'"):
        study.run_setting("cpu-tiny", "S", seeds="three")
    with pytest.raises(TypeError, match="quick: expected True or False"):
        study.run_race_pilots("cpu-tiny", "S", quick="yes")
    study.check_parameters(seeds=[0, 1], cells=["r40"], quick=True, threads=2, results_root="x")


def test_papermill_reports_a_wrong_parameter_in_one_line(tmp_path):
    """The error a newcomer once met (the list's characters listed as unknown cells) is now one
    line that names the type expected and the ``-y`` form."""
    done = subprocess.run(
        [sys.executable, "-m", "papermill", str(repo_root() / "notebooks" / "10_stage_A_model_size.ipynb"),
         str(tmp_path / "out.ipynb"), "-p", "setting", "S", "-p", "cells", '["r40"]'],
        capture_output=True, text=True, cwd=repo_root(), timeout=300,
    )  # fmt: skip
    assert done.returncode != 0
    assert "TypeError: cells: expected a list of cell labels" in done.stderr + done.stdout
    assert "'cells: [r40, r66]'" in done.stderr + done.stdout


def test_run_cell_itself_refuses_a_run_outside_the_design(tmp_path):
    """The lowest write path checks too: a run made without the runner (a script calling
    ``train.run_cell``) cannot slip into the committed table either."""
    from paper_repro.run.train import run_cell

    before = _digest(COMMITTED / "runs.csv")
    (quick,) = setting_specs(PROFILE.quick_variant(), "S", quick=True, cells=["r15"])
    with pytest.raises(ValueError, match="refused: 1 run"):
        run_cell(quick, None)
    assert _digest(COMMITTED / "runs.csv") == before


def test_a_quick_notebook_opens_by_saying_it_is_a_smoke_run(capsys):
    """The banner of a quick run (:func:`paper_repro.drivers.study.announce_quick`) says what quick mode is
    from its own settings: the seeds, cells, share of the budget and evaluation size it uses."""
    from fractions import Fraction

    from paper_repro.config import QUICK_BUDGET_SCALE, QUICK_CELLS, QUICK_EVAL_LIMIT

    for profile in (PROFILE, load_profile("gpu-paper")):
        note = profile.quick_note()
        quick = profile.quick_variant()
        assert note.startswith("**A smoke run, not the study.**")
        assert ", ".join(QUICK_CELLS) in note and f"{quick.seeds} seed per grid cell" in note
        assert f"{Fraction(QUICK_BUDGET_SCALE).limit_denominator(100)} of the budget" in note
        assert (
            f"C = {quick.budget_flops:.3g} FLOPs" in note and f"at most {QUICK_EVAL_LIMIT} problems" in note
        )
    study.announce_quick("cpu-tiny")  # not in a notebook: printed
    assert capsys.readouterr().out.strip() == PROFILE.quick_note()


@pytest.mark.parametrize("profile", ["cpu-tiny", "gpu-paper"])
def test_the_run_cell_names_the_grids_cells_and_a_subset_the_profile_accepts(profile):
    """The stage notebooks' first output names the setting's cells and an example of ``-y 'cells:
    [...]'`` that the setting's grid accepts (the notebooks once suggested r30 and r70, which
    cpu-tiny's grid refuses)."""
    import re

    prof = load_profile(profile)
    for setting in prof.all_settings():
        grid = [s.cell for s in setting_specs(prof, setting, seeds=1, extend=False)]
        line = study.grid_line(prof, setting.name, setting_specs(prof, setting, seeds=[42], cells=grid[:1]))
        assert f"the grid's cells are {', '.join(grid)}" in line and "on seed 42 (1 run)" in line
        (example,) = re.findall(r"-y 'cells: \[(.*)\]'", line)
        setting_specs(prof, setting, cells=example.split(", "))  # accepted


def test_the_notebooks_cells_examples_are_cells_of_the_default_grid():
    """Every ``-y 'cells: [...]'`` a stage notebook's text suggests names cells of cpu-tiny's grid for
    the notebook's default setting."""
    import re

    import nbformat

    for book, setting in (("10_stage_A_model_size", "M"), ("20_stage_BD_reward_systems", "dense")):
        text = "\n".join(
            c.source for c in nbformat.read(repo_root() / "notebooks" / f"{book}.ipynb", 4).cells
        )
        examples = re.findall(r"'cells: \[(.*?)\]'", text)
        assert examples and "r85" not in text, book
        for example in examples:
            setting_specs(PROFILE, setting, cells=example.split(", "))  # refused with the grid if not in it
