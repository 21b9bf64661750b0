"""Budgeted GRPO runs: one IsoFLOP cell -> one result row.

:func:`run_cell` takes a :class:`RunSpec` (stage, setting, cell, seed, budget, and everything the
run computes with), and:

1. checks the spec before any compute (model, PRM and data present, reward known, K <= G, the
   budget buys at least one round);
2. loads the base policy, attaches a LoRA adapter (PEFT) and trains it with the ledger-wrapped TRL
   ``GRPOTrainer`` (:class:`paper_repro.ledger.LedgerGRPOTrainer`) until the FLOP budget is spent:
   the ledger stops before the round that would pass it, so C_total lands within one round of the
   budget and never above it;
3. evaluates the adapted policy (greedy): native reward on held-out training prompts, pass@1 on the
   two downstream sets, the common judge on the gsm completions; and the base policy the same way
   (cached per base model, reward system and evaluation set in ``base_metrics.csv``);
4. appends one row to ``data/results/<profile>/runs.csv`` (:mod:`paper_repro.results`) and writes the
   per-step ledger log to ``steps/<run_id>.jsonl`` beside it.

A run that raises after the checks is recorded as ``status=failed`` with its error and NaN metrics.

How this GRPO differs from the paper's (as far as the summary lets us know): LoRA on every linear
layer of a small policy, TRL's ``dapo`` loss (its default), no KL (beta = 0), a constant learning
rate, and K < G by PODS max-variance down-sampling to reach low update fractions.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from paper_repro import provenance
from paper_repro.allocation import Cell, plan_setting, planner_for
from paper_repro.config import Grid, Profile, Resources, Setting, TrainConfig
from paper_repro.results import RUN_COLUMNS, ResultTable, results_dir
from paper_repro.rewards import REWARD_SYSTEMS

BudgetKind = Literal["full", "pilot"]
# Labels of who asked for a run and the planner's predictions: not part of what the run computes.
HASH_EXCLUDES = ("stage", "setting", "cell", "target_rho", "predicted_rho", "first_round_flops", "runtime")
# Fields added after results were recorded hash only when set away from their default, so the run ids
# of earlier runs (which computed with those defaults) do not change.
HASH_IF_SET = {"eval_heldout_limit": None, "weights": None}
TRAIN_HASH_IF_SET = {"chat_template": False, "generation": "hf", "budget_stop": "dearest"}
BASE_COLUMNS = ("base_id", "model", "reward_system", "native_reward", "gsm_pass1", "math_pass1",
                "judge_score", "seconds", "git_sha", "versions", "created_at")  # fmt: skip


@dataclass(frozen=True)
class RunSpec:
    """Everything one run computes with. Its ``run_id`` hashes all of it except the labels of who
    asked for it (``stage``, ``setting``, ``cell``, ``target_rho``) and the planner's predictions, so
    the same experiment asked for twice (stage A's M and stage B's sparse; TRL's default cell and the
    grid cell with the same P, G, K, mu) runs once, and its row carries the first asker's labels."""

    profile: str
    stage: str
    setting: str
    cell: str
    seed: int
    budget_kind: BudgetKind
    budget_flops: float
    policy: str  # the policy label (S/M/L, 1.5B/3B/7B)
    model: str  # its checkpoint: a repo-relative path or a hub id
    reward_system: str
    prm: str | None  # the PRM checkpoint (PRM-based reward systems only)
    task: str
    P: int
    G: int
    K: int
    mu: int
    target_rho: float
    train: TrainConfig
    data: tuple[tuple[str, str], ...]  # (role, dataset) for train, heldout, gsm, math
    eval_limit: int | None = None
    eval_max_new_tokens: int = 128
    eval_batch_size: int = 256
    judge: str = "step_verifier"
    predicted_rho: float = float("nan")
    first_round_flops: float | None = None
    eval_heldout_limit: int | None = None  # held-out prompts for the native reward (None: eval_limit)
    # sha256 of the local checkpoints' weight files (policy, PRM): a rebuilt testbed is a new run.
    # Hub ids are named by their id alone.
    weights: str | None = None
    # where it runs (GPUs, micro-batches): not what it computes, so not in the run_id
    runtime: Resources = field(default_factory=Resources)

    def __post_init__(self) -> None:
        if self.reward_system not in REWARD_SYSTEMS:
            raise ValueError(
                f"unknown reward system {self.reward_system!r}; known: {', '.join(REWARD_SYSTEMS)}"
            )
        if not self.budget_flops > 0:
            raise ValueError(f"budget must be a positive number of FLOPs, got {self.budget_flops}")
        if min(self.P, self.G, self.K, self.mu) < 1:
            raise ValueError(f"P, G, K and mu must be positive, got {self.P}, {self.G}, {self.K}, {self.mu}")
        if self.K > self.G:
            raise ValueError(f"K={self.K} completions kept cannot exceed G={self.G} generated")
        if self.budget_kind not in ("full", "pilot"):
            raise ValueError(f"budget_kind must be 'full' or 'pilot', got {self.budget_kind!r}")

    def canonical(self) -> dict[str, Any]:
        spec = asdict(self)
        for key in HASH_EXCLUDES:
            spec.pop(key)
        for key, default in HASH_IF_SET.items():
            if spec[key] == default:
                spec.pop(key)
        for key, default in TRAIN_HASH_IF_SET.items():
            if spec["train"][key] == default:
                spec["train"].pop(key)
        spec["data"] = dict(self.data)
        return spec

    def to_json(self) -> str:
        """The whole spec (labels and runtime included), for :func:`spec_from_json`."""
        return json.dumps(asdict(self), default=str)

    @property
    def run_id(self) -> str:
        text = json.dumps(self.canonical(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def data_map(self) -> dict[str, str]:
        return dict(self.data)

    @property
    def heldout_limit(self) -> int | None:
        return self.eval_heldout_limit if self.eval_heldout_limit is not None else self.eval_limit


def spec_from_json(text: str) -> RunSpec:
    raw = json.loads(text)
    raw["train"] = TrainConfig(**raw["train"])
    raw["runtime"] = Resources(**raw["runtime"])
    raw["data"] = tuple(tuple(pair) for pair in raw["data"])
    raw["predicted_rho"] = float(raw["predicted_rho"])
    return RunSpec(**raw)


def spec_for(
    profile: Profile, setting: Setting, cell: Cell, seed: int, budget_kind: BudgetKind = "full"
) -> RunSpec:
    """The run of ``cell`` (planned for ``setting`` at its budget) with ``seed``."""
    return RunSpec(
        profile=profile.name,
        stage=setting.stage,
        setting=setting.name,
        cell=cell.label,
        seed=seed,
        budget_kind=budget_kind,
        budget_flops=cell.budget_flops,
        policy=setting.policy,
        model=profile.policies[setting.policy],
        reward_system=setting.reward_system,
        prm=profile.prm if needs_prm_weights(profile, setting) else None,
        task=profile.task,
        P=cell.P,
        G=cell.G,
        K=cell.K,
        mu=cell.mu,
        target_rho=cell.target_rho,
        train=profile.train,
        data=tuple(sorted(profile.data.items())),
        eval_limit=profile.eval.get("limit"),
        eval_max_new_tokens=int(profile.eval.get("max_new_tokens", 128)),
        eval_batch_size=int(profile.eval.get("batch_size", 256)),
        judge=profile.judge,
        predicted_rho=cell.predicted_rho,
        first_round_flops=cell.round_cost.C_total,
        eval_heldout_limit=profile.eval.get("heldout_limit"),
        runtime=profile.resources_for(setting.policy),
        weights=weights_fingerprint(
            profile.policies[setting.policy], profile.prm if needs_prm_weights(profile, setting) else None
        ),
    )


def needs_prm_weights(profile: Profile, setting: Setting) -> bool:
    """The PRM scores the PRM-based rewards, and is the judge model of the ``prm_judge``."""
    return profile.needs_prm(setting.reward_system) or profile.judge == "prm_judge"


def weights_fingerprint(*models: str | None) -> str | None:
    """A short sha256 over the weight files of the local checkpoints among ``models``; None when
    none is local (hub ids)."""
    digests = [_checkpoint_digest(_local(m), _files_stamp(_local(m))) for m in models if m is not None]
    digests = [d for d in digests if d]
    if not digests:
        return None
    return hashlib.sha256("".join(digests).encode()).hexdigest()[:16]


def _weight_files(path: str) -> list[Path]:
    folder = Path(path)
    return sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")) if folder.is_dir() else []


def _files_stamp(path: str) -> tuple:
    """Names, sizes and mtimes: a rebuilt checkpoint gets a new cache entry of the digest."""
    return tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in _weight_files(path))


@functools.lru_cache(maxsize=64)
def _checkpoint_digest(path: str, stamp: tuple) -> str | None:
    files = _weight_files(path)
    if not files:
        return None
    digest = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def stage_specs(
    profile: Profile, stage: str, seeds: int | None = None, budget_kind: BudgetKind = "full"
) -> list[RunSpec]:
    """Every run of a stage: each setting's feasible grid cells x seeds, at the full or pilot budget."""
    budget = profile.budget_flops if budget_kind == "full" else profile.pilot_budget_flops
    n = profile.seeds if seeds is None else seeds
    specs = []
    for setting in profile.settings(stage):
        planned = plan_setting(profile, setting, budget)
        specs += [
            spec_for(profile, setting, c, seed, budget_kind) for c in planned.cells for seed in range(n)
        ]
    return specs


def default_cell_spec(
    profile: Profile, setting: Setting, seed: int, budget_kind: BudgetKind = "full"
) -> RunSpec:
    """TRL's default allocation (K = G = the grid's preferred G, mu = 1, P the grid's largest), the
    fixed cell RACE's pick is compared against."""
    budget = profile.budget_flops if budget_kind == "full" else profile.pilot_budget_flops
    g = profile.grid.preferred_G
    cell = planner_for(profile, setting).explicit(max(profile.grid.P), g, g, 1, budget, label="default")
    return spec_for(profile, setting, cell, seed, budget_kind)


# --------------------------------------------------------------------------------------------
# Checks before compute
# --------------------------------------------------------------------------------------------


def check_spec(spec: RunSpec) -> None:
    """Raise a clear error for anything that would fail later: a missing checkpoint or dataset,
    a budget below one round. Costs no FLOPs (hub checkpoints are resolved from the local cache)."""
    from paper_repro.tasks import load_examples
    from paper_repro.tasks.hub import resolve_model

    resolve_model(_local(spec.model))
    if spec.prm is not None:
        resolve_model(_local(spec.prm))
    for role in ("train", "heldout", "gsm", "math"):
        if role not in spec.data_map:
            raise ValueError(f"run {spec.run_id}: no {role!r} dataset in the spec")
        load_examples(spec.data_map[role], limit=1)
    first = spec.first_round_flops
    if first is not None and first > spec.budget_flops:
        raise ValueError(
            f"budget {spec.budget_flops:.3g} FLOPs buys 0 rounds of cell {spec.cell} for model "
            f"{spec.policy}; one round needs {first:.3g}"
        )
    if spec.train.budget_stop == "ceiling":
        ceiling = round_ceiling(spec)
        if ceiling > spec.budget_flops:
            raise ValueError(
                f"budget {spec.budget_flops:.3g} FLOPs does not surely buy one round of cell {spec.cell} "
                f"for model {spec.policy}: the costliest round (every completion at the maximum length) "
                f"needs {ceiling:.3g}"
            )


def _local(model: str) -> str:
    """A repo-relative checkpoint path made absolute; a hub id or absolute path unchanged."""
    from paper_repro.tasks.base import repo_root

    path = Path(model)
    if not path.is_absolute() and (repo_root() / path).exists():
        return str(repo_root() / path)
    return model


@dataclass(frozen=True)
class BatchLayout:
    """How one generation round of P x G rows is laid out over processes and micro-batches. The
    rollout batch and the optimizer batch (one step per epoch over all P x G rows, or the K-of-G kept
    ones) are the same whatever the layout, so runs on 1, 2 or 8 GPUs are the same experiment."""

    processes: int
    per_device: int  # TRL's per-device batch: generated rows per micro-batch (before keeping K of G)
    accumulation: int  # micro-batches per process per round, accumulated into one optimizer step
    note: str = ""

    @property
    def rows(self) -> int:
        return self.processes * self.per_device * self.accumulation


def batch_layout(P: int, G: int, K: int, gpus: int = 0, micro_batch: int | None = None) -> BatchLayout:
    """The layout of a round of ``P`` prompts x ``G`` completions on ``gpus`` processes (0: one CPU
    process), with at most ``micro_batch`` kept rows per loss forward/backward.

    With down-sampling (K < G) every process must hold whole groups (it keeps K of each of its own
    groups), so processes = the largest count <= gpus that divides P; fewer GPUs than asked is said
    in ``note``. Raises if no micro-batch size fits (the kept rows must split evenly too)."""
    rows = P * G
    asked = max(gpus, 1)
    procs = asked
    if K < G:
        procs = max(d for d in range(1, asked + 1) if P % d == 0)
    else:
        procs = max(d for d in range(1, asked + 1) if rows % d == 0)
    note = f"uses {procs} of {asked} GPUs: P={P} prompts do not split over {asked}" if procs < asked else ""
    share = rows // procs
    kept_share = share // G * K if K < G else share
    cap = micro_batch or kept_share
    # TRL generates a process's whole share at once, then splits the (kept) rows into
    # `accumulation` micro-batches for the loss: both must split evenly.
    for accumulation in range(1, kept_share + 1):
        if share % accumulation or kept_share % accumulation or kept_share // accumulation > cap:
            continue
        return BatchLayout(procs, share // accumulation, accumulation, note)
    raise ValueError(
        f"no micro-batch layout for P={P}, G={G}, K={K} on {procs} process(es) with micro_batch "
        f"{micro_batch}: {share} generated and {kept_share} kept rows per process must split evenly "
        f"into micro-batches of at most {cap} kept rows"
    )


# --------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------


def run_cell(
    spec: RunSpec,
    results_root: str | Path | None = None,
    executed_notebook: str = "",
    threads: int | None = None,
    raise_errors: bool = False,
) -> dict[str, Any]:
    """Run ``spec`` unless an ``ok`` row with its run_id exists; return the row (the existing one,
    with ``skipped=True``, when it does). ``threads`` sets torch's CPU threads (a run-time choice,
    not part of the spec). A failed attempt is kept as a ``failed`` row and retried by a rerun."""
    root = results_dir(spec.profile, results_root)
    table = ResultTable(root / "runs.csv", RUN_COLUMNS)
    for row in table.rows():
        if row["run_id"] == spec.run_id and row["status"] == "ok":
            return {**row, "skipped": True}
    check_spec(spec)
    if _needs_launch(spec):
        return _launch(spec, root, executed_notebook, raise_errors)
    started = time.perf_counter()
    row = _identity(spec, executed_notebook)
    try:
        result = _train_and_evaluate(spec, root, threads)
        if result is None:  # a non-main process of a multi-GPU run: rank 0 records the row
            return {"run_id": spec.run_id, "status": "worker"}
        row.update(result)
        row["status"] = "ok"
    except Exception as err:
        if raise_errors or not _is_main_process():  # one row per run: the main process records it
            raise
        row.update({m: float("nan") for m in ("native_reward", "gsm_pass1", "math_pass1", "judge_score")})
        row["status"] = "failed"
        row["error"] = f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=3)}"[-2000:]
    row["seconds_total"] = time.perf_counter() - started
    table.append(row)
    return row


def _needs_launch(spec: RunSpec) -> bool:
    """A multi-GPU spec asked for outside a distributed launch: it must be started with accelerate."""
    import os

    return spec.runtime.gpus > 1 and "WORLD_SIZE" not in os.environ and "LOCAL_RANK" not in os.environ


def _is_main_process() -> bool:
    import os

    return os.environ.get("RANK", "0") == "0"


def _launch(spec: RunSpec, root: Path, executed_notebook: str, raise_errors: bool) -> dict[str, Any]:
    """Run a multi-GPU spec as ``accelerate launch`` of :mod:`paper_repro.worker` and return the row
    its main process appended. The base metrics are computed here first, on one GPU, so the workers
    find them cached (an evaluation on rank 0 alone would stall the other ranks' collectives)."""
    import subprocess
    import sys

    import torch

    layout = batch_layout(spec.P, spec.G, spec.K, spec.runtime.gpus, spec.runtime.micro_batch)
    available = torch.cuda.device_count()
    if available < layout.processes:
        raise ValueError(
            f"run {spec.run_id} ({spec.setting} {spec.cell}) needs {layout.processes} GPUs; "
            f"{available} visible. Set resources[{spec.policy}].gpus in the profile to what you have."
        )
    parts = _load_parts(spec)
    base_metrics(spec, parts, root)
    del parts
    torch.cuda.empty_cache()
    spec_file = root / "launch" / f"{spec.run_id}.json"
    spec_file.parent.mkdir(parents=True, exist_ok=True)
    spec_file.write_text(spec.to_json())
    config = _local(spec.runtime.accelerate_config)
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", config,
           "--num_processes", str(layout.processes), "-m", "paper_repro.worker", str(spec_file),
           "--results", str(root), "--executed", executed_notebook]  # fmt: skip
    completed = subprocess.run(cmd, check=False)
    table = ResultTable(root / "runs.csv", RUN_COLUMNS)
    rows = [r for r in table.rows() if r["run_id"] == spec.run_id]
    if rows and rows[-1]["status"] == "ok":
        return rows[-1]
    if raise_errors:
        raise RuntimeError(f"accelerate launch of run {spec.run_id} exited {completed.returncode}")
    if rows:  # the workers recorded their failure
        return rows[-1]
    row = _identity(spec, executed_notebook)
    row.update({m: float("nan") for m in ("native_reward", "gsm_pass1", "math_pass1", "judge_score")})
    row.update(status="failed", error=f"accelerate launch exited {completed.returncode}: {' '.join(cmd)}")
    table.append(row)
    return row


def _identity(spec: RunSpec, executed_notebook: str) -> dict[str, Any]:
    stamp = provenance.stamp()
    return {
        "run_id": spec.run_id,
        "profile": spec.profile,
        "stage": spec.stage,
        "setting": spec.setting,
        "cell": spec.cell,
        "seed": spec.seed,
        "budget_kind": spec.budget_kind,
        "budget_flops": spec.budget_flops,
        "target_rho": spec.target_rho,
        "predicted_rho": spec.predicted_rho,
        "P": spec.P,
        "G": spec.G,
        "K": spec.K,
        "mu": spec.mu,
        "model": spec.policy,
        "reward_system": spec.reward_system,
        "learning_rate": spec.train.learning_rate,
        "lora_rank": spec.train.lora_rank,
        "temperature": spec.train.temperature,
        "max_completion_length": spec.train.max_completion_length,
        "flops_convention": "useful",
        "git_sha": stamp["git_sha"],
        "git_dirty": stamp["git_dirty"],
        "versions": stamp["versions"],
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "executed_notebook": executed_notebook,
        "spec": json.dumps(spec.canonical(), sort_keys=True, default=str),
        "error": "",
    }


def _train_and_evaluate(spec: RunSpec, root: Path, threads: int | None) -> dict[str, Any] | None:
    import torch
    from transformers import set_seed

    if threads:
        torch.set_num_threads(threads)
    set_seed(spec.seed)
    parts = _load_parts(spec)
    # in a multi-GPU run the launcher has cached them; only the main process reads them
    base = base_metrics(spec, parts, root) if _is_main_process() else None
    trainer = _trainer(spec, parts, root / "steps" / f"{spec.run_id}.jsonl")
    t0 = time.perf_counter()
    trainer.train()
    seconds_train = time.perf_counter() - t0
    if not trainer.accelerator.is_main_process:
        return None
    summary = trainer.ledger.summary()
    policy = trainer.model.merge_and_unload()
    t0 = time.perf_counter()
    metrics = _evaluate(spec, parts, policy)
    seconds_eval = time.perf_counter() - t0
    useful, executed, secs = summary["useful"], summary["executed"], summary["seconds"]
    return {
        **metrics,
        **{f"base_{k}": base[k] for k in ("native_reward", "gsm_pass1", "math_pass1", "judge_score")},
        "rho": useful["rho"],
        "C_search": useful["C_search"],
        "C_learning": useful["C_learning"],
        "C_reward": useful["C_reward"],
        "C_total": useful["C_total"],
        "rho_executed": executed["rho"],
        "C_total_executed": executed["C_total"],
        "rho_time": summary["rho_time"],
        "rounds": summary["rounds"],
        "steps": summary["steps"],
        "seconds_search": secs["search"],
        "seconds_learning": secs["learning"],
        "seconds_reward": secs["reward"],
        "seconds_train": seconds_train,
        "seconds_eval": seconds_eval,
    }


@dataclass
class _Parts:
    tokenizer: Any
    model: Any
    reward: Any
    judge: Any
    grader: Any
    train_examples: list
    eval_sets: Any


def _load_parts(spec: RunSpec) -> _Parts:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paper_repro.evaluate import EvalSets
    from paper_repro.judge import build_judge
    from paper_repro.rewards import build_reward
    from paper_repro.rewards.prm import PRMScorer
    from paper_repro.tasks import load_examples
    from paper_repro.tasks.graders import grader
    from paper_repro.tasks.hub import resolve_model

    path = resolve_model(_local(spec.model))
    tokenizer = AutoTokenizer.from_pretrained(path)
    dtype = torch.bfloat16 if spec.train.dtype == "bfloat16" else torch.float32
    from accelerate import PartialState

    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(PartialState().device)
    scorer = None
    if spec.prm:
        scorer = PRMScorer.load(_local(spec.prm), model_kwargs={"dtype": dtype})
        scorer.model.to(PartialState().device)  # this process's GPU (or the CPU)
    reward = build_reward(spec.reward_system, spec.task, prm=scorer)
    judge = build_judge(spec.judge, scorer, spec.task)
    data = spec.data_map
    heldout = load_examples(data["heldout"], limit=spec.heldout_limit)
    train = load_examples(data["train"])
    if data["train"] == data["heldout"]:  # one hub dataset: hold out its first rows
        train = train[len(heldout) :]
    sets = EvalSets(
        heldout=heldout,
        gsm=load_examples(data["gsm"], limit=spec.eval_limit),
        math=load_examples(data["math"], limit=spec.eval_limit),
    )
    return _Parts(tokenizer, model, reward, judge, grader(spec.task), train, sets)


def _trainer(spec: RunSpec, parts: _Parts, log_path: Path):
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig

    from paper_repro.evaluate import columns_of
    from paper_repro.ledger import LedgerConfig, LedgerGRPOTrainer

    columns = columns_of(parts.train_examples)
    prompts = [_train_prompt(spec, e) for e in parts.train_examples]
    dataset = Dataset.from_dict({"prompt": prompts, **columns})
    cuda = torch.cuda.is_available()
    t = spec.train
    expected_steps = (
        math.ceil(spec.budget_flops / spec.first_round_flops) * spec.mu if spec.first_round_flops else 10_000
    )
    from accelerate import PartialState

    world = PartialState().num_processes
    layout = batch_layout(
        spec.P, spec.G, spec.K, world if world > 1 else spec.runtime.gpus, spec.runtime.micro_batch
    )
    if world > 1 and layout.processes != world:
        raise ValueError(
            f"run {spec.run_id} was launched on {world} processes, but cell P={spec.P} G={spec.G} K={spec.K} "
            f"can use {layout.processes} ({layout.note}); launch it with --num_processes {layout.processes}"
        )
    vllm = {}
    if t.generation == "vllm":
        vllm = dict(
            use_vllm=True,
            vllm_mode="colocate",
            vllm_gpu_memory_utilization=spec.runtime.vllm_gpu_memory_utilization,
            vllm_enable_sleep_mode=False,
        )
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix=f"grpo-{spec.run_id}-"),
        # one generation round (P x G rows over all processes) = one optimizer step per epoch
        per_device_train_batch_size=layout.per_device,
        gradient_accumulation_steps=layout.accumulation,
        steps_per_generation=layout.accumulation,
        num_generations=spec.G,
        num_iterations=spec.mu,
        max_completion_length=t.max_completion_length,
        temperature=t.temperature,
        learning_rate=t.learning_rate,
        lr_scheduler_type=t.lr_scheduler,
        beta=t.beta,
        max_steps=4 * expected_steps + 8,  # a cap only: the ledger's budget stops the run
        seed=spec.seed,
        data_seed=spec.seed,
        bf16=t.dtype == "bfloat16" and cuda,
        # TRL defaults it on; the tiny policies only lose time by it, the gpu-paper ones need it
        gradient_checkpointing=spec.runtime.gradient_checkpointing,
        use_cpu=not cuda,
        save_strategy="no",
        report_to=[],
        logging_steps=1,
        disable_tqdm=True,
        log_level="error",
        **vllm,
    )
    lora = LoraConfig(
        r=t.lora_rank,
        lora_alpha=t.lora_alpha,
        target_modules=t.lora_targets,
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
    )
    ledger = LedgerConfig(
        budget_flops=spec.budget_flops,
        kept=spec.K,
        log_path=log_path if PartialState().is_main_process else None,
        first_round_flops=spec.first_round_flops,
        round_ceiling_flops=round_ceiling(spec) if t.budget_stop == "ceiling" else None,
        seed=spec.seed,
    )
    return LedgerGRPOTrainer(
        model=parts.model,
        reward_funcs=parts.reward,
        args=args,
        train_dataset=dataset,
        processing_class=parts.tokenizer,
        peft_config=lora,
        ledger=ledger,
    )


def round_ceiling(spec: RunSpec) -> float:
    """The most one generation round of ``spec`` can cost (useful FLOPs): the longest training prompt
    and every completion at ``max_completion_length``. The PRM reads the prompt (in its own format)
    and the completion's steps, a separator after each: with the arith task's character tokens a
    step and its separator take no more tokens than the step and its newline, so at most one more
    than the completion; with a BPE tokenizer, re-tokenised steps may take more, so twice it.
    Needs tokenizers and data only, no weights."""
    from paper_repro.allocation import Planner, resolve_shape
    from paper_repro.flops import LoRASpec, TrainSpec
    from paper_repro.rewards import PRM_BASED

    t = spec.train
    longest = _longest_prompt(spec.model, spec.data_map["train"], t.chat_template, "policy")
    completion = t.max_completion_length
    reward_model, reward_tokens = None, None
    if spec.reward_system in PRM_BASED:
        reward_model = resolve_shape(_local(spec.prm))
        prompt_part = _longest_prompt(spec.prm, spec.data_map["train"], False, "prm")
        reward_tokens = prompt_part + (completion + 1 if spec.task == "arith" else 2 * completion)
    planner = Planner(
        policy=resolve_shape(_local(spec.model)),
        reward_model=reward_model,
        prompt_tokens=longest,
        completion_tokens=completion,
        grid=Grid(),
        train=TrainSpec(
            lora=LoRASpec(rank=t.lora_rank, target_modules=(t.lora_targets,)), head_recompute=True
        ),
        beta=t.beta,
        prefix_cache=t.generation == "vllm",
        vllm_importance_sampling=t.generation == "vllm",
        reward_tokens=reward_tokens,
    )
    return planner.round_cost(spec.P, spec.G, spec.K, spec.mu).C_total


@functools.lru_cache(maxsize=32)
def _longest_prompt(model: str, data: str, chat: bool, reader: str) -> int:
    """Tokens of the longest training prompt as ``reader`` sees it: the policy (plain or through its
    chat template) or the PRM (its own input form, with no steps yet)."""
    from transformers import AutoTokenizer

    from paper_repro.rewards.prm import input_format
    from paper_repro.tasks import load_examples
    from paper_repro.tasks.hub import format_prompt, resolve_model

    local = resolve_model(_local(model))
    tokenizer = AutoTokenizer.from_pretrained(local, trust_remote_code=True)
    examples = load_examples(data)
    if reader == "prm":
        fmt = input_format(local, tokenizer)
        texts = [fmt(e.prompt, []) for e in examples]
    else:
        texts = [format_prompt(tokenizer, e) if chat else e.prompt for e in examples]
    return max(len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"])


def _prompt_text(spec: RunSpec, tokenizer, example) -> str:
    from paper_repro.tasks.hub import format_prompt

    return format_prompt(tokenizer, example) if spec.train.chat_template else example.prompt


def _train_prompt(spec: RunSpec, example) -> str | list[dict[str, str]]:
    """The prompt TRL trains on: plain text, or the chat turns its template renders."""
    from paper_repro.tasks.hub import chat_messages

    return chat_messages(example) if spec.train.chat_template else example.prompt


def _sample_config(spec: RunSpec):
    from paper_repro.evaluate import SampleConfig

    return SampleConfig(
        max_new_tokens=spec.eval_max_new_tokens, batch_size=spec.eval_batch_size, seed=spec.seed
    )


def _evaluate(spec: RunSpec, parts: _Parts, model) -> dict[str, float]:
    from paper_repro.evaluate import evaluate_policy
    from paper_repro.tasks.hub import format_prompt

    render = (lambda e: format_prompt(parts.tokenizer, e)) if spec.train.chat_template else None
    return evaluate_policy(
        model,
        parts.tokenizer,
        parts.eval_sets,
        parts.reward,
        parts.judge,
        parts.grader,
        _sample_config(spec),
        render=render,
    )


def base_metrics(spec: RunSpec, parts: _Parts, root: Path) -> dict[str, Any]:
    """The base policy's metrics under this run's reward and evaluation sets (computed once, then
    read from ``base_metrics.csv``)."""
    key = {k: v for k, v in spec.canonical().items() if k in ("model", "reward_system", "prm", "task", "data",
                                                              "eval_limit", "eval_max_new_tokens", "judge",
                                                              "weights", "eval_heldout_limit")}  # fmt: skip
    base_id = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    table = ResultTable(root / "base_metrics.csv", BASE_COLUMNS, key="base_id")
    for row in table.rows():
        if row["base_id"] == base_id:
            return {k: float(row[k]) for k in ("native_reward", "gsm_pass1", "math_pass1", "judge_score")}
    t0 = time.perf_counter()
    metrics = _evaluate(replace(spec, seed=0), parts, parts.model)
    stamp = provenance.stamp()
    table.append(
        {
            "base_id": base_id,
            "model": spec.policy,
            "reward_system": spec.reward_system,
            **metrics,
            "seconds": time.perf_counter() - t0,
            "git_sha": stamp["git_sha"],
            "versions": stamp["versions"],
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
    )
    return metrics
