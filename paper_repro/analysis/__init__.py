"""The final analysis: every table and figure from the result tables alone.

:func:`analyse` (``paper-repro analyse``, notebook 40) reads ``runs.csv`` (and the step logs beside
it) and writes, beside them:

- ``frontiers.csv``: per setting and cell, every target's mean with a 95% interval over seeds;
- ``optima.csv``: per setting and target, the cells that could be best at 95% (the decision), rho*
  of the unimodal fit with its seed-bootstrap interval and status (interior, boundary, not
  identified), and as descriptions the quadratic's vertex with Fieller's interval, the F test of the
  cells and the argmax cell (:mod:`paper_repro.analysis.optima`);
- ``rho_star_tests.csv``: per distinct setting, its best set tested against its class's paper value;
- ``fits.csv``: constant, log-linear and quadratic fits by AICc per frontier;
- ``disagreement.csv``, ``race.csv``;
- ``conventions.csv``: rho* under the useful, executed, 6N and wall-time conventions;
- ``reward_hacking.csv``: per run, the change from base in its training reward, gsm pass@1 and the
  judge's score, and whether it games its reward (:mod:`paper_repro.analysis.hacking`);
  ``reward_hacking_summary.csv`` per reward system;
- ``claims.csv``: one row per claim, its verdict, its test, its operating characteristics (from
  ``design.csv``, written by ``paper-repro design``: :mod:`paper_repro.analysis.design`) and its
  power (:mod:`paper_repro.analysis.claims`);
- ``compute_cards.csv``: the runs' compute cards, flattened (:mod:`paper_repro.analysis.cards`; runs
  recorded before the ledger wrote cards have none);
- from ``curves.csv`` (each grid run at the points of its budget ladder, :mod:`paper_repro.ladder`;
  :mod:`paper_repro.analysis.curves`): ``curve_fits.csv`` (per setting and cell, a saturating fit of
  each target against log C, its asymptote with a seed-bootstrap interval or *not identified*),
  ``rho_star_by_budget.csv`` (rho*(C): the cells that could be best at each budget point),
  ``size_star_by_budget.csv`` (size*(C): the (policy, cell) pairs of stage A that could be best at
  equal FLOPs), ``extrapolation.csv`` and its summary (each curve fitted up to C/2, C predicted), and
  two claims rows (does the best allocation move with the budget; does the best policy grow). A
  stage whose runs go on past C counts at C by its point there (:func:`frontiers.at_full_budget`);

and the figures to ``figures/<profile>/``. Deleting every output and rerunning rebuilds them from the
committed runs. Settings that share runs (stage B's ``sparse`` is stage A's middle policy) appear
in the per-setting tables with ``same_runs_as`` and count once in every claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro.analysis import cards, conventions, figures, hacking, recipes
from paper_repro.analysis import claims as claim_tests
from paper_repro.analysis.curves import CurveAnalysis, curve_analysis, grid_curves
from paper_repro.analysis.frontiers import (
    at_full_budget,
    frontier_table,
    load_curves,
    load_runs,
    runs_of,
    setting_rows,
    shared_runs,
)
from paper_repro.analysis.optima import optimum_table, window_verdict
from paper_repro.analysis.race import (
    RegimeThresholds,
    disagreement_table,
    plus_table,
    race_table,
    regime_ceiling,
)
from paper_repro.config import Profile
from paper_repro.paths import repo_root
from paper_repro.results import METRICS, results_dir, write_table

# What the analysis reads of a runs table: without these it cannot run and says which are missing.
REQUIRED = ("run_id", "stage", "setting", "cell", "seed", "budget_kind", "budget_flops", "target_rho", "rho",
            "rho_executed", "rho_time", "C_reward", "C_total", "P", "G", "K", "mu", "rounds", "model",
            "reward_system", "status", *METRICS, *(f"base_{m}" for m in METRICS))  # fmt: skip


@dataclass
class Analysis:
    frontiers: pd.DataFrame
    optima: pd.DataFrame
    rho_star_tests: pd.DataFrame
    fits: pd.DataFrame
    disagreement: pd.DataFrame
    disagreement_share: float
    race: pd.DataFrame
    regime_ceiling: float
    conventions: pd.DataFrame
    hacking: pd.DataFrame
    hacking_summary: pd.DataFrame
    claims: pd.DataFrame
    figures: list[str]
    design: pd.DataFrame | None = None  # design.csv, the operating characteristics, when committed
    figures_dir: Path | None = None  # where ``figures`` were written
    curves: CurveAnalysis | None = None  # the compute curves: fits, rho*(C), size*(C), extrapolation


def default_rows(profile: Profile, runs: pd.DataFrame) -> pd.DataFrame:
    """Full-budget rows of TRL's default allocation (K = G = preferred G, mu = 1, the grid's largest
    P) per setting."""
    g, p = profile.grid.preferred_G, max(profile.grid.P)
    parts = []
    for s in profile.all_settings():
        rows = runs_of(runs, s, "full", profile.budget_flops)
        parts.append(rows[(rows["P"] == p) & (rows["G"] == g) & (rows["K"] == g) & (rows["mu"] == 1)])
    return pd.concat(parts, ignore_index=True) if parts else runs.iloc[0:0]


def study_rows(profile: Profile, runs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The study's rows by role, each labelled with its setting: ``grid`` (the full budget on the grid
    seeds), ``fresh`` (full-budget grid cells on the fresh seeds: RACE's and RACE+'s picks), ``fresh_default``
    (TRL's default on the fresh seeds), and ``pilot <fraction>`` (each pilot grid on the pilot seeds).
    A run on a seed of no role (an earlier design's) is left out."""
    settings = profile.all_settings()
    full = setting_rows(runs, settings, "full", profile.budget_flops)
    defaults = default_rows(profile, runs)
    out = {
        "grid": full[full["seed"].isin(range(profile.seeds))],
        "fresh": full[full["seed"].isin(profile.fresh_seeds)],
        "fresh_default": defaults[defaults["seed"].isin(profile.fresh_seeds)],
    }
    for fraction, budget in profile.pilot_budgets().items():
        pilot = setting_rows(runs, settings, "pilot", budget)
        out[f"pilot {fraction}"] = pilot[pilot["seed"].isin(profile.pilot_seeds)]
    return out


def _checked_runs(path: Path, profile: Profile) -> pd.DataFrame:
    if not path.exists():
        raise FileNotFoundError(f"no runs table at {path}: run the study first (make reproduce)")
    with open(path) as fh:
        header = fh.readline().rstrip("\n").split(",")
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ValueError(f"{path} lacks the columns the analysis reads: {', '.join(missing)}")
    return load_runs(path, profile)


def analyse(
    profile: Profile,
    results_root: str | Path | None = None,
    figures_dir: str | Path | None = None,
    thresholds: RegimeThresholds | None = None,
    power_replicates: int | None = None,
) -> Analysis:
    """Every table and figure of ``profile``'s study from the runs table in ``results_root`` (None:
    the committed ``data/results/<profile>``), the figures to :func:`figures_folder`.
    ``power_replicates``: simulated studies per seed count for the power column (None: the power
    module's default, 0: none)."""
    thresholds = thresholds or RegimeThresholds()
    root = results_dir(profile.name, results_root)
    fig_dir = figures_folder(profile, results_root, figures_dir)
    runs = _checked_runs(root / "runs.csv", profile)
    curves = load_curves(root / "curves.csv", runs)
    runs = at_full_budget(runs, curves, profile.budget_flops)  # a run past C counts by its point at C
    settings = profile.all_settings()
    rows = study_rows(profile, runs)
    full_rows = rows["grid"]
    if full_rows.empty:
        raise ValueError(
            f"{root / 'runs.csv'} holds no full-budget run of the {profile.name} grid at budget "
            f"{profile.budget_flops:.3g} ({len(runs)} ok rows in all). Runs of a quick study are analysed "
            f"with quick=True (paper-repro run --quick does this)."
        )
    full_rows = conventions.with_rho_6n(full_rows, root / "steps")
    pilots = {f: rows[f"pilot {f}"] for f in profile.pilot_fractions}
    shared = shared_runs(full_rows, [s.name for s in settings])
    classes = claim_tests.Classes.of(profile, shared)
    distinct = full_rows[~full_rows["setting"].isin(shared)]

    margins = profile.margins
    frontier = frontier_table(full_rows)
    tau = claim_tests.Frontiers(distinct).recipe_sd(margins)  # the recipe effect the best sets allow for
    optima = optimum_table(full_rows, frontier, shared, tau)
    rho_star_tests = _rho_star_tests(distinct, classes, margins)
    fits = _fit_table(distinct, optima)
    disagreement, share = disagreement_table(frontier)
    race, gains = race_table(full_rows, pilots, rows["fresh"], rows["fresh_default"], shared, thresholds, tau)
    plus = plus_table(full_rows, pilots, curves, rows["fresh"], rows["fresh_default"], shared,
                      profile.budget_flops, tau, thresholds)  # RACE+ beside RACE and TRL's default  # fmt: skip
    ceiling = regime_ceiling(distinct, [*classes.rule_based, *classes.prm_style], thresholds, tau)
    groups = {name: (name,) for name in (*classes.rule_based, *classes.prm_style)}
    convention = conventions.convention_table(distinct, groups, tau)
    hacked = hacking.hacking_table(distinct)
    hacked_summary = hacking.hacking_summary(hacked)
    design_table = _committed_design(root)
    powers = _powers(distinct, classes, margins, power_replicates)
    claims = claim_tests.claims_table(distinct, frontier, race, gains, classes, margins, design_table, powers)
    claims = pd.concat([claims, _convention_claim(distinct, classes, margins),
                        _hacking_claim(hacked, distinct, margins.gaming)], ignore_index=True)  # fmt: skip
    # the question asked as the budget grows: the grid runs' compute curves (their ladders' points)
    curve = curve_analysis(grid_curves(curves, full_rows), margins, tau, fig_dir, shared=shared,
                           sizes=classes.sizes)  # fmt: skip
    recipe_row, recipe_pairs = recipes.recipe_claim(distinct, margins.recipe, frontier)  # at equal rho
    claims = pd.concat([claims, curve.claims, recipe_row], ignore_index=True)
    loso = _leave_one_seed_out(full_rows, shared, classes, margins, pilots, rows, thresholds, claims)
    claims["leave_one_seed_out"] = claims["claim"].map(loso).fillna("not recomputed")
    card_rows = cards.card_table(root / "steps", set(runs["run_id"]))
    for name, table in (("frontiers", frontier), ("optima", optima), ("rho_star_tests", rho_star_tests),
                        ("fits", fits), ("disagreement", disagreement), ("race", race),
                        ("conventions", convention), ("reward_hacking", hacked),
                        ("reward_hacking_summary", hacked_summary), ("claims", claims),
                        ("compute_cards", card_rows), ("curve_fits", curve.fits),
                        ("rho_star_by_budget", curve.rho_star), ("size_star_by_budget", curve.size_star),
                        ("extrapolation", curve.extrapolation),
                        ("extrapolation_summary", curve.extrapolation_summary),
                        ("recipe_pairs", recipe_pairs), ("race_plus", plus.settings),
                        ("race_plus_cells", plus.cells), ("race_plus_summary", plus.summary)):  # fmt: skip
        write_table(root / f"{name}.csv", table)
    written = figures.all_figures(frontier, optima, disagreement, race, convention, hacked, profile, fig_dir)
    written += [p.stem for p in curve.figures]
    return Analysis(frontier, optima, rho_star_tests, fits, disagreement, share, race, ceiling, convention,
                    hacked, hacked_summary, claims, written, design_table, fig_dir, curve)  # fmt: skip


def figures_folder(profile: Profile, results_root=None, figures_dir=None) -> Path:
    """Where the figures go: ``figures_dir``; else beside redirected results (``<results_root>/figures``,
    so that exploring never rewrites the committed figures); else the committed ``figures/<profile>``."""
    if figures_dir is not None:
        return Path(figures_dir)
    if results_root is not None:
        return Path(results_root) / "figures"
    return repo_root() / "figures" / profile.name


def simulate_design(
    profile: Profile,
    results_root: str | Path | None = None,
    recipe_sd: float | None = None,
    seed_sd: float | None = None,
    amplitude: float | None = None,
    replicates: int | None = None,
    variants: dict[str, tuple[int, float]] | None = None,
    progress=None,
) -> pd.DataFrame:
    """The study's operating characteristics (``paper-repro design``): the frontier claims' own tests
    on simulated studies of ``profile``'s design under known truths, with the noise the committed runs
    show (or the values given), written to ``design.csv`` beside the runs. Its cells are the committed
    runs' realised rhos, or the grid's targets before any run."""
    from paper_repro.analysis import design as sim

    root = results_dir(profile.name, results_root)
    path = root / "runs.csv"
    runs = _checked_runs(path, profile) if path.exists() else None
    if runs is not None:  # a run past C (stage A's) counts by its point at C, as the analysis reads it
        runs = at_full_budget(runs, load_curves(root / "curves.csv", runs), profile.budget_flops)
    grid = study_rows(profile, runs)["grid"] if runs is not None else None
    if grid is not None and grid.empty:
        grid = None
    shared = (
        shared_runs(grid, [s.name for s in profile.all_settings()])
        if grid is not None
        else shared_settings(profile)
    )
    classes = claim_tests.Classes.of(profile, shared)
    names = [*classes.rule_based, *classes.prm_style]
    if grid is not None:
        layout = sim.Layout.from_runs(grid, names, profile.seeds)
    else:
        cells = tuple((f"r{round(100 * t):02d}", float(t)) for t in profile.grid.targets)
        layout = sim.Layout(dict.fromkeys(names, cells), profile.seeds)
    from paper_repro.analysis.design_cost import eval_size

    model = sim.noise_model(grid, names, recipe_sd, seed_sd, amplitude, problems=eval_size(profile))
    kwargs = {} if replicates is None else {"replicates": replicates}
    table = sim.design_table(layout, model, classes, profile.margins, variants, progress=progress, **kwargs)
    write_table(root / "design.csv", table)
    return table


def shared_settings(profile: Profile) -> dict[str, str]:
    """Settings that ask for an earlier setting's experiment (the same policy and reward system):
    {later: earlier}, as :func:`shared_runs` finds them in a runs table."""
    seen: dict[tuple[str, str], str] = {}
    out = {}
    for s in profile.all_settings():
        key = (s.policy, s.reward_system)
        if key in seen:
            out[s.name] = seen[key]
        else:
            seen[key] = s.name
    return out


def _leave_one_seed_out(
    full_rows, shared, classes, margins, pilots, rows, thresholds, claims
) -> dict[str, str]:
    """Per claim of the claims table proper, whether its verdict survives dropping any one grid seed:
    the table recomputed (without power) on the grid less each seed in turn, RACE's rows included."""
    verdict = dict(zip(claims["claim"], claims["verdict"], strict=True))
    changed: dict[str, list[str]] = {}
    seeds = sorted(full_rows["seed"].unique())
    if len(seeds) < 3:
        return {}
    for seed in seeds:
        kept = full_rows[full_rows["seed"] != seed]
        distinct = kept[~kept["setting"].isin(shared)]
        race, gains = race_table(
            kept, pilots, rows["fresh"], rows["fresh_default"], shared, thresholds,
            claim_tests.Frontiers(distinct).recipe_sd(margins),
        )  # fmt: skip
        table = claim_tests.claims_table(distinct, frontier_table(kept), race, gains, classes, margins)
        for claim, v in zip(table["claim"], table["verdict"], strict=True):
            changed.setdefault(claim, [])
            if v != verdict.get(claim):
                changed[claim].append(f"seed {seed}: {v}")
    return {
        claim: "the same without any one seed" if not moves else f"changes without {'; '.join(moves)}"
        for claim, moves in changed.items()
    }


def _committed_design(root: Path) -> pd.DataFrame | None:
    """The operating characteristics committed beside the runs (``design.csv``), if any."""
    path = root / "design.csv"
    return pd.read_csv(path) if path.exists() else None


def _powers(distinct: pd.DataFrame, classes, margins, replicates: int | None) -> dict | None:
    """Per frontier claim, the share of simulated studies that decide per seed count: the committed
    frontiers' unimodal fits as the truth, with their seed noise and the recipe effect they show
    (:func:`paper_repro.analysis.design.power_table`); None with ``replicates == 0``."""
    from paper_repro.analysis import design

    if replicates == 0 or distinct.empty:
        return None
    names = [*classes.rule_based, *classes.prm_style]
    seeds = int(distinct.groupby(["setting", "cell"])["seed"].nunique().median())
    layout = design.Layout.from_runs(distinct, names, seeds)
    noise = design.Noise.from_runs(distinct, names)
    tests = {c.name: c.test for c in claim_tests.frontier_claims(classes, margins)}
    counts = tuple(sorted({*design.SEEDS, seeds}))
    kwargs = {} if replicates is None else {"replicates": replicates}
    return design.power_table(layout, noise, design.fitted_truth(distinct, names), tests, counts, **kwargs)


def _rho_star_tests(distinct: pd.DataFrame, classes: claim_tests.Classes, margins) -> pd.DataFrame:
    """Per distinct setting, the cells that could be best for its native reward tested against its
    class's paper value (the per-setting verdicts behind the class claims)."""
    out = []
    for names, x in (
        (classes.rule_based, claim_tests.RULE_BASED_RHO),
        (classes.prm_style, claim_tests.PRM_STYLE_RHO),
    ):
        for name in names:
            best = claim_tests.setting_best(distinct, name, "native_reward", margins)
            if not len(best.rhos):
                continue
            out.append({"setting": name, "paper_value": x, "margin": margins.rho, "best_cells": best.cells,
                        "best_low": best.span[0], "best_high": best.span[1],
                        "verdict": window_verdict(best.rhos, x, margins.rho), "rho_star": best.star,
                        "ci95_low": best.low, "ci95_high": best.high, "status": best.status})  # fmt: skip
    return pd.DataFrame(out)


def _fit_table(distinct: pd.DataFrame, optima: pd.DataFrame) -> pd.DataFrame:
    """Per distinct frontier: the AICc of each fitted form, the best, and whether it is flat (read
    from ``optima``, which has already tested it)."""
    flat = {(r.setting, r.target): not r.p_flat < 0.05 for r in optima.itertuples()}
    out = []
    for setting, rows in distinct.groupby("setting", sort=False):
        for t in METRICS:
            data = rows.dropna(subset=[t, "rho"])
            if data["cell"].nunique() < 3:
                continue
            scores = claim_tests.aicc_by_form(data, t)
            out.append({"setting": setting, "target": t, "runs": len(data), "flat": flat.get((setting, t)),
                        **{f"aicc_{k}": v for k, v in scores.items()}, "best_fit": min(scores, key=scores.get)})  # fmt: skip
    return pd.DataFrame(out)


def _convention_claim(distinct: pd.DataFrame, classes: claim_tests.Classes, margins) -> pd.DataFrame:
    rows = []
    for convention, column in conventions.CONVENTIONS.items():
        view = distinct.assign(rho=distinct[column])
        for claim, verdict in (
            (
                "rule-based",
                claim_tests.near(
                    view, classes.rule_based, claim_tests.RULE_BASED_RHO, margins, estimate=False
                ).verdict,
            ),
            (
                "PRM-style",
                claim_tests.near(
                    view, classes.prm_style, claim_tests.PRM_STYLE_RHO, margins, estimate=False
                ).verdict,
            ),
        ):
            rows.append({"claim": claim, "convention": convention, "verdict": verdict})
    table = pd.DataFrame(rows)
    share, verdict = conventions.robustness(table)
    detail = "; ".join(f"{c}: {', '.join(g['verdict'])}" for c, g in table.groupby("convention", sort=False))
    return pd.DataFrame([{
        "claim": "the rho* verdicts are robust to the FLOP convention", "kind": "our addition",
        "paper_value": "not tested by the paper", "our_value": share, "ci_low": np.nan, "ci_high": np.nan,
        "verdict": verdict, "note": f"rule-based, PRM-style verdicts per convention: {detail}",
        "test": ("the two rho* ~ x claims recomputed with rho under the useful, executed, 6N-for-everything and "
                 "wall-time conventions: held if every convention gives the same verdicts and some verdict is "
                 "decided; not held if a claim is held under one and not held under another; inconclusive "
                 "otherwise (our_value: share of conventions agreeing with useful)"),
        "seeds_per_cell": int(distinct.groupby(["setting", "cell"])["seed"].nunique().median()),
        "power_now": np.nan, "seeds_for_80pct_power": np.nan,
        "power_note": "as the rho* ~ x claims' power, under each convention",
    }])  # fmt: skip


def _hacking_claim(hacked: pd.DataFrame, distinct: pd.DataFrame, margin: float) -> pd.DataFrame:
    result = hacking.prm_games_more(hacked, margin=margin)
    return pd.DataFrame([{
        "claim": "the learned PRM is gamed more often than the exact checker at the same cost",
        "kind": "our addition", "paper_value": "not reported by the paper", "our_value": result.value,
        "ci_low": result.low, "ci_high": result.high, "verdict": result.verdict, "note": result.note,
        "test": hacking.prm_games_test(margin),
        "seeds_per_cell": int(distinct.groupby(["setting", "cell"])["seed"].nunique().median()),
        "power_now": np.nan, "seeds_for_80pct_power": np.nan,
        "power_note": "not simulated: the frontier model does not generate the runs' changes from base",
    }])  # fmt: skip
