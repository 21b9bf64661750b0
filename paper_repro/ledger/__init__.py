"""A FLOP ledger for TRL's ``GRPOTrainer`` (TRL 1.16): C_search / C_learning / C_reward per step.

Drop it into any GRPO run by swapping the trainer class::

    from paper_repro.ledger import LedgerConfig, LedgerGRPOTrainer

    trainer = LedgerGRPOTrainer(
        model=model, reward_funcs=reward_fn, args=grpo_args, train_dataset=ds, peft_config=lora,
        ledger=LedgerConfig(budget_flops=3e15, log_path="run/ledger.jsonl"),
    )
    trainer.train()
    print(trainer.ledger.summary())

One module per job; every name below is importable from ``paper_repro.ledger`` itself:

* :mod:`~paper_repro.ledger.core`: the ledger. :class:`LedgerConfig` (its options),
  :func:`forward_pass_work` and :func:`generation_pass_work` (the tokens and attention pairs of one
  pass, counted from its masks and lengths), and :class:`FlopLedger`: FLOPs per component (C_search,
  C_learning, C_reward) under the ``useful`` and ``executed`` conventions, token counts and wall
  seconds per optimizer step, the budget's stop rule, the JSONL log, the summary and the TRL-style
  metrics (:data:`METRIC_NAMES`);
* :mod:`~paper_repro.ledger.trainer`: :class:`LedgerGRPOTrainer`, ``GRPOTrainer`` with hooks that
  charge the ledger, a callback that closes each optimizer step (log line, metrics, budget stop),
  ``state.total_flos``, the compute card, and the TRL version check (:data:`SUPPORTED_TRL_VERSIONS`);
* :mod:`~paper_repro.ledger.downsample`: K-of-G down-sampling (PODS max-variance selection,
  :func:`max_variance_subset`, or random), the kept rows' advantages and the trimmed batch, and the
  trainer's side of it;
* :mod:`~paper_repro.ledger.pricing`: the costliest generation round priced before any compute
  (:meth:`LedgerGRPOTrainer.price_round_ceiling`) and the refusal of a budget below one round;
* :mod:`~paper_repro.ledger.kernels`: kernel dispatch, choosing the lean or fused sampler for each
  rollout and the bucketed or fused update for each policy forward (:data:`UPDATE_LAYOUTS`), with
  TRL's own path where they cannot run.

What the ledger counts, its two conventions, the budget contract, its outputs and limits:
``docs/ledger.md``; how it hooks TRL: ``docs/DESIGN.md`` §3.
"""

from paper_repro.ledger.core import (
    COMPONENTS,
    METRIC_NAMES,
    TOKEN_COUNTS,
    Component,
    FlopLedger,
    LedgerConfig,
    as_conventions,
    forward_pass_work,
    generation_pass_work,
    real_rows_work,
)
from paper_repro.ledger.downsample import (
    Downsampling,
    downsample_batch,
    group_advantages,
    max_variance_subset,
)
from paper_repro.ledger.kernels import UPDATE_LAYOUTS, KernelDispatch, check_kernel_choice
from paper_repro.ledger.pricing import RoundPricing
from paper_repro.ledger.trainer import SUPPORTED_TRL_VERSIONS, LedgerGRPOTrainer, check_trl_version

__all__ = [
    "COMPONENTS",
    "METRIC_NAMES",
    "SUPPORTED_TRL_VERSIONS",
    "TOKEN_COUNTS",
    "UPDATE_LAYOUTS",
    "Component",
    "Downsampling",
    "FlopLedger",
    "KernelDispatch",
    "LedgerConfig",
    "LedgerGRPOTrainer",
    "RoundPricing",
    "as_conventions",
    "check_kernel_choice",
    "check_trl_version",
    "downsample_batch",
    "forward_pass_work",
    "generation_pass_work",
    "group_advantages",
    "max_variance_subset",
    "real_rows_work",
]
