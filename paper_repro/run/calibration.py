"""The planner's predicted lengths, measured on a profile's committed runs, and its predicted rounds
against the realised ones.

The planner chooses cells at the profile's ``expected_lengths`` (part of the registered design) and
predicts what a chosen cell will do at its ``predicted_lengths``
(:func:`paper_repro.run.allocation.predictor_for`). This module measures those lengths and checks
the prediction:

- :func:`measured_lengths`: per setting, the tokens per generated completion of its full-budget grid
  runs (the design's seeds, at the setting's grid budget): the prompt's and the completion's from
  each run's compute card (``steps/<run_id>.card.json``, the ledger's token counts); for a setting
  that charges a PRM, the PRM's tokens per completion whose forward costs the ``C_reward`` the
  ledger charged per completion (the ledger counts the PRM's FLOPs, not its tokens);
- :func:`rounds_check`: per setting and cell, the realised rounds (mean over its runs) beside the
  predicted ones and the design's (at the expected lengths), with their ratios;
- :func:`lengths_yaml`: the measured lengths as the profile's ``predicted_lengths:`` section.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro import models
from paper_repro.accounting import flops
from paper_repro.common.results import CURVE_COLUMNS, RUN_COLUMNS, ResultTable, results_dir
from paper_repro.config import Profile, Setting
from paper_repro.run.allocation import Cell, plan_setting, predict, predictor_for

RECIPE = ["model", "reward_system", "P", "G", "K", "mu"]  # a run's policy label, reward and cell


def grid_budget(profile: Profile, setting: Setting) -> float:
    """The budget ``setting``'s full grid runs to (FLOPs): C times its stage's multiple."""
    return profile.budget_flops * profile.budget_multiple(setting)


def realised_rounds(profile: Profile, budget_flops: float, root: str | Path | None = None) -> pd.DataFrame:
    """The rounds each ok full-budget run of the design's seeds trained at ``budget_flops``: the runs of
    that budget (``runs.csv``) and the points at that budget of longer runs (``curves.csv``), one row per
    run: :data:`RECIPE`, ``seed``, ``run_id``, ``rounds``. Empty when the folder holds none."""
    folder = results_dir(profile.name, root)
    runs = ResultTable(folder / "runs.csv", RUN_COLUMNS).frame()
    curves = ResultTable(folder / "curves.csv", CURVE_COLUMNS, key="curve_id").frame()
    parts = []
    for frame, budget in ((runs, "budget_flops"), (curves, "point_flops")):
        if frame.empty:
            continue
        keep = (frame["status"] == "ok") & (frame["budget_kind"] == "full")
        keep &= np.isclose(frame[budget].astype(float), budget_flops) & frame["seed"].isin(
            range(profile.seeds)
        )
        parts.append(frame.loc[keep, [*RECIPE, "seed", "run_id", "rounds"]])
    if not parts:
        return pd.DataFrame(columns=[*RECIPE, "seed", "run_id", "rounds"])
    return pd.concat(parts).drop_duplicates("run_id").reset_index(drop=True)


def measured_lengths(profile: Profile, root: str | Path | None = None) -> dict[str, dict[str, int]]:
    """Per setting with full-budget grid runs in the folder, its ``prompt`` and ``completion`` tokens
    per generated completion (and ``reward``, the PRM's, where a PRM is charged), each rounded to a
    whole token: the lengths its grid's runs realised, over all their rounds."""
    folder = results_dir(profile.name, root)
    out = {}
    for setting in profile.all_settings():
        runs = _grid_runs(profile, setting, root)
        if runs.empty:
            continue
        cards = [json.loads((folder / "steps" / f"{r}.card.json").read_text()) for r in runs["run_id"]]
        rows = sum(c["tokens"]["gen_rows"] for c in cards)
        lengths = {
            "prompt": round(sum(c["tokens"]["gen_prompt_tokens"] for c in cards) / rows),
            "completion": round(sum(c["tokens"]["gen_completion_tokens"] for c in cards) / rows),
        }
        reward = sum(c["flops"]["useful"]["C_reward"] for c in cards) / rows
        if reward > 0 and profile.needs_prm_weights(setting):
            lengths["reward"] = _reader_tokens(models.shape(profile.prm), reward)
        out[setting.name] = lengths
    return out


def rounds_check(profile: Profile, root: str | Path | None = None, budget_flops: float | None = None):
    """Per setting and cell of its grid at ``budget_flops`` (None: each setting's grid budget) with
    runs in the folder: ``realised`` (mean rounds over its runs, ``runs``), ``predicted`` (at the
    predicted lengths) and ``design`` (at the expected lengths), and ``ratio`` (predicted / realised)
    and ``design_ratio``. One row per (setting, cell); empty when no cell has a run."""
    rows = []
    for setting in profile.all_settings():
        cells = (
            grid_cells(profile, setting)
            if budget_flops is None
            else plan_setting(profile, setting, budget_flops).cells
        )
        if not cells:
            continue
        budget = cells[0].budget_flops
        realised = realised_rounds(profile, budget, root)
        for cell in cells:
            mine = realised[of_cell(realised, setting, cell)]
            if mine.empty:
                continue
            rows.append(
                {
                    "stage": setting.stage,
                    "setting": setting.name,
                    "cell": cell.label,
                    "budget_flops": budget,
                    "runs": len(mine),
                    "realised": float(mine["rounds"].mean()),
                    "predicted": cell.prediction.rounds,
                    "design": cell.predicted_rounds,
                }
            )
    columns = ["stage", "setting", "cell", "budget_flops", "runs", "realised", "predicted", "design"]
    table = pd.DataFrame(rows, columns=columns)
    if table.empty:
        return table
    table["ratio"] = table["predicted"] / table["realised"]
    table["design_ratio"] = table["design"] / table["realised"]
    return table


def ratio_summary(ratios, within: float = 0.10) -> str:
    """``ratios`` (predicted / realised rounds, a sequence) in words: min, median, max, and how many
    lie outside ``within``."""
    ratios = pd.Series(ratios, dtype=float)
    outside = int((abs(ratios - 1) > within).sum())
    return (
        f"min {ratios.min():.3f}, median {ratios.median():.3f}, max {ratios.max():.3f} over {len(ratios)} "
        f"cells; {outside} outside +-{within:.0%}"
    )


def lengths_yaml(lengths: dict[str, dict[str, int]]) -> str:
    """``lengths`` (:func:`measured_lengths`) as a profile's ``settings:`` under ``predicted_lengths:``."""
    lines = ["  settings:"]
    for name, tokens in lengths.items():
        lines.append(f"    {name}: {{{', '.join(f'{k}: {v}' for k, v in tokens.items())}}}")
    return "\n".join(lines)


def grid_cells(profile: Profile, setting: Setting) -> list[Cell]:
    """``setting``'s full grid as its runs train it: the cells planned at C, each at its grid budget
    (:func:`grid_budget`: a stage that runs past C trains the same recipes on), with the design's
    rounds and the :class:`~paper_repro.run.allocation.Prediction` at that budget."""
    budget, cells = grid_budget(profile, setting), plan_setting(profile, setting).cells
    if budget == profile.budget_flops:
        return cells
    predictor, out = predictor_for(profile, setting), []
    for cell in cells:
        longer = replace(
            cell, budget_flops=budget, predicted_rounds=math.floor(budget / cell.round_cost.C_total)
        )
        out.append(replace(longer, prediction=predict(profile, setting, longer, predictor)))
    return out


def _grid_runs(profile: Profile, setting: Setting, root) -> pd.DataFrame:
    """The ok full-budget runs of ``setting``'s grid cells at its grid budget, on the design's seeds."""
    cells = grid_cells(profile, setting)
    realised = realised_rounds(profile, grid_budget(profile, setting), root)
    mine = np.zeros(len(realised), dtype=bool)
    for cell in cells:
        mine |= of_cell(realised, setting, cell).to_numpy()
    return realised[mine]


def of_cell(runs: pd.DataFrame, setting: Setting, cell) -> pd.Series:
    """Which of ``runs`` are of ``setting``'s ``cell`` (its policy, reward and recipe)."""
    values = (setting.policy, setting.reward_system, cell.P, cell.G, cell.K, cell.mu)
    mine = pd.Series(True, index=runs.index)
    for column, value in zip(RECIPE, values, strict=True):
        mine &= runs[column] == value
    return mine


def _reader_tokens(shape, flops_per_completion: float) -> int:
    """The whole number of tokens whose forward through ``shape`` costs nearest
    ``flops_per_completion`` (the forward's cost grows with its tokens)."""
    cost = lambda n: flops.forward_flops(shape, flops.sequence_work(n))  # noqa: E731
    lo, hi = 1, 1
    while cost(hi) < flops_per_completion:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if cost(mid) < flops_per_completion else (lo, mid)
    return min((lo, hi), key=lambda n: abs(cost(n) - flops_per_completion))
