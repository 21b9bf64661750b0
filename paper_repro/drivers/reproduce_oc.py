"""The operating characteristic of ``paper-repro reproduce``'s rule
(:func:`paper_repro.drivers.reproduce_noise.outcome`), simulated on copies of the committed study whose
truth is known (``paper-repro reproduce --simulate N``):

- **reseeded**: a share of the runs reseeded: each of their metrics moved by a draw of N(0, 2 x its
  setting's seed variance) (two seeds of a cell differ by that much), and each claim's estimate moved by
  N(0, 2 x share x se^2), se its committed 90% interval's half-width / 1.645 (reseeding a share of the
  runs moves a mean of them by that much where all of the interval is seed noise; where part of it is
  recipe variance, which a reseed leaves, the estimate moves less: the simulation then errs towards
  *does not reproduce*); verdicts kept. The truth is *within noise*: how often the rule says so is its
  false alarm rate's complement;
- **effect moved**: the share reseeded as above, and every run of one setting (drawn each time) shifted
  by ``shift`` x its seed SD in every metric, claims untouched: the truth is an effect that moved, and how
  often the rule says *does not reproduce* is its power where no verdict flips;
- **reseeds shifted**: the reseeded runs alone also shifted by ``shift`` seed SDs, all one way (a
  kernel that biases the runs it makes diverge): the same power where few runs differ.

A verdict flipped or an estimate moved outside its interval is *does not reproduce* by the rule's
definition, every time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from paper_repro.common.results import METRICS
from paper_repro.drivers import reproduce_noise as noise

OUTCOMES = {
    "bit_for_bit": noise.BIT_FOR_BIT,
    "within_noise": noise.WITHIN_NOISE,
    "does_not_reproduce": noise.NOT_REPRODUCED,
}
Z90 = 1.6449  # a 90% interval's half-width in standard errors (the claims' intervals are 90%)
# (scenario, share of runs reseeded, shift of one setting in seed SDs): the simulated truths
SCENARIOS = (
    ("copy", 0.0, 0.0),
    ("reseeded", 0.016, 0.0),  # the share docs/MEASUREMENTS.md expects to differ on another machine
    ("reseeded", 0.05, 0.0),
    ("reseeded", 0.25, 0.0),
    ("reseeded", 1.0, 0.0),
    ("effect moved", 0.016, 0.25),
    ("effect moved", 0.016, 0.5),
    ("effect moved", 0.016, 1.0),
    ("reseeds shifted", 0.05, 1.0),  # the differing runs alone moved, all one way
    ("reseeds shifted", 0.05, 2.0),
)


def perturb(
    runs: pd.DataFrame,
    claims: pd.DataFrame,
    spread: pd.DataFrame,
    rng: np.random.Generator,
    share: float,
    shift: float = 0.0,
    scenario: str = "effect moved",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A copy of the committed ``runs`` and ``claims`` (``claims.csv``) with ``share`` of the ok runs
    reseeded and, where ``shift`` is not 0, shifted by ``shift`` seed SDs: one setting's runs
    (``scenario`` "effect moved") or the reseeded runs alone (else); the module's scenarios.
    ``spread``: :func:`paper_repro.drivers.reproduce_noise.seed_spread`."""
    runs, claims = runs.copy(), claims.copy()
    ok = np.flatnonzero(runs["status"].to_numpy() == "ok")
    picked = rng.choice(ok, size=round(share * len(ok)), replace=False)
    sd = spread.reindex(runs["setting"]).fillna(spread.loc["*"])
    moved = None
    if shift and scenario == "effect moved":
        moved = (runs["setting"] == rng.choice(runs["setting"].unique())).to_numpy()
    elif shift:
        moved = picked
    for m in METRICS:
        sigma = sd[m].to_numpy(float)
        values = runs[m].to_numpy(float).copy()
        values[picked] += rng.normal(0.0, np.sqrt(2) * sigma[picked])
        if moved is not None:
            values[moved] += shift * sigma[moved]
        runs[m] = values
    if share > 0:
        se = (claims["ci_high"].astype(float) - claims["ci_low"].astype(float)) / (2 * Z90)
        step = rng.normal(0.0, 1.0, len(claims)) * np.sqrt(2 * share) * se.fillna(0.0)
        claims["our_value"] = claims["our_value"].astype(float) + step.to_numpy()
    return runs, claims


def judge(
    runs: pd.DataFrame,
    claims: pd.DataFrame,
    new_runs: pd.DataFrame,
    new_claims: pd.DataFrame,
    spread: pd.DataFrame,
) -> tuple[str, bool]:
    """The rule's outcome for a recomputed study (``new_runs``, ``new_claims``) against the committed one
    (no stage E tables), and whether a metric's differing runs were beyond the seed spread."""
    from paper_repro.common.rowdiff import beyond, differences

    equal = not beyond(differences(runs[runs["status"] == "ok"], new_runs)).to_numpy().any()
    checks = noise.noise_checks(runs, new_runs, spread)
    claim_rows = noise.claim_checks(claims, new_claims, "claims.csv")
    tables = pd.DataFrame(columns=["table", "differing"])
    return noise.outcome(equal, False, checks, claim_rows, tables)[0], bool(checks["beyond"].any())


def simulate(runs: pd.DataFrame, claims: pd.DataFrame, replicates: int, seed: int = 0) -> pd.DataFrame:
    """Per scenario of :data:`SCENARIOS`, the share of ``replicates`` simulated recomputations the rule
    calls each outcome (columns ``bit_for_bit``, ``within_noise``, ``does_not_reproduce``), and the
    share in which the runs alone were beyond the seed spread (``runs_beyond_noise``; the rest of the
    *does not reproduce* is claims' estimates outside their intervals)."""
    rng = np.random.default_rng(seed)
    spread = noise.seed_spread(runs)
    rows = []
    for scenario, share, shift in SCENARIOS:
        said = pd.DataFrame(
            [
                judge(runs, claims, *perturb(runs, claims, spread, rng, share, shift, scenario), spread)
                for _ in range(replicates)
            ],
            columns=["outcome", "beyond"],
        )
        shares = said["outcome"].value_counts() / replicates
        rows.append(
            {"scenario": scenario, "share_reseeded": share, "shift_sd": shift, "replicates": replicates}
            | {key: float(shares.get(words, 0.0)) for key, words in OUTCOMES.items()}
            | {"runs_beyond_noise": float(said["beyond"].mean())}
        )
    return pd.DataFrame(rows)
