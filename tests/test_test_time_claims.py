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


def _claims_csv(path, study: Study) -> str:
    """A claims.csv as the analysis writes it: rows of other claims (a comma, a quote, an empty cell and
    floats among them) around stage E's rows of ``study``; returns the file's text."""
    from paper_repro.common.results import write_table

    ours = claims_table(study, ids=_ids(study), leave_one_out=False).assign(
        leave_one_seed_out="not recomputed"
    )
    first = ours.iloc[:1]  # the others as typed as the analysis's: its floats written by its writer
    before = [
        first.assign(id="a.first", note='say "held", or not', our_value=1 / 3),
        first.assign(id="b.2", ci_low=float("nan")),
    ]
    after = first.assign(id="z.last", power_now=0.123456789012)
    write_table(path, pd.concat([*before, ours, after], ignore_index=True))
    return path.read_text()


def _refresh(tmp_path, monkeypatch, before: Study, now: Study):
    """:func:`refresh_claims` on a folder whose claims.csv was written for ``before`` and whose rows
    are now ``now``'s; returns the file's lines before and after."""
    from types import SimpleNamespace

    from paper_repro.analysis import pipeline

    profile = load_profile("cpu-tiny")
    path = tmp_path / "claims.csv"
    text = _claims_csv(path, before)
    monkeypatch.setattr(pipeline, "_read", lambda *a: SimpleNamespace(not_computable=""))
    monkeypatch.setattr(pipeline, "_study", lambda *a: (now, {}))
    pipeline.refresh_claims(profile, IDS, tmp_path)
    return text.splitlines(), path.read_text().splitlines()


def test_stage_e_refreshes_its_claim_rows_and_leaves_every_other_row_as_it_was(rows, tmp_path, monkeypatch):
    old, new = _refresh(tmp_path, monkeypatch, _study(None), _study(rows))
    # the header, two rows before and one after stage E's, byte for byte; its 3 "not run" rows now 5
    assert new[:3] == old[:3] and new[-1] == old[-1] and len(old) == 7 and len(new) == 9
    table = pd.read_csv(tmp_path / "claims.csv")
    ours = table[table["id"].str.startswith("test_time.")].set_index("id")
    assert list(ours.index) == _ids(_study(rows))
    assert not ours["note"].str.startswith("not run").any()
    assert ours.loc["test_time.rl_beats_sampling.S.gsm", "verdict"] == "held"
    assert (ours["leave_one_seed_out"] == "not recomputed").all()  # these grid-less studies have no seeds


def test_a_refresh_of_the_same_rows_rewrites_the_same_bytes(rows, tmp_path, monkeypatch):
    old, new = _refresh(tmp_path, monkeypatch, _study(rows), _study(rows))
    assert new == old


def test_a_refresh_refuses_a_claims_table_without_stage_es_rows(tmp_path, monkeypatch):
    from paper_repro.analysis import pipeline

    profile = load_profile("cpu-tiny")
    path = tmp_path / "claims.csv"
    _claims_csv(path, _study(None))
    with pytest.raises(ValueError, match="design simulator does not decide"):
        pipeline.refresh_claims(profile, ["frontier.no_such_claim"], tmp_path)
    text = path.read_text().replace("test_time.", "renamed.")
    path.write_text(text)
    with pytest.raises(ValueError, match="rerun the analysis"):
        pipeline.refresh_claims(profile, IDS, tmp_path)
    assert path.read_text() == text
