"""Stage E's claims in the registry (paper_repro.analysis.claims.test_time): one row a claim saying
stage E has not run where its rows are absent; else its rows are the stage-E table's own rules'
(test_time_claims.csv), and leaving a seed out drops that seed's RL policy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from paper_repro.analysis.claims import Classes, Study, claims
from paper_repro.analysis.claims.table import claims_table
from paper_repro.analysis.tables import test_time_claims as rules
from paper_repro.analysis.tables.test_time import ARMS
from paper_repro.config import load_profile

IDS = ("test_time.rl_beats_sampling", "test_time.rl_narrows_passk", "test_time.small_rl_beats_large")
CLASSES = Classes(rule_based=(), prm_style=(), process=(), sizes=("S", "M"), middle=())


def _policy(size: str, kind: str, seed, accuracy: float, rng: np.random.Generator, problems: int = 40):
    """A policy's per-problem rows at k = 1, 2: greedy right with probability ``accuracy``, its samples
    a little less often; a larger size costs twice the FLOPs."""
    scale = 1.0 if size == "S" else 2.0
    greedy = (rng.random(problems) < accuracy).astype(float)
    one = (rng.random(problems) < accuracy - 0.1).astype(float)
    two = np.maximum(one, (rng.random(problems) < accuracy - 0.1).astype(float))
    return pd.DataFrame(
        {
            "problem": range(problems),
            "set": "gsm",
            "policy_id": f"{kind}-{size}-{seed}",
            "size": size,
            "kind": kind,
            "seed": seed,
            "train_flops": 1e9 if kind == "rl" else np.nan,
            "greedy": greedy,
            "greedy_flops": 10.0 * scale,
            **{f"{arm}@1": one for arm in ARMS},
            **{f"{arm}@2": two if arm == "pass" else one for arm in ARMS},
            "sample_flops@1": 12.0 * scale,
            "sample_flops@2": 22.0 * scale,
            "prm_flops@1": 30.0,
            "prm_flops@2": 60.0,
        }
    )


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    frames = [_policy(size, "base", np.nan, 0.3, rng) for size in ("S", "M")]
    frames += [_policy(size, "rl", seed, 0.7, rng) for size in ("S", "M") for seed in (0, 1, 2)]
    return pd.concat(frames, ignore_index=True)


def _study(rows: pd.DataFrame | None) -> Study:
    from paper_repro.common.results import RUN_COLUMNS

    grid = pd.DataFrame(columns=list(RUN_COLUMNS))  # no grid runs: these claims read stage E alone
    return Study(grid, CLASSES, load_profile("cpu-tiny").margins, test_time=rows)


def _ids(study: Study) -> list[str]:
    return [c.id for c in claims(study) if c.id.startswith("test_time.")]


def test_without_stage_e_each_claim_is_one_row_saying_it_has_not_run():
    study = _study(None)
    table = claims_table(study, ids=_ids(study), leave_one_out=False)
    assert list(table["id"]) == list(IDS)
    assert set(table["verdict"]) == {"inconclusive"} and table["our_value"].isna().all()
    assert table["note"].str.startswith("not run: stage E").all()
    assert table["oc_note"].str.contains("stage E has not run").all()


def test_its_rows_are_the_stage_e_tables_rules(rows):
    study = _study(rows)
    ids = _ids(study)
    # per size and set (one pair of sizes for the size claim)
    assert ids == [
        "test_time.rl_beats_sampling.S.gsm",
        "test_time.rl_beats_sampling.M.gsm",
        "test_time.rl_narrows_passk.S.gsm",
        "test_time.rl_narrows_passk.M.gsm",
        "test_time.small_rl_beats_large.S<M.gsm",
    ]
    table = claims_table(study, ids=ids, leave_one_out=False).set_index("id")
    own = rules.claims_table(rows, ["S", "M"], simulate=False)
    for r in own.itertuples():
        row = table.loc[f"{r.id}.{r.where}.{r.set}"]
        assert (row.our_value, row.ci_low, row.ci_high, row.verdict) == (
            r.estimate,
            r.ci_low,
            r.ci_high,
            r.verdict,
        )
    # RL's greedy 0.7 against the base's 0.3 at equal FLOPs: seen through the noise of 3 x 40
    assert table.loc["test_time.rl_beats_sampling.S.gsm", "verdict"] == "held"
    d = next(d for d in rules.differences(rows, ["S", "M"]) if d["id"] == IDS[0] and d["where"] == "M")
    oc = rules.operating(d["diff"], d["direction"])
    row = table.loc["test_time.rl_beats_sampling.M.gsm"]
    assert (row.oc_held_when_true, row.oc_not_held_when_false) == (oc["power"], oc["power_not_held"])
    assert row.oc_wrong_max == max(oc["false_held"], oc["true_not_held"], oc["false_held_reverse"])


def test_leaving_a_seed_out_drops_its_rl_policy_and_keeps_the_base(rows):
    study = _study(rows).without_seed(1)
    kept = study.test_time
    assert set(kept.loc[kept.kind == "rl", "seed"]) == {0, 2}
    assert (kept.kind == "base").sum() == (rows.kind == "base").sum()
    table = claims_table(study, ids=["test_time.rl_beats_sampling.S.gsm"], leave_one_out=False)
    assert table["note"].iloc[0].startswith("2 RL seeds")
