"""The planner's consistency check "larger policies buy fewer updates and rollouts": its verdict and
its note, which names the cells where the check fails and why."""

import pandas as pd

from paper_repro.analysis.claims.tables import fewer_updates


def _frontier(l_r90_rounds: float) -> pd.DataFrame:
    rows = []
    for size, rounds, p in (("S", 14.2, 8), ("M", 8.2, 8), ("L", l_r90_rounds, 4)):
        rows.append({"setting": size, "cell": "r90", "rounds": rounds, "mu": 3, "P": p, "G": 8})
        rows.append(
            {"setting": size, "cell": "r15", "rounds": 40 / (1 + "SML".index(size)), "mu": 1, "P": 8, "G": 24}
        )
    return pd.DataFrame(rows)


def test_a_planner_that_halves_p_for_the_largest_policy_is_named_in_the_note():
    result = fewer_updates(_frontier(8.4), ("S", "M", "L"))
    assert result.verdict == "not held"
    assert "r90: optimizer steps do not decrease: M 24.6 -> L 25.2" in result.note
    assert "rollouts" not in result.note.split("(")[0]  # L's rollouts (8.4 x 4 x 8) do decrease
    assert "L P4 G8 mu3" in result.note and "r15" not in result.note


def test_steps_and_rollouts_that_decrease_everywhere_hold():
    result = fewer_updates(_frontier(4.0), ("S", "M", "L"))
    assert result.verdict == "held"
    assert "every cell" in result.note
