"""``paper-repro bench test-time``: stage E's sampling throughput. ``n`` temperature samples of each of
the first ``problems`` gsm problems from one base policy (default M: 64 x 300, the design's), drawn
as stage E draws them (:func:`paper_repro.evaluation.evaluate.sample_with_lengths`: the fused
decoder, batches of ``batch_size`` sequences, the evaluation's ``max_new_tokens``), ``--repeats``
times after a warm-up at each ``--threads``. Prints the median seconds, samples per second, the mean
tokens generated per sample and the load average beside them (the machine may be shared). The issue's
target: 64 x 300 on M within 60 s on 2 cores."""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

TARGET_SECONDS = 60.0  # stage E's target for the default size (issue 54)


def bench_test_time(
    policy: str = "M",
    n: int = 64,
    problems: int = 300,
    batch_size: int = 4096,
    threads: tuple[int, ...] = (2,),
    repeats: int = 1,
) -> dict[str, Any]:
    """The timings, one dict a thread count (``seconds`` the median of ``repeats``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paper_repro import models
    from paper_repro.config import load_profile
    from paper_repro.drivers.test_time import StageE, sampling_config
    from paper_repro.evaluation.evaluate import sample_with_lengths
    from paper_repro.run.spec import setting_specs
    from paper_repro.tasks import arith

    profile = load_profile("cpu-tiny")
    spec = setting_specs(profile, policy, 1, "full")[0]
    path = models.checkpoint(spec.model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    prompts = [e.prompt for e in arith.load_split("gsm_tiny")[:problems]]
    config = sampling_config(spec, StageE(n=n, problems=problems, batch_size=batch_size))
    rows = []
    for t in threads:
        torch.set_num_threads(t)
        sample_with_lengths(model, tokenizer, prompts[:8], config)  # warm-up
        seconds, tokens = [], 0.0
        for _ in range(repeats):
            t0 = time.perf_counter()
            _, lengths = sample_with_lengths(model, tokenizer, prompts, config)
            seconds.append(time.perf_counter() - t0)
            tokens = sum(map(sum, lengths)) / (len(prompts) * n)
        median = statistics.median(seconds)
        rows.append(
            {
                "policy": policy,
                "threads": t,
                "samples": len(prompts) * n,
                "seconds": median,
                "samples_per_second": len(prompts) * n / median,
                "mean_tokens": tokens,
                "load_average": os.getloadavg()[0],
                "within_target": median <= TARGET_SECONDS,
            }
        )
    return {"rows": rows, "target_seconds": TARGET_SECONDS}


def print_test_time(result: dict[str, Any]) -> None:
    for r in result["rows"]:
        print(
            f"{r['policy']}: {r['samples']} samples in {r['seconds']:.1f} s at {r['threads']} thread(s) "
            f"({r['samples_per_second']:.0f}/s, {r['mean_tokens']:.1f} tokens each; load average "
            f"{r['load_average']:.2f}); target {result['target_seconds']:.0f} s: "
            f"{'met' if r['within_target'] else 'missed'}"
        )
