"""``runs.csv``'s ``budget_multiple``: where a row's metrics are along the budget, as a multiple of its
profile's full budget C (2.0 for stage A's grid runs to 2C, 1.0 at C, 0.5 for a pilot at C/2). New
rows carry it from their spec (without changing any run_id); a table of the previous schema is read as
upgraded and rewritten once, every other byte of every row kept; any other header is refused."""

from __future__ import annotations

import dataclasses
import json
import math

import pandas as pd
import pytest

from paper_repro.common.results import (
    MULTIPLE,
    PREVIOUS_RUN_COLUMNS,
    RUN_COLUMNS,
    CorruptTableError,
    ResultTable,
    _records,
    move_rows,
    row_identity,
    upgrade_table,
)
from paper_repro.run.history import full_budget_of
from paper_repro.run.spec import pilot_specs, setting_specs
from tests.worlds import PROFILE


def _stage_a():
    return next(s for s in PROFILE.all_settings() if s.stage == "A")


def _specs():
    """A stage A grid run (to 2C), the same cell at C, a pilot (C/2), and a quick run (its own C)."""
    s = _stage_a()
    grid = setting_specs(PROFILE, s, seeds=1)[0]
    at_c = setting_specs(PROFILE, s, seeds=1, cells=[grid.cell], extend=False)[0]
    pilot = pilot_specs(PROFILE, s)[0]
    quick_profile = PROFILE.quick_variant()
    quick = setting_specs(quick_profile, quick_profile.setting(s.name), seeds=1, quick=True, extend=False)[0]
    return grid, at_c, pilot, quick


def test_a_rows_budget_multiple_is_its_budget_over_its_profiles_c():
    grid, at_c, pilot, quick = _specs()
    assert PROFILE.budget_multiple(_stage_a()) == 2.0  # the committed design runs stage A to 2C
    multiples = [row_identity(s)[MULTIPLE] for s in (grid, at_c, pilot, quick)]
    assert multiples == [2.0, 1.0, PROFILE.pilot_fraction, 1.0]
    assert grid.budget_flops == 2 * at_c.budget_flops
    # C is a label of the spec: a run's id is what it computes, not the unit its budget is read in
    assert dataclasses.replace(grid, full_budget=None).run_id == grid.run_id
    assert math.isnan(row_identity(dataclasses.replace(grid, full_budget=None))[MULTIPLE])


def test_a_new_row_carries_its_budget_multiple():
    """The row :func:`paper_repro.run.train.run_cell` appends starts from this identity."""
    from paper_repro.run.train import _identity

    grid, _, pilot, _ = _specs()
    assert _identity(grid, "")[MULTIPLE] == 2.0 and _identity(pilot, "")[MULTIPLE] == 0.5
    assert list(_identity(grid, "")).index(MULTIPLE) == list(_identity(grid, "")).index("budget_flops") + 1


def test_an_older_rows_c_comes_from_its_shipped_profile_or_is_unknown():
    grid, at_c, pilot, quick = _specs()
    spec = lambda s: json.loads(json.dumps(s.canonical(), default=str))  # noqa: E731  (as a row records it)
    assert [full_budget_of(spec(s)) for s in (grid, at_c, pilot)] == [PROFILE.budget_flops] * 3
    assert full_budget_of(spec(quick)) == PROFILE.quick_variant().budget_flops  # a quick run's own C
    assert full_budget_of({**spec(grid), "profile": "my-own-profile"}) is None


def _old_table(path):
    """A runs table of the previous schema, as an older checkout wrote it: a stage A grid run, the
    same cell at C, a pilot, a run of a profile no one can load, a row recording no spec, and a
    failed run whose error spans lines."""
    grid, at_c, pilot, _ = _specs()
    old = ResultTable(path, PREVIOUS_RUN_COLUMNS)
    for i, s in enumerate((grid, at_c, pilot)):
        row = {k: v for k, v in row_identity(s).items() if k != MULTIPLE}
        old.append({**row, "native_reward": 0.5 + i / 10, "status": "ok", "versions": '{"a": "1,2"}',
                    "spec": json.dumps(s.canonical(), sort_keys=True, default=str)})  # fmt: skip
    mine = {**json.loads(json.dumps(grid.canonical(), default=str)), "profile": "my-own-profile"}
    old.append({"run_id": "mine", "profile": "my-own-profile", "budget_flops": 1e11, "status": "ok",
                "spec": json.dumps(mine)})  # fmt: skip
    old.append({"run_id": "nospec", "profile": "cpu-tiny", "budget_flops": 1e11, "status": "ok"})
    old.append({"run_id": "broke", "profile": "cpu-tiny", "status": "failed", "error": 'Boom: "x",\nline 2'})
    return path.read_text()


def _assert_inserted(old: str, new: str, path) -> None:
    """``new`` is ``old`` with the current header and, in each row's text, ``,<budget_multiple>``
    after its ``budget_flops``: every other byte as it was."""
    at = RUN_COLUMNS.index(MULTIPLE)
    assert new.startswith(",".join(RUN_COLUMNS) + "\n") and old.startswith(
        ",".join(PREVIOUS_RUN_COLUMNS) + "\n"
    )
    before = [line for _, line in _records(old, path, PREVIOUS_RUN_COLUMNS)]
    after = _records(new, path, RUN_COLUMNS)
    assert len(before) == len(after)
    for line, (row, upgraded) in zip(before, after, strict=True):
        head = ",".join(row[c] for c in RUN_COLUMNS[:at])
        assert upgraded == f"{head},{row[MULTIPLE]}{line[len(head) :]}"


def test_an_older_table_is_read_as_upgraded_and_left_as_it_is(tmp_path):
    path = tmp_path / "runs.csv"
    text = _old_table(path)
    multiples = [r[MULTIPLE] for r in ResultTable(path, full_budget=full_budget_of).rows()]
    assert multiples == ["2.0", "1.0", "0.5", "nan", "nan", "nan"]
    assert [r[MULTIPLE] for r in ResultTable(path).rows()] == ["nan"] * 6  # C not known: NaN, no guess
    frame = ResultTable(path, full_budget=full_budget_of).frame()
    assert list(frame.columns) == list(RUN_COLUMNS) and frame[MULTIPLE].tolist()[:3] == [2.0, 1.0, 0.5]
    assert path.read_text() == text  # reading writes nothing


def test_upgrade_table_inserts_the_column_keeping_every_other_byte_once(tmp_path):
    path = tmp_path / "runs.csv"
    text = _old_table(path)
    table = ResultTable(path, full_budget=full_budget_of)
    before = ResultTable(path, PREVIOUS_RUN_COLUMNS).rows()
    assert upgrade_table(table) == 6
    upgraded = path.read_text()
    assert upgraded.startswith(",".join(RUN_COLUMNS) + "\n")
    after = table.rows()
    assert [{k: v for k, v in r.items() if k != MULTIPLE} for r in after] == before
    assert [r[MULTIPLE] for r in after] == ["2.0", "1.0", "0.5", "nan", "nan", "nan"]
    _assert_inserted(text, upgraded, path)  # every other byte of every row as it was
    assert upgrade_table(table) == 0 and path.read_text() == upgraded  # idempotent
    assert upgrade_table(ResultTable(tmp_path / "absent.csv", full_budget=full_budget_of)) == 0


def test_a_write_upgrades_an_older_table_in_the_same_atomic_write(tmp_path):
    path = tmp_path / "runs.csv"
    text = _old_table(path)
    with pytest.raises(ValueError, match=r"previous schema .* full budget C"):
        ResultTable(path).append({"run_id": "new", "status": "ok"})  # no way to know C: refused
    assert path.read_text() == text
    table = ResultTable(path, full_budget=full_budget_of)
    grid = _specs()[0]
    assert table.append({**row_identity(dataclasses.replace(grid, seed=9)), "status": "ok"})
    rows = table.rows()
    assert len(rows) == 7 and rows[0][MULTIPLE] == "2.0" and rows[-1][MULTIPLE] == "2.0"
    kept = path.read_text()
    _assert_inserted(text, kept[: kept.rindex(rows[-1]["run_id"])], path)  # the old rows, then the new


def test_moving_rows_upgrades_both_tables(tmp_path):
    path = tmp_path / "runs.csv"
    _old_table(path)
    (tmp_path / "runs_history.csv").write_text(_old_table(tmp_path / "old.csv").replace("broke", "gone"))
    table = ResultTable(path, full_budget=full_budget_of)
    assert move_rows(table, lambda row: row["run_id"] == "broke") == 1
    history = ResultTable(tmp_path / "runs_history.csv", full_budget=full_budget_of)
    for t in (table, history):
        assert t.path.read_text().startswith(",".join(RUN_COLUMNS) + "\n")
    assert [r["run_id"] for r in history.rows()][-2:] == ["gone", "broke"]
    assert history.rows()[0][MULTIPLE] == "2.0"


def test_a_table_of_any_other_header_is_refused_as_before(tmp_path):
    path = tmp_path / "runs.csv"
    text = _old_table(path).replace(",budget_flops,", ",budget,", 1)  # not the previous schema either
    path.write_text(text)
    table = ResultTable(path, full_budget=full_budget_of)
    for attempt in (table.rows, lambda: upgrade_table(table), lambda: table.append({"run_id": "x"})):
        with pytest.raises(CorruptTableError, match="the header is not the schema"):
            attempt()
    assert path.read_text() == text


def test_recheck_and_reproduce_read_the_column_as_a_label_not_a_measurement():
    from paper_repro.common.rowdiff import COMPARED
    from paper_repro.drivers.recheck import compare

    assert MULTIPLE not in COMPARED
    base = {c: 0.5 for c in COMPARED}
    committed = pd.DataFrame([{"run_id": "a", "setting": "M", "cell": "r50", "seed": 0, "budget_kind": "full",
                               MULTIPLE: 2.0, **base}])  # fmt: skip
    rerun = committed.assign(**{MULTIPLE: float("nan")})  # an older table read without C
    assert compare(committed, rerun)["verdict"].tolist() == ["equal"]


def test_the_committed_rows_say_the_multiple_their_study_spec_carries():
    """The committed runs.csv (upgraded through :func:`upgrade_table`) and a new run of the same spec
    agree: each row's budget_multiple is the one its study spec's row would carry."""
    from paper_repro.common.results import results_dir
    from paper_repro.drivers import dryrun

    by_id = {s.run_id: s for stage in dryrun.study_specs(PROFILE).values() for s in stage}
    rows = ResultTable(results_dir("cpu-tiny") / "runs.csv").rows()
    mine = [r for r in rows if r["run_id"] in by_id]
    assert len(mine) == len(rows) > 500
    assert all(float(r[MULTIPLE]) == row_identity(by_id[r["run_id"]])[MULTIPLE] for r in mine)
    grid = {
        r[MULTIPLE]
        for r in rows
        if r["stage"] == "A" and r["budget_kind"] == "full" and r["cell"] != "default"
    }
    assert "2.0" in grid and {r[MULTIPLE] for r in rows if r["budget_kind"] == "pilot"} == {"0.5"}


def test_the_draws_read_an_older_history_beside_a_current_table_with_one_set_of_columns(tmp_path):
    """``paper-repro draws`` joins runs_history.csv and runs.csv: an older history beside an upgraded
    table is read as upgraded, so the joined runs keep the schema a draw's table is written in."""
    from paper_repro.analysis.draws import all_runs

    _old_table(tmp_path / "runs_history.csv")
    ResultTable(tmp_path / "runs.csv").append({**row_identity(_specs()[0]), "run_id": "new", "status": "ok"})
    runs = all_runs(tmp_path)
    assert list(runs.columns) == list(RUN_COLUMNS) and runs["run_id"].tolist()[-1] == "new"
