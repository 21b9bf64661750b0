"""Two claims read from the frontiers other than by their best sets, declared in the registry: the
fits claim (:func:`loglinear`, AICc by :func:`paper_repro.analysis.stats.fit_forms.aicc_by_form`; its
own simulation :func:`fits_operating`) and the planner's consistency check on the frontier table
(:func:`fewer_updates`).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from paper_repro.analysis.claims import worlds
from paper_repro.analysis.claims.registry import NotSimulated, OwnSimulation, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.best_sets import DEFAULT, rows_of
from paper_repro.analysis.stats.fit_forms import aicc_by_form, form_matrix
from paper_repro.analysis.stats.optima import cells_f_test
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.common.results import METRICS
from paper_repro.config import Margins


def fewer_updates(frontier: pd.DataFrame, sizes: tuple[str, ...]) -> Result:
    """The planner's check (:data:`FEWER_TEST`): in every cell of stage A, optimizer steps (rounds x mu)
    and rollouts (rounds x P x G) strictly decrease with policy size. The note names each cell where
    they do not, which quantity, between which sizes, and each size's recipe there (P, G, mu): the
    planner's arithmetic (a round a larger policy cannot afford at this P is bought at a smaller P),
    not a finding."""
    a = frontier[frontier["setting"].isin(sizes)]
    if a["setting"].nunique() < 2:
        return Result(note="fewer than two sizes")
    order = [s for s in sizes if s in set(a["setting"])]
    failures, ratios = [], []
    for cell, g in a.groupby("cell", sort=False):
        g = g.set_index("setting").reindex(order).dropna(subset=["rounds"])
        counts = {"optimizer steps": g["rounds"] * g["mu"], "rollouts": g["rounds"] * g["P"] * g["G"]}
        why = [_not_decreasing(name, values) for name, values in counts.items()]
        if why := [w for w in why if w]:
            recipes = ", ".join(f"{s} P{r.P:g} G{r.G:g} mu{r.mu:g}" for s, r in g.iterrows())
            failures.append(f"{cell}: {'; '.join(why)} ({recipes})")
        if len(g) > 1:
            ratios.append(counts["optimizer steps"].iloc[-1] / counts["optimizer steps"].iloc[0])
    note = (
        "the planner's arithmetic, not a finding: " + " | ".join(failures)
        if failures
        else "steps and rollouts decrease with size in every cell"
    )
    return Result(
        float(np.mean(ratios)) if ratios else NAN, verdict="not held" if failures else "held", note=note
    )


def _not_decreasing(name: str, values: pd.Series) -> str:
    """Where ``values`` (by size, smallest first) fail to decrease: "rollouts do not decrease: M 525 ->
    L 538", or ""."""
    steps = [
        f"{a} {values[a]:.3g} -> {b} {values[b]:.3g}"
        for a, b in zip(values.index[:-1], values.index[1:], strict=True)
        if not values[b] < values[a]
    ]
    return f"{name} do not decrease: {', '.join(steps)}" if steps else ""


def loglinear(runs: pd.DataFrame, names, m: Margins = DEFAULT) -> Result:
    """Over the frontiers (distinct setting x target) whose cells differ (one-way F, p < 0.05):
    constant, log-linear and quadratic in rho by AICc over all runs; a form wins when it beats the
    runner-up by ``m.aicc``."""
    wins: dict[str, int] = {"constant": 0, "loglinear": 0, "quadratic": 0, "tie": 0}
    by_setting = dict(tuple(rows_of(runs, names).groupby("setting", sort=False)))
    for name in names:
        for target in METRICS:
            if name not in by_setting or target not in by_setting[name]:
                continue
            rows = by_setting[name].dropna(subset=[target, "rho"])
            if rows["cell"].nunique() < 3 or not cells_f_test(rows["cell"], rows[target]) < 0.05:
                continue
            scores = aicc_by_form(rows, target)
            ranked = sorted(scores, key=scores.get)
            best, second = ranked[0], ranked[1]
            wins[best if scores[second] - scores[best] >= m.aicc else "tie"] += 1
    n = sum(wins.values())
    if n == 0:
        return Result(note="no frontier that is not flat")
    verdict = (
        "held"
        if wins["loglinear"] > n / 2
        else "not held"
        if n - wins["loglinear"] - wins["tie"] > n / 2
        else "inconclusive"
    )
    return Result(wins["loglinear"] / n, verdict=verdict, note=", ".join(f"{k} {v}" for k, v in wins.items()))


def read_wins(note: str) -> dict[str, int]:
    """The forms' wins :func:`loglinear`'s note states (form or "tie" -> frontiers), or {} for another note."""
    return {k: int(v) for k, v in re.findall(r"\b(constant|loglinear|quadratic|tie) (\d+)", str(note))}


# ---------------------------------------------------------------------------------------- words


def loglinear_test(m: Margins = DEFAULT) -> str:
    return (
        "over every frontier (distinct setting x target) whose cells differ (one-way F test, p < 0.05): constant, log-linear (a + b log "
        "rho) and quadratic fits over all runs, compared by AICc; a form wins a frontier when it beats the "
        f"runner-up by >= {m.aicc}, else the frontier is a tie: held if log-linear wins a majority; not "
        "held if other forms win a majority; inconclusive otherwise, and when no frontier is not flat "
        "(our_value: share log-linear wins)"
    )


FEWER_TEST = (
    "a consistency check of the planner, not a finding: stage A, in every cell, optimizer steps and "
    "rollouts (rounds x P x G) strictly decrease with policy size; held if so in every cell, else not "
    "held, the note naming each cell where one does not and between which sizes (our_value: largest/smallest "
    "size's optimizer steps, mean over cells)"
)


# ---------------------------------------------------------------------------------------- declarations

# simulated studies per world for the fits claim's own simulation: its decision fits three forms to
# every frontier (0.15 s a study), so 60, a share to about +-0.06 near 0.5 (a quick analysis sets fewer)
FITS_REPLICATES = 60
# each world: the form of its every frontier (fit_forms' name) and the claim's true verdict there
FITS_WORLDS = {"log-linear": ("loglinear", "held"), "quadratic": ("quadratic", "not held")}


def _fitted(study: Study, form: str) -> dict:
    """Per target, a world whose every frontier is ``form`` (a :func:`~paper_repro.analysis.stats.fit_forms.form_matrix`
    kind) in rho: the least-squares fit of the setting's committed cell means, read at its cells."""
    out = {}
    for column in [c for c in METRICS if c in study.grid_rows]:
        world = {}
        for setting, cells in worlds.cell_means(study, column).items():
            names = list(cells)
            rho = np.array([study.cell_rho[setting][c] for c in names], float)
            design = form_matrix(rho, form)
            coef, *_ = np.linalg.lstsq(design, np.array([cells[c] for c in names], float), rcond=None)
            world[setting] = dict(zip(names, design @ coef, strict=True))
        out[column] = world
    return out


def fits_operating(study: Study) -> dict:
    """The fits claim's operating characteristics: grid studies with the committed layout, seed
    blocks, residual noise and recipe SD of each target (:mod:`paper_repro.analysis.claims.worlds`), in
    a world whose frontiers are the log-linear fits of the committed cell means (the claim true) and
    one whose frontiers are their quadratic fits (false); its decision (AICc over the runs) cannot read
    a noiseless study, so each world's truth is declared (:data:`FITS_WORLDS`)."""
    cache = study.__dict__.setdefault("_own", {})
    replicates = min(study.replicates or FITS_REPLICATES, FITS_REPLICATES)
    if "fits" not in cache:
        decide = {"fits.loglinear": (lambda s: _fits_loglinear(s), False)}
        world = {name: _fitted(study, form) for name, (form, _) in FITS_WORLDS.items()}
        truths = {name: Result(verdict=verdict) for name, (_, verdict) in FITS_WORLDS.items()}
        cache["fits"] = worlds.simulate(study, decide, world, replicates, truths)["fits.loglinear"]
    return worlds.columns(
        "fits.loglinear",
        cache["fits"],
        "quadratic",
        "the committed frontiers' log-linear fits (true) and quadratic fits (false)",
        replicates,
    )


FITS = OwnSimulation(
    fits_operating,
    "every frontier the log-linear (true) or quadratic (false) least-squares fit of its committed cell "
    "means; the committed layout, seed blocks, residual noise and recipe SD",
)
PLANNER = NotSimulated("a consistency check of the planner's arithmetic: nothing random to simulate")


@register_claim(
    "fits.loglinear",
    sentence="log-linear in rho is the best non-trivial fit",
    kind="paper claim",
    paper="fits.loglinear",
    reads=("grid",),
    margins=("aicc",),
    unit="share of the non-flat frontiers whose lowest-AICc form is log-linear in rho",
    simulation=FITS,
    words=lambda s: loglinear_test(s.margins),
)
def _fits_loglinear(study: Study) -> Result:
    return loglinear(study.grid.runs, study.classes.distinct, study.margins)


@register_claim(
    "planner.fewer_updates",
    sentence="larger policies buy fewer updates and rollouts at equal FLOPs",
    kind="consistency check",
    paper="qualitative",
    reads=("frontier",),
    unit="optimizer steps of the largest policy over the smallest's, mean over stage A's cells",
    simulation=PLANNER,
    words=lambda s: FEWER_TEST,
)
def _planner_fewer_updates(study: Study) -> Result:
    return fewer_updates(study.frontier, study.classes.sizes)
