"""``runs.csv`` is the study: ``split_history`` (``paper-repro split-history``) moves the rows that are
not runs of the profile's design (an earlier generation's) and their curve points into
``runs_history.csv`` and ``curves_history.csv`` beside them, atomically and idempotently, every other
row's text as written; the sweep's finished set and the analysis' runs stay the same."""

from __future__ import annotations

import dataclasses
import json
import math

import pandas as pd

from paper_repro.common.results import CURVE_COLUMNS, RUN_COLUMNS, ResultTable, move_rows
from paper_repro.run.allocation import plan_setting
from paper_repro.run.history import split_history
from paper_repro.run.spec import spec_for
from tests.worlds import PROFILE, design_rows, paper_peaks, write_rows


def test_move_rows_is_atomic_idempotent_and_keeps_every_row_as_written(tmp_path):
    columns = ("run_id", "status", "note")
    table = ResultTable(tmp_path / "runs.csv", columns)
    for i, note in enumerate(["plain", 'a "quoted", comma\nand newline', "x", "old\nline"]):
        table.append({"run_id": f"r{i}", "status": "ok", "note": note})
    text = (tmp_path / "runs.csv").read_text()
    old = lambda row: row["note"] in ("x", "old\nline")  # noqa: E731
    assert move_rows(table, old) == 2
    assert [r["run_id"] for r in table.rows()] == ["r0", "r1"]
    history = ResultTable(tmp_path / "runs_history.csv", columns)
    assert [r["note"] for r in history.rows()] == ["x", "old\nline"]
    kept, moved = (tmp_path / "runs.csv").read_text(), (tmp_path / "runs_history.csv").read_text()
    assert kept + moved[len("run_id,status,note\n") :] == text  # every row's text as it was written
    assert move_rows(table, old) == 0 and (tmp_path / "runs_history.csv").read_text() == moved
    # killed between the two writes: the rows are in both, and the next call finishes the move
    (tmp_path / "runs.csv").write_text(text)
    assert move_rows(table, old) == 2 and (tmp_path / "runs_history.csv").read_text() == moved
    assert (tmp_path / "runs.csv").read_text() == kept
    assert table.append({"run_id": "r9", "status": "ok", "note": "new"}) and len(table.rows()) == 3


def test_split_history_leaves_the_design_in_runs_csv(tmp_path, capsys):
    """An earlier generation's rows and their curve points move beside the table; the design's rows
    stay, the sweep's finished set loses none of the design's runs, and the analysis reads the same
    runs (``paper-repro split-history``, twice: the second moves nothing)."""
    from paper_repro.analysis.tables.frontiers import load_runs
    from paper_repro.cli import main

    design = design_rows(paper_peaks, seeds=1, pilot_seeds=0, fresh_seeds=0, default_cells=False)[:6]
    s = PROFILE.setting(design[0]["setting"])
    cell = next(
        c for c in plan_setting(PROFILE, s, PROFILE.budget_flops).cells if c.label == design[0]["cell"]
    )
    old = dataclasses.replace(spec_for(PROFILE, s, cell, 0), weights="0123456789abcdef")  # a rebuilt model
    earlier = [{**design[0], "run_id": f"old{i}", "created_at": "2026-11-01T00:00:00",
                "spec": json.dumps(old.canonical(), sort_keys=True, default=str)} for i in range(3)]  # fmt: skip
    write_rows(tmp_path / "runs.csv", [*earlier, *design])
    points = [{"curve_id": f"{r['run_id']}@0.5", "run_id": r["run_id"], "point": 0.5, "status": "ok"}
              for r in [*earlier, *design]]  # fmt: skip
    points.append(
        {"curve_id": "running@0.5", "run_id": "running", "point": 0.5, "status": "ok"}
    )  # no row yet
    write_rows(tmp_path / "curves.csv", points, CURVE_COLUMNS)
    done = ResultTable(tmp_path / "runs.csv", RUN_COLUMNS).done()
    read = sorted(load_runs(tmp_path / "runs.csv", PROFILE)["run_id"])
    assert main(["split-history", "--profile", "cpu-tiny", "--results", str(tmp_path)]) == 0
    assert "moved 3 rows" in capsys.readouterr().out
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert list(runs["run_id"]) == [r["run_id"] for r in design]
    assert list(pd.read_csv(tmp_path / "runs_history.csv")["run_id"]) == ["old0", "old1", "old2"]
    curves = pd.read_csv(tmp_path / "curves.csv")
    assert set(curves["run_id"]) == {*runs["run_id"], "running"}  # a run's points wait for its row
    assert set(pd.read_csv(tmp_path / "curves_history.csv")["run_id"]) == {"old0", "old1", "old2"}
    assert ResultTable(tmp_path / "runs.csv", RUN_COLUMNS).done() == done - {"old0", "old1", "old2"}
    assert sorted(load_runs(tmp_path / "runs.csv", PROFILE)["run_id"]) == read
    assert split_history(PROFILE, tmp_path) == (0, 0)  # idempotent
    assert not math.isnan(runs["native_reward"].iloc[0])


def test_split_history_before_a_registration_moves_the_earlier_study_of_the_same_design(tmp_path, capsys):
    """``--before``: the design's rows made before a time (a study run before its design was
    registered) move with their curve points; rows made after stay; the rerun then writes the same
    run ids into ``runs.csv`` again, the earlier rows kept in ``runs_history.csv``."""
    from paper_repro.cli import main

    design = design_rows(paper_peaks, seeds=1, pilot_seeds=0, fresh_seeds=0, default_cells=False)[:4]
    rows = [{**r, "created_at": f"2026-12-0{2 if i < 3 else 5}T12:00:00+00:00"} for i, r in enumerate(design)]
    write_rows(tmp_path / "runs.csv", rows)
    points = [
        {"curve_id": f"{r['run_id']}@0.5", "run_id": r["run_id"], "point": 0.5, "status": "ok"} for r in rows
    ]
    write_rows(tmp_path / "curves.csv", points, CURVE_COLUMNS)
    assert split_history(PROFILE, tmp_path) == (0, 0)  # every row is the design's
    args = [
        "split-history",
        "--profile",
        "cpu-tiny",
        "--results",
        str(tmp_path),
        "--before",
        "2026-12-04T00:00",
    ]
    assert main(args) == 0
    assert (
        "moved 3 rows that are not runs of the cpu-tiny design or made before 2026-12-04"
        in capsys.readouterr().out
    )
    assert list(pd.read_csv(tmp_path / "runs.csv")["run_id"]) == [rows[3]["run_id"]]
    assert list(pd.read_csv(tmp_path / "runs_history.csv")["run_id"]) == [r["run_id"] for r in rows[:3]]
    assert set(pd.read_csv(tmp_path / "curves.csv")["run_id"]) == {rows[3]["run_id"]}
    assert main(args) == 0 and "moved 0 rows" in capsys.readouterr().out  # idempotent
    table = ResultTable(tmp_path / "runs.csv", RUN_COLUMNS)
    assert rows[0]["run_id"] not in table.done()  # the rerun makes it again
    rerun = {**rows[0], "created_at": "2026-12-05T13:00:00+00:00"}
    write_rows(tmp_path / "rerun.csv", [rerun])
    table.append({k: str(v) for k, v in pd.read_csv(tmp_path / "rerun.csv", dtype=str).iloc[0].items()})
    assert rows[0]["run_id"] in table.done()
    assert split_history(PROFILE, tmp_path, "2026-12-04T00:00") == (0, 0)  # the rerun's row stays
