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

from paper_repro.common.results import RUN_COLUMNS, CorruptTableError, ResultTable

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


HEAD = "run_id,value,note\n"
GOOD = "run1,1.0,a\n"


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        pytest.param(HEAD + GOOD + "run2,2.0\n", 3, "2 fields where the header has 3", id="short-row"),
        pytest.param(HEAD + GOOD + "run2,2.0,b,c\n", 3, "4 fields where the header has 3", id="long-row"),
        pytest.param(HEAD + GOOD + "\n" + GOOD, 3, "an empty line where the header has 3", id="empty-line"),
        # a whole row after one whose quoted field spans lines 2-4: the line is where the row starts
        pytest.param(HEAD + 'run1,1.0,"a\nb\nc"\nrun2,2.0\n', 5, "2 fields", id="after-multiline-row"),
        pytest.param("run_id,value\nrun1,1.0\n", 1, "header is not the schema (missing 'note'", id="header"),
        pytest.param("value,run_id,note\n" + GOOD, 1, "in another order", id="header-order"),
        pytest.param("\n" + GOOD, 1, "an empty line where the header should be", id="header-empty"),
        pytest.param(HEAD + GOOD + HEAD, 3, "a second header row", id="two-tables-joined"),
        # a copy or hand edit cut short (our own writes are atomic: they never leave one)
        pytest.param(HEAD + GOOD + "run2,2.0,b", 3, "the last line has no newline", id="no-final-newline"),
        # cut short inside a quoted field, just after a newline in it: the field count still fits,
        # so only the unclosed quote shows it
        pytest.param(HEAD + GOOD + 'run2,2.0,"two\nlines\n', 3, "never closed", id="unclosed-quote"),
        pytest.param(HEAD + GOOD + 'run2,2.0,"b"c\n', 3, "unparseable quoting", id="stray-quote"),
    ],
)
def test_a_corrupt_table_is_refused_in_one_line_naming_file_and_line(tmp_path, text, line, problem):
    path = tmp_path / "runs.csv"
    path.write_text(text)
    table = ResultTable(path, COLUMNS)
    with pytest.raises(CorruptTableError) as info:
        table.append(_row(7))
    message = str(info.value)
    assert isinstance(info.value, ValueError)  # the CLI reports ValueErrors in one line
    assert message.startswith(f"corrupt result table {path}, line {line}: ")
    assert problem in message
    assert "\n" not in message
    assert f"git checkout -- {path}" in message  # what to do about it
    assert (info.value.path, info.value.line) == (path, line)
    with pytest.raises(CorruptTableError, match=f"line {line}: "):
        table.rows()
    with pytest.raises(CorruptTableError, match=f"line {line}: "):
        table.frame()
    assert path.read_text() == text  # never rewritten


def test_a_table_that_is_not_text_is_refused_with_its_line(tmp_path):
    path = tmp_path / "runs.csv"
    data = (HEAD + GOOD).encode() + b"run2,\xff\xfe,b\n"
    path.write_bytes(data)
    with pytest.raises(CorruptTableError, match=rf"^corrupt result table {path}, line 3: not utf-8 text"):
        ResultTable(path, COLUMNS).append(_row(7))
    assert path.read_bytes() == data


def test_a_committed_style_table_is_read_back_exactly(tmp_path):
    """Strict quoting refuses nothing the store writes: quotes, commas, newlines, empty cells."""
    table = ResultTable(tmp_path / "runs.csv", COLUMNS)
    notes = ['a "quoted", comma\nand newline', "", '"', "\n\n", "trailing,", 'x""y']
    for i, note in enumerate(notes):
        table.append({"run_id": f"r{i}", "value": i, "note": note})
    assert [r["note"] for r in table.rows()] == notes


def test_the_cli_reports_a_corrupt_table_in_one_line_before_any_compute(tmp_path):
    """`paper-repro cells` reads the table (to skip finished runs) before it trains anything."""
    path = tmp_path / "runs.csv"
    text = ",".join(RUN_COLUMNS) + "\n" + "0123456789abcdef,cpu-tiny,A\n"
    path.write_text(text)
    command = [sys.executable, "-m", "paper_repro.cli", "cells", "--profile", "cpu-tiny", "--stage", "A"]
    command += ["--seeds", "1", "--results", str(tmp_path)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"paper-repro cells: error: corrupt result table {path}, line 2: 3 fields")
    assert f"git checkout -- {path}" in line
    assert path.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.csv"]  # no step log: nothing ran


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
from paper_repro.common.results import ResultTable
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


def test_recheck_samples_current_ok_runs_of_each_kind():
    import pandas as pd

    from paper_repro.drivers.recheck import SAMPLE, sample

    rows = [{"run_id": f"{k}{i}", "reward_system": k, "budget_kind": "full", "status": "ok"}
            for k in ("prm", "proxy_prm", "structured", "sparse") for i in range(8)]  # fmt: skip
    rows += [
        {"run_id": f"p{i}", "reward_system": "sparse", "budget_kind": "pilot", "status": "ok"}
        for i in range(8)
    ]
    rows += [{"run_id": "bad", "reward_system": "prm", "budget_kind": "full", "status": "failed"}]
    frame = pd.DataFrame(rows)
    current = set(frame["run_id"]) - {"prm0"}  # a superseded run is not rerun
    picked = sample(frame, current)
    assert picked.groupby("reward_system").size().to_dict() == {
        "prm": 6,
        "proxy_prm": 2,
        "structured": 2,
        "sparse": 4,
    }
    assert len(picked) == sum(SAMPLE.values()) and not {"bad", "prm0"} & set(picked["run_id"])
    assert picked.groupby("budget_kind").size().to_dict() == {"full": 12, "pilot": 2}


def test_recheck_states_the_size_of_each_difference_against_its_tolerance():
    """Float rounding in a metric is within tolerance and says how big it is; a changed answer or a
    FLOP count that moved is a difference; a metric lost on one side is one too."""
    import pandas as pd

    from paper_repro.common.rowdiff import COMPARED
    from paper_repro.drivers.recheck import compare

    base = {c: 0.5 for c in COMPARED} | {"C_total": 1e11, "rounds": 20, "steps": 20}
    ids = ["same", "rounding", "answer", "flops", "lost"]
    committed = pd.DataFrame([{"run_id": i, "setting": "prm", "cell": "r30", "seed": 0, "budget_kind": "full",
                               **base} for i in ids])  # fmt: skip
    rerun = committed.copy()
    rerun.loc[1, "native_reward"] += 1.6e-8
    rerun.loc[2, "gsm_pass1"] += 1 / 300
    rerun.loc[3, "C_total"] += 1.0
    rerun.loc[4, "judge_score"] = float("nan")
    out = compare(committed, rerun).set_index(pd.Index(ids))
    assert out["verdict"].tolist() == ["equal", "within tolerance", "differs", "differs", "differs"]
    assert out.loc["rounding", "in_column"] == "native_reward"
    assert abs(out.loc["rounding", "largest_difference"] - 1.6e-8) < 1e-12
    assert (
        out.loc["answer", "beyond_tolerance"] == "gsm_pass1"
        and out.loc["flops", "beyond_tolerance"] == "C_total"
    )
