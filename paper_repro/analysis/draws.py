"""Two draws of one study: which verdicts move between generations of the runs table.

The runs table is append-only, so a study rerun on another training configuration (new float paths,
a new down-sampling rule) leaves the earlier draw beside the new one, under other run ids, until
``paper-repro split-history`` moves it to ``runs_history.csv``; the analysis reads only the runs of the
profile's design (:func:`paper_repro.analysis.tables.frontiers.of_design`). This module reads any
one draw of both tables: the draws are the distinct training configurations in the order of
their first run, each analysed as the design it ran under (:func:`design_of`).

``paper-repro draws --profile cpu-tiny`` lists
them; ``--compare A B`` analyses draws A and B apart (each in a scratch directory, never the
committed one) and prints each distinct setting's rho* verdict per target for both, and the claims
that moved.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd

from paper_repro.analysis.claims.paper import PRM_STYLE_RHO, RULE_BASED_RHO
from paper_repro.analysis.claims.study import Classes
from paper_repro.analysis.pipeline import analyse
from paper_repro.analysis.stats.best_sets import Frontiers, setting_best
from paper_repro.analysis.stats.optima import window_verdict
from paper_repro.analysis.tables.frontiers import load_runs, shared_runs, study_rows
from paper_repro.common.results import ResultTable
from paper_repro.config import Profile

TARGETS = ("native_reward", "gsm_pass1", "judge_score")


def _train(spec: str) -> str:
    try:
        return json.dumps(json.loads(spec).get("train", {}), sort_keys=True)
    except (TypeError, ValueError):
        return ""


def draws(runs: pd.DataFrame) -> list[str]:
    """The distinct training configurations of ``runs`` (raw rows, with ``spec`` and ``created_at``),
    in the order of their first run."""
    keyed = runs.assign(_train=runs["spec"].map(_train)).sort_values("created_at", kind="stable")
    return list(dict.fromkeys(keyed["_train"]))


def draw(runs: pd.DataFrame, k: int) -> pd.DataFrame:
    """The rows of draw ``k`` (an index into :func:`draws`)."""
    return runs[runs["spec"].map(_train) == draws(runs)[k]]


def design_of(profile: Profile, rows: pd.DataFrame) -> Profile:
    """``profile`` with the training recipe and evaluation that the draw ``rows`` ran under (read
    from the first row's recorded spec), so that the draw is the design the analysis reads."""
    from dataclasses import replace

    from paper_repro.config import TrainConfig

    spec = json.loads(rows.sort_values("created_at", kind="stable")["spec"].iloc[0])
    evaluation = {
        **profile.eval,
        "limit": spec.get("eval_limit"),
        "max_new_tokens": spec.get("eval_max_new_tokens", profile.eval.get("max_new_tokens")),
        "batch_size": spec.get("eval_batch_size", profile.eval.get("batch_size")),
        "decoding": spec.get("eval_decoding", "exact"),
        "heldout_limit": spec.get("eval_heldout_limit"),
    }
    return replace(profile, train=TrainConfig(**spec.get("train", {})), eval=evaluation)


def setting_verdicts(profile: Profile, path: Path) -> pd.DataFrame:
    """Per distinct setting and target, the "rho* ~ x" verdict of the setting's class's paper value
    from its best set, as the class claims take it (Bonferroni over the class's settings)."""
    grid = study_rows(profile, load_runs(path, profile))["grid"]
    shared = shared_runs(grid, [s.name for s in profile.all_settings()])
    classes = Classes.of(profile, shared)
    frontiers = Frontiers(grid[~grid["setting"].isin(shared)])
    out = []
    for names, x in ((classes.rule_based, RULE_BASED_RHO), (classes.prm_style, PRM_STYLE_RHO)):
        for name in names:
            for target in TARGETS:
                best = setting_best(frontiers, name, target, profile.margins, False, len(names))
                out.append(
                    {
                        "setting": name,
                        "target": target,
                        "paper_value": x,
                        "best_cells": best.cells,
                        "verdict": window_verdict(best.rhos, x, profile.margins.rho),
                    }
                )
    return pd.DataFrame(out)


def compare(profile: Profile, runs: pd.DataFrame, a: int, b: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Draws ``a`` and ``b`` analysed apart: (per-setting verdicts side by side, claims side by side)."""
    settings, table = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for k in (a, b):
            root = Path(scratch) / str(k)
            root.mkdir()
            rows = draw(runs, k)
            rows.to_csv(root / "runs.csv", index=False)
            design = design_of(profile, rows)
            settings.append(setting_verdicts(design, root / "runs.csv").set_index(["setting", "target"]))
            result = analyse(design, root, root / "figures", power_replicates=0)
            table.append(result.claims.set_index("id")["verdict"])
    side = settings[0].merge(settings[1], left_index=True, right_index=True, suffixes=(f"_{a}", f"_{b}"))
    return side, pd.DataFrame({f"draw {a}": table[0], f"draw {b}": table[1]})


def all_runs(root: Path) -> pd.DataFrame:
    """The ok runs of both tables in results folder ``root`` (``runs_history.csv``, the earlier draws,
    then ``runs.csv``, the study's), one row per run id."""
    tables = [root / "runs_history.csv", root / "runs.csv"]
    # through the store: a table of the previous schema is read as upgraded, so the two share columns
    runs = pd.concat([ResultTable(t).frame() for t in tables if t.exists()], ignore_index=True)
    # a study rerun on the same design after its registration makes the same run ids again: one draw
    return runs[runs["status"] == "ok"].drop_duplicates("run_id", keep="last")


def listing(runs: pd.DataFrame) -> list[str]:
    """One line per draw of ``runs``: its rows, its first run's time and its training configuration."""
    lines = []
    for k, config in enumerate(draws(runs)):
        rows = runs[runs["spec"].map(_train) == config]
        lines.append(f"draw {k}: {len(rows)} rows, first {rows['created_at'].min()}, train {config}")
    return lines


if __name__ == "__main__":  # an alias of `paper-repro draws` (paper_repro/commands/draws.py)
    from paper_repro.aliases import run_command

    run_command("draws")
