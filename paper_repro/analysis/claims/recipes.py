"""Our addition "at equal rho, the recipe does not matter", declared in the registry: whether rho
describes an allocation, from the profile's second recipes (two recipes of one target rho on the
same seeds: :mod:`paper_repro.analysis.tables.recipes`).

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
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.columns import NO_OC
from paper_repro.analysis.claims.registry import OwnSimulation, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.analysis.tables.recipes import Pair, pair_table, pair_verdicts, pairs_of, welch_rows

REPLICATES = 2000  # simulated studies per truth: a 5% rate to about +-0.5 points
RNG_SEED = 0


def claim_verdict(verdicts: Sequence[str]) -> str:
    if not verdicts:
        return "inconclusive"
    if all(v == "equivalent" for v in verdicts):
        return "held"
    if any(v == "different" for v in verdicts):
        return "not held"
    return "inconclusive"


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


def _recipe_operating(study: Study) -> dict:
    kwargs = {} if study.replicates is None else {"replicates": study.replicates}
    _, oc = recipe_operating(pairs_of(study.distinct), study.margins.recipe, **kwargs)
    return {**oc, "power_now": NAN, "seeds_for_80pct_power": NAN,
            "power_note": "see oc_held_when_true (recipes.py)"}  # fmt: skip


def _recipe_words(study: Study) -> str:
    return recipe_test(study.margins.recipe)


@register_claim("recipes.rho_suffices", sentence="at equal rho, the recipe does not matter", kind="our addition",
                paper="report_rho", reads=("grid",), margins=("recipe",), words=_recipe_words,
                simulation=OwnSimulation(_recipe_operating, "differences of 0, 0.5, 1, 1.5 and 2 margins, "
                                         "and one pair differing by 2 margins"))  # fmt: skip
def _rho_suffices(study: Study) -> Result:
    return recipe_decide(pairs_of(study.distinct), study.margins.recipe)
