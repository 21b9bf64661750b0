"""The gpu-paper path, offline: tiny checkpoints with the Qwen2.5-Instruct and Qwen2.5-Math-PRM
interfaces, local files of the hub datasets' own columns, one cell end to end through the code the
GPU runs use (chat template, math-verify grading, the PRM reward and judge), on the CPU in fp32."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from paper_repro import models
from paper_repro.common.results import RUN_COLUMNS, ResultTable
from paper_repro.config import load_profile
from paper_repro.ledger import FlopLedger, LedgerConfig
from paper_repro.rewards.prm_scorer import PRMScorer
from paper_repro.run import allocation, train
from paper_repro.run.launch import batch_layout
from paper_repro.run.spec import spec_for, spec_from_json
from paper_repro.tasks import load_examples
from paper_repro.tasks.hub import QWEN_SYSTEM
from paper_repro.testbed.qwen_interface import HUB_ROWS


@pytest.fixture(scope="module")
def gpu_profile(tiny_gpu_profile):
    return load_profile(tiny_gpu_profile)


def test_the_math_prm_loads_through_its_remote_code(gpu_profile):
    """Qwen2.5-Math-PRM's config says model_type qwen2: it must load as its own class (AutoModel,
    remote code), not as Qwen2ForTokenClassification with a freshly initialised head."""
    scorer = PRMScorer.load(gpu_profile.prm)
    assert type(scorer.model).__name__ == "Qwen2ForProcessRewardModel"
    assert scorer.shape.head == ((32, 32), (32, 2))
    text = scorer.format("What is 1+1?", ["1+1=2", "\\boxed{2}"])
    assert text.count("<extra_0>") == 2 and "<|im_start|>assistant" in text
    (scores,) = scorer.step_scores(["What is 1+1?"], [["1+1=2", "\\boxed{2}"]])
    assert len(scores) == 2 and all(0 < s < 1 for s in scores)


def test_a_hub_id_can_read_its_rows_from_a_local_file(gpu_profile):
    gsm = load_examples(gpu_profile.data["gsm"])
    assert [e.answer for e in gsm] == ["42", "2000"] and gsm[0].source == "openai/gsm8k/test"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_examples("openai/gsm8k=/nonexistent/gsm8k.jsonl")


def test_one_gpu_paper_shaped_cell_end_to_end(gpu_profile, tmp_path):
    """Stage D's prm setting: K < G down-sampling, two epochs, the PRM as reward and judge."""
    (setting,) = gpu_profile.settings("D")
    planner = allocation.planner_for(gpu_profile, setting)
    one_round = planner.explicit(2, 4, 2, 2, 1e30, label="x").round_cost.C_total
    budget = 2.5 * one_round
    cell = planner.explicit(2, 4, 2, 2, budget, label="r70")
    spec = spec_for(gpu_profile, setting, cell, seed=0)
    assert spec.train.chat_template and spec.judge == "prm_judge" and spec.prm == gpu_profile.prm
    row = train.run_cell(spec, tmp_path, raise_errors=True)

    assert row["status"] == "ok"
    assert 0 < row["C_total"] <= budget and row["rounds"] >= 1
    assert row["C_reward"] > 0 and 0 < row["rho"] < 1
    for metric in ("native_reward", "gsm_pass1", "math_pass1", "judge_score"):
        assert 0 <= row[metric] <= 1, metric  # measured, not NaN
    steps = [
        json.loads(line) for line in (tmp_path / "steps" / f"{spec.run_id}.jsonl").read_text().splitlines()
    ]
    generated = [s for s in steps if s["generated"]]
    # the chat template's system turn is in every rollout prompt: 2 prompts x 4 completions
    assert generated[0]["tokens"]["gen_rows"] == 8
    assert generated[0]["tokens"]["gen_prompt_tokens"] / 8 > len(QWEN_SYSTEM)
    assert generated[0]["tokens"]["kept_rows"] == 4
    (stored,) = ResultTable(tmp_path / "runs.csv", RUN_COLUMNS).rows()
    assert stored["run_id"] == spec.run_id and stored["model"] == "1.5B"


def test_a_judge_model_loads_for_rule_based_settings_too(gpu_profile):
    """gpu-paper's judge is the PRM: stage A's sparse runs need it loaded although their reward
    does not."""
    setting = gpu_profile.settings("A")[0]
    cell = allocation.planner_for(gpu_profile, setting).explicit(2, 4, 4, 1, 1e12, label="r70")
    assert spec_for(gpu_profile, setting, cell, 0).prm == gpu_profile.prm


# ---------------------------------------------------------------------------------------- layout


@pytest.mark.parametrize("gpus", [0, 1, 2, 8])
@pytest.mark.parametrize("P, G, K", [(8, 8, 8), (8, 24, 2), (8, 16, 3), (4, 8, 4), (2, 8, 8)])
def test_rollout_and_optimizer_batches_do_not_depend_on_the_gpu_count(P, G, K, gpus):
    layout = batch_layout(P, G, K, gpus, micro_batch=4)
    assert layout.rows == P * G  # the rollout batch: one round of P x G
    kept = P * G // G * K
    per_micro = kept // (layout.processes * layout.accumulation)
    assert per_micro * layout.processes * layout.accumulation == kept  # one optimizer step over all kept rows
    assert per_micro <= 4
    if K < G:
        assert layout.per_device * layout.accumulation % G == 0  # whole groups on every process
    assert bool(layout.note) == (layout.processes < max(gpus, 1))


def test_batch_layout_uses_fewer_gpus_when_groups_cannot_split_and_refuses_the_impossible():
    layout = batch_layout(2, 24, 2, gpus=8, micro_batch=4)
    assert layout.processes == 2 and "uses 2 of 8 GPUs" in layout.note
    with pytest.raises(ValueError, match="no micro-batch layout"):
        batch_layout(1, 5, 3, gpus=1, micro_batch=2)  # 5 generated and 3 kept rows: no common split


def test_the_ledger_sums_steps_over_processes():
    """Multi-GPU: each process charges its own share; the all-reduce makes every ledger hold the
    run's totals, so the budget stops all processes at the same step."""
    from paper_repro.accounting.flops import ModelShape, TrainSpec

    shape = ModelShape.from_config(str(models.shipped_config("qwen2.5-1.5b-instruct")))
    ledger = FlopLedger(shape, TrainSpec(), LedgerConfig(budget_flops=35.0))
    for _ in range(2):
        ledger.begin_step()
        ledger.charge("search", {"useful": 5.0, "executed": 6.0})
        ledger.charge("learning", {"useful": 3.0, "executed": 3.0})
        ledger.count(gen_rows=4, kept_rows=2)
        ledger.reduce_step(lambda t: t * 2)  # two processes with the same share
        ledger.end_step(0, round_complete=True)
    assert ledger.total() == 32.0 and ledger.total("executed") == 36.0
    assert ledger.steps[0]["tokens"] == {"gen_rows": 8.0, "kept_rows": 4.0}
    assert ledger.should_stop()  # 32 + a 16-FLOP round > 35


def test_spec_json_round_trip_keeps_the_run_id(gpu_profile):
    setting = gpu_profile.settings("A")[0]
    cell = allocation.planner_for(gpu_profile, setting).explicit(2, 4, 4, 1, 1e12, label="r70")
    spec = spec_for(gpu_profile, setting, cell, 0)
    again = spec_from_json(spec.to_json())
    assert again.to_json() == spec.to_json() and again.run_id == spec.run_id
    assert again.train == spec.train and again.runtime == spec.runtime and again.data == spec.data
    assert math.isfinite(again.predicted_rho)


# ---------------------------------------------------------------------------------------- dry run


def test_dry_run_validates_every_gpu_paper_spec_and_estimates_gpu_hours(capsys, monkeypatch):
    from paper_repro.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["run", "--profile", "gpu-paper", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("HF_HUB_OFFLINE=1") == 1  # the unreachable hub is said once
    rows = {
        line.split()[0]: line.split()
        for line in out.split("memory per GPU")[0].splitlines()  # the GPU-hours table, not the memory one
        if line.startswith("  ") and line.split()[0] in ("A", "B", "D", "race", "test_time", "total")
    }
    assert set(rows) == {"A", "B", "D", "race", "test_time", "total"}
    # stage A: 3 sizes x 5 cells x 3 seeds at 2.5e16 FLOPs each
    assert rows["A"][1] == "45" and float(rows["A"][3]) == pytest.approx(45 * 2.5e16)
    gpu_hours = [float(rows[s][6]) for s in ("A", "B", "D", "race", "test_time")]
    assert all(h > 0 for h in gpu_hours) and float(rows["total"][6]) == pytest.approx(
        sum(gpu_hours), abs=0.15
    )
    assert "7B (7B) pilot" in out and "uses 2 of 8 GPUs" in out  # P=2 pilots cannot split groups over 8


def test_gpu_hours_follow_the_stated_mfu():
    from dataclasses import replace

    from paper_repro.drivers import dryrun

    profile = load_profile("gpu-paper")
    spec = dryrun.study_specs(profile, ["A"])["A"][0]
    train_h, eval_h = dryrun.run_gpu_hours(profile, spec)
    faster = replace(profile, estimate=replace(profile.estimate, mfu_train=0.7, mfu_generate_hf=0.06))
    train_fast, eval_fast = dryrun.run_gpu_hours(faster, spec)
    assert train_fast == pytest.approx(train_h / 2) and eval_fast == pytest.approx(eval_h / 2)
    # the budget, spent at the stated MFUs, bounds the training hours from both sides
    peak = profile.estimate.peak_tflops * 1e12 * 3600
    assert spec.budget_flops / (peak * 0.35) <= train_h <= spec.budget_flops / (peak * 0.03)


def test_dry_run_refuses_a_layout_that_cannot_fit(tmp_path):
    import yaml

    from paper_repro.drivers import dryrun

    raw = yaml.safe_load(Path(load_profile("gpu-paper").source).read_text())
    raw["resources"]["7B"]["micro_batch"] = 1
    raw["allowed"]["G"], raw["allowed"]["K"] = [5, 7], [3, 4]  # kept rows share no split with generated ones
    raw["allowed"]["P"] = [1]
    path = tmp_path / "odd.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ValueError, match="no micro-batch layout"):
        dryrun.dry_run(load_profile(path), ["A"])


def test_slurm_jobs_ask_for_their_policy_sizes_resources():
    from paper_repro.drivers import sweep

    profile = load_profile("gpu-paper")
    jobs = sweep.study_jobs(profile, ["A"])
    by_setting = {j.parameters["setting"]: j.resources for j in jobs}
    sizes = [s.name for s in profile.settings("A")]
    assert by_setting == {size: profile.resources_for(size) for size in sizes}
    gpus = [by_setting[size].gpus for size in sizes]
    assert gpus == sorted(gpus) and len(set(gpus)) > 1  # a larger policy asks for more GPUs
    largest = by_setting[sizes[-1]]
    params = sweep.slurm_parameters(largest, n_jobs=3, partition="gpu")
    assert params == {"timeout_min": largest.timeout_min, "cpus_per_task": largest.cpus_per_task,
                      "mem_gb": largest.mem_gb, "slurm_array_parallelism": 3, "gpus_per_node": largest.gpus,
                      "slurm_partition": "gpu"}  # fmt: skip
    assert "gpus_per_node" not in sweep.slurm_parameters(load_profile("cpu-tiny").resources_for("M"), 1)


def test_the_readme_quotes_the_dry_run_as_it_prints_now(capsys, monkeypatch):
    from paper_repro.cli import main
    from paper_repro.common.paths import repo_root

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    main(["run", "--profile", "gpu-paper", "--dry-run"])
    printed = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(printed) if line.startswith("GPU-hours on"))
    end = next(i for i, line in enumerate(printed) if line.startswith("  total"))
    shown = (repo_root() / "docs" / "gpu-paper.md").read_text()
    assert "\n".join(printed[start : end + 1]) in shown, (
        "rerun the dry run and paste its table into docs/gpu-paper.md"
    )


@pytest.mark.slow
def test_two_processes_run_the_same_experiment_as_one(gpu_profile, tmp_path):
    """``accelerate launch --cpu --num_processes 2`` of the worker: each process takes half of the
    round, the ledger sums them, and the row (written once, by rank 0) has the one-process run's
    FLOPs and token counts exactly."""
    import os
    import subprocess
    import sys

    import pandas as pd

    (setting,) = gpu_profile.settings("D")
    planner = allocation.planner_for(gpu_profile, setting)
    one_round = planner.explicit(2, 4, 2, 2, 1e30, label="x").round_cost.C_total
    spec = spec_for(gpu_profile, setting, planner.explicit(2, 4, 2, 2, 2.5 * one_round, label="r70"), 0)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.to_json())
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    worker = ["-m", "paper_repro.run.worker", str(spec_file), "--results"]
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "2",
              "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]  # fmt: skip
    subprocess.run([*launch, *worker, str(tmp_path / "two")], env=env, check=True, timeout=600)
    subprocess.run([sys.executable, *worker, str(tmp_path / "one")], env=env, check=True, timeout=600)
    rows = {n: pd.read_csv(tmp_path / n / "runs.csv") for n in ("one", "two")}
    assert len(rows["two"]) == 1 and rows["two"]["status"].item() == "ok"
    for column in ("rounds", "steps", "C_search", "C_learning", "C_reward", "C_total"):
        assert rows["two"][column].item() == rows["one"][column].item(), column
    logs = {n: (tmp_path / n / "steps" / f"{spec.run_id}.jsonl").read_text().splitlines() for n in rows}
    assert [json.loads(x)["tokens"] for x in logs["two"]] == [json.loads(x)["tokens"] for x in logs["one"]]


# ---------------------------------------------------------------------------------------- hub revisions

COMMIT = "0123456789abcdef0123456789abcdef01234567"
GSM_CARD = """---
configs:
- config_name: main
  data_files:
  - split: test
    path: main/test-*
- config_name: socratic
  data_files:
  - split: test
    path: socratic/test-*
---
"""


def _cache(hub_dir: Path, kind: str, repo_id: str, files: Path | dict[str, str]) -> Path:
    """``repo_id`` in a Hugging Face cache as the hub's client lays it out: its files in
    ``<kind>s--owner--name/snapshots/<COMMIT>/`` and ``refs/main`` naming that commit."""
    import shutil

    folder = hub_dir / f"{kind}s--{repo_id.replace('/', '--')}"
    snapshot = folder / "snapshots" / COMMIT
    if isinstance(files, Path):
        shutil.copytree(files, snapshot)
    else:
        for name, text in files.items():
            (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            (snapshot / name).write_text(text)
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(COMMIT)
    return snapshot


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    """An offline Hugging Face cache: the tiny Qwen2.5-shaped policy and the tiny math PRM (with its
    remote code) as hub models, GSM8K (two configs, from its card) and MATH-500 as hub datasets."""
    from tests import fixtures

    root = tmp_path_factory.mktemp("hf-home")
    src = root / "src"
    _cache(root / "hub", "model", "tiny-org/qwen-tiny", fixtures.write_tiny_qwen25(src / "policy"))
    _cache(root / "hub", "model", "tiny-org/math-prm-tiny", fixtures.write_tiny_math_prm(src / "prm"))
    rows = {key: "".join(json.dumps(r) + "\n" for r in HUB_ROWS[key]) for key in ("gsm8k", "math500")}
    socratic = '{"question": "Not this config?", "answer": "#### 7"}\n'
    files = {"README.md": GSM_CARD, "main/test-0.jsonl": rows["gsm8k"], "socratic/test-0.jsonl": socratic}
    _cache(root / "hub", "dataset", "openai/gsm8k", files)
    _cache(root / "hub", "dataset", "HuggingFaceH4/MATH-500", {"test.jsonl": rows["math500"]})
    return root


@pytest.fixture
def offline_hub(hub_cache, monkeypatch):
    """HF_HOME and HF_HUB_CACHE at :func:`hub_cache`, offline."""
    monkeypatch.setenv("HF_HOME", str(hub_cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    return hub_cache


def test_hub_models_and_datasets_load_at_their_revision_and_record_its_commit(offline_hub):
    from paper_repro.run.weights import sources
    from paper_repro.tasks import hub

    snapshot = offline_hub / "hub" / "models--tiny-org--qwen-tiny" / "snapshots" / COMMIT
    for ref in ("tiny-org/qwen-tiny@main", f"tiny-org/qwen-tiny@{COMMIT}"):
        assert models.checkpoint(ref) == snapshot
    assert models.shape("tiny-org/qwen-tiny@main").head == models.shape(snapshot).head  # its cached config
    gsm = load_examples("openai/gsm8k@main")  # config "main" of its card, not "socratic"
    assert [e.answer for e in gsm] == ["42", "2000"] and gsm[0].source == "openai/gsm8k/test"
    assert [e.answer for e in load_examples(f"HuggingFaceH4/MATH-500@{COMMIT}")] == ["\\frac{1}{2}", "9"]
    with pytest.raises(hub.HubUnavailableError, match="at revision v9"):
        models.checkpoint("tiny-org/qwen-tiny@v9")
    local = str(models.shipped_config("qwen2.5-1.5b-instruct").parent)
    recorded = sources(
        ["tiny-org/qwen-tiny@main", None], ["openai/gsm8k@main", "arith/train", f"openai/gsm8k={local}"]
    )
    assert recorded == {"tiny-org/qwen-tiny@main": COMMIT, "openai/gsm8k@main": COMMIT, "arith/train": "local",
                        f"openai/gsm8k={local}": "local"}  # fmt: skip
    assert sources(["tiny-org/qwen-tiny@v9"]) == {"tiny-org/qwen-tiny@v9": "unresolved: HubUnavailableError"}


@pytest.mark.parametrize("revision", [None, "main", COMMIT[:7]])
def test_remote_code_from_the_hub_is_refused_unless_pinned_to_a_commit(offline_hub, revision):
    """Qwen2.5-Math-PRM ships its own code: from the hub it runs only at a full commit."""
    ref = "tiny-org/math-prm-tiny" + (f"@{revision}" if revision else "")
    assert not models.trust_remote_code(ref)
    if revision == COMMIT[:7]:  # not a revision the cache (or the hub) knows: nothing to load
        return
    with pytest.raises(models.RemoteCodeError) as err:
        PRMScorer.load(ref)
    message = str(err.value)
    assert "tiny-org/math-prm-tiny" in message and "40-hex commit" in message
    assert (
        "hf download tiny-org/math-prm-tiny" in message and "/tiny-org/math-prm-tiny/commits/main" in message
    )
    pinned = PRMScorer.load(f"tiny-org/math-prm-tiny@{COMMIT}")
    assert type(pinned.model).__name__ == "Qwen2ForProcessRewardModel"
    assert models.trust_remote_code(f"tiny-org/math-prm-tiny@{COMMIT}") and models.trust_remote_code(
        "data/models/prm"
    )


def _hub_profile(tiny_gpu_profile, tmp_path, policy, prm, name="test-gpu-hub"):
    import yaml

    raw = yaml.safe_load(Path(tiny_gpu_profile).read_text())
    raw.update(name=name, policies={"1.5B": policy}, prm=prm)
    raw["data"].update(gsm="openai/gsm8k@main", math={"id": "HuggingFaceH4/MATH-500", "revision": COMMIT})
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_profile(path)


def _stage_d_spec(profile):
    (setting,) = profile.settings("D")
    planner = allocation.planner_for(profile, setting)
    one_round = planner.explicit(2, 4, 2, 2, 1e30, label="x").round_cost.C_total
    return spec_for(profile, setting, planner.explicit(2, 4, 2, 2, 2.5 * one_round, label="r70"), seed=0)


def test_a_run_from_hub_snapshots_records_the_commits_it_resolved(offline_hub, tiny_gpu_profile, tmp_path):
    policy = {"id": "tiny-org/qwen-tiny", "revision": "main"}
    prm = {"id": "tiny-org/math-prm-tiny", "revision": COMMIT}
    spec = _stage_d_spec(_hub_profile(tiny_gpu_profile, tmp_path, policy, prm))
    assert spec.model == "tiny-org/qwen-tiny@main" and spec.prm == f"tiny-org/math-prm-tiny@{COMMIT}"
    row = train.run_cell(spec, tmp_path / "out", raise_errors=True)
    assert row["status"] == "ok" and row["rounds"] >= 1
    (stored,) = ResultTable(tmp_path / "out" / "runs.csv", RUN_COLUMNS).rows()
    recorded = json.loads(stored["versions"])["sources"]
    assert recorded == {
        "tiny-org/qwen-tiny@main": COMMIT,
        f"tiny-org/math-prm-tiny@{COMMIT}": COMMIT,
        "openai/gsm8k@main": COMMIT,
        f"HuggingFaceH4/MATH-500@{COMMIT}": COMMIT,
        **{ref: "local" for role, ref in spec.data if role in ("train", "heldout")},
    }


@pytest.mark.parametrize("what", ["unpinned policy", "PRM at a branch"])
def test_a_run_refuses_unpinned_hub_ids_before_any_compute(offline_hub, tiny_gpu_profile, tmp_path, what):
    pinned_prm = {"id": "tiny-org/math-prm-tiny", "revision": COMMIT}
    if what == "unpinned policy":
        profile = _hub_profile(
            tiny_gpu_profile, tmp_path, {"id": "tiny-org/qwen-tiny", "revision": None}, pinned_prm
        )
        error, match = (
            ValueError,
            r"without a revision \(model tiny-org/qwen-tiny\).*Pin before you run.*hf download tiny-org/qwen-tiny",
        )
    else:
        profile = _hub_profile(
            tiny_gpu_profile, tmp_path, "tiny-org/qwen-tiny@main", "tiny-org/math-prm-tiny@main"
        )
        error, match = (
            models.RemoteCodeError,
            r"model tiny-org/math-prm-tiny ships its own code.*'main', not a commit",
        )
    spec = _stage_d_spec(profile)
    with pytest.raises(error, match=match):
        train.run_cell(spec, tmp_path / "out", raise_errors=True)
    assert not (tmp_path / "out").exists()  # no row, no step log: refused before anything ran


def test_every_hub_id_of_the_gpu_paper_profiles_carries_a_revision():
    from paper_repro.config import profile_names
    from paper_repro.config.loading import _read_raw

    names = [n for n in profile_names() if n.startswith("gpu-paper")]
    assert len(names) == 3
    for name in names:
        profile = load_profile(name)
        raw = _read_raw(Path(profile.source))
        entries = {**{f"policies.{k}": v for k, v in raw["policies"].items()}, "prm": raw["prm"],
                   **{f"data.{k}": v for k, v in raw["data"].items()}}  # fmt: skip
        for where, entry in entries.items():
            assert isinstance(entry, dict) and set(entry) == {"id", "revision"}, (name, where, entry)
        # shipped unpinned (null): the references are the bare ids, which a run refuses
        assert profile.prm == "Qwen/Qwen2.5-Math-PRM-7B" and profile.data["gsm"] == "openai/gsm8k"


@pytest.mark.parametrize(
    "entry, problem",
    [({"id": "Qwen/Qwen2.5-1.5B-Instruct"}, "revision"), ({"id": "Qwen/x", "revision": ""}, "revision after '@'"),
     ({"id": "Qwen/x@main", "revision": "main"}, "owner/name"), ({"id": "a/b", "revision": None, "sha": 1}, "revision")],
)  # fmt: skip
def test_a_hub_entry_without_a_proper_revision_field_is_refused(tmp_path, entry, problem):
    import yaml

    raw = yaml.safe_load(Path(load_profile("gpu-paper").source).read_text())
    raw["policies"]["1.5B"] = entry
    path = tmp_path / "odd.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ValueError, match=problem):
        load_profile(path)


def test_the_dry_run_lists_unpinned_and_branch_pinned_hub_ids(capsys, monkeypatch, tmp_path):
    import yaml

    from paper_repro.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["run", "--profile", "gpu-paper", "--dry-run", "--stage", "A"]) == 0
    out = capsys.readouterr().out
    assert "UNPINNED: 7 hub id(s)" in out  # the three policies, the PRM (the judge), the three datasets
    for ref in ("model Qwen/Qwen2.5-1.5B-Instruct", "model Qwen/Qwen2.5-Math-PRM-7B", "dataset openai/gsm8k"):
        assert f"\n  {ref}\n" in out

    raw = yaml.safe_load(Path(load_profile("gpu-paper").source).read_text())
    for entry in [*raw["policies"].values(), raw["prm"], *raw["data"].values()]:
        entry["revision"] = COMMIT
    raw["data"]["gsm"]["revision"] = "main"
    path = tmp_path / "pinned.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["run", "--profile", str(path), "--dry-run", "--stage", "A"]) == 0
    out = capsys.readouterr().out
    assert "UNPINNED" not in out and "pinned to a branch or tag, not a commit" in out
    assert "\n  dataset openai/gsm8k@main\n" in out
