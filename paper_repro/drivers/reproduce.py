"""``paper-repro reproduce``: does the study reproduce?
It compares a study recomputed from nothing (the results folder ``make reproduce`` writes,
``out/reproduce/<profile>`` by default) with the committed one (``data/results/<profile>``), and prints:

- the runs: how many run ids of the committed ``runs.csv`` the recomputed one holds, which are missing
  and which are extra, and how many changed status;
- per compared column (:data:`paper_repro.common.rowdiff.COMPARED`: the metrics, the FLOP counts, rounds and
  steps), the largest absolute difference over the matched runs and how many runs differ beyond
  :data:`paper_repro.common.rowdiff.TOLERANCE`;
- every claim whose verdict moved (``claims.csv``), with both verdicts and estimates.

It exits 0 when the study reproduces (no committed run missing, every matched run within tolerance,
no verdict moved) and 1 otherwise, so ``make reproduce`` fails where the study does not reproduce.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro.common.paths import repo_relative, repo_root
from paper_repro.common.results import RUN_COLUMNS, ResultTable, results_dir
from paper_repro.common.rowdiff import COMPARED, TOLERANCE, beyond, differences
from paper_repro.run.history import full_budget_of

REPRODUCED = Path("out") / "reproduce"  # where `make reproduce` recomputes the study (git ignores out/)


def reproduced_dir(profile: str) -> Path:
    """The folder ``make reproduce`` recomputes ``profile``'s study into."""
    return repo_root() / REPRODUCED / profile


@dataclass(frozen=True)
class Comparison:
    committed: int  # runs in the committed runs.csv
    recomputed: int  # runs in the recomputed one
    missing: tuple[str, ...]  # committed run ids the recomputed table lacks
    extra: tuple[str, ...]  # recomputed run ids the committed table lacks
    status_changed: tuple[str, ...]  # matched run ids whose status differs
    columns: pd.DataFrame  # per compared column: largest difference, runs beyond tolerance, runs compared
    verdicts: pd.DataFrame  # claims whose verdict moved (or that one side lacks)

    @property
    def reproduces(self) -> bool:
        return (
            not self.missing
            and not self.status_changed
            and int(self.columns["runs_beyond_tolerance"].sum()) == 0
            and self.verdicts.empty
        )


def compare_runs(
    committed: pd.DataFrame, recomputed: pd.DataFrame
) -> tuple[tuple, tuple, tuple, pd.DataFrame]:
    """Missing and extra run ids, the matched runs whose status changed, and per :data:`COMPARED`
    column the largest difference and the runs beyond tolerance over the matched ok runs."""
    old_ids, new_ids = set(committed["run_id"]), set(recomputed["run_id"])
    missing = tuple(sorted(old_ids - new_ids))
    extra = tuple(sorted(new_ids - old_ids))
    matched = committed[committed["run_id"].isin(new_ids)]
    status = recomputed.set_index("run_id")["status"]
    changed = tuple(
        sorted(r for r, s in zip(matched["run_id"], matched["status"], strict=True) if status[r] != s)
    )
    ok = matched[(matched["status"] == "ok") & ~matched["run_id"].isin(changed)]
    gap = differences(ok, recomputed)
    over = beyond(gap)
    columns = pd.DataFrame(
        {
            "column": list(COMPARED),
            "largest_difference": [float(gap[c].max()) if len(gap) else np.nan for c in COMPARED],
            "tolerance": [TOLERANCE[c] for c in COMPARED],
            "runs_beyond_tolerance": [int(over[c].sum()) for c in COMPARED],
            "runs_compared": len(gap),
        }
    )
    return missing, extra, changed, columns


def moved_verdicts(committed: pd.DataFrame, recomputed: pd.DataFrame) -> pd.DataFrame:
    """The claims whose verdict differs between the two ``claims.csv`` tables, or that one lacks."""
    both = committed[["id", "verdict", "our_value"]].merge(
        recomputed[["id", "verdict", "our_value"]],
        on="id",
        how="outer",
        suffixes=("_committed", "_recomputed"),
    )
    moved = both["verdict_committed"].fillna("absent") != both["verdict_recomputed"].fillna("absent")
    return both[moved].reset_index(drop=True)


def compare(
    profile: str, recomputed_dir: str | Path | None = None, committed_dir: str | Path | None = None
) -> Comparison:
    """Compare the recomputed study in ``recomputed_dir`` with the committed one."""
    new_dir = Path(recomputed_dir) if recomputed_dir is not None else reproduced_dir(profile)
    old_dir = results_dir(profile, committed_dir)
    tables = {}
    for name, where in (("committed", old_dir), ("recomputed", new_dir)):
        path = where / "runs.csv"
        if not path.exists():
            raise FileNotFoundError(
                f"no {name} runs table at {path}: "
                + (
                    "run `make reproduce` first"
                    if name == "recomputed"
                    else "is this a checkout of the study?"
                )
            )
        # a table of the previous schema (an older checkout's) is read with its budget_multiple derived
        tables[name] = ResultTable(path, RUN_COLUMNS, full_budget=full_budget_of).frame()
    missing, extra, changed, columns = compare_runs(tables["committed"], tables["recomputed"])
    claims = [where / "claims.csv" for where in (old_dir, new_dir)]
    if all(p.exists() for p in claims):
        verdicts = moved_verdicts(*(pd.read_csv(p) for p in claims))
    else:
        lacking = ", ".join(repo_relative(p) for p in claims if not p.exists())
        verdicts = pd.DataFrame({"id": ["(all)"], "verdict_committed": [f"no claims table: {lacking}"]})
    return Comparison(
        committed=len(tables["committed"]),
        recomputed=len(tables["recomputed"]),
        missing=missing,
        extra=extra,
        status_changed=changed,
        columns=columns,
        verdicts=verdicts,
    )


def words(c: Comparison, recomputed: str, committed: str) -> str:
    """The comparison as the console prints it."""
    matched = c.committed - len(c.missing)
    lines = [
        f"The study recomputed in {recomputed} against the committed one in {committed}:",
        f"runs: {c.committed} committed, {c.recomputed} recomputed; {matched} run ids matched, "
        f"{len(c.missing)} committed runs missing{_few(c.missing)}, {len(c.extra)} extra{_few(c.extra)}, "
        f"{len(c.status_changed)} with another status{_few(c.status_changed)}",
        "per column over the matched ok runs: the largest difference, and the runs beyond the tolerance",
    ]
    for r in c.columns.itertuples():
        lines.append(
            f"  {r.column:<14} {r.largest_difference:<10.3g} {r.runs_beyond_tolerance} of {r.runs_compared} "
            f"beyond {r.tolerance:g}"
        )
    if c.verdicts.empty:
        lines.append("verdicts: none moved")
    else:
        lines.append(f"verdicts: {len(c.verdicts)} moved")
        for r in c.verdicts.itertuples():
            lines.append(f"  {r.id}: {r.verdict_committed} -> {getattr(r, 'verdict_recomputed', 'absent')}")
    lines.append(
        "the study reproduces: yes (no committed run missing, every matched run within tolerance, no verdict moved)"
        if c.reproduces
        else "the study reproduces: NO (see above)"
    )
    return "\n".join(lines)


def _few(ids: tuple[str, ...], most: int = 3) -> str:
    if not ids:
        return ""
    shown = ", ".join(ids[:most])
    return f" ({shown}{', ...' if len(ids) > most else ''})"


if __name__ == "__main__":  # an alias of `paper-repro reproduce` (paper_repro/commands/reproduce.py)
    from paper_repro.aliases import run_command

    run_command("reproduce")
