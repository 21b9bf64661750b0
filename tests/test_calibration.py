"""The planner's predicted lengths: measured on the committed runs, predicting their rounds, and never
choosing a cell (paper_repro/run/calibration.py, paper_repro/run/allocation.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

from paper_repro import cli
from paper_repro.config import PredictedLengths, load_profile
from paper_repro.drivers import dryrun
from paper_repro.run import calibration
from paper_repro.run.allocation import plan_setting, predicted_rounds
from paper_repro.run.spec import pilot_specs, setting_specs


@pytest.fixture(scope="module")
def cpu_tiny():
    return load_profile("cpu-tiny")


def test_the_profiles_predicted_lengths_are_what_the_committed_runs_realised(cpu_tiny):
    """cpu-tiny's ``predicted_lengths`` are the ones its committed step logs give, setting by setting:
    a rerun of the study that changed them fails here until `paper-repro plan --measure-lengths` is
    pasted into the profile."""
    assert cpu_tiny.predicted_lengths.source == "measured"
    measured = calibration.measured_lengths(cpu_tiny)
    assert measured == cpu_tiny.predicted_lengths.settings
    assert set(measured) == {s.name for s in cpu_tiny.all_settings()}
    assert all("reward" in measured[name] for name in ("proxy_prm", "prm"))  # the PRM-charged ones


def test_predicted_rounds_are_within_ten_percent_of_every_committed_cell(cpu_tiny):
    """Every cell of every setting's committed grid, at the budget its runs trained to: the predicted
    rounds within 10% of the mean realised ones; the design's lengths (30 + 55 tokens) were not."""
    table = calibration.rounds_check(cpu_tiny)
    assert len(table) == 67 and (table["runs"] == cpu_tiny.seeds).all()
    assert (abs(table["ratio"] - 1) <= 0.10).all(), table[abs(table["ratio"] - 1) > 0.10]
    assert (table["design_ratio"] < 0.8).all()  # why the prediction needed its own lengths
    at_c = calibration.rounds_check(cpu_tiny, budget_flops=cpu_tiny.budget_flops)  # stage A from its C points
    assert len(at_c) == 67 and (abs(at_c["ratio"] - 1) <= 0.10).all()


def test_the_predicted_lengths_never_enter_a_run(cpu_tiny):
    """The cells, and every spec of every setting (run_id, the round price and rho the spec keeps),
    are the same whatever the predicted lengths: they are chosen at the registered design's."""
    other = replace(cpu_tiny, predicted_lengths=PredictedLengths())  # predicted at the expected lengths
    for s in cpu_tiny.all_settings():
        specs = [setting_specs(p, s, seeds=[0]) + pilot_specs(p, s) for p in (cpu_tiny, other)]
        assert [x.to_json() for x in specs[0]] == [x.to_json() for x in specs[1]], s.name
        mine, theirs = plan_setting(cpu_tiny, s), plan_setting(other, s)
        assert [replace(c, prediction=None) for c in mine.cells] == [
            replace(c, prediction=None) for c in theirs.cells
        ]
        assert all(c.prediction.source == "measured" for c in mine.cells)
        assert all(c.prediction.source == "assumed" for c in theirs.cells)


def test_under_the_ceiling_stop_the_last_round_is_bought_below_the_budget():
    assert predicted_rounds(10.0, 100.0, None) == 10
    assert predicted_rounds(10.0, 100.0, 25.0) == 8  # rounds start while 25 more fit: after 0, 10, ..., 70
    assert predicted_rounds(10.0, 100.0, 100.0) == 1
    assert predicted_rounds(10.0, 100.0, 101.0) == 0


def test_predicted_lengths_are_checked_when_the_profile_is_read():
    with pytest.raises(ValueError, match="name their settings"):
        PredictedLengths("measured")
    with pytest.raises(ValueError, match="prompt and completion tokens"):
        PredictedLengths("measured", {"M": {"prompt": 30}})
    with pytest.raises(ValueError, match="completion_range"):
        PredictedLengths(completion_range=(600, 300))


def test_plan_prints_the_predicted_and_realised_rounds(capsys, cpu_tiny):
    assert cli.main(["plan", "--profile", "cpu-tiny", "--stage", "D", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (prm,) = out["settings"]
    assert out["lengths_source"] == "measured" and out["predicted_lengths"]["prm"]["reward"] == 47
    assert all(
        abs(c["ratio"] - 1) <= 0.10 and c["design_rounds"] < c["predicted_rounds"] for c in prm["cells"]
    )
    assert out["rounds_check"].endswith("over 7 cells; 0 outside +-10%")
    assert cli.main(["plan", "--profile", "cpu-tiny", "--stage", "D"]) == 0
    text = capsys.readouterr().out
    assert "predicted / realised rounds (the profile's committed runs at this budget): min" in text
    assert "predicted at 32 prompt + 25 completion tokens, PRM 47 (measured)" in text


def test_plan_measures_the_lengths_as_the_profiles_section(capsys, cpu_tiny):
    assert cli.main(["plan", "--profile", "cpu-tiny", "--stage", "A", "--measure-lengths"]) == 0
    section = yaml.safe_load(capsys.readouterr().out)["predicted_lengths"]
    assert section == {"source": "measured", "settings": cpu_tiny.predicted_lengths.settings}


def test_gpu_papers_lengths_are_an_assumption_with_the_gpu_hours_they_imply(capsys):
    """gpu-paper has run nothing: its lengths are marked assumed, plan says so and shows no realised
    rounds, and the dry run gives the GPU-hours at both ends of its completion range, around the
    hours at its assumed 600 tokens."""
    gpu = load_profile("gpu-paper")
    assert gpu.predicted_lengths.source == "assumed" and gpu.predicted_lengths.completion_range == (300, 1024)
    assert cli.main(["plan", "--profile", "gpu-paper", "--stage", "D"]) == 0
    text = capsys.readouterr().out
    assert "predicted at the assumed lengths" in text and "predicted / realised" not in text
    specs = setting_specs(gpu, "prm", seeds=[0])
    short, long, lo, hi = dryrun.hours_range(gpu, specs)
    assumed = sum(sum(dryrun.run_gpu_hours(gpu, s)) for s in specs)
    assert (short, long) == (300, 1024) and lo < assumed < hi
    line = dryrun._lengths_lines(gpu, (short, long, lo, hi))[0]
    assert "lengths ASSUMED, not measured: 200 prompt + 600 completion" in line and "300..1024" in line
    assert dryrun.hours_range(load_profile("cpu-tiny"), specs) is None  # measured: no range
