"""Exploring an allocation of your own, and never into the committed study.

A reader's profile file (``extends: cpu-tiny``, ``grid: {targets: [0.60], recipes: []}``) inherited
the name ``cpu-tiny``, and ``paper-repro cells --profile my.yaml --setting dense --cells r60 --seed 0``
added its run to ``data/results/cpu-tiny/runs.csv``: the committed check read a run's spec without its
recipe. Now such a file is refused from the committed folders unless it names itself, a recipe that is
not a cell of the design's grid is refused from the committed table, and ``cells --recipe/--rho``
runs allocations of your own into a folder of your own, which ``analyse --beside committed`` places
on the committed frontier, reading the committed tables and writing none of them.
"""

from __future__ import annotations

import argparse
import hashlib

import pandas as pd
import pytest

from paper_repro import cli
from paper_repro.analysis.figures.beside import beside_figure, beside_table, write_beside
from paper_repro.commands import cells
from paper_repro.common.results import results_dir
from paper_repro.config import changes_from_shipped, load_profile
from paper_repro.drivers import study
from paper_repro.run import runner, study_design
from paper_repro.run.spec import setting_specs
from paper_repro.run.study_design import Design, check_committed, check_named

PROFILE = load_profile("cpu-tiny")
COMMITTED = results_dir("cpu-tiny")


def _digests() -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(COMMITTED.glob("*.csv"))}


def _my_profile(tmp_path, name: str | None = None):
    path = tmp_path / "my.yaml"
    named = f"name: {name}\n" if name else ""
    path.write_text(f"extends: cpu-tiny\n{named}grid: {{targets: [0.60], recipes: []}}\n")
    return load_profile(path)


@pytest.fixture
def committed_elsewhere(tmp_path, monkeypatch):
    """The committed folder moved to a temporary one: a check that failed to refuse writes there."""
    root = tmp_path / "committed"
    monkeypatch.setattr(study_design, "results_dir", lambda name, r=None: root if r is None else r)
    return root


def test_the_reported_profile_file_is_refused_from_the_committed_folder(tmp_path, committed_elsewhere):
    mine = _my_profile(tmp_path)
    assert mine.name == "cpu-tiny" and changes_from_shipped(mine) == ["grid"]
    with pytest.raises(ValueError, match=r"changes the cpu-tiny design \(grid\) but keeps the name") as err:
        check_named(mine, None)
    assert "name: my-study" in str(err.value) and "--results" in str(err.value)
    check_named(mine, tmp_path / "out")  # a folder of one's own takes it
    specs = setting_specs(mine, "dense", seeds=[0], cells=["r60"])
    with pytest.raises(ValueError, match=r"recipe P=\d+, G=\d+, K=\d+, mu=\d+ is not a cell of the design's"):
        runner.run_specs(specs, None, progress=False)  # refused before any compute
    assert not committed_elsewhere.exists()


def test_a_profile_file_with_a_name_of_its_own_goes_to_its_own_folder(tmp_path):
    mine = _my_profile(tmp_path, "my-study")
    assert changes_from_shipped(mine) == []
    check_named(mine, None)
    assert results_dir(mine.name) == COMMITTED.parent / "my-study"
    (spec,) = setting_specs(mine, "dense", seeds=[0], cells=["r60"])
    check_committed([spec], None)  # not a shipped profile's table: nothing to refuse


def test_a_shipped_profile_and_a_hardware_variant_change_no_design():
    assert changes_from_shipped(load_profile("cpu-tiny")) == []
    assert changes_from_shipped(load_profile("cpu-tiny").quick_variant()) == []
    assert changes_from_shipped(load_profile("gpu-paper-1gpu")) == []


def test_the_committed_check_reads_the_recipe():
    design = Design(PROFILE)
    grid = setting_specs(PROFILE, "dense", seeds=[0])
    assert all(design.recipe_problem(s) is None for s in grid)
    (default,) = [s for s in study.race_check_specs(PROFILE, PROFILE.setting("dense"), None) if s.seed == 200]
    assert design.recipe_problem(default) is None  # TRL's default on a fresh seed is the design's
    (r78b,) = study.own_specs(PROFILE, "dense", study.own_cells(PROFILE, "dense", [(8, 8, 4, 2)]), [0])
    assert design.recipe_problem(r78b) is None  # given literally, a grid cell's recipe (r78b) is the design's
    (mine,) = study.own_specs(PROFILE, "dense", study.own_cells(PROFILE, "dense", [(4, 8, 4, 2)]), [0])
    assert design.problem(mine) is None  # seed, budget and design key are the design's...
    assert "P=4, G=8, K=4, mu=2 is not a cell" in design.recipe_problem(mine)  # ...its recipe is not
    with pytest.raises(ValueError, match="is not a cell of the design's full-budget grid of setting dense"):
        check_committed([mine], None)


def test_a_recipe_is_parsed_and_a_wrong_one_refused_with_the_form():
    assert cells.recipe("P=8,G=8,K=4,mu=2") == (8, 8, 4, 2)
    assert cells.recipe("mu=1, K=2, G=4, P=2") == (2, 4, 2, 1)
    for bad in ("P=8,G=8,K=4", "P=8,G=8,K=4,mu=0", "P=8,G=8,K=4,mu=2,P=4", "8,8,4,2", "P=a,G=8,K=4,mu=2"):
        with pytest.raises(argparse.ArgumentTypeError, match="P=8,G=8,K=4,mu=2"):
            cells.recipe(bad)


def test_own_cells_are_priced_by_the_planner_and_refused_with_its_reason():
    literal, target = study.own_cells(PROFILE, "dense", [(8, 8, 4, 2)], [0.6])
    assert (literal.label, literal.P, literal.G, literal.K, literal.mu) == ("P8G8K4mu2", 8, 8, 4, 2)
    assert literal.target_rho == round(literal.predicted_rho, 2) and literal.predicted_rounds >= 1
    assert target.label == "r60" and abs(target.predicted_rho - 0.6) <= PROFILE.grid.tolerance
    with pytest.raises(ValueError, match=r"rho 0.85 for setting prm: .*a reward model's cost caps"):
        study.own_cells(PROFILE, "prm", rhos=[0.85])
    with pytest.raises(ValueError, match=r"P64G32K16mu4 .*(buys 0 rounds|costliest round)"):
        study.own_cells(PROFILE, "dense", [(64, 32, 16, 4)])
    with pytest.raises(ValueError, match="K=8 completions kept cannot exceed G=4"):
        study.own_cells(PROFILE, "dense", [(8, 4, 8, 1)])
    specs = study.own_specs(PROFILE, "dense", [literal, target], seeds=[0, 1])
    assert [(s.cell, s.seed) for s in specs] == [("P8G8K4mu2", 0), ("P8G8K4mu2", 1), ("r60", 0), ("r60", 1)]
    assert all(s.budget_flops == PROFILE.budget_flops and s.profile == "cpu-tiny" for s in specs)


def test_own_allocations_need_a_folder_of_their_own(tmp_path, monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(runner, "run_specs", lambda specs, root, **kw: ran.append((specs, root)) or [])
    argv = [
        "cells",
        "--profile",
        "cpu-tiny",
        "--setting",
        "dense",
        "--recipe",
        "P=8,G=8,K=4,mu=2",
        "--seed",
        "0",
    ]
    assert cli.main(argv) == 2
    assert "allocations of your own go into a folder of your own" in capsys.readouterr().err and not ran
    cli.main([*argv, "--rho", "0.6", "--results", str(tmp_path)])
    ((specs, root),) = ran
    assert root == str(tmp_path) and [s.cell for s in specs] == ["P8G8K4mu2", "r60"]


def _own_runs() -> pd.DataFrame:
    base = dict(setting="dense", stage="B", budget_kind="full", status="ok")
    return pd.DataFrame(
        [
            {
                **base,
                "cell": "P8G8K4mu2",
                "P": 8,
                "G": 8,
                "K": 4,
                "mu": 2,
                "seed": 0,
                "rho": 0.75,
                "native_reward": 0.71,
            },
            {
                **base,
                "cell": "r60",
                "P": 8,
                "G": 6,
                "K": 4,
                "mu": 1,
                "seed": 0,
                "rho": 0.58,
                "native_reward": 0.80,
            },
        ]
    )


def test_the_beside_table_and_figure_read_the_committed_frontier_and_write_none_of_it(tmp_path):
    from paper_repro.analysis.tables.frontiers import numeric

    before = _digests()
    frontier = numeric(pd.read_csv(COMMITTED / "frontiers.csv"))
    table = beside_table(_own_runs(), frontier)
    dense = frontier[frontier["setting"] == "dense"]
    best = dense.loc[dense["native_reward"].idxmax()]
    assert list(table["committed_best"]) == [best["cell"]] * 2
    assert table["minus_committed_best"].tolist() == pytest.approx(
        [0.71 - best["native_reward"], 0.80 - best["native_reward"]]
    )
    paths = write_beside(beside_figure(_own_runs(), frontier), tmp_path / "figures")
    assert [p.name for p in paths] == ["beside_committed.png", "beside_committed.pdf"]
    assert all(p.stat().st_size > 0 for p in paths)
    with pytest.raises(ValueError, match="none of your runs' settings"):
        beside_figure(_own_runs().assign(setting="nowhere"), frontier)
    assert _digests() == before
