"""The final analysis: every table and figure from the result tables alone (:func:`analyse`,
``paper-repro analyse``, notebook 40), and the design simulator's command (:func:`simulate_design`).
The tables it writes, one declaration each (:mod:`paper_repro.analysis.tables.registry`), in order:
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from paper_repro.analysis.claims.paper import PAPER_RHO
from paper_repro.analysis.claims.registry import Simulated, specs
from paper_repro.analysis.claims.study import Classes, Study
from paper_repro.analysis.claims.table import COLUMNS, claims_table
from paper_repro.analysis.figures.registry import Context, draw_figures, figure_listing
from paper_repro.analysis.figures.style import Written
from paper_repro.analysis.stats.best_sets import setting_best
from paper_repro.analysis.stats.fit_forms import aicc_by_form
from paper_repro.analysis.stats.mixed import recipe_table
from paper_repro.analysis.stats.optima import optimum_table, window_verdict
from paper_repro.analysis.tables import cards, conventions, hacking, recipes
from paper_repro.analysis.tables.curve_rows import grid_curves
from paper_repro.analysis.tables.curves import CurveAnalysis, curve_analysis
from paper_repro.analysis.tables.frontiers import (
    at_full_budget,
    load_curves,
    load_runs,
    shared_runs,
    study_rows,
)
from paper_repro.analysis.tables.inventory import Folder, read_folder
from paper_repro.analysis.tables.race import RegimeThresholds, disagreement_table, regime_ceiling
from paper_repro.analysis.tables.race_plus import plus_table
from paper_repro.analysis.tables.registry import TABLES, table_listing
from paper_repro.analysis.tables.test_time import problems_if_run
from paper_repro.common.console import Steps
from paper_repro.common.paths import repo_root
from paper_repro.common.results import METRICS, float_text, results_dir, write_table
from paper_repro.config import Profile
from paper_repro.run.design_cost import shared_settings

# What the analysis reads of a runs table: without these it cannot run and says which are missing.
REQUIRED = (
    "run_id",
    "stage",
    "setting",
    "cell",
    "seed",
    "budget_kind",
    "budget_flops",
    "target_rho",
    "rho",
    "rho_executed",
    "rho_time",
    "C_reward",
    "C_total",
    "P",
    "G",
    "K",
    "mu",
    "rounds",
    "model",
    "reward_system",
    "status",
    *METRICS,
    *(f"base_{m}" for m in METRICS),
)


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
    design: pd.DataFrame | None = (
        None  # design.csv: the pre-registered block, and the post-hoc one written here
    )
    figures_dir: Path | None = None  # where ``figures`` were written
    curves: CurveAnalysis | None = None  # the compute curves: fits, rho*(C), size*(C), extrapolation
    folder: Folder | None = None  # what the results folder held, what was read and left out (lines())
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # what was written, by name, and curves


def _checked_runs(path: Path, profile: Profile) -> pd.DataFrame:
    _check_columns(path)
    return load_runs(path, profile)


def _check_columns(path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(f"no runs table at {path}: run the study first (make reproduce)")
    with open(path) as fh:
        header = fh.readline().rstrip("\n").split(",")
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ValueError(f"{path} lacks the columns the analysis reads: {', '.join(missing)}")


# What the analysis's progress names, in order (paper_repro.common.console.Steps)
PARTS = (
    "the runs' tables",
    "RACE+",
    "the design's simulation",
    "the claims and their power",
    "the compute curves",
    "the recipes and the recipe SD's check",
    "the figures",
)


def analyse(
    profile: Profile,
    results_root: str | Path | None = None,
    figures_dir: str | Path | None = None,
    thresholds: RegimeThresholds | None = None,
    power_replicates: int | None = None,
    design: str = "auto",
    figures: bool = True,
) -> Analysis:
    """Every table and figure of ``profile``'s study from the runs table in ``results_root`` (None:
    the committed ``data/results/<profile>``), the tables (:data:`TABLES`) beside it, the figures to
    :func:`figures_folder`. ``power_replicates``: simulated studies per seed count for the power
    column (None: the power module's default, 0: none). ``design``: the runs read, the profile's
    design (``study``) or the one the folder's runs make up (``folder``; ``auto``: the study's where
    the folder holds runs of its grid, :mod:`paper_repro.analysis.tables.inventory`); what was found
    and left out is ``Analysis.folder.lines()``. A folder whose grid cannot compare cells over seeds
    gets its tables, and claims that say they are not computable (NaN, never a number). ``figures``
    False: the tables and claims alone, no figure drawn (``Analysis.figures`` empty), for a caller
    that reads verdicts only (the decision rules' tests)."""
    thresholds = thresholds or RegimeThresholds()
    steps = Steps("analysis", PARTS)  # on the console (paper_repro.common.console), never in the notebook
    steps("the runs' tables")
    root = results_dir(profile.name, results_root)
    fig_dir = figures_folder(profile, results_root, figures_dir)
    folder = _read(root, profile, design)
    if folder.not_computable:  # no claim to simulate either: its tests need cells over seeds
        power_replicates = 0
    made = _build(root, profile, folder, thresholds, power_replicates, steps)
    tables = {table.name: table.of(made) for table in TABLES}
    for name, table in tables.items():
        write_table(root / f"{name}.csv", table)
    tables["curves"] = made.study.curves  # the runs' compute curves, which the curve figures draw
    steps("the figures")
    order = [s.name for s in profile.all_settings()]
    context = Context(order, profile.margins.regime, made.shared, made.sizes)
    written = draw_figures(tables, fig_dir, context) if figures else Written()
    steps.close()
    return Analysis(
        made.frontier,
        made.optima,
        made.rho_star_tests,
        made.fits,
        made.disagreement,
        made.share,
        made.race,
        made.ceiling,
        made.convention,
        made.hacked,
        made.hacked_summary,
        made.claims,
        written,
        made.design,
        fig_dir,
        made.curve,
        folder,
        tables,
    )


def _read(root: Path, profile: Profile, design: str) -> Folder:
    """What ``root`` holds of ``profile``'s study (:func:`read_folder`); an error that says what it
    found when it holds no full-budget grid run."""
    _check_columns(root / "runs.csv")
    committed = root.resolve() == results_dir(profile.name).resolve()
    folder = read_folder(root / "runs.csv", profile, design, committed)
    if folder.rows["grid"].empty:
        raise ValueError(
            f"{root / 'runs.csv'} holds no full-budget run of the {profile.name} grid at budget "
            f"{profile.budget_flops:.3g} to analyse ({len(folder.runs)} ok rows of the design in all). "
            + " ".join(f"{line}." for line in folder.lines())
            + " Runs of a quick study are analysed with quick=True (paper-repro analyse --quick)."
        )
    return folder


def _build(
    root: Path,
    profile: Profile,
    folder: Folder,
    thresholds: RegimeThresholds,
    power_replicates: int | None,
    steps: Steps,
) -> SimpleNamespace:
    """Everything the analysis computes from ``folder``'s rows, by name: what :data:`TABLES` write
    (each table's ``of`` reads it), the figures draw and :class:`Analysis` holds."""
    curves, rows = folder.curves, folder.rows
    study, shared = _study(root, profile, folder, thresholds, claim_replicates(power_replicates))
    full_rows, pilots, classes = study.grid_rows, study.pilots, study.classes
    m = SimpleNamespace(study=study, shared=shared, sizes=classes.sizes, folder=folder)
    distinct, tau, margins = study.distinct, study.tau, profile.margins
    m.frontier = study.frontier
    m.optima = optimum_table(full_rows, m.frontier, shared, tau)
    m.rho_star_tests = _rho_star_tests(distinct, classes, margins)
    m.fits = _fit_table(distinct, m.optima)
    m.disagreement, m.share = disagreement_table(m.frontier)
    m.race = study.race
    steps("RACE+")
    m.plus = plus_table(
        full_rows,
        pilots,
        curves,
        rows["fresh"],
        rows["fresh_default"],
        shared,
        profile.budget_flops,
        tau,
        thresholds,
    )
    m.ceiling = regime_ceiling(distinct, classes.distinct, thresholds, tau)
    m.convention = conventions.convention_table(distinct, {name: (name,) for name in classes.distinct}, tau)
    m.hacked = study.hacking
    m.hacked_summary = hacking.hacking_summary(m.hacked)
    steps("the design's simulation")
    m.design = _design_blocks(root, study, power_replicates)
    steps("the claims and their power")
    m.claims = claims_table(study, m.design, _powers(study, power_replicates))
    if folder.not_computable:
        m.claims = not_computable(m.claims, folder.not_computable)
        m.rho_star_tests = m.rho_star_tests.assign(verdict="inconclusive")
    # the question asked as the budget grows: the grid runs' compute curves (their ladders' points)
    steps("the compute curves")
    m.curve = curve_analysis(study.curves, margins, tau, shared=shared, sizes=classes.sizes)
    steps("the recipes and the recipe SD's check")
    m.recipe_pairs = recipes.pair_table(recipes.pairs_of(distinct), margins.recipe, recipes=m.frontier)
    m.cards = cards.card_table(root / "steps", set(folder.runs["run_id"]))
    m.recipe_sd = recipe_table(distinct, [t for t in METRICS if t in distinct])  # the noise model, per target
    m.recipe_check = _recipe_check(study, power_replicates)  # its bias and coverage at this design
    return m


def _study(
    root: Path, profile: Profile, folder: Folder, thresholds: RegimeThresholds, replicates: int | None = None
) -> tuple[Study, dict]:
    """The study the claims read from ``folder``'s rows (in ``root``), its claims' own simulations at
    ``replicates`` studies per world (:func:`claim_replicates`; None: each claim's own count), and the
    settings that are another's runs (:func:`shared_runs`: setting -> the setting whose runs it shares)."""
    rows = folder.rows
    full_rows = conventions.with_rho_6n(rows["grid"], root / "steps")
    shared = shared_runs(full_rows, [s.name for s in profile.all_settings()])
    study = Study(
        full_rows,
        Classes.of(profile, shared),
        profile.margins,
        pilots={f: rows[f"pilot {f}"] for f in profile.pilot_fractions},
        fresh=rows["fresh"],
        fresh_default=rows["fresh_default"],
        curves=grid_curves(folder.curves, full_rows),
        thresholds=thresholds,
        test_time=problems_if_run(root),  # stage E's claims read them where it has run
        replicates=replicates,
    )
    return study, shared


NOT_COMPUTED = ("our_value", "ci_low", "ci_high", "best_cells", "seeds_for_80pct_power", "power_now")


def not_computable(claims: pd.DataFrame, reason: str) -> pd.DataFrame:
    """``claims`` with every claim marked not computable for ``reason``: inconclusive, its value,
    interval and power NaN (never a number its test did not decide), the reason in its note."""
    claims = claims.copy()
    claims["verdict"] = "inconclusive"
    for column in (c for c in NOT_COMPUTED if c in claims):
        claims[column] = float("nan") if column != "best_cells" else ""
    claims["note"] = f"not computable: {reason}"
    if "leave_one_seed_out" in claims:
        claims["leave_one_seed_out"] = "not recomputed"
    return claims


def refresh_claims(
    profile: Profile, declared: Sequence[str], results_root: str | Path | None = None
) -> pd.DataFrame:
    """Decide again, on the folder as it is now, the rows of ``claims.csv`` of the claims declared as
    ``declared`` (registry ids, each with its variants: ``test_time.rl_beats_sampling`` covers
    ``test_time.rl_beats_sampling.S.gsm``), for a step that adds what only they read after the
    analysis wrote the table (stage E). Their rows are replaced where they stood, every other row is
    kept as its text was, and the table is written atomically; returns the new rows. Only claims
    that simulate themselves (or not at all): the design simulator's claims need the analysis."""
    chosen = [s for s in specs() if s.id in declared]
    if len(chosen) != len(declared) or any(isinstance(s.simulation, Simulated) for s in chosen):
        raise ValueError(
            f"{declared}: only registered claims that the design simulator does not decide can be "
            "refreshed; rerun the analysis (paper-repro analyse) for the others"
        )
    path = results_dir(profile.name, results_root) / "claims.csv"
    if not path.exists():
        raise FileNotFoundError(f"no {path} to refresh: run the analysis first (paper-repro analyse)")
    old = pd.read_csv(path, dtype=str, keep_default_na=False)  # the other rows' text, as written
    ours = old["id"].map(lambda i: any(i == d or i.startswith(f"{d}.") for d in declared)).to_numpy()
    where = ours.nonzero()[0]
    if list(old.columns) != COLUMNS or not len(where) or where[-1] - where[0] + 1 != len(where):
        raise ValueError(
            f"{path} is not the analysis's claims table with the rows of {', '.join(declared)} together: "
            "rerun the analysis (paper-repro analyse) instead"
        )
    folder = _read(path.parent, profile, "auto")
    study, _ = _study(path.parent, profile, folder, RegimeThresholds())
    fresh = claims_table(study, ids=[c.id for s in chosen for c in s.instances(study)])
    if folder.not_computable:
        fresh = not_computable(fresh, folder.not_computable)
    # the new rows as the analysis's writer words them, spliced in as text
    words = fresh.to_csv(index=False, float_format=float_text)
    text = pd.read_csv(io.StringIO(words), dtype=str, keep_default_na=False)
    write_table(path, pd.concat([old[: where[0]], text, old[where[-1] + 1 :]], ignore_index=True))
    return fresh


SUMMARY_CLAIMS = ["claim", "verdict", "our_value", "ci_low", "ci_high", "seeds_for_80pct_power"]
SUMMARY_FRONTIER = ["setting", "cell", "seeds", "rho", *METRICS]


def summary(result: Analysis) -> str:
    """What ``paper-repro analyse`` prints: what the folder held and what was left out, the frontier
    (for a folder's own design: its cells' means over its seeds) and the claims."""
    folder = result.folder
    lines = folder.lines() if folder is not None else []
    with pd.option_context("display.width", 200, "display.max_colwidth", 70):
        if folder is not None and folder.design == "folder":
            lines.append(result.frontiers.reindex(columns=SUMMARY_FRONTIER).to_string(index=False))
        if folder is not None and folder.not_computable:
            lines.append(
                f"claims.csv: {len(result.claims)} claims, each inconclusive with NaN values (not computable)"
            )
        else:
            lines.append(result.claims[SUMMARY_CLAIMS].to_string(index=False))
    return "\n".join(lines)


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
    replace_registered: bool = False,
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
    classes = Classes.of(profile, shared)
    names = list(classes.distinct)
    if grid is not None:
        layout = sim.Layout.from_runs(grid, names, profile.seeds)
    else:
        cells = tuple((f"r{round(100 * t):02d}", float(t)) for t in profile.grid.targets)
        layout = sim.Layout(dict.fromkeys(names, cells), profile.seeds)
    from paper_repro.run.design_cost import eval_size

    model = sim.noise_model(grid, names, recipe_sd, seed_sd, amplitude, problems=eval_size(profile))
    kwargs = {} if replicates is None else {"replicates": replicates}
    if registered_after_runs(root) and not replace_registered:
        raise ValueError(
            f"{root / 'design.csv'} already holds a pre-registered block and {root / 'runs.csv'} holds grid runs: "
            "the block registers the design before its runs and is not rewritten after them (the analysis "
            "regenerates the post-hoc block); pass --replace-registered to overwrite it anyway"
        )
    table = sim.design_table(layout, model, classes, profile.margins, variants, progress=progress, **kwargs)
    write_table(root / "design.csv", keep_post_hoc(root, table))
    return table


def registered_after_runs(root: Path) -> bool:
    """Whether ``root``'s ``design.csv`` holds a pre-registered block and its ``runs.csv`` grid runs:
    the block then registers a design whose runs have begun, and is not rewritten unasked."""
    existing = _committed_design(root)
    if existing is None or not (existing["block"] == PRE).any() or not (root / "runs.csv").exists():
        return False
    return bool((pd.read_csv(root / "runs.csv", usecols=["budget_kind"])["budget_kind"] == "full").any())


def keep_post_hoc(root: Path, table: pd.DataFrame) -> pd.DataFrame:
    """``table`` (a design simulation, before the runs) as ``design.csv``'s pre-registered block,
    followed by the post-hoc block the folder's ``design.csv`` already has."""
    table = table.drop(columns=["block"], errors="ignore")
    table.insert(0, "block", PRE)
    existing = _committed_design(root)
    post = existing[existing["block"] == POST] if existing is not None else None
    return pd.concat([table, post], ignore_index=True) if post is not None and len(post) else table


POSTHOC_REPLICATES = 100  # study pairs per truth of design.csv's post-hoc block (a 5% rate to +-1.5 points)
# simulated studies per world of every claim's own simulation in a quick analysis (one given
# power_replicates: a test's or a sweep's); the published analysis runs each claim's own count
QUICK_CLAIM_REPLICATES = 60


def claim_replicates(power_replicates: int | None) -> int | None:
    """The claims' own simulations' studies per world (:attr:`Study.replicates`) for an analysis run
    with ``power_replicates``: None (the published analysis, ``paper-repro analyse`` and notebook 40
    as they ship) keeps each claim's own count (the issue-53 claims' 400 a world,
    :data:`paper_repro.analysis.claims.worlds.REPLICATES`; RACE's gain and the recipe claim 2,000; the
    curve claims 200); any number (a quick analysis: the tests', a sweep's) :data:`QUICK_CLAIM_REPLICATES`."""
    return None if power_replicates is None else QUICK_CLAIM_REPLICATES


PRE, POST = "pre-registered", "post-hoc"


def _committed_design(root: Path) -> pd.DataFrame | None:
    """The operating characteristics committed beside the runs (``design.csv``), if any; rows from
    before the blocks were named are the pre-registered block (``paper-repro design`` wrote them)."""
    path = root / "design.csv"
    if not path.exists():
        return None
    table = pd.read_csv(path)
    if "block" not in table:
        table.insert(0, "block", PRE)
    return table


def _design_blocks(root: Path, study: Study, replicates: int | None) -> pd.DataFrame | None:
    """``design.csv`` with its post-hoc block regenerated: every simulated claim's operating
    characteristics at the design the study ran (its settings' cells and seeds), with the noise and
    frontier heights its runs show (:func:`paper_repro.analysis.design.post_hoc`); the pre-registered
    block, written before the runs by ``paper-repro design``, is kept as it is. ``replicates``: study
    pairs per truth (None: :data:`POSTHOC_REPLICATES`; 0: the block is not regenerated)."""
    from paper_repro.analysis import design

    table = _committed_design(root)
    if replicates == 0 or study.distinct.empty:
        return table
    post = design.post_hoc(study, POSTHOC_REPLICATES if replicates is None else replicates).assign(block=POST)
    kept = table[table["block"] != POST] if table is not None else None
    merged = pd.concat([kept, post], ignore_index=True) if kept is not None and len(kept) else post
    merged = merged[["block", *[c for c in merged.columns if c != "block"]]]
    write_table(root / "design.csv", merged)
    return merged


def _powers(study: Study, replicates: int | None) -> dict | None:
    """Per simulated claim (by id), the share of simulated studies that decide per seed count: the
    committed frontiers' unimodal fits as the truth, with their seed noise and the recipe effect they
    show (:func:`paper_repro.analysis.design.power_table`); None with ``replicates == 0``."""
    from paper_repro.analysis import design

    distinct = study.distinct
    if replicates == 0 or distinct.empty:
        return None
    names = study.classes.distinct
    layout = design.Layout.from_runs(distinct, names, study.seeds_per_cell)
    noise = design.Noise.from_runs(distinct, names)
    counts = tuple(sorted({*design.SEEDS, study.seeds_per_cell}))
    kwargs = {} if replicates is None else {"replicates": replicates}
    truth = design.fitted_truth(distinct, names)
    return design.power_table(layout, noise, truth, study.classes, study.margins, counts, **kwargs)


def _recipe_check(study: Study, replicates: int | None) -> pd.DataFrame:
    """``recipe_sd_check.csv``: the REML recipe SD's bias and 90% coverage in studies simulated at this
    design (:func:`paper_repro.analysis.design.recipe_check`); empty with ``replicates`` 0."""
    if replicates == 0 or study.distinct.empty:
        return pd.DataFrame()
    from paper_repro.analysis import design

    return design.recipe_check(study, design.RECIPE_CHECK_REPLICATES if replicates is None else replicates)


def _rho_star_tests(distinct: pd.DataFrame, classes: Classes, margins) -> pd.DataFrame:
    """Per distinct setting, the cells that could be best for its native reward tested against its
    class's paper value (the per-setting verdicts behind the class claims)."""
    out = []
    for names, x in (
        (classes.rule_based, PAPER_RHO["rule-based"]),
        (classes.prm_style, PAPER_RHO["PRM-style"]),
    ):
        for name in names:
            best = setting_best(distinct, name, "native_reward", margins)
            if not len(best.rhos):
                continue
            out.append(
                {
                    "setting": name,
                    "paper_value": x,
                    "margin": margins.rho,
                    "best_cells": best.cells,
                    "best_low": best.span[0],
                    "best_high": best.span[1],
                    "verdict": window_verdict(best.rhos, x, margins.rho),
                    "rho_star": best.star,
                    "ci95_low": best.low,
                    "ci95_high": best.high,
                    "status": best.status,
                }
            )
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
            scores = aicc_by_form(data, t)
            out.append(
                {
                    "setting": setting,
                    "target": t,
                    "runs": len(data),
                    "flat": flat.get((setting, t)),
                    **{f"aicc_{k}": v for k, v in scores.items()},
                    "best_fit": min(scores, key=scores.get),
                }
            )
    return pd.DataFrame(out)


__doc__ += table_listing()  # the listings are the registries', never typed twice
__doc__ += (
    "\n\nThe figures it draws, one declaration each (:mod:`paper_repro.analysis.figures.registry`):\n\n"
)
__doc__ += figure_listing()
