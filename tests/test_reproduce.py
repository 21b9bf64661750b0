"""``paper-repro reproduce``: a recomputed study against the committed one, on synthetic
tables whose differences are known."""

from __future__ import annotations

import pandas as pd
import pytest

from paper_repro import cli
from paper_repro.common.results import RUN_COLUMNS, write_table
from paper_repro.common.rowdiff import COMPARED
from paper_repro.drivers import reproduce


def _runs(ids, status="ok") -> pd.DataFrame:
    base = (
        dict.fromkeys(RUN_COLUMNS, "")
        | {c: 0.5 for c in COMPARED}
        | {"C_total": 1e11, "rounds": 20, "steps": 20}
    )
    return pd.DataFrame([base | {"run_id": i, "status": status} for i in ids])


def _claims(verdicts: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({"id": list(verdicts), "verdict": list(verdicts.values()), "our_value": 0.1})


def _study(folder, runs: pd.DataFrame, claims: pd.DataFrame) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_table(folder / "runs.csv", runs[list(RUN_COLUMNS)])
    write_table(folder / "claims.csv", claims)


def test_an_identical_study_reproduces(tmp_path, capsys):
    runs, claims = _runs(["a", "b", "c"]), _claims({"x": "held", "y": "inconclusive"})
    _study(tmp_path / "old", runs, claims)
    _study(tmp_path / "new", runs, claims)
    code = cli.main(["reproduce", "--results", str(tmp_path / "new"), "--committed", str(tmp_path / "old")])
    out = capsys.readouterr().out
    assert code == 0
    assert "3 run ids matched, 0 committed runs missing, 0 extra" in out
    assert "verdicts: none moved" in out and "reproduces: yes" in out


def test_every_kind_of_difference_is_counted_and_fails_the_check(tmp_path):
    old = _runs(["same", "rounding", "answer", "flops", "lost", "gone", "broke"])
    new = old[old["run_id"] != "gone"].copy().reset_index(drop=True)
    new = pd.concat([new, _runs(["stray"])], ignore_index=True)
    at = {r: i for i, r in enumerate(new["run_id"])}
    new.loc[at["rounding"], "native_reward"] += 1.6e-8  # within tolerance
    new.loc[at["answer"], "gsm_pass1"] += 1 / 300
    new.loc[at["flops"], "C_total"] += 1.0
    new.loc[at["lost"], "judge_score"] = float("nan")
    new.loc[at["broke"], "status"] = "failed"
    _study(tmp_path / "old", old, _claims({"x": "held", "y": "inconclusive", "z": "not held"}))
    _study(tmp_path / "new", new, _claims({"x": "held", "y": "not held", "w": "held"}))
    c = reproduce.compare("cpu-tiny", tmp_path / "new", tmp_path / "old")
    assert (c.committed, c.recomputed) == (7, 7)
    assert c.missing == ("gone",) and c.extra == ("stray",) and c.status_changed == ("broke",)
    cols = c.columns.set_index("column")
    assert cols.loc["native_reward", "runs_beyond_tolerance"] == 0
    assert cols.loc["native_reward", "largest_difference"] == pytest.approx(1.6e-8)
    assert cols.loc["gsm_pass1", "runs_beyond_tolerance"] == 1
    assert cols.loc["C_total", "runs_beyond_tolerance"] == 1
    assert cols.loc["judge_score", "largest_difference"] == float("inf")
    assert int(cols["runs_compared"].iloc[0]) == 5  # matched, ok on both sides
    moved = c.verdicts.set_index("id")
    assert sorted(moved.index) == ["w", "y", "z"]
    assert moved.loc["y", "verdict_recomputed"] == "not held" and pd.isna(
        moved.loc["z", "verdict_recomputed"]
    )
    assert not c.reproduces


def test_a_missing_recomputed_study_says_how_to_make_it(tmp_path):
    _study(tmp_path / "old", _runs(["a"]), _claims({"x": "held"}))
    with pytest.raises(FileNotFoundError, match="make reproduce"):
        reproduce.compare("cpu-tiny", tmp_path / "new", tmp_path / "old")
