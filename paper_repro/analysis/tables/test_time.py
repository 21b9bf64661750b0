"""Stage E's tables: RL's training FLOPs against the same FLOPs spent at test time (notebook 60).

It reads what :mod:`paper_repro.drivers.test_time` wrote (``test_time/<policy_id>.csv``, one row a
problem, and ``test_time_policies.csv``) and builds:

- :func:`arms_table` (``test_time_arms.csv``): each policy's accuracy and FLOPs per query for every
  arm (greedy; pass@k, the exact checker's oracle; majority vote @k; best-of-k by the PRM) and k;
- :func:`breakeven_table` (``test_time_breakeven.csv``): for each size, set and arm, the deployment
  size Q* beyond which the RL policy (greedy, training FLOPs paid once) beats the base policy given
  the same total FLOPs (training + Q x per-query) at test time; and which wins per FLOP per query
  at Q -> infinity;
- :func:`gap_table` (``test_time_gap.csv``): pass@k(RL) - pass@k(base) as k grows, with a
  bootstrap interval over seeds and problems (paired by problem), and the k where the base overtakes;
- :func:`sizes_table` (``test_time_sizes.csv``): a smaller policy after RL against the next size up
  without RL, at the larger one's greedy FLOPs per query.

**Equal FLOPs.** A base policy given ``b`` FLOPs per query can reach any point of its *envelope*:
the best accuracy among its arms' points (cost, accuracy) at most ``b``, mixing two points (each
query answered by one or the other) to land between them, and answering nothing at cost 0. For Q
queries the base gets ``b = T / Q + c_RL`` (T: RL's training FLOPs, c_RL: the RL policy's greedy
FLOPs per query). RL wins when ``a_RL > envelope(b)``; since ``b`` falls as Q grows, it wins for
every Q beyond ``Q* = T / (b* - c_RL)``, b* the least budget at which the envelope reaches
``a_RL`` (Q* = 0: the base never reaches it; inf: it reaches it at RL's own per-query cost).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd

ARMS = ("pass", "majority", "prm")
DEPLOYED = ("majority", "prm")  # the arms a deployment can run (pass@k needs the answer: the oracle)
BOOTSTRAP = 2000  # replicates of the seed x problem bootstrap
LEVEL = 0.95


def problems(root: Path) -> pd.DataFrame:
    """Every policy's per-problem rows, with the policy's size, kind and seed."""
    policies = pd.read_csv(root / "test_time_policies.csv")
    frames = [pd.read_csv(root / "test_time" / f"{p}.csv") for p in policies.policy_id]
    rows = pd.concat(frames, ignore_index=True)
    return rows.merge(policies[["policy_id", "size", "kind", "seed", "train_flops"]], on="policy_id")


def problems_if_run(root: Path) -> pd.DataFrame | None:
    """:func:`problems`, or None where stage E has not run in ``root`` (no ``test_time_policies.csv``)."""
    return problems(root) if (root / "test_time_policies.csv").exists() else None


def ks(rows: pd.DataFrame) -> list[int]:
    return sorted(int(c.split("@")[1]) for c in rows.columns if c.startswith("pass@"))


def arms_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One row a policy, set, arm and k: ``accuracy`` (mean over problems) and ``flops_per_query``
    (mean over problems, FLOPs). The greedy answer is arm ``greedy`` at k = 1."""
    out = []
    keys = ["policy_id", "size", "kind", "seed", "train_flops", "set"]
    for key, g in rows.groupby(keys, dropna=False, sort=True):
        base = dict(zip(keys, key, strict=True))
        out.append(
            {
                **base,
                "arm": "greedy",
                "k": 1,
                "accuracy": g.greedy.mean(),
                "flops_per_query": g.greedy_flops.mean(),
            }
        )
        for k in ks(rows):
            for arm in ARMS:
                cost = g[f"sample_flops@{k}"] + (g[f"prm_flops@{k}"] if arm == "prm" else 0.0)
                out.append(
                    {
                        **base,
                        "arm": arm,
                        "k": k,
                        "accuracy": g[f"{arm}@{k}"].mean(),
                        "flops_per_query": cost.mean(),
                    }
                )
    return pd.DataFrame(out)


def envelope(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The best accuracy reachable at each FLOPs per query from ``points`` (cost, accuracy), by
    choosing or mixing them (answering nothing costs 0 and scores 0): the upper concave hull."""
    pts = sorted({(0.0, 0.0), *points})
    hull: list[tuple[float, float]] = []
    for p in pts:
        if hull and p[1] <= hull[-1][1]:
            continue  # costs more, reaches no more
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (y2 - y1) * (p[0] - x1) <= (p[1] - y1) * (x2 - x1):
                hull.pop()  # below the chord: a mix of its neighbours does better
            else:
                break
        hull.append(p)
    return hull


def at_budget(hull: list[tuple[float, float]], budget: float) -> float:
    """The envelope's accuracy at ``budget`` FLOPs per query (its best beyond its dearest point)."""
    xs, ys = zip(*hull, strict=True)
    return float(np.interp(budget, xs, ys))


def budget_for(hull: list[tuple[float, float]], accuracy: float) -> float:
    """The least FLOPs per query at which the envelope reaches ``accuracy`` (inf: it never does)."""
    xs, ys = zip(*hull, strict=True)
    if accuracy > ys[-1]:
        return math.inf
    return float(np.interp(accuracy, ys, xs))


def break_even(train_flops: float, rl_cost: float, rl_accuracy: float, hull) -> float:
    """Q*: the queries beyond which RL (greedy) beats the base's envelope at equal total FLOPs."""
    b_star = budget_for(hull, rl_accuracy)
    if math.isinf(b_star):
        return 0.0
    if b_star <= rl_cost:
        return math.inf
    return train_flops / (b_star - rl_cost)


def arm_envelope(arms: pd.DataFrame, arm: str) -> list[tuple[float, float]]:
    """The :func:`envelope` of one policy's greedy answer and ``arm`` at every k (``arms``: its rows
    of :func:`arms_table` on one set)."""
    pts = arms[arms.arm.isin(["greedy", arm])]
    return envelope(list(zip(pts.flops_per_query, pts.accuracy, strict=True)))


def _interval(values: list[float]) -> tuple[float, float, float]:
    """The seeds' Q* in one number and its 95% t-interval over seeds on log10: the geometric mean
    when every Q* is finite and positive (the interval NaN with one seed), else their median (0 and
    inf included) with no interval."""
    from scipy import stats

    v = np.array(values, dtype=float)
    if len(v) == 0:
        return float("nan"), float("nan"), float("nan")
    if not np.all(np.isfinite(v)) or np.any(v <= 0):
        return float(np.median(v)), float("nan"), float("nan")
    logs = np.log10(v)
    mid = 10 ** logs.mean()
    if len(v) < 2:
        return float(mid), float("nan"), float("nan")
    half = stats.t.ppf(0.5 + LEVEL / 2, len(v) - 1) * logs.std(ddof=1) / math.sqrt(len(v))
    return float(mid), float(10 ** (logs.mean() - half)), float(10 ** (logs.mean() + half))


def breakeven_table(arms: pd.DataFrame) -> pd.DataFrame:
    """One row a size, set and arm: Q* per RL seed (``q_star_seeds``), their geometric mean
    (``q_star``) with a 95% t-interval over seeds on log10 (``q_star_low``/``high``; where some
    seed's Q* is 0 or inf, the median with no interval), how many seeds' Q* is 0 (RL wins
    at every Q) or inf (never), and the Q -> inf winner per FLOP per query: the RL policy's envelope
    against the base's at RL's greedy FLOPs per query (``winner_at_greedy``) and at the base's k = max
    cost of the arm (``winner_at_kmax``), with the accuracies compared."""
    out = []
    for (size, set_name), g in arms.groupby(["size", "set"], sort=True):
        base = g[g.kind == "base"]
        rl = g[g.kind == "rl"]
        kmax = int(g.k.max())
        for arm in ARMS:
            base_hull = arm_envelope(base, arm)
            q, greedy_rl, greedy_base, big_rl, big_base = [], [], [], [], []
            cost_kmax = float(base[(base.arm == arm) & (base.k == kmax)].flops_per_query.iloc[0])
            for _, s in rl.groupby("seed"):
                greedy = s[s.arm == "greedy"].iloc[0]
                q.append(break_even(greedy.train_flops, greedy.flops_per_query, greedy.accuracy, base_hull))
                rl_hull = arm_envelope(s, arm)
                greedy_rl.append(greedy.accuracy)
                greedy_base.append(at_budget(base_hull, greedy.flops_per_query))
                big_rl.append(at_budget(rl_hull, cost_kmax))
                big_base.append(at_budget(base_hull, cost_kmax))
            mid, low, high = _interval(q)
            out.append(
                {
                    "size": size,
                    "set": set_name,
                    "arm": arm,
                    "deployable": arm in DEPLOYED,
                    "seeds": len(q),
                    "q_star": mid,
                    "q_star_low": low,
                    "q_star_high": high,
                    "q_star_seeds": " ".join(f"{v:.4g}" for v in q),
                    "rl_wins_at_every_q": int(sum(v == 0 for v in q)),
                    "rl_never_wins": int(sum(math.isinf(v) for v in q)),
                    "rl_greedy": float(np.mean(greedy_rl)),
                    "base_at_rl_greedy_cost": float(np.mean(greedy_base)),
                    "winner_at_greedy": _winner(greedy_rl, greedy_base),
                    "kmax": kmax,
                    "rl_at_kmax_cost": float(np.mean(big_rl)),
                    "base_at_kmax_cost": float(np.mean(big_base)),
                    "winner_at_kmax": _winner(big_rl, big_base),
                }
            )
    return pd.DataFrame(out)


def _winner(rl: list[float], base: list[float]) -> str:
    """Which is ahead on the mean over seeds ("rl", "base", or "tie")."""
    d = float(np.mean(rl) - np.mean(base))
    return "rl" if d > 0 else "base" if d < 0 else "tie"


def gap_table(rows: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """One row a size, set and k: the mean over RL seeds of pass@k(RL) - pass@k(base) (``gap``), a
    percentile bootstrap interval over seeds and problems (resampled together, each problem paired
    with itself), and ``overtaken_at``: the least k whose gap is below 0 (NaN: none up to k max)."""
    rng = np.random.default_rng(seed)
    out = []
    for (size, set_name), g in rows.groupby(["size", "set"], sort=True):
        base = g[g.kind == "base"].sort_values("problem")
        rl = g[g.kind == "rl"].sort_values(["seed", "problem"])
        seeds = sorted(rl.seed.unique())
        n_problems = len(base)
        draws_p = rng.integers(0, n_problems, size=(BOOTSTRAP, n_problems))
        draws_s = rng.integers(0, len(seeds), size=(BOOTSTRAP, len(seeds)))
        rows_k = []
        for k in ks(rows):
            diff = np.stack(
                [rl[rl.seed == s][f"pass@{k}"].to_numpy() - base[f"pass@{k}"].to_numpy() for s in seeds]
            )  # (seeds, problems)
            per_seed = np.stack([diff[:, p].mean(axis=1) for p in draws_p])  # (B, seeds)
            boot = np.take_along_axis(per_seed, draws_s, axis=1).mean(axis=1)
            low, high = np.quantile(boot, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
            rows_k.append(
                {
                    "size": size,
                    "set": set_name,
                    "k": k,
                    "seeds": len(seeds),
                    "gap": diff.mean(),
                    "gap_low": low,
                    "gap_high": high,
                }
            )
        below = [r["k"] for r in rows_k if r["gap"] < 0]
        for r in rows_k:
            r["overtaken_at"] = below[0] if below else float("nan")
        out.extend(rows_k)
    return pd.DataFrame(out)


def sizes_table(arms: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """One row a pair (smaller size after RL, next size up without RL), set and arm: the larger
    base's greedy accuracy and FLOPs per query, the smaller RL policy's envelope (greedy and the arm
    at k, mixed) at those FLOPs (``small_rl``, mean over seeds, with a t-interval), their FLOP ratio
    per query, and ``small_rl`` - ``large_base``. The larger base's own envelope at its greedy cost
    is its greedy accuracy (greedy is its cheapest answer)."""
    from scipy import stats

    out = []
    for small, large in itertools.pairwise(order):
        for set_name in sorted(arms.set.unique()):
            big = arms[(arms["size"] == large) & (arms.kind == "base") & (arms.set == set_name)]
            big_greedy = big[big.arm == "greedy"].iloc[0]
            rl = arms[(arms["size"] == small) & (arms.kind == "rl") & (arms.set == set_name)]
            for arm in DEPLOYED:
                vals, ratios = [], []
                for _, s in rl.groupby("seed"):
                    vals.append(at_budget(arm_envelope(s, arm), big_greedy.flops_per_query))
                    ratios.append(big_greedy.flops_per_query / s[s.arm == "greedy"].flops_per_query.iloc[0])
                v = np.array(vals)
                half = (
                    stats.t.ppf(0.5 + LEVEL / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
                    if len(v) > 1
                    else float("nan")
                )
                out.append(
                    {
                        "small": small,
                        "large": large,
                        "set": set_name,
                        "arm": arm,
                        "flop_ratio": float(np.mean(ratios)),
                        "large_base_greedy": big_greedy.accuracy,
                        "large_base_flops": big_greedy.flops_per_query,
                        "small_rl": v.mean(),
                        "small_rl_low": v.mean() - half,
                        "small_rl_high": v.mean() + half,
                        "difference": v.mean() - big_greedy.accuracy,
                        "seeds": len(v),
                    }
                )
    return pd.DataFrame(out)
