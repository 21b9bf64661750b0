"""Recipe vs rho (our addition): at equal rho, does the recipe matter?

The paper's advice is to report rho beside total FLOPs, which presumes that rho describes an
allocation: two recipes (P, G, K, mu) that spend the budget in the same proportions should train
alike. The grid cannot test that, since each of its cells is one recipe. So the profile's
``grid.recipes`` runs some targets twice in one setting: the planner's cell and a **second recipe**
of the same target rho (:meth:`paper_repro.allocation.Planner.second_cell`, labelled with a ``b``:
another group size G, and another kept share K/G or another mu). Each such pair is compared on the
same seeds' grid runs.

**The rule** (:func:`recipe_decide`, fixed before the runs), per pair on ``target`` (native reward):
the difference of the two cells' seed means (second minus first), Welch's standard error and degrees
of freedom, and the profile's equivalence margin ``margins.recipe``:

- **equivalent** when the 90% interval lies inside (-margin, +margin): Welch's two one-sided tests
  at 5%;
- **different** when the 95% interval, Bonferroni over the pairs, lies wholly beyond the margin
  (the recipes differ by more than the margin);
- otherwise **open**.

The claim "at equal rho, the recipe does not matter" is **held** when every pair is equivalent (an
intersection-union test: each pair at 5% keeps the claim's error at 5%), **not held** when some pair
is different, **inconclusive** otherwise (with no pairs too).

**How often it errs** (:func:`recipe_operating`): the rule on simulated pairs with each pair's own
seed SDs and seed counts, under truths whose differences are 0, half the margin, the margin, 1.5x
and twice the margin (the same in every pair), plus one where only the first pair differs, by
twice the margin; a verdict is wrong when decided against the truth (held where some |difference|
reaches the margin, not held where every one is inside it). A difference exactly at the margin is
the equivalence test's own boundary: held there at most 5% of the time.

The margin is the profile's: it is about the step between neighbouring cells the rho* claims turn
on, so a recipe difference inside it cannot move a best cell across a claim's window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from paper_repro.allocation import SECOND_SUFFIX
from paper_repro.analysis.claims.columns import NO_OC
from paper_repro.analysis.stats.verdict import NAN, Result

ALPHA = 0.05
REPLICATES = 2000  # simulated studies per truth: a 5% rate to about +-0.5 points
RNG_SEED = 0
PAIR_COLUMNS = ["setting", "first", "second", "target", "first_recipe", "second_recipe", "first_rho",
                "second_rho", "first_mean", "second_mean", "n_first", "n_second", "difference", "se", "df",
                "ci90_low", "ci90_high", "ci95_low", "ci95_high", "p_tost", "margin", "pair_verdict"]  # fmt: skip


@dataclass(frozen=True)
class Pair:
    """One target run by two recipes in one setting: each cell's seed values of ``target``."""

    setting: str
    first: str
    second: str
    a: np.ndarray
    b: np.ndarray


def pairs_of(runs: pd.DataFrame, target: str = "native_reward") -> list[Pair]:
    """Every (cell, cell + ``b``) pair of the runs' settings with ok values of ``target``."""
    out = []
    for setting, rows in runs.groupby("setting", sort=False):
        cells = set(rows["cell"])
        for second in sorted(
            c for c in cells if c.endswith(SECOND_SUFFIX) and c[: -len(SECOND_SUFFIX)] in cells
        ):
            first = second[: -len(SECOND_SUFFIX)]
            values = [rows.loc[rows["cell"] == c, target].dropna().to_numpy(float) for c in (first, second)]
            out.append(Pair(str(setting), first, second, *values))
    return out


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Difference of means (b - a), Welch's standard error and degrees of freedom."""
    d, se, df = welch_rows(a[None, :], b[None, :])
    return float(d[0]), float(se[0]), float(df[0])


def welch_rows(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`welch` of each row of ``a`` against the same row of ``b`` (studies x seeds)."""
    na, nb = a.shape[1], b.shape[1]
    va, vb = a.var(axis=1, ddof=1) / na, b.var(axis=1, ddof=1) / nb
    se = np.sqrt(va + vb)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(se > 0, (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1)), np.inf)
    return b.mean(axis=1) - a.mean(axis=1), se, df


VERDICTS = ("equivalent", "different", "open")  # a pair's, as codes 0, 1, 2 of pair_verdicts


def pair_verdicts(d, se, df, margin: float, k: int, alpha: float = ALPHA) -> np.ndarray:
    """:func:`pair_verdict` of arrays: the index in :data:`VERDICTS` of each pair's verdict."""
    t90 = stats.t.ppf(1 - alpha, df)
    t95 = stats.t.ppf(1 - alpha / (2 * k), df)
    equivalent = (d - t90 * se > -margin) & (d + t90 * se < margin)
    different = (d - t95 * se > margin) | (d + t95 * se < -margin)
    return np.where(equivalent, 0, np.where(different, 1, 2))


def pair_verdict(d: float, se: float, df: float, margin: float, k: int, alpha: float = ALPHA) -> str:
    """``equivalent`` when the 90% interval of the difference lies inside ± ``margin`` (TOST at
    ``alpha``), ``different`` when its 95% interval, Bonferroni over ``k`` pairs, lies beyond it,
    ``open`` otherwise."""
    return VERDICTS[int(pair_verdicts(np.array([d]), np.array([se]), np.array([df]), margin, k, alpha)[0])]


def claim_verdict(verdicts: Sequence[str]) -> str:
    if not verdicts:
        return "inconclusive"
    if all(v == "equivalent" for v in verdicts):
        return "held"
    if any(v == "different" for v in verdicts):
        return "not held"
    return "inconclusive"


def pair_table(pairs: Sequence[Pair], margin: float, target: str = "native_reward",
               recipes: pd.DataFrame | None = None) -> pd.DataFrame:  # fmt: skip
    """One row per pair: both cells' means, the difference with its 90% and 95% (Bonferroni)
    intervals, the TOST p value and the pair's verdict. ``recipes``: per (setting, cell) the columns
    P, G, K, mu and rho (a frontier table) for the recipe and rho columns."""
    rows = []
    usable = [len(p.a) >= 2 and len(p.b) >= 2 for p in pairs]  # each side has a seed variance
    tested = sum(usable)
    for p, ok in zip(pairs, usable, strict=True):
        row = {"setting": p.setting, "first": p.first, "second": p.second, "target": target,
               "first_mean": p.a.mean() if len(p.a) else NAN, "second_mean": p.b.mean() if len(p.b) else NAN,
               "n_first": len(p.a), "n_second": len(p.b), "margin": margin}  # fmt: skip
        for side, cell in (("first", p.first), ("second", p.second)):
            row[f"{side}_recipe"], row[f"{side}_rho"] = _recipe(recipes, p.setting, cell)
        if ok:
            d, se, df = welch(p.a, p.b)
            t90, t95 = stats.t.ppf(1 - ALPHA, df), stats.t.ppf(1 - ALPHA / (2 * tested), df)
            p_tost = (
                max(stats.t.sf((d + margin) / se, df), stats.t.cdf((d - margin) / se, df)) if se > 0 else NAN
            )
            row |= {"difference": d, "se": se, "df": df, "ci90_low": d - t90 * se, "ci90_high": d + t90 * se,
                    "ci95_low": d - t95 * se, "ci95_high": d + t95 * se, "p_tost": p_tost,
                    "pair_verdict": pair_verdict(d, se, df, margin, tested)}  # fmt: skip
        else:
            row["pair_verdict"] = f"not tested: {min(len(p.a), len(p.b))} seeds (needs 2)"
        rows.append(row)
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def _recipe(recipes: pd.DataFrame | None, setting: str, cell: str) -> tuple[str, float]:
    if recipes is None or recipes.empty:
        return "", NAN
    row = recipes[(recipes["setting"] == setting) & (recipes["cell"] == cell)]
    if row.empty:
        return "", NAN
    r = row.iloc[0]
    return f"P{int(r['P'])} G{int(r['G'])} K{int(r['K'])} mu{int(r['mu'])}", float(r["rho"])


def recipe_decide(pairs: Sequence[Pair], margin: float) -> Result:
    """The claim's verdict (the module's rule), the largest |difference| as its value."""
    table = pair_table(pairs, margin)
    tested = table.dropna(subset=["difference"])
    if tested.empty:
        return Result(note="no recipe pair with two seeds each (grid.recipes in the profile)")
    verdict = claim_verdict(list(tested["pair_verdict"]))
    worst = tested.loc[tested["difference"].abs().idxmax()]
    words = "; ".join(
        f"{r.setting} {r.second} - {r.first}: {r.difference:+.3f} (90% {r.ci90_low:+.3f} to {r.ci90_high:+.3f}, "
        f"{r.pair_verdict})"
        for r in tested.itertuples()
    )
    return Result(float(worst["difference"]), float(worst["ci95_low"]), float(worst["ci95_high"]), verdict,
                  f"margin {margin:g}; {words}")  # fmt: skip


def recipe_test(margin: float, target_words: str = "native reward") -> str:
    return (
        f"per pair of recipes of one target rho ({target_words}; second minus first, Welch): equivalent when the "
        f"90% interval lies inside +-{margin:g} (TOST at 5%), different when the 95% interval (Bonferroni over "
        f"the pairs) lies beyond it; held when every pair is equivalent, not held when one is different, "
        f"else inconclusive"
    )


def _truths(k: int, margin: float) -> dict[str, np.ndarray]:
    out = {f"difference {f:g} x margin": np.full(k, f * margin) for f in (0.0, 0.5, 1.0, 1.5, 2.0)}
    if k > 1:
        one = np.zeros(k)
        one[0] = 2 * margin
        out["one pair differs by 2 x margin"] = one
    return out


def recipe_operating(pairs: Sequence[Pair], margin: float, replicates: int = REPLICATES,
                     seed: int = RNG_SEED) -> tuple[pd.DataFrame, dict]:  # fmt: skip
    """The rule on simulated pairs (each pair's seed SDs and counts) under known differences: per
    truth the shares of each verdict and the wrong share; and the claims row's ``oc_*`` columns."""
    usable = [p for p in pairs if len(p.a) >= 2 and len(p.b) >= 2]
    if not usable:
        return pd.DataFrame(), {**NO_OC, "oc_note": "not simulated: no recipe pair with two seeds each"}
    rng = np.random.default_rng(seed)
    sizes = [n for p in usable for n in (len(p.a), len(p.b))]
    edges = np.cumsum([0, *sizes])
    rows = []
    for name, diffs in _truths(len(usable), margin).items():
        truth = "held" if np.all(np.abs(diffs) < margin - 1e-12) else "not held"  # at the margin: TOST's size
        # every study at once: per study, each pair's first cell's seeds then its second's
        z = rng.standard_normal((replicates, edges[-1]))
        codes = []
        for i, (p, d) in enumerate(zip(usable, diffs, strict=True)):
            a = z[:, edges[2 * i] : edges[2 * i + 1]] * p.a.std(ddof=1)
            b = d + z[:, edges[2 * i + 1] : edges[2 * i + 2]] * p.b.std(ddof=1)
            codes.append(pair_verdicts(*welch_rows(a, b), margin, len(usable)))
        codes = np.stack(codes, axis=1)  # studies x pairs
        held, differs = (codes == 0).all(axis=1), (codes == 1).any(axis=1)
        verdicts = np.where(
            held, "held", np.where(differs, "not held", "inconclusive")
        )  # claim_verdict's rule
        share = {v: float(np.mean(verdicts == v)) for v in ("held", "not held", "inconclusive")}
        wrong = share["not held"] if truth == "held" else share["held"]
        rows.append({"truth": name, "true_verdict": truth, **{f"share_{k.replace(' ', '_')}": v
                     for k, v in share.items()}, "wrong": wrong, "studies": replicates})  # fmt: skip
    table = pd.DataFrame(rows)
    worst = table.loc[table["wrong"].idxmax()]
    held = table[table["true_verdict"] == "held"]["share_held"]
    oc = {
        "oc_wrong_max": float(worst["wrong"]),
        "oc_wrong_truth": str(worst["truth"]) if worst["wrong"] > 0 else "",
        "oc_agreement_min": NAN,
        "oc_held_when_true": float(held.min()) if len(held) else NAN,
        "oc_note": f"{len(table)} truths, {replicates} studies each, with the pairs' own seed SDs (recipes.py)",
    }
    return table, oc
