"""``paper-repro reproduce``: does the study reproduce?
It compares a study recomputed from nothing (the results folder ``make reproduce`` writes,
``out/reproduce/<profile>`` by default) with the committed one (``data/results/<profile>``), and prints:

- the runs: how many run ids of the committed ``runs.csv`` the recomputed one holds, which are missing
  and which are extra, and how many changed status;
- per compared column (:data:`paper_repro.common.rowdiff.COMPARED`: the metrics, the FLOP counts, rounds and
  steps), the largest absolute difference over the matched runs and how many runs differ beyond
  :data:`paper_repro.common.rowdiff.TOLERANCE`;
- per metric, the differing runs against the study's own seed-to-seed spread (a paired test:
  :func:`paper_repro.drivers.reproduce_noise.noise_checks`);
- per claim (``claims.csv``, stage E's ``test_time_claims.csv``), whether its verdict moved and whether
  the recomputed estimate lies inside the committed interval; stage E's other tables, bit for bit;
- the outcome in one line (:func:`paper_repro.drivers.reproduce_noise.outcome`): *reproduces bit for
  bit*, *reproduces within noise* (runs differ, no verdict moved, every estimate inside its interval,
  no metric beyond the seed spread) or *does not reproduce* (and what moved).

It exits 0 for the first two outcomes and 1 for the third, so ``make reproduce`` fails only where the
study does not reproduce as science.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro.common.paths import repo_root
from paper_repro.common.results import RUN_COLUMNS, ResultTable, results_dir
from paper_repro.common.rowdiff import COMPARED, TOLERANCE, beyond, differences
from paper_repro.drivers import reproduce_noise as noise
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
    claims: pd.DataFrame  # per claim: both verdicts and estimates, the committed interval, moved, outside
    noise: pd.DataFrame  # per metric: the differing runs against the seed spread (reproduce_noise)
    tables: pd.DataFrame  # per stage E table both sides hold: its rows and the rows that differ

    @property
    def runs_equal(self) -> bool:
        """No committed run missing or changed in status, every matched run within tolerance."""
        return (
            not self.missing
            and not self.status_changed
            and int(self.columns["runs_beyond_tolerance"].sum()) == 0
        )

    @property
    def verdicts(self) -> pd.DataFrame:
        """The claims whose verdict moved (or that one side lacks)."""
        return self.claims[self.claims["moved"]].reset_index(drop=True)

    @property
    def outcome(self) -> tuple[str, list[str]]:
        """The outcome's words and, where the study does not reproduce, what moved
        (:func:`paper_repro.drivers.reproduce_noise.outcome`)."""
        lost = bool(self.missing or self.status_changed)
        return noise.outcome(self.runs_equal, lost, self.noise, self.claims, self.tables)

    @property
    def reproduces(self) -> bool:
        """Bit for bit or within noise: what ``make reproduce`` exits 0 for."""
        return self.outcome[0] != noise.NOT_REPRODUCED


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


def compare(
    profile: str,
    recomputed_dir: str | Path | None = None,
    committed_dir: str | Path | None = None,
    part: bool = False,
) -> Comparison:
    """Compare the recomputed study in ``recomputed_dir`` with the committed one. ``part``: the
    recomputed folder holds a part of the study (runs rerun by ``paper-repro cells``): only the
    committed runs it holds are compared, and the claims where it has a claims table (the seed spread
    is the whole committed study's)."""
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
    spread = noise.seed_spread(tables["committed"])
    if part:
        tables["committed"] = tables["committed"][
            tables["committed"]["run_id"].isin(tables["recomputed"]["run_id"])
        ]
    missing, extra, changed, columns = compare_runs(tables["committed"], tables["recomputed"])
    return Comparison(
        committed=len(tables["committed"]),
        recomputed=len(tables["recomputed"]),
        missing=missing,
        extra=extra,
        status_changed=changed,
        columns=columns,
        claims=noise.read_claims(old_dir, new_dir, required=not part),
        noise=noise.noise_checks(tables["committed"], tables["recomputed"], spread),
        tables=noise.table_checks(old_dir, new_dir),
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
    lines += _noise_lines(c.noise)
    lines += _claim_lines(c.claims)
    for r in c.tables.itertuples():
        lines.append(
            f"  stage E {r.table}: {r.differing} of {r.committed} rows differ ({r.recomputed} recomputed)"
        )
    said, what = c.outcome
    lines.append(f"the study {said}" + (f": {'; '.join(what)}" if what else ""))
    return "\n".join(lines)


def _noise_lines(table: pd.DataFrame) -> list[str]:
    lines = [
        "per metric, the differing runs against the seed-to-seed spread (in sqrt(2) x the setting's "
        f"seed SD; beyond it at a shared {noise.ALPHA:g}):"
    ]
    for r in table.itertuples():
        lines.append(
            f"  {r.metric:<14} {r.differing} of {r.compared} differ, largest {r.largest:.3g} "
            f"({r.largest_in_sd:.2f} SD), shift p {r.shift_p:.2g}, scale p {r.scale_p:.2g}"
            + (" BEYOND NOISE" if r.beyond else "")
        )
    return lines


def _claim_lines(claims: pd.DataFrame) -> list[str]:
    moved, outside = claims[claims["moved"]], claims[claims["outside"] & ~claims["moved"]]
    lines = [
        f"claims: {len(claims)} compared, {len(moved)} verdicts moved, {len(outside)} estimates outside "
        "the committed interval"
    ]
    for r in moved.itertuples():
        lines.append(f"  {r.claim}: {r.verdict_committed} -> {r.verdict_recomputed}")
    for r in outside.itertuples():
        lines.append(
            f"  {r.claim}: estimate {r.estimate_recomputed:.4g} outside [{r.ci_low:.4g}, {r.ci_high:.4g}]"
        )
    return lines


def _few(ids: tuple[str, ...], most: int = 3) -> str:
    if not ids:
        return ""
    shown = ", ".join(ids[:most])
    return f" ({shown}{', ...' if len(ids) > most else ''})"
