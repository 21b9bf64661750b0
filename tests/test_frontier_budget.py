"""What README.md and docs/usage.md tell a reader of the committed tables: ``runs.csv`` holds each run
at its own budget (stage A's grid at 2C), the frontier at C is ``frontiers.csv``, and a run's point at
C is its ``curves.csv`` row at ``point == 1``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from paper_repro.common.paths import repo_root
from paper_repro.config import load_profile

ROOT = repo_root() / "data" / "results" / "cpu-tiny"


def test_the_frontier_at_c_is_the_curves_c_points_and_not_an_average_of_runs_csv():
    profile = load_profile("cpu-tiny")
    runs, curves = pd.read_csv(ROOT / "runs.csv"), pd.read_csv(ROOT / "curves.csv")
    frontier = pd.read_csv(ROOT / "frontiers.csv")
    at_c = curves[(curves["point"] == 1) & (curves["status"] == "ok")].set_index("run_id")
    by_id = runs.set_index("run_id")
    mixed = 0
    for row in frontier.itertuples():
        ids = row.run_ids.split()
        assert np.isclose(at_c.loc[ids, "native_reward"].mean(), row.native_reward, atol=1e-9), row
        budget = by_id.loc[ids, "budget_flops"]
        if (budget > profile.budget_flops).any():  # stage A's grid (and B's sparse, its M runs) went on to 2C
            assert (budget == 2 * profile.budget_flops).all() and row.setting in ("S", "M", "L", "sparse")
            mixed += not np.isclose(by_id.loc[ids, "native_reward"].mean(), row.native_reward, atol=1e-9)
        else:  # the settings that stop at C: their rows are their points at C
            assert np.isclose(by_id.loc[ids, "native_reward"].mean(), row.native_reward, atol=1e-9)
    assert profile.curves.stage_budgets == {"A": 2.0} and mixed > 0


def test_the_readme_and_usage_say_which_table_holds_the_frontier():
    for doc in ("README.md", "docs/usage.md"):
        text = " ".join((repo_root() / doc).read_text().split())
        assert (
            "`frontiers.csv` (the frontier at C" in text or "the frontier at C is `frontiers.csv`" in text
        ), doc
        assert "`point == 1` is C" in text, doc
