"""Every notebook in ``notebooks/`` executed with papermill at its smallest parameters, into temporary
folders only (models, tasks, results, executed copies and figures; never the repo's):

- 00 builds a tiny testbed (policies S and L, the PRM grown from L) and rebuilds a subset of it;
- 10 (stage A, policy M), 20 (stage B's dense and stage D's prm) and 30 (M's RACE pilots) each run
  one setting's tiny quick runs on the tiny profile (``tests/fixtures.py``) into one results folder;
- 40 analyses that folder in quick mode;
- 50 (the ledger example) runs two steps of its tiny GRPO run.

One test id per notebook; a notebook without smoke parameters here fails its test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from filelock import FileLock

from paper_repro.common.paths import repo_root
from paper_repro.drivers import test_time as stage_e
from tests import fixtures

NOTEBOOKS = repo_root() / "notebooks"
STUDY = ("10_stage_A_model_size", "20_stage_BD_reward_systems", "30_race_pilots")  # 40 reads their rows


def declared(notebook: str) -> set[str]:
    """The parameters ``notebooks/<notebook>.ipynb`` declares in its ``parameters`` cell."""
    import papermill as pm

    return set(pm.inspect_notebook(str(NOTEBOOKS / f"{notebook}.ipynb")))


def execute(notebook: str, out: Path, parameters: dict) -> Path:
    """Execute ``notebooks/<notebook>.ipynb`` into ``out`` (its folder the working directory), with
    only parameters it declares (papermill would inject any other name, unread)."""
    import papermill as pm

    unknown = set(parameters) - declared(notebook)
    assert not unknown, f"{notebook} declares no parameters {sorted(unknown)}"
    out.parent.mkdir(parents=True, exist_ok=True)
    pm.execute_notebook(
        str(NOTEBOOKS / f"{notebook}.ipynb"), str(out), parameters=parameters, cwd=str(out.parent),
        progress_bar=False, kernel_name="python3",
    )  # fmt: skip
    return out


def outputs(path: Path) -> tuple[list[str], list[str]]:
    """The executed copy's error outputs (``ename: evalue``) and shown values (their ``text/plain``)."""
    errors, shown = [], []
    for cell in nbformat.read(path, as_version=4).cells:
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                errors.append(f"{out.ename}: {out.evalue}")
            elif out.output_type == "execute_result":
                shown.append(out.data.get("text/plain", ""))
    return errors, shown


def shown_table(path: Path, last: int = 1) -> str:
    """The ``last``-th value from the end the executed copy shows (each stage notebook ends on its
    frontier; 30 on its pilot frontier and then RACE's check), checked non-empty."""
    errors, shown = outputs(path)
    assert not errors, errors
    assert len(shown) >= last and not shown[-last].startswith("Empty DataFrame"), shown[-last:]
    return shown[-last]


# ------------------------------------------------------------------------------ 10, 20, 30 and 40


def study_executions(profile: Path, results: Path, executed: Path) -> list[tuple[str, Path, dict]]:
    """(notebook, executed copy, parameters) of the stage notebooks, in the order they run: one seed,
    quick, one torch thread; stage A one cell, stages B and D their quick cells (40 compares the
    PRM-style and rule-based frontiers fitted over those cells), 30 its quick pilots."""
    common = dict(profile=str(profile), quick=True, results_root=str(results), threads=1)
    runs = [
        ("10_stage_A_model_size", "M", dict(setting="M", seeds=1, cells=["r66"])),
        ("20_stage_BD_reward_systems", "dense", dict(reward_system="dense", seeds=1)),
        ("20_stage_BD_reward_systems", "prm", dict(reward_system="prm", seeds=1)),  # stage D
        ("30_race_pilots", "M", dict(setting="M")),  # quick: the quick cells at the pilot budget
    ]
    out = []
    for notebook, label, params in runs:
        copy = executed / f"{notebook}__{label}.ipynb"
        out.append((notebook, copy, {**common, **params, "executed_notebook": str(copy)}))
    return out


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> dict:
    """10, 20 (dense, prm) and 30 executed once, in that order, on the tiny profile into one results
    folder, which 40's test then analyses. Under pytest-xdist this module's tests may land on both
    workers: the first to ask executes them under a file lock in the session's base folder (shared
    by its workers), the other reads what it recorded. Returns the record: the profile, the results
    folder, and per execution its notebook, executed copy and error (None when it ran through)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "notebook-study"
    with FileLock(f"{root}.lock"):
        record = root / "record.json"
        if not record.exists():
            policy = fixtures.save_random_model(root / "policy")
            prm = fixtures.save_random_model(root / "prm", head="prm")
            profile = fixtures.write_tiny_profile(root, policy, prm)
            done = []
            for notebook, copy, params in study_executions(profile, root / "results", root / "executed"):
                try:
                    execute(notebook, copy, params)
                    error = None
                except Exception as exc:  # each notebook's test reports its own failure
                    error = f"{type(exc).__name__}: {exc}"[-3000:]
                done.append({"notebook": notebook, "copy": str(copy), "error": error})
            state = {"profile": str(profile), "results": str(root / "results"), "executions": done}
            record.write_text(json.dumps(state))
    return json.loads(record.read_text())


def check_stage_notebook(notebook: str, study: dict) -> None:
    """Every execution of ``notebook`` ran through, put an ok row in the results table for each run
    it made (naming its executed copy) and shows its frontier: a row for each cell it ran (30's
    frontier is its pilots')."""
    executions = [e for e in study["executions"] if e["notebook"] == notebook]
    assert executions
    runs = pd.read_csv(Path(study["results"]) / "runs.csv")
    kind = "pilot" if notebook == "30_race_pilots" else "full"
    for e in executions:
        assert e["error"] is None, e["error"]
        table = shown_table(Path(e["copy"]), 2 if notebook == "30_race_pilots" else 1)
        made = runs[runs["executed_notebook"] == e["copy"]]
        assert len(made) and (made["status"] == "ok").all(), made[["setting", "cell", "status"]]
        cells = set(made.loc[made["budget_kind"] == kind, "cell"])
        assert cells and cells <= set(table.split()), (cells, table)
        assert first_output(Path(e["copy"])).startswith("**A smoke run, not the study.**")  # all quick


def first_output(path: Path) -> str:
    """The executed copy's first output after its parameters: its Markdown, else its text."""
    for cell in nbformat.read(path, as_version=4).cells:
        tags = cell.metadata.get("tags", [])
        if (
            cell.cell_type == "code"
            and cell.outputs
            and not {"parameters", "injected-parameters"} & set(tags)
        ):
            out = cell.outputs[0]
            return out.get("data", {}).get("text/markdown") or out.get("text", "")
    return ""


def check_analysis(study: dict, tmp_path: Path) -> None:
    """40 on the stage notebooks' rows: every table written beside them, the claims and optima shown,
    RACE compares M's pilots with its full run, and the figures saved where it was told."""
    assert all(e["error"] is None for e in study["executions"]), "an earlier notebook failed"
    results, figures = Path(study["results"]), tmp_path / "figures"
    params = dict(profile=study["profile"], quick=True, results_root=str(results), figures_dir=str(figures))
    fewest = {"n_boot": 50, "power_replicates": 0}  # its resampling, as few as it takes
    params.update({k: v for k, v in fewest.items() if k in declared("40_final_analysis")})
    copy = execute("40_final_analysis", tmp_path / "40_final_analysis.ipynb", params)
    errors, shown = outputs(copy)
    assert not errors, errors
    claims, optima = pd.read_csv(results / "claims.csv"), pd.read_csv(results / "optima.csv")
    assert len(claims) and claims["verdict"].notna().all()
    assert {"M", "dense", "prm"} <= set(optima["setting"])  # what 10 and 20 ran (A's M is B's sparse too)
    assert "M" in set(pd.read_csv(results / "race.csv")["setting"])  # 30's pilots against 10's run
    assert shown[0].strip() and not shown[0].startswith("Empty DataFrame")  # the claims table
    assert sorted(figures.glob("*.png"))


# ------------------------------------------------------------------------------------------- 00

TESTBED_FILES = ("data/tasks/arith", "data/models", "data/results/cpu-tiny/base_models.csv")


def _mtimes() -> dict[str, float]:
    paths = [p for name in TESTBED_FILES for p in [repo_root() / name, *(repo_root() / name).rglob("*")]]
    return {str(p): p.stat().st_mtime_ns for p in paths if p.exists()}


def check_testbed(tmp_path: Path) -> None:
    """The whole testbed pipeline at a tiny scale: the table lists each model built, the PRM's error
    profile is written, the checkpoints load from their directories and the tokenizer keeps spaces
    and newlines; a
    rebuild of S alone replaces S's row and keeps the others, provenance and all. The repo's own
    splits, checkpoints and base table are left alone."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paper_repro.rewards.prm_scorer import PRMScorer

    before = _mtimes()
    models, tasks, base = tmp_path / "models", tmp_path / "tasks", tmp_path / "base.csv"
    params = dict(models_dir=str(models), tasks_dir=str(tasks), results_csv=str(base), sizes=["S", "L"],
                  steps_scale=0.005, pass_k=2, eval_limit=4)  # fmt: skip
    copy = execute("00_embedded_models", tmp_path / "00_embedded_models.ipynb", params)
    errors, (shown, profile_shown) = outputs(copy)
    assert not errors, errors
    assert [line.split()[1] for line in shown.splitlines()[1:4]] == ["S", "L", "PRM"]
    assert "policy L samples" in profile_shown
    saved = pd.read_csv(base)
    assert list(saved["model"]) == ["S", "L", "PRM"]
    profile = pd.read_csv(tmp_path / "prm_error_profile.csv")
    assert {"prm split", "policy S samples", "policy L samples"} <= set(profile["source"])
    assert (tasks / "gsm_tiny.jsonl").exists()
    assert saved["git_sha"].notna().all() and 0 <= saved.loc[0, "gsm_pass1"] <= 1
    assert 0 <= saved.loc[2, "prm_auroc"] <= 1 and saved.loc[2, "prm_heldout_steps"] > 100
    assert AutoModelForCausalLM.from_pretrained(models / "policy-S").config.model_type == "qwen2"
    assert type(PRMScorer.load(models / "prm").model).__name__ == "Qwen2LikelihoodPRM"
    tokenizer = AutoTokenizer.from_pretrained(models / "policy-S")
    text = "2, add 3?\n2+3=5\nanswer: 5"
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text

    rebuild = {**params, "sizes": ["S"], "prm": False, "seed": 1}
    shown_table(execute("00_embedded_models", tmp_path / "00_rebuild_S.ipynb", rebuild))
    again = pd.read_csv(base).set_index("model")
    assert list(again.index) == ["S", "L", "PRM"]
    assert again.loc["S", "final_loss"] != saved.loc[0, "final_loss"]  # seed 1's S, not seed 0's
    pd.testing.assert_series_equal(again.loc["L"], saved.set_index("model").loc["L"])
    assert again.loc["PRM", "prm_auroc"] == saved.loc[2, "prm_auroc"]
    assert _mtimes() == before


# ------------------------------------------------------------------------------------------- 50


def check_ledger_example(tmp_path: Path) -> None:
    """50 runs its tiny ledger-wrapped GRPO run for two steps: one JSONL line per step and the compute
    card in the folder it was given, and the totals table under both conventions."""
    out = tmp_path / "out"
    copy = execute("50_ledger_example", tmp_path / "50_ledger_example.ipynb",
                   dict(max_steps=2, output_dir=str(out)))  # fmt: skip
    table = shown_table(copy)
    assert {"useful", "executed", "C_search", "C_learning", "C_total", "rho"} <= set(table.split())
    assert (out / "ledger.jsonl").read_text().count("\n") == 2
    card = json.loads((out / "compute_card.json").read_text())
    assert card["steps"] == 2 and set(card["flops"]) == {"useful", "executed"}
    assert (out / "compute_card.md").read_text().startswith("# Compute card")
    # the budget contract: the stop line, and the summary's record of the stop
    cells = nbformat.read(copy, as_version=4).cells
    (run,) = [c for c in cells if "trainer.train()" in c.source]
    assert "FLOP ledger: stopped after 2 generation round(s)" in json.dumps(run.outputs)
    assert "max_steps=2 reached" in json.dumps(run.outputs)
    (budget,) = [c for c in cells if "budget_spent" in c.source]
    assert "budget_stop" in json.dumps(budget.outputs)


def check_test_time(study: dict, tmp_path: Path) -> None:
    """60 on the stage notebooks' rows, at its fewest samples: the base and the retrained RL policy
    of each size the study ran (stage A's M) sampled, two at once in worker processes, the retrained
    run the committed one (its greedy metrics and FLOPs equal its row's), runs.csv left as it was,
    every table and figure written, and the samples byte for byte those of one policy at a time."""
    assert all(e["error"] is None for e in study["executions"]), "an earlier notebook failed"
    src = Path(study["results"])
    results, alone = tmp_path / "results", tmp_path / "alone"
    for folder in (results, alone):
        folder.mkdir()
        for name in ("runs.csv", "base_metrics.csv"):
            if (src / name).exists():
                (folder / name).write_bytes((src / name).read_bytes())
    before = (results / "runs.csv").read_bytes()
    params = dict(profile=study["profile"], quick=True, results_root=str(results), threads=1, n=4, problems=3)
    copy = execute("60_stage_E_test_time", tmp_path / "60_stage_E_test_time.ipynb", {**params, "workers": 2})
    design = stage_e.stage_e_design(True, n=4, problems=3)
    stage_e.run_stage_e(study["profile"], True, alone, threads=1, design=design, workers=1)
    sampled = sorted(p.name for p in (results / "test_time").glob("*.csv"))
    assert sampled and sampled == sorted(p.name for p in (alone / "test_time").glob("*.csv"))
    for name in sampled:
        assert (results / "test_time" / name).read_bytes() == (alone / "test_time" / name).read_bytes(), name
    errors, _ = outputs(copy)
    assert not errors, errors
    assert (results / "runs.csv").read_bytes() == before
    policies = pd.read_csv(results / "test_time_policies.csv")
    assert set(policies.kind) == {"base", "rl"} and policies.loc[policies.kind == "rl", "reproduced"].all()
    for name in ("arms", "breakeven", "gap", "claims"):
        assert len(pd.read_csv(results / f"test_time_{name}.csv")), name
    assert (results / "figures" / "test_time_breakeven.png").exists()


# ------------------------------------------------------------------------------------------ tests


def smoke(notebook: str, request, tmp_path: Path) -> None:
    if notebook == "00_embedded_models":
        return check_testbed(tmp_path)
    if notebook in STUDY:
        return check_stage_notebook(notebook, request.getfixturevalue("study"))
    if notebook == "40_final_analysis":
        return check_analysis(request.getfixturevalue("study"), tmp_path)
    if notebook == "50_ledger_example":
        return check_ledger_example(tmp_path)
    if notebook == "60_stage_E_test_time":
        return check_test_time(request.getfixturevalue("study"), tmp_path)
    pytest.fail(f"notebooks/{notebook}.ipynb has no smoke run: give it its smallest parameters here")


# notebook 00 builds a testbed of its own (about 40 s): slow, run by CI's `make test-slow`
SLOW_NOTEBOOKS = ("00_embedded_models",)


@pytest.mark.parametrize(
    "notebook",
    [
        pytest.param(p.stem, marks=pytest.mark.slow) if p.stem in SLOW_NOTEBOOKS else p.stem
        for p in sorted(NOTEBOOKS.glob("*.ipynb"))
    ],
)
def test_notebook_runs_at_its_smallest_parameters(notebook, request, tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # one torch thread per kernel: pytest -n 2 fills the cores
    smoke(notebook, request, tmp_path)
