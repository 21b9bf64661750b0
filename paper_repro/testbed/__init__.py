"""The cpu-tiny testbed's models: the arith tokenizer, base policies S/M/L and the tiny PRM.

Everything here is built by the repo itself, offline, and saved as HF-format checkpoints under
``data/models/`` (``tokenizer/``, ``policy-S``, ``policy-M``, ``policy-L``, ``prm``), which load
with ``from_pretrained``. Notebook ``00_embedded_models`` calls :func:`build_all`.

**Adding a policy size** is one entry in :data:`POLICIES` (``specs.py``: its architecture and
pretraining steps) and one line under ``policies:`` of ``paper_repro/profiles/cpu-tiny.yaml`` (``XL:
data/models/policy-XL``; stage A takes every policy unless its ``policies:`` list says otherwise).
``make models`` then builds it; the study, the sweep and the analysis read the sizes from the
profile, the benchmarks (:mod:`paper_repro.bench`) from :data:`POLICIES`.

- Policies are Qwen2 causal LMs pretrained with TRL's ``SFTTrainer`` on the arith ``pretrain``
  corpus, whose solutions carry injected step errors, so that they start with room to improve.
- The PRM is a likelihood-reading PRM (:mod:`paper_repro.rewards.likelihood_prm`): a Qwen2 LM,
  larger than the largest policy, trained from scratch on step-labelled solutions the policies never
  see, with the LM loss on the right steps only; a step's score is the probability of its least
  likely token. It keeps the interface of Qwen2.5-Math-PRM: the solution's steps are joined by
  ``<extra_0>`` and the class-1 probability of its two outputs at each separator is that step's
  score. docs/CHOICES.md (*The PRM*) has the trials that led here.

The modules, one job each: :mod:`~paper_repro.testbed.specs` declares the models (sizes, PRM, where
they are saved) and what a build makes (:class:`BuildConfig`), :mod:`~paper_repro.testbed.tokenizer`
builds the tokenizer, :mod:`~paper_repro.testbed.networks` turns a spec into a random Qwen2,
:mod:`~paper_repro.testbed.training` pretrains the policies and trains the PRM,
:mod:`~paper_repro.testbed.evaluation` evaluates a base policy, :mod:`~paper_repro.testbed.prm_profile`
profiles the PRM's errors, and :mod:`~paper_repro.testbed.build` builds it all (:func:`build_all`).
"""

from paper_repro.testbed.build import build_all, results_table, write_error_profile
from paper_repro.testbed.evaluation import evaluate_base
from paper_repro.testbed.networks import non_embedding_params, prm_config, qwen2_config, random_model
from paper_repro.testbed.prm_profile import (
    PRM_POLICY_SAMPLES,
    load_prm,
    policy_samples,
    prm_auroc,
    prm_error_profile,
    prm_summary,
)
from paper_repro.testbed.specs import (
    MODELS_DIR,
    POLICIES,
    PRM,
    PRM_DATA_SEED,
    PRM_ERROR_RATE,
    PRM_LABELS,
    TINY,
    BuildConfig,
    ModelSpec,
    models_dir,
    policy_dir,
    repo_path,
)
from paper_repro.testbed.tokenizer import CHARS, EOS, PAD, SPECIALS, UNK, build_tokenizer, byte_level
from paper_repro.testbed.training import (
    pretrain_policy,
    prm_features,
    prm_training_records,
    tokenize_pairs,
    train_prm,
)

__all__ = [
    "CHARS",
    "EOS",
    "MODELS_DIR",
    "PAD",
    "POLICIES",
    "PRM",
    "PRM_DATA_SEED",
    "PRM_ERROR_RATE",
    "PRM_LABELS",
    "PRM_POLICY_SAMPLES",
    "SPECIALS",
    "TINY",
    "UNK",
    "BuildConfig",
    "ModelSpec",
    "build_all",
    "build_tokenizer",
    "byte_level",
    "evaluate_base",
    "load_prm",
    "models_dir",
    "non_embedding_params",
    "policy_dir",
    "policy_samples",
    "pretrain_policy",
    "prm_auroc",
    "prm_config",
    "prm_error_profile",
    "prm_features",
    "prm_summary",
    "prm_training_records",
    "qwen2_config",
    "random_model",
    "repo_path",
    "results_table",
    "tokenize_pairs",
    "train_prm",
    "write_error_profile",
]
