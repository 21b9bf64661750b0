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

**The paper's regime** (:meth:`RegimeThresholds.side`) is the side of the threshold on which a grid's
best cell alone lies (its argmax, whatever the noise): always a label, never ``unresolved``. The
paper's same-regime rate is the share of distinct settings whose pilots' best cell and full grid's
best cell lie on the same side (``same_best_regime``; :func:`same_regime_rates`, one row per pilot
fraction, a description with its count). Its chance level (``chance_same_best_regime``) is the share of
the pilot cells on the full best cell's side: what a pick at random among the pilot cells would give.

**"Pick in the full best set" can be vacuous** (``pick_check``): when every cell could be best, every
pick lies in the set and the check says nothing; it reads ``vacuous: every cell could be best`` and is
never counted as agreement.

**RACE's arm spends its pilots' FLOPs** as well as its pick's run (``race_flops_ratio``: the pilot
grid's FLOPs, every pilot seed, plus the pick's full-budget run, over TRL's default's run; per run,
mean over the fresh seeds). The fresh-seed comparison is at unequal compute.

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

**Descriptions only**: Cohen's kappa of the pilot regime against the full grid's
(:func:`regime_kappa`, its asymptotic interval clipped to [-1, 1]), and :func:`regime_ceiling`, how
often two disjoint halves of the full grid's seeds name the same regime. For the first pilot fraction
(the paper's 1/8; the profile's, 1/2 in cpu-tiny) :func:`race_table` also pairs RACE's pick with TRL's default allocation (K = G,
mu = 1, at the full budget), both run **on fresh seeds** that neither the pilots nor the full grid
used: the gains :func:`paper_repro.analysis.claims.race.no_race_gain` tests, clustered by setting.

The agreement test and its claims: :mod:`paper_repro.analysis.claims.race`; RACE+:
:mod:`paper_repro.analysis.tables.race_plus`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from paper_repro.analysis.stats.optima import Cells, best_set
from paper_repro.common.results import METRICS

ALPHA = 0.05  # the pilots' interval, the best sets and the agreement test
BOOTSTRAP = 2_000  # resamples for RACE's intervals (the pooled correlation's, RACE+'s regrets)
UNINFORMATIVE = "uninformative"
VACUOUS = "vacuous: every cell could be best"  # the pick-in-best-set check when the full set excludes no cell
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

    def side(self, rho: float) -> str:
        """The paper's regime of one best cell: ``update-heavy`` at or above the threshold,
        ``search-heavy`` below it, ``unknown`` for a NaN rho."""
        if np.isnan(rho):
            return "unknown"
        return "update-heavy" if rho >= self.rho_threshold else "search-heavy"


# ---------------------------------------------------------------------------------------- cells


DEFAULT_THRESHOLDS = RegimeThresholds()  # the profile-free default (rho 0.6)


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
        full = full_side(fr, thresholds, recipe_sd)
        for fraction, pilot_rows in pilots.items():
            pr = pilot_rows[(pilot_rows["stage"] == stage) & (pilot_rows["setting"] == setting)]
            if pr.empty or pr["native_reward"].isna().all():
                continue
            rec = {"stage": stage, "setting": setting, "pilot_fraction": fraction}
            rec.update(_pilot_side(pr, fr, thresholds, recipe_sd))
            rec.update(full)
            rec.update(_comparison(rec, pr, fr, thresholds))
            paired = _fresh_pairs(
                fresh_rows, fresh_defaults, stage, setting, rec["pilot_best_cell"], set(pr["seed"])
            )
            if fraction == first:
                if setting not in shared:
                    gains.extend(paired["gain"].tolist())
                rec.update(_fresh_columns(paired))
            flops = fr["C_total"].sum()
            rec.update(
                _flops_columns(
                    pr,
                    fr,
                    paired if fraction == first else None,
                    rec["pilot_best_cell"],
                    _mine(fresh_defaults, stage, setting),
                )
            )
            rec.update(
                {
                    "full_grid_flops": flops,
                    "pilot_flops_fraction": pr["C_total"].sum() / flops if flops else NAN,
                    "same_runs_as": shared.get(setting, ""),
                    "rho_threshold": thresholds.rho_threshold,
                    "recipe_sd": recipe_sd,
                }
            )
            out.append(rec)
    return pd.DataFrame(out), np.asarray(gains, dtype=float)


def full_side(fr: pd.DataFrame, thresholds: RegimeThresholds, recipe_sd: float) -> dict:
    """The full grid's columns of a RACE row: its best cell, best set and regime, and its cell means."""
    fb = best_cell(fr)
    label, cells = regime(fr, thresholds, recipe_sd)
    return {
        "full_best_cell": fb.name,
        "full_rho_star": fb["rho"],
        "full_best_cells": cells,
        "full_regime": label,
        "full_best_regime": thresholds.side(fb["rho"]),
        "full_best_set_excludes": len(cells.split()) < fr["cell"].nunique(),
        "full_seeds": int(fr["seed"].nunique()),
        "oracle_native_reward": fb["native_reward"],
        "full_cell_means": means_text(cell_means(fr)),
    }


def _pilot_side(pr: pd.DataFrame, fr: pd.DataFrame, thresholds: RegimeThresholds, recipe_sd: float) -> dict:
    """The pilot grid's columns of a RACE row: whether it moved off the base policy, its pick, best set
    and regime (``uninformative`` when it did not move), and its cell means."""
    base = pd.concat([pr["base_native_reward"], fr["base_native_reward"]]).dropna()
    base = float(base.iloc[0]) if len(base) else NAN
    moved, shift = pilot_moved(pr, base)
    pb = best_cell(pr)
    label, cells = regime(pr, thresholds, recipe_sd)
    return {
        "pilot_seeds": int(pr["seed"].nunique()),
        "base_native_reward": base,
        "pilot_max_shift": shift,
        "pilot_moved": moved,
        "pilot_best_cell": pb.name,
        "pilot_rho_star": pb["rho"],
        "pilot_best_cells": cells,
        "pilot_regime": label if moved else UNINFORMATIVE,
        "pilot_best_regime": thresholds.side(pb["rho"]),
        "pilot_cell_means": means_text(cell_means(pr)),
    }


def _comparison(rec: dict, pr: pd.DataFrame, fr: pd.DataFrame, thresholds: RegimeThresholds) -> dict:
    """The pilots against the full grid: same regime from the best sets (NaN for uninformative
    pilots), the paper's same regime from the best cells alone (every setting) and its chance level,
    the Spearman correlation of the cell means, whether the pick lies in the full best set (and
    ``pick_check``: ``in``, ``outside`` or vacuous), and its regret (the full grid's best cell mean
    minus the pick's, both on the full grid's seeds)."""
    full = cell_means(fr)
    pick = str(rec["pilot_best_cell"])
    inside = pick in rec["full_best_cells"].split()
    pilot_rhos = pr.groupby("cell")["rho"].mean().dropna().to_numpy(float)
    sides = [thresholds.side(r) for r in pilot_rhos]
    return {
        "same_regime": rec["pilot_regime"] == rec["full_regime"] if rec["pilot_moved"] else NAN,
        "same_best_regime": rec["pilot_best_regime"] == rec["full_best_regime"],
        "chance_same_best_regime": float(np.mean([s == rec["full_best_regime"] for s in sides]))
        if sides
        else NAN,
        "spearman": spearman(cell_means(pr), full),
        "pick_in_full_best_set": inside,
        "pick_check": VACUOUS if not rec["full_best_set_excludes"] else "in" if inside else "outside",
        "race_regret": full.max() - full.get(pick, NAN),
    }


def _flops_columns(
    pr: pd.DataFrame, fr: pd.DataFrame, paired: pd.DataFrame | None, pick: str, defaults: pd.DataFrame
) -> dict:
    """RACE's arm against TRL's default in FLOPs: the pilot grid (every pilot seed), the pick's run at
    the full budget (its mean over the fresh seeds where it ran there, else the full grid's pick cell),
    the default's run (``defaults``' mean, the fresh seeds), and ``race_flops_ratio`` = (pilots + pick
    run) / default run."""
    pick_run = float(paired["pick_flops"].mean()) if paired is not None and len(paired) else NAN
    if np.isnan(pick_run):
        pick_run = float(fr.loc[fr["cell"].astype(str) == pick, "C_total"].mean())
    default_run = float(defaults["C_total"].mean()) if len(defaults) else NAN
    pilots = float(pr["C_total"].sum())
    return {
        "pilot_flops": pilots,
        "pick_run_flops": pick_run,
        "default_run_flops": default_run,
        "race_flops_ratio": (pilots + pick_run) / default_run if default_run > 0 else NAN,
    }


def _fresh_columns(paired: pd.DataFrame) -> dict:
    """The first pilot fraction's pick against TRL's default on the fresh seeds."""
    mean = (lambda c: paired[c].mean()) if len(paired) else (lambda c: NAN)
    return {
        "fresh_seeds": len(paired),
        "race_pick_native_reward": mean("pick"),
        "default_native_reward": mean("default"),
        "race_gain_vs_default": mean("gain"),
        "fresh_gains": means_text(paired["gain"]) if len(paired) else "",
    }


def _mine(rows: pd.DataFrame, stage: str, setting: str) -> pd.DataFrame:
    return rows[(rows["stage"] == stage) & (rows["setting"] == setting)] if len(rows) else rows


def _fresh_pairs(fresh_rows, fresh_defaults, stage, setting, pick, pilot_seeds) -> pd.DataFrame:
    """Per fresh seed (none the pilots used): the pick's native reward, the default's, the gain, and
    each run's FLOPs (``pick_flops``, ``default_flops``)."""
    f, d = _mine(fresh_rows, stage, setting), _mine(fresh_defaults, stage, setting)
    f, d = f[~f["seed"].isin(pilot_seeds)], d[~d["seed"].isin(pilot_seeds)]
    f = f[f["cell"] == pick]
    pairs = pd.DataFrame(
        {
            "pick": f.groupby("seed")["native_reward"].mean(),
            "default": d.groupby("seed")["native_reward"].mean(),
        }
    ).dropna()
    flops = {
        "pick_flops": f.groupby("seed")["C_total"].mean(),
        "default_flops": d.groupby("seed")["C_total"].mean(),
    }
    pairs = (
        pairs.join(pd.DataFrame(flops), how="left")
        if len(pairs)
        else pairs.assign(**dict.fromkeys(flops, NAN))
    )
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


def same_regime_rates(race: pd.DataFrame) -> pd.DataFrame:
    """The paper's same-regime rate, one row per pilot fraction (a description): over the distinct
    settings, how many name the same regime from the pilots' best cell as from the full grid's
    (``same``, of ``settings``; ``described`` as "5 of 7"), the same among the settings whose pilots
    moved, the count a pick at random among the pilot cells would give (``chance``), and the exact
    one-sided p of the count under that chance (settings independent: :func:`count_p`); ``same_low``
    and ``same_high``: the rate's exact (Clopper-Pearson) 95% interval, the settings the units."""
    from statsmodels.stats.proportion import proportion_confint

    rows = []
    for fraction, r in race.groupby("pilot_fraction", sort=False):
        r = distinct_rows(r)
        same = r["same_best_regime"].astype(bool).to_numpy()
        moved = r["pilot_moved"].astype(bool).to_numpy()
        chance = r["chance_same_best_regime"].to_numpy(float)
        rows.append(
            {
                "pilot_fraction": fraction,
                "settings": len(r),
                "same": int(same.sum()),
                "same_rate": float(same.mean()) if len(r) else NAN,
                "described": f"{int(same.sum())} of {len(r)}",
                "moved": int(moved.sum()),
                "same_moved": int(same[moved].sum()),
                "chance": float(chance.sum()),
                "chance_p": count_p(chance, int(same.sum())),
                **dict(
                    zip(
                        ("same_low", "same_high"),
                        proportion_confint(int(same.sum()), len(r), 0.05, "beta") if len(r) else (NAN, NAN),
                        strict=True,
                    )
                ),
            }
        )
    return pd.DataFrame(rows)


def count_p(chances: np.ndarray, observed: int) -> float:
    """P(at least ``observed`` successes) of independent trials with these success chances (the
    Poisson-binomial distribution, by convolution); NaN where a chance is unknown."""
    chances = np.asarray(chances, float)
    if np.isnan(chances).any():
        return NAN
    dist = np.array([1.0])
    for c in chances:
        dist = np.convolve(dist, [1 - c, c])
    return float(min(1.0, dist[observed:].sum()))
