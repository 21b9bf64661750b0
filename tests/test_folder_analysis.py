"""Any folder of runs is analysed: an exploration's (a seed and a cell of one's own) as the design its
runs make up, saying what it found and what it left out and why; the committed study as its design.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import pandas as pd
import pytest

from paper_repro.analysis import analyse
from paper_repro.analysis.tables.inventory import read_folder
from tests.worlds import PROFILE, START, design_rows, paper_peaks, write_rows


def explored(seeds=(42,), cells=("r40",), setting="dense", grid_seed: int | None = None) -> list[dict]:
    """Full-budget rows of ``setting``'s ``cells`` on ``seeds`` (none a design seed), as a notebook run
    with ``-y 'seeds: [...]' -y 'cells: [...]' -p results_root ...`` records them; with ``grid_seed``,
    also that design seed's rows of the same cells."""
    base = [r for r in design_rows(paper_peaks, seeds=1, pilot_seeds=0, fresh_seeds=0, default_cells=False)
            if r["setting"] == setting and r["cell"] in cells]  # fmt: skip
    rows = []
    for seed in (*seeds, *([grid_seed] if grid_seed is not None else [])):  # the design seed's last
        for r in base:
            spec = {**json.loads(r["spec"]), "seed": seed}
            rows.append({**r, "run_id": f"{r['run_id']}-{seed}", "seed": seed, "spec": json.dumps(spec, sort_keys=True),
                         "native_reward": r["native_reward"] + 0.01 * (seed % 7),
                         "created_at": (START + timedelta(hours=1, seconds=len(rows))).isoformat()})  # fmt: skip
    return rows


def test_an_exploration_folder_is_analysed_as_the_runs_it_holds(tmp_path):
    """The README's exploration (dense, cell r40, seed 42, into a folder of its own): `paper-repro
    analyse --results` exits 0, says what it found, writes the frontier, and marks every claim not
    computable (inconclusive, NaN values: one cell of one seed compares nothing)."""
    write_rows(tmp_path / "runs.csv", explored())
    cmd = [sys.executable, "-m", "paper_repro.cli", "analyse", "--profile", "cpu-tiny", "--results", str(tmp_path),
           "--figures", str(tmp_path / "figures"), "--power-replicates", "0"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "found: 1 full-budget grid run: dense r40 seed 42" in done.stdout, done.stdout
    assert "design: the folder's own" in done.stdout and "left out: nothing" in done.stdout
    assert (
        "not computable: the claims (the grid holds at most 1 cell per setting and 1 seed per cell"
        in done.stdout
    )
    frontier = pd.read_csv(tmp_path / "frontiers.csv")
    assert list(frontier["setting"]) == ["dense"] and list(frontier["seeds"]) == [1]
    claims = pd.read_csv(tmp_path / "claims.csv")
    assert (claims["verdict"] == "inconclusive").all() and claims["our_value"].isna().all()
    assert claims["note"].str.startswith("not computable: ").all()


def test_an_exploration_says_what_it_left_out_and_why(tmp_path):
    """Two cells of two seeds each compare cells over seeds, so the claims are computed; a failed row
    and a quick run mixed in are left out, each with its reason."""
    import dataclasses

    from paper_repro.run.spec import spec_for

    rows = explored(seeds=(42, 43), cells=("r15", "r78"))
    failed = {**rows[0], "run_id": "failed-one", "status": "failed"}
    quick = spec_for(
        PROFILE.quick_variant(),
        PROFILE.setting("dense"),
        _cell("dense", "r40", PROFILE.quick_variant().budget_flops),
        7,
    )
    stray = {**rows[0], "run_id": "quick-one", "budget_flops": quick.budget_flops,
             "spec": json.dumps(dataclasses.replace(quick).canonical(), sort_keys=True, default=str)}  # fmt: skip
    write_rows(tmp_path / "runs.csv", [*rows, failed, stray])
    result = analyse(PROFILE, tmp_path, tmp_path / "figures", power_replicates=0, figures=False)
    lines = result.folder.lines()
    assert result.folder.design == "folder" and result.folder.not_computable is None
    assert "found: 4 full-budget grid runs: dense r15, r78 x seeds 42, 43" in lines, lines
    assert any(line.startswith("left out: 1 row not ok (failed-one)") for line in lines), lines
    assert any(line.startswith("left out: 1 row of quick runs") and "--quick" in line for line in lines), (
        lines
    )
    assert len(result.frontiers) == 2 and (result.frontiers["seeds"] == 2).all()
    assert not result.claims["note"].astype(str).str.startswith("not computable").any()


def test_auto_reads_the_study_where_the_folder_holds_its_grid(tmp_path):
    """A folder with runs on a design seed is read as the study (a copy of it, a rerun): the other
    seeds are left out, with the flag that reads them; ``--design folder`` reads every seed."""
    write_rows(tmp_path / "runs.csv", explored(seeds=(42,), cells=("r15", "r78"), grid_seed=0))
    study = read_folder(tmp_path / "runs.csv", PROFILE)
    assert study.design == "study" and set(study.rows["grid"]["seed"]) == {0}
    (line,) = [x for x in study.lines() if "seeds the design does not use" in x]
    assert line.startswith("left out: 2 rows") and "--design folder" in line
    folder = read_folder(tmp_path / "runs.csv", PROFILE, design="folder")
    assert set(folder.rows["grid"]["seed"]) == {0, 42}
    with pytest.raises(ValueError, match="design must be one of"):
        read_folder(tmp_path / "runs.csv", PROFILE, design="mine")


def test_a_folder_of_no_usable_run_says_what_it_holds(tmp_path):
    rows = explored()
    write_rows(tmp_path / "runs.csv", [{**r, "status": "failed"} for r in rows])
    with pytest.raises(ValueError, match="no full-budget run of the cpu-tiny grid") as err:
        analyse(PROFILE, tmp_path, tmp_path / "figures", power_replicates=0)
    assert "left out: 1 row not ok" in str(err.value)


def _cell(setting: str, label: str, budget: float = PROFILE.budget_flops):
    from paper_repro.run.allocation import plan_setting

    planned = plan_setting(PROFILE, PROFILE.setting(setting), budget)
    return next(c for c in planned.cells if c.label == label)
