"""RACE's same-regime count read against what pilots that carry no information give, declared in the
registry (issue 53).

The paper's RACE picks a regime from cheap pilots; its check is how many settings' pilots name the
regime (the side of the rho threshold their best cell lies on) the full grid names. A count of 4 of
7 says little by itself: where the full grid's best cells fall on both sides about equally, pilots
that know nothing agree about half the time. So the count is read against two simulated
distributions, each per setting from its own cells (their realised rho in the pilots and the full
grid) and the noise its runs show (a cell mean's SD: the setting's cell + seed residual SD over the
square root of its seeds; the seed effect, shared by a seed's cells, does not move which cell is
best):

- **uninformative pilots**: the pilots' cells all equal (their best cell decided by noise alone),
  the full grid's cells about their committed means;
- **the paper's world**: pilots and full grid both peaking at the class's optimum
  (:func:`paper_repro.analysis.claims.paper.paper_world`), as high as the committed cells' median range.

**The rule** (``race.same_regime@<fraction>``): **held** (the pilots name the full grid's regime
more often than uninformative pilots do) when the count's upper tail under uninformative pilots,
``P(count >= observed)``, is below 5%; **not held** (fewer than the paper's world gives) when its
lower tail under the paper's world, ``P(count <= observed)``, is below 5%; inconclusive otherwise.
Its operating characteristics are read off the same two distributions (and the flat world's: every
cell of pilots and full grid equal): held when true is ``P(held | the paper's world)``, not held
when false ``P(not held | flat)``.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.columns import NO_OC
from paper_repro.analysis.claims.paper import paper_world
from paper_repro.analysis.claims.race import pilot_suffix
from paper_repro.analysis.claims.registry import OwnSimulation, Variant, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.contrasts import Grid
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.analysis.tables.race import RegimeThresholds, distinct_rows
from paper_repro.analysis.wording import fraction_words

REGISTERED = "2026-12-05T08:00:00+00:00"  # when this rule was fixed (after the first registered study's runs, before the second's)
TARGET = "native_reward"
ALPHA = 0.05
DRAWS = 4000  # simulated studies per world: a 5% tail to about +-0.7 points
RNG_SEED = 53


def _cells(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, float]:
    """A grid's cells: their mean rho and mean native reward, and the SD of one cell's mean (the cell
    + seed model's residual SD over the root of the seeds)."""
    grid = Grid.of(rows, TARGET)
    full = (grid.count > 0).all(axis=1)
    y = grid.total[full] / grid.count[full]
    n, k = y.shape
    resid = y - y.mean(axis=0) - y.mean(axis=1, keepdims=True) + y.mean() if n >= 2 else np.zeros_like(y)
    sd = float(np.sqrt(np.sum(resid**2) / max((k - 1) * (n - 1), 1) / max(n, 1)))
    rho = rows.groupby("cell")["rho"].mean().reindex(grid.cells).to_numpy(float)
    return rho, y.mean(axis=0) if n else np.full(k, NAN), sd


def layouts(study: Study, fraction: float) -> dict[str, tuple[tuple, tuple]]:
    """Per distinct setting with pilots and full grid: (pilot cells, full cells) as :func:`_cells`."""
    pilots = study.pilots.get(fraction)
    if pilots is None or pilots.empty:
        return {}
    out = {}
    for setting in study.classes.distinct:
        p, f = pilots[pilots["setting"] == setting], study.by_setting.get(setting)
        if len(p) and f is not None and len(f):
            out[setting] = (_cells(p), _cells(f))
    return out


def counts(
    study: Study, fraction: float, world: str, rng: np.random.Generator, draws: int = DRAWS
) -> np.ndarray:
    """``draws`` same-regime counts over the settings in ``world`` ("uninformative", "flat" or
    "paper")."""
    side = (study.thresholds or RegimeThresholds()).rho_threshold
    cells = layouts(study, fraction)
    height = float(np.median([np.ptp(f[1]) for _, f in cells.values()])) if cells else 0.0
    total = np.zeros(draws, dtype=int)
    for setting, ((p_rho, _, p_sd), (f_rho, f_mean, f_sd)) in cells.items():
        kind = "PRM-style" if setting in study.classes.prm_style else "rule-based"
        if world == "paper":
            p_true = height * paper_world(kind, TARGET, p_rho)
            f_true = height * paper_world(kind, TARGET, f_rho)
        else:
            p_true = np.zeros(len(p_rho))
            f_true = f_mean if world == "uninformative" else np.zeros(len(f_rho))
        pick = p_rho[np.argmax(p_true + rng.normal(size=(draws, len(p_rho))) * p_sd, axis=1)] >= side
        best = f_rho[np.argmax(f_true + rng.normal(size=(draws, len(f_rho))) * f_sd, axis=1)] >= side
        total += pick == best
    return total


def _observed(study: Study, fraction: float) -> tuple[int, int]:
    race = study.race
    if not len(race) or "setting" not in race:  # no pilots: nothing to count
        return 0, 0
    race = distinct_rows(race[race["pilot_fraction"] == fraction])
    race = race[race["setting"].isin(list(layouts(study, fraction)))]
    return int(race["same_best_regime"].astype(bool).sum()), len(race)


def _distributions(study: Study, fraction: float) -> dict[str, np.ndarray]:
    cache = study.__dict__.setdefault("_own", {})
    key = ("race null", fraction)
    if key not in cache:
        rng = np.random.default_rng(RNG_SEED)
        cache[key] = {w: counts(study, fraction, w, rng) for w in ("uninformative", "paper", "flat")}
    return cache[key]


def decide_count(count: int, null: np.ndarray, paper: np.ndarray) -> str:
    """The module's rule on one count, given the two worlds' simulated counts."""
    if np.mean(null >= count) < ALPHA:
        return "held"
    if np.mean(paper <= count) < ALPHA:
        return "not held"
    return "inconclusive"


def same_regime(study: Study, fraction: float) -> Result:
    same, n = _observed(study, fraction)
    if n == 0:
        return Result(note="no setting with both pilots and a full grid")
    dist = _distributions(study, fraction)
    null, paper = dist["uninformative"], dist["paper"]
    verdict = decide_count(same, null, paper)
    low, high = np.quantile(null, [0.05, 0.95])
    note = (
        f"{same} of {n} settings' pilots name the full grid's regime; uninformative pilots give "
        f"{null.mean():.1f} on average (90% of draws {low:.0f} to {high:.0f}; P(>= {same}) {np.mean(null >= same):.2f}), "
        f"a flat world {dist['flat'].mean():.1f}, the paper's world {paper.mean():.1f} "
        f"(P(<= {same}) {np.mean(paper <= same):.2f}); {_ratio(null, paper, same)}"
    )
    return Result(float(same), NAN, NAN, verdict, note)


NOTE = re.compile(
    r"(?P<same>\d+) of (?P<settings>\d+) settings' pilots name the full grid's regime; uninformative pilots give "
    r"(?P<null>[\d.]+) on average \(90% of draws [\d.]+ to [\d.]+; P\(>= \d+\) (?P<null_tail>[\d.]+)\), a flat world "
    r"[\d.]+, the paper's world (?P<paper>[\d.]+)"
)


def read_note(note: str) -> dict[str, str]:
    """The numbers :func:`same_regime`'s note states (by name), or {} for another note."""
    m = NOTE.match(note)
    return m.groupdict() if m else {}


def _ratio(null: np.ndarray, paper: np.ndarray, same: int) -> str:
    """How much likelier exactly ``same`` is under uninformative pilots than in the paper's world."""
    a, b = np.mean(null == same), np.mean(paper == same)
    if b == 0:
        return f"exactly {same}: {a:.2f} of uninformative draws, none of the paper's world's {len(paper)}"
    return f"exactly {same} is {a / b:.1f}x as likely under uninformative pilots as in the paper's world"


def operating(study: Study, fraction: float) -> dict:
    dist = _distributions(study, fraction)
    null, paper, flat = dist["uninformative"], dist["paper"], dist["flat"]
    if not len(null):
        return {**NO_OC, "oc_note": "not simulated: no pilots", "power_now": NAN}

    def shares(sample: np.ndarray) -> dict[str, float]:
        v = np.array([decide_count(int(c), null, paper) for c in np.unique(sample)])
        weight = np.array([np.mean(sample == c) for c in np.unique(sample)])
        return {k: float(weight[v == k].sum()) for k in ("held", "not held", "inconclusive")}

    p, f = shares(paper), shares(flat)
    return {
        "oc_wrong_max": max(p["not held"], f["held"]),
        "oc_wrong_truth": "the paper's world" if p["not held"] >= f["held"] else "flat",
        "oc_agreement_min": min(sum(v**2 for v in s.values()) for s in (p, f)),
        "oc_held_when_true": p["held"],
        "oc_not_held_when_false": f["not held"],
        "oc_note": f"{DRAWS} simulated studies per world, each setting's cells and noise as committed: the paper's "
        f"world held {p['held']:.2f}, not held {p['not held']:.2f}; flat held {f['held']:.2f}, not held "
        f"{f['not held']:.2f} (wrong: not held in the paper's world, held in a flat one)",
        "power_now": p["held"],
        "seeds_for_80pct_power": NAN,
        "power_note": "held in the paper's world at the study's seeds and settings (other designs not simulated)",
    }


def _variants(study: Study) -> list[Variant]:
    return [Variant(pilot_suffix(f), {"fraction": f}, {"fraction": fraction_words(f)}) for f in study.pilots]


RULE = (
    "the paper's same-regime count (settings whose pilots' best cell lies on the full grid's best cell's side of "
    "the rho threshold) against simulated counts: held if uninformative pilots (pilot cells all equal, each "
    "setting's noise) reach it in under 5% of draws; not held if the paper's world (a peak at the class's "
    "optimum) gives it or fewer in under 5%; inconclusive otherwise (our_value: the count)"
)


@register_claim(
    "race.same_regime",
    sentence="RACE's {fraction}-budget pilots name the full grid's regime more often than uninformative pilots",
    kind="paper claim",
    paper="race.pilots",
    reads=("race", "grid"),
    unit="settings whose pilots' best cell lies on the full grid's best cell's side of the rho threshold",
    simulation=OwnSimulation(
        lambda s, fraction: operating(s, fraction), "uninformative pilots, the paper's world, flat"
    ),
    variants=_variants,
    registered=REGISTERED,
    words=lambda s, fraction: RULE,
)
def _same_regime(study: Study, fraction: float) -> Result:
    return same_regime(study, fraction)
