"""Target disagreement and RACE (Reward-Aware Compute Allocation) from the result tables alone.

**Regimes** (our definition; the paper's thresholds are unknown, so they are parameters): at a
setting's optimum (the argmax cell of the native reward), the setting is

- ``reward-heavy`` when C_reward / C_total there is at least ``reward_threshold`` (default 0.25);
- else ``update-heavy`` when rho* is at least ``rho_threshold`` (default 0.5);
- else ``search-heavy``.

**RACE** classifies each setting from its pilot grid (the same cells at the pilot budget, one seed)
and picks the pilot's best cell for the full-budget run. :func:`race_table` compares, per setting,
the pilot regime with the full grid's, the held-out native reward of the RACE pick (the full-grid
cell with the pilot's best label) with TRL's default allocation (K = G = 8, mu = 1, run at the full
budget) and with the oracle (the full grid's best cell), and the pilots' FLOPs with the full grid's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from paper_repro.analysis.frontiers import TARGETS


@dataclass(frozen=True)
class RegimeThresholds:
    rho_threshold: float = 0.5  # rho* at or above: update-heavy
    reward_threshold: float = 0.25  # C_reward / C_total at rho* at or above: reward-heavy

    def classify(self, rho_star: float, reward_share: float) -> str:
        if np.isnan(rho_star):
            return "unknown"
        if reward_share >= self.reward_threshold:
            return "reward-heavy"
        return "update-heavy" if rho_star >= self.rho_threshold else "search-heavy"


def disagreement_table(frontier: pd.DataFrame) -> tuple[pd.DataFrame, float]:
    """Per setting: the argmax cell of each target and whether they all agree. Also returns the
    share of settings in which the targets pick different cells."""
    out = []
    for (stage, setting), f in frontier.groupby(["stage", "setting"], sort=False):
        rec = {"stage": stage, "setting": setting}
        for t in TARGETS:
            rec[f"best_{t}"] = f.loc[f[t].idxmax(), "cell"] if f[t].notna().any() else None
            rec[f"rho_star_{t}"] = f.loc[f[t].idxmax(), "rho"] if f[t].notna().any() else float("nan")
        picks = {rec[f"best_{t}"] for t in TARGETS if rec[f"best_{t}"] is not None}
        rec["distinct_picks"] = len(picks)
        rec["targets_disagree"] = len(picks) > 1
        out.append(rec)
    table = pd.DataFrame(out)
    share = float(table["targets_disagree"].mean()) if len(table) else float("nan")
    return table, share


def _best(f: pd.DataFrame, target: str = "native_reward") -> pd.Series:
    return f.loc[f[target].idxmax()]


def race_table(
    full: pd.DataFrame,
    pilot: pd.DataFrame,
    full_rows: pd.DataFrame,
    pilot_rows: pd.DataFrame,
    default_rows: pd.DataFrame,
    thresholds: RegimeThresholds = RegimeThresholds(),
) -> tuple[pd.DataFrame, float]:
    """One row per setting with both grids; returns the table and the same-regime rate.

    ``full``/``pilot`` are frontier tables (cell means), ``*_rows`` the runs behind them;
    ``default_rows`` the full-budget runs of TRL's default allocation, labelled by setting.
    """
    out = []
    for (stage, setting), f in full.groupby(["stage", "setting"], sort=False):
        p = pilot[(pilot["stage"] == stage) & (pilot["setting"] == setting)]
        if p.empty or f["native_reward"].isna().all():
            continue
        fb, pb = _best(f), _best(p)
        pick = f[f["cell"] == pb["cell"]]
        d = default_rows[(default_rows["stage"] == stage) & (default_rows["setting"] == setting)]
        fr = full_rows[(full_rows["stage"] == stage) & (full_rows["setting"] == setting)]
        pr = pilot_rows[(pilot_rows["stage"] == stage) & (pilot_rows["setting"] == setting)]
        rec = {
            "stage": stage,
            "setting": setting,
            "pilot_best_cell": pb["cell"],
            "pilot_rho_star": pb["rho"],
            "pilot_regime": thresholds.classify(pb["rho"], pb["reward_share"]),
            "full_best_cell": fb["cell"],
            "full_rho_star": fb["rho"],
            "full_regime": thresholds.classify(fb["rho"], fb["reward_share"]),
            "race_pick_native_reward": pick["native_reward"].iloc[0] if len(pick) else float("nan"),
            "default_native_reward": d["native_reward"].mean() if len(d) else float("nan"),
            "default_seeds": int(d["seed"].nunique()) if len(d) else 0,
            "oracle_native_reward": fb["native_reward"],
            "pilot_flops": pr["C_total"].sum(),
            "full_grid_flops": fr["C_total"].sum(),
        }
        rec["same_regime"] = rec["pilot_regime"] == rec["full_regime"]
        rec["race_gain_vs_default"] = rec["race_pick_native_reward"] - rec["default_native_reward"]
        rec["race_regret_vs_oracle"] = rec["oracle_native_reward"] - rec["race_pick_native_reward"]
        rec["pilot_flops_fraction"] = (
            rec["pilot_flops"] / rec["full_grid_flops"] if rec["full_grid_flops"] else float("nan")
        )
        rec["rho_threshold"] = thresholds.rho_threshold
        rec["reward_threshold"] = thresholds.reward_threshold
        out.append(rec)
    table = pd.DataFrame(out)
    rate = float(table["same_regime"].mean()) if len(table) else float("nan")
    return table, rate
