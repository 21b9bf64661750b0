"""Stage E (notebook 60): the study's policies spending FLOPs at test time, beside what RL spent.

:func:`run_stage_e` samples, for each stage-A setting (a policy size), the base policy and the RL
policy of each grid seed at the setting's best cell (``optima.csv``, native reward) ``n`` times on
the first ``problems`` of the held-out and gsm sets, and scores every test-time arm
(:mod:`paper_repro.evaluation.test_time`). The study saved no adapters, so each RL policy is trained
again from its committed spec, the same run_id, without its budget ladder (which leaves the run as
it was: :mod:`paper_repro.run.ladder`); its greedy metrics are compared with the committed row's
(``reproduced``), and its row is **not** appended to ``runs.csv``: stage E writes its own tables.

Tables, in the profile's results folder: ``test_time/<policy_id>.csv`` (one row a problem and set:
:func:`paper_repro.evaluation.test_time.problem_rows`), written whole once a policy is done, and
``test_time_policies.csv`` (one row a policy). A rerun skips every policy whose rows exist.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pandas as pd

from paper_repro.common.results import ResultTable, results_dir
from paper_repro.config import Profile
from paper_repro.drivers.study import announce_quick, prepare, results_root_for
from paper_repro.run.spec import RunSpec, seed_list, setting_specs

SETS = ("heldout", "gsm")  # the study's evaluation problems on which the arms are compared
POLICY_COLUMNS = (
    "policy_id",
    "size",
    "kind",
    "seed",
    "cell",
    "run_id",
    "train_flops",
    "committed_train_flops",
    "gsm_pass1",
    "committed_gsm_pass1",
    "native_reward",
    "committed_native_reward",
    "reproduced",
    "n",
    "problems",
    "temperature",
    "seconds_train",
    "seconds_sampling",
    "status",
)


@dataclasses.dataclass(frozen=True)
class StageE:
    """What stage E samples: ``n`` samples of each of the first ``problems`` of each set, drawn in
    batches of ``batch_size`` sequences (the fused decoder's), on the grid's seeds (None: all)."""

    n: int = 64
    # 150 of each set (300 a policy): the most that fits stage E's 10 minutes on 2 cores with a
    # margin (300 a set, the issue's, measured 13.8: docs/MEASUREMENTS.md, "Stage E at the issue's
    # scale"); the evaluation noise of 150 problems is what the claims' bootstrap and power read
    problems: int = 150
    batch_size: int = 4096
    seeds: int | None = None

    def __post_init__(self) -> None:
        if self.n < 1 or self.problems < 1 or self.batch_size < 1:
            raise ValueError(f"n, problems and batch_size must be positive: {self}")


QUICK = StageE(n=16, problems=40, seeds=1)  # the smoke run's: every arm and table, in a minute


def stage_e_design(quick: bool = False, n=None, problems=None, seeds=None, threads=None) -> StageE:
    """The notebook's design: :class:`StageE` (or :data:`QUICK`) with the parameters given (None: the
    design's); a parameter of the wrong type is refused in one line that says what was expected."""
    integer = lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0  # noqa: E731
    for name, value in (("n", n), ("problems", problems), ("seeds", seeds), ("threads", threads)):
        if value is not None and not integer(value):
            raise TypeError(f"{name}: expected a positive integer or None (-p {name} 8), got {value!r}")
    if not isinstance(quick, bool):
        raise TypeError(f"quick: expected True or False (-p quick True), got {quick!r}")
    given = {k: v for k, v in (("n", n), ("problems", problems), ("seeds", seeds)) if v is not None}
    return dataclasses.replace(QUICK if quick else StageE(), **given)


def best_cells(root: Path, profile: Profile) -> dict[str, str]:
    """Each stage-A setting's best cell by native reward (``optima.csv``, the analysis's pick), else
    the cell of the best mean native reward in ``runs.csv`` (a folder before its analysis); a setting
    with no full-budget run in the folder is left out (an exploration of one size)."""
    runs = pd.read_csv(root / "runs.csv")
    runs = runs[(runs.stage == "A") & (runs.budget_kind == "full") & (runs.status == "ok")]
    sizes = [s.name for s in profile.settings("A") if s.name in set(runs.setting)]
    picked: dict[str, str] = {}
    if (root / "optima.csv").exists():
        o = pd.read_csv(root / "optima.csv")
        o = o[(o.stage == "A") & (o.target == "native_reward")]
        picked = dict(zip(o.setting, o.best_cell, strict=True))
    means = runs.groupby(["setting", "cell"]).native_reward.mean().reset_index()
    best = lambda s: means[means.setting == s].sort_values("native_reward").cell.iloc[-1]  # noqa: E731
    return {s: picked.get(s) or best(s) for s in sizes}


def run_stage_e(
    profile: str | Profile,
    quick: bool = False,
    results_root: str | Path | None = None,
    threads: int | None = None,
    design: StageE | None = None,
    workers: int | None = None,
) -> pd.DataFrame:
    """Sample and score every stage-E policy not done yet, ``workers`` policies at once (None:
    :func:`stage_e_workers`); return ``test_time_policies.csv``. Rows are appended in the study's order
    (size, then base before the RL seeds) whatever the workers' order of finishing, so the table's
    bytes do not depend on ``workers``; each policy's sampling and retraining is seeded on its own."""
    import torch

    prof = prepare(profile, quick)
    if quick:
        announce_quick(profile)
    design = design or (QUICK if quick else StageE())
    root = results_dir(prof.name, results_root_for(profile, quick, results_root))
    if threads:
        torch.set_num_threads(threads)
    table = ResultTable(root / "test_time_policies.csv", POLICY_COLUMNS, key="policy_id")
    done = table.keys()
    _check_same_design(table, design)
    committed = pd.read_csv(root / "runs.csv").set_index("run_id")
    tasks = []
    for size, cell in best_cells(root, prof).items():
        specs = setting_specs(prof, size, seed_list(prof, design.seeds), "full", [cell])
        for spec in specs:
            if spec.run_id not in committed.index:
                raise ValueError(
                    f"stage E retrains the committed run of {size} {cell} seed {spec.seed}, but "
                    f"{spec.run_id} is not in {root / 'runs.csv'}: run its stage-A notebook first"
                )
        if f"base-{size}" not in done:
            tasks.append(_Task(specs[0], root, design, prof.prm, None, threads))
        tasks += [
            _Task(spec, root, design, prof.prm, committed.loc[spec.run_id], threads)
            for spec in specs
            if spec.run_id not in done
        ]
    workers = min(workers or stage_e_workers(prof, threads), len(tasks) or 1)
    if workers == 1:
        for task in tasks:
            table.append(task())
    else:  # fresh interpreters: torch's threads and allocator are not safe to fork
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            for row in pool.map(_Task.__call__, tasks):  # in submission order: the table's order
                table.append(row)
    return table.frame()


def stage_e_workers(prof: Profile, threads: int | None) -> int:
    """How many policies stage E samples at once: on the CPU, one per core that ``threads`` torch
    threads a policy leave (the study gives each notebook one thread, so two on 2 cores: stage E
    runs last and alone); one where a policy takes a GPU (gpu-paper) or ``threads`` is None (torch's
    default already takes every core)."""
    from paper_repro.run.runner import usable_cores

    if threads is None or any(prof.resources_for(s.policy).gpus for s in prof.settings("A")):
        return 1
    return max(1, usable_cores() // threads)


@dataclasses.dataclass(frozen=True)
class _Task:
    """One stage-E policy: the base policy of ``spec``'s size (``committed`` None), or the RL policy
    of ``spec`` retrained and checked against its ``committed`` row; a picklable callable returning
    the policy's ``test_time_policies.csv`` row."""

    spec: RunSpec
    root: Path
    design: StageE
    prm: str
    committed: pd.Series | None
    threads: int | None

    def __call__(self) -> dict:
        from paper_repro.common.quiet import quiet_libraries

        quiet_libraries()  # a spawned worker starts without the study's warning filters
        if self.threads:  # a worker process starts at torch's default
            import torch

            torch.set_num_threads(self.threads)
        if self.committed is None:
            return _sample_base(self.spec, self.root, self.design, self.prm)
        return _sample_rl(self.spec, self.root, self.design, self.prm, self.committed)


def _check_same_design(table: ResultTable, design: StageE) -> None:
    """Refuse to add policies sampled under another design to a folder's stage-E rows: the arms of
    two designs are not comparable."""
    rows = table.rows()
    other = {(r["n"], r["problems"]) for r in rows} - {(str(design.n), str(design.problems))}
    if other:
        raise ValueError(
            f"{table.path} holds policies sampled with (n, problems) {sorted(other)}, not this design's "
            f"({design.n}, {design.problems}): pass those (-p n ... -p problems ...) or another results_root"
        )


def sampling_config(spec: RunSpec, design: StageE):
    from paper_repro.evaluation.evaluate import SampleConfig

    return SampleConfig(
        n=design.n,
        temperature=spec.train.temperature,
        max_new_tokens=spec.eval_max_new_tokens,
        batch_size=design.batch_size,
        seed=0,  # every policy draws from the same random stream (common random numbers)
        sampler=spec.decoder("evaluation"),
    )


def _sample_policy(
    spec: RunSpec, parts, model, policy_id: str, root: Path, design: StageE, prm: str
) -> float:
    """Sample and score ``model`` on each set; write ``test_time/<policy_id>.csv``; the seconds it took."""
    from paper_repro import flops
    from paper_repro.common.console import report
    from paper_repro.evaluation import test_time
    from paper_repro.rewards.prm_scorer import PRMScorer

    started = time.perf_counter()
    scorer = PRMScorer.load(prm)  # the profile's PRM, whatever the policy was trained with
    shape = flops.ModelShape.from_config(model.config)
    frames = []
    for name in SETS:
        report(f"stage E: sampling {policy_id} on {name}")
        examples = list(getattr(parts.eval_sets, name))[: design.problems]
        sampled = test_time.sample_policy(
            model, parts.tokenizer, examples, parts.grader, scorer, "min", sampling_config(spec, design)
        )
        frames.append(pd.DataFrame(test_time.problem_rows(sampled, shape, scorer.shape)).assign(set=name))
    folder = root / "test_time"
    folder.mkdir(parents=True, exist_ok=True)
    out = pd.concat(frames).assign(policy_id=policy_id)
    partial = folder / f".{policy_id}.csv.partial"
    out.to_csv(partial, index=False, float_format="%.6g")
    partial.replace(folder / f"{policy_id}.csv")
    return time.perf_counter() - started


def _sample_base(spec: RunSpec, root: Path, design: StageE, prm: str) -> dict:
    from paper_repro.run.trainer import load_parts

    parts = load_parts(spec)
    seconds = _sample_policy(spec, parts, parts.model, f"base-{spec.policy}", root, design, prm)
    return _row(f"base-{spec.policy}", spec, design, "base", seconds_sampling=seconds, status="ok")


def _sample_rl(spec: RunSpec, root: Path, design: StageE, prm: str, committed) -> dict:
    """Train ``spec`` again (its committed run, without its ladder), check its greedy metrics against
    the committed row, and sample it."""
    from transformers import set_seed

    from paper_repro.common.console import report
    from paper_repro.run.run_eval import evaluate_run
    from paper_repro.run.trainer import build_trainer, load_parts

    run = dataclasses.replace(spec, ladder=(), ladder_unit=None)  # the same run: run/ladder.py
    set_seed(run.seed)
    parts = load_parts(run)
    log = root / "test_time" / "steps" / f"{run.run_id}.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)  # a killed attempt's log: the retrained run writes its own
    trainer = build_trainer(run, parts, log)
    report(f"stage E: training {spec.policy} {spec.cell} seed {spec.seed} again")
    t0 = time.perf_counter()
    trainer.train()
    seconds_train = time.perf_counter() - t0
    spent = trainer.ledger.summary()["useful"]["C_total"]
    policy = trainer.model.merge_and_unload()
    metrics = evaluate_run(run, parts, policy)
    seconds = _sample_policy(run, parts, policy, run.run_id, root, design, prm)
    same = (
        all(abs(metrics[m] - float(committed[m])) <= 1e-9 for m in ("gsm_pass1", "native_reward"))
        and abs(spent / float(committed["C_total"]) - 1) <= 1e-9
    )
    return _row(
        run.run_id,
        spec,
        design,
        "rl",
        run_id=run.run_id,
        train_flops=spent,
        committed_train_flops=float(committed["C_total"]),
        gsm_pass1=metrics["gsm_pass1"],
        committed_gsm_pass1=float(committed["gsm_pass1"]),
        native_reward=metrics["native_reward"],
        committed_native_reward=float(committed["native_reward"]),
        reproduced=same,
        seconds_train=seconds_train,
        seconds_sampling=seconds,
        status="ok",
    )


def _row(policy_id: str, spec: RunSpec, design: StageE, kind: str, **values) -> dict:
    return {
        "policy_id": policy_id,
        "size": spec.policy,
        "kind": kind,
        "seed": spec.seed if kind == "rl" else "",
        "cell": spec.cell if kind == "rl" else "",
        "n": design.n,
        "problems": design.problems,
        "temperature": spec.train.temperature,
        **values,
    }


def design_json(design: StageE) -> str:
    """The design as the notebook prints it."""
    return json.dumps(dataclasses.asdict(design), sort_keys=True)


def write_stage_e(
    profile: str | Profile,
    quick: bool = False,
    results_root: str | Path | None = None,
    figures_dir: str | Path | None = None,
) -> dict[str, pd.DataFrame]:
    """Stage E's tables (:func:`paper_repro.analysis.tables.test_time_claims.stage_e_tables`) written beside its
    rows, and its figures (:mod:`paper_repro.analysis.figures.test_time`) into the profile's figures
    folder (:func:`paper_repro.analysis.pipeline.figures_folder`); returns the tables by file name.
    Where the analysis has written ``claims.csv`` (the study runs it before stage E, which reads its
    best cells), stage E's rows of it are decided again on these rows, the others left as they are
    (:func:`paper_repro.analysis.pipeline.refresh_claims`)."""
    from paper_repro.analysis.figures import test_time as figures
    from paper_repro.analysis.figures.style import save_figure
    from paper_repro.analysis.pipeline import figures_folder, refresh_claims
    from paper_repro.analysis.tables.test_time_claims import CLAIMS, stage_e_tables

    prof = prepare(profile, quick)
    redirected = results_root_for(profile, quick, results_root)
    root = results_dir(prof.name, redirected)
    order = [s.name for s in prof.settings("A")]
    tables = stage_e_tables(root, order)
    order = [s for s in order if s in set(tables["test_time_arms.csv"]["size"])]
    for name, table in tables.items():
        table.to_csv(root / name, index=False, float_format="%.6g")
    out = figures_folder(prof, redirected, figures_dir)
    for set_name in SETS:
        save_figure(
            figures.passk_curves(tables["test_time_arms.csv"], set_name, order),
            out,
            f"test_time_passk_{set_name}",
        )
        save_figure(
            figures.equal_flop_frontier(tables["test_time_arms.csv"], set_name, order),
            out,
            f"test_time_frontier_{set_name}",
        )
    save_figure(
        figures.breakeven_figure(tables["test_time_breakeven.csv"], order), out, "test_time_breakeven"
    )
    if (root / "claims.csv").exists():  # else the analysis, when it runs, decides them
        refresh_claims(prof, tuple(CLAIMS), redirected)
    return tables


FIGURES = (*(f"test_time_{kind}_{s}" for s in SETS for kind in ("passk", "frontier")), "test_time_breakeven")


def figure_paths(
    profile: str | Profile, quick: bool = False, results_root=None, figures_dir=None
) -> list[Path]:
    """The PNGs :func:`write_stage_e` wrote, in the order the notebook shows them."""
    from paper_repro.analysis.pipeline import figures_folder

    prof = prepare(profile, quick)
    out = figures_folder(prof, results_root_for(profile, quick, results_root), figures_dir)
    return [out / f"{name}.png" for name in FIGURES]


def stage_e_sentences(tables: dict[str, pd.DataFrame]) -> str:
    """Stage E in words (:func:`paper_repro.analysis.report.test_time.stage_e_words`)."""
    from paper_repro.analysis.report.test_time import stage_e_words

    return stage_e_words(tables)
