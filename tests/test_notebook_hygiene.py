"""Executed notebooks fit to commit: :func:`paper_repro.common.notebook_hygiene.notebook_problems` flags trainer log
dicts, warnings, absolute paths and oversized outputs, and a run made as the notebooks make theirs
shows none of them."""

from __future__ import annotations

import warnings
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from paper_repro.common.notebook_hygiene import notebook_problems
from paper_repro.common.quiet import quiet_libraries
from paper_repro.run import runner
from paper_repro.run.allocation import planner_for
from paper_repro.run.spec import spec_for


def executed(path: Path, outputs: list, metadata: dict | None = None) -> Path:
    """A one-cell executed notebook with ``outputs``, written to ``path``."""
    cell = new_code_cell("frontier = run_setting(profile, setting)", outputs=outputs)
    nbformat.write(new_notebook(cells=[cell], metadata=metadata or {}), path)
    return path


def stream(name: str, text: str):
    return new_output("stream", name=name, text=text)


def test_a_dirty_notebook_is_flagged(tmp_path):
    site = "/work/main/.venv/lib/python3.11/site-packages"
    dirty = executed(
        tmp_path / "dirty.ipynb",
        [
            stream("stdout", "{'loss': '-0.3559', 'grad_norm': '0.3033', 'learning_rate': '0.0005'}\n"),
            stream("stderr", f"{site}/tqdm/auto.py:21: TqdmWarning: IProgress not found.\n"),
            new_output("display_data", data={"image/png": "iVBOR" * 40_000, "text/plain": "<Image>"}),
        ],
        metadata={"papermill": {"input_path": "/tmp/checkout/notebooks/10_stage_A_model_size.ipynb"}},
    )
    problems = notebook_problems(dirty)
    assert any("log dict {'loss': '-0.3559'" in p for p in problems)
    assert any("warning" in p and "TqdmWarning: IProgress not found" in p for p in problems)
    assert any(f"absolute path {site}/tqdm/auto.py" in p for p in problems)
    assert any(p.startswith("metadata: absolute path /tmp/checkout/") for p in problems)
    assert "cell 0 display_data: 200 kB output" in problems


def test_a_clean_notebook_passes(tmp_path):
    clean = executed(
        tmp_path / "clean.ipynb",
        [
            stream("stdout", "12 runs done, 0 skipped (already present)\n"),
            new_output("execute_result", data={"text/plain": "  cell  rho\n0  r50  0.5"}, execution_count=1),
            # an image is checked for its size only: its base64 may spell anything
            new_output("display_data", data={"image/png": "iVBOR/tmp/work/", "text/plain": "<Image>"}),
        ],
        metadata={"papermill": {"input_path": "notebooks/10_stage_A_model_size.ipynb"}},
    )
    assert notebook_problems(clean) == []


def test_a_run_prints_no_log_dicts_and_no_library_warnings(tiny_m_profile, tmp_path, capfd):
    """One tiny run in this process, as a notebook's kernel makes it (Python's default warning
    filters, then :func:`quiet_libraries` as ``study.prepare`` calls it): what it writes to stdout
    and stderr, and the warnings it raises, are a clean notebook output; its step log is complete."""
    profile = tiny_m_profile
    setting = next(s for s in profile.settings("A") if s.name == "M")
    planner = planner_for(profile, setting)
    spec = spec_for(profile, setting, planner.cell(0.7, 1.5 * planner.cell(0.7, 1e30).round_cost.C_total), 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)  # the rest of Python's default filters
        quiet_libraries()
        (row,) = runner.run_specs([spec], tmp_path, threads=1)
    out, err = capfd.readouterr()
    shown = [warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in caught]
    notebook = executed(
        tmp_path / "run.ipynb", [stream("stdout", out), stream("stderr", err + "".join(shown))]
    )
    assert notebook_problems(notebook) == []
    assert row["status"] == "ok" and "1 run done, 0 skipped (already present)" in out
    steps = (tmp_path / "steps" / f"{spec.run_id}.jsonl").read_text().splitlines()
    assert len(steps) == int(row["steps"]) >= 1  # the ledger still logs every step


def test_the_committed_executed_notebooks_are_clean():
    from paper_repro.common.paths import repo_root

    books = sorted((repo_root() / "notebooks" / "executed").rglob("*.ipynb"))
    # the committed ones: a quick study's (make reproduce QUICK=1) go to quick/ folders git ignores
    books = [
        b for b in books if not b.name.startswith(".") and "quick" not in b.relative_to(repo_root()).parts
    ]
    assert len(books) >= 19  # 00, 10 x 3, 20 x 5, 30 x 8, 40, and 50
    problems = {b.name: notebook_problems(b) for b in books}
    assert not any(problems.values()), {k: v[:3] for k, v in problems.items() if v}
