"""``paper-repro reproduce``: a recomputed study against the committed one, on synthetic
tables whose differences are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from paper_repro import cli
from paper_repro.common.results import METRICS, RUN_COLUMNS, write_table
from paper_repro.common.rowdiff import COMPARED
from paper_repro.drivers import reproduce, reproduce_oc
from paper_repro.drivers import reproduce_noise as noise


def _runs(ids, status="ok") -> pd.DataFrame:
    base = (
        dict.fromkeys(RUN_COLUMNS, "")
        | {c: 0.5 for c in COMPARED}
        | {"C_total": 1e11, "rounds": 20, "steps": 20}
    )
    return pd.DataFrame([base | {"run_id": i, "status": status} for i in ids])


def _claims(verdicts: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        {"id": list(verdicts), "verdict": list(verdicts.values()), "our_value": 0.1}
        | {"ci_low": 0.05, "ci_high": 0.15}
    )


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
    assert "claims: 2 compared, 0 verdicts moved, 0 estimates outside" in out
    assert out.strip().endswith("the study reproduces bit for bit")


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
    moved = c.verdicts.set_index("claim")
    assert sorted(moved.index) == ["w", "y", "z"]
    assert moved.loc["y", "verdict_recomputed"] == "not held"
    assert moved.loc["z", "verdict_recomputed"] == "absent"
    assert not c.reproduces


def test_a_missing_recomputed_study_says_how_to_make_it(tmp_path):
    _study(tmp_path / "old", _runs(["a"]), _claims({"x": "held"}))
    with pytest.raises(FileNotFoundError, match="make reproduce"):
        reproduce.compare("cpu-tiny", tmp_path / "new", tmp_path / "old")


# ---------------------------------------------------------------- the three outcomes on a known truth

SD = 0.03  # the synthetic study's seed SD in every metric


def _synthetic(seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A study whose seed spread is known: 2 settings x 6 cells x 3 seeds, each metric a cell mean
    plus N(0, SD) per seed; claims with 90% intervals of half-width 0.05."""
    rng = np.random.default_rng(seed)
    rows = []
    for setting in ("M", "prm"):
        for cell in range(6):
            mean = rng.uniform(0.3, 0.7, len(METRICS))
            for s in range(3):
                values = dict(zip(METRICS, mean + rng.normal(0, SD, len(METRICS)), strict=True))
                rows.append({"run_id": f"{setting}{cell}s{s}", "setting": setting, "cell": f"r{cell}", "seed": s}
                            | {"budget_kind": "full", "budget_multiple": 1.0} | values)  # fmt: skip
    base = _runs([r["run_id"] for r in rows]).drop(columns=[*METRICS, "setting", "cell", "seed"])
    runs = base.merge(pd.DataFrame(rows).drop(columns=["budget_kind", "budget_multiple"]), on="run_id")
    runs["budget_kind"], runs["budget_multiple"] = "full", 1.0
    claims = pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "verdict": ["held", "not held", "inconclusive"],
            "our_value": [0.2, -0.1, 0.0],
        }
    )
    return runs, claims.assign(ci_low=claims["our_value"] - 0.05, ci_high=claims["our_value"] + 0.05)


def _outcome(tmp_path, runs, claims, new_runs, new_claims, capsys) -> tuple[int, str]:
    _study(tmp_path / "old", runs, claims)
    _study(tmp_path / "new", new_runs, new_claims)
    code = cli.main(["reproduce", "--results", str(tmp_path / "new"), "--committed", str(tmp_path / "old")])
    return code, capsys.readouterr().out.strip().splitlines()[-1]


def test_the_synthetic_studys_seed_spread_is_measured_as_built():
    runs, _ = _synthetic()
    spread = noise.seed_spread(runs)
    assert set(spread.index) == {"*", "M", "prm"}
    assert spread.loc["*", "native_reward"] == pytest.approx(SD, rel=0.3)  # 24 degrees of freedom


def test_a_copy_reproduces_bit_for_bit(tmp_path, capsys):
    runs, claims = _synthetic()
    assert _outcome(tmp_path, runs, claims, runs, claims, capsys) == (0, "the study reproduces bit for bit")


def test_a_copy_with_seed_sized_noise_in_a_few_runs_reproduces_within_noise(tmp_path, capsys):
    runs, claims = _synthetic()
    new = runs.copy()
    rng = np.random.default_rng(1)
    for i in (0, 7, 20, 33):  # 4 of 36 runs reseeded: each metric moved as two seeds differ
        new.loc[i, list(METRICS)] += rng.normal(0, np.sqrt(2) * SD, len(METRICS))
    moved = claims.assign(our_value=claims["our_value"] + 0.01)  # inside every interval
    assert _outcome(tmp_path, runs, claims, new, moved, capsys) == (0, "the study reproduces within noise")


def test_a_flipped_verdict_does_not_reproduce_and_says_which(tmp_path, capsys):
    runs, claims = _synthetic()
    flipped = claims.assign(verdict=["held", "inconclusive", "inconclusive"])
    code, line = _outcome(tmp_path, runs, claims, runs, flipped, capsys)
    assert code == 1
    assert line == "the study does not reproduce: verdict b: not held -> inconclusive"


def test_an_estimate_moved_far_does_not_reproduce(tmp_path, capsys):
    runs, claims = _synthetic()
    far = claims.assign(our_value=[0.2, -0.1, 0.3])
    code, line = _outcome(tmp_path, runs, claims, runs, far, capsys)
    assert code == 1
    assert line == "the study does not reproduce: estimate c: 0.3 outside [-0.05, 0.05]"


def test_an_effect_moved_in_every_run_of_a_setting_does_not_reproduce(tmp_path, capsys):
    """A shift of one seed SD in every prm run, claims untouched: the differing runs share a sign."""
    runs, claims = _synthetic()
    new = runs.copy()
    new.loc[new["setting"] == "prm", "native_reward"] += SD
    code, line = _outcome(tmp_path, runs, claims, new, claims, capsys)
    assert code == 1
    assert line.startswith(
        "the study does not reproduce: native_reward: 18 runs differ beyond the seed spread"
    )


def test_a_few_runs_far_beyond_the_seed_spread_do_not_reproduce(tmp_path, capsys):
    """Two runs off by ten seed SDs, in opposite directions (no shift): the scale test says so."""
    runs, claims = _synthetic()
    new = runs.copy()
    new.loc[0, "gsm_pass1"] += 10 * SD
    new.loc[5, "gsm_pass1"] -= 10 * SD
    code, line = _outcome(tmp_path, runs, claims, new, claims, capsys)
    assert code == 1 and "gsm_pass1: 2 runs differ beyond the seed spread" in line


def test_stage_e_tables_are_compared_where_both_sides_have_them(tmp_path, capsys):
    runs, claims = _synthetic()
    arms = pd.DataFrame({"policy_id": ["p", "q"], "accuracy": [0.5, 0.25], "seconds_sampling": [1.0, 2.0]})
    tt = pd.DataFrame({"id": ["t"], "where": ["S"], "set": ["gsm"], "estimate": [0.3], "ci_low": [0.2]})
    tt = tt.assign(ci_high=0.4, verdict="held")
    for side, acc, seconds in (("old", 0.5, 1.0), ("new", 0.51, 9.0)):
        _study(tmp_path / side, runs, claims)
        write_table(
            tmp_path / side / "test_time_arms.csv",
            arms.assign(accuracy=[acc, 0.25], seconds_sampling=seconds),
        )
        write_table(tmp_path / side / "test_time_claims.csv", tt)
    c = reproduce.compare("cpu-tiny", tmp_path / "new", tmp_path / "old")
    rows = c.tables.set_index("table")["differing"]
    assert rows.to_dict() == {"test_time_arms.csv": 1, "test_time_claims.csv": 0}  # seconds not compared
    assert c.outcome == (noise.WITHIN_NOISE, [])
    write_table(tmp_path / "new" / "test_time_claims.csv", tt.assign(verdict="inconclusive"))
    said, what = reproduce.compare("cpu-tiny", tmp_path / "new", tmp_path / "old").outcome
    assert said == noise.NOT_REPRODUCED and what == ["verdict t S gsm: held -> inconclusive"]


def test_the_operating_characteristic_separates_reseeds_from_a_moved_effect():
    """On the synthetic study: a copy is bit for bit, 1.6% of runs reseeded (here none of 36, then
    the estimates alone move) is within noise, and a setting shifted by a seed SD is caught."""
    runs, claims = _synthetic()
    table = reproduce_oc.simulate(runs, claims, replicates=5).set_index(
        ["scenario", "share_reseeded", "shift_sd"]
    )
    assert table.loc[("copy", 0.0, 0.0), "bit_for_bit"] == 1.0
    assert table.loc[("reseeded", 0.05, 0.0), "within_noise"] == 1.0
    assert table.loc[("effect moved", 0.016, 1.0), "does_not_reproduce"] == 1.0
    assert table.loc[("effect moved", 0.016, 1.0), "runs_beyond_noise"] == 1.0
