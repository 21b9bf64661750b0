"""The claim tests that read tables other than the grid's runs: RACE's held-out gain (a TOST on its
fresh-seed pairs, :func:`no_race_gain`; the gains come from :mod:`paper_repro.analysis.race`) and the
planner's consistency check on the frontier table (:func:`fewer_updates`). Their words:
:func:`paper_repro.analysis.wording.no_gain_test`, :data:`paper_repro.analysis.wording.FEWER_TEST`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from paper_repro.analysis.best_sets import DEFAULT
from paper_repro.analysis.verdict import NAN, Result
from paper_repro.config import Margins


def no_race_gain(gains: np.ndarray, m: Margins = DEFAULT) -> Result:
    """TOST of the RACE pick against TRL's default allocation on seeds the pilots did not use
    (paired per setting and seed)."""
    from scipy import stats
    from statsmodels.stats.weightstats import DescrStatsW

    gains = gains[~np.isnan(gains)]
    if len(gains) < 3:
        return Result(note=f"{len(gains)} fresh-seed pairs (the test needs at least 3)")
    d = DescrStatsW(gains)
    if d.std_mean == 0:  # every pair identical (the pick is the default cell itself): no noise to test
        inside = abs(d.mean) < m.gain
        verdict = "held" if inside else "not held" if d.mean > 0 else "inconclusive"
        return Result(float(d.mean), float(d.mean), float(d.mean), verdict, f"{len(gains)} identical pairs")
    p_tost = float(d.ttost_mean(-m.gain, m.gain)[0])
    lo, hi = d.tconfint_mean(alpha=0.05)
    t_one = stats.t.ppf(0.95, len(gains) - 1) * d.std_mean
    if p_tost < 0.05:
        verdict = "held"
    elif lo > 0:
        verdict = "not held"
    else:
        verdict = "inconclusive"
    note = (
        f"{len(gains)} pairs; TOST p {p_tost:.2g}; 90% interval {d.mean - t_one:.3f} to {d.mean + t_one:.3f}"
    )
    return Result(float(d.mean), float(lo), float(hi), verdict, note)


def fewer_updates(frontier: pd.DataFrame, sizes: tuple[str, ...]) -> Result:
    a = frontier[frontier["setting"].isin(sizes)]
    if a["setting"].nunique() < 2:
        return Result(note="fewer than two sizes")
    order = [s for s in sizes if s in set(a["setting"])]
    ok, ratios = True, []
    for _, g in a.groupby("cell"):
        g = g.set_index("setting").reindex(order).dropna(subset=["rounds"])
        updates = (g["rounds"] * g["mu"]).to_numpy()
        rollouts = (g["rounds"] * g["P"] * g["G"]).to_numpy()
        ok &= bool(np.all(np.diff(updates) < 0) and np.all(np.diff(rollouts) < 0))
        if len(updates) > 1:
            ratios.append(updates[-1] / updates[0])
    return Result(float(np.mean(ratios)) if ratios else NAN, verdict="held" if ok else "not held")
