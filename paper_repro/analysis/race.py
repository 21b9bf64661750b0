"""Target disagreement and RACE (Reward-Aware Compute Allocation) from the result tables alone.

**Regimes** (our definition; the paper's thresholds are unknown, so they are parameters): at a
setting's best cell (the argmax of the native reward), the setting is

- ``reward-heavy`` when C_reward / C_total there is at least ``reward_threshold`` (default 0.25);
- else ``update-heavy`` when rho there is at least ``rho_threshold`` (default 0.6);
- else ``search-heavy``.

Both thresholds sit between the grid's cells, never on one: the default grid's cells realise rho
near 0.16, 0.31, 0.50, 0.69 and 0.84 (0.6 lies between r50 and r70), and the PRM-style cells
spend a share of 0.56, 0.45, 0.32 and 0.20 on the PRM (0.25 lies between r50 and r70). A threshold
on a cell would make a regime depend on which side of it seed noise puts that cell.

**RACE** classifies each setting from its pilot grid (the same cells at a pilot budget, on seeds the
full grid does not use) and picks the pilot's best cell for the full-budget run. :func:`race_table`
compares, per setting and pilot budget, the pilot regime with the full grid's; for the first pilot
budget (the paper's 1/8), the RACE pick's native reward with TRL's default allocation (K = G,
mu = 1, at the full budget), both run **on fresh seeds** that neither the pilots nor the full grid
used, paired by seed; and the pilots' FLOPs with the full grid's. :func:`regime_ceiling` is the same-regime rate the full grid's own seed
noise allows: how often two disjoint halves of its seeds name the same regime.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from paper_repro.results import METRICS


@dataclass(frozen=True)
class RegimeThresholds:
    rho_threshold: float = 0.6  # rho at the best cell at or above: update-heavy
    reward_threshold: float = 0.25  # C_reward / C_total at the best cell at or above: reward-heavy

    def classify(self, rho_star: float, reward_share: float) -> str:
        if np.isnan(rho_star):
            return "unknown"
        if reward_share >= self.reward_threshold:
            return "reward-heavy"
        return "update-heavy" if rho_star >= self.rho_threshold else "search-heavy"


def disagreement_table(frontier: pd.DataFrame) -> tuple[pd.DataFrame, float]:
    """Per setting: the argmax cell of each target (a description; the claim is tested on the
    cell x target interaction, :func:`paper_repro.analysis.claims.disagree`)."""
    out = []
    for (stage, setting), f in frontier.groupby(["stage", "setting"], sort=False):
        rec = {"stage": stage, "setting": setting}
        for t in METRICS:
            rec[f"best_{t}"] = f.loc[f[t].idxmax(), "cell"] if f[t].notna().any() else None
            rec[f"rho_star_{t}"] = f.loc[f[t].idxmax(), "rho"] if f[t].notna().any() else float("nan")
        picks = {rec[f"best_{t}"] for t in METRICS if rec[f"best_{t}"] is not None}
        rec["distinct_picks"] = len(picks)
        rec["targets_disagree"] = len(picks) > 1
        out.append(rec)
    table = pd.DataFrame(out)
    share = float(table["targets_disagree"].mean()) if len(table) else float("nan")
    return table, share


def best_cell(rows: pd.DataFrame) -> pd.Series:
    """The argmax cell of the native reward over ``rows`` (cell means), with its rho and reward share:
    RACE's pick from its pilots, and the full grid's best cell."""
    g = rows.assign(reward_share=rows["C_reward"] / rows["C_total"]).groupby("cell")
    means = g[["native_reward", "rho", "reward_share"]].mean()
    return means.loc[means["native_reward"].idxmax()].rename(means["native_reward"].idxmax())


def regime_ceiling(full_rows: pd.DataFrame, names, thresholds: RegimeThresholds) -> float:
    """The share of (setting, split) in which two disjoint halves of the full grid's seeds name the
    same regime, over every split of the seeds into halves; NaN with fewer than two seeds."""
    same = []
    for name in names:
        rows = full_rows[full_rows["setting"] == name]
        seeds = sorted(rows["seed"].unique())
        if len(seeds) < 2:
            continue
        for half in combinations(seeds, len(seeds) // 2):
            a, b = rows[rows["seed"].isin(half)], rows[~rows["seed"].isin(half)]
            regimes = [thresholds.classify(x["rho"], x["reward_share"]) for x in (best_cell(a), best_cell(b))]
            same.append(regimes[0] == regimes[1])
    return float(np.mean(same)) if same else float("nan")


def race_table(
    full_rows: pd.DataFrame,
    pilots: dict[float, pd.DataFrame],
    fresh_rows: pd.DataFrame,
    fresh_defaults: pd.DataFrame,
    shared: dict[str, str],
    thresholds: RegimeThresholds = RegimeThresholds(),
) -> tuple[pd.DataFrame, np.ndarray]:
    """One row per setting with both grids and pilot fraction (``pilots``: fraction -> its pilot rows;
    the first fraction's pick is the one run on fresh seeds), and the fresh-seed gains of that pick
    over TRL's default (one per distinct setting and fresh seed). ``fresh_rows``: full-budget grid
    cells on the fresh seeds; ``fresh_defaults``: the default allocation on them."""
    out, gains = [], []
    first = next(iter(pilots), None)
    for (stage, setting), fr in full_rows.groupby(["stage", "setting"], sort=False):
        if fr["native_reward"].isna().all():
            continue
        fb = best_cell(fr)
        for fraction, pilot_rows in pilots.items():
            pr = pilot_rows[(pilot_rows["stage"] == stage) & (pilot_rows["setting"] == setting)]
            if pr.empty or pr["native_reward"].isna().all():
                continue
            pb = best_cell(pr)
            rec = {
                "stage": stage,
                "setting": setting,
                "pilot_fraction": fraction,
                "pilot_best_cell": pb.name,
                "pilot_rho_star": pb["rho"],
                "pilot_regime": thresholds.classify(pb["rho"], pb["reward_share"]),
                "pilot_seeds": int(pr["seed"].nunique()),
                "full_best_cell": fb.name,
                "full_rho_star": fb["rho"],
                "full_regime": thresholds.classify(fb["rho"], fb["reward_share"]),
                "full_seeds": int(fr["seed"].nunique()),
            }
            rec["same_regime"] = rec["pilot_regime"] == rec["full_regime"]
            if fraction == first:
                paired = _fresh_pairs(fresh_rows, fresh_defaults, stage, setting, pb.name, set(pr["seed"]))
                if setting not in shared:
                    gains.extend(paired["gain"].tolist())
                rec.update({
                    "fresh_seeds": len(paired),
                    "race_pick_native_reward": paired["pick"].mean() if len(paired) else float("nan"),
                    "default_native_reward": paired["default"].mean() if len(paired) else float("nan"),
                    "race_gain_vs_default": paired["gain"].mean() if len(paired) else float("nan"),
                })  # fmt: skip
            rec["oracle_native_reward"] = fb["native_reward"]
            rec["race_regret_vs_oracle"] = (
                fb["native_reward"] - fr[fr["cell"] == pb.name]["native_reward"].mean()
            )
            rec["pilot_flops"] = pr["C_total"].sum()
            rec["full_grid_flops"] = fr["C_total"].sum()
            rec["pilot_flops_fraction"] = (
                rec["pilot_flops"] / rec["full_grid_flops"] if rec["full_grid_flops"] else float("nan")
            )
            rec["same_runs_as"] = shared.get(setting, "")
            rec["rho_threshold"] = thresholds.rho_threshold
            rec["reward_threshold"] = thresholds.reward_threshold
            out.append(rec)
    return pd.DataFrame(out), np.asarray(gains, dtype=float)


def _fresh_pairs(fresh_rows, fresh_defaults, stage, setting, pick, pilot_seeds) -> pd.DataFrame:
    """Per fresh seed (none the pilots used): the pick's native reward, the default's, and the gain."""
    mine = lambda rows: rows[(rows["stage"] == stage) & (rows["setting"] == setting)]  # noqa: E731
    f, d = mine(fresh_rows), mine(fresh_defaults)
    f, d = f[~f["seed"].isin(pilot_seeds)], d[~d["seed"].isin(pilot_seeds)]
    pick_by_seed = f[f["cell"] == pick].groupby("seed")["native_reward"].mean()
    default_by_seed = d.groupby("seed")["native_reward"].mean()
    pairs = pd.DataFrame({"pick": pick_by_seed, "default": default_by_seed}).dropna()
    return pairs.assign(gain=pairs["pick"] - pairs["default"])
