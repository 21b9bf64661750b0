"""RACE's claims, declared in the registry: do the pilots name the full grid's regime (one row per
pilot budget), and does RACE's pick gain over TRL's default on fresh seeds? The RACE table they read:
:mod:`paper_repro.analysis.tables.race`.

**The agreement test** (:func:`pilot_agreement`, one pilot fraction, the distinct settings whose
pilots moved). **The settings are the units** of every inference here; the cells of one setting share
its seeds and are never counted as independent. Per setting, the Spearman correlation of the pilot
cell means with the full grid's; their mean, with a permutation p that shuffles the pilot means
within each setting (so each setting contributes one correlation, and the null is the settings'
independent shuffles) and a t interval over the settings' correlations (S - 1 df); and whether
RACE's pick (the pilots' argmax cell) lies in the full grid's 95% best set, counted only where that
set excludes some cell (where every cell could be best, the check is vacuous and says so). The
paper's same-regime rate (the side of the rho threshold the pilots' best cell lies on, against the
full grid's; :func:`paper_repro.analysis.tables.race.same_regime_rates`) leads the note, a
description with its count and its chance level. :func:`pilot_agreement_test` states the rule.

**The gain test** (:func:`no_race_gain`): RACE's pick minus TRL's default on the fresh seeds, a pair
per setting and seed, **clustered by setting**: the pairs of one setting share its pick, its default
and its seeds' draws of the problems (the intraclass correlation is in the note), so the test reads
the S setting means (a TOST and a t interval with S - 1 df; for balanced settings the same standard
error as statsmodels' cluster-robust OLS, :func:`cluster_se`). RACE's arm spends its pilot grid's
FLOPs as well as its pick's run and the default only its run: the note gives the ratio per setting,
and the verdict is at unequal compute. Its operating characteristics (:func:`gain_operating`):
setting-clustered gains with the between- and within-setting SDs the data show, under true gains of
0, +-margin/2, +-margin and +-2 margins, decided by the same code.
"""

from __future__ import annotations

import re
from dataclasses import replace
from itertools import pairwise

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.columns import NO_OC, TARGET_POWER
from paper_repro.analysis.claims.registry import NotSimulated, OwnSimulation, Variant, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.best_sets import DEFAULT
from paper_repro.analysis.stats.ranks import PERMUTATIONS, permutation_p
from paper_repro.analysis.stats.verdict import NAN, VERDICTS, Result
from paper_repro.analysis.tables.race import (
    ALPHA,
    VACUOUS,
    distinct_rows,
    moved_rows,
    parse_means,
    same_regime_rates,
    spearman,
)
from paper_repro.analysis.wording import fraction_words
from paper_repro.config import Margins

MIN_MOVED = 3  # settings whose pilots moved that the agreement test needs
MIN_SETTINGS = 3  # settings with fresh-seed pairs that the gain test needs
REPLICATES = 2000  # simulated studies per truth of the gain test's operating characteristics
POWER_SEEDS = (5, 10, 20, 40, 80, 160)  # fresh seeds per setting the gain test's power is read at
SETTINGS_MULTIPLES = (1, 2, 4, 8)  # and multiples of the study's settings, at its seeds per setting
RNG_SEED = 0


def regime_kappa(
    race: pd.DataFrame, columns: tuple[str, str] = ("pilot_regime", "full_regime"), moved: bool = True
) -> tuple[float, float, float]:
    """A description: Cohen's kappa (statsmodels) of the pilot regime against the full grid's (the
    label ``columns``) over the distinct settings (``moved``: only those whose pilots moved), with its
    asymptotic 95% interval clipped to [-1, 1]; NaNs when fewer than two labels occur (kappa is
    undefined)."""
    from statsmodels.stats.inter_rater import cohens_kappa

    pilot, full = columns
    race = moved_rows(race) if moved else distinct_rows(race)
    labels = sorted(set(race[pilot]) | set(race[full]))
    if len(labels) < 2:
        return NAN, NAN, NAN
    table = pd.crosstab(race[pilot], race[full])
    with np.errstate(divide="ignore", invalid="ignore"):
        k = cohens_kappa(table.reindex(index=labels, columns=labels, fill_value=0).to_numpy())
    low, high = np.clip([float(k.kappa_low), float(k.kappa_upp)], -1.0, 1.0)
    return float(k.kappa), float(low), float(high)


def pilot_agreement(
    race: pd.DataFrame, alpha: float = ALPHA, draws: int = PERMUTATIONS, seed: int = 0
) -> Result:
    """The pre-registered test that RACE's pilots (one pilot fraction's rows of :func:`race_table`)
    name the full grid's optimum, by :func:`pilot_agreement_test`'s rule. ``value``: the mean of the
    settings' Spearman correlations; ``low``/``high``: its 95% t interval over the settings."""
    race = distinct_rows(race)
    moved = moved_rows(race)
    k, n = len(moved), len(race)
    rate = same_regime_words(race)
    head = f"uninformative pilots: {k} of {n} settings moved off the base policy"
    if k < MIN_MOVED:
        return Result(note=f"{head} (the test needs at least {MIN_MOVED}); {rate}")
    pairs = [p for p in (_aligned(r) for _, r in moved.iterrows()) if p is not None]
    rhos = moved["spearman"].dropna().to_numpy(float)
    pooled = float(rhos.mean()) if len(rhos) else NAN
    p = permutation_p(pairs, draws, seed) if len(pairs) else NAN
    low, high = setting_interval(rhos)
    checks = _pick_checks(moved)
    informative = checks[checks != VACUOUS]
    outside = int((informative == "outside").sum())
    if p < alpha and outside == 0:
        verdict = "held"
    elif high <= 0 or outside > k / 2:  # the whole interval at or below 0, or picks shown outside
        verdict = "not held"
    else:
        verdict = "inconclusive"
    vacuous = (
        f"; vacuous: every cell could be best in {k - len(informative)} of {k}"
        if len(informative) < k
        else ""
    )
    note = (
        f"{k} of {n} settings moved off the base policy; {rate}; rank agreement, the settings as units: "
        f"mean Spearman {pooled:.2f} over {len(rhos)} settings (95% t interval over the settings "
        f"{low:.2f} to {high:.2f}), permutation p {p:.2g} (pilot means shuffled within each setting); "
        f"RACE's pick in the full grid's 95% best set in {len(informative) - outside} of {len(informative)} "
        f"settings whose set excludes a cell{vacuous}; mean regret {moved['race_regret'].mean():.3f}"
    )
    cells = "; ".join(f"{r['setting']}: {r['full_best_cells']}" for _, r in moved.iterrows())
    return Result(pooled, low, high, verdict, note, cells)


def same_regime_words(race: pd.DataFrame) -> str:
    """The paper's same-regime rate of one pilot fraction's rows, in words (a description)."""
    if "same_best_regime" not in race or race.empty:
        return "same-regime rate not computed"
    row = same_regime_rates(race).iloc[0]
    threshold = race["rho_threshold"].iloc[0] if "rho_threshold" in race else NAN
    return (
        f"same-regime rate as the paper defines it (the side of rho {threshold:g} the best cell lies on, "
        f"pilots against the full grid), a description: {row['described']} distinct settings "
        f"(95% {row['same_low']:.2f} to {row['same_high']:.2f}, exact over the settings; "
        f"{row['same_moved']} of the {row['moved']} whose pilots moved); a pick at random among the pilot "
        f"cells gives {row['chance']:.1f} of {row['settings']} (one-sided p {row['chance_p']:.2g})"
    )


def _pick_checks(moved: pd.DataFrame) -> pd.Series:
    """Per moved setting: ``in``, ``outside``, or vacuous where the full best set excludes no cell."""
    if "pick_check" in moved:
        return moved["pick_check"].astype(str)
    return moved["pick_in_full_best_set"].astype(bool).map({True: "in", False: "outside"})


def setting_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The two-sided t interval of the mean of per-setting ``values`` (one per setting, S - 1 df),
    clipped to [-1, 1] (they are correlations); NaNs with fewer than two."""
    from scipy import stats

    values = np.asarray(values, float)
    if len(values) < 2:
        return NAN, NAN
    half = stats.t.ppf(0.5 + level / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    low, high = np.clip([values.mean() - half, values.mean() + half], -1.0, 1.0)
    return float(low), float(high)


def pilot_agreement_test(alpha: float = ALPHA) -> str:
    return (
        "over the distinct settings whose pilots moved off the base policy (some pilot cell's mean native "
        f"reward outside its two-sided {1 - alpha:.0%} t interval around the base policy's over the pilot seeds, "
        "Bonferroni over the cells; pilots that did not move are uninformative, reported and never scored), "
        "the settings as the units: per setting, Spearman's correlation of the pilot cell means with the full "
        "grid's, their mean with a t interval over the settings (S - 1 df) and a one-sided permutation p "
        f"(pilot cell means shuffled within each setting; exact, or {PERMUTATIONS} draws with seed 0), and "
        f"whether RACE's pick (the pilots' argmax cell) lies in the full grid's {1 - alpha:.0%} best set "
        "(Gupta's subset, Bonferroni, with the recipe effect), checked only where that set excludes some cell "
        f"(else vacuous, never counted): held if p < {alpha} and no checked pick lies outside its set; not "
        f"held if the {1 - alpha:.0%} interval lies at or below 0 or the pick lies outside the set in more "
        "than half of the moved settings; inconclusive otherwise, and with fewer than "
        f"{MIN_MOVED} moved settings. The note leads with the paper's same-regime rate (the side of the rho "
        "threshold on which the pilots' best cell and the full grid's lie, over every distinct setting), "
        "a description with its count and the rate a random pilot pick gives"
    )


def _aligned(row: pd.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """One RACE row's pilot and full cell means over the cells both have; None when its Spearman
    correlation is undefined."""
    pilot, full = parse_means(row["pilot_cell_means"]), parse_means(row["full_cell_means"])
    if np.isnan(spearman(pilot, full)):
        return None
    common = pilot.index.intersection(full.index)
    return pilot[common].to_numpy(float), full[common].to_numpy(float)


# ---------------------------------------------------------------------------------------- RACE+


def no_race_gain(
    gains: np.ndarray, m: Margins = DEFAULT, groups: np.ndarray | None = None, flops: str = ""
) -> Result:
    """TOST of RACE's pick against TRL's default allocation on seeds the pilots did not use, clustered
    by setting: ``gains`` one per (setting, fresh seed), ``groups`` their settings (None: every pair its
    own unit). The test reads the settings' mean gains (:func:`setting_tost`); ``value`` is their
    mean, ``low``/``high`` its 95% t interval (S - 1 df). ``flops``: the compute words the note
    ends with."""
    gains = np.asarray(gains, float)
    groups = np.arange(len(gains)) if groups is None else np.asarray(groups)
    keep = ~np.isnan(gains)
    gains, groups = gains[keep], groups[keep]
    means = pd.Series(gains).groupby(groups, sort=False).mean().to_numpy(float)
    if len(means) < MIN_SETTINGS:
        return Result(
            note=f"{len(means)} settings with fresh-seed pairs (the test needs at least {MIN_SETTINGS})"
        )
    t = setting_tost(means[None, :], m.gain)
    icc, between, within = intraclass(gains, groups)
    iccs = (
        "ICC undefined (one pair per setting)"
        if np.isnan(icc)
        else (f"intraclass correlation {icc:.2f} (between-setting SD {between:.3f}, within {within:.3f})")
    )
    note = (
        f"{len(gains)} pairs in {len(means)} settings, the settings as units: mean of the setting means "
        f"{t['mean'][0]:+.3f}, 90% t interval ({len(means) - 1} df) {t['low90'][0]:+.3f} to {t['high90'][0]:+.3f}, "
        f"TOST p {t['p_tost'][0]:.2g} (margin +-{m.gain:g}); {iccs}"
    )
    note = f"{note}; {flops}" if flops else note
    return Result(
        float(t["mean"][0]), float(t["low95"][0]), float(t["high95"][0]), VERDICTS[int(t["code"][0])], note
    )


def setting_tost(means: np.ndarray, margin: float) -> dict[str, np.ndarray]:
    """The gain test on many studies at once: ``means`` is studies x settings (each a setting's mean
    gain). Per study: the mean, its 90% and 95% t intervals (S - 1 df), the TOST p (the larger one-sided
    p against -margin and +margin) and the verdict's index in :data:`VERDICTS`: held if the TOST
    rejects at 5% (the 90% interval inside +-margin), not held if the 95% interval lies above 0 (a
    stable gain), inconclusive otherwise. With no spread (every setting the same) the interval is the
    mean itself."""
    from scipy import stats

    means = np.atleast_2d(np.asarray(means, float))
    s = means.shape[1]
    mean, se = means.mean(axis=1), means.std(axis=1, ddof=1) / np.sqrt(s)
    t90, t95 = stats.t.ppf(0.95, s - 1), stats.t.ppf(0.975, s - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_low = stats.t.sf((mean + margin) / se, s - 1)  # H0: gain <= -margin
        p_high = stats.t.cdf((mean - margin) / se, s - 1)  # H0: gain >= +margin
    flat = se == 0
    p_tost = np.where(flat, np.where(np.abs(mean) < margin, 0.0, 1.0), np.maximum(p_low, p_high))
    low95 = mean - t95 * se
    code = np.where(
        p_tost < 0.05,
        VERDICTS.index("held"),
        np.where(low95 > 0, VERDICTS.index("not held"), VERDICTS.index("inconclusive")),
    )
    return {
        "mean": mean,
        "low90": mean - t90 * se,
        "high90": mean + t90 * se,
        "low95": low95,
        "high95": mean + t95 * se,
        "p_tost": p_tost,
        "code": code,
    }


def intraclass(values: np.ndarray, groups: np.ndarray) -> tuple[float, float, float]:
    """The one-way ANOVA estimates of ``values`` grouped by ``groups``: the intraclass correlation,
    the between-group SD (0 where the mean squares say less) and the within-group SD; NaNs with no
    group of two."""
    frame = pd.DataFrame({"v": np.asarray(values, float), "g": np.asarray(groups)})
    g = frame.groupby("g", sort=False)["v"]
    sizes, n, k = g.count().to_numpy(float), len(frame), g.ngroups
    if n <= k or k < 2:
        return NAN, NAN, NAN
    within = float(((frame["v"] - g.transform("mean")) ** 2).sum() / (n - k))
    between_ms = float((sizes * (g.mean() - frame["v"].mean()) ** 2).sum() / (k - 1))
    n0 = (n - (sizes**2).sum() / n) / (k - 1)
    tau2 = max(0.0, (between_ms - within) / n0)
    return tau2 / (tau2 + within) if tau2 + within > 0 else NAN, float(np.sqrt(tau2)), float(np.sqrt(within))


def cluster_se(values: np.ndarray, groups: np.ndarray) -> float:
    """The cluster-robust standard error of the mean of ``values`` (statsmodels OLS on a constant,
    clusters ``groups``): the check on :func:`setting_tost`'s, equal to it for balanced settings."""
    import statsmodels.api as sm

    values = np.asarray(values, float)
    fit = sm.OLS(values, np.ones((len(values), 1))).fit(
        cov_type="cluster", cov_kwds={"groups": pd.factorize(groups)[0]}
    )
    return float(fit.bse[0])


def no_gain_test(m: Margins = DEFAULT) -> str:
    return (
        "at unequal compute (RACE's arm spends its pilot grid's FLOPs besides its pick's run; the ratio per "
        "setting is in the note): native reward of RACE's pick (the full-grid cell the first pilot budget's "
        "pilots chose) minus TRL's default allocation (K = G, mu = 1), both run at the full budget on fresh "
        "seeds (neither the pilots' nor the grid's), paired per distinct setting and seed and clustered by "
        "setting (the settings' mean gains are the units; t with S - 1 df): held if a TOST with margin "
        f"+-{m.gain} rejects at 5% (the 90% interval lies inside it); not held if the 95% interval lies above 0 "
        f"(a stable gain); inconclusive otherwise, and with fewer than {MIN_SETTINGS} settings"
    )


def race_gains(race: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The fresh-seed gains of RACE's pick over the default, one per distinct setting and fresh seed,
    and their settings (the first pilot fraction's rows of the RACE table)."""
    if race.empty or "fresh_gains" not in race:
        return np.array([]), np.array([], dtype=object)
    rows = distinct_rows(race[race["pilot_fraction"] == race["pilot_fraction"].iloc[0]])
    parts = [(r["setting"], parse_means(r["fresh_gains"])) for _, r in rows.iterrows()]
    gains = np.concatenate([g.to_numpy(float) for _, g in parts]) if parts else np.array([])
    groups = np.concatenate([np.full(len(g), name, dtype=object) for name, g in parts]) if parts else gains
    return gains, groups


def flops_words(race: pd.DataFrame) -> str:
    """RACE's arm against the default in FLOPs, per distinct setting (the first pilot fraction)."""
    if race.empty or "race_flops_ratio" not in race:
        return ""
    first = race["pilot_fraction"].iloc[0]
    rows = distinct_rows(race[race["pilot_fraction"] == first]).dropna(subset=["race_flops_ratio"])
    if rows.empty:
        return ""
    ratios = rows["race_flops_ratio"]
    each = ", ".join(f"{r['setting']} {r['race_flops_ratio']:.1f}" for _, r in rows.iterrows())
    return (
        f"at unequal compute: RACE's arm (its {fraction_words(first)} pilot grid, every pilot seed, plus its "
        f"pick's run) spends {ratios.min():.1f}-{ratios.max():.1f}x the default run's FLOPs ({each}); no "
        "default run at matched compute exists, so the gain is not charged for the pilots"
    )


# ---------------------------------------------------------------------------------------- how often it errs


def gain_truths(margin: float) -> dict[str, tuple[float, str]]:
    """The gain test's truths: true gain -> the verdict the truth calls for. Within +-margin the
    equivalence holds; a gain of at least the margin is a stable gain (not held); a loss of at least
    the margin is neither (no gain, yet not equivalent): inconclusive is the right answer there. A
    gain between 0 and the margin is the rule's grey zone: equivalent and a stable gain at once, so
    held and not held are both right there (:func:`gain_operating` scores neither as wrong)."""
    out = {}
    for f in (0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0):
        truth = "held" if abs(f) < 1 else "not held" if f > 0 else "inconclusive"
        out[f"gain {f:+g} x margin"] = (f * margin, truth)
    return out


def simulated_verdicts(
    gain: float,
    between: float,
    within: float,
    sizes,
    margin: float,
    replicates: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """The verdicts of ``replicates`` simulated studies: per setting a shared draw (SD ``between``)
    plus per-pair draws (SD ``within``) at ``sizes`` pairs per setting, around the true ``gain``,
    decided by :func:`setting_tost` on their setting means (as :func:`no_race_gain` does)."""
    sizes = np.asarray(sizes, int)
    shared = rng.normal(0.0, between, (replicates, len(sizes)))
    pairs = rng.normal(0.0, within, (replicates, int(sizes.sum())))
    edges = np.cumsum([0, *sizes])
    means = np.stack([pairs[:, a:b].mean(axis=1) for a, b in pairwise(edges)], axis=1)
    return np.asarray(VERDICTS, dtype=object)[setting_tost(gain + shared + means, margin)["code"]]


def _truth_row(verdicts: np.ndarray, gain: float, truth: str, margin: float) -> dict:
    """One truth's row of the gain test's operating characteristics from its simulated ``verdicts``:
    the shares of each verdict, how often it is wrong and how often two draws agree."""
    share = {k: float(np.mean(verdicts == k)) for k in ("held", "not held", "inconclusive")}
    grey = 0.0 < gain < margin  # equivalent, and a positive gain: both decided verdicts are right
    wrong = (
        0.0
        if grey
        else 1.0 - share["inconclusive"] - share.get(truth, 0.0)
        if truth != "inconclusive"
        else (share["held"] + share["not held"])
    )
    return {
        "true_gain": gain,
        "true_verdict": truth,
        "grey": grey,
        **{f"share_{k.replace(' ', '_')}": x for k, x in share.items()},
        "wrong": wrong,
        "agreement": sum(x * x for x in share.values()),
    }


def gain_operating(
    gains: np.ndarray, groups: np.ndarray, margin: float, replicates: int = REPLICATES, seed: int = RNG_SEED
) -> tuple[pd.DataFrame, dict]:
    """The gain test's operating characteristics: per truth (:func:`gain_truths`) the shares of each
    verdict, how often it is wrong (a decided verdict other than the truth's) and how often two draws
    agree, at the data's settings and pairs per setting with the SDs the data show
    (:func:`intraclass`); and the claims row's ``oc_*`` and power columns (power: P(held) at true gain
    0, by fresh seeds per setting)."""
    icc, between, within = intraclass(gains, groups)
    sizes = pd.Series(groups).value_counts(sort=False).to_numpy(int) if len(gains) else np.array([], int)
    if np.isnan(within) or len(sizes) < MIN_SETTINGS:
        words = "not simulated: too few settings or pairs per setting to estimate the noise"
        return pd.DataFrame(), {
            **NO_OC,
            "oc_not_held_when_false": NAN,
            "oc_note": words,
            "power_now": NAN,
            "seeds_for_80pct_power": NAN,
            "power_note": words,
        }
    rng = np.random.default_rng(seed)
    rows = []
    for name, (gain, truth) in gain_truths(margin).items():
        v = simulated_verdicts(gain, between, within, sizes, margin, replicates, rng)
        rows.append({"truth": name, **_truth_row(v, gain, truth, margin), "studies": replicates})
    table = pd.DataFrame(rows)
    worst = table.loc[table["wrong"].idxmax()]
    power = {
        n: float(
            np.mean(
                simulated_verdicts(0.0, between, within, np.full(len(sizes), n), margin, replicates, rng)
                == "held"
            )
        )
        for n in POWER_SEEDS
    }
    now = int(np.median(sizes))
    power.setdefault(
        now,
        float(np.mean(simulated_verdicts(0.0, between, within, sizes, margin, replicates, rng) == "held")),
    )
    needed = next((n for n, x in sorted(power.items()) if x >= TARGET_POWER), None)
    by_settings = {
        k * len(sizes): float(
            np.mean(
                simulated_verdicts(
                    0.0, between, within, np.full(k * len(sizes), now), margin, replicates, rng
                )
                == "held"
            )
        )
        for k in SETTINGS_MULTIPLES
    }
    clear = table[~table["grey"]]  # the powers leave the grey zone out
    held, gained = clear[clear["true_verdict"] == "held"], clear[clear["true_verdict"] == "not held"]
    oc = {
        "oc_wrong_max": float(worst["wrong"]),
        "oc_wrong_truth": str(worst["truth"]) if worst["wrong"] > 0 else "",
        "oc_agreement_min": float(table["agreement"].min()),
        "oc_held_when_true": float(held["share_held"].min()),
        "oc_not_held_when_false": float(gained["share_not_held"].min()),
        "oc_note": (
            f"{len(table)} truths (gains 0, +-1/2, +-1, +-2 margins; a loss of a margin or more calls for "
            f"inconclusive; a gain between 0 and the margin makes held and not held both right), {replicates} studies each, {len(sizes)} settings at {now} pairs, ICC {icc:.2f} "
            f"(between-setting SD {between:.3f}, within {within:.3f}: the data's; race.py)"
        ),
        "power_now": power[now],
        "seeds_for_80pct_power": float(needed or NAN),
        "power_note": "P(held) at true gain 0 by fresh seeds per setting, the settings fixed: "
        + ", ".join(f"{n} seeds: {x:.2f}" for n, x in sorted(power.items()))
        + (
            ""
            if needed
            else (f"; not reached with up to {max(power)} seeds: the between-setting SD bounds it")
        )
        + (
            f"; by settings at {now} seeds each: "
            + ", ".join(f"{k}: {x:.2f}" for k, x in by_settings.items())
        ),
    }
    return table, oc


_SEEDS_POWER = re.compile(r"(\d+) seeds: ([0-9.]+)")
_SETTINGS_POWER = re.compile(r"by settings at (\d+) seeds each: (.*)$")


def read_gain_powers(power_note: str) -> tuple[dict[int, float], int | None, dict[int, float]]:
    """What :func:`gain_operating`'s ``power_note`` states: P(held) at true gain 0 by fresh seeds per
    setting (the settings fixed), the seeds per setting of the by-settings reading, and P(held) by
    number of settings at those seeds; ``({}, None, {})`` for another note."""
    head, _, tail = str(power_note).partition("; by settings")
    seeds = {int(n): float(x) for n, x in _SEEDS_POWER.findall(head)}
    m = _SETTINGS_POWER.search("by settings" + tail) if tail else None
    if not m:
        return seeds, None, {}
    settings = {int(k): float(x) for k, x in re.findall(r"(\d+): ([0-9.]+)", m.group(2))}
    return seeds, int(m.group(1)), settings


def with_kappa(result: Result, race: pd.DataFrame) -> Result:
    """``result`` with Cohen's kappa of the paper's pilot and full regime labels (the best cells' sides,
    every distinct setting) in its note: a description, never the verdict."""
    columns = ("pilot_best_regime", "full_best_regime")
    kappa, low, high = regime_kappa(race, columns, moved=False) if columns[0] in race else (NAN, NAN, NAN)
    words = "undefined (one label)" if np.isnan(kappa) else f"{kappa:.2f} (95% {low:.2f} to {high:.2f})"
    return replace(result, note=f"{result.note}; the paper's regime labels' kappa, a description: {words}")


# ---------------------------------------------------------------------------------------- declarations

PILOTS_ID = "race.pilots"  # one row per pilot budget: pilot_claim(fraction)


def pilot_suffix(fraction: float) -> str:
    """The id suffix of the pilots claim's row at ``fraction`` of the budget."""
    return f"@{fraction_words(fraction)}"


def pilot_claim(fraction: float) -> str:
    """The claims table's id of the pilots claim at ``fraction`` of the budget (RESULTS.md's RACE table)."""
    return PILOTS_ID + pilot_suffix(fraction)


PILOTS = NotSimulated("the test reads the pilot grids, which the frontier model does not generate")


def _gain_operating(study: Study) -> dict:
    gains, groups = race_gains(study.race)
    kwargs = {} if study.replicates is None else {"replicates": study.replicates}
    return gain_operating(gains, groups, study.margins.gain, **kwargs)[1]


FRESH = OwnSimulation(
    _gain_operating,
    "true gains of 0, +-1/2, +-1 and +-2 margins, setting-clustered with the "
    "between- and within-setting SDs the fresh-seed pairs show",
)


def _pilot_fractions(study: Study) -> list[Variant]:
    """One row per pilot budget in the RACE table; the first is the paper's pilot."""
    race = study.race
    race = race[~race["setting"].isin(list(study.classes.shared))] if len(race) else race
    fractions = list(dict.fromkeys(race["pilot_fraction"])) if len(race) else []
    return [
        Variant(
            pilot_suffix(f),
            {"fraction": f},
            {"fraction": fraction_words(f)},
            kind=None if i == 0 else "our addition",
            paper=None if i == 0 else "not tested",
        )
        for i, f in enumerate(fractions)
    ]


def _pilot_words(study: Study, fraction: float) -> str:

    return pilot_agreement_test()


@register_claim(
    PILOTS_ID,
    sentence="RACE pilots at {fraction} of the budget name the full grid's regime",
    kind="paper claim",
    paper="race.pilots",
    reads=("race",),
    words=_pilot_words,
    unit="Spearman rank correlation of the pilot and full-budget cell means, averaged over the settings whose pilots moved",
    simulation=PILOTS,
    variants=_pilot_fractions,
)
def _race_pilots(study: Study, fraction: float) -> Result:

    race = study.race
    race = race[~race["setting"].isin(list(study.classes.shared))]
    rows = race[race["pilot_fraction"] == fraction]
    return with_kappa(pilot_agreement(rows), rows)


@register_claim(
    "race.no_gain",
    sentence="RACE gives no stable held-out gain over a fixed default allocation",
    kind="paper claim",
    paper="race.no_gain",
    reads=("race", "fresh"),
    margins=("gain",),
    unit="native reward: RACE's pick minus TRL's default on fresh seeds, the mean of the settings' means",
    simulation=FRESH,
    words=lambda s: no_gain_test(s.margins),
)
def _race_no_gain(study: Study) -> Result:
    gains, groups = race_gains(study.race)
    return no_race_gain(gains, study.margins, groups, flops_words(study.race))
