"""Benchmarks (``make bench`` runs them all).

``python -m paper_repro.bench ledger``: plain ``trl.GRPOTrainer`` against
:class:`~paper_repro.ledger.LedgerGRPOTrainer` on the same tiny run (K = G, so both do the same work;
same seed, so the same rollouts), alternating, several repeats. Prints the median wall-time ratio
(target <= 1.03), and the achieved FLOP/s of generation and of the update against a matmul peak
measured in the same process.

``python -m paper_repro.bench run``: whole full-budget cpu-tiny runs (:func:`paper_repro.train.run_cell`)
of stage A cells, a search-heavy and an update-heavy cell per policy size, on the old path (HF
``generate`` for rollouts and evaluation, TRL's padded update: ``Resources.sampler="hf"``,
``TrainConfig.generation="hf"``, ``update_layout="padded"``, ``eval_decoding="exact"``) and the new one
(the profile's: the fused decoder of :mod:`paper_repro.sampler` for rollouts and evaluation, the
update over the length buckets of :mod:`paper_repro.buckets` by the forward of
:mod:`paper_repro.fused_update`), alternating in one process on one torch thread, after
a warm-up run. Prints, per cell and path, the median seconds of search, learning, reward, the rest of
training, evaluation and set-up (the run's seconds outside training and evaluation), and the ratio
old / new of the run's total. The new path computes the same runs to float rounding, so the two
paths' rollouts part after a few tokens: each path's rounds, useful FLOPs and native reward are
printed beside its seconds (the budget, not the path, sets the rounds, up to one round).

``python -m paper_repro.bench eval``: a run's greedy evaluation (:func:`paper_repro.evaluate.evaluate_run`:
the held-out set with the run's reward, gsm and math pass@1, the judge) of each policy, on the new
path and on the old one, :func:`reference_evaluate_run` (the evaluation as it was before
``lean_generate(trim=True)`` and the prompts' token cache, kept verbatim here to time and check the
new one against), alternating in one process, after a warm-up of each, ``--repeats`` times each at
each ``--threads``. "new" is a run's evaluation with its prompts encoded already (every budget point
after the first), "new-cold" the first (the token cache emptied first). Prints the median seconds of
each, per problem (held-out, gsm and math problems together), and the ratio old / new; and whether
the two paths' metrics and greedy completions are identical (the run stops if they are not).
``--models`` adds checkpoints (a trained policy: longer completions, so more decoding) evaluated on
the M setting's sets; ``--sets heldout`` times the held-out set alone (a budget point's evaluation).

``python -m paper_repro.bench ladder``: what the budget ladder adds to a full-budget run
(:func:`bench_ladder`): the same run of budget C with its ladder (its points below C, C/8 to C/2, the native
reward at each point) and without, alternating on one torch thread; the median seconds of each and the share
added.

``python -m paper_repro.bench eval-noise``: how noisy a run's evaluation on 300 problems is
(:func:`bench_eval_noise`, ``NOISE_BLOCK``). ``--seeds`` runs (default 6) of one stage A cell (``--policy`` M,
``--cell`` r50: reward ``sparse``, target rho 0.50) are trained as the study trains them, at the full
budget without the ladder; each trained policy is evaluated, as a run's evaluation is (greedy, the
profile's decoder), on the three disjoint blocks of 300 problems of the 900-problem held-out and
gsm sets (rows 0-299, 300-599 and 600-899; the first was the study's whole evaluation when the noise was
measured, before the study moved to all 900). From each target's seed x block table, a
two-way random-effects ANOVA (:func:`eval_noise_components`) splits the evaluation noise at 300
problems into the part shared by the cell's seeds (the block's own difficulty) and the part each
run has of its own, and says which share of the seed variance the study sees at 300 problems is
evaluation noise. Prints a table and writes ``data/results/cpu-tiny/eval_noise.csv`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from paper_repro.devices import matmul_peak_flops
from paper_repro.testbed import POLICIES


@dataclass(frozen=True)
class LedgerBench:
    hidden: int = 96
    layers: int = 3
    prompts: int = 8  # P prompts per step
    generations: int = 8  # G completions per prompt (all kept)
    max_completion_length: int = 24
    steps: int = 6  # optimizer steps per run
    repeats: int = 5  # runs of each trainer, alternating


def _prompts(n: int):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": f"{i % 17}+{(7 * i) % 9}*{i % 5}="} for i in range(n)])


def _digit_reward(completions, **kwargs):
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def _run(trainer_cls: type, cfg: LedgerBench, workdir: str, **extra: Any) -> tuple[float, Any]:
    from peft import LoraConfig
    from trl import GRPOConfig

    from paper_repro.testbed import ModelSpec, build_tokenizer, random_model

    args = GRPOConfig(
        output_dir=workdir,
        per_device_train_batch_size=cfg.prompts * cfg.generations,
        num_generations=cfg.generations,
        max_completion_length=cfg.max_completion_length,
        max_steps=cfg.steps,
        learning_rate=1e-3,
        report_to="none",
        logging_steps=10_000,
        save_strategy="no",
        use_cpu=True,
        seed=0,
        disable_tqdm=True,
        # TRL's default (on), by its current name: left unset, TRL's `gradient_checkpointing=True`
        # default goes through transformers' deprecated alias and warns on every config
        activation_checkpointing=True,
    )
    tokenizer = build_tokenizer()
    spec = ModelSpec("bench", hidden=cfg.hidden, intermediate=2 * cfg.hidden + 16, layers=cfg.layers)
    trainer = trainer_cls(
        # eager attention, as in the ledger tests (FlopCounterMode cannot see the CPU sdpa kernel)
        model=random_model(spec, tokenizer, attn_implementation="eager"),
        reward_funcs=_digit_reward,
        args=args,
        train_dataset=_prompts(cfg.prompts * cfg.steps * 2),
        processing_class=tokenizer,
        peft_config=LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", lora_dropout=0.0),
        **extra,
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # the end-of-run metrics dump would only be noise here
    start = time.perf_counter()
    trainer.train()
    return time.perf_counter() - start, trainer


def bench_ledger(cfg: LedgerBench) -> dict[str, Any]:
    from transformers.utils import logging as hf_logging
    from trl import GRPOTrainer

    from paper_repro.ledger import LedgerGRPOTrainer

    hf_logging.set_verbosity_error()
    plain, ledger, summaries = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        _run(GRPOTrainer, cfg, tmp)  # warm-up: imports, allocator, thread pools
        for _ in range(cfg.repeats):
            plain.append(_run(GRPOTrainer, cfg, tmp)[0])
            seconds, trainer = _run(LedgerGRPOTrainer, cfg, tmp)
            ledger.append(seconds)
            summaries.append(trainer.ledger.summary())
    peak = matmul_peak_flops()
    ratios = [b / a for a, b in zip(plain, ledger, strict=True)]
    last = summaries[-1]
    secs, executed = last["seconds"], last["executed"]
    return {
        "config": asdict(cfg),
        "plain_seconds": plain,
        "ledger_seconds": ledger,
        "median_ratio": statistics.median(ledger) / statistics.median(plain),
        "median_of_paired_ratios": statistics.median(ratios),
        "matmul_peak_flops_per_s": peak,
        "generation_flops_per_s": executed["C_search"] / secs["search"],
        "update_flops_per_s": executed["C_learning"] / secs["learning"],
        "rho_flops": last["useful"]["rho"],
        "rho_time": last["rho_time"],
        "torch_threads": torch.get_num_threads(),
    }


# --------------------------------------------------------------------------------- whole runs

# Stage A cells of the committed study: r15 is the most search-heavy (K=2 of G=24), r90 the most
# update-heavy (K=G=8, mu=3; P=4 for L)
RUN_CELLS = ("r15", "r90")
RUN_SIZES = tuple(POLICIES)  # every policy size of the testbed
PATHS = ("old", "new")
PARTS = ("search", "learning", "reward", "train_other", "evaluation", "setup", "total")
# printed beside each path's seconds: what the run bought with its budget
RUN_FACTS = ("rounds", "C_total", "rho", "native_reward")


def old_path(spec):
    """``spec`` on the path before the throughput work: HF generate, TRL's padded update."""
    import dataclasses

    return dataclasses.replace(
        spec,
        eval_decoding="exact",
        train=dataclasses.replace(spec.train, generation="hf", update_layout="padded"),
        runtime=dataclasses.replace(spec.runtime, sampler="hf"),
    )


def _breakdown(row: dict[str, Any]) -> dict[str, float]:
    f = {k: float(row[k]) for k in ("seconds_search", "seconds_learning", "seconds_reward", "seconds_train",
                                    "seconds_eval", "seconds_total")}  # fmt: skip
    return {
        "search": f["seconds_search"],
        "learning": f["seconds_learning"],
        "reward": f["seconds_reward"],
        "train_other": f["seconds_train"] - f["seconds_search"] - f["seconds_learning"] - f["seconds_reward"],
        "evaluation": f["seconds_eval"],
        "setup": f["seconds_total"] - f["seconds_train"] - f["seconds_eval"],
        "total": f["seconds_total"],
    }


def bench_runs(
    sizes: tuple[str, ...] = RUN_SIZES, cells: tuple[str, ...] = RUN_CELLS, repeats: int = 1, seed: int = 0
) -> dict[str, Any]:
    """Old and new path on each (size, cell), alternating, ``repeats`` times each, one torch thread."""
    import shutil
    from pathlib import Path

    from paper_repro import study
    from paper_repro.evaluate import base_metrics
    from paper_repro.spec import setting_specs
    from paper_repro.train import run_cell
    from paper_repro.trainer import load_parts

    torch.set_num_threads(1)
    profile = study.prepare("cpu-tiny")
    out: dict[str, Any] = {"cells": {}, "torch_threads": 1, "repeats": repeats}
    with tempfile.TemporaryDirectory() as tmp:
        base = _base_folder(Path(tmp))

        def run(spec, path: str, tag: str) -> dict[str, Any]:
            root = Path(tmp) / tag
            root.mkdir()
            # the base policy's metrics: evaluated once per study, not per run
            shutil.copy(base / "base_metrics.csv", root / "base_metrics.csv")
            return run_cell(old_path(spec) if path == "old" else spec, root, threads=1, raise_errors=True)

        specs = {  # a run of budget C without its ladder, as before the ladder (bench_ladder times it)
            (size, cell): _plain(setting_specs(profile, size, [seed], cells=[cell], extend=False)[0])
            for size in sizes
            for cell in cells
        }
        for spec in {s.policy: s for s in specs.values()}.values():  # each path's base metrics, untimed
            for path_spec in (spec, old_path(spec)):
                base_metrics(path_spec, load_parts(path_spec), base)
        first = next(iter(specs.values()))
        run(first, "new", "warmup")  # imports, allocator, tokenizer caches: not any path's cost
        for (size, cell), spec in specs.items():
            seconds: dict[str, list[dict[str, float]]] = {p: [] for p in PATHS}
            rows: dict[str, dict[str, Any]] = {}
            for i in range(repeats):
                order = ("old", "new") if i % 2 == 0 else ("new", "old")
                for path in order:
                    row = run(spec, path, f"{size}-{cell}-{path}-{i}")
                    seconds[path].append(_breakdown(row))
                    rows[path] = row
            medians = {p: {k: statistics.median(b[k] for b in seconds[p]) for k in PARTS} for p in PATHS}
            out["cells"][f"{size}/{cell}"] = {
                "P": spec.P, "G": spec.G, "K": spec.K, "mu": spec.mu,
                "runs": {p: {k: float(rows[p][k]) for k in RUN_FACTS} for p in PATHS},
                "seconds": medians, "ratio": medians["old"]["total"] / medians["new"]["total"],
            }  # fmt: skip
    cells_out = out["cells"].values()
    out["ratio_of_totals"] = sum(c["seconds"]["old"]["total"] for c in cells_out) / sum(
        c["seconds"]["new"]["total"] for c in cells_out
    )
    out["median_ratio"] = statistics.median(c["ratio"] for c in cells_out)
    return out


def print_runs(result: dict[str, Any]) -> None:
    head = " ".join(f"{k:>10}" for k in PARTS)
    print(f"seconds per run, median of {result['repeats']}, one torch thread")
    print(f"{'cell':<8} {'P G K mu':<12} {'path':<4} {head}")
    for name, cell in result["cells"].items():
        layout = f"{cell['P']} {cell['G']} {cell['K']} {cell['mu']}"
        for path in PATHS:
            vals = " ".join(f"{cell['seconds'][path][k]:10.2f}" for k in PARTS)
            print(f"{name:<8} {layout:<12} {path:<4} {vals}")
        facts = "; ".join(
            f"{p}: {r['rounds']:.0f} rounds, C_total {r['C_total']:.3g}, rho {r['rho']:.3f}, "
            f"native {r['native_reward']:.3f}"
            for p, r in cell["runs"].items()
        )
        print(f"{'':<8} {'':<12} old/new total {cell['ratio']:.2f}x  ({facts})")
    print(
        f"ratio old/new: {result['ratio_of_totals']:.2f}x over the summed runs, "
        f"median over cells {result['median_ratio']:.2f}x"
    )


# ----------------------------------------------------------------------------- evaluation


def reference_sample(model, tokenizer, prompts, config) -> list[list[str]]:
    """:func:`paper_repro.evaluate.sample` as it was before ``lean_generate(trim=True)`` and
    :func:`paper_repro.sampler.tokens.encode` (the old path of ``bench eval``, kept verbatim)."""
    from paper_repro.sampler import lean_generate, unsupported

    rows = [p for p in prompts for _ in range(config.n)]
    texts: list[str] = []
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(config.seed)
    tokenizer.padding_side = "left"
    greedy = config.temperature == 0
    fused = config.sampler == "fused"
    lean = config.sampler in ("lean", "fused") and unsupported(model, fused=fused) is None
    try:
        model.eval()
        with torch.inference_mode():
            for start in range(0, len(rows), config.batch_size):
                if lean:
                    batch_rows = rows[start : start + config.batch_size]
                    ids = tokenizer(batch_rows, add_special_tokens=False)["input_ids"]
                    eos = tokenizer.eos_token_id
                    completion_ids = lean_generate(
                        model, ids, max_new_tokens=config.max_new_tokens, do_sample=not greedy,
                        temperature=None if greedy else config.temperature, top_k=None, top_p=None,
                        eos_token_ids=eos if isinstance(eos, list) else [eos],
                        pad_token_id=tokenizer.pad_token_id, compact=greedy, fused=fused,
                    )  # fmt: skip
                    texts.extend(tokenizer.batch_decode(completion_ids, skip_special_tokens=True))
                    continue
                batch = tokenizer(
                    rows[start : start + config.batch_size],
                    return_tensors="pt",
                    padding=True,
                    add_special_tokens=False,
                ).to(model.device)
                out = model.generate(
                    **batch,
                    do_sample=not greedy,
                    temperature=None if greedy else config.temperature,
                    top_p=None,
                    top_k=None,
                    max_new_tokens=config.max_new_tokens,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                )
                completion_ids = out[:, batch["input_ids"].shape[1] :]
                texts.extend(tokenizer.batch_decode(completion_ids, skip_special_tokens=True))
    finally:
        torch.random.set_rng_state(generator_state)
    return [texts[i * config.n : (i + 1) * config.n] for i in range(len(prompts))]


def reference_evaluate_policy(
    model, tokenizer, sets, reward, judge, task_grader, config, render=None
) -> dict:
    """:func:`paper_repro.evaluate.evaluate_policy` as it was, on :func:`reference_sample` (kept verbatim)."""
    import numpy as np

    from paper_repro.evaluate import columns_of

    render = render or (lambda e: e.prompt)
    out: dict[str, float] = {}
    greedy = {}
    for name, examples in (("heldout", sets.heldout), ("gsm", sets.gsm), ("math", sets.math)):
        prompts = [render(e) for e in examples]
        greedy[name] = [c[0] for c in reference_sample(model, tokenizer, prompts, config)] if prompts else []
    held = list(sets.heldout)
    scores = reward(prompts=[e.prompt for e in held], completions=greedy["heldout"], **columns_of(held))
    out["native_reward"] = float(np.mean(scores)) if scores else float("nan")
    for name in ("gsm", "math"):
        examples = list(getattr(sets, name))
        rows = [{"answer": e.answer, **e.meta} for e in examples]
        right = [task_grader.is_correct(c, r) for c, r in zip(greedy[name], rows, strict=True)]
        out[f"{name}_pass1"] = float(np.mean(right)) if right else float("nan")
    gsm = list(sets.gsm)
    judged = judge.score(
        [e.prompt for e in gsm], greedy["gsm"], [{"answer": e.answer, **e.meta} for e in gsm]
    )
    out["judge_score"] = float(np.mean(judged)) if judged else float("nan")
    return out


def _eval_config(spec):
    from paper_repro.evaluate import SampleConfig

    return SampleConfig(
        max_new_tokens=spec.eval_max_new_tokens,
        batch_size=spec.eval_batch_size,
        seed=spec.seed,
        sampler=spec.decoder("evaluation"),
    )


def _render(spec, parts):
    from paper_repro.tasks.hub import format_prompt

    return (lambda e: format_prompt(parts.tokenizer, e)) if spec.train.chat_template else None


def reference_evaluate_run(spec, parts, model) -> dict[str, float]:
    """:func:`paper_repro.evaluate.evaluate_run` on the old path (:func:`reference_evaluate_policy`)."""
    return reference_evaluate_policy(
        model, parts.tokenizer, parts.eval_sets, parts.reward, parts.judge, parts.grader,
        _eval_config(spec), render=_render(spec, parts),
    )  # fmt: skip


EVAL_PATHS = ("old", "new", "new-cold")


def _same_completions(spec, parts, model) -> bool:
    """Whether the two paths' greedy completions of every evaluation set are identical."""
    from paper_repro.evaluate import sample

    config, render = _eval_config(spec), _render(spec, parts) or (lambda e: e.prompt)
    for examples in (parts.eval_sets.heldout, parts.eval_sets.gsm, parts.eval_sets.math):
        prompts = [render(e) for e in examples]
        if prompts and sample(model, parts.tokenizer, prompts, config) != reference_sample(
            model, parts.tokenizer, prompts, config
        ):
            return False
    return True


def _same_metrics(a: dict[str, float], b: dict[str, float]) -> bool:
    """Bit for bit (a set left out is NaN in both)."""
    return a.keys() == b.keys() and all((math.isnan(a[k]) and math.isnan(b[k])) or a[k] == b[k] for k in a)


def _evaluate(path: str, spec, parts, model) -> dict[str, float]:
    from paper_repro.evaluate import evaluate_run
    from paper_repro.sampler import tokens

    if path == "old":
        return reference_evaluate_run(spec, parts, model)
    if path == "new-cold":
        tokens.clear()
    return evaluate_run(spec, parts, model)


def bench_eval(
    sizes: tuple[str, ...] = RUN_SIZES,
    models: tuple[str, ...] = (),
    repeats: int = 5,
    threads: tuple[int, ...] = (1,),
    sets: str = "all",
    limit: int | None = None,
) -> dict[str, Any]:
    """Old and new evaluation of each policy (``sizes``, then the checkpoints ``models`` on the M
    setting's sets), alternating, ``repeats`` times each path at each thread count."""
    from paper_repro import study

    profile = study.prepare("cpu-tiny")
    out: dict[str, Any] = {"policies": {}, "repeats": repeats, "sets": sets}
    before = torch.get_num_threads()
    try:
        _bench_eval(out, profile, sizes, models, repeats, threads, sets, limit)
    finally:
        torch.set_num_threads(before)
    return out


def _bench_eval(out, profile, sizes, models, repeats, threads, sets, limit) -> None:
    import dataclasses

    from paper_repro.evaluate import EvalSets
    from paper_repro.spec import setting_specs
    from paper_repro.trainer import load_parts

    targets = [(size, size, None) for size in sizes] + [(path, "M", path) for path in models]
    for label, setting, checkpoint in targets:
        spec = setting_specs(profile, setting, 1, cells=["r50"])[0]
        parts = load_parts(spec)
        model = parts.model
        if checkpoint is not None:
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(checkpoint).to(parts.model.device)
        cut = {k: list(getattr(parts.eval_sets, k))[:limit] for k in ("heldout", "gsm", "math")}
        if sets == "heldout":
            cut["gsm"], cut["math"] = [], []
        parts = dataclasses.replace(parts, eval_sets=EvalSets(**cut))
        problems = sum(len(v) for v in cut.values())
        for n in threads:
            torch.set_num_threads(n)
            metrics = {path: _evaluate(path, spec, parts, model) for path in EVAL_PATHS}  # warm-up
            identical = (
                _same_metrics(metrics["old"], metrics["new"])
                and _same_metrics(metrics["old"], metrics["new-cold"])
                and _same_completions(spec, parts, model)
            )
            if not identical:
                raise AssertionError(f"{label}: the new evaluation differs from the old one: {metrics}")
            seconds: dict[str, list[float]] = {p: [] for p in EVAL_PATHS}
            for i in range(repeats):
                order = EVAL_PATHS[i % 3 :] + EVAL_PATHS[: i % 3]
                for path in order:
                    t0 = time.perf_counter()
                    _evaluate(path, spec, parts, model)
                    seconds[path].append(time.perf_counter() - t0)
            medians = {p: statistics.median(v) for p, v in seconds.items()}
            out["policies"][f"{label}/{n}"] = {
                "policy": label, "threads": n, "problems": problems, "seconds": seconds,
                "median": medians, "ms_per_problem": {p: 1e3 * m / problems for p, m in medians.items()},
                "ratio": medians["old"] / medians["new"], "ratio_cold": medians["old"] / medians["new-cold"],
                "identical": identical, "metrics": metrics["new"],
            }  # fmt: skip


def print_eval(result: dict[str, Any]) -> None:
    print(
        f"a run's evaluation ({result['sets']} sets), median of {result['repeats']} alternating repeats; "
        f"ms per problem in brackets"
    )
    head = " ".join(f"{p:>18}" for p in EVAL_PATHS)
    print(f"{'policy':<22} {'thr':>3} {'problems':>8} {head} {'old/new':>8} {'old/new-cold':>12}  identical")
    for cell in result["policies"].values():
        vals = " ".join(f"{cell['median'][p]:8.3f}s ({cell['ms_per_problem'][p]:5.3f})" for p in EVAL_PATHS)
        print(
            f"{cell['policy'][-22:]:<22} {cell['threads']:>3} {cell['problems']:>8} {vals} "
            f"{cell['ratio']:7.2f}x {cell['ratio_cold']:11.2f}x  {'yes' if cell['identical'] else 'NO'}"
        )


def _base_folder(tmp):
    """``tmp/base`` with the committed base metrics (when there are any): the base policies are
    evaluated once per study, never inside a timed run."""
    import shutil

    from paper_repro.paths import repo_root

    committed = repo_root() / "data" / "results" / "cpu-tiny" / "base_metrics.csv"
    base = tmp / "base"
    base.mkdir()
    if committed.exists():
        shutil.copy(committed, base / "base_metrics.csv")
    return base


def _plain(spec):
    """``spec`` without its budget ladder (the same run: :mod:`paper_repro.ladder`)."""
    import dataclasses

    return dataclasses.replace(spec, ladder=(), ladder_unit=None)


# ---------------------------------------------------------------------------------------- the ladder

LADDER_CELLS = ("M/r40", "M/r66", "L/r50")  # full-budget runs of a cheap, a mid and a dear cell


def bench_ladder(cells: tuple[str, ...] = LADDER_CELLS, repeats: int = 3, seed: int = 0) -> dict[str, Any]:
    """What the budget ladder adds to a full-budget run (:mod:`paper_repro.ladder`): each size/cell's
    run of budget C as the study runs it, with its ladder (its points below C, C/8 to C/2, the native
    reward's held-out set at each point) and without, alternating, ``repeats`` times each, one torch thread, after a
    warm-up run; the medians. Both compute the same run (``tests/test_ladder.py``): the difference is
    the points' evaluations, each on a merged copy of the policy."""
    import shutil
    from pathlib import Path

    from paper_repro import study
    from paper_repro.evaluate import base_metrics
    from paper_repro.ladder import curves_table
    from paper_repro.spec import setting_specs
    from paper_repro.train import run_cell
    from paper_repro.trainer import load_parts

    torch.set_num_threads(1)
    profile = study.prepare("cpu-tiny")
    out: dict[str, Any] = {"cells": {}, "torch_threads": 1, "repeats": repeats}
    with tempfile.TemporaryDirectory() as tmp:
        base = _base_folder(Path(tmp))
        pairs = {}
        for name in cells:
            size, cell = name.split("/")
            spec = setting_specs(profile, size, [seed], cells=[cell], extend=False)[0]
            pairs[name] = {"ladder": spec, "plain": _plain(spec)}
        for spec in {p["plain"].policy: p["plain"] for p in pairs.values()}.values():
            base_metrics(spec, load_parts(spec), base)  # once per study, not per run: untimed

        def run(spec, tag: str) -> dict[str, float]:
            root = Path(tmp) / tag
            root.mkdir()
            shutil.copy(base / "base_metrics.csv", root / "base_metrics.csv")
            row = run_cell(spec, root, threads=1, raise_errors=True)
            points = [p for p in curves_table(root).rows() if p["final"] == "False" and p["status"] == "ok"]
            return {
                "total": float(row["seconds_total"]),
                "evaluation": float(row["seconds_eval"]),
                "points": float(len(points)),
                "points_evaluation": sum(float(p["seconds_eval"]) for p in points),
            }

        run(next(iter(pairs.values()))["ladder"], "warmup")
        for name, pair in pairs.items():
            seconds: dict[str, list[dict[str, float]]] = {"plain": [], "ladder": []}
            for i in range(repeats):
                for kind in ("plain", "ladder") if i % 2 == 0 else ("ladder", "plain"):
                    seconds[kind].append(run(pair[kind], f"{name.replace('/', '-')}-{kind}-{i}"))
            med = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in seconds.items()}
            spec = pair["ladder"]
            out["cells"][name] = {
                "P": spec.P, "G": spec.G, "K": spec.K, "mu": spec.mu, "problems": spec.heldout_limit,
                **med, "added": med["ladder"]["total"] / med["plain"]["total"] - 1,
            }  # fmt: skip
    out["median_added"] = statistics.median(c["added"] for c in out["cells"].values())
    return out


def print_ladder(result: dict[str, Any]) -> None:
    print(f"seconds per full-budget run, median of {result['repeats']}, one torch thread")
    print(
        f"{'cell':<8} {'P G K mu':<12} {'plain':>8} {'ladder':>8} {'points':>7} {'their eval':>11} {'added':>7}"
    )
    for name, c in result["cells"].items():
        layout = f"{c['P']} {c['G']} {c['K']} {c['mu']}"
        print(
            f"{name:<8} {layout:<12} {c['plain']['total']:8.2f} {c['ladder']['total']:8.2f} "
            f"{c['ladder']['points']:7.0f} {c['ladder']['points_evaluation']:11.2f} {c['added']:+7.1%}"
        )
    print(f"the ladder adds {result['median_added']:+.1%} to a full-budget run (median over cells)")


# --------------------------------------------------------------------------- evaluation noise

NOISE_TARGETS = {"native_reward": "heldout", "gsm_pass1": "gsm"}  # target -> the set it is scored on
NOISE_COLUMNS = (
    "target", "policy", "reward_system", "cell", "k", "blocks", "problems_per_block", "mean",
    "per_run_eval_var", "shared_bias_var", "nonshared_eval_var", "seed_var_300", "seed_var_900",
    "true_seed_var", "eval_noise_share_300", "binomial_var_300", "clipped", "df_shared", "df_nonshared",
    "shared_bias_var_raw", "true_seed_var_raw", "block_means", "block0_matches_runs_csv", "scores",
    "seconds", "git_sha", "git_dirty", "created_at",
)  # fmt: skip


def eval_noise_components(scores) -> dict[str, Any]:
    """The evaluation noise in a ``(seeds, blocks)`` table of one cell's scores: seed ``s``'s policy
    scored on block ``b`` of disjoint, equally sized problem blocks. The model is two-way random
    effects without replication, ``y[s, b] = mu + a[s] + c[b] + e[s, b]``: ``a`` the seed's own
    score (what seeds change), ``c`` the block's difficulty (the evaluation bias every seed of the
    cell shares), ``e`` what a run's evaluation adds of its own (the seed x block interaction and
    each problem's chance). With ``MS_seed``, ``MS_block`` and ``MS_res`` the ANOVA mean squares:

    - ``nonshared_eval_var`` = ``MS_res`` (var e);
    - ``shared_bias_var`` = ``(MS_block - MS_res) / seeds`` (var c), clipped at 0;
    - ``true_seed_var`` = ``(MS_seed - MS_res) / blocks`` (var a), clipped at 0;
    - ``per_run_eval_var``: each run's variance between its blocks (ddof 1), averaged over the runs,
      unbiased for var c + var e: the whole evaluation noise of one run on one block;
    - ``seed_var_300``: the variance between seeds on one block (ddof 1), averaged over the blocks,
      unbiased for var a + var e: the seed variance a cell shows on one set of problems (the shared
      bias moves every seed alike);
    - ``seed_var_900``: the variance between seeds of their mean over all blocks (var a + var e / blocks);
    - ``eval_noise_share_300``: ``nonshared_eval_var / seed_var_300``, clipped to [0, 1].

    ``clipped`` names the estimates that came out negative (or a share above 1) and were clipped;
    ``shared_bias_var_raw`` and ``true_seed_var_raw`` are the two before clipping (unbiased)."""
    import numpy as np

    y = np.asarray(scores, dtype=float)
    if y.ndim != 2 or min(y.shape) < 2:
        raise ValueError(f"need a (seeds, blocks) table with at least 2 of each, got shape {y.shape}")
    k, b = y.shape
    grand, seed_means, block_means = y.mean(), y.mean(axis=1), y.mean(axis=0)
    resid = y - seed_means[:, None] - block_means[None, :] + grand
    ms_seed = b * ((seed_means - grand) ** 2).sum() / (k - 1)
    ms_block = k * ((block_means - grand) ** 2).sum() / (b - 1)
    ms_res = (resid**2).sum() / ((k - 1) * (b - 1))
    raw = {"shared_bias_var": (ms_block - ms_res) / k, "true_seed_var": (ms_seed - ms_res) / b}
    seed_var_300 = float(y.var(axis=0, ddof=1).mean())
    share = ms_res / seed_var_300 if seed_var_300 > 0 else float("nan")
    clipped = [name for name, v in raw.items() if v < 0]
    if share > 1:
        clipped.append("eval_noise_share_300")
    return {
        "mean": float(grand),
        "per_run_eval_var": float(y.var(axis=1, ddof=1).mean()),
        "shared_bias_var": float(max(raw["shared_bias_var"], 0.0)),
        "nonshared_eval_var": float(ms_res),
        "seed_var_300": seed_var_300,
        "seed_var_900": float(seed_means.var(ddof=1)),
        "true_seed_var": float(max(raw["true_seed_var"], 0.0)),
        "eval_noise_share_300": float(min(share, 1.0)),
        "clipped": clipped,
        "df_shared": b - 1,  # the shared bias rests on the block means alone
        "df_nonshared": (k - 1) * (b - 1),
        "shared_bias_var_raw": float(raw["shared_bias_var"]),  # before clipping
        "true_seed_var_raw": float(raw["true_seed_var"]),
        "block_means": [float(m) for m in block_means],
    }


def train_policy(spec, base_root, threads: int = 1):
    """``spec``'s run trained as :func:`paper_repro.train.run_cell` trains it (the seed set, the base
    metrics read from ``base_root`` first, the ledger-wrapped trainer to the budget), without
    writing a row: the merged policy and the run's parts."""
    from pathlib import Path

    from transformers import set_seed

    from paper_repro.evaluate import base_metrics
    from paper_repro.trainer import build_trainer, load_parts

    torch.set_num_threads(threads)
    set_seed(spec.seed)
    parts = load_parts(spec)
    base_metrics(spec, parts, base_root)  # a cache read, as in a run (the committed base metrics)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer(spec, parts, Path(tmp) / "steps" / f"{spec.run_id}.jsonl")
        trainer.train()
        policy = trainer.model.merge_and_unload()
    return policy, parts


NOISE_BLOCK = 300  # problems per block: the evaluation size the noise is measured at (the sets hold 900)


def bench_eval_noise(
    k: int = 6,
    policy: str = "M",
    cell: str = "r50",
    blocks: int = 3,
    threads: int = 1,
    block: int = NOISE_BLOCK,
) -> dict[str, Any]:
    """Train ``k`` seeds (0 .. k-1) of stage A's ``policy`` setting's ``cell`` at the full budget
    (no ladder, no extension past C) and evaluate each on ``blocks`` disjoint blocks of ``block``
    problems of the held-out and gsm sets; one row per target (:data:`NOISE_TARGETS`) with
    :func:`eval_noise_components` of its seed x block table. Where the study evaluates ``block``
    problems, block 0 is its evaluation, checked against the committed rows of the same runs."""
    import dataclasses
    from pathlib import Path

    import numpy as np

    from paper_repro import provenance, study
    from paper_repro.evaluate import EvalSets, evaluate_run
    from paper_repro.paths import repo_root
    from paper_repro.spec import setting_specs
    from paper_repro.tasks import load_examples

    started = time.perf_counter()
    profile = study.prepare("cpu-tiny")
    specs = [_plain(s) for s in setting_specs(profile, policy, k, cells=[cell], extend=False)]
    if len(specs) != k:
        raise ValueError(f"cell {cell} of setting {policy} gave {len(specs)} runs for {k} seeds")
    first = specs[0]
    sizes = {"heldout": block, "gsm": block}
    study_sized = first.heldout_limit == block and first.eval_limit == block
    sets = {}
    for name, size in sizes.items():
        sets[name] = load_examples(first.data_map[name], limit=blocks * size)
        if len(sets[name]) < blocks * size:
            raise ValueError(
                f"{first.data_map[name]} holds {len(sets[name])} problems, not {blocks} x {size}"
            )
    committed = _committed_rows(repo_root() / "data" / "results" / profile.name / "runs.csv")
    table = {t: np.full((k, blocks), np.nan) for t in NOISE_TARGETS}
    matches = {t: 0 for t in NOISE_TARGETS}
    known = 0
    with tempfile.TemporaryDirectory() as tmp:
        base = _base_folder(Path(tmp))
        for i, spec in enumerate(specs):
            t0 = time.perf_counter()
            model, parts = train_policy(spec, base, threads)
            t1 = time.perf_counter()
            for j in range(blocks):
                cut = {n: sets[n][j * sizes[n] : (j + 1) * sizes[n]] for n in sizes}
                block = dataclasses.replace(
                    parts, eval_sets=EvalSets(heldout=cut["heldout"], gsm=cut["gsm"], math=())
                )
                metrics = evaluate_run(spec, block, model)
                for target in NOISE_TARGETS:
                    table[target][i, j] = metrics[target]
            row = committed.get(spec.run_id) if study_sized else None
            if row is not None:  # block 0 is the study's evaluation: the same run gives the same numbers
                known += 1
                for target in NOISE_TARGETS:
                    matches[target] += abs(float(row[target]) - table[target][i, 0]) < 1e-9
            scores = ", ".join(f"{t} {' '.join(f'{v:.4f}' for v in table[t][i])}" for t in NOISE_TARGETS)
            print(f"seed {spec.seed}: trained {t1 - t0:.1f}s, evaluated {time.perf_counter() - t1:.1f}s; {scores}",
                  flush=True)  # fmt: skip
            del model, parts
    stamp = provenance.stamp()

    def binary(target: str) -> bool:  # pass@1, and the native reward of the 0/1 rule
        return target.endswith("pass1") or first.reward_system == "sparse"

    rows = []
    for target, set_name in NOISE_TARGETS.items():
        comp = eval_noise_components(table[target])
        p = comp["mean"]
        rows.append({
            "target": target, "policy": policy, "reward_system": first.reward_system, "cell": cell, "k": k,
            "blocks": blocks, "problems_per_block": sizes[set_name], **comp,
            # a 0/1 score's variance on a block of random problems, whatever part of it seeds share
            "binomial_var_300": p * (1 - p) / sizes[set_name] if binary(target) else float("nan"),
            "clipped": ";".join(comp["clipped"]), "block_means": json.dumps([round(m, 6) for m in comp["block_means"]]),
            "block0_matches_runs_csv": f"{matches[target]}/{known}",
            "scores": json.dumps([[round(v, 6) for v in r] for r in table[target].tolist()]),
            "seconds": time.perf_counter() - started, "git_sha": stamp["git_sha"],
            "git_dirty": stamp["git_dirty"], "created_at": stamp["created_at"],
        })  # fmt: skip
    return {"rows": rows, "seeds": [s.seed for s in specs], "run_ids": [s.run_id for s in specs],
            "seconds": time.perf_counter() - started}  # fmt: skip


def _committed_rows(path) -> dict[str, dict[str, str]]:
    """The ``ok`` rows of a committed ``runs.csv`` by run_id (the last one wins), or none."""
    import csv

    if not path.exists():
        return {}
    with path.open(newline="") as f:
        return {r["run_id"]: r for r in csv.DictReader(f) if r.get("status") == "ok"}


def write_eval_noise(rows: list[dict[str, Any]], out) -> None:
    import csv
    from pathlib import Path

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=NOISE_COLUMNS)
        writer.writeheader()
        writer.writerows({c: r[c] for c in NOISE_COLUMNS} for r in rows)
    tmp.replace(out)


def print_eval_noise(result: dict[str, Any]) -> None:
    first = result["rows"][0]
    n = first["problems_per_block"]
    print(
        f"evaluation noise: {first['policy']}/{first['cell']} ({first['reward_system']}), {first['k']} seeds x "
        f"{first['blocks']} blocks of {n} problems; variances in points^2 (sd in points in brackets)"
    )
    cols = (("per_run_eval_var", f"per-run@{n}"), ("shared_bias_var", "shared bias"),
            ("nonshared_eval_var", "non-shared"), ("seed_var_300", f"seed var@{n}"),
            ("seed_var_900", f"seed var@{first['blocks'] * n}"), ("true_seed_var", "true seed"),
            ("binomial_var_300", f"p(1-p)/{n}"))  # fmt: skip
    head = " ".join(f"{label:>15}" for _, label in cols)
    print(f"{'target':<14} {'mean':>6} {head} {'noise share':>11}  block means; block 0 = runs.csv")
    for r in result["rows"]:
        vals = " ".join(
            f"{1e4 * r[c]:7.2f} ({100 * math.sqrt(r[c]):4.2f})" if not math.isnan(r[c]) else f"{'-':>15}"
            for c, _ in cols
        )
        means = ", ".join(f"{m:.3f}" for m in json.loads(r["block_means"]))
        clipped = f"; clipped at 0: {r['clipped']}" if r["clipped"] else ""
        print(
            f"{r['target']:<14} {r['mean']:6.3f} {vals} {r['eval_noise_share_300']:11.0%}  "
            f"{means}; {r['block0_matches_runs_csv']}{clipped}"
        )
    print(
        f"the shared bias rests on {first['df_shared']} degrees of freedom (the block means), the non-shared "
        f"part on {first['df_nonshared']}; noise share = non-shared / seed var@{n}"
    )
    print(f"{result['seconds']:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m paper_repro.bench", description=__doc__)
    parser.add_argument("which", choices=["ledger", "run", "eval", "ladder", "eval-noise"])
    parser.add_argument("--repeats", type=int, default=None, help="default: 5 (ledger, eval), 1 (run)")
    parser.add_argument("--steps", type=int, default=LedgerBench.steps)
    parser.add_argument("--sizes", default=",".join(RUN_SIZES), help="run, eval: policy sizes")
    parser.add_argument("--cells", default=None, help="run: grid cells; ladder: size/cell pairs")
    parser.add_argument("--models", default="", help="eval: checkpoints too, on the M setting's sets")
    parser.add_argument("--threads", default="1", help="eval: torch thread counts; eval-noise: the first")
    parser.add_argument("--sets", choices=["all", "heldout"], default="all", help="eval: the sets")
    parser.add_argument("--limit", type=int, default=None, help="eval: problems per set (default: all)")
    parser.add_argument("--seeds", type=int, default=6, help="eval-noise: runs of the cell (seeds 0..n-1)")
    parser.add_argument("--policy", default="M", help="eval-noise: stage A's setting (a policy label)")
    parser.add_argument("--cell", default="r50", help="eval-noise: the grid cell")
    parser.add_argument(
        "--out", default=None, help="eval-noise: the CSV (default data/results/cpu-tiny/eval_noise.csv)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.which == "eval-noise":
        from transformers.utils import logging as hf_logging

        from paper_repro.paths import repo_root

        hf_logging.set_verbosity_error()
        result = bench_eval_noise(args.seeds, args.policy, args.cell, threads=int(args.threads.split(",")[0]))
        out = args.out or repo_root() / "data" / "results" / "cpu-tiny" / "eval_noise.csv"
        write_eval_noise(result["rows"], out)
        print(json.dumps(result, indent=2, default=str)) if args.json else print_eval_noise(result)
        print(f"wrote {out}")
        return 0
    if args.which == "eval":
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        result = bench_eval(
            tuple(s for s in args.sizes.split(",") if s),
            tuple(m for m in args.models.split(",") if m),
            args.repeats or 5,
            tuple(int(t) for t in args.threads.split(",")),
            args.sets,
            args.limit,
        )
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            print_eval(result)
        return 0
    if args.which == "ladder":
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        cells = tuple(args.cells.split(",")) if args.cells else LADDER_CELLS
        result = bench_ladder(cells, args.repeats or 3)
        print(json.dumps(result, indent=2)) if args.json else print_ladder(result)
        return 0
    if args.which == "run":
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        runs = bench_runs(
            tuple(args.sizes.split(",")),
            tuple((args.cells or ",".join(RUN_CELLS)).split(",")),
            args.repeats or 1,
        )
        if args.json:
            print(json.dumps(runs, indent=2))
        else:
            print_runs(runs)
        return 0
    result = bench_ledger(LedgerBench(repeats=args.repeats or LedgerBench.repeats, steps=args.steps))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    fmt = ", ".join(f"{s:.2f}" for s in result["plain_seconds"])
    print(f"plain GRPOTrainer  s/run: {fmt}")
    fmt = ", ".join(f"{s:.2f}" for s in result["ledger_seconds"])
    print(f"LedgerGRPOTrainer  s/run: {fmt}")
    print(
        f"median wall-time ratio ledger/plain: {result['median_ratio']:.4f} "
        f"(median of paired ratios {result['median_of_paired_ratios']:.4f}; target <= 1.03)"
    )
    peak = result["matmul_peak_flops_per_s"]
    for key, label in (("generation_flops_per_s", "generation"), ("update_flops_per_s", "update")):
        print(
            f"{label:>10}: {result[key] / 1e9:7.3f} GFLOP/s executed = {result[key] / peak:.2%} of matmul peak"
        )
    print(f"matmul peak (fp32, 1024^3, {result['torch_threads']} threads): {peak / 1e9:.1f} GFLOP/s")
    print(f"rho (FLOPs, useful) {result['rho_flops']:.3f} vs rho (wall time) {result['rho_time']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
