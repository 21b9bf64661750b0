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

* :mod:`~paper_repro.ledger.config`: :class:`LedgerConfig`, the ledger's options, each checked for type
  and range when built, and :class:`BudgetWarning`;
* :mod:`~paper_repro.ledger.core`: the ledger. :func:`forward_pass_work` and :func:`generation_pass_work` (the tokens and attention pairs of one
  pass, counted from its masks and lengths), and :class:`FlopLedger`: FLOPs per component (C_search,
  C_learning, C_reward) under the ``useful`` and ``executed`` conventions, token counts and wall
  seconds per optimizer step, the budget's stop rule, the JSONL log, the summary and the TRL-style
  metrics (:data:`METRIC_NAMES`);
* :mod:`~paper_repro.ledger.trainer`: :class:`LedgerGRPOTrainer`, ``GRPOTrainer`` with hooks that
  charge the ledger, a callback that closes each optimizer step (log line, metrics, budget stop),
  ``state.total_flos``, the compute card and the line that says why a run stopped;
* :mod:`~paper_repro.ledger.trl_core`: :class:`FlopLedgerCoreCallback`, the pull-request-sized core
  (counting, metrics, ``total_flos``, the round budget stop and ``ExportableState`` resume, analytic
  families only), with its hooks in :mod:`~paper_repro.ledger.trl_core_watch` and what it reads of a
  model, a trainer and a call in :mod:`~paper_repro.ledger.trl_core_read`, priced by
  :mod:`paper_repro.accounting.flops`; the full callback runs the same hooks;
* :mod:`~paper_repro.ledger.callback`: :class:`FlopLedgerCallback`, the ledger as a ``TrainerCallback``
  for TRL's ``GRPOTrainer`` and ``RLOOTrainer`` without subclassing (no private TRL names), with the
  hooks on the models that see each pass in :mod:`~paper_repro.ledger.watch`, and what it does with
  each ``LedgerConfig`` field (honoured, or refused with why) in :mod:`~paper_repro.ledger.callback_fields`;
* :mod:`~paper_repro.ledger.resume`: the ledger's state saved with every checkpoint and restored on
  resume, so the budget holds across resumes;
* :mod:`~paper_repro.ledger.card`: the compute card (FLOPs, seconds, MFU and HFU per phase), with
  :mod:`~paper_repro.ledger.citation` (provenance, hardware, versions) and
  :mod:`~paper_repro.ledger.probes` (the compute dtype each phase ran in, measured);
* :mod:`~paper_repro.ledger.compat`: what is checked when a trainer is built: the TRL release
  (:data:`SUPPORTED_TRL`, every patch of it; an untested one by opt-in), the hooked methods'
  signatures (:data:`HOOKED_METHODS`) and each config in its place;
* :mod:`~paper_repro.ledger.downsample`: K-of-G down-sampling (PODS max-variance selection,
  :func:`max_variance_subset`, or random), the kept rows' advantages and the trimmed batch, and the
  trainer's side of it;
* :mod:`~paper_repro.ledger.pricing`: the costliest generation round priced before any compute
  (:meth:`LedgerGRPOTrainer.price_round_ceiling`), the refusal of a budget below one round, and the
  budget stop (``LedgerConfig.budget_stop``: each next optimizer step priced before it runs);
* :mod:`~paper_repro.ledger.cost_models`: how a model is priced: the analytic FLOP model where it
  knows the model, else by measuring the module (a mixture of experts, another family, a custom model
  type), and reward models from the module that runs; what it cannot price, it says once;
* :mod:`~paper_repro.ledger.kernels`: kernel dispatch, choosing the lean or fused sampler for each
  rollout and the bucketed or fused update for each policy forward (:data:`UPDATE_LAYOUTS`), with
  TRL's own path where they cannot run.

What the ledger counts, its two conventions, the budget contract, its outputs and limits:
``docs/ledger.md``; how it hooks TRL: ``docs/DESIGN.md`` §3.
"""

from paper_repro.common.lazy import lazy_surface

# Each public name and the module that owns it, imported on first use (PEP 562): importing the callback
# loads neither the subclass nor TRL, and importing the ledger installs no log handler and no hook.
OWNERS = {
    "FlopLedgerCallback": ".callback",
    "BudgetSpentError": ".trl_core",
    "CoreLedger": ".trl_core",
    "FlopLedgerCoreCallback": ".trl_core",
    "ALLOW_UNTESTED_TRL_ENV": ".compat",
    "HOOKED_METHODS": ".compat",
    "SUPPORTED_TRL": ".compat",
    "check_config_places": ".compat",
    "check_hooked_methods": ".compat",
    "check_trl": ".compat",
    "BUDGET_STOPS": ".core",
    "COMPONENTS": ".core",
    "METRIC_NAMES": ".core",
    "TOKEN_COUNTS": ".core",
    "BudgetWarning": ".core",
    "Component": ".core",
    "FlopLedger": ".core",
    "LedgerConfig": ".core",
    "as_conventions": ".core",
    "forward_pass_work": ".core",
    "generation_pass_work": ".core",
    "real_rows_work": ".trl_core_read",
    "Downsampling": ".downsample",
    "downsample_batch": ".downsample",
    "group_advantages": ".downsample",
    "max_variance_subset": ".downsample",
    "UPDATE_LAYOUTS": ".kernels",
    "KernelDispatch": ".kernels",
    "check_kernel_choice": ".kernels",
    "RoundPricing": ".pricing",
    "LedgerGRPOTrainer": ".trainer",
}
__getattr__, __dir__ = lazy_surface(__name__, OWNERS)

__all__ = [
    "ALLOW_UNTESTED_TRL_ENV",
    "BUDGET_STOPS",
    "COMPONENTS",
    "HOOKED_METHODS",
    "METRIC_NAMES",
    "SUPPORTED_TRL",
    "TOKEN_COUNTS",
    "UPDATE_LAYOUTS",
    "BudgetSpentError",
    "BudgetWarning",
    "Component",
    "CoreLedger",
    "Downsampling",
    "FlopLedger",
    "FlopLedgerCallback",
    "FlopLedgerCoreCallback",
    "KernelDispatch",
    "LedgerConfig",
    "LedgerGRPOTrainer",
    "RoundPricing",
    "as_conventions",
    "check_config_places",
    "check_hooked_methods",
    "check_kernel_choice",
    "check_trl",
    "downsample_batch",
    "forward_pass_work",
    "generation_pass_work",
    "group_advantages",
    "max_variance_subset",
    "real_rows_work",
]
