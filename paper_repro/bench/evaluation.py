"""``paper-repro bench eval``: a run's greedy evaluation (:func:`paper_repro.run.run_eval.evaluate_run`:
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
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import torch

from paper_repro.bench.common import RUN_SIZES


def reference_sample(model, tokenizer, prompts, config) -> list[list[str]]:
    """:func:`paper_repro.evaluation.evaluate.sample` as it was before ``lean_generate(trim=True)`` and
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
                        model,
                        ids,
                        max_new_tokens=config.max_new_tokens,
                        do_sample=not greedy,
                        temperature=None if greedy else config.temperature,
                        top_k=None,
                        top_p=None,
                        eos_token_ids=eos if isinstance(eos, list) else [eos],
                        pad_token_id=tokenizer.pad_token_id,
                        compact=greedy,
                        fused=fused,
                    )
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
    """:func:`paper_repro.evaluation.evaluate.evaluate_policy` as it was, on :func:`reference_sample` (kept verbatim)."""
    import numpy as np

    from paper_repro.evaluation.evaluate import columns_of

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
    from paper_repro.evaluation.evaluate import SampleConfig

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
    """:func:`paper_repro.run.run_eval.evaluate_run` on the old path (:func:`reference_evaluate_policy`)."""
    return reference_evaluate_policy(
        model,
        parts.tokenizer,
        parts.eval_sets,
        parts.reward,
        parts.judge,
        parts.grader,
        _eval_config(spec),
        render=_render(spec, parts),
    )


EVAL_PATHS = ("old", "new", "new-cold")


def _same_completions(spec, parts, model) -> bool:
    """Whether the two paths' greedy completions of every evaluation set are identical."""
    from paper_repro.evaluation.evaluate import sample

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
    from paper_repro.run.run_eval import evaluate_run
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
    from paper_repro.drivers import study

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

    from paper_repro.evaluation.evaluate import EvalSets
    from paper_repro.run.spec import setting_specs
    from paper_repro.run.trainer import load_parts

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
                "policy": label,
                "threads": n,
                "problems": problems,
                "seconds": seconds,
                "median": medians,
                "ms_per_problem": {p: 1e3 * m / problems for p, m in medians.items()},
                "ratio": medians["old"] / medians["new"],
                "ratio_cold": medians["old"] / medians["new-cold"],
                "identical": identical,
                "metrics": metrics["new"],
            }


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
