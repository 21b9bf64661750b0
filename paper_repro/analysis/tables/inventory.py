"""What a results folder holds, and which of its runs the analysis reads (:func:`read_folder`).

The analysis reads the runs of one design, named by ``design``:

- ``study``: the profile's (:class:`paper_repro.run.study_design.Design`: its settings' recipe, its budgets, its
  grid, fresh and pilot seeds), the committed study's;
- ``folder``: the design a folder's runs make up: the profile's settings, recipe and budgets, on the
  cells and seeds the folder holds (an exploration's: ``-y 'seeds: [42]' -y 'cells: [r40]'``);
- ``auto`` (the default): ``study`` for the committed folder and for any folder that holds runs of
  the profile's grid (a copy of the study, a rerun of it), else ``folder``.

Either way :class:`Folder` says what it found and what it left out, and why (:meth:`Folder.lines`):
rows that are not ``ok``, quick runs mixed in, runs on seeds the design does not use, an earlier
generation's rows, pilots without a grid; and, for a folder's own design whose grid cannot compare
cells over seeds, that the claims are not computable from it (:attr:`Folder.not_computable`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from paper_repro.analysis.tables.frontiers import (
    HISTORY,
    Roles,
    at_full_budget,
    design_problems,
    load_curves,
    numeric,
    of_design,
    study_rows,
)
from paper_repro.common.paths import repo_relative

if TYPE_CHECKING:
    from paper_repro.config import Profile

DESIGNS = ("auto", "study", "folder")
SPLIT_HISTORY = "paper-repro split-history moves them to runs_history.csv"
NAMED = 4  # items a line names before it counts the rest


@dataclass
class Folder:
    """A results folder as the analysis reads it: the design read (``study`` or ``folder``), its ok
    runs (numbers parsed, a run past C at its point at C), their curves' points, the study's rows by
    role (:func:`~paper_repro.analysis.tables.frontiers.study_rows`), what was found and what was
    left out (one line each), and why the claims cannot be computed (None: they can)."""

    path: Path
    design: str
    runs: pd.DataFrame
    curves: pd.DataFrame
    rows: dict[str, pd.DataFrame]
    found: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    not_computable: str | None = None

    def lines(self) -> list[str]:
        """What the analysis found and left out, one line each (``found:``, ``left out:``,
        ``not computable:``), as ``paper-repro analyse`` prints them and notebook 40 shows them."""
        out = [line if line.startswith("design: ") else f"found: {line}" for line in self.found]
        out += [f"left out: {line}" for line in self.left_out] or ["left out: nothing"]
        if self.not_computable:
            out.append(f"not computable: the claims ({self.not_computable}); the tables say what they can")
        return out


def read_folder(path: str | Path, profile: Profile, design: str = "auto", committed: bool = False) -> Folder:
    """The runs table at ``path`` read for the analysis of ``profile`` (``design``: one of
    :data:`DESIGNS`; ``committed``: the folder is the profile's committed one, whose design is the
    study's whatever ``auto`` would find). The table is checked first (it parses, with the schema)."""
    from paper_repro.common.results import RUN_COLUMNS, ResultTable

    if design not in DESIGNS:
        raise ValueError(f"design must be one of {', '.join(DESIGNS)}, got {design!r}")
    path = Path(path)
    frame = ResultTable(path, RUN_COLUMNS).frame()
    ok = frame[frame["status"] == "ok"]
    chosen = "study" if design == "auto" else design
    with warnings.catch_warnings(record=True) as said:  # said again below if the study's design is read
        warnings.simplefilter("always")
        folder = _read(path, profile, ok, chosen)
    if design == "auto" and not committed and folder.rows["grid"].empty:
        chosen = "folder"
        folder = _read(path, profile, ok, chosen)
    else:
        for w in said:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    folder.found, folder.left_out = _found(folder, profile, frame), _left_out(folder, profile, frame)
    if chosen == "folder":
        folder.not_computable = _claims_need(folder.rows["grid"])
    return folder


def _read(path: Path, profile: Profile, ok: pd.DataFrame, design: str) -> Folder:
    runs = numeric(of_design(ok, profile, where=str(path), any_seed=design == "folder"))
    curves = load_curves(path.parent / "curves.csv", runs)
    runs = at_full_budget(runs, curves, profile.budget_flops)  # a run past C counts by its point at C
    roles = Roles.held(profile, runs) if design == "folder" else Roles.of(profile)
    return Folder(path, design, runs, curves, study_rows(profile, runs, roles))


def _found(folder: Folder, profile: Profile, frame: pd.DataFrame) -> list[str]:
    status = frame["status"].value_counts()
    counts = ", ".join(f"{n} {s}" for s, n in status.items()) or "none"
    if folder.design == "study":
        words = f"the {profile.name} study's (its settings, budgets and seeds; paper_repro.run.study_design.Design)"
    else:
        words = (
            f"the folder's own (the {profile.name} settings, recipe and budgets on the cells and seeds "
            "it holds; --design folder)"
        )
    out = [f"{_count(len(frame), 'row')} in {repo_relative(folder.path)} ({counts})", f"design: {words}"]
    rows = folder.rows
    roles = [
        ("grid", "full-budget grid run", "full-budget grid runs"),
        ("fresh", "full-budget run on a fresh seed", "full-budget runs on fresh seeds"),
        (
            "fresh_default",
            "run of TRL's default cell on a fresh seed",
            "runs of TRL's default cell on fresh seeds",
        ),
    ]
    roles += [
        (k, f"pilot run at C x {k.split()[1]}", f"pilot runs at C x {k.split()[1]}")
        for k in rows
        if k.startswith("pilot ")
    ]
    for key, one, many in roles:
        if len(rows[key]):  # a run two settings share (B's sparse is A's M) counts once
            out.append(f"{_count(rows[key]['run_id'].nunique(), one, many)}: {_by_setting(rows[key])}")
    if rows["grid"].empty:
        out.append(f"no full-budget grid run at budget {profile.budget_flops:.3g}")
    return out


def _left_out(folder: Folder, profile: Profile, frame: pd.DataFrame) -> list[str]:
    out = []
    bad = frame[frame["status"] != "ok"]
    if len(bad):
        out.append(
            f"{_count(len(bad), 'row')} not ok ({_few(bad['run_id'])}): a run is analysed once it is ok"
        )
    ok = frame[frame["status"] == "ok"]
    problems = design_problems(ok, profile, any_seed=folder.design == "folder")
    left = problems.dropna()
    raw = design_problems(ok.loc[left.index], profile, any_seed=folder.design == "folder", history=False)
    quick = _of(profile.quick_variant(), ok.loc[left.index]) if len(left) else pd.Series(dtype=bool)
    groups: dict[str, list[str]] = {}
    for i, why in left.items():
        if quick.get(i, False):
            key = "of quick runs (their budget and evaluation are the quick study's): analysed with --quick (quick=True)"
        elif raw[i].startswith("seed "):  # of the design but its seed, whenever it ran
            key = "on seeds the design does not use: --design folder analyses every seed the folder holds"
        elif why == HISTORY:
            key = f"of an earlier generation (older than the design's first run; {SPLIT_HISTORY})"
        else:
            key = f"not of the design: {why}"
        groups.setdefault(key, []).append(_run_words(ok.loc[i]))
    out += [f"{_count(len(runs), 'row')} {key} ({_few(runs)})" for key, runs in groups.items()]
    used = set().union(*(set(r["run_id"]) for r in folder.rows.values()))
    idle = folder.runs[~folder.runs["run_id"].isin(used)]
    if len(idle):
        out.append(
            f"{_count(len(idle), 'run')} of the design in no role of the analysis "
            f"(a budget or cell of no grid, a seed of no role): {_few(idle.apply(_run_words, axis=1))}"
        )
    lost = set(ok.loc[problems.isna(), "run_id"]) - set(folder.runs["run_id"])
    if lost:
        out.append(
            f"{_count(len(lost), 'run')} past C without its point at C in curves.csv, or the same "
            f"experiment as another run's point at C: {_few(sorted(lost))}"
        )
    grid = set(folder.rows["grid"]["setting"])
    pilots = {s for k, r in folder.rows.items() if k.startswith("pilot ") for s in r["setting"]}
    if pilots - grid:
        out.append(
            f"RACE for {', '.join(sorted(pilots - grid))}: pilots without a full-budget grid to compare with"
        )
    return out


def _of(profile: Profile, rows: pd.DataFrame) -> pd.Series:
    """Per row, whether it is a run of ``profile``'s design on any seed."""
    return design_problems(rows, profile, any_seed=True).isna()


def _claims_need(grid: pd.DataFrame) -> str | None:
    """Why the claims cannot be computed from a folder's grid (None: they can): every claim compares
    cells over seeds, so some setting needs two cells with two seeds each."""
    if grid.empty:
        return "no full-budget grid run"
    seeds = grid.groupby(["setting", "cell"])["seed"].nunique()
    cells = (seeds >= 2).groupby(level="setting").sum()
    if (cells >= 2).any():
        return None
    most = int(grid.groupby("setting")["cell"].nunique().max())
    return (
        f"the grid holds at most {_count(most, 'cell')} per setting and {_count(int(seeds.max()), 'seed')} per "
        "cell; every claim compares cells over seeds, which needs a setting with two cells of two seeds each"
    )


def _by_setting(rows: pd.DataFrame) -> str:
    """``dense r40 seed 42; S 8 cells (r15..r85) x seeds 0..4`` for a role's rows."""
    parts = []
    for setting, g in rows.groupby("setting", sort=False):
        cells = list(dict.fromkeys(g.sort_values("target_rho", kind="stable")["cell"]))
        seeds = sorted({int(s) for s in g["seed"]})
        cell_words = (
            ", ".join(cells) if len(cells) <= NAMED else f"{len(cells)} cells ({cells[0]}..{cells[-1]})"
        )
        seed_words = f"seed{'s' if len(seeds) > 1 else ''} {_seeds(seeds)}"
        whole = len(g) == len(cells) * len(seeds)
        join = " x " if len(cells) > 1 else " "
        parts.append(f"{setting} {cell_words}{join}{seed_words}" + ("" if whole else f" ({len(g)} runs)"))
    return "; ".join(parts)


def _seeds(seeds: list[int]) -> str:
    """``0..4, 42`` for a sorted list of seeds."""
    runs: list[list[int]] = []
    for s in seeds:
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return ", ".join(f"{r[0]}..{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _run_words(row: pd.Series) -> str:
    return f"{row['setting']} {row['cell']} seed {row['seed']}"


def _few(items) -> str:
    """The first :data:`NAMED` of ``items``, and how many more."""
    items = list(items)
    more = f"; and {len(items) - NAMED} more" if len(items) > NAMED else ""
    return "; ".join(str(i) for i in items[:NAMED]) + more


def _count(n: int, one: str, many: str | None = None) -> str:
    """``1 run``, ``2 runs``."""
    return f"1 {one}" if n == 1 else f"{n} {many or one + 's'}"
