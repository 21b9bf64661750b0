"""Does a recomputed study that is not bit for bit the committed one reproduce *as science*? The
checks :mod:`paper_repro.drivers.reproduce` adds to its run-by-run comparison, and the one rule that
names the outcome (:func:`outcome`):

- per claim (``claims.csv``, and stage E's ``test_time_claims.csv`` where both sides have it): both
  verdicts, both estimates, and whether the recomputed estimate lies inside the committed interval
  (:func:`claim_checks`);
- per metric (:data:`paper_repro.common.results.METRICS`), the matched runs' differences against the
  study's own seed-to-seed spread (:func:`noise_checks`): a run that differs is taken as a reseed of it
  (a sampled token flipped by a float rounding changes the trajectory from there on, as another seed
  does), so its difference should be the size two seeds of its cell differ by, with no sign. Two tests
  over the differing runs, each at :data:`ALPHA` shared (Bonferroni) over the metrics and the two tests:
  *shift*, the Wilcoxon signed-rank test of a median difference of 0 (paired, no normality assumed;
  bit-equal runs carry no sign and are left out); *scale*, the sum of the squared differences in units
  of ``sqrt(2)`` x their setting's pooled within-cell seed SD, against chi-square with one degree of
  freedom a differing run (a difference larger than a reseed makes). docs/CHOICES.md says why.

Stage E's other tables (``test_time_*.csv``) are compared bit for bit (:func:`table_checks`): a
difference there reproduces within noise when stage E's claims keep their verdicts and intervals.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from paper_repro.common.paths import repo_relative
from paper_repro.common.results import METRICS
from paper_repro.common.rowdiff import TOLERANCE

ALPHA = 0.01  # the family-wise rate at which reseeded runs are called beyond noise
CELL = ["setting", "cell", "budget_kind", "budget_multiple"]  # the runs that differ only by seed
# The claims tables compared, each with the columns that name a row and its estimate's column.
CLAIM_TABLES = {
    "claims.csv": (("id",), "our_value"),
    "test_time_claims.csv": (("id", "where", "set"), "estimate"),
}
CLAIM_COLUMNS = (
    *("table", "claim", "verdict_committed", "verdict_recomputed", "estimate_committed"),
    *("estimate_recomputed", "ci_low", "ci_high", "moved", "outside"),
)
TEST_TIME = "test_time_*.csv"  # stage E's tables, compared where both sides have them
TIMES = "seconds_"  # a column of measured seconds: another machine's, never compared
RELATIVE = 1e-6  # stage E's tables hold 6 significant digits: a cell within this is the same number

BIT_FOR_BIT = "reproduces bit for bit"
WITHIN_NOISE = "reproduces within noise"
NOT_REPRODUCED = "does not reproduce"


def seed_spread(runs: pd.DataFrame, metrics: tuple[str, ...] = METRICS) -> pd.DataFrame:
    """Per setting (and ``*``, every setting pooled) and metric, the pooled within-cell SD of the ok
    ``runs``: cells are the runs alike but for their seed (:data:`CELL`); a setting with no cell of two
    seeds takes the pooled one. In the metric's units (a share of problems or a mean reward)."""
    ok = runs[runs["status"] == "ok"]
    rows = []
    for setting, group in [("*", ok), *ok.groupby("setting")]:
        cells = group.groupby(CELL, dropna=False)
        dof = (cells.size() - 1).clip(lower=0)
        row = {"setting": setting}
        for m in metrics:
            var = cells[m].var(ddof=1).fillna(0.0)
            row[m] = float(np.sqrt((var * dof).sum() / dof.sum())) if dof.sum() > 0 else np.nan
        rows.append(row)
    out = pd.DataFrame(rows).set_index("setting")
    return out.fillna(out.loc["*"])


@dataclass(frozen=True)
class NoiseCheck:
    metric: str
    compared: int  # matched ok runs
    differing: int  # of them beyond tolerance
    largest: float  # the largest absolute difference
    largest_in_sd: float  # ... in units of sqrt(2) x its setting's seed SD
    shift_p: float  # Wilcoxon signed-rank over the differing runs
    scale_p: float  # chi-square of their squared standardised differences
    beyond: bool  # either p under the shared level


def noise_checks(
    committed: pd.DataFrame, recomputed: pd.DataFrame, spread: pd.DataFrame, alpha: float = ALPHA
) -> pd.DataFrame:
    """One row per metric (:class:`NoiseCheck`'s fields) over the ok runs of ``committed`` whose run id
    ``recomputed`` holds with status ok; ``spread``: :func:`seed_spread` of the committed study. A metric
    one side lost (NaN against a number) is beyond noise."""
    new = recomputed[recomputed["status"] == "ok"].set_index("run_id")
    old = committed[(committed["status"] == "ok") & committed["run_id"].isin(new.index)].set_index("run_id")
    level = alpha / (2 * len(METRICS))
    sd = spread.reindex(old["setting"]).fillna(spread.loc["*"])
    out = []
    for m in METRICS:
        a, b = old[m].to_numpy(float), new.loc[old.index, m].to_numpy(float)
        d = np.where(np.isnan(a) & np.isnan(b), 0.0, b - a)
        lost = int(np.isnan(d).sum())
        differ = ~np.isnan(d) & (np.abs(d) > TOLERANCE[m])
        with np.errstate(divide="ignore"):  # a metric no seed moves: any difference is beyond its spread
            z = d[differ] / (np.sqrt(2) * sd[m].to_numpy(float)[differ])
        shift = _wilcoxon(d[differ])
        scale = float(stats.chi2.sf(np.sum(z**2), len(z))) if len(z) else 1.0
        out.append(
            NoiseCheck(
                m,
                len(d),
                int(differ.sum()) + lost,
                float("inf") if lost else float(np.abs(d).max(initial=0.0)),
                float(np.max(np.abs(z))) if len(z) else 0.0,
                shift,
                scale,
                bool(lost or min(shift, scale) < level),
            )
        )
    return pd.DataFrame([asdict(c) for c in out])


def _wilcoxon(d: np.ndarray) -> float:
    """The two-sided p of the Wilcoxon signed-rank test that ``d``'s median is 0 (1 where fewer than
    two differences: no sign pattern to test)."""
    if len(d) < 2:
        return 1.0
    return float(stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def claim_checks(committed: pd.DataFrame, recomputed: pd.DataFrame, table: str) -> pd.DataFrame:
    """Per claim of either table (``table``: a key of :data:`CLAIM_TABLES`): its key, both verdicts
    (``absent`` where one side lacks it), both estimates, the committed interval, ``moved`` (the
    verdict differs) and ``outside`` (the recomputed estimate lies outside the committed interval; a
    claim with no interval or no estimate is never outside: its verdict alone is compared)."""
    keys, estimate = CLAIM_TABLES[table]
    left = committed[[*keys, "verdict", estimate, "ci_low", "ci_high"]]
    right = recomputed[[*keys, "verdict", estimate]]
    both = left.merge(right, on=list(keys), how="outer", suffixes=("_committed", "_recomputed"))
    both = both.rename(columns={f"{estimate}_committed": "estimate_committed"})
    both = both.rename(columns={f"{estimate}_recomputed": "estimate_recomputed"})
    for side in ("committed", "recomputed"):
        both[f"verdict_{side}"] = both[f"verdict_{side}"].fillna("absent")
    both["moved"] = both["verdict_committed"] != both["verdict_recomputed"]
    low, high, value = (both[c].astype(float) for c in ("ci_low", "ci_high", "estimate_recomputed"))
    both["outside"] = (value < low - 1e-12) | (value > high + 1e-12)  # NaN compares False: not outside
    both.insert(0, "table", table)
    both["claim"] = both[list(keys)].astype(str).agg(" ".join, axis=1)
    return both[list(CLAIM_COLUMNS)]


def read_claims(old_dir: Path, new_dir: Path, required: bool = True) -> pd.DataFrame:
    """:func:`claim_checks` of every table of :data:`CLAIM_TABLES` both folders hold; where
    ``required``, ``claims.csv`` missing on either side is one row that moved (the study's claims
    cannot be compared)."""
    parts = []
    for name in CLAIM_TABLES:
        old, new = old_dir / name, new_dir / name
        if old.exists() and new.exists():
            parts.append(claim_checks(pd.read_csv(old), pd.read_csv(new), name))
        elif required and name == "claims.csv":
            lacking = ", ".join(repo_relative(p) for p in (old, new) if not p.exists())
            parts.append(
                pd.DataFrame(
                    {
                        "table": [name],
                        "claim": ["(all)"],
                        "verdict_committed": [f"no claims table: {lacking}"],
                    }
                    | {"verdict_recomputed": ["absent"], "moved": [True], "outside": [False]}
                )
            )
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(CLAIM_COLUMNS))


def table_checks(old_dir: Path, new_dir: Path) -> pd.DataFrame:
    """Per stage E table (:data:`TEST_TIME`) both folders hold: its rows on each side and the rows that
    differ (a cell beyond :data:`RELATIVE`, or another text; every row where the shapes differ); the
    measured seconds (:data:`TIMES`) are not compared."""
    out = []
    for old in sorted(old_dir.glob(TEST_TIME)):
        new = new_dir / old.name
        if not new.exists():
            continue
        a, b = pd.read_csv(old), pd.read_csv(new)
        out.append(
            {"table": old.name, "committed": len(a), "recomputed": len(b), "differing": _differing(a, b)}
        )
    return pd.DataFrame(out, columns=["table", "committed", "recomputed", "differing"])


def _differing(a: pd.DataFrame, b: pd.DataFrame) -> int:
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return max(len(a), len(b))
    same = np.ones(len(a), dtype=bool)
    for c in a.columns:
        if c.startswith(TIMES):
            continue
        x, y = a[c], b[c]
        if pd.api.types.is_numeric_dtype(x) and pd.api.types.is_numeric_dtype(y):
            same &= np.isclose(x.to_numpy(float), y.to_numpy(float), rtol=RELATIVE, atol=0, equal_nan=True)
        else:
            same &= (
                x.astype(object).fillna("").astype(str) == y.astype(object).fillna("").astype(str)
            ).to_numpy()
    return int((~same).sum())


def outcome(
    runs_equal: bool, runs_lost: bool, noise: pd.DataFrame, claims: pd.DataFrame, tables: pd.DataFrame
) -> tuple[str, list[str]]:
    """The outcome (:data:`BIT_FOR_BIT`, :data:`WITHIN_NOISE` or :data:`NOT_REPRODUCED`) and, for the
    last, what moved. ``runs_equal``: every matched run within tolerance and none lost or changed in
    status; ``runs_lost``: a committed run missing or changed in status (never within noise: a run the
    study asked for is not there to compare)."""
    moved = claims[claims["moved"]]
    outside = claims[claims["outside"] & ~claims["moved"]]
    beyond = noise[noise["beyond"]]
    tables_equal = tables.empty or int(tables["differing"].sum()) == 0
    estimates_equal = _estimates_equal(claims)
    if runs_equal and moved.empty and tables_equal and estimates_equal:
        return BIT_FOR_BIT, []
    what = []
    if runs_lost:
        what.append("committed runs missing or with another status")
    what += [
        f"verdict {r.claim}: {r.verdict_committed} -> {r.verdict_recomputed}" for r in moved.itertuples()
    ]
    what += [
        f"estimate {r.claim}: {r.estimate_recomputed:.4g} outside [{r.ci_low:.4g}, {r.ci_high:.4g}]"
        for r in outside.itertuples()
    ]
    what += [
        f"{r.metric}: {r.differing} runs differ beyond the seed spread (shift p {r.shift_p:.2g}, "
        f"scale p {r.scale_p:.2g})"
        for r in beyond.itertuples()
    ]
    return (NOT_REPRODUCED, what) if what else (WITHIN_NOISE, [])


def _estimates_equal(claims: pd.DataFrame) -> bool:
    if "estimate_committed" not in claims:
        return True
    a, b = (claims[c].astype(float).to_numpy() for c in ("estimate_committed", "estimate_recomputed"))
    return bool(np.isclose(a, b, rtol=RELATIVE, atol=0, equal_nan=True).all())
