"""The regime claims: the paper's rho* claims asked as contrasts a study of this size can decide, and
"allocation matters", each declared in the registry and simulated by the design simulator.

**Regime contrasts** (:func:`regime`). The paper puts rule-based rewards' optimum at rho* ~ 0.72
(update-heavy) and PRM-style rewards' at 0.445 (search-heavy). Per setting, the contrast is the mean
native reward of its cells in the **update-heavy window** ``0.72 +- margins.rho`` minus the mean of
its cells in the **search-heavy window** ``0.445 +- margins.rho``; a class's contrast is the mean of
its settings' (a setting with an empty window is left out, and named). The paper's direction is
positive for rule-based rewards and negative for PRM-style ones; the **interaction** ("PRM-style
rho* is lower than rule-based") is the rule-based settings' mean contrast minus the PRM-style ones',
on the settings of one policy (the middle policy), positive in the paper's direction.

Each is estimated at two levels (:mod:`paper_repro.analysis.stats.contrasts`), labelled on its row:
*these recipes* (the cells as run; seed noise only, paired by seed) and *any recipe at this rho*
(each cell also a draw of the recipes that realise its rho: the REML recipe SD of
:mod:`paper_repro.analysis.stats.mixed` in the standard error and its df in Satterthwaite's).

**The rule** (:func:`paper_repro.analysis.stats.contrasts.directional_verdict`), on the contrast signed
so that the paper's direction is positive, with its 90% t interval ``[L, U]`` (each side a one-sided
test at 5%): **held** when ``L > 0``; **not held** when ``U < margins.regime`` (no advantage as large
as the margin in the paper's direction is left open: a flat frontier or the reverse); inconclusive
otherwise. Without noise it is held exactly when the contrast has the paper's sign.

**Allocation matters** (:func:`allocation`), per distinct setting, with the cells as run: every pair
of cells' difference in native reward, paired by seed (seeds are blocks: the two-way model's residual
variance, ``(k - 1)(n - 1)`` df). A setting *matters* when some pair's 95% interval, Bonferroni over
every pair of every setting, lies wholly beyond ``margins.allocation``; it is *flat* when every pair's
90% interval lies inside ``+-margins.allocation`` (two one-sided tests per pair at 5%, all of which
must pass: an intersection-union test). Held when some setting matters (the allocation matters
somewhere, at 5% over the whole study), not held when every setting is flat, inconclusive otherwise.

The ±0.10 windows on the best-cell sets (:mod:`paper_repro.analysis.claims.frontier`) stay beside
these as descriptions: which cells could be best.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from paper_repro.analysis.claims.paper import PRM_STYLE_RHO, RULE_BASED_RHO
from paper_repro.analysis.claims.registry import Simulated, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.contrasts import (
    ANY,
    THESE,
    Grid,
    contrast,
    directional_verdict,
    window_weights,
)
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.config import Margins

TARGET = "native_reward"
CONFIDENCE = 0.90  # the contrast's two-sided interval: each side a one-sided test at 5%
ALLOCATION_ALPHA = 0.05


def windows(m: Margins) -> tuple[tuple[float, float], tuple[float, float]]:
    """The paper's update-heavy and search-heavy windows in rho."""
    return (RULE_BASED_RHO - m.rho, RULE_BASED_RHO + m.rho), (PRM_STYLE_RHO - m.rho, PRM_STYLE_RHO + m.rho)


def setting_weights(
    cell_rho: dict[str, dict[str, float]], names: Sequence[str], m: Margins, sign: float
) -> tuple[dict, list[str]]:
    """Per setting of ``names`` (``cell_rho``: per setting, each cell's realised rho), its cells'
    weights in the class contrast (update-heavy window minus search-heavy, times ``sign``, divided by
    the settings that have both windows), and the settings left out for an empty window."""
    up, down = windows(m)
    per, missing = {}, []
    for name in names:
        w = window_weights(cell_rho.get(name, {}), up, down)
        if w:
            per[name] = w
        else:
            missing.append(name)
    return {s: {c: sign * v / len(per) for c, v in w.items()} for s, w in per.items()}, missing


def regime(
    study: Study,
    plus: Sequence[str],
    minus: Sequence[str] = (),
    level: str = ANY,
    sign: float = 1.0,
    target: str = TARGET,
    confidence: float = CONFIDENCE,
) -> Result:
    """The contrast "update-heavy minus search-heavy" of ``target`` (a column of the grid runs) over
    the settings ``plus`` (minus that over ``minus``: the interaction), times ``sign`` (the paper's
    direction positive), decided at ``level`` by the module's rule (``confidence``: its interval's)."""
    m = study.margins
    weights, missing = setting_weights(study.cell_rho, plus, m, sign)
    if minus:
        other, gone = setting_weights(study.cell_rho, minus, m, -sign)
        weights, missing = {**weights, **other}, missing + gone
        if not other:
            weights = {}
    if not weights:
        return Result(note=f"no setting has cells in both windows ({', '.join(missing) or 'no settings'})")
    tau, tau_df = study.grid.recipe_sd(m, target), study.grid.recipe_df(m, target)
    est = contrast(study.grids(target), target, weights, tau, tau_df)[level]
    if not np.isfinite(est.value):
        return Result(note="a setting lacks seeds in a window's cells")
    verdict, low, high = directional_verdict(est, m.regime, confidence)
    note = (
        f"{level}: {est.value:+.3f} (se {est.se:.3f}, {est.df:.1f} df, {'paired by seed' if est.paired else 'unpaired'}"
        f"{f', recipe SD {tau:.3f}' if level == ANY else ''}) over {', '.join(weights)}"
        + (f"; left out (a window empty): {', '.join(missing)}" if missing else "")
    )
    # a contrast between 0 and the margin: held (it is positive) and not held (below the margin) are both right
    grey = "not held" if verdict == "held" and 0 < est.value < m.regime else ""
    grey = grey or ("held" if verdict == "not held" and 0 < est.value < m.regime else "")
    return Result(est.value, low, high, verdict, note, also=grey)


def regime_claim(study: Study, claim: str, level: str = ANY, confidence: float = CONFIDENCE) -> Result:
    """The paper's regime claim ``claim`` (a key of :data:`QUESTIONS`: ``rule_based``, ``prm_style`` or
    ``interaction``) on ``study`` at ``level``, decided with a ``confidence`` interval (the registered
    rows use :data:`CONFIDENCE`; a rule over several of them may ask for a wider one)."""
    c = study.classes
    if claim == "rule_based":
        return regime(study, c.rule_based, level=level, confidence=confidence)
    if claim == "prm_style":
        return regime(study, c.prm_style, level=level, sign=-1.0, confidence=confidence)
    if claim == "interaction":
        return regime(study, c.middle_rule, c.middle_prm, level=level, confidence=confidence)
    raise ValueError(f"unknown regime claim {claim!r}: one of {', '.join(QUESTIONS)}")


def allocation(study: Study, names: Sequence[str] | None = None) -> Result:
    """ "Allocation matters" (the module's rule) over the distinct settings ``names``."""
    from scipy.stats import t as student

    m = study.margins
    names = list(names if names is not None else study.classes.distinct)
    grids = study.grids(TARGET)
    parts = {s: _pairwise(grids[s]) for s in names if s in grids}
    parts = {s: p for s, p in parts.items() if p is not None}
    if not parts:
        return Result(note="no setting with two cells on two shared seeds")
    pairs = sum(len(d) for d, _, _ in parts.values())
    matters, flat, widest = [], [], NAN
    for s, (d, se, df) in parts.items():
        union = float(student.ppf(1 - ALLOCATION_ALPHA / (2 * pairs), df)) * se  # Bonferroni: every pair
        each = float(student.ppf(1 - ALLOCATION_ALPHA, df)) * se  # TOST per pair (intersection-union)
        if np.any(np.abs(d) - union > m.allocation):
            matters.append(s)
        elif np.all(np.abs(d) + each < m.allocation):
            flat.append(s)
        widest = np.nanmax([widest, float(np.max(np.abs(d)))])
    n = len(parts)
    verdict = "held" if matters else "not held" if len(flat) == n else "inconclusive"
    note = (
        f"matters in {len(matters)} of {n} settings ({', '.join(matters) or 'none'}), flat in {len(flat)} "
        f"({', '.join(flat) or 'none'})"
    )
    return Result(widest, verdict=verdict, note=note)


def _pairwise(grid: Grid) -> tuple[np.ndarray, float, float] | None:
    """One setting's pairwise differences of cell means on the seeds every cell ran, the se of one
    (the additive cell + seed model's residual variance) and its df; None with under two cells or
    seeds."""
    count = grid.count
    full = (count > 0).all(axis=1)
    y = grid.total[full] / count[full]
    n, k = y.shape
    if k < 2 or n < 2:
        return None
    resid = y - y.mean(axis=0) - y.mean(axis=1, keepdims=True) + y.mean()
    df = (k - 1) * (n - 1)
    s2 = float(np.sum(resid**2)) / df
    mean = y.mean(axis=0)
    i, j = np.triu_indices(k, 1)
    return mean[i] - mean[j], float(np.sqrt(2 * s2 / n)), float(df)


# ---------------------------------------------------------------------------------------- words


def regime_words(m: Margins, level: str, what: str) -> str:
    (u0, u1), (d0, d1) = windows(m)
    recipe = (
        "seed noise only, the cells as run"
        if level == THESE
        else "seed noise plus the REML recipe SD per cell (any recipe realising the cell's rho), Satterthwaite df over both"
    )
    return (
        f"{what}: per setting, mean native reward of its cells with realised rho in [{u0:.3g}, {u1:.3g}] "
        f"(update-heavy) minus those in [{d0:.3g}, {d1:.3g}] (search-heavy), paired by seed; {recipe}; "
        f"held if the 90% interval lies above 0 in the paper's direction, not held if it lies below "
        f"+{m.regime:g} (no advantage of {m.regime:g} or more left open), inconclusive otherwise "
        f"(our_value: the contrast, the paper's direction positive; level: {level})"
    )


def allocation_words(m: Margins) -> str:
    return (
        "per distinct setting, every pair of cells' native-reward difference paired by seed (cell + seed "
        "model's residual variance): a setting matters if some pair's 95% interval (Bonferroni over every "
        f"pair of every setting) lies beyond {m.allocation:g}, is flat if every pair's 90% interval lies inside "
        f"+-{m.allocation:g}; held if some setting matters, not held if every one is flat, inconclusive "
        "otherwise (our_value: the largest difference between two cells of a setting)"
    )


# ---------------------------------------------------------------------------------------- declarations

REGIME_MARGINS = ("rho", "regime", "recipe_sd")
FAMILY = "regime."  # the ids of this module's contrasts begin so (the decisions figure draws them)
_LEVELS = ((ANY, "any", Simulated()), (THESE, "these", Simulated(truth="cells")))

# the paper's three questions, in the README's plain words ({rule}, {prm}: the paper's optima); the
# "any recipe at this rho" level is the one the answer opens with and the design's targets apply to
QUESTIONS = {
    "rule_based": "with rule-based rewards (an exact answer checker), do allocations near the paper's optimum "
    "of {rule} beat those near {prm}?",
    "prm_style": "with PRM-style rewards (a learned model that scores each step), do allocations near {prm} "
    "beat those near {rule}?",
    "interaction": "is the advantage of spending more on updates larger with rule-based rewards than with "
    "PRM-style ones?",
}

for _level, _suffix, _SIM in _LEVELS:
    _tail = f" [{_level}]"
    _asked = _suffix == "any"  # the level the plain answer asks and the design is held to

    @register_claim(
        f"regime.rule_based.{_suffix}",
        question=QUESTIONS["rule_based"] if _asked else "",
        headline="question" if _asked else None,
        design_target=_asked,
        sentence="rule-based rewards: the update-heavy window (rho ~ 0.72) beats the search-heavy (rho ~ 0.445)"
        + _tail,
        kind="paper claim",
        paper="rho_star.rule_based",
        reads=("grid",),
        margins=REGIME_MARGINS,
        unit="native reward: the update-heavy window's cells minus the search-heavy window's, mean over the rule-based settings",
        simulation=_SIM,
        words=lambda s, lv=_level: regime_words(s.margins, lv, "rule-based settings"),
    )
    def _rule(study: Study, level: str = _level) -> Result:
        return regime_claim(study, "rule_based", level)

    @register_claim(
        f"regime.prm_style.{_suffix}",
        question=QUESTIONS["prm_style"] if _asked else "",
        headline="question" if _asked else None,
        design_target=_asked,
        sentence="PRM-style rewards: the search-heavy window (rho ~ 0.445) beats the update-heavy (rho ~ 0.72)"
        + _tail,
        kind="paper claim",
        paper="rho_star.prm_style",
        reads=("grid",),
        margins=REGIME_MARGINS,
        unit="native reward: the search-heavy window's cells minus the update-heavy window's, mean over the PRM-style settings",
        simulation=_SIM,
        words=lambda s, lv=_level: regime_words(s.margins, lv, "PRM-style settings, sign reversed"),
    )
    def _prm(study: Study, level: str = _level) -> Result:
        return regime_claim(study, "prm_style", level)

    @register_claim(
        f"regime.interaction.{_suffix}",
        question=QUESTIONS["interaction"] if _asked else "",
        headline="question" if _asked else None,
        design_target=_asked,
        sentence="PRM-style rho* is lower than rule-based: the update-heavy advantage is larger under rule-based rewards"
        + _tail,
        kind="paper claim",
        paper="rho_star.prm_lower",
        reads=("grid",),
        margins=REGIME_MARGINS,
        unit="native reward: the middle policy's update-heavy advantage (update-heavy minus search-heavy window) under rule-based rewards minus under PRM-style rewards",
        simulation=_SIM,
        words=lambda s, lv=_level: regime_words(
            s.margins,
            lv,
            "the middle policy's rule-based settings' mean contrast minus its PRM-style settings'",
        ),
    )
    def _interaction(study: Study, level: str = _level) -> Result:
        return regime_claim(study, "interaction", level)


@register_claim(
    "allocation.matters",
    question="does the split matter at all (in some setting, one allocation of the same budget beats another by "
    "more than a threshold fixed in advance)?",
    headline="check",
    sentence="allocation matters: in some setting a cell beats another by more than the margin",
    kind="our addition",
    paper="qualitative",
    reads=("grid",),
    margins=("allocation",),
    unit="native reward: the largest difference between two cells of one setting",
    simulation=Simulated(truth="cells"),
    words=lambda s: allocation_words(s.margins),
)
def _allocation(study: Study) -> Result:
    return allocation(study)
