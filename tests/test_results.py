"""The result store: atomic, append-only, no duplicates, corrupt tables refused (never rewritten)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paper_repro.results import RUN_COLUMNS, CorruptTableError, ResultTable

COLUMNS = ("run_id", "value", "note")


def _row(i: int) -> dict:
    return {"run_id": f"run{i:05d}", "value": i * 0.5, "note": 'a "quoted", comma\nand newline'}


def test_append_skips_an_existing_run_id(tmp_path):
    table = ResultTable(tmp_path / "runs.csv", COLUMNS)
    assert table.append(_row(1)) is True
    assert table.append({**_row(1), "value": 99.0}) is False
    rows = table.rows()
    assert [r["run_id"] for r in rows] == ["run00001"]
    assert float(rows[0]["value"]) == 0.5  # the first row stands; a rerun never overwrites it
    assert rows[0]["note"] == 'a "quoted", comma\nand newline'


def test_nan_is_written_as_nan_not_zero(tmp_path):
    table = ResultTable(tmp_path / "runs.csv", COLUMNS)
    table.append({"run_id": "x", "value": float("nan"), "note": None})
    frame = table.frame()
    assert math.isnan(frame["value"][0])


def test_unknown_column_and_missing_key_are_refused(tmp_path):
    table = ResultTable(tmp_path / "runs.csv", COLUMNS)
    with pytest.raises(ValueError, match="unknown columns"):
        table.append({"run_id": "x", "bogus": 1})
    with pytest.raises(ValueError, match="needs its key"):
        table.append({"value": 1})
    assert not (tmp_path / "runs.csv").exists()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("run_id,value,note\nrun1,1.0,a\nrun2,2.0\n", "line 3"),
        ("run_id,value\nrun1,1.0\n", "line 1"),
        ("run_id,value,note\nrun1,1.0,a\nrun2,2.0,b", "incomplete"),
    ],
)
def test_a_corrupt_table_is_refused_with_its_line_and_left_untouched(tmp_path, text, where):
    path = tmp_path / "runs.csv"
    path.write_text(text)
    table = ResultTable(path, COLUMNS)
    with pytest.raises(CorruptTableError, match=where):
        table.append(_row(7))
    with pytest.raises(CorruptTableError):
        table.rows()
    assert path.read_text() == text


def test_the_run_schema_has_the_design_columns():
    for column in (
        "run_id", "profile", "stage", "setting", "cell", "seed", "budget_flops", "target_rho", "rho",
        "C_search", "C_learning", "C_reward", "C_total", "flops_convention", "P", "G", "K", "mu", "steps",
        "model", "reward_system", "native_reward", "gsm_pass1", "math_pass1", "judge_score",
        "base_gsm_pass1", "status", "git_sha", "git_dirty", "versions", "created_at", "executed_notebook",
    ):  # fmt: skip
        assert column in RUN_COLUMNS
    assert len(set(RUN_COLUMNS)) == len(RUN_COLUMNS)


WRITER = """
import sys
from paper_repro.results import ResultTable
table = ResultTable(sys.argv[1], ("run_id", "value", "note"))
start, stop = int(sys.argv[2]), int(sys.argv[3])
for i in range(start, stop):
    table.append({"run_id": f"run{i:05d}", "value": i * 0.5, "note": "x" * 2000})
"""


def _writer(path: Path, start: int, stop: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(start), str(stop)])


def test_writers_killed_mid_append_never_truncate_or_duplicate(tmp_path):
    """SIGKILL a writer at many instants; after each kill the table parses, holds a prefix of the
    rows in order, and a rerun of the same writer finishes only what is missing."""
    path = tmp_path / "runs.csv"
    table = ResultTable(path, COLUMNS)
    for delay in (0.3, 0.45, 0.6, 0.8):
        proc = _writer(path, 0, 400)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        ids = [r["run_id"] for r in table.rows()]
        assert ids == [f"run{i:05d}" for i in range(len(ids))]  # a clean prefix, no gaps, no repeats
    before = len(table.rows())
    assert before < 400, "the writer finished before any kill: the test did not test anything"
    subprocess.run([sys.executable, "-c", WRITER, str(path), "0", "400"], check=True)
    ids = [r["run_id"] for r in table.rows()]
    assert ids == [f"run{i:05d}" for i in range(400)]
    assert all(r["note"] == "x" * 2000 for r in table.rows())
    leftovers = [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    assert len(leftovers) <= 4  # a killed writer may leave its temp file; never the table half-written


def test_concurrent_writers_lose_no_row(tmp_path):
    path = tmp_path / "runs.csv"
    procs = [_writer(path, 0, 60), _writer(path, 30, 90), _writer(path, 60, 120)]
    for p in procs:
        assert p.wait() == 0
    ids = sorted(r["run_id"] for r in ResultTable(path, COLUMNS).rows())
    assert ids == [f"run{i:05d}" for i in range(120)]


def test_a_failed_attempt_is_kept_and_a_retry_appended_once(tmp_path):
    table = ResultTable(tmp_path / "runs.csv", ("run_id", "status", "value"))
    assert table.append({"run_id": "a", "status": "failed", "value": float("nan")})
    assert table.append({"run_id": "a", "status": "ok", "value": 1.0})
    assert not table.append({"run_id": "a", "status": "ok", "value": 2.0})
    assert [(r["status"], r["value"]) for r in table.rows()] == [("failed", "nan"), ("ok", "1.0")]
