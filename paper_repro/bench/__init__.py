"""Benchmarks (``make bench`` runs them all), one module a subcommand of ``paper-repro bench``:

- :mod:`~paper_repro.bench.ledger` (``ledger``): plain ``trl.GRPOTrainer`` against the ledger's trainer;
- :mod:`~paper_repro.bench.runs` (``run``): whole full-budget runs on the old path and the new one;
- :mod:`~paper_repro.bench.evaluation` (``eval``): a run's evaluation on the old path and the new one;
- :mod:`~paper_repro.bench.ladder` (``ladder``): what the budget ladder adds to a full-budget run;
- :mod:`~paper_repro.bench.eval_noise` (``eval-noise``): how noisy a run's evaluation on 300 problems is;
- :mod:`~paper_repro.bench.trl_flops` (``trl-flops``): the ledger's FLOPs beside TRL's, transformers' and
  the profiler's on one run.

:mod:`~paper_repro.bench.common` holds what they share; :mod:`paper_repro.commands.bench` is the
command line (a bench's help is its module's docstring).
"""
