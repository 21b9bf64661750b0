"""The console (``paper_repro.common.console``): the notebooks run on the project's kernel, which prints no
start-up warning; a run says what it is doing, on papermill's console and never in the notebook;
``paper-repro run`` keeps its one bar of runs, and the analysis, which runs alone, shows its parts."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from paper_repro.common import console
from paper_repro.common.paths import repo_root
from paper_repro.drivers import sweep
from paper_repro.run import runner
from paper_repro.run.allocation import planner_for
from paper_repro.run.spec import spec_for

KERNEL_JSON = repo_root() / "paper_repro" / "kernelspec" / "kernel.json"


def test_the_notebooks_name_the_project_kernel_whose_log_stays_below_its_warnings():
    argv = json.loads(KERNEL_JSON.read_text())["argv"]
    assert argv[:3] == ["python", "-m", "ipykernel_launcher"] and "{connection_file}" in argv
    assert "--IPKernelApp.log_level=CRITICAL" in argv  # its TCP warning, and the ERROR at shutdown
    for path in sorted((repo_root() / "notebooks").glob("*.ipynb")):
        assert nbformat.read(path, as_version=4).metadata["kernelspec"]["name"] == console.KERNEL, path.name


def test_make_install_installed_the_kernel_as_it_is_in_the_repo():
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        installed = KernelSpecManager().get_kernel_spec(console.KERNEL)
    except NoSuchKernel:
        pytest.fail("the notebooks' kernel is not installed: make install")
    assert installed.argv == json.loads(KERNEL_JSON.read_text())["argv"]
    assert console.kernel_name() == console.KERNEL


def _progress_notebook(path):
    """A notebook whose one cell makes two runs' worth of reports, as a run in a kernel makes them."""
    code = (
        "from paper_repro.common.console import RunsProgress, report\n"
        "shown = RunsProgress(2)\n"
        "for run in ('dense r40 seed 42', 'dense r66 seed 42'):\n"
        "    with shown.running(run):\n"
        "        report('training', '50% of its budget spent')\n"
        "        report('evaluating')\n"
        "shown.close()\n"
        "print('the notebook output')"
    )
    nb = new_notebook(cells=[new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": console.KERNEL, "display_name": "paper-repro", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("muted", [False, True])
def test_a_direct_papermill_run_shows_the_runs_on_its_console_not_in_the_notebook(tmp_path, muted):
    """papermill's console (here a log file: one line per step) shows the runs' progress and no kernel
    warning; the executed notebook holds its own output only. Under ``paper-repro run``
    (:data:`paper_repro.common.console.MUTE`) the kernel shows nothing."""
    book = _progress_notebook(tmp_path / "progress.ipynb")
    # as from a shell: under pytest ipykernel leaves the process's stderr alone (PYTEST_CURRENT_TEST)
    env = {k: v for k, v in os.environ.items() if k not in (console.MUTE, "PYTEST_CURRENT_TEST")}
    if muted:
        env[console.MUTE] = "off"
    done = subprocess.run(
        [sys.executable, "-m", "papermill", str(book), str(tmp_path / "out.ipynb"), "--no-progress-bar"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Kernel is running over TCP" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("run ")]
    if muted:
        assert lines == []
    else:
        assert lines == [
            "run 1/2 (dense r40 seed 42): starting",
            "run 1/2 (dense r40 seed 42): training",
            "run 1/2 (dense r40 seed 42): evaluating",
            "run 1/2 done (dense r40 seed 42)",
            "run 2/2 (dense r66 seed 42): starting",
            "run 2/2 (dense r66 seed 42): training",
            "run 2/2 (dense r66 seed 42): evaluating",
            "run 2/2 done (dense r66 seed 42)",
        ]
    (cell,) = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells
    assert [o.get("text") for o in cell.outputs] == ["the notebook output\n"]


def test_nothing_is_shown_where_no_one_sees_it(monkeypatch):
    """Not a terminal and not in a kernel (a test, a script piped to a file): no bar, no line."""
    monkeypatch.setattr(console, "console_stream", lambda: None)
    shown = console.RunsProgress(3)
    assert shown.stream is None and shown.bar.disable
    with shown.running("S r40 seed 0"):
        console.report("training")
    shown.close()


def test_the_analysis_parts_are_shown_as_they_start(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr(console, "_where", lambda: log)
    steps = console.Steps("analysis", ["the tables", "the figures"])
    steps("the tables")
    steps("the figures")
    steps.close()
    assert log.getvalue().split("\n")[1:] == ["analysis: the tables (1/2)", "analysis: the figures (2/2)", ""]
    with pytest.raises(ValueError):
        steps("a part it does not have")


def test_a_run_reports_its_steps_and_its_budget_spent(tiny_m_profile, tmp_path):
    """One tiny run, listened to as the runner's progress listens: it loads, trains (saying how much
    of its budget it has spent after each step) and evaluates."""
    profile = tiny_m_profile
    setting = next(s for s in profile.settings("A") if s.name == "M")
    planner = planner_for(profile, setting)
    spec = spec_for(profile, setting, planner.cell(0.7, 1.5 * planner.cell(0.7, 1e30).round_cost.C_total), 0)
    heard: list[tuple[str, str]] = []
    with console.listening(lambda what, detail: heard.append((what, detail))):
        (row,) = runner.run_specs([spec], tmp_path, threads=1, progress=False)
    assert row["status"] == "ok"
    steps = list(dict.fromkeys(what for what, _ in heard))
    assert steps[0] == "loading" and steps[-1] == "evaluating" and "training" in steps
    spent = [d for what, d in heard if what == "training" and d]
    assert spent and all(d.endswith("% of its budget spent") for d in spent)


def test_paper_repro_run_mutes_the_run_kernels_and_lets_the_analysis_show_its_parts(monkeypatch, tmp_path):
    """``paper-repro run``: its kernels run on the project's kernel; a run notebook's kernel starts
    muted (the driver's bar counts its runs), the analysis's not; the environment is restored."""
    started: list[tuple[str, str | None, str]] = []

    def execute(job, threads=None, log_output=False):
        started.append((job.stage, os.environ.get(console.MUTE), console.kernel_name()))
        return job.output

    monkeypatch.setattr(sweep, "execute_job", execute)
    monkeypatch.setattr(sweep, "job_done", lambda job: False)
    monkeypatch.delenv(console.MUTE, raising=False)
    jobs = [
        sweep.NotebookJob("A", "10_stage_A_model_size", {}, tmp_path / "a.ipynb"),
        sweep.NotebookJob("analysis", "40_final_analysis", {}, tmp_path / "40.ipynb"),
    ]
    sweep.run_study(jobs, progress=True)
    assert started == [("A", "off", console.KERNEL), ("analysis", "on", console.KERNEL)]
    assert console.MUTE not in os.environ


def test_paper_repro_run_starts_the_notebooks_kernel_quietly(monkeypatch, tmp_path, capfd):
    """The driver's own papermill call on the project's kernel: it starts (its log level is set once,
    a second setting would be refused) and logs nothing to the console."""
    book = tmp_path / "book.ipynb"
    nb = new_notebook(cells=[new_code_cell("print('ran')")])
    nb.metadata["kernelspec"] = {"name": console.KERNEL, "display_name": "paper-repro", "language": "python"}
    nbformat.write(nb, book)
    monkeypatch.setattr(sweep.NotebookJob, "source", property(lambda job: book))
    job = sweep.NotebookJob("testbed", "book", {}, tmp_path / "executed" / "book.ipynb")
    out = sweep.execute_job(job)
    assert [o.get("text") for o in nbformat.read(out, as_version=4).cells[0].outputs] == ["ran\n"]
    err = capfd.readouterr().err
    assert "IPKernelApp" not in err and "Kernel died" not in err, err[-2000:]
