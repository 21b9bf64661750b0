"""Checks before compute: everything that would fail later is refused before a run spends a FLOP.

:func:`check_spec` resolves the policy and PRM checkpoints, reads one row of every dataset, and
prices the budget against one round: the planner's first round, and with the ``ceiling`` budget stop
the costliest round the run could meet (:func:`round_ceiling`). Needs tokenizers and data, never
weights.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from paper_repro import models, rewards

if TYPE_CHECKING:  # a spec's own module calls this one (the grid keeps the cells that buy a round)
    from paper_repro.spec import RunSpec


def check_spec(spec: RunSpec) -> None:
    """Raise a clear error for anything that would fail later: a missing checkpoint or dataset,
    a budget below one round. Costs no FLOPs (hub checkpoints are resolved from the local cache)."""
    from paper_repro.tasks import load_examples

    models.checkpoint(spec.model)
    if spec.prm is not None:
        models.checkpoint(spec.prm)
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


def round_ceiling(spec: RunSpec) -> float:
    """The most one generation round of ``spec`` can cost (useful FLOPs): the longest training prompt
    and every completion at ``max_completion_length``. The PRM reads the prompt (in its own format)
    and the completion's steps, a separator after each: with the arith task's character tokens a
    step and its separator take no more tokens than the step and its newline, so at most one more
    than the completion; with a BPE tokenizer, re-tokenised steps may take more, so twice it.
    Needs tokenizers and data only, no weights.

    The study's price of a round, which decides which cells a budget's grid keeps and the ledger's
    ``round_ceiling_flops``, equals the price the ledger's trainer puts on the same round itself
    (:meth:`paper_repro.ledger.pricing.RoundPricing.price_round_ceiling`), as
    ``tests/test_train.py`` checks; both are :func:`paper_repro.flops.grpo_step_cost`. A price is
    computed once per (model, PRM, data, training recipe, cell, reward) in a process."""
    return _round_ceiling(
        spec.model, spec.prm, spec.data_map["train"], spec.train, spec.P, spec.G, spec.K, spec.mu,
        spec.reward_system, spec.task,
    )  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _round_ceiling(model, prm_model, train_data, t, P, G, K, mu, reward_system, task) -> float:
    from paper_repro.allocation import planner

    longest = _longest_prompt(model, train_data, t.chat_template, "policy")
    completion = t.max_completion_length
    prm, reward_tokens = None, None
    system = rewards.get(reward_system)
    if system.prm_based:
        prm = prm_model
        prompt_part = _longest_prompt(prm_model, train_data, False, "prm")
        reward_tokens = prompt_part + (completion + 1 if task == "arith" else 2 * completion)
    own = system.own_cost  # a reward that prices its own model, at the policy's token counts
    worst = planner(
        model, prm, t, longest, completion, reward_tokens=reward_tokens,
        reward_cost=own.planned if own is not None else None,
    )  # fmt: skip
    return worst.round_cost(P, G, K, mu).C_total


@functools.lru_cache(maxsize=32)
def _longest_prompt(model: str, data: str, chat: bool, reader: str) -> int:
    """Tokens of the longest training prompt as ``reader`` sees it: the policy (plain or through its
    chat template) or the PRM (its own input form, with no steps yet)."""
    from transformers import AutoTokenizer

    from paper_repro.rewards.prm_scorer import input_format
    from paper_repro.tasks import load_examples
    from paper_repro.tasks.hub import format_prompt

    local = models.checkpoint(model)
    tokenizer = AutoTokenizer.from_pretrained(local, trust_remote_code=True)
    examples = load_examples(data)
    if reader == "prm":
        fmt = input_format(local, tokenizer)
        texts = [fmt(e.prompt, []) for e in examples]
    else:
        texts = [format_prompt(tokenizer, e) if chat else e.prompt for e in examples]
    return max(len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"])
