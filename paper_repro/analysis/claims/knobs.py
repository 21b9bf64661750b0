"""Whether rho is the right one-number description of an allocation, declared in the registry
(issue 53): against the single knobs a recipe is set by, and recipe by recipe at equal rho.

**Rho against the knobs** (``rho.describes``). Within each setting, each cell's mean native reward is
predicted from the other cells' by a line in one predictor (leave one cell out): rho, log rounds,
log optimizer steps, G, the kept share K/G, mu, or nothing (the setting's mean). A setting's score
per predictor is the root mean square of its left-out errors; per knob ``k``, ``D[s, k]`` is rho's
score minus the knob's (positive: the knob predicts better). With the settings as units, the mean
``D_k`` over settings and its t interval (``settings - 1`` df): **held** (rho at least as good as
every knob, within the margin) when every knob's one-sided 95% upper bound lies below
``margins.regime`` (an intersection-union test: each at 5%); **not held** when some knob's lower
bound, one-sided at 5% Bonferroni over the knobs, lies above 0 (a knob predicts better); inconclusive
otherwise. The margin is the profile's ``regime`` margin (0.02 native reward): the smallest
difference between allocations the study counts, here on a prediction error.

**At equal rho, per setting** (``recipes.equal_rho.<setting>``), beside the pooled recipe-SD form
(``recipes.rho_suffices``): each pair of recipes of one target rho in the setting (a cell and its
``b``), its difference on the shared seeds with the setting's two-way (cell + seed) residual variance
(``(cells - 1)(seeds - 1)`` df). **Not held** (the recipe matters here) when some pair's two-sided p,
Holm-adjusted over every pair of every setting (the study is the family), is below 5%; **held**
when every pair's 90% interval lies inside ``+-margins.recipe`` (TOST per pair, all of which must
pass); inconclusive otherwise.

**How often they err** (own simulations, with the noise the committed cells show): for rho against
the knobs, the cells' means drawn about three worlds' (each setting's cells on a line in rho:
*rho suffices*; on a line in log rounds: *rounds matter*; the *observed* means) with their seed
noise (the setting's residual variance over its seeds; the seed effect cancels within a setting), the
truth the rule's verdict on the world's own means; for equal rho, the pairs' differences drawn about
*identical recipes* (0), the *observed* differences and *twice the margin*, with the residual
variance drawn from its chi-square.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from paper_repro.analysis.claims.columns import NO_OC
from paper_repro.analysis.claims.registry import OwnSimulation, Variant, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.run.allocation import SECOND_SUFFIX

REGISTERED = "2026-12-05T08:00:00+00:00"  # when these rules were fixed (after the first registered study's runs, before the second's)
TARGET = "native_reward"
ALPHA = 0.05
KNOBS = ("log rounds", "log optimizer steps", "G", "K/G", "mu", "intercept only")
REPLICATES = 400  # simulated studies per world of the equal-rho pairs (a 5% rate to about +-1 point)
DESCRIBE_REPLICATES = 60  # per world of rho against the knobs (each refits every knob per cell)
RNG_SEED = 53

# ---------------------------------------------------------------------------------------- rho vs knobs


def cell_table(study: Study) -> pd.DataFrame:
    """Per distinct setting and cell: mean native reward, seeds, and each predictor."""
    rows = study.distinct
    cells = (
        rows.groupby(["setting", "cell"], sort=False)
        .agg(y=(TARGET, "mean"), n=(TARGET, "count"), rho=("rho", "mean"), rounds=("rounds", "mean"))
        .join(rows.groupby(["setting", "cell"], sort=False)[["steps", "G", "K", "mu"]].mean())
        .reset_index()
    )
    return cells.assign(
        **{
            "log rounds": np.log(cells["rounds"]),
            "log optimizer steps": np.log(cells["steps"]),
            "K/G": cells["K"] / cells["G"],
            "intercept only": 0.0,
        }
    )


def loco_rmse(y: np.ndarray, x: np.ndarray) -> float:
    """The root mean square error of predicting each of ``y`` by a line in ``x`` through the others
    (the mean of the others where ``x`` is constant among them). A left-out residual is the full
    fit's residual over ``1 - h_ii`` (the hat matrix's diagonal), the same number as refitting."""
    y, x = np.asarray(y, float), np.asarray(x, float)
    n = len(y)
    if np.ptp(x) == 0:
        return float(np.sqrt(np.mean(np.square((y - y.mean()) * n / (n - 1)))))
    design = np.column_stack([np.ones(n), x])
    hat = design @ np.linalg.pinv(design)
    h = np.diag(hat)
    resid = y - hat @ y
    alone = np.isclose(h, 1.0)  # the others share one x: the line through them is their mean
    errors = np.where(alone, 0.0, resid / np.where(alone, 1.0, 1.0 - h))
    others = (y.sum() - y) / (n - 1)
    errors = np.where(alone, y - others, errors)
    return float(np.sqrt(np.mean(np.square(errors))))


def knob_gaps(cells: pd.DataFrame, y: str = "y") -> pd.DataFrame:
    """Per setting (rows) and knob (columns): rho's leave-one-cell-out RMSE minus the knob's."""
    out = {}
    for setting, g in cells.groupby("setting", sort=False):
        if len(g) < 4:
            continue
        values = g[y].to_numpy(float)
        base = loco_rmse(values, g["rho"].to_numpy(float))
        out[setting] = {k: base - loco_rmse(values, g[k].to_numpy(float)) for k in KNOBS}
    return pd.DataFrame.from_dict(out, orient="index")


def describes_verdict(gaps: pd.DataFrame, margin: float) -> Result:
    """The rule on per-setting gaps (:func:`knob_gaps`): see the module."""
    s = len(gaps)
    if s < 2:
        return Result(note="fewer than two settings with four cells")
    mean, se = gaps.mean(), gaps.std(ddof=1) / np.sqrt(s)
    upper = mean + stats.t.ppf(1 - ALPHA, s - 1) * se
    lower = mean - stats.t.ppf(1 - ALPHA / len(KNOBS), s - 1) * se
    worst = str(mean.idxmax())
    verdict = "not held" if (lower > 0).any() else "held" if (upper < margin).all() else "inconclusive"
    note = f"over {s} settings, rho's leave-one-cell-out RMSE minus each knob's: " + ", ".join(
        f"{k} {mean[k]:+.3f} (up to {upper[k]:+.3f})" for k in KNOBS
    )
    also = "not held" if verdict == "held" and mean[worst] > 0 else ""
    return Result(float(mean[worst]), float(lower[worst]), float(upper[worst]), verdict, note, also=also)


def describes(study: Study) -> Result:
    cells = cell_table(study)
    gaps = knob_gaps(cells)
    result = describes_verdict(gaps, study.margins.regime)
    rmse = {
        k: float(
            np.sqrt(
                np.mean(
                    [loco_rmse(g["y"].to_numpy(), g[k].to_numpy()) ** 2 for _, g in cells.groupby("setting")]
                )
            )
        )
        for k in ("rho", *KNOBS)
    }
    words = "; pooled RMSE " + ", ".join(f"{k} {v:.3f}" for k, v in rmse.items())
    return Result(
        result.value, result.low, result.high, result.verdict, result.note + words, also=result.also
    )


def _residual(study: Study) -> dict[str, tuple[float, float]]:
    """Per setting, the two-way model's residual variance and its df (seed noise beyond the seed block)."""
    out = {}
    for setting, grid in study.grids(TARGET).items():
        full = (grid.count > 0).all(axis=1)
        y = grid.total[full] / grid.count[full]
        n, k = y.shape
        if n >= 2 and k >= 2:
            resid = y - y.mean(axis=0) - y.mean(axis=1, keepdims=True) + y.mean()
            df = (k - 1) * (n - 1)
            out[setting] = (float(np.sum(resid**2)) / df, float(df))
    return out


def _fitted(cells: pd.DataFrame, x: str, degree: int) -> np.ndarray:
    out = np.empty(len(cells))
    for _, g in cells.groupby("setting", sort=False):
        at = cells.index.get_indexer(g.index)
        out[at] = np.polyval(np.polyfit(g[x], g["y"], degree), g[x])
    return out


def describes_operating(study: Study) -> dict:
    cells = cell_table(study)
    resid = _residual(study)
    sd = np.sqrt([resid.get(s, (0.0, 1.0))[0] for s in cells["setting"]] / cells["n"].to_numpy(float))
    margin, rng = study.margins.regime, np.random.default_rng(RNG_SEED)
    replicates = study.replicates or DESCRIBE_REPLICATES
    worlds = {
        "rho suffices": _fitted(cells, "rho", 1),
        "rounds matter": _fitted(cells, "log rounds", 1),
        "observed": cells["y"].to_numpy(float),
    }
    shares = {}
    for name, mean in worlds.items():
        truth = _truth(knob_gaps(cells.assign(y=mean)).mean().max(), margin)
        verdicts = [
            describes_verdict(
                knob_gaps(cells.assign(y=mean + rng.normal(size=len(mean)) * sd)), margin
            ).verdict
            for _ in range(replicates)
        ]
        shares[name] = _score(verdicts, truth)
    return _columns(shares, "observed", "rho suffices, rounds matter, observed", replicates)


# ---------------------------------------------------------------------------------------- equal rho


@dataclass(frozen=True)
class PairTest:
    setting: str
    first: str
    second: str
    d: float
    se: float
    df: float

    @property
    def p(self) -> float:
        return float(2 * stats.t.sf(abs(self.d) / self.se, self.df)) if self.se > 0 else float(self.d == 0)

    def interval(self, confidence: float = 0.90) -> tuple[float, float]:
        q = float(stats.t.ppf(0.5 + confidence / 2, self.df))
        return self.d - q * self.se, self.d + q * self.se


def pair_tests(study: Study) -> list[PairTest]:
    """Every (cell, cell + b) pair of every distinct setting, on the seeds every cell of it ran."""
    out, resid = [], _residual(study)
    for setting, grid in study.grids(TARGET).items():
        if setting not in resid:
            continue
        full = (grid.count > 0).all(axis=1)
        means = dict(zip(grid.cells, (grid.total[full] / grid.count[full]).mean(axis=0), strict=True))
        s2, df = resid[setting]
        n = int(full.sum())
        for second in sorted(c for c in means if c.endswith(SECOND_SUFFIX)):
            first = second[: -len(SECOND_SUFFIX)]
            if first in means:
                out.append(
                    PairTest(setting, first, second, means[second] - means[first], np.sqrt(2 * s2 / n), df)
                )
    return out


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's adjusted p values along the last axis (step-down, monotone, capped at 1)."""
    p = np.asarray(p, float)
    order = np.argsort(p, axis=-1)
    ranked = np.take_along_axis(p, order, axis=-1)
    adjusted = np.minimum(
        np.maximum.accumulate((p.shape[-1] - np.arange(p.shape[-1])) * ranked, axis=-1), 1.0
    )
    out = np.empty_like(p)
    np.put_along_axis(out, order, adjusted, axis=-1)
    return out


VERDICTS = np.array(["held", "not held", "inconclusive"])


def equal_rho_codes(d: np.ndarray, se: np.ndarray, df: np.ndarray, mine: np.ndarray, margin: float):
    """The per-setting rule on studies x pairs arrays (``d``, ``se``; ``df`` per pair), every pair the
    Holm family: per study, the index in :data:`VERDICTS` of the verdict of the pairs ``mine`` (a
    boolean mask), and the pairs' Holm-adjusted p values."""
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(se > 0, 2 * stats.t.sf(np.abs(d) / se, df), (d == 0).astype(float))
    adjusted = holm(p)
    q = stats.t.ppf(0.95, df) * se
    matters = (adjusted[:, mine] < ALPHA).any(axis=1)
    same = ((np.abs(d) + q)[:, mine] < margin).all(axis=1)
    return np.where(matters, 1, np.where(same, 0, 2)), adjusted


def equal_rho_verdict(tests: list[PairTest], setting: str, margin: float) -> Result:
    """The per-setting rule (see the module) on every pair of the study (the Holm family)."""
    mine = np.array([t.setting == setting for t in tests])
    if not mine.any():
        return Result(note=f"{setting} has no pair of recipes of one rho")
    d, se = np.array([[t.d for t in tests]]), np.array([[t.se for t in tests]])
    codes, adjusted = equal_rho_codes(d, se, np.array([t.df for t in tests]), mine, margin)
    top = max(np.flatnonzero(mine), key=lambda i: abs(tests[i].d))
    lo, hi = tests[top].interval(0.90)
    note = "; ".join(
        f"{t.second} - {t.first}: {t.d:+.3f} (se {t.se:.3f}, {t.df:.0f} df, Holm p {adjusted[0, i]:.3f} over "
        f"{len(tests)} pairs)"
        for i, t in enumerate(tests)
        if mine[i]
    )
    return Result(tests[top].d, lo, hi, str(VERDICTS[codes[0]]), note)


def equal_rho_operating(study: Study, setting: str) -> dict:
    cache = study.__dict__.setdefault("_own", {})
    if "equal rho" not in cache:
        cache["equal rho"] = _equal_rho_shares(study)
    shares = {w: s[setting] for w, s in cache["equal rho"].items() if setting in s}
    replicates = study.replicates or REPLICATES
    return _columns(shares, "observed", "identical recipes, observed, twice the margin", replicates)


def _equal_rho_shares(study: Study) -> dict[str, dict[str, dict]]:
    """Per world, per setting, the shares of its verdicts: each study draws every pair's difference
    about the world's and each setting's residual variance from its chi-square (shared by its pairs)."""
    tests, margin = pair_tests(study), study.margins.recipe
    if not tests:
        return {}
    rng, replicates = np.random.default_rng(RNG_SEED), study.replicates or REPLICATES
    observed = np.array([t.d for t in tests])
    se, df = np.array([t.se for t in tests]), np.array([t.df for t in tests])
    where = np.array([t.setting for t in tests])
    settings = list(dict.fromkeys(where))
    signs = np.where(np.arange(len(tests)) % 2 == 0, 1.0, -1.0)
    worlds = {"identical recipes": 0 * observed, "observed": observed, "twice the margin": 2 * margin * signs}
    out = {}
    for name, delta in worlds.items():
        d = delta + rng.normal(size=(replicates, len(tests))) * se
        scale = {s: rng.chisquare(df[where == s][0], replicates) / df[where == s][0] for s in settings}
        drawn_se = se * np.sqrt(np.column_stack([scale[s] for s in where]))
        out[name] = {}
        for s in settings:
            codes, _ = equal_rho_codes(d, drawn_se, df, where == s, margin)
            out[name][s] = _score(
                list(VERDICTS[codes]), _truth(float(np.abs(delta[where == s]).max()), margin)
            )
    return out


# ---------------------------------------------------------------------------------------- scoring


def _truth(gap: float, margin: float) -> set[str]:
    """The right verdicts where the quantity the rule bounds is ``gap``: held at 0 or below, not held
    at the margin or above, both in between (the rule's grey zone)."""
    return {"held"} if gap <= 1e-12 else {"not held"} if gap >= margin else {"held", "not held"}


def _score(verdicts: list[str], right: set[str]) -> dict:
    v = np.array(verdicts)
    held, refuted = float(np.mean(v == "held")), float(np.mean(v == "not held"))
    decided_wrong = np.isin(v, ["held", "not held"]) & ~np.isin(v, list(right))
    return {
        "held": held,
        "not held": refuted,
        "wrong": float(np.mean(decided_wrong)),
        "held if true": held if right == {"held"} else NAN,
        "not held if false": refuted if right == {"not held"} else NAN,
    }


def _columns(shares: dict[str, dict], observed: str, about: str, replicates: int) -> dict:
    from paper_repro.analysis.claims.worlds import columns

    if not shares:
        return {
            **NO_OC,
            "oc_note": "not simulated: no pair",
            "power_now": NAN,
            "seeds_for_80pct_power": NAN,
            "power_note": "",
        }
    return columns("", shares, observed, about, replicates)


# ---------------------------------------------------------------------------------------- declarations

DESCRIBES_TEST = (
    "within each setting, each cell's mean native reward predicted from the other cells' by a line in one "
    "predictor (rho, log rounds, log optimizer steps, G, K/G, mu, or the mean alone); per knob, rho's RMSE minus "
    "the knob's, the settings as units (t, settings - 1 df): held if every knob's one-sided 95% upper bound is below "
    "the regime margin, not held if some knob's lower bound (Bonferroni over the knobs) is above 0, inconclusive "
    "otherwise (our_value: the largest mean gap, rho's RMSE minus the best knob's)"
)


@register_claim(
    "rho.describes",
    sentence="rho describes an allocation at least as well as any single knob",
    kind="our addition",
    paper="report_rho",
    reads=("grid",),
    margins=("regime",),
    unit="native reward: rho's leave-one-cell-out RMSE of the cell means minus the best single knob's, mean over settings",
    simulation=OwnSimulation(
        lambda s: describes_operating(s),
        "cell means on a line in rho, on a line in log rounds, as observed",
    ),
    registered=REGISTERED,
    words=lambda s: DESCRIBES_TEST,
)
def _describes(study: Study) -> Result:
    return describes(study)


def _equal_rho_variants(study: Study) -> list[Variant]:
    settings = dict.fromkeys(t.setting for t in pair_tests(study))
    return [Variant(f".{s}", {"setting": s}, {"setting": s}) for s in settings]


def _equal_rho_words(study: Study, setting: str) -> str:
    m = study.margins
    return (
        f"{setting}: each pair of recipes of one target rho (a cell and its b), its difference on the shared seeds "
        "with the setting's cell + seed residual variance: not held if some pair's Holm-adjusted p (over every pair of "
        f"every setting) is below 5%, held if every pair's 90% interval lies inside +-{m.recipe:g}, inconclusive "
        "otherwise (our_value: the pair with the largest difference, second minus first)"
    )


@register_claim(
    "recipes.equal_rho",
    sentence="at equal rho the recipe does not matter in {setting}",
    kind="our addition",
    paper="report_rho",
    reads=("grid",),
    margins=("recipe",),
    unit="native reward: the second recipe minus the first of the setting's pair that differs most",
    simulation=OwnSimulation(
        lambda s, setting: equal_rho_operating(s, setting),
        "pair differences 0, as observed, twice the margin",
    ),
    variants=_equal_rho_variants,
    registered=REGISTERED,
    words=_equal_rho_words,
)
def _equal_rho(study: Study, setting: str) -> Result:
    return equal_rho_verdict(pair_tests(study), setting, study.margins.recipe)
