"""Target disagreement and RACE (Reward-Aware Compute Allocation) from the result tables alone.

**RACE** runs a pilot grid per setting (the full grid's cells at a fraction of its budget, on pilot
seeds the full grid does not use), names the setting's regime from it and picks the pilots' best cell
for the full-budget run. Every rule below is fixed in code before any table is read.

**A regime is where the best cells lie** (:meth:`RegimeThresholds.classify`). Over a grid's runs, the
cells that could be best at 95% (:func:`paper_repro.analysis.stats.optima.best_set`: Gupta's subset,
Bonferroni, the profile's recipe effect allowed for) name the regime: ``update-heavy`` when every one
realises rho at or above ``rho_threshold`` (default 0.6, between the cells r50 and r66, which realise
rho 0.48-0.53 and 0.68-0.70, so seed noise never moves a cell across it), ``search-heavy`` when every one
lies below it, ``unresolved`` when the set straddles it.

**The reward's FLOP share cannot name a regime** within a setting. A reward model is paid once per
completion generated, so C_reward is a fixed multiple ``c`` of C_search in every cell of a setting
(``c`` ~ the PRM's size over the policy's; 0 for a rule-based reward), and with rho = C_learning /
C_total the share is ``C_reward / C_total = c / (1 + c) * (1 - rho)``: a function of rho alone, whose
scale is the reward class (in the cpu-tiny study, every cell of prm and proxy_prm spends 0.68 (1 - rho)
on the PRM, to within 0.002: 0.57 at rho 0.17, 0.20 at rho 0.70). A share threshold is a rho threshold in disguise,
placed by the PRM's size: a PRM setting's low-rho cells are "reward-heavy" by their share whatever
their native reward, and a rule-based setting's never are. So no reward label is given.

**Did the pilots move?** (:func:`pilot_moved`). A pilot grid that stays at the base policy carries no
information about the full grid. The pilots moved when some pilot cell's mean native reward differs
from the base policy's (``base_native_reward``) by more than its two-sided 95% t interval over the
pilot seeds, Bonferroni-adjusted over the cells. Pilots that did not move are *uninformative*: their
regime is ``uninformative`` and they are reported, never scored as agreeing or disagreeing.

**The agreement test** (:func:`pilot_agreement`, one pilot fraction, the distinct settings whose
pilots moved): per setting, the Spearman correlation of the pilot cell means with the full grid's, and
whether RACE's pick (the pilots' argmax cell) lies in the full grid's 95% best set, with its regret
on the full grid's seeds (which the pilots never used). :func:`pilot_agreement_test` states the rule.

**Descriptions only**: Cohen's kappa of the pilot regime against the full grid's
(:func:`regime_kappa`, its asymptotic interval clipped to [-1, 1]), and :func:`regime_ceiling`, how
often two disjoint halves of the full grid's seeds name the same regime. For the first pilot fraction
(the paper's 1/8; the profile's, 1/2 in cpu-tiny) :func:`race_table` also pairs RACE's pick with TRL's default allocation (K = G,
mu = 1, at the full budget), both run **on fresh seeds** that neither the pilots nor the full grid
used: the gains :func:`paper_repro.analysis.claims.tables.no_race_gain` tests.

**RACE+** (our addition; :func:`plus_pick`). The same first-fraction pilots, read along their budget
ladders: each is evaluated at the ladder's points below its budget (on cpu-tiny a pilot at C/2 at C/8
and C/4) as well as at its own. Per cell, the saturating compute curve of
:mod:`paper_repro.analysis.curves` (R0 fixed at the base policy's native reward) is fitted to every
pilot seed's points and evaluated at the full budget C; RACE+ picks the cell of the largest
prediction. A cell whose curve cannot be fitted is no candidate; with none, RACE+ has no pick. Both
picks run at C on the fresh seeds beside TRL's default. :func:`plus_table` scores the three against
the full grid, per distinct setting: the **regret** (the full grid's best cell's mean over the grid
seeds minus the pick's mean over the fresh seeds) with a seed-bootstrap interval
(:func:`regret_interval`), whether the pick lies in the full grid's best set, the pilots' share of the
grid's FLOPs, and each cell's prediction at C beside the grid's observed mean there; and one row
across the settings (:func:`plus_summary`). Descriptions: no claim is decided from them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations, permutations

import numpy as np
import pandas as pd

from paper_repro.analysis.stats.optima import Cells, best_set
from paper_repro.analysis.stats.verdict import Result
from paper_repro.results import METRICS

ALPHA = 0.05  # the pilots' interval, the best sets and the agreement test
PERMUTATIONS = 10_000  # Monte Carlo draws of the permutation test where exact enumeration is not cheap
EXACT_CELLS = 7  # settings of at most this many cells are enumerated exactly (7! = 5040 orders)
BOOTSTRAP = 2_000  # resamples of the settings for the pooled correlation's interval
MIN_MOVED = 3  # settings whose pilots moved that the agreement test needs
UNINFORMATIVE = "uninformative"
NAN = float("nan")


@dataclass(frozen=True)
class RegimeThresholds:
    """Where a regime's line lies in realised rho (a parameter: the paper's is unknown)."""

    rho_threshold: float = 0.6  # every best cell at or above: update-heavy; every one below: search-heavy

    def classify(self, best_rhos) -> str:
        """The regime named by the realised rhos of the cells that could be best: ``update-heavy``,
        ``search-heavy``, ``unresolved`` (the set straddles the threshold) or ``unknown`` (no cell)."""
        rhos = np.asarray(best_rhos, float)
        rhos = rhos[~np.isnan(rhos)]
        if rhos.size == 0:
            return "unknown"
        if (rhos >= self.rho_threshold).all():
            return "update-heavy"
        return "search-heavy" if (rhos < self.rho_threshold).all() else "unresolved"


# ---------------------------------------------------------------------------------------- cells


def best_cell(rows: pd.DataFrame) -> pd.Series:
    """The argmax cell of the native reward over ``rows`` (cell means of native reward and rho, named
    by the cell): RACE's pick from its pilots, and the full grid's best cell."""
    means = rows.groupby("cell")[["native_reward", "rho"]].mean()
    top = means["native_reward"].idxmax()
    return means.loc[top].rename(top)


def best_cells(rows: pd.DataFrame, recipe_sd: float = 0.0) -> tuple[Cells, np.ndarray]:
    """The native reward's cells of ``rows`` in order of rho and the mask of those that could be best."""
    cells = Cells.of(rows, "native_reward")
    return cells, best_set(cells, recipe_sd)


def regime(rows: pd.DataFrame, thresholds: RegimeThresholds, recipe_sd: float = 0.0) -> tuple[str, str]:
    """The regime of one grid's runs and the cells behind it (space-separated, in order of rho)."""
    cells, keep = best_cells(rows, recipe_sd)
    return thresholds.classify(cells.rho[keep]), " ".join(np.array(cells.names, dtype=object)[keep])


def cell_means(rows: pd.DataFrame) -> pd.Series:
    """The mean native reward per cell (index: the cell, as a string)."""
    means = rows.groupby("cell")["native_reward"].mean().dropna()
    return means.set_axis(means.index.astype(str))


def pilot_moved(rows: pd.DataFrame, base: float, alpha: float = ALPHA) -> tuple[bool, float]:
    """Whether some cell's mean native reward over ``rows`` (one pilot grid) lies outside its two-sided
    ``1 - alpha`` t interval around ``base``, Bonferroni over the cells; with the largest
    ``|cell mean - base|``. A cell on one seed has no interval and cannot move."""
    from scipy import stats

    g = rows.dropna(subset=["native_reward"]).groupby("cell")["native_reward"]
    mean, sd, n = g.mean(), g.std(ddof=1), g.count()
    if mean.empty or np.isnan(base):
        return False, NAN
    t = stats.t.ppf(1 - alpha / (2 * len(mean)), np.maximum(n - 1, 1))
    shift = (mean - base).abs()
    moved = (n >= 2) & (shift > t * sd / np.sqrt(n))
    return bool(moved.any()), float(shift.max())


def spearman(pilot: pd.Series, full: pd.Series) -> float:
    """Spearman's rank correlation of two cell-mean profiles over the cells both have (NaN with fewer
    than three or a constant profile)."""
    from scipy import stats

    common = pilot.index.intersection(full.index)
    a, b = pilot[common].to_numpy(float), full[common].to_numpy(float)
    if len(common) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return NAN
    return float(stats.spearmanr(a, b).statistic)


def means_text(means: pd.Series) -> str:
    """A cell-mean profile as a table cell: ``r15=0.4812 r30=0.5033 ...``."""
    return " ".join(f"{cell}={value:.10g}" for cell, value in means.items())


def parse_means(text: str) -> pd.Series:
    """The inverse of :func:`means_text`."""
    pairs = [item.split("=") for item in str(text).split()] if isinstance(text, str) else []
    return pd.Series({cell: float(value) for cell, value in pairs}, dtype=float)


# ---------------------------------------------------------------------------------------- tables


def disagreement_table(frontier: pd.DataFrame) -> tuple[pd.DataFrame, float]:
    """Per setting: the argmax cell of each target (a description; the claim is decided from the
    targets' best sets, :func:`paper_repro.analysis.claims.frontier.disagree`)."""
    out = []
    for (stage, setting), f in frontier.groupby(["stage", "setting"], sort=False):
        rec = {"stage": stage, "setting": setting}
        for t in METRICS:
            rec[f"best_{t}"] = f.loc[f[t].idxmax(), "cell"] if f[t].notna().any() else None
            rec[f"rho_star_{t}"] = f.loc[f[t].idxmax(), "rho"] if f[t].notna().any() else float("nan")
        picks = {rec[f"best_{t}"] for t in METRICS if rec[f"best_{t}"] is not None}
        rec["distinct_picks"] = len(picks)
        rec["targets_disagree"] = len(picks) > 1
        out.append(rec)
    table = pd.DataFrame(out)
    share = float(table["targets_disagree"].mean()) if len(table) else float("nan")
    return table, share


def regime_ceiling(
    full_rows: pd.DataFrame, names, thresholds: RegimeThresholds, recipe_sd: float = 0.0
) -> float:
    """A description: the share of (setting, split) in which two disjoint halves of the full grid's
    seeds name the same regime (from their best sets), over every split of the seeds into halves; NaN
    with fewer than two seeds."""
    same = []
    for name in names:
        rows = full_rows[full_rows["setting"] == name].dropna(subset=["native_reward", "rho"])
        reward = rows.pivot_table(index="cell", columns="seed", values="native_reward", aggfunc="mean")
        rho = rows.pivot_table(index="cell", columns="seed", values="rho", aggfunc="mean")
        seeds = list(reward.columns)
        if len(seeds) < 2:
            continue
        for half in combinations(seeds, len(seeds) // 2):
            rest = [s for s in seeds if s not in half]
            labels = [
                _half_regime(reward[list(h)], rho[list(h)], thresholds, recipe_sd) for h in (half, rest)
            ]
            same.append(labels[0] == labels[1])
    return float(np.mean(same)) if same else float("nan")


def _half_regime(reward: pd.DataFrame, rho: pd.DataFrame, thresholds, recipe_sd: float) -> str:
    """The regime of a cell x seed table of native rewards (and one of rhos), without regrouping."""
    order = np.argsort(rho.mean(axis=1).to_numpy(float), kind="stable")
    cells = Cells(
        tuple(map(str, reward.index[order])),
        rho.mean(axis=1).to_numpy(float)[order],
        reward.mean(axis=1).to_numpy(float)[order],
        reward.var(axis=1, ddof=1).to_numpy(float)[order],
        reward.count(axis=1).to_numpy(int)[order],
    )
    return thresholds.classify(cells.rho[best_set(cells, recipe_sd)])


def race_table(
    full_rows: pd.DataFrame,
    pilots: dict[float, pd.DataFrame],
    fresh_rows: pd.DataFrame,
    fresh_defaults: pd.DataFrame,
    shared: dict[str, str],
    thresholds: RegimeThresholds = RegimeThresholds(),
    recipe_sd: float = 0.0,
) -> tuple[pd.DataFrame, np.ndarray]:
    """One row per setting with both grids and pilot fraction (``pilots``: fraction -> its pilot rows;
    the first fraction's pick is the one run on fresh seeds), and the fresh-seed gains of that pick
    over TRL's default (one per distinct setting and fresh seed). ``fresh_rows``: full-budget grid
    cells on the fresh seeds; ``fresh_defaults``: the default allocation on them; ``recipe_sd``: the
    recipe effect the best sets allow for."""
    out, gains = [], []
    first = next(iter(pilots), None)
    for (stage, setting), fr in full_rows.groupby(["stage", "setting"], sort=False):
        if fr["native_reward"].isna().all():
            continue
        full = _full_side(fr, thresholds, recipe_sd)
        for fraction, pilot_rows in pilots.items():
            pr = pilot_rows[(pilot_rows["stage"] == stage) & (pilot_rows["setting"] == setting)]
            if pr.empty or pr["native_reward"].isna().all():
                continue
            rec = {"stage": stage, "setting": setting, "pilot_fraction": fraction}
            rec.update(_pilot_side(pr, fr, thresholds, recipe_sd))
            rec.update(full)
            rec.update(_comparison(rec, pr, fr))
            if fraction == first:
                paired = _fresh_pairs(
                    fresh_rows, fresh_defaults, stage, setting, rec["pilot_best_cell"], set(pr["seed"])
                )
                if setting not in shared:
                    gains.extend(paired["gain"].tolist())
                rec.update(_fresh_columns(paired))
            flops = fr["C_total"].sum()
            rec.update({
                "pilot_flops": pr["C_total"].sum(), "full_grid_flops": flops,
                "pilot_flops_fraction": pr["C_total"].sum() / flops if flops else NAN,
                "same_runs_as": shared.get(setting, ""), "rho_threshold": thresholds.rho_threshold,
                "recipe_sd": recipe_sd,
            })  # fmt: skip
            out.append(rec)
    return pd.DataFrame(out), np.asarray(gains, dtype=float)


def _full_side(fr: pd.DataFrame, thresholds: RegimeThresholds, recipe_sd: float) -> dict:
    """The full grid's columns of a RACE row: its best cell, best set and regime, and its cell means."""
    fb = best_cell(fr)
    label, cells = regime(fr, thresholds, recipe_sd)
    return {
        "full_best_cell": fb.name, "full_rho_star": fb["rho"], "full_best_cells": cells, "full_regime": label,
        "full_seeds": int(fr["seed"].nunique()), "oracle_native_reward": fb["native_reward"],
        "full_cell_means": means_text(cell_means(fr)),
    }  # fmt: skip


def _pilot_side(pr: pd.DataFrame, fr: pd.DataFrame, thresholds: RegimeThresholds, recipe_sd: float) -> dict:
    """The pilot grid's columns of a RACE row: whether it moved off the base policy, its pick, best set
    and regime (``uninformative`` when it did not move), and its cell means."""
    base = pd.concat([pr["base_native_reward"], fr["base_native_reward"]]).dropna()
    base = float(base.iloc[0]) if len(base) else NAN
    moved, shift = pilot_moved(pr, base)
    pb = best_cell(pr)
    label, cells = regime(pr, thresholds, recipe_sd)
    return {
        "pilot_seeds": int(pr["seed"].nunique()), "base_native_reward": base, "pilot_max_shift": shift,
        "pilot_moved": moved, "pilot_best_cell": pb.name, "pilot_rho_star": pb["rho"],
        "pilot_best_cells": cells, "pilot_regime": label if moved else UNINFORMATIVE,
        "pilot_cell_means": means_text(cell_means(pr)),
    }  # fmt: skip


def _comparison(rec: dict, pr: pd.DataFrame, fr: pd.DataFrame) -> dict:
    """The pilots against the full grid: same regime (NaN for uninformative pilots), the Spearman
    correlation of the cell means, whether the pick lies in the full best set, and its regret (the full
    grid's best cell mean minus the pick's, both on the full grid's seeds)."""
    full = cell_means(fr)
    pick = str(rec["pilot_best_cell"])
    return {
        "same_regime": rec["pilot_regime"] == rec["full_regime"] if rec["pilot_moved"] else NAN,
        "spearman": spearman(cell_means(pr), full),
        "pick_in_full_best_set": pick in rec["full_best_cells"].split(),
        "race_regret": full.max() - full.get(pick, NAN),
    }


def _fresh_columns(paired: pd.DataFrame) -> dict:
    """The first pilot fraction's pick against TRL's default on the fresh seeds."""
    mean = (lambda c: paired[c].mean()) if len(paired) else (lambda c: NAN)
    return {
        "fresh_seeds": len(paired),
        "race_pick_native_reward": mean("pick"),
        "default_native_reward": mean("default"),
        "race_gain_vs_default": mean("gain"),
    }


def _fresh_pairs(fresh_rows, fresh_defaults, stage, setting, pick, pilot_seeds) -> pd.DataFrame:
    """Per fresh seed (none the pilots used): the pick's native reward, the default's, and the gain."""
    mine = lambda rows: rows[(rows["stage"] == stage) & (rows["setting"] == setting)]  # noqa: E731
    f, d = mine(fresh_rows), mine(fresh_defaults)
    f, d = f[~f["seed"].isin(pilot_seeds)], d[~d["seed"].isin(pilot_seeds)]
    pick_by_seed = f[f["cell"] == pick].groupby("seed")["native_reward"].mean()
    default_by_seed = d.groupby("seed")["native_reward"].mean()
    pairs = pd.DataFrame({"pick": pick_by_seed, "default": default_by_seed}).dropna()
    return pairs.assign(gain=pairs["pick"] - pairs["default"])


# ---------------------------------------------------------------------------------------- the tests


def distinct_rows(race: pd.DataFrame) -> pd.DataFrame:
    """One RACE row per distinct setting: rows reusing another setting's runs left out."""
    if "same_runs_as" in race:
        race = race[race["same_runs_as"].fillna("") == ""]
    return race.drop_duplicates("setting")


def moved_rows(race: pd.DataFrame) -> pd.DataFrame:
    """The distinct settings' rows whose pilots moved off the base policy."""
    race = distinct_rows(race)
    return race[race["pilot_moved"].astype(bool)]


def regime_kappa(race: pd.DataFrame) -> tuple[float, float, float]:
    """A description: Cohen's kappa (statsmodels) of the pilot regime against the full grid's over the
    distinct settings whose pilots moved, with its asymptotic 95% interval clipped to [-1, 1]; NaNs
    when fewer than two labels occur (kappa is undefined)."""
    from statsmodels.stats.inter_rater import cohens_kappa

    race = moved_rows(race)
    labels = sorted(set(race["pilot_regime"]) | set(race["full_regime"]))
    if len(labels) < 2:
        return NAN, NAN, NAN
    table = pd.crosstab(race["pilot_regime"], race["full_regime"])
    with np.errstate(divide="ignore", invalid="ignore"):
        k = cohens_kappa(table.reindex(index=labels, columns=labels, fill_value=0).to_numpy())
    low, high = np.clip([float(k.kappa_low), float(k.kappa_upp)], -1.0, 1.0)
    return float(k.kappa), float(low), float(high)


def pilot_agreement(
    race: pd.DataFrame, alpha: float = ALPHA, draws: int = PERMUTATIONS, seed: int = 0
) -> Result:
    """The pre-registered test that RACE's pilots (one pilot fraction's rows of :func:`race_table`)
    name the full grid's optimum, by :func:`pilot_agreement_test`'s rule. ``value``: the pooled
    Spearman correlation; ``low``/``high``: its 95% percentile bootstrap interval over settings."""
    race = distinct_rows(race)
    moved = moved_rows(race)
    k, n = len(moved), len(race)
    head = f"uninformative pilots: {k} of {n} settings moved off the base policy"
    if k < MIN_MOVED:
        return Result(note=f"{head} (the test needs at least {MIN_MOVED})")
    pairs = [p for p in (_aligned(r) for _, r in moved.iterrows()) if p is not None]
    rhos = moved["spearman"].dropna().to_numpy(float)
    pooled = float(rhos.mean()) if len(rhos) else NAN
    p = permutation_p(pairs, draws, seed) if len(pairs) else NAN
    inside = moved["pick_in_full_best_set"].astype(bool).to_numpy()
    if p < alpha and inside.all():
        verdict = "held"
    elif pooled <= 0 or (~inside).sum() > k / 2:
        verdict = "not held"
    else:
        verdict = "inconclusive"
    low, high = _bootstrap_mean(rhos, seed)
    note = (
        f"{k} of {n} settings moved off the base policy; pooled Spearman {pooled:.2f} over {len(rhos)}, "
        f"permutation p {p:.2g}; RACE's pick in the full grid's 95% best set in {int(inside.sum())} of {k}; "
        f"mean regret {moved['race_regret'].mean():.3f}"
    )
    cells = "; ".join(f"{r['setting']}: {r['full_best_cells']}" for _, r in moved.iterrows())
    return Result(pooled, low, high, verdict, note, cells)


def pilot_agreement_test(alpha: float = ALPHA) -> str:
    return (
        "over the distinct settings whose pilots moved off the base policy (some pilot cell's mean native "
        f"reward outside its two-sided {1 - alpha:.0%} t interval around the base policy's over the pilot seeds, "
        "Bonferroni over the cells; pilots that did not move are uninformative, reported and never scored): "
        "per setting, Spearman's correlation of the pilot cell means with the full grid's, pooled as their "
        "mean, with a one-sided permutation p (pilot cell means shuffled within each setting; exact, or "
        f"{PERMUTATIONS} draws with seed 0), and whether RACE's pick (the pilots' argmax cell) lies in the "
        f"full grid's {1 - alpha:.0%} best set (Gupta's subset, Bonferroni, with the recipe effect): held if "
        f"p < {alpha} and the pick lies in the best set in every moved setting; not held if the pooled "
        "correlation is <= 0 or the pick lies outside the best set in more than half of them; inconclusive "
        f"otherwise, and with fewer than {MIN_MOVED} moved settings (our_value: the pooled correlation, with "
        "a percentile bootstrap over settings)"
    )


def _aligned(row: pd.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """One RACE row's pilot and full cell means over the cells both have; None when its Spearman
    correlation is undefined."""
    pilot, full = parse_means(row["pilot_cell_means"]), parse_means(row["full_cell_means"])
    if np.isnan(spearman(pilot, full)):
        return None
    common = pilot.index.intersection(full.index)
    return pilot[common].to_numpy(float), full[common].to_numpy(float)


def _rank_correlations(pilots: np.ndarray, full: np.ndarray) -> np.ndarray:
    """Spearman's correlation of each row of ``pilots`` (orders of one setting's pilot means) with
    ``full``: the Pearson correlation of their (mid-)ranks."""
    from scipy import stats

    a = stats.rankdata(pilots, axis=-1)
    b = stats.rankdata(full)
    a, b = a - a.mean(axis=-1, keepdims=True), b - b.mean()
    return (a @ b) / np.sqrt((a * a).sum(axis=-1) * (b @ b))


def permutation_p(pairs, draws: int = PERMUTATIONS, seed: int = 0) -> float:
    """One-sided p of the summed (so the mean) Spearman correlation over ``pairs`` (pilot, full cell
    means per setting) when the pilot means are shuffled within each setting: exact, by convolving
    each setting's distribution over every order, when each has at most :data:`EXACT_CELLS` cells;
    else ``draws`` Monte Carlo shuffles (fixed RNG ``seed``)."""
    observed = sum(float(_rank_correlations(p[None, :], f)[0]) for p, f in pairs)
    if all(len(p) <= EXACT_CELLS for p, _ in pairs):
        sums = {0.0: 1.0}
        for p, f in pairs:
            values, counts = np.unique(
                np.round(_rank_correlations(np.array(list(permutations(p))), f), 9), return_counts=True
            )
            grown = defaultdict(float)
            for total, weight in sums.items():
                for v, c in zip(values, counts / counts.sum(), strict=True):
                    grown[round(total + v, 9)] += weight * c
            sums = grown
        return float(min(1.0, sum(w for total, w in sums.items() if total >= observed - 1e-6)))
    rng = np.random.default_rng(seed)
    null = sum(_rank_correlations(rng.permuted(np.tile(p, (draws, 1)), axis=1), f) for p, f in pairs)
    return float((1 + np.sum(null >= observed - 1e-9)) / (1 + draws))


def _bootstrap_mean(values: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of the mean of ``values`` (resampled with replacement)."""
    if len(values) == 0:
        return NAN, NAN
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(BOOTSTRAP, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


# ---------------------------------------------------------------------------------------- RACE+

PREDICTION_COLUMNS = ["cell", "rho", "n_points", "n_seeds", "pilot_point", "pilot_mean", "predicted", "pred_lo",
                      "pred_hi", "A", "C_mid", "B", "R0", "candidate", "status"]  # fmt: skip
POINT_COLUMNS = ["run_id", "point", "point_flops", "native_reward", "status"]


def pilot_points(pilot_rows: pd.DataFrame, pilot_curves: pd.DataFrame, full_flops: float) -> pd.DataFrame:
    """The points of each pilot run's compute curve, as ``curves.csv`` rows (``point`` a multiple of the
    full budget ``full_flops``): its rows there whose run is one of ``pilot_rows`` (the ladder's points
    below the pilot budget and the pilot budget itself), and its row of ``pilot_rows`` as its point at
    its own budget where ``curves.csv`` has none (a run recorded without its curve). Each labelled with
    its run's ``cell`` and ``seed`` as ``pilot_rows`` name them (a run may serve two settings)."""
    from paper_repro.analysis.curves import prepared

    rows = pilot_rows
    if "status" in rows:
        rows = rows[rows["status"].astype(str) == "ok"]
    labels = rows[["run_id", "cell", "seed"]].drop_duplicates("run_id")
    budget = pd.to_numeric(rows["budget_flops"], errors="coerce")
    own = pd.DataFrame({"run_id": rows["run_id"], "point": budget / full_flops, "point_flops": budget,
                        "native_reward": rows["native_reward"], "status": "ok"})  # fmt: skip
    parts = [own]
    if len(pilot_curves) and set(POINT_COLUMNS) <= set(pilot_curves.columns):
        curves = pilot_curves[pilot_curves["run_id"].isin(set(labels["run_id"]))]
        parts.insert(0, curves[POINT_COLUMNS])
    points = prepared(pd.concat(parts, ignore_index=True))
    points = points.drop_duplicates(["run_id", "point"], keep="first")  # curves.csv's own rows first
    return points.merge(labels, on="run_id", how="inner")


def plus_pick(
    pilot_rows: pd.DataFrame,
    pilot_curves: pd.DataFrame,
    base: float,
    full_flops: float,
    bootstrap: int | None = None,
    seed: int = 0,
) -> tuple[str | None, pd.DataFrame]:
    """RACE+'s pick from one setting's pilots at one pilot budget (``pilot_rows``: their ok rows of
    ``runs.csv``; ``pilot_curves``: rows of ``curves.csv``, any runs'), and the predictions behind it.

    Per cell, the saturating curve of :mod:`paper_repro.analysis.curves` (:func:`~curves.fit_saturating`,
    on the per-point seed means weighted by their seed counts; R0 fixed to ``base``, the base
    policy's native reward, or free where it is NaN) is fitted to every pilot seed's points
    (:func:`pilot_points`: the ladder's points below the pilot budget and the pilot budget) and
    evaluated at the full budget ``full_flops`` (C, the multiple 1.0). The pick is the cell of the
    largest prediction. A cell whose fit fails (fewer distinct points than free parameters, the
    optimiser failed, a non-finite prediction) is **not a candidate**: it keeps its row with the
    reason in ``status`` and is never picked. No candidate: no pick (None).

    The table (:data:`PREDICTION_COLUMNS`, cells in order of realised rho): the points and seeds
    fitted, the pilot budget's point and mean, the prediction at C with a 95% percentile interval
    over ``bootstrap`` resamples of the pilot seeds (:data:`paper_repro.analysis.curves.BOOTSTRAP`
    when None; 0: none; NaN with one seed), the fitted parameters, and ``candidate``."""
    from paper_repro.analysis import curves as cv

    bootstrap = cv.BOOTSTRAP if bootstrap is None else bootstrap
    points = pilot_points(pilot_rows, pilot_curves, full_flops).assign(base_native_reward=base)
    x_full = float(np.log10(full_flops))
    rho = pilot_rows.groupby("cell")["rho"].mean() if "rho" in pilot_rows else pd.Series(dtype=float)
    out = []
    for cell, rows in points.groupby("cell", sort=False):
        out.append({"cell": str(cell), "rho": float(rho.get(cell, NAN)),
                    **_predict_cell(cv.Curve.of(rows, "native_reward"), x_full, bootstrap, seed)})  # fmt: skip
    table = pd.DataFrame(out, columns=PREDICTION_COLUMNS)
    table = table.sort_values("rho", kind="stable", na_position="last").reset_index(drop=True)
    table["candidate"] = table["candidate"].astype(bool)
    candidates = table[table["candidate"]]
    pick = str(candidates.loc[candidates["predicted"].idxmax(), "cell"]) if len(candidates) else None
    return pick, table


def _predict_cell(curve, x_full: float, bootstrap: int, seed: int) -> dict:
    """One cell's pilot curve (a :class:`paper_repro.analysis.curves.Curve`) fitted and evaluated at
    ``x_full = log10 C``: the columns of :data:`PREDICTION_COLUMNS` but the cell's."""
    from paper_repro.analysis import curves as cv

    mean, _ = curve.summary()
    measured = np.isfinite(mean)
    top = int(np.flatnonzero(measured)[-1]) if measured.any() else None
    out = {"n_points": int(measured.sum()), "n_seeds": curve.n_seeds,
           "pilot_point": float(curve.points[top]) if top is not None else NAN,
           "pilot_mean": float(mean[top]) if top is not None else NAN, "predicted": NAN, "pred_lo": NAN,
           "pred_hi": NAN, "A": NAN, "C_mid": NAN, "B": NAN, "R0": NAN, "candidate": False}  # fmt: skip
    needed = cv.free_parameters(curve.r0())
    if out["n_points"] < needed:
        r0 = "R0 fixed to the base policy's" if curve.r0() is not None else "R0 free: no base policy value"
        return {**out, "status": f"no fit: {out['n_points']} point(s), the fit needs {needed} ({r0})"}
    fit = curve.fit()
    predicted = float(fit(x_full)) if fit is not None else NAN
    if not np.isfinite(predicted):
        return {**out, "status": "no fit: the optimiser failed"}
    out.update(predicted=predicted, A=fit.A, C_mid=fit.C_mid, B=fit.B, R0=fit.R0, candidate=True)
    picks = curve.resamples(bootstrap, seed)
    if len(picks) == 0:
        return {**out, "status": "ok; no interval: one seed" if bootstrap else "ok"}
    draws = cv.saturating(x_full, *curve.refits(picks).T)
    good = draws[np.isfinite(draws)]
    if len(good) < cv.MIN_CONVERGED * len(draws):
        return {**out, "status": "ok; no interval: refits failed"}
    low, high = np.percentile(good, [2.5, 97.5])
    return {**out, "pred_lo": float(low), "pred_hi": float(high), "status": "ok"}


def regret_interval(
    best: np.ndarray, pick: np.ndarray, draws: int = BOOTSTRAP, seed: int = 0
) -> tuple[float, float, float, str]:
    """The regret of a pick, ``mean(best) - mean(pick)`` (``best``: the full grid's best cell's native
    reward on the grid seeds; ``pick``: the pick's on the fresh seeds), with its 95% percentile
    bootstrap interval (``draws`` resamples of each side's seeds, independently; fixed RNG ``seed``)
    and a note: NaNs and why with fewer than two seeds on a side (the value alone with one each)."""
    best, pick = (np.asarray(v, float) for v in (best, pick))
    best, pick = best[np.isfinite(best)], pick[np.isfinite(pick)]
    if len(pick) == 0:
        return NAN, NAN, NAN, "no fresh-seed result of the pick"
    if len(best) == 0:
        return NAN, NAN, NAN, "no grid result of the best cell"
    value = float(best.mean() - pick.mean())
    if len(best) < 2 or len(pick) < 2:
        return value, NAN, NAN, (f"no interval: {len(best)} grid seed(s) of the best cell and {len(pick)} fresh "
                                 "seed(s) of the pick; the bootstrap needs 2 on each side")  # fmt: skip
    rng = np.random.default_rng(seed)
    diffs = _resampled_means(best, draws, rng) - _resampled_means(pick, draws, rng)
    low, high = np.percentile(diffs, [2.5, 97.5])
    return value, float(low), float(high), ""


def _resampled_means(values: np.ndarray, draws: int, rng: np.random.Generator, shape=()) -> np.ndarray:
    """Means of ``values`` resampled with replacement, ``(draws, *shape)`` of them."""
    return values[rng.integers(0, len(values), size=(draws, *shape, len(values)))].mean(axis=-1)


PLUS_METHODS = {"race": "RACE's pick", "plus": "RACE+'s pick", "default": "TRL's default allocation"}


@dataclass(frozen=True)
class PlusTables:
    """RACE+ beside RACE and TRL's default (:func:`plus_table`): ``settings``, one row per distinct
    setting (``race_plus.csv``); ``cells``, each pilot cell's prediction at C beside the full grid's
    observed mean there (``race_plus_cells.csv``); ``summary``, one row across the settings
    (``race_plus_summary.csv``)."""

    settings: pd.DataFrame
    cells: pd.DataFrame
    summary: pd.DataFrame


def picks(
    pilot_rows: pd.DataFrame, pilot_curves: pd.DataFrame, full_flops: float, seed: int = 0
) -> tuple[str | None, str | None, pd.DataFrame]:
    """RACE's pick (the cell of the best pilot mean, :func:`best_cell`) and RACE+'s (:func:`plus_pick`,
    R0 fixed at the base policy's native reward the pilot rows carry, fitted where they carry none),
    with RACE+'s predictions, from one setting's first-fraction pilot rows (those with a native reward
    count). The study names the cells it runs on the fresh seeds here and the analysis scores the
    same, so the two cannot disagree. No pilot with a native reward: no picks."""
    rows = pilot_rows.dropna(subset=["native_reward"])
    if rows.empty:
        return None, None, pd.DataFrame(columns=PREDICTION_COLUMNS)
    plus, predictions = plus_pick(rows, pilot_curves, pilot_base(rows), full_flops, seed=seed)
    return str(best_cell(rows).name), plus, predictions


def pilot_base(pilot_rows: pd.DataFrame) -> float:
    """The base policy's native reward the pilot rows carry (RACE+'s R0), NaN where they carry none."""
    column = "base_native_reward"
    if column not in pilot_rows:
        return NAN
    base = pd.to_numeric(pilot_rows[column], errors="coerce").dropna()
    return float(base.iloc[0]) if len(base) else NAN


def plus_table(
    full_rows: pd.DataFrame,
    pilots: dict[float, pd.DataFrame],
    curves: pd.DataFrame,
    fresh_rows: pd.DataFrame,
    fresh_defaults: pd.DataFrame,
    shared: dict[str, str],
    full_flops: float,
    recipe_sd: float = 0.0,
    thresholds: RegimeThresholds = RegimeThresholds(),
    draws: int = BOOTSTRAP,
    seed: int = 0,
) -> PlusTables:
    """RACE's pick (the pilots' best mean), RACE+'s pick (:func:`plus_pick`: the best prediction at C
    of the pilots' curves) and TRL's default, each against the full grid, per distinct setting (a
    setting in ``shared``, another's runs, is left out).

    ``full_rows``: the full grid at C on the grid seeds; ``pilots``: pilot fraction -> its pilot rows,
    as :func:`race_table` takes them (both picks are made from the first fraction's; every fraction's
    FLOPs count in ``all_pilot_flops_fraction``); ``curves``: ``curves.csv`` rows (the pilots' among
    them, found by run id); ``fresh_rows``/``fresh_defaults``: the grid's cells and TRL's default at C
    on the fresh seeds; ``full_flops``: C.

    The **regret** of a method is the full grid's best cell's mean native reward over the grid seeds
    (the best cell named by its mean over them, :func:`best_cell`) minus the method's pick's mean over
    the fresh seeds, with a 95% bootstrap interval (:func:`regret_interval`: both sides' seeds resampled
    independently, ``draws`` times, fixed ``seed``). The best cell is chosen on the same seeds its mean
    is taken over, so that mean is biased up (the winner's curse) and a regret tends to read high by
    the same amount for every method: compare methods, not the level. ``*_in_best_set``: the pick is
    one of the cells that could be best on the full grid at 95% (``full_best_cells``, as
    :func:`race_table`'s); TRL's default counts as the grid cell of its allocation (P, G, K, mu), if any."""
    out, cells, samples = [], [], []
    pilot_rows = next(iter(pilots.values()), full_rows.iloc[0:0])
    all_pilot_rows = pd.concat(list(pilots.values())) if pilots else pilot_rows
    for (stage, setting), fr in full_rows.groupby(["stage", "setting"], sort=False):
        if setting in shared or fr["native_reward"].isna().all():
            continue
        mine = _of_setting(stage, setting)
        pr = mine(pilot_rows).dropna(subset=["native_reward"])
        if pr.empty:
            continue
        full = _full_side(fr, thresholds, recipe_sd)
        race_pick, plus, predictions = picks(pr, curves, full_flops, seed)  # as the study named them
        observed = cell_means(fr)
        predicted = predictions.set_index("cell")["predicted"].dropna()
        f, d = mine(fresh_rows), mine(fresh_defaults)
        default_cell = _default_cell(d, fr)
        best_values = fr.loc[fr["cell"].astype(str) == str(full["full_best_cell"]), "native_reward"]
        fresh = {
            "race": f.loc[f["cell"].astype(str) == race_pick].groupby("seed")["native_reward"].mean(),
            "plus": f.loc[f["cell"].astype(str) == str(plus)].groupby("seed")["native_reward"].mean(),
            "default": d.groupby("seed")["native_reward"].mean(),
        }
        best_set = str(full["full_best_cells"]).split()
        rec = {"stage": stage, "setting": setting, "pilot_fraction": _fraction(pr, full_flops),
               "pilot_seeds": int(pr["seed"].nunique()), "base_native_reward": pilot_base(pr), "race_pick": race_pick,
               "plus_pick": plus or "", "plus_candidates": int(predictions["candidate"].sum()),
               "plus_no_fit": " ".join(predictions.loc[~predictions["candidate"], "cell"]),
               "default_cell": default_cell, "full_best_cell": full["full_best_cell"],
               "full_best_native_reward": full["oracle_native_reward"], "full_best_cells": full["full_best_cells"],
               "full_seeds": full["full_seeds"]}  # fmt: skip
        for key, values in fresh.items():
            picked = {"race": race_pick, "plus": plus, "default": default_cell}[key]
            v, low, high, note = regret_interval(
                best_values.to_numpy(float), values.to_numpy(float), draws, seed
            )
            if key == "plus" and plus is None:
                note = "RACE+ has no pick: no pilot cell's curve could be fitted"
            rec.update({f"{key}_fresh_seeds": int(values.notna().sum()), f"{key}_fresh_native_reward":
                        float(values.mean()) if values.notna().any() else NAN, f"{key}_regret": v,
                        f"{key}_regret_low": low, f"{key}_regret_high": high, f"{key}_regret_note": note,
                        f"{key}_in_best_set": bool(picked) and str(picked) in best_set})  # fmt: skip
            samples.append((setting, key, best_values.to_numpy(float), values.to_numpy(float)))
        errors = (predicted - observed.reindex(predicted.index)).dropna()
        pilots_all = mine(all_pilot_rows)
        grid_flops = fr["C_total"].sum()
        rec.update({
            "plus_predictions": means_text(predicted), "full_cell_means": means_text(observed),
            "race_spearman": spearman(cell_means(pr), observed), "plus_spearman": spearman(predicted, observed),
            "median_abs_extrapolation_error": float(errors.abs().median()) if len(errors) else NAN,
            "pilot_flops": pr["C_total"].sum(), "full_grid_flops": grid_flops,
            "pilot_flops_fraction": _share(pr["C_total"].sum(), grid_flops),
            "all_pilot_flops_fraction": _share(pilots_all["C_total"].sum(), grid_flops), "recipe_sd": recipe_sd,
        })  # fmt: skip
        out.append(rec)
        full_sd = fr.groupby("cell")["native_reward"].std(ddof=1)
        for p in predictions.itertuples(index=False):
            obs = float(observed.get(p.cell, NAN))
            cells.append({"stage": stage, "setting": setting, **p._asdict(), "full_mean": obs,
                          "full_sd": float(full_sd.get(p.cell, NAN)), "error": p.predicted - obs,
                          "abs_error": abs(p.predicted - obs), "pilot_error": p.pilot_mean - obs,
                          "race_pick": p.cell == race_pick, "plus_pick": p.cell == plus,
                          "in_full_best_set": p.cell in best_set})  # fmt: skip
    settings = pd.DataFrame(out)
    return PlusTables(settings, pd.DataFrame(cells), plus_summary(settings, samples, draws, seed))


def _of_setting(stage: str, setting: str):
    """A filter of a table's rows to one (stage, setting)."""
    return lambda rows: rows[(rows["stage"] == stage) & (rows["setting"] == setting)]


def _share(part: float, whole: float) -> float:
    return float(part / whole) if whole else NAN


def _fraction(pilot_rows: pd.DataFrame, full_flops: float) -> float:
    """The pilots' budget as a fraction of the full one (NaN when their rows say none)."""
    if "budget_flops" not in pilot_rows:
        return NAN
    budget = pd.to_numeric(pilot_rows["budget_flops"], errors="coerce")
    return float(budget.median() / full_flops) if budget.notna().any() else NAN


def _default_cell(defaults: pd.DataFrame, grid: pd.DataFrame) -> str:
    """The full grid's cell with TRL's default allocation (its P, G, K, mu), or "" when the grid has none."""
    keys = ["P", "G", "K", "mu"]
    if defaults.empty:
        return ""
    if all(k in defaults and k in grid for k in keys):
        alloc = defaults[keys].iloc[0].astype(int)
        match = grid[np.logical_and.reduce([grid[k].astype(int) == alloc[k] for k in keys])]
        return str(match["cell"].iloc[0]) if len(match) else ""
    label = str(defaults["cell"].iloc[0])
    return label if label in set(grid["cell"].astype(str)) else ""


def plus_summary(settings: pd.DataFrame, samples, draws: int = BOOTSTRAP, seed: int = 0) -> pd.DataFrame:
    """One row across the distinct settings of :func:`plus_table`: per method (RACE, RACE+, TRL's
    default), the mean regret over the settings where it has one, with a 95% percentile interval from
    a two-level bootstrap (``draws`` resamples of the settings with replacement, and within each drawn
    setting of the best cell's grid seeds and the pick's fresh seeds; fixed ``seed``; NaN with fewer
    than two settings), and the share of settings whose pick lies in the full grid's 95% best set."""
    rec: dict = {"settings": len(settings)}
    rng = np.random.default_rng(seed)
    for key, words in PLUS_METHODS.items():
        mine = [(b[np.isfinite(b)], p[np.isfinite(p)]) for _, k, b, p in samples if k == key]
        mine = [(b, p) for b, p in mine if len(b) and len(p)]
        value = float(np.mean([b.mean() - p.mean() for b, p in mine])) if mine else NAN
        low = high = NAN
        note = f"{words}: {len(mine)} of {len(settings)} settings with a regret"
        if len(mine) >= 2:
            k = len(mine)
            # each setting's regret on its own resamples, one per (replicate, slot) it may fill
            regrets = np.stack([_resampled_means(b, draws, rng, (k,)) - _resampled_means(p, draws, rng, (k,))
                                for b, p in mine])  # fmt: skip
            chosen = rng.integers(0, k, size=(draws, k))
            means = regrets[chosen, np.arange(draws)[:, None], np.arange(k)[None, :]].mean(axis=1)
            low, high = (float(v) for v in np.percentile(means, [2.5, 97.5]))
        elif mine:
            note += "; no interval: the bootstrap over settings needs 2"
        # over the settings where the method names a cell (RACE+ may have none; TRL's default is a cell
        # of the grid or lies outside it, and then outside its best set)
        picked = (
            settings[settings["plus_pick"].astype(str) != ""] if key == "plus" and len(settings) else settings
        )
        inside = picked[f"{key}_in_best_set"].astype(bool) if len(picked) else pd.Series(dtype=bool)
        rec.update({f"{key}_mean_regret": value, f"{key}_regret_low": low, f"{key}_regret_high": high,
                    f"{key}_settings": len(mine), f"{key}_in_best_set_share":
                    float(inside.mean()) if len(inside) else NAN, f"{key}_note": note})  # fmt: skip
    return pd.DataFrame([rec])


def _count(n, noun: str) -> str:
    return f"{int(n)} {noun}{'s' * (int(n) != 1)}"


def plus_sentence(race) -> str:
    """One sentence on RACE+ in one setting (a :class:`paper_repro.study.RacePilots`): its pick and
    prediction at the full budget beside RACE's pick's, and the cells left out for want of a fit (the
    fresh seeds' scores are in the notebook's own table)."""
    from paper_repro.analysis.wording import fraction_words

    table = race.predictions
    if table is None or table.empty:
        return "No pilot has finished with a native reward: RACE+ has no pick yet."
    fitted = table[table["candidate"].astype(bool)]
    left = table[~table["candidate"].astype(bool)]
    point = fraction_words(float(table["pilot_point"].max()))
    left_words = (
        f"; {len(left)} cell(s) without a fit are not candidates ({', '.join(left['cell'])}: "
        f"{left['status'].iloc[0]})"
        if len(left)
        else ""
    )
    if race.plus_pick is None:
        return f"RACE+ has no pick: no pilot cell's curve up to {point} of the budget could be fitted{left_words}."
    row = fitted.set_index("cell").loc[race.plus_pick]
    interval = (f" (95% interval over the pilot seeds {row['pred_lo']:.3f} to {row['pred_hi']:.3f})"
                if np.isfinite(row["pred_lo"]) else "")  # fmt: skip
    text = (f"RACE+ picks cell {race.plus_pick}: its pilots' curve up to {point} of the budget "
            f"({_count(row['n_points'], 'point')}, {_count(row['n_seeds'], 'seed')}) predicts a native reward of "
            f"{row['predicted']:.3f} at the full budget{interval}")  # fmt: skip
    if race.pick is not None and race.pick != race.plus_pick:
        other = table.set_index("cell")["predicted"].get(race.pick, NAN)
        text += f", against {other:.3f} for RACE's pick {race.pick}" if np.isfinite(other) else ""
    elif race.pick == race.plus_pick:
        text += ": the same cell as RACE's pick"
    return text + left_words + "."
