"""paper-repro: where should RL post-training compute go? (Wilhelm & Kao, 2026, arXiv 2607.13389).

Modules: ``flops`` (analytic FLOP counts), ``ledger`` (a FLOP ledger for TRL's GRPOTrainer).
"""

__version__ = "0.1.0"
