"""The study's scheduler: the notebooks executed with papermill, resumably (``paper-repro run``).

:func:`study_jobs` and :func:`run_study` execute the study notebooks: notebook 00 when the profile's
testbed is missing, 10 once per stage-A setting (policy size), 20 once per stage-B and stage-D
setting (reward system), 30 once per setting (its RACE pilots), 40 once. The runs inside a notebook
go through :func:`paper_repro.run.runner.run_specs`. A notebook whose runs are all in the table and whose
executed copy exists is skipped; the others are executed (their finished runs are skipped inside),
so a study killed at any point and rerun finishes only what is missing. Executed copies go to
``notebooks/executed/<profile>/`` and replace the old copy only when the execution succeeds.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from paper_repro.common.paths import in_repo, repo_relative, repo_root
from paper_repro.common.results import results_dir
from paper_repro.config import STAGES, Profile, Resources
from paper_repro.drivers.study import results_root_for
from paper_repro.run.launch import batch_layout
from paper_repro.run.runner import pending, threads_per_job
from paper_repro.run.spec import RunSpec, setting_specs

# --------------------------------------------------------------------------------------------
# The study: notebooks executed with papermill (`paper-repro run`)
# --------------------------------------------------------------------------------------------

# The study's steps, in order: the testbed, one step per stage, the RACE pilots, the analysis, then
# stage E (test-time sampling beside RL: it reads the analysis's best cells).
STUDY_STEPS: tuple[str, ...] = ("testbed", *STAGES, "race", "analysis", "test_time")
NOTEBOOKS = {
    "testbed": "00_embedded_models",
    "A": "10_stage_A_model_size",
    "B": "20_stage_BD_reward_systems",
    "D": "20_stage_BD_reward_systems",
    "race": "30_race_pilots",
    "analysis": "40_final_analysis",
    "test_time": "60_stage_E_test_time",
}
# the steps that read every run before them (and so wait for every earlier notebook); each is never
# "done": it is cheap to rerun once its own work is in its tables (stage E skips the policies it sampled)
READERS = ("analysis", "test_time")


@dataclass(frozen=True)
class NotebookJob:
    """One papermill execution: a notebook, its parameters, where its executed copy goes, and the
    runs it makes (what the progress bar counts and what resuming checks)."""

    stage: str
    notebook: str
    parameters: dict
    output: Path
    specs: tuple[RunSpec, ...] = ()
    results_root: str | None = None  # where its runs' rows go (None: data/results/<profile>)
    # what a SLURM job of it asks for: its policy size's, with the GPUs its runs use (job_resources)
    resources: Resources = field(default_factory=Resources)
    unknown_runs: int = 0  # runs it will make that no spec names yet (RACE's pick, before its pilots)

    @property
    def source(self) -> Path:
        return repo_root() / "notebooks" / f"{self.notebook}.ipynb"


def study_jobs(
    profile: Profile,
    steps: Sequence[str] = ("all",),
    seeds: int | Sequence[int] | None = None,
    quick: bool = False,
    results_root: str | Path | None = None,
    executed_dir: str | Path | None = None,
) -> list[NotebookJob]:
    """The notebook executions of the requested study steps (:data:`STUDY_STEPS`, or ``all``), in
    order. ``quick``: the profile's quick variant, its results and executed copies in ``quick/``
    folders. Executed copies go to ``executed_dir`` (default ``notebooks/executed/<profile>/``)."""
    wanted = list(STUDY_STEPS) if "all" in steps else list(steps)
    unknown = sorted(set(wanted) - set(STUDY_STEPS))
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; stages: {', '.join(STUDY_STEPS)}, all")
    run_profile = profile.quick_variant() if quick else profile
    out_dir = Path(executed_dir) if executed_dir else repo_root() / "notebooks" / "executed" / profile.name
    if quick:  # a smoke run: its outputs stay out of the committed study
        results_root = results_root_for(profile, quick, results_root)
        out_dir = out_dir if executed_dir else out_dir / "quick"
    root = str(results_root) if results_root else None
    common = {"profile": profile.ref, "quick": quick, "results_root": root}
    seed_param = {} if seeds is None else {"seeds": seeds if isinstance(seeds, int) else list(seeds)}
    jobs: list[NotebookJob] = []
    for step in (s for s in STUDY_STEPS if s in wanted):
        book = NOTEBOOKS[step]
        if step == "testbed":
            if profile.testbed and not testbed_built(profile):
                jobs.append(NotebookJob(step, book, {}, out_dir / f"{book}.ipynb"))
        elif step in STAGES:
            name = "setting" if step == "A" else "reward_system"
            for s in run_profile.settings(step):
                specs = setting_specs(run_profile, s, seeds, quick=quick)
                params = {**common, name: s.name, **seed_param}
                out = out_dir / f"{book}__{s.name}.ipynb"
                resources = job_resources(profile.resources_for(s.policy), specs)
                jobs.append(NotebookJob(step, book, params, out, tuple(specs), root, resources))
        elif step == "race":  # pilots, then the pick and the default on fresh seeds: seeds from the profile
            from paper_repro.drivers.study import race_specs

            for s in run_profile.all_settings():
                specs, unknown = race_specs(run_profile, s, root, quick)
                params = {**common, "setting": s.name}
                out = out_dir / f"{book}__{s.stage}_{s.name}.ipynb"
                size = profile.resources_for(s.policy)
                # picks not named yet: any grid cell could run, and its GPUs count (CPU runs: no GPUs)
                picks = pick_candidates(run_profile, s) if unknown and size.gpus else []
                resources = job_resources(size, [*specs, *picks])
                jobs.append(NotebookJob(step, book, params, out, tuple(specs), root, resources, unknown))
        elif step == "test_time":  # samples and retrains every size's policies: the largest's resources
            sizes = run_profile.settings("A")
            size = profile.resources_for(sizes[-1].policy) if sizes else None
            out = out_dir / f"{book}.ipynb"
            jobs.append(NotebookJob(step, book, dict(common), out, (), root, *([size] if size else [])))
        else:
            params = dict(common)
            if quick:  # a smoke run decides nothing: no power simulation
                params["power_replicates"] = 0
            jobs.append(NotebookJob(step, book, params, out_dir / f"{book}.ipynb", (), root))
    return jobs


def run_gpus(spec: RunSpec) -> int:
    """The GPUs one run uses: the processes of its batch layout on its policy size's GPUs, fewer
    where its cell's P prompts do not split over them (:func:`paper_repro.run.launch.batch_layout`,
    which its launch reads too); 0 for a run on the CPU."""
    runtime = spec.runtime
    if not runtime.gpus:
        return 0
    return batch_layout(spec.P, spec.G, spec.K, runtime.gpus, runtime.micro_batch).processes


def job_resources(resources: Resources, specs: Sequence[RunSpec]) -> Resources:
    """What one notebook job asks SLURM for (the one owner: the submission and the dry run read
    ``NotebookJob.resources``): its policy size's ``resources``, its GPUs cut to the most any of its
    runs ``specs`` uses (:func:`run_gpus`), so that a job whose every run uses 2 of the size's 8
    GPUs reserves 2. CPUs, memory and time stay the size's."""
    if not resources.gpus or not specs:
        return resources
    return replace(resources, gpus=max(run_gpus(spec) for spec in specs))


def pick_candidates(profile: Profile, setting) -> list[RunSpec]:
    """The runs a RACE notebook may make before its pilots have picked: RACE's and RACE+'s picks are
    each some cell of the setting's grid at the full budget on the fresh seeds (one seed's specs: the
    cells, which is what their resources and price depend on)."""
    return setting_specs(profile, setting, [profile.fresh_seeds[0]], "full", extend=False)


def check_pins(jobs: Sequence[NotebookJob]) -> None:
    """Refuse, before any notebook starts, jobs whose runs load a hub model or dataset without a
    revision: a ValueError naming each such id and how to pin it (the message a run itself refuses
    with, :func:`paper_repro.run.preflight.pin_message`)."""
    from paper_repro.run.preflight import hub_refs, pin_message, unpinned

    refs: dict[str, str] = {}
    for job in jobs:
        for spec in job.specs:
            refs.update(hub_refs(spec))
    missing = unpinned(refs)
    if missing:
        stages = ", ".join(dict.fromkeys(job.stage for job in jobs if job.specs))
        raise ValueError(pin_message(missing, f"the sweep of stage(s) {stages}"))


def testbed_built(profile: Profile) -> bool:
    """The profile's testbed is on disk: every local policy and PRM checkpoint, and the base table."""
    needed = [in_repo(m) / "config.json" for m in (*profile.policies.values(), profile.prm)]
    return all(p.exists() for p in needed) and (results_dir(profile.name) / "base_models.csv").exists()


def job_done(job: NotebookJob) -> bool:
    """A run notebook is done when its executed copy exists and none of its runs is missing; the
    analysis notebook is never done (it is cheap and reads whatever is there)."""
    if job.stage in READERS:
        return False
    if job.stage == "testbed":
        return job.output.exists()
    return job.output.exists() and not job.unknown_runs and not pending(job.specs, job.results_root)


# The kernel's own log to the console: a note that it talks over local TCP unencrypted, and an
# ERROR for the interrupt jupyter_client sends every kernel as it shuts it down, however its cells
# went. A failing cell is not logged there: papermill raises it, with its traceback. The notebooks'
# kernel (paper_repro.common.console.KERNEL) sets this level itself (a second one would be refused); the
# argument keeps ipykernel's python3 as quiet where that kernel is not installed.
KERNEL_QUIET = ["--IPKernelApp.log_level=CRITICAL"]


def execute_job(job: NotebookJob, threads: int | None = None, log_output: bool = False) -> Path:
    """Execute one notebook with papermill, on the notebooks' kernel; the executed copy replaces the
    old one only on success."""
    import papermill as pm

    from paper_repro.common.console import KERNEL, kernel_name

    job.output.parent.mkdir(parents=True, exist_ok=True)
    params = dict(job.parameters)
    if job.specs or job.stage == "test_time":  # stage E trains and samples too, its runs in no spec
        params["threads"] = threads
        params["executed_notebook"] = repo_relative(job.output)
    tmp = running_copy(job.output)
    kernel = kernel_name()
    pm.execute_notebook(
        str(job.source),
        str(tmp),
        parameters=params,
        cwd=str(repo_root()),
        progress_bar=False,
        log_output=log_output,
        kernel_name=kernel,
        extra_arguments=[] if kernel == KERNEL else KERNEL_QUIET,
    )
    _portable(tmp, job.output, timings=job.stage != "analysis")
    os.replace(tmp, job.output)
    return job.output


TIMINGS = ("start_time", "end_time", "duration")  # what papermill records of when a notebook or cell ran


def _portable(executed: Path, output: Path, timings: bool = True) -> None:
    """papermill records where it read and wrote the notebook: as checkout-relative paths (the
    final name, not the running copy's), so that a committed copy reads the same on every machine.
    ``timings`` False: without when it and each cell ran (the analysis notebook, whose rerun on the
    same tables must leave the committed copy unchanged; a run notebook keeps them as a record)."""
    import nbformat

    nb = nbformat.read(executed, as_version=4)
    meta = nb.metadata.get("papermill", {})
    meta["input_path"] = repo_relative(meta.get("input_path", ""))
    meta["output_path"] = repo_relative(output)
    for cell in nb.cells:  # papermill gives the cell it injects a random id: a fixed one instead
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell["id"] = "injected-parameters"
    if not timings:
        for part in [meta, *(cell.metadata.get("papermill", {}) for cell in nb.cells)]:
            for key in TIMINGS:
                part.pop(key, None)
        for cell in nb.cells:
            cell.metadata.pop("execution", None)
    nbformat.write(nb, executed)


def running_copy(output: Path) -> Path:
    """Where a notebook executes before it replaces ``output`` (an ``.ipynb`` name, as papermill wants)."""
    return output.with_name(f".{output.stem}.running.ipynb")


def run_study(
    jobs: Sequence[NotebookJob],
    n_jobs: int = 1,
    executor: str = "local",
    progress: bool = True,
    slurm_folder: str | Path | None = None,
    cluster: str | None = None,
    retries: int = 2,
    slurm_partition: str | None = None,
) -> list[Path]:
    """Execute every job that is not done, ``n_jobs`` at a time. A progress bar counts runs.

    ``local``: a notebook starts as soon as a worker is free and the notebooks it depends on are
    done (:func:`dependencies`: the testbed before any run, every run before the analysis, and a
    notebook after an earlier one that makes some of the same runs, which it then skips); ready
    notebooks start biggest first. Stages thus overlap, and no core idles while a
    stage's last notebook finishes.

    ``slurm``: one submitit job per notebook, asking for its resources (:func:`job_resources`: its
    policy size's CPUs, memory and time, and the GPUs its runs use; the dry run prints them); a job that fails is resubmitted up to ``retries`` times, and since every run is
    skipped once its row is in the table, a resubmission (or a rerun of the sweep) finishes only
    what is missing.

    The console shows this one bar of the study's runs: the run notebooks' kernels show nothing of
    their own (:data:`paper_repro.common.console.MUTE`). The analysis starts once every run is done; the
    bar closes then, and the analysis shows its parts itself (:class:`paper_repro.common.console.Steps`)."""
    if executor not in ("local", "slurm"):
        raise ValueError(f"unknown executor {executor!r}; executors: local, slurm")
    check_pins(jobs)  # before any notebook starts: a run would refuse them, after its kernel started
    from paper_repro.common.console import MUTE

    before = os.environ.get(MUTE)
    try:
        return _run_study(jobs, n_jobs, executor, progress, slurm_folder, cluster, retries, slurm_partition)
    finally:
        if before is None:
            os.environ.pop(MUTE, None)
        else:
            os.environ[MUTE] = before


def _kernel_console(stage: str, progress: bool) -> None:
    """Whether the kernels started next show their own progress (they inherit this environment):
    only the analysis's, which runs alone, after the runs' bar has closed."""
    from paper_repro.common.console import MUTE

    os.environ[MUTE] = "on" if progress and stage == "analysis" else "off"


def _run_study(
    jobs, n_jobs, executor, progress, slurm_folder, cluster, retries, slurm_partition
) -> list[Path]:
    from tqdm.auto import tqdm

    todo = [j for j in jobs if not job_done(j)]
    # the bar counts distinct runs: those the jobs name, and, until its pilots have picked, a RACE
    # notebook's pick runs (then named: a pick that is TRL's default cell adds no run)
    named = {(s.run_id, j.results_root): s for j in todo for s in j.specs}
    unresolved = {j.output: j.unknown_runs for j in todo if j.unknown_runs}
    threads = threads_per_job(n_jobs)  # each notebook's runs, as paper-repro cells gives a job

    def missing() -> int:
        roots = {r for _, r in named}
        return sum(
            len(pending([s for (_, r), s in named.items() if r == root], root)) for root in roots
        ) + sum(unresolved.values())

    total = len(named) + sum(unresolved.values())
    skipped = total - missing()  # already in the table: the rate and ETA count only the runs made now
    bar = tqdm(total=total, initial=skipped, desc="runs", unit="run", disable=not progress or total == 0)
    bar.set_postfix_str(f"{skipped} skipped (already present)")
    written: list[Path] = []

    def refresh(job: NotebookJob | None = None) -> None:
        if job is not None and unresolved.pop(job.output, 0):
            named.update({(s.run_id, job.results_root): s for s in resolved_specs(job)})
            bar.total = len(named) + sum(unresolved.values())
        bar.n = bar.total - missing()
        bar.refresh()

    if executor == "local":
        written = _run_local(todo, n_jobs, threads, refresh, bar, skipped, progress)
    else:  # stage by stage: each stage's notebooks are submitted together
        for stage in STUDY_STEPS:
            batch = [j for j in todo if j.stage == stage]
            if batch:
                bar.set_postfix_str(f"stage {stage}")
                if stage == "analysis":  # every run is done: the analysis shows its own parts
                    refresh()
                    bar.close()
                _kernel_console(stage, progress)
                written += _run_submitit(
                    batch, n_jobs, slurm_folder, cluster, refresh, retries, slurm_partition, threads
                )
    refresh()
    bar.close()
    return written


def resolved_specs(job: NotebookJob) -> list[RunSpec]:
    """Every run of an executed RACE notebook, its pick's included (its pilots have named it)."""
    from paper_repro.drivers.study import prepare, race_specs

    quick = bool(job.parameters.get("quick"))
    profile = prepare(job.parameters["profile"], quick)
    return race_specs(profile, job.parameters["setting"], job.results_root, quick)[0]


def dependencies(jobs: Sequence[NotebookJob]) -> dict[int, set[int]]:
    """For each job (by index into ``jobs``, in study order), the jobs that must finish before it
    starts: notebook 00 before every later notebook, every notebook before the analysis, and an
    earlier notebook that makes some of the same runs (stage A's middle policy is stage B's
    ``sparse``, and so are their RACE pilots; a RACE notebook's default cell is a full-grid cell), so
    that each run is made once and then skipped."""
    runs = [{s.run_id for s in j.specs} for j in jobs]
    deps: dict[int, set[int]] = {i: set() for i in range(len(jobs))}
    for i, later in enumerate(jobs):
        for k, earlier in enumerate(jobs[:i]):
            if earlier.stage == "testbed" or later.stage in READERS or runs[k] & runs[i]:
                deps[i].add(k)
    return deps


def _run_local(
    jobs: list[NotebookJob], n_jobs: int, threads: int, refresh, bar, skipped: int = 0, progress: bool = True
) -> list[Path]:
    """Execute ``jobs`` in local threads, ``n_jobs`` at a time, each once its dependencies are done;
    among the ready ones the job with the most budget still to spend goes first. The first failure
    stops new starts; the running ones finish, then it is raised."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    deps = dependencies(jobs)
    cost = [sum(s.budget_flops for s in pending(j.specs, j.results_root)) for j in jobs]
    waiting = sorted(range(len(jobs)), key=lambda i: -cost[i])
    running: dict = {}
    done: dict[int, Path] = {}
    error: BaseException | None = None
    with ThreadPoolExecutor(max_workers=n_jobs) as pool:
        while waiting or running:
            while error is None and len(running) < n_jobs:
                ready = [i for i in waiting if deps[i] <= done.keys()]
                if not ready:
                    break
                waiting.remove(ready[0])
                stage = jobs[ready[0]].stage
                if stage == "analysis":  # it waits for every other job: the runs' bar is complete
                    refresh()
                    bar.close()
                _kernel_console(stage, progress)  # before its kernel starts, in this thread
                running[pool.submit(execute_job, jobs[ready[0]], threads)] = ready[0]
            if not running:
                break
            stages = sorted({jobs[i].stage for i in running.values()}, key=STUDY_STEPS.index)
            bar.set_postfix_str(f"stage {', '.join(stages)}; {skipped} skipped (already present)")
            finished, _ = wait(running, timeout=2.0, return_when=FIRST_COMPLETED)
            refresh()
            for future in finished:
                index = running.pop(future)
                try:
                    done[index] = future.result()
                    refresh(jobs[index])
                except BaseException as exc:  # raised below, once the running jobs are done
                    error = error or exc
    if error is not None:
        raise error
    return [done[i] for i in range(len(jobs))]


def slurm_parameters(resources: Resources, n_jobs: int, partition: str | None = None) -> dict:
    """submitit parameters for one notebook job of ``resources`` (its ``NotebookJob.resources``),
    ``n_jobs`` of them at a time: the time limit in minutes, CPUs per task, memory in GB, GPUs per node."""
    params = {
        "timeout_min": resources.timeout_min,
        "cpus_per_task": resources.cpus_per_task,
        "mem_gb": resources.mem_gb,
        "slurm_array_parallelism": n_jobs,
    }
    if resources.gpus:
        params["gpus_per_node"] = resources.gpus
    if partition:
        params["slurm_partition"] = partition
    return params


def _run_submitit(
    batch, n_jobs, folder, cluster, refresh, retries=2, partition=None, local_threads=1
) -> list[Path]:
    """One SLURM job (or, with ``cluster="local"``, one local subprocess) per notebook execution,
    each with its resources (:func:`job_resources`); failed jobs are resubmitted up to ``retries`` times."""
    import time

    import submitit

    from paper_repro.common.paths import repo_root

    folder = Path(folder) if folder else repo_root() / "slurm_logs"

    def submit(job: NotebookJob):
        executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
        params = slurm_parameters(job.resources, n_jobs, partition)
        threads = job.resources.cpus_per_task
        if executor.cluster != "slurm":  # the local and debug backends: this machine's cores, shared
            params = {k: v for k, v in params.items() if not k.startswith("slurm_")}
            threads = local_threads
        executor.update_parameters(**params)
        return executor.submit(execute_job, job, threads)

    pending_jobs = {i: (job, submit(job), 0) for i, job in enumerate(batch)}
    written: dict[int, Path] = {}
    while pending_jobs:
        refresh()
        time.sleep(2.0)
        for i, (job, handle, attempt) in list(pending_jobs.items()):
            if not handle.done():
                continue
            try:
                written[i] = handle.result()
                refresh(job)
                del pending_jobs[i]
            except Exception as err:
                if attempt >= retries:
                    raise RuntimeError(
                        f"{job.output.name} failed {attempt + 1} times; last log: {handle.paths.stderr}"
                    ) from err
                pending_jobs[i] = (job, submit(job), attempt + 1)
    return [written[i] for i in sorted(written)]
