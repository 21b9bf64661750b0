"""Profiles and stages: what a study runs, read from small YAML files in ``paper_repro/profiles/``.

A **profile** (``cpu-tiny``, ``gpu-paper``) names the policies, the PRM, the data, the training
hyperparameters, the budgets, the allocation grid, and the study's design: which **settings** each
**stage** holds. A setting is one (policy, reward system) pair whose IsoFLOP frontier the study
measures. The stages are the paper's (:data:`STAGES`); what is in them is the profile's ``stages:``

| stage | settings | policy | reward system |
|---|---|---|---|
| ``A`` | one per policy size (``stages.A.policies``, default all) | each size | ``stages.A.reward`` |
| ``B`` | one per reward system in ``stages.B.rewards`` | ``stages.B.policy`` | the setting's |
| ``D`` | one per reward system in ``stages.D.rewards`` (the real PRM) | ``stages.D.policy`` | the setting's |

A setting is named by its size label in stage A and by its reward system in B and D; the names are
unique over the profile, so a name alone finds its setting (:meth:`Profile.setting`). Stage A's
middle-size setting and stage B's ``sparse`` setting are the same experiment; a run is identified by
what it computes (its ``run_id``), so it runs once and serves both.

The modules: :mod:`~paper_repro.config.sections` holds the dataclass of each section of a profile
(``train``, ``grid``, ``resources``, ``estimate``, ``curves``, ``margins``) and the stages' design
(:data:`STAGES`, :class:`StageDesign`, :class:`Setting`); :mod:`~paper_repro.config.profile` the
:class:`Profile` itself and quick mode; :mod:`~paper_repro.config.loading` reads a profile's YAML
(:func:`load_profile`). Import from here: ``from paper_repro.config import Margins``.
"""

from paper_repro.config.loading import changes_from_shipped, load_profile
from paper_repro.config.profile import (
    PROFILE_DIR,
    QUICK_BUDGET_SCALE,
    QUICK_CELLS,
    QUICK_EVAL_LIMIT,
    Profile,
    profile_names,
)
from paper_repro.config.sections import (
    STAGES,
    Curves,
    Estimate,
    Grid,
    Margins,
    PredictedLengths,
    Resources,
    Setting,
    StageDesign,
    TrainConfig,
)

__all__ = [
    "PROFILE_DIR",
    "QUICK_BUDGET_SCALE",
    "QUICK_CELLS",
    "QUICK_EVAL_LIMIT",
    "STAGES",
    "Curves",
    "Estimate",
    "Grid",
    "Margins",
    "PredictedLengths",
    "Profile",
    "Resources",
    "Setting",
    "StageDesign",
    "TrainConfig",
    "changes_from_shipped",
    "load_profile",
    "profile_names",
]
