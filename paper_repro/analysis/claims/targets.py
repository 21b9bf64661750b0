"""Target disagreement asked as contrasts of the regime contrast between targets, on the same runs,
declared in the registry (issue 53).

**The contrast** (``targets.<pair>.<class>.<level>``): per run, the difference of two targets' scores
(native reward minus the judge's, gsm pass@1 minus the judge's, native minus gsm pass@1); its regime
contrast (:func:`paper_repro.analysis.claims.regimes.regime`: per setting, the update-heavy window's
cells minus the search-heavy window's, paired by seed) over the rule-based settings, the PRM-style
ones or all of them, at both levels (these recipes; any recipe at this rho, with the REML recipe SD
of the difference). It is the first target's update-heavy advantage minus the second's: differencing
within a run pairs the targets (they correlate 0.85-0.92 within a run), so the seed noise they share
cancels.

**"The targets disagree"** is two-sided: **held** when the 95% interval excludes 0 (2.5% a side:
the targets prefer different windows by some amount), **not held** when the 90% interval lies inside
``+-margins.regime`` (two one-sided tests at 5%: any disagreement is smaller than a window contrast
the study calls an advantage), **inconclusive** otherwise.

**The paper's form** (``targets.pass1_high_judge_mid.<level>``): "for dense and PRM rewards, pass@1
prefers a high-update cell and the judge a mid-update one", asked as the gsm pass@1 minus judge
regime contrast over the process-reward settings (dense and the PRM-style ones), positive in the
paper's direction, by the regime claims' directional rule (held when the 90% interval lies above 0,
not held when it lies below ``+margins.regime``).

**How often they err**: grid studies of the difference with the committed layout and its own seed
blocks, residual noise and recipe SD (:mod:`paper_repro.analysis.claims.worlds`), in three worlds: the
**observed** cell means of the difference, **no disagreement** (every cell of a setting at its mean:
the targets move together) and **the paper's** (native reward peaking at its class's optimum, pass@1
rising with the update share, the judge peaking mid-update:
:func:`paper_repro.analysis.claims.paper.paper_world`, each as high as the observed native cells'
median range).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from paper_repro.analysis.claims import worlds
from paper_repro.analysis.claims.paper import paper_world
from paper_repro.analysis.claims.regimes import CONFIDENCE, regime
from paper_repro.analysis.claims.registry import OwnSimulation, Simulated, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.contrasts import ANY, THESE
from paper_repro.analysis.stats.mixed import DIGITS
from paper_repro.analysis.stats.verdict import Result

REGISTERED = "2026-12-05T08:00:00+00:00"  # when these rules were fixed (after the first registered study's runs, before the second's)
PAIRS = {  # id -> (first target, second target, words)
    "native_judge": ("native_reward", "judge_score", "native reward minus the judge"),
    "gsm_judge": ("gsm_pass1", "judge_score", "gsm pass@1 minus the judge"),
    "native_gsm": ("native_reward", "gsm_pass1", "native reward minus gsm pass@1"),
}
CLASSES = {
    "rule_based": "the rule-based settings",
    "prm_style": "the PRM-style settings",
    "pooled": "every setting",
}
LEVELS = {ANY: "any", THESE: "these"}
HELD_CONFIDENCE = 0.95  # "the targets disagree" is two-sided: 2.5% a side
PAPER_FORM = "gsm_judge"  # the paper's "pass@1 high-update, judge mid-update"


def column(pair: str) -> str:
    return f"{pair} difference"


def differences(study: Study) -> Study:
    """``study`` with each pair's per-run difference as a column (built once per study)."""
    cache = study.__dict__.setdefault("_own", {})
    if "targets" not in cache:
        rows = study.grid_rows
        # a simulated study draws the differences themselves: they are kept
        extra = {
            column(p): rows[a] - rows[b]
            for p, (a, b, _) in PAIRS.items()
            if column(p) not in rows and a in rows and b in rows
        }
        cache["targets"] = replace(study, grid_rows=rows.assign(**extra))
    return cache["targets"]


def settings(study: Study, of: str) -> tuple[str, ...]:
    c = study.classes
    return {"rule_based": c.rule_based, "prm_style": c.prm_style, "pooled": c.distinct, "process": c.process}[
        of
    ]


def disagree(study: Study, pair: str, of: str, level: str) -> Result:
    """The two-sided rule on the pair's regime contrast over the class ``of``: held when its 95%
    interval excludes 0 (5% in all, as a two-sided claim needs), not held when its 90% interval lies
    inside ``+-margins.regime`` (two one-sided tests at 5%), inconclusive otherwise; the row's interval
    is the 90% one."""
    m = study.margins
    view, names, target = differences(study), settings(study, of), column(pair)
    base = regime(view, names, level=level, target=target)
    if not np.isfinite(base.value):
        return base
    wide = regime(view, names, level=level, target=target, confidence=HELD_CONFIDENCE)
    low, high = base.low, base.high
    apart = wide.low > 0 or wide.high < 0
    verdict = "held" if apart else "not held" if -m.regime < low and high < m.regime else "inconclusive"
    # a difference between 0 and the margin: held (it is not 0) and not held (it is small) are both right
    grey = 0 < abs(base.value) < m.regime and verdict in ("held", "not held")
    also = ("not held" if verdict == "held" else "held") if grey else ""
    note = f"{base.note}; 95% interval {wide.low:+.3f} to {wide.high:+.3f}"
    return _same_bytes(Result(base.value, low, high, verdict, note, also=also))


def _same_bytes(result: Result) -> Result:
    """``result`` with its estimate and interval rounded to :data:`~paper_repro.analysis.stats.mixed.DIGITS`
    decimals, as the REML fit rounds its recipe SD: a difference of two targets has a recipe SD near 0,
    where two CPUs' kernels move the any-recipe interval in its eighth digit (measured:
    ``tests/test_determinism.py``); rounded, every CPU writes the same bytes."""
    return replace(
        result,
        value=round(result.value, DIGITS),
        low=round(result.low, DIGITS),
        high=round(result.high, DIGITS),
    )


def paper_form(study: Study, level: str) -> Result:
    """The paper's "pass@1 high-update, judge mid-update" over the process-reward settings."""
    return _same_bytes(
        regime(differences(study), settings(study, "process"), level=level, target=column(PAPER_FORM))
    )


# ---------------------------------------------------------------------------------------- simulation


def _decides() -> dict:
    out = {
        f"targets.{p}.{c}.{s}": (lambda st, p=p, c=c, lv=lv: disagree(st, p, c, lv), lv == THESE)
        for p in PAIRS
        for c in CLASSES
        for lv, s in LEVELS.items()
    }
    for lv, s in LEVELS.items():
        out[f"targets.pass1_high_judge_mid.{s}"] = (lambda st, lv=lv: paper_form(st, lv), lv == THESE)
    return out


def _shares(study: Study) -> dict:
    cache = study.__dict__.setdefault("_own", {})
    if "targets simulated" not in cache:
        view = differences(study)
        native = worlds.cell_means(view, "native_reward")
        high = worlds.height(native)
        prm = set(view.classes.prm_style)
        world: dict[str, dict] = {"observed": {}, "no disagreement": {}, "the paper's": {}}
        for p, (a, b, _) in PAIRS.items():
            observed = worlds.cell_means(view, column(p))

            def shape(setting: str, rho: np.ndarray, a=a, b=b) -> np.ndarray:
                kind = "PRM-style" if setting in prm else "rule-based"
                return paper_world(kind, a, rho) - paper_world(kind, b, rho)

            world["observed"][column(p)] = observed
            world["no disagreement"][column(p)] = worlds.flat(observed)
            world["the paper's"][column(p)] = worlds.shaped(view, shape, high, observed)
        cache["targets simulated"] = worlds.simulate(view, _decides(), world)
    return cache["targets simulated"]


def operating(study: Study, claim_id: str) -> dict:
    return worlds.columns(
        claim_id,
        _shares(study)[claim_id],
        "observed",
        "observed, no disagreement, the paper's",
        study.replicates or worlds.REPLICATES,
    )


TRUTHS = (
    "the per-run target difference's cell means as observed, with no disagreement (flat), and in the paper's "
    "world; the committed layout, seed blocks, residual noise and recipe SD of the difference"
)

# ---------------------------------------------------------------------------------------- declarations


def disagree_words(study: Study, pair: str, of: str, level: str) -> str:
    m = study.margins
    return (
        f"per run, {PAIRS[pair][2]}; its regime contrast (update-heavy window minus search-heavy, per setting, "
        f"paired by seed) over {CLASSES[of]} [{level}]: held if the {HELD_CONFIDENCE:.0%} interval excludes 0 (the "
        f"targets prefer different windows), not held if the {CONFIDENCE:.0%} interval lies inside +-{m.regime:g}, inconclusive otherwise "
        "(our_value: the first target's update-heavy advantage minus the second's)"
    )


def _register(claim_id: str, sentence: str, paper: str, unit: str, words, decide) -> None:
    """Declare one of the module's claims: a paper claim on the grid runs, simulated by
    :func:`operating` in :data:`TRUTHS`, its rule fixed at :data:`REGISTERED`; ``decide(study)``."""
    register_claim(
        claim_id,
        sentence=sentence,
        kind="paper claim",
        paper=paper,
        reads=("grid",),
        margins=("rho", "regime", "recipe_sd"),
        unit=unit,
        simulation=OwnSimulation(
            lambda s: operating(s, claim_id),
            TRUTHS,
            # the design simulator draws every target, so candidate designs can be compared on it
            design=Simulated(truth="cells" if claim_id.endswith(".these") else "frontier"),
        ),
        registered=REGISTERED,
        words=words,
    )(decide)


for _pair, (_, _, _what) in PAIRS.items():
    for _of in CLASSES:
        for _level, _suffix in LEVELS.items():
            _register(
                f"targets.{_pair}.{_of}.{_suffix}",
                f"the targets disagree: {_what} prefer different windows over {CLASSES[_of]} [{_level}]",
                "targets_disagree",
                f"{_what}: the regime contrast (update-heavy minus search-heavy window) of the per-run difference, "
                "mean over the settings",
                lambda s, p=_pair, o=_of, lv=_level: disagree_words(s, p, o, lv),
                lambda study, p=_pair, o=_of, lv=_level: disagree(study, p, o, lv),
            )


def _paper_words(study: Study, level: str) -> str:
    m = study.margins
    return (
        "per run, gsm pass@1 minus the judge; its regime contrast over the process-reward settings (dense and "
        f"PRM-style) [{level}], positive when pass@1 prefers the update-heavy window more than the judge does: "
        f"held if the 90% interval lies above 0, not held if it lies below +{m.regime:g}, inconclusive otherwise"
    )


for _level, _suffix in LEVELS.items():
    _register(
        f"targets.pass1_high_judge_mid.{_suffix}",
        f"for dense and PRM rewards, pass@1 prefers a high-update allocation and the judge a mid-update one [{_level}]",
        "pass1_vs_judge",
        "gsm pass@1 minus the judge: the regime contrast of the per-run difference over dense and the PRM-style "
        "settings (the paper's direction positive)",
        lambda s, lv=_level: _paper_words(s, lv),
        lambda study, lv=_level: paper_form(study, lv),
    )
