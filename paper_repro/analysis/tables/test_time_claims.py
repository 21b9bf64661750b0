"""Stage E's three claims, their decision rules fixed before its runs (:data:`REGISTERED`), each
decided on a seed x problem matrix of paired differences and simulated under known truths
(``test_time_claims.csv``, notebook 60):

- ``test_time.rl_beats_sampling`` (per size, set): "RL beats test-time sampling at equal FLOPs
  beyond Q* queries". The difference: RL's greedy answer minus the base's envelope (greedy and
  majority vote @k, mixed) at RL's greedy FLOPs per query, per problem. Held when its 95% interval is
  above 0: at Q -> inf RL wins, so it wins beyond a finite Q* (the estimate quoted beside it);
  not held when below 0 (the base matches RL at RL's own per-query FLOPs: no Q* exists).
- ``test_time.rl_narrows_passk`` (per size, set): "RL narrows pass@k at large k". The difference:
  (pass@kmax(RL) - pass@kmax(base)) - (pass@1(RL) - pass@1(base)), per problem. Held when its 95%
  interval is below 0.
- ``test_time.small_rl_beats_large`` (per pair of sizes, set): "at equal per-query FLOPs, a smaller
  policy after RL beats a larger one without". The difference: the smaller RL policy's envelope
  (greedy and majority vote, mixed) at the larger base's greedy FLOPs per query minus the larger
  base's greedy answer, per problem. Held when its 95% interval is above 0.

Each interval is the percentile bootstrap over seeds and problems resampled together (problems
paired across the two policies). Verdicts: held, not held (the interval on the other side of 0),
inconclusive. Operating characteristics (:func:`operating`): studies of the same shape simulated with
the seed and problem spreads these data show, under a true difference of 0 (how often the rule says
held or not held where neither is true), of :data:`EFFECT` on the claimed side (held when true: its
power) and on the other side (not held when false). The claims registry declares the three claims
(:mod:`paper_repro.analysis.claims.test_time`), which call this module's rules.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro.analysis.tables.test_time import (
    BOOTSTRAP,
    LEVEL,
    arm_envelope,
    arms_table,
    breakeven_table,
    gap_table,
    ks,
    problems,
    sizes_table,
)

REGISTERED = "2026-12-05T07:55:00+00:00"  # the rules above, fixed before stage E's first real run
EFFECT = 0.05  # the true difference the power is quoted at (5 points of accuracy)
REPLICATES = 200  # simulated studies per truth
CLAIMS = {
    "test_time.rl_beats_sampling": "RL beats test-time sampling at equal FLOPs beyond Q* queries",
    "test_time.rl_narrows_passk": "RL narrows pass@k at large k",
    "test_time.small_rl_beats_large": "at equal per-query FLOPs, a smaller policy after RL beats a larger one without",
}


def interval(
    diff: np.ndarray, rng: np.random.Generator, draws: int = BOOTSTRAP
) -> tuple[float, float, float]:
    """Mean of a (seeds, problems) matrix of paired differences and its percentile bootstrap interval
    (seeds and problems resampled)."""
    seeds, problems = diff.shape
    p = rng.integers(0, problems, size=(draws, problems))
    s = rng.integers(0, seeds, size=(draws, seeds))
    per_seed = diff[:, p].mean(axis=2).T  # (draws, seeds): each draw's problems, every seed
    boot = np.take_along_axis(per_seed, s, axis=1).mean(axis=1)
    low, high = np.quantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return float(diff.mean()), float(low), float(high)


def verdict(low: float, high: float, direction: int) -> str:
    """held when the interval lies on the claimed side of 0 (``direction`` +1: above, -1: below)."""
    if direction * low > 0 and direction * high > 0:
        return "held"
    if direction * low < 0 and direction * high < 0:
        return "not held"
    return "inconclusive"


def operating(diff: np.ndarray, direction: int, seed: int = 0) -> dict[str, float]:
    """How often the rule says held / not held on simulated studies of ``diff``'s shape whose
    differences are a seed effect and a problem effect with ``diff``'s spreads around a true mean of
    0 (``false_held``, ``false_not_held``: the claim is false there, and its reverse too), of
    ``direction`` x :data:`EFFECT` (``power``: held when true; ``true_not_held``: the wrong verdict
    there) and of ``-direction`` x :data:`EFFECT` (``power_not_held``: not held when false;
    ``false_held_reverse``: held there). Shares of :data:`REPLICATES` studies, 0 to 1."""
    rng = np.random.default_rng(seed)
    seeds, problems = diff.shape
    seed_sd = float(diff.mean(axis=1).std(ddof=1)) if seeds > 1 else 0.0
    problem_sd = float((diff - diff.mean(axis=1, keepdims=True)).std())
    shares = {}
    for name, truth in (("null", 0.0), ("true", direction * EFFECT), ("false", -direction * EFFECT)):
        said = []
        for _ in range(REPLICATES):
            sim = truth + rng.normal(0, seed_sd, (seeds, 1)) + rng.normal(0, problem_sd, (seeds, problems))
            said.append(verdict(*interval(sim, rng, draws=200)[1:], direction))
        said = np.array(said)
        shares[name] = {v: float(np.mean(said == v)) for v in ("held", "not held")}
    return {
        "false_held": shares["null"]["held"],
        "false_not_held": shares["null"]["not held"],
        "power": shares["true"]["held"],
        "true_not_held": shares["true"]["not held"],
        "power_not_held": shares["false"]["not held"],
        "false_held_reverse": shares["false"]["held"],
    }


def _mixed(
    problem_rows: pd.DataFrame, hull: list[tuple[float, float]], points: dict, budget: float
) -> np.ndarray:
    """Per problem, the envelope's mix of its two points around ``budget`` (``points``: (cost,
    accuracy) -> that point's per-problem values; the origin answers nothing)."""
    none = np.zeros(len(problem_rows))  # the origin: the query left unanswered
    value = lambda point: points.get(point, none)  # noqa: E731
    xs = [x for x, _ in hull]
    j = int(np.searchsorted(xs, budget))
    if j >= len(hull):
        return value(hull[-1])
    if j == 0 or xs[j] == budget:
        return value(hull[j])
    (x0, _), (x1, _) = hull[j - 1], hull[j]
    w = (budget - x0) / (x1 - x0)
    return (1 - w) * value(hull[j - 1]) + w * value(hull[j])


def envelope_per_problem(g: pd.DataFrame, arm: str, budget: float) -> np.ndarray:
    """One policy's (its rows of the per-problem table, one set) envelope of greedy and ``arm``
    at ``budget`` FLOPs per query, per problem."""
    g = g.sort_values("problem")
    summary = arms_table(g)
    hull = arm_envelope(summary, arm)
    points = {}
    for _, r in summary[summary.arm.isin(["greedy", arm])].iterrows():
        col = "greedy" if r.arm == "greedy" else f"{arm}@{int(r.k)}"
        points[(r.flops_per_query, r.accuracy)] = g[col].to_numpy()
    return _mixed(g, hull, points, budget)


def differences(rows: pd.DataFrame, order: list[str]) -> list[dict]:
    """Each claim's (seeds, problems) difference matrix, one entry a claim, size (or pair) and set."""
    out = []
    for set_name in sorted(rows.set.unique()):
        s = rows[rows.set == set_name]
        for size in order:
            base = s[(s["size"] == size) & (s.kind == "base")].sort_values("problem")
            rl = s[(s["size"] == size) & (s.kind == "rl")]
            kmax = max(ks(rows))
            beats, narrows = [], []
            for _, r in rl.groupby("seed"):
                r = r.sort_values("problem")
                cost = r.greedy_flops.mean()
                beats.append(r.greedy.to_numpy() - envelope_per_problem(base, "majority", cost))
                big = r[f"pass@{kmax}"].to_numpy() - base[f"pass@{kmax}"].to_numpy()
                narrows.append(big - (r["pass@1"].to_numpy() - base["pass@1"].to_numpy()))
            out.append(
                {
                    "id": "test_time.rl_beats_sampling",
                    "where": size,
                    "set": set_name,
                    "diff": np.stack(beats),
                    "direction": 1,
                }
            )
            out.append(
                {
                    "id": "test_time.rl_narrows_passk",
                    "where": size,
                    "set": set_name,
                    "diff": np.stack(narrows),
                    "direction": -1,
                }
            )
        for small, large in itertools.pairwise(order):
            big = s[(s["size"] == large) & (s.kind == "base")].sort_values("problem")
            rl = s[(s["size"] == small) & (s.kind == "rl")]
            cost = big.greedy_flops.mean()
            diff = [
                envelope_per_problem(r, "majority", cost) - big.greedy.to_numpy()
                for _, r in rl.groupby("seed")
            ]
            out.append(
                {
                    "id": "test_time.small_rl_beats_large",
                    "where": f"{small}<{large}",
                    "set": set_name,
                    "diff": np.stack(diff),
                    "direction": 1,
                }
            )
    return out


def claims_table(rows: pd.DataFrame, order: list[str], simulate: bool = True) -> pd.DataFrame:
    """``test_time_claims.csv``: one row a claim, size (or pair) and set: the estimate, its interval,
    the verdict, and (``simulate``) the rule's simulated error rates and power."""
    rng = np.random.default_rng(0)
    out = []
    for d in differences(rows, order):
        mean, low, high = interval(d["diff"], rng)
        row = {
            "id": d["id"],
            "claim": CLAIMS[d["id"]],
            "where": d["where"],
            "set": d["set"],
            "seeds": d["diff"].shape[0],
            "problems": d["diff"].shape[1],
            "estimate": mean,
            "ci_low": low,
            "ci_high": high,
            "verdict": verdict(low, high, d["direction"]),
            "registered": REGISTERED,
        }
        if simulate:
            row.update(operating(d["diff"], d["direction"]))
        out.append(row)
    return pd.DataFrame(out)


def stage_e_tables(root: Path, order: list[str], simulate: bool = True) -> dict[str, pd.DataFrame]:
    """Every stage-E table from the rows in ``root``, by file name: the claims' with their simulated
    operating characteristics unless ``simulate`` is False."""
    rows = problems(root)
    order = [s for s in order if s in set(rows["size"])]  # the sizes sampled (a folder may hold some)
    arms = arms_table(rows)
    return {
        "test_time_arms.csv": arms,
        "test_time_breakeven.csv": breakeven_table(arms),
        "test_time_gap.csv": gap_table(rows),
        "test_time_sizes.csv": sizes_table(arms, order),
        "test_time_claims.csv": claims_table(rows, order, simulate),
    }
