"""The result store: append-only CSV tables, written atomically under a file lock.

``data/results/<profile>/runs.csv`` holds one row per run (columns: :data:`RUN_COLUMNS`, DESIGN §6),
keyed by ``run_id`` (the hash of the run's canonical spec). Per-step ledger logs are JSONL files in
``data/results/<profile>/steps/<run_id>.jsonl`` beside it.

A runs table of the previous schema (:data:`PREVIOUS_RUN_COLUMNS`: without ``budget_multiple``) is
read as upgraded, the column derived from each row's recorded spec (:func:`upgrade_text`); nothing is
written until the table is next written (an append, a move), which upgrades it in the same atomic
write, or :func:`upgrade_table` is called. A table of any other header is refused, as before.

Guarantees, for every writer (the sweep's parallel jobs included):

- **Atomic**: a row is appended by writing the whole new table to a temporary file in the same
  directory, ``fsync``-ing it and ``os.replace``-ing it over the old one. A writer killed at any
  instant leaves the table as it was before or after that row, never truncated or half-written.
- **Append-only, no duplicates**: under the lock, the existing table is read and checked, and a row
  whose ``run_id`` is already there is not written again (``append`` returns ``False``). The one
  exception is a retry: a ``status=failed`` row stays as history, and a later attempt of the same run
  may append its own row; a run has at most one row that is not ``failed``.
- **Never rewritten when corrupt**: a table that does not parse (not text, a header that is not the
  schema, a row with the wrong number of fields, broken quoting, a last line without its newline)
  raises :class:`CorruptTableError`, a ``ValueError`` whose one-line message names the file, the line,
  what is wrong there and how to repair it; nothing is written. Our own writes cannot leave a
  truncated last line (see *Atomic*): one comes from a hand edit or a copy cut short.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from paper_repro.common.paths import repo_root

IDENTITY = ("run_id", "profile", "stage", "setting", "cell", "seed", "budget_kind", "budget_flops")
ALLOCATION = (
    "target_rho",
    "predicted_rho",
    "rho",
    "C_search",
    "C_learning",
    "C_reward",
    "C_total",
    "flops_convention",
    "rho_executed",
    "C_total_executed",
    "rho_time",
)
CONFIGURATION = (
    "P",
    "G",
    "K",
    "mu",
    "rounds",
    "steps",
    "model",
    "reward_system",
    "learning_rate",
    "lora_rank",
    "temperature",
    "max_completion_length",
)
METRICS = ("native_reward", "gsm_pass1", "math_pass1", "judge_score")
POLICY_SIZES = ("XS", "S", "M", "L", "XL")  # policy labels that are sizes, smallest first
# each target's name: in a sentence (the claims' words) and on an axis (the figures)
TARGET_WORDS = {
    "native_reward": "the native reward",
    "gsm_pass1": "gsm pass@1",
    "math_pass1": "math pass@1",
    "judge_score": "the judge's score",
}
TARGET_SHORT = {
    "native_reward": "native reward",
    "gsm_pass1": "gsm pass@1",
    "math_pass1": "math pass@1",
    "judge_score": "judge",
}
TARGET_LABELS = {
    "native_reward": "native reward (held-out)",
    "gsm_pass1": "gsm pass@1",
    "math_pass1": "math pass@1",
    "judge_score": "judge score",
}
BASE_METRICS = tuple(f"base_{m}" for m in METRICS)
WALL = (
    "seconds_search",
    "seconds_learning",
    "seconds_reward",
    "seconds_train",
    "seconds_eval",
    "seconds_total",
)
PROVENANCE = (
    "status",
    "error",
    "git_sha",
    "git_dirty",
    "versions",
    "created_at",
    "executed_notebook",
    "spec",
)
# Where a row's metrics are along the budget: its budget_flops as a multiple of its profile's full
# budget C (2.0: stage A's grid runs past C to 2C; 1.0: at C; 0.5: a pilot at C/2). A label derived
# from the spec (budget_flops / RunSpec.full_budget), not a metric; NaN where C is not known.
MULTIPLE = "budget_multiple"
RUN_COLUMNS: tuple[str, ...] = (
    *IDENTITY,
    MULTIPLE,
    *ALLOCATION,
    *CONFIGURATION,
    *METRICS,
    *BASE_METRICS,
    *WALL,
    *PROVENANCE,
)
# The runs table's schema before budget_multiple: read as upgraded, rewritten once (upgrade_text)
PREVIOUS_RUN_COLUMNS: tuple[str, ...] = tuple(c for c in RUN_COLUMNS if c != MULTIPLE)
# The full budget C (FLOPs) of the profile a row's recorded spec (its canonical JSON, as a dict) names,
# or None where it is not known: how an older row's budget_multiple is derived
# (paper_repro.run.history.full_budget_of is the study's)
FullBudget = Callable[[Mapping[str, Any]], "float | None"]


# A run's compute curve (``curves.csv`` beside ``runs.csv``): one row per (run, budget point). A point
# is a multiple of the profile's full budget C (``point``: 0.0625 is C/16, 4 is 4C; ``point_flops`` in
# FLOPs); a run is evaluated at every ladder point up to its own budget, each on the policy after the
# last round a run whose budget is that point would train (the same stop rule), so the row is that
# run's row. ``final``: the point is the run's own budget (its row repeats the run's). ``evaluation``:
# which sets were evaluated there ("all", or "native": the held-out native reward alone, the other
# metrics NaN). ``status``: "ok", or "infeasible" (a run of this budget cannot buy one round; NaN
# metrics). ``seconds_train``: training wall seconds up to the point; ``seconds_eval``: its evaluation.
CURVE_COLUMNS: tuple[str, ...] = (
    "curve_id",
    *IDENTITY,
    "point",
    "point_flops",
    "final",
    "evaluation",
    "target_rho",
    "P",
    "G",
    "K",
    "mu",
    "model",
    "reward_system",
    "rho",
    "C_search",
    "C_learning",
    "C_reward",
    "C_total",
    "rho_executed",
    "C_total_executed",
    "rho_time",
    "rounds",
    "steps",
    *METRICS,
    "seconds_train",
    "seconds_eval",
    "status",
    "error",
    "git_sha",
    "created_at",
)


def curve_id(run_id: str, point: float) -> str:
    """The key of a run's row at budget ``point`` (a multiple of the full budget) in ``curves.csv``."""
    return f"{run_id}@{point:g}"


# The columns a run's spec fills (:func:`row_identity`), each with how the spec gives it; the rest of
# its row is measured (rho, C_*, rounds, metrics, seconds) or stamped (provenance).
FROM_SPEC: dict[str, Any] = {
    "run_id": lambda s: s.run_id,
    "profile": lambda s: s.profile,
    "stage": lambda s: s.stage,
    "setting": lambda s: s.setting,
    "cell": lambda s: s.cell,
    "seed": lambda s: s.seed,
    "budget_kind": lambda s: s.budget_kind,
    "budget_flops": lambda s: s.budget_flops,
    MULTIPLE: lambda s: budget_multiple(s.budget_flops, s.full_budget),
    "target_rho": lambda s: s.target_rho,
    "predicted_rho": lambda s: s.predicted_rho,
    "P": lambda s: s.P,
    "G": lambda s: s.G,
    "K": lambda s: s.K,
    "mu": lambda s: s.mu,
    "model": lambda s: s.policy,
    "reward_system": lambda s: s.reward_system,
    "learning_rate": lambda s: s.train.learning_rate,
    "lora_rank": lambda s: s.train.lora_rank,
    "temperature": lambda s: s.train.temperature,
    "max_completion_length": lambda s: s.train.max_completion_length,
}
# Who asked for a run, not what it computes: a run serves every spec that computes the same thing,
# and a row read for a spec carries that spec's labels (paper_repro.run.runner.rows_for). The budget's
# multiple is one: the same budget is another multiple of another profile's C.
LABELS = ("stage", "setting", "cell", "target_rho", MULTIPLE)
assert set(FROM_SPEC) <= set(RUN_COLUMNS) and set(LABELS) <= set(FROM_SPEC)


def budget_multiple(budget_flops: Any, full_budget: float | None) -> float:
    """``budget_flops`` as a multiple of the full budget C (both in FLOPs): 2.0 at 2C, 0.5 at C/2;
    NaN where C or the budget is not known (never a guess)."""
    try:
        budget = float(budget_flops)
    except (TypeError, ValueError):
        return math.nan
    return budget / full_budget if full_budget and full_budget > 0 else math.nan


def recorded_multiple(row: Mapping[str, str], full_budget: FullBudget | None) -> float:
    """The ``budget_multiple`` of a row of the previous schema, from the row itself: its recorded
    spec's budget over ``full_budget(spec)``, the C of the profile the spec names; NaN where the row
    records no readable spec, or C is not known (no ``full_budget``, or it returns None)."""
    try:
        spec = json.loads(row.get("spec") or "")
    except ValueError:
        return math.nan
    if not isinstance(spec, dict) or full_budget is None:
        return math.nan
    return budget_multiple(spec.get("budget_flops"), full_budget(spec))


def row_identity(spec) -> dict[str, Any]:
    """The columns of a run's row that its spec (a :class:`paper_repro.run.spec.RunSpec`) fills:
    :data:`FROM_SPEC`, in the table's column order."""
    return {column: FROM_SPEC[column](spec) for column in RUN_COLUMNS if column in FROM_SPEC}


def labels(spec) -> dict[str, Any]:
    """The :data:`LABELS` of ``spec``: how a row is labelled for the spec that asked for it."""
    return {column: FROM_SPEC[column](spec) for column in LABELS}


class CorruptTableError(ValueError):
    """A result table that does not parse; it is never rewritten.

    A ``ValueError``, so the command line reports it in one line (``paper-repro <cmd>: error: ...``).
    """

    def __init__(self, path: Path, line: int, problem: str, fix: str | None = None) -> None:
        self.path, self.line, self.problem = path, line, problem
        fix = fix or f"restore it with `git checkout -- {path}` or remove the broken line"
        super().__init__(
            f"corrupt result table {path}, line {line}: {problem}; the table is left untouched "
            f"(rows are append-only, a corrupt table is never rewritten): {fix}"
        )


def results_dir(profile: str, root: str | Path | None = None) -> Path:
    """Where a profile's result tables are: ``root``, or the committed ``data/results/<profile>``."""
    return Path(root) if root is not None else repo_root() / "data" / "results" / profile


def quick_dir(profile: str) -> Path:
    """Where a quick (smoke) run's tables go unless told otherwise: a folder git ignores."""
    return results_dir(profile) / "quick"


class ResultTable:
    """One append-only CSV table with a fixed header and a key column. ``full_budget``: how a runs
    table of the previous schema derives ``budget_multiple`` for its rows (:data:`FullBudget`); without
    it such a table is read with NaN there and refused for writing."""

    def __init__(
        self,
        path: str | Path,
        columns: Sequence[str] = RUN_COLUMNS,
        key: str = "run_id",
        full_budget: FullBudget | None = None,
    ) -> None:
        if key not in columns:
            raise ValueError(f"key column {key!r} is not among the columns")
        self.path = Path(path)
        self.columns = tuple(columns)
        self.key = key
        self.full_budget = full_budget
        self.lock = FileLock(str(self.path) + ".lock")

    # --- reading -------------------------------------------------------------------------------
    def rows(self) -> list[dict[str, str]]:
        """Every row, as strings, after checking the table parses (raises CorruptTableError)."""
        if not self.path.exists():
            return []
        return _parse(self._current(_read(self.path)), self.path, self.columns)

    def keys(self) -> set[str]:
        return {row[self.key] for row in self.rows()}

    def done(self) -> set[str]:
        """The keys with an ``ok`` row: the runs a rerun skips."""
        return {row[self.key] for row in self.rows() if row.get("status") == "ok"}

    def __contains__(self, key: str) -> bool:
        return key in self.keys()

    def frame(self):
        """The table as a pandas DataFrame (numbers parsed), empty with the columns if absent."""
        import pandas as pd

        if not self.path.exists():
            return pd.DataFrame(columns=list(self.columns))
        text = _read(self.path)
        if self.previous(text):  # read as upgraded; the file is left as it is
            current = self._current(text)
            _parse(current, self.path, self.columns)
            return pd.read_csv(io.StringIO(current), keep_default_na=True)
        self.rows()  # check it parses before pandas guesses
        return pd.read_csv(self.path, keep_default_na=True)

    def previous(self, text: str) -> bool:
        """Whether ``text`` is a runs table of the previous schema (:data:`PREVIOUS_RUN_COLUMNS`)."""
        return self.columns == RUN_COLUMNS and text.startswith(_line(PREVIOUS_RUN_COLUMNS))

    def _current(self, text: str, writing: bool = False) -> str:
        """``text`` in the current schema: as it is, or a previous-schema runs table upgraded
        (:func:`upgrade_text`); ``writing``: refused unless ``full_budget`` says each row's C, so no
        row is written with a NaN a profile's C would have filled."""
        if not self.previous(text):
            return text
        if writing and self.full_budget is None:
            raise ValueError(
                f"{self.path} has the runs table's previous schema (no {MULTIPLE} column); it is "
                "upgraded by a writer that knows each profile's full budget C: open it as "
                "ResultTable(path, full_budget=paper_repro.run.history.full_budget_of), or run "
                "`paper-repro split-history` on its folder"
            )
        return upgrade_text(text, self.path, self.full_budget)

    # --- writing -------------------------------------------------------------------------------
    def append(self, row: Mapping[str, Any]) -> bool:
        """Append ``row`` atomically; ``False`` (and nothing written) when its key is already there
        in a row that is not ``status=failed``. A previous-schema runs table is upgraded in the same
        write (:func:`upgrade_text`)."""
        unknown = sorted(set(row) - set(self.columns))
        if unknown:
            raise ValueError(f"unknown columns {unknown} for {self.path.name}")
        if not row.get(self.key):
            raise ValueError(f"a row needs its key {self.key!r}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.lock:
            old = self._current(_read(self.path), writing=True) if self.path.exists() else ""
            existing = _parse(old, self.path, self.columns) if old else []
            if any(r[self.key] == str(row[self.key]) and r.get("status") != "failed" for r in existing):
                return False
            text = (old if old else _line(self.columns)) + _line([_cell(row.get(c)) for c in self.columns])
            _atomic_write(self.path, text)
        return True

    def append_many(self, rows: Iterable[Mapping[str, Any]]) -> int:
        return sum(self.append(row) for row in rows)


def upgrade_text(text: str, path: Path, full_budget: FullBudget | None) -> str:
    """A runs table's ``text`` of the previous schema (:data:`PREVIOUS_RUN_COLUMNS`) in the current
    one: the header's, and each row's text with its ``budget_multiple`` (:func:`recorded_multiple`,
    NaN where ``full_budget`` is None or does not know the row's C) inserted after ``budget_flops``,
    every other byte as it was. A row whose fields up to ``budget_flops`` are not as this store writes
    them is refused (:class:`CorruptTableError`) rather than rewritten."""
    at = PREVIOUS_RUN_COLUMNS.index("budget_flops") + 1
    out = [_line(RUN_COLUMNS)]
    line = 2
    for row, record in _records(text, path, PREVIOUS_RUN_COLUMNS):
        head = _line([row[c] for c in PREVIOUS_RUN_COLUMNS[:at]])[:-1]
        if not record.startswith(head + ","):
            raise CorruptTableError(
                path,
                line,
                f"its fields up to budget_flops are not as this store writes them, so the {MULTIPLE} "
                "column cannot be inserted keeping the row's text",
                f"restore it with `git checkout -- {path}`, or write that row's first fields unquoted",
            )
        out.append(f"{head},{_cell(recorded_multiple(row, full_budget))}{record[len(head) :]}")
        line += record.count("\n")
    return "".join(out)


def upgrade_table(table: ResultTable) -> int:
    """Rewrite ``table``, a runs table of the previous schema, in the current one (:func:`upgrade_text`,
    each row's C from ``table.full_budget``), atomically under its lock: the one migration of a runs
    table, which :meth:`ResultTable.append` and :func:`move_rows` also make on writing. Returns the
    rows upgraded: 0 when the table is absent or already current (calling it again changes nothing).
    A table of any other header is refused (:class:`CorruptTableError`), nothing written."""
    if not table.path.exists():
        return 0
    with table.lock:
        text = _read(table.path)
        new = table._current(text, writing=True)
        rows = _parse(new, table.path, table.columns)
        if new == text:
            return 0
        _atomic_write(table.path, new)
    return len(rows)


def history_path(path: str | Path) -> Path:
    """Where the rows that leave a table go: ``runs_history.csv`` beside ``runs.csv``."""
    path = Path(path)
    return path.with_name(f"{path.stem}_history{path.suffix}")


def move_rows(table: ResultTable, leaves: Callable[[dict[str, str]], bool]) -> int:
    """Move the rows of ``table`` for which ``leaves(row)`` holds into its history table beside it
    (:func:`history_path`, the same columns); returns how many left. Under both tables' locks: the
    history first (appended to; a row already there is not written again), then the table without
    them, each written atomically, every other row's text as it was (a previous-schema table upgraded,
    :func:`upgrade_text`). A writer killed between the two
    leaves the rows in both, and the next call finishes the move: calling it again moves nothing."""
    history = ResultTable(history_path(table.path), table.columns, table.key, table.full_budget)
    if not table.path.exists():
        return 0
    with table.lock:
        # a previous-schema table (and its history) is upgraded in the same writes (upgrade_text)
        records = _records(table._current(_read(table.path), writing=True), table.path, table.columns)
        flags = [bool(leaves(row)) for row, _ in records]
        moving = [line for (_, line), out in zip(records, flags, strict=True) if out]
        if not moving:
            return 0
        kept = [line for (_, line), out in zip(records, flags, strict=True) if not out]
        with history.lock:
            old = history._current(_read(history.path), writing=True) if history.path.exists() else ""
            have = {line for _, line in _records(old, history.path, history.columns)} if old else set()
            added = [line for line in moving if line not in have]
            if added:
                _atomic_write(history.path, (old or _line(table.columns)) + "".join(added))
            _atomic_write(table.path, _line(table.columns) + "".join(kept))
    return len(moving)


def _records(text: str, path: Path, columns: Sequence[str]) -> list[tuple[dict[str, str], str]]:
    """Each row of a table's ``text`` (checked, :func:`_parse`) with its own text, as written (a
    quoted field may span lines)."""
    rows = _parse(text, path, columns)
    if not rows:
        return []
    ends = [i + 1 for i, c in enumerate(text) if c == "\n"]  # offset past each physical line
    reader = csv.reader(io.StringIO(text), strict=True)
    next(reader)  # the header
    lines, start = [], ends[0]
    for _ in rows:
        next(reader)
        end = ends[reader.line_num - 1]
        lines.append(text[start:end])
        start = end
    return list(zip(rows, lines, strict=True))


def _read(path: Path) -> str:
    """The table's text; bytes that do not decode are a corrupt table, reported with their line."""
    try:
        return path.read_text()
    except UnicodeDecodeError as err:
        raw = path.read_bytes()
        try:  # the error's offset is within the decoder's chunk: decode whole to find the line
            raw.decode(err.encoding)
            start = err.start
        except UnicodeDecodeError as whole:
            start = whole.start
        line = raw[:start].count(b"\n") + 1
        raise CorruptTableError(path, line, f"not {err.encoding} text (byte {start})") from None


def _parse(text: str, path: Path, columns: Sequence[str]) -> list[dict[str, str]]:
    if not text:
        return []
    if not text.endswith("\n"):
        raise CorruptTableError(
            path,
            text.count("\n") + 1,
            "the last line has no newline (the file was cut short or edited by hand; "
            "this store writes whole rows atomically)",
            f"restore it with `git checkout -- {path}`, or remove that line if it is cut short "
            "(end it with a newline if it is whole)",
        )
    reader = csv.reader(io.StringIO(text), strict=True)  # strict: a stray or unclosed quote is an error
    rows: list[dict[str, str]] = []
    line = 1  # the physical line the next record starts on (a quoted field may span lines)
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return rows
        except csv.Error as err:
            problem = (
                f"a quoted field opened in the row starting here is never closed ({err})"
                if "end of data" in str(err)
                else f"unparseable quoting ({err})"
            )
            raise CorruptTableError(path, line, problem) from None
        if line == 1:
            _check_header(fields, columns, path)
        elif tuple(fields) == tuple(columns):
            raise CorruptTableError(path, line, "a second header row (two tables joined?)")
        elif len(fields) != len(columns):
            what = "an empty line" if not fields else f"{len(fields)} fields"
            raise CorruptTableError(path, line, f"{what} where the header has {len(columns)} fields")
        else:
            rows.append(dict(zip(columns, fields, strict=True)))
        line = reader.line_num + 1


def _check_header(header: Sequence[str], columns: Sequence[str], path: Path) -> None:
    if tuple(header) == tuple(columns):
        return
    missing = [c for c in columns if c not in header]
    extra = [c for c in header if c not in columns]
    if not header:
        problem = "an empty line where the header should be"
    elif not missing and not extra:
        problem = "the header has the schema's columns in another order (or repeated)"
    else:
        problem = f"the header is not the schema (missing {_few(missing)}; unexpected {_few(extra)})"
    raise CorruptTableError(
        path,
        1,
        problem,
        f"restore it with `git checkout -- {path}`, or move it aside to start a new table "
        "(a table from another schema version is not read)",
    )


def _few(names: Sequence[str], most: int = 4) -> str:
    """``names`` for a one-line message: all of a few, or the count and the first ``most``."""
    if not names:
        return "none"
    if len(names) <= most:
        return ", ".join(repr(n) for n in names)
    return f"{len(names)} columns: " + ", ".join(repr(n) for n in names[:most]) + ", ..."


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    return str(value)


def _line(fields: Sequence[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(fields)
    return buf.getvalue()


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# A derived table's floats are written to this many significant digits: their last digits depend on
# the CPU's SIMD and BLAS kernels (AVX-512 against AVX2: up to 4e-14 relative on the committed study).
SIGNIFICANT_DIGITS = 10


def float_text(value: float) -> str:
    """``value`` as Python writes it, to :data:`SIGNIFICANT_DIGITS` significant digits unless it is a
    whole number (a count or a FLOP total: exact on every machine, and kept so)."""
    value = float(value)
    return repr(value if value.is_integer() else float(f"{value:.{SIGNIFICANT_DIGITS}g}"))


def write_table(path: str | Path, frame) -> Path:
    """Write a derived table (a DataFrame) atomically, its float columns to :data:`SIGNIFICANT_DIGITS`
    significant digits (so a rerun on another machine writes the same bytes); for tables rebuilt
    whole, not appended to."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, frame.to_csv(index=False, float_format=float_text))
    return path
