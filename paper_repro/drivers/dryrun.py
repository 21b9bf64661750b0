"""``paper-repro run --dry-run``: validate every run of a study without weights, and estimate its
GPU-hours.

For every spec the notebooks would run (stage A, stages B and D, the RACE pilots and TRL's default
cells; a run shared by two stages counted once, where it first appears) it checks what can be
checked without weights or data: the profile loads, every cell is realisable at its budget, the
model shapes are known (checkpoint or shipped config), the batch layout fits the resources of its
policy size. It then prices each run: its budget split by the cell's predicted rho, generation at
the backend's MFU, updates and reward-model forwards at the training MFU, plus the evaluation (greedy
answers of the held-out and downstream sets, and the judge on them) at the generation MFU. The MFUs
and the GPU's peak are the profile's ``estimate`` section: assumptions, printed with the result.

The hub is probed once: unreachable (or ``HF_HUB_OFFLINE=1``), it says so once and checks configs
only; reachable, it also checks that every model and dataset id exists at its revision (nothing is
downloaded). Either way it lists the hub ids the runs would load without a revision, which a run
refuses (pin before you run), and those pinned to a branch or tag rather than a commit.

Last, one line per notebook job: the submitit parameters ``--executor slurm`` submits it with
(GPUs, CPUs per task, memory, time limit; read from the job, :func:`paper_repro.drivers.sweep.job_resources`
owns them), and how many of its runs use how many GPUs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from paper_repro import models
from paper_repro.accounting import flops
from paper_repro.config import STAGES, Profile
from paper_repro.drivers import fit, sweep
from paper_repro.drivers.sweep import NotebookJob
from paper_repro.run.launch import batch_layout
from paper_repro.run.preflight import hub_refs
from paper_repro.run.spec import RunSpec

# the study steps that run cells or sample policies (stage E: test_time, priced by stage_e_estimate)
STAGE_ORDER: tuple[str, ...] = (*STAGES, "race", "test_time")


@dataclass
class StageEstimate:
    stage: str
    runs: int = 0
    new_runs: int = 0  # not already counted in an earlier stage
    train_flops: float = 0.0
    gpu_hours_train: float = 0.0
    gpu_hours_eval: float = 0.0
    wall_hours: float = 0.0  # if the runs go one after another, each on its resources
    notes: list[str] = field(default_factory=list)

    @property
    def gpu_hours(self) -> float:
        return self.gpu_hours_train + self.gpu_hours_eval


def study_specs(
    profile: Profile,
    stages: Sequence[str] = STAGE_ORDER,
    seeds: int | None = None,
    quick: bool = False,
    unnamed: dict[str, int] | None = None,
) -> dict[str, list[RunSpec]]:
    """The specs each stage's notebooks run, in order: {stage: [RunSpec, ...]}, read from the sweep's
    own jobs (:func:`paper_repro.drivers.sweep.study_jobs`), so the dry run checks exactly what would run.
    ``unnamed``, when given, receives per RACE setting the runs its notebook will make that no spec
    names yet (its picks, before its pilots have named them)."""
    out: dict[str, list[RunSpec]] = {stage: [] for stage in stages}
    for job in stage_jobs(profile, stages, seeds, quick):
        out[job.stage] += job.specs
        if unnamed is not None and job.unknown_runs:
            unnamed[job.parameters["setting"]] = job.unknown_runs
    return out


def stage_jobs(
    profile: Profile, stages: Sequence[str] = STAGE_ORDER, seeds: int | None = None, quick: bool = False
) -> list[NotebookJob]:
    """The sweep's own notebook jobs of ``stages`` (:func:`paper_repro.drivers.sweep.study_jobs`), in
    order, each with its runs and the resources it would be submitted with."""
    unknown = sorted(set(stages) - set(STAGE_ORDER))
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown} for a dry run; stages: {', '.join(STAGE_ORDER)}")
    return sweep.study_jobs(profile, list(stages), seeds, quick)


def run_gpu_hours(profile: Profile, spec: RunSpec, completion: int | None = None) -> tuple[float, float]:
    """(training, evaluation) GPU-hours of one run at the profile's assumed MFUs: its budget split by
    the cell's rho at the profile's predicted lengths (:func:`paper_repro.run.allocation.predictor_for`;
    ``completion``: at that many completion tokens instead), and its evaluation's answers at those
    lengths."""
    est = profile.estimate
    peak = est.peak_tflops * 1e12
    cost, lengths = _round_cost(profile, spec, completion)
    share = spec.budget_flops / cost.C_total
    search = cost.C_search * share
    dense = (cost.C_learning + cost.C_reward) * share
    seconds = search / (peak * est.mfu_generate(spec.train.generation)) + dense / (peak * est.mfu_train)
    answer = flops.generation_work(lengths["prompt"], lengths["completion"])
    eval_flops = est.eval_problems * flops.forward_flops(models.shape(spec.model), answer)
    if spec.prm:  # the judge (and a PRM reward) reads every answer once
        read = flops.sequence_work(lengths["prompt"] + lengths["completion"])
        eval_flops += est.eval_problems * flops.forward_flops(models.shape(spec.prm), read)
    eval_seconds = eval_flops / (peak * est.mfu_generate(spec.train.generation))
    return seconds / 3600, eval_seconds / 3600


def _round_cost(profile: Profile, spec: RunSpec, completion: int | None = None):
    """One round of ``spec``'s cell at the profile's predicted lengths (``completion``: at that many
    completion tokens, the PRM reading the policy's prompt and completion), and those lengths."""
    from dataclasses import replace

    from paper_repro.run.allocation import predictor_for

    setting = profile.setting(spec.setting)
    planner, _ = predictor_for(profile, setting)
    lengths = profile.lengths_for(setting)[0]
    if completion is not None:
        planner = replace(planner, completion_tokens=completion, reward_tokens=None)
        lengths = {**lengths, "completion": completion}
    return planner.round_cost(spec.P, spec.G, spec.K, spec.mu), lengths


def hours_range(profile: Profile, specs: Sequence[RunSpec]) -> tuple[int, int, float, float] | None:
    """Where the profile's lengths are assumed and it names a ``completion_range``
    (:class:`~paper_repro.config.PredictedLengths`): (shortest, longest completion tokens, and the
    GPU-hours of ``specs``, each run once, at each); None otherwise."""
    span = profile.predicted_lengths.completion_range
    if profile.predicted_lengths.source != "assumed" or span is None:
        return None
    runs = list({s.run_id: s for s in specs}.values())
    lo, hi = (sum(sum(run_gpu_hours(profile, s, c)) for s in runs) for c in span)
    return span[0], span[1], lo, hi


def _unnamed_picks_note(profile: Profile, unnamed: dict[str, int]) -> str:
    """The RACE notebooks' runs no spec names yet (``unnamed``: per setting whose first-budget pilots,
    with their curves, are not all recorded): RACE's pick and RACE+'s pick, each a full-grid cell at C
    on the fresh seeds (a pick that is the other or TRL's default cell adds no run). Not in the
    totals; priced at most as if both picks were the setting's costliest grid cell. ``profile``: the
    one the runs use (the quick variant for a quick run)."""
    if not unnamed:
        return ""
    n, hours = len(profile.fresh_seeds), 0.0
    for name, runs in unnamed.items():
        cells = sweep.pick_candidates(profile, profile.setting(name))
        hours += runs * max((sum(run_gpu_hours(profile, c)) for c in cells), default=0.0)
    return (
        f"RACE's and RACE+'s picks: up to {sum(unnamed.values())} more full-budget runs in {len(unnamed)} "
        f"setting(s) whose first-budget pilots are not all recorded (each pick a grid cell on the {n} fresh "
        "seeds; a pick that is the other or TRL's default adds none), named by the pilots' results: not in "
        f"the totals above; at most {hours:.3g} GPU-hours (each at its setting's costliest grid cell)"
    )


def hub_status() -> str | None:
    """None when the hub answers; otherwise why not (said once by the dry run)."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return "HF_HUB_OFFLINE=1 is set"
    try:
        from huggingface_hub import HfApi

        HfApi().model_info("Qwen/Qwen2.5-1.5B-Instruct", timeout=5)
    except Exception as err:  # no network, a proxy, DNS: any failure means we cannot check
        return f"the hub could not be reached ({type(err).__name__})"
    return None


def check_hub_ids(refs: dict[str, str]) -> list[str]:
    """Problems with hub references ({reference: "model" | "dataset"}): the id or its revision does
    not exist on the hub. Checked without downloading."""
    from huggingface_hub import HfApi

    from paper_repro.tasks.hub import parse_ref

    api, problems = HfApi(), []
    for ref, kind in sorted(refs.items()):
        repo, revision = parse_ref(ref)
        info = api.model_info if kind == "model" else api.dataset_info
        try:
            info(repo, revision=revision, timeout=10)
        except Exception as err:
            problems.append(f"{kind} {ref}: {type(err).__name__}: {err}")
    return problems


def pins(refs: dict[str, str]) -> dict[str, dict[str, str]]:
    """The hub references ``refs`` by how they are pinned: ``unpinned`` (no revision: a run refuses
    them), ``branch`` (a branch or tag: runs, and records the commit it resolved to) and ``commit``."""
    from paper_repro.tasks.hub import is_commit, parse_ref

    out: dict[str, dict[str, str]] = {"unpinned": {}, "branch": {}, "commit": {}}
    for ref, kind in sorted(refs.items()):
        revision = parse_ref(ref)[1]
        group = "unpinned" if revision is None else "commit" if is_commit(revision) else "branch"
        out[group][ref] = kind
    return out


def dry_run(
    profile: Profile,
    stages: Sequence[str] = STAGE_ORDER,
    seeds: int | None = None,
    quick: bool = False,
    n_jobs: int = 1,
    partition: str | None = None,
) -> dict:
    """Validate and price every run of ``stages``, and list each notebook job with the submitit
    parameters ``--executor slurm`` would submit it with (``n_jobs`` at a time, on ``partition``);
    raises ValueError on the first spec that cannot run (an unrealisable cell, a layout that does not
    fit, an unknown model), and :class:`~paper_repro.drivers.fit.DoesNotFit` when the memory model says a
    layout passes its GPU's memory (each such one with its phase, its GiB and the knob that would fit)."""
    jobs = stage_jobs(profile, stages, seeds, quick)
    unnamed = {j.parameters["setting"]: j.unknown_runs for j in jobs if j.unknown_runs}  # picks not yet named
    if quick:
        profile = profile.quick_variant()
    seen: set[str] = set()
    placed: list[tuple[str, int, RunSpec]] = []  # (stage, GPUs its layout uses, spec): the memory check's
    estimates = []
    refs: dict[str, str] = {}
    for stage in stages:
        est = StageEstimate(stage)
        for job, spec in ((j, spec) for j in jobs if j.stage == stage for spec in j.specs):
            est.runs += 1
            refs.update(hub_refs(spec))
            models.shape(spec.model)
            if spec.prm:
                models.shape(spec.prm)
            layout = _job_layout(job, spec)
            placed.append((stage, layout.processes if job.resources.gpus and spec.runtime.gpus else 0, spec))
            if layout.note:
                note = (
                    f"{spec.setting} ({spec.policy}) {spec.budget_kind} {spec.cell}: {layout.note}; its job "
                    f"{job.output.stem} holds {job.resources.gpus} for its runs that use them all"
                )
                if note not in est.notes:
                    est.notes.append(note)
            if spec.run_id in seen:
                continue
            seen.add(spec.run_id)
            est.new_runs += 1
            hours_train, hours_eval = run_gpu_hours(profile, spec)
            est.train_flops += spec.budget_flops
            est.gpu_hours_train += hours_train
            est.gpu_hours_eval += hours_eval
            est.wall_hours += (hours_train + hours_eval) / layout.processes
        if stage == "race":  # picks not yet named by the pilots' results cannot be priced exactly
            note = _unnamed_picks_note(profile, unnamed)
            if note:
                est.notes.append(note)
        if stage == "test_time":
            est = stage_e_estimate(profile, seeds)
        estimates.append(est)
    memory = fit.fit_report(profile, placed)
    refused = [row.refusal() for row in memory if not row.fits]
    if refused:
        raise fit.DoesNotFit(
            "the memory model says these layouts cannot fit their GPU:\n  "
            + "\n  ".join(refused)
            + "\n"
            + "\n".join(fit.format_fit(memory))
        )
    hub = hub_status()
    problems = [] if hub else check_hub_ids(refs)
    submitted = [(job, sweep.slurm_parameters(job.resources, n_jobs, partition)) for job in jobs]
    span = hours_range(profile, [spec for job in jobs if job.stage in stages for spec in job.specs])
    return {
        "profile": profile,
        "stages": estimates,
        "hub": hub,
        "hub_problems": problems,
        "pins": pins(refs),
        "jobs": submitted,
        "hours_range": span,
        "memory": memory,
    }


def stage_e_estimate(profile: Profile, seeds: int | None = None) -> StageEstimate:
    """Stage E priced (:mod:`paper_repro.drivers.test_time`): per stage-A size, its base policy and
    each grid seed's RL policy sample ``n`` answers to ``problems`` of each of the two sets with vLLM
    (the profile's vLLM generation MFU), the PRM reading each once; each RL policy is its best cell's
    full-budget run trained again (the study keeps no adapters), priced as the setting's first grid
    cell (the best is known only after the study; every cell spends the same budget)."""
    from paper_repro.drivers.test_time import SETS, StageE
    from paper_repro.run.spec import seed_list, setting_specs

    design = StageE()
    est = StageEstimate("test_time")
    peak = profile.estimate.peak_tflops * 1e12
    prm = models.shape(profile.prm)
    for setting in profile.settings("A"):
        specs = setting_specs(profile, setting, seed_list(profile, seeds or design.seeds), "full")
        first = [s for s in specs if s.cell == specs[0].cell]
        lengths = profile.lengths_for(setting)[0]
        answer = flops.generation_work(lengths["prompt"], lengths["completion"])
        read = flops.sequence_work(lengths["prompt"] + lengths["completion"])
        samples = (1 + len(first)) * len(SETS) * design.problems * design.n
        sample_flops = samples * (
            flops.forward_flops(models.shape(first[0].model), answer) + flops.forward_flops(prm, read)
        )
        est.gpu_hours_eval += sample_flops / (peak * profile.estimate.mfu_generate("vllm")) / 3600
        for spec in first:
            train, evaluation = run_gpu_hours(profile, spec)
            est.runs += 1
            est.train_flops += spec.budget_flops
            est.gpu_hours_train += train + evaluation
    est.wall_hours = est.gpu_hours  # one GPU each, one after another
    est.notes.append(
        f"stage E: {design.n} vLLM samples x {design.problems} problems x {len(SETS)} sets per policy, the "
        "PRM reading each; its RL policies retrained (their runs are in runs.csv, not re-appended)"
    )
    return est


def _job_layout(job: NotebookJob, spec: RunSpec):
    """The batch layout of ``spec`` on the GPUs its job holds (its policy size's CPU process when
    it has none): the processes its launch starts, and a note when they are fewer than the job's."""
    gpus = job.resources.gpus if spec.runtime.gpus else 0
    return batch_layout(spec.P, spec.G, spec.K, gpus, spec.runtime.micro_batch)


def format_report(result: dict) -> str:
    profile: Profile = result["profile"]
    est = profile.estimate
    lines = [
        f"dry run of profile {profile.name}: every spec validated without weights "
        f"(configs, cells realisable at their budgets, model shapes, batch layouts)",
    ]
    if result["hub"]:
        lines.append(f"hub: not checked: {result['hub']}; model and dataset ids were not verified")
    elif result["hub_problems"]:
        lines += ["hub: PROBLEMS:", *(f"  {p}" for p in result["hub_problems"])]
    else:
        lines.append("hub: every model and dataset id exists")
    lines += _pin_lines(result.get("pins", {}))
    lines.append(
        f"GPU-hours on {est.gpu} ({est.peak_tflops:g} TFLOP/s peak) at assumed MFU: training "
        f"{est.mfu_train:.0%}, generation {est.mfu_generate(profile.train.generation):.0%} "
        f"({profile.train.generation}); evaluation of {est.eval_problems} greedy answers per run"
    )
    header = f"  {'stage':<9} {'runs':>5} {'new':>5} {'train FLOPs':>12} {'GPU-h train':>12} {'GPU-h eval':>11} {'GPU-h':>9} {'wall h':>8}"
    lines.append(header)
    total = StageEstimate("total")
    for s in result["stages"]:
        lines.append(
            f"  {s.stage:<9} {s.runs:>5} {s.new_runs:>5} {s.train_flops:>12.3e} {s.gpu_hours_train:>12.1f} "
            f"{s.gpu_hours_eval:>11.1f} {s.gpu_hours:>9.1f} {s.wall_hours:>8.1f}"
        )
        total.runs += s.runs
        total.new_runs += s.new_runs
        total.train_flops += s.train_flops
        total.gpu_hours_train += s.gpu_hours_train
        total.gpu_hours_eval += s.gpu_hours_eval
        total.wall_hours += s.wall_hours
    lines.append(
        f"  {'total':<9} {total.runs:>5} {total.new_runs:>5} {total.train_flops:>12.3e} "
        f"{total.gpu_hours_train:>12.1f} {total.gpu_hours_eval:>11.1f} {total.gpu_hours:>9.1f} {total.wall_hours:>8.1f}"
    )
    lines.append("  (new: runs not already counted in an earlier stage; wall h: one run after another)")
    lines += _lengths_lines(profile, result.get("hours_range"))
    for s in result["stages"]:
        for note in s.notes:
            lines.append(f"  note, stage {s.stage}: {note}")
    lines += fit.format_fit(result.get("memory", []))
    lines += _job_lines(result.get("jobs", []))
    return "\n".join(lines)


# submitit's parameters a job line shows, under their own names (sweep.slurm_parameters)
JOB_COLUMNS = ("gpus_per_node", "cpus_per_task", "mem_gb", "timeout_min")


def _job_lines(jobs: list[tuple[NotebookJob, dict]]) -> list[str]:
    """One line per notebook job: the submitit parameters ``--executor slurm`` submits it with, and
    how many of its runs use how many GPUs (its GPUs are the most any of them uses)."""
    if not jobs:
        return []
    first = jobs[0][1]
    shared = f"slurm_array_parallelism {first['slurm_array_parallelism']} (--jobs)"
    if "slurm_partition" in first:
        shared += f", slurm_partition {first['slurm_partition']} (--partition)"
    width = max(len(job.output.stem) for job, _ in jobs)
    lines = [
        f"SLURM jobs (--executor slurm): one per notebook, with these submitit parameters; {shared}",
        f"  {'notebook':<{width}} " + " ".join(f"{c:>13}" for c in JOB_COLUMNS) + "  its runs' GPUs",
    ]
    for job, params in jobs:
        values = " ".join(f"{params.get(c, '-'):>13}" for c in JOB_COLUMNS)
        lines.append(f"  {job.output.stem:<{width}} {values}  {_runs_by_gpus(job)}")
    return lines


def _runs_by_gpus(job: NotebookJob) -> str:
    """How many of ``job``'s named runs use how many GPUs ("3 on 2, 9 on 8"), and its runs no spec
    names yet (RACE's picks, priced by the job at its setting's grid cells)."""
    from collections import Counter

    counts = Counter(_job_layout(job, spec).processes if job.resources.gpus else 0 for spec in job.specs)
    said = ", ".join(f"{n} on {gpus or 'the CPU'}" for gpus, n in sorted(counts.items())) or "none"
    return said + (f" (+{job.unknown_runs} picks)" if job.unknown_runs else "")


def _lengths_lines(profile: Profile, span: tuple[int, int, float, float] | None) -> list[str]:
    """What the GPU-hours assume of the completions' lengths, and what a range of them gives."""
    if profile.predicted_lengths.source == "measured":
        return ["  (lengths: measured on the profile's committed runs, its predicted_lengths)"]
    lengths = profile.expected_lengths
    line = (
        f"  lengths ASSUMED, not measured: {lengths['prompt']} prompt + {lengths['completion']} completion "
        "tokens (no run has measured them)"
    )
    if span is not None:
        line += (
            f"; at {span[0]}..{span[1]} completion tokens the total is {span[2]:.1f}..{span[3]:.1f} GPU-hours "
            "(the FLOP budget is fixed: the lengths move its split between generation and updates, and the evaluation)"
        )
    return [line]


def _pin_lines(pinned: dict[str, dict[str, str]]) -> list[str]:
    unpinned, branch = pinned.get("unpinned", {}), pinned.get("branch", {})
    lines = []
    if unpinned:
        lines.append(
            f"UNPINNED: {len(unpinned)} hub id(s) have no revision, and a run refuses them: pin before you "
            "run ({id: owner/name, revision: <40-hex commit>} in the profile; README, gpu-paper):"
        )
        lines += [f"  {kind} {ref}" for ref, kind in unpinned.items()]
    if branch:
        lines.append("pinned to a branch or tag, not a commit (the run records the commit it resolves to):")
        lines += [f"  {kind} {ref}" for ref, kind in branch.items()]
    if not unpinned and not branch and pinned.get("commit"):
        lines.append(f"revisions: all {len(pinned['commit'])} hub ids the runs load are pinned to a commit")
    return lines
