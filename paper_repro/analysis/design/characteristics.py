"""Operating characteristics: each simulated claim's own decision on simulated studies whose truth is
known (:func:`operating_characteristics`, ``design.csv``), and the claims table's power column
(:func:`power_table`). The model: :mod:`paper_repro.analysis.design`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.columns import powers
from paper_repro.analysis.claims.registry import Claim, claims, design_simulation
from paper_repro.analysis.claims.study import Classes, Study
from paper_repro.analysis.design.noise import EVAL_PROBLEMS, Layout, Noise
from paper_repro.analysis.design.studies import Truth, fitted_truth, noiseless, recipe_draw, simulate, truths
from paper_repro.analysis.stats.best_sets import DEFAULT, Frontiers
from paper_repro.analysis.stats.optima import Cells, fit_optimum, unimodal

SEEDS: tuple[int, ...] = (3, 5, 10, 20, 40)  # seed counts the power column tries
REPLICATES = 200  # study pairs per truth: a 5% rate to about +-1.1 points
POWER_REPLICATES = 40  # simulated studies per seed count for the power column
COVERAGE_REPLICATES = 40  # studies per truth whose rho* intervals are bootstrapped
COVERAGE_BOOTSTRAP = 200
RNG_SEED = 0
DECIDED = ("held", "not held", "heterogeneous")


def simulated_claims() -> list[Claim]:
    """The claims the simulator runs: every registered claim declared :class:`Simulated`."""
    return claims(simulated=True)


def design_claims(prefixes: Sequence[str]) -> list[Claim]:
    """The claims whose id starts with one of ``prefixes`` that the simulator can run: declared
    :class:`Simulated`, or simulating their own table and declaring how the simulator scores them too
    (:func:`~paper_repro.analysis.claims.registry.design_simulation`: the target claims). An unknown
    prefix is an error, as is one whose claims the simulator cannot run."""
    chosen = [c for c in claims() if design_simulation(c) is not None]
    out = [c for c in chosen if c.id.startswith(tuple(prefixes))]
    for prefix in prefixes:
        if not any(c.id.startswith(prefix) for c in chosen):
            known = sorted({c.id.split(".")[0] + "." for c in chosen})
            raise ValueError(
                f"no claim the design simulator can run starts with {prefix!r} (these can: {', '.join(known)})"
            )
    return out


def truth_verdicts(
    layout: Layout, truth: Truth, classes: Classes, margins, chosen: list[Claim], recipe: dict | None = None
) -> dict:
    """Each claim's verdict (a Result, by id) on the truth itself: its own decision on the noiseless
    study, with no recipe effect allowed for (the best set is then exactly the truth's best cells);
    with ``recipe``, on the cells as drawn (the claims about these recipes)."""
    study = Study.simulated(noiseless(layout, truth, recipe), classes, replace(margins, recipe_sd=0.0))
    return {c.id: c.decide(study) for c in chosen}


def about_cells(claim: Claim) -> bool:
    """Whether the claim is about the cells as run (its truth includes each cell's recipe draw)."""
    sim = design_simulation(claim)
    return sim is not None and sim.truth == "cells"


def is_wrong(verdict: str, truth) -> bool:
    """A decided verdict that the truth's own (a Result) contradicts (its ``also`` is right too: a
    truth inside the rule's grey zone, e.g. a contrast between 0 and its margin). Where the truth is heterogeneous
    yet every setting's truth gives one verdict, that verdict is not wrong: the class reading it misses
    is the settings' disagreement, not the claim."""
    if verdict not in DECIDED or verdict in (truth.verdict, truth.also):
        return False
    return not (truth.verdict == "heterogeneous" and verdict == truth.unanimous)


def true_best_rhos(layout: Layout, truth: Truth, target: str) -> dict[str, np.ndarray]:
    """Per setting, the realised rhos of the truth's best cells for ``target``."""
    out = {}
    for setting, cells in layout.cells.items():
        rho = np.array([r for _, r in cells])
        means = truth(setting, target, rho)
        out[setting] = rho[means >= np.nanmax(means) - 1e-12]
    return out


# ---------------------------------------------------------------------------------------- tables


def operating_characteristics(
    layout: Layout,
    noise: Noise,
    world: dict[str, Truth],
    classes: Classes,
    margins=DEFAULT,
    replicates: int = REPLICATES,
    coverage_replicates: int = COVERAGE_REPLICATES,
    seed: int = RNG_SEED,
    progress: Callable[[str], None] | None = None,
    chosen: list[Claim] | None = None,
) -> pd.DataFrame:
    """One row per (truth, claim): verdict shares over ``2 * replicates`` studies (pairs sharing their
    recipe effects), the wrong share, the two-draw agreement and the rho* interval coverage. Each
    simulated study is a runs table in the analysis' shape, and every claim of ``chosen`` (None: every
    simulated claim of the registry) decides it with its own ``decide`` under the rule ``margins``;
    the coverage reads the target each claim declares (at most ``replicates`` studies)."""
    chosen = simulated_claims() if chosen is None else chosen
    targets = {c.id: sim.target for c in chosen if (sim := design_simulation(c)) and sim.target}
    rng = np.random.default_rng(seed)
    rows = []
    for truth_name, truth in world.items():
        if progress:
            progress(truth_name)
        truth_verdict = truth_verdicts(layout, truth, classes, margins, chosen)
        cell_claims = [c for c in chosen if about_cells(c)]
        verdicts: dict[str, list[tuple[str, str]]] = {c.id: [] for c in chosen}
        # per replicate, the drawn cells' own verdicts, for the claims about these recipes
        truths_drawn: dict[str, list] = {c.id: [] for c in cell_claims}
        for _ in range(replicates):
            recipe = recipe_draw(layout, noise, rng)
            pair = [
                Study.simulated(simulate(layout, truth, noise, rng, recipe), classes, margins)
                for _ in range(2)
            ]
            for c in chosen:
                verdicts[c.id].append(tuple(c.decide(study).verdict for study in pair))
            if cell_claims:
                drawn = truth_verdicts(layout, truth, classes, margins, cell_claims, recipe)
                for c in cell_claims:
                    truths_drawn[c.id].append(drawn[c.id])
        coverage = _coverage(
            layout,
            noise,
            truth,
            list(dict.fromkeys(targets.values())),
            min(coverage_replicates, replicates),
            rng,
            margins,
        )
        for c in chosen:
            pairs = verdicts[c.id]
            flat = [v for pair in pairs for v in pair]
            share = {
                v: flat.count(v) / len(flat) for v in ("held", "not held", "inconclusive", "heterogeneous")
            }
            # each study's truth: its own drawn cells (claims about these recipes) or the truth's
            per = (
                [t for t in truths_drawn[c.id] for _ in range(2)]
                if c.id in truths_drawn
                else [truth_verdict[c.id]] * len(flat)
            )
            wrong = sum(is_wrong(v, t) for v, t in zip(flat, per, strict=True)) / len(flat)
            said = [t.verdict for t in per]
            true = max(dict.fromkeys(said), key=said.count)
            power = {}
            for side in ("held", "not held"):  # studies whose truth is on this side, outside a grey zone
                hits = [v == side for v, t in zip(flat, per, strict=True) if t.verdict == side and not t.also]
                power[side] = sum(hits) / len(hits) if hits else np.nan
            rows.append(
                {
                    "truth": truth_name,
                    "claim": c.sentence,
                    "claim_id": c.id,
                    "true_verdict": true,
                    **{f"share_{k.replace(' ', '_')}": v for k, v in share.items()},
                    "wrong": wrong,
                    "agreement": sum(a == b for a, b in pairs) / len(pairs),
                    "held_if_true": power["held"],
                    "not_held_if_false": power["not held"],
                    "coverage": coverage.get(targets.get(c.id), np.nan),
                    "seeds": layout.seeds,
                    "cells_per_setting": int(np.median([len(c) for c in layout.cells.values()])),
                    "recipe_sd": noise.recipe_sd,
                    "seed_sd_median": noise.default,
                    "seed_block_sd_median": noise.block_median,
                    "studies": len(flat),
                    "eval_problems": noise.problems,
                }
            )
    return pd.DataFrame(rows)


def _coverage(layout, noise, truth, targets, replicates, rng, margins=DEFAULT) -> dict[str, float]:
    """Per target: the share of (study, setting) with an identified rho* whose 95% seed-bootstrap
    interval holds the rho of one of the truth's best cells."""
    out = {}
    if replicates <= 0:
        return out
    for target in targets:
        best = true_best_rhos(layout, truth, target)
        hits = []
        for _ in range(replicates):
            study = simulate(layout, truth, noise, rng, recipe_draw(layout, noise, rng))
            tau = Frontiers(study).recipe_sd(margins)
            for setting in layout.cells:
                opt = fit_optimum(
                    study[study["setting"] == setting],
                    target,
                    tau,
                    bootstrap=COVERAGE_BOOTSTRAP,
                    describe=False,
                )
                if opt.identified:
                    hits.append(
                        bool(
                            np.any(
                                (best[setting] >= opt.ci95_low - 1e-9)
                                & (best[setting] <= opt.ci95_high + 1e-9)
                            )
                        )
                    )
        out[target] = float(np.mean(hits)) if hits else np.nan
    return out


def power_table(
    layout: Layout,
    noise: Noise,
    truth: Truth,
    classes: Classes,
    margins=DEFAULT,
    seeds: Sequence[int] = SEEDS,
    replicates: int = POWER_REPLICATES,
    seed: int = RNG_SEED,
    chosen: list[Claim] | None = None,
) -> dict[str, dict[int, float]]:
    """Per simulated claim (by id), the share of simulated studies (truth: the committed frontiers'
    unimodal fits, with the recipe effect) that decide, per seed count in ``seeds``."""
    chosen = simulated_claims() if chosen is None else chosen
    rng = np.random.default_rng(seed)
    out: dict[str, dict[int, float]] = {c.id: {} for c in chosen}
    for n in seeds:
        design = layout.with_seeds(n)
        decided = dict.fromkeys(out, 0)
        for _ in range(replicates):
            study = Study.simulated(
                simulate(design, truth, noise, rng, recipe_draw(design, noise, rng)), classes, margins
            )
            for c in chosen:
                decided[c.id] += c.decide(study).verdict in DECIDED
        for claim_id in out:
            out[claim_id][n] = decided[claim_id] / replicates
    return out


# ---------------------------------------------------------------------------------------- the command


@dataclass(frozen=True)
class Model:
    """The noise model and truths' height a design table was simulated with, and where each came from."""

    noise: Noise
    amplitude: float
    source: str


def noise_model(
    runs: pd.DataFrame | None,
    names: Sequence[str],
    recipe_sd: float | None = None,
    seed_sd: float | None = None,
    amplitude: float | None = None,
    problems: int = EVAL_PROBLEMS,
) -> Model:
    """The simulation's noise and the truths' height: from the committed runs (per-cell seed SDs, the
    REML recipe SDs of :func:`paper_repro.analysis.design.noise.recipe_sds`, the median range of the frontiers' unimodal fits), each
    replaced by the value given, if any. Without runs every value must be given. ``problems``: the
    held-out and gsm problems each run was evaluated on (the size the noise is measured at)."""
    have = runs is not None and not runs.empty
    missing = [
        k for k, v in (("recipe_sd", recipe_sd), ("seed_sd", seed_sd), ("amplitude", amplitude)) if v is None
    ]
    if not have and missing:
        raise ValueError(
            f"no committed runs to take the noise model from: give {', '.join('--' + k.replace('_', '-') for k in missing)}"
        )
    noise = (
        Noise.from_runs(runs, names, recipe_sd, problems)
        if have
        else Noise(recipe_sd, seed_sd, {}, problems=problems)
    )
    if seed_sd is not None:
        noise = Noise(noise.recipe_sd, seed_sd, {}, problems=problems)
    if amplitude is None:
        ranges = [
            np.ptp(unimodal(c.mean, c.n)[0])
            for n in names
            for t in CLAIM_TARGETS
            if (c := Cells.of(runs[runs["setting"] == n], t)).k >= 2
        ]
        amplitude = float(np.median(ranges))
    source = "the committed runs" if have else "the command line"
    return Model(noise, amplitude, source)


CLAIM_TARGETS = ("native_reward", "gsm_pass1", "judge_score")


def design_table(
    layout: Layout,
    model: Model,
    classes,
    margins,
    variants: dict[str, tuple[int, float]] | None = None,
    replicates: int = REPLICATES,
    coverage_replicates: int = COVERAGE_REPLICATES,
    progress: Callable[[str], None] | None = None,
    chosen: list[Claim] | None = None,
) -> pd.DataFrame:
    """The operating characteristics of every frontier claim (or of ``chosen``) under every truth, for
    the committed design and each of ``variants`` (name -> (seeds per cell, recipe-SD divisor): a
    divisor sqrt(r) stands for r recipes averaged per cell, the rule's allowance divided with it)."""
    variants = {"committed": (layout.seeds, 1.0), **(variants or {})}
    frames = []
    for name, (seeds, divisor) in variants.items():
        rule = (
            margins if margins.recipe_sd is None else replace(margins, recipe_sd=margins.recipe_sd / divisor)
        )
        frames.append(
            simulated(
                layout.with_seeds(seeds),
                model.noise.divided(divisor),
                model,
                classes,
                rule,
                name,
                replicates,
                coverage_replicates,
                progress,
                chosen,
            )
        )
    return pd.concat(frames, ignore_index=True)


def simulated(
    layout: Layout,
    noise: Noise,
    model: Model,
    classes,
    margins,
    name: str,
    replicates: int = REPLICATES,
    coverage_replicates: int = COVERAGE_REPLICATES,
    progress: Callable[[str], None] | None = None,
    chosen: list[Claim] | None = None,
) -> pd.DataFrame:
    """:func:`operating_characteristics` of one design (``layout`` with ``noise``, the truths as tall
    as ``model``'s), every frontier claim (or ``chosen``) tested by the rule ``margins``, its rows
    named ``name``."""
    world = truths(classes.prm_style, model.amplitude)
    table = operating_characteristics(
        layout,
        noise,
        world,
        classes,
        margins,
        replicates,
        coverage_replicates,
        progress=(lambda t: progress(f"{name}: {t}")) if progress else None,
        chosen=chosen,
    )
    allowance = "estimated per study" if margins.recipe_sd is None else margins.recipe_sd
    return table.assign(
        design=name, rule_recipe_sd=allowance, amplitude=model.amplitude, noise_source=model.source
    )


def summary(table: pd.DataFrame | None) -> pd.DataFrame:
    """Per design and claim, over the truths: the largest wrong share (and its truth), the smallest
    two-draw agreement, and both powers (held where true, not held where false); with ``design.csv``'s
    blocks, per block first (notebook 40's view of ``design.csv``)."""
    if table is None or table.empty:
        return pd.DataFrame({"note": ["no design.csv: run paper-repro design --profile <profile>"]})
    if "block" in table:
        parts = [
            summary(rows.drop(columns=["block"])).assign(block=block)
            for block, rows in table.groupby("block", sort=False)
        ]
        out = pd.concat(parts, ignore_index=True)
        return out[["block", *[c for c in out.columns if c != "block"]]]
    rows = []
    keys = ["design", "claim_id", "claim"] if "claim_id" in table else ["design", "claim"]
    for key, g in table.groupby(keys, sort=False):
        name, claim = key[0], key[-1]
        worst = g.loc[g["wrong"].idxmax()]
        held, refuted = powers(g)
        rows.append(
            {
                "design": name,
                **({"claim_id": key[1]} if len(key) == 3 else {}),
                "claim": claim,
                "wrong_max": worst["wrong"],
                "wrong_truth": worst["truth"] if worst["wrong"] > 0 else "",
                "agreement_min": g["agreement"].min(),
                "held_when_true": held,
                "not_held_when_false": refuted,
                "coverage_min": g["coverage"].min(),
            }
        )
    return pd.DataFrame(rows).round(3)


def study_model(study: Study) -> tuple[list[str], Layout, Model]:
    """The design ``study`` ran (its distinct settings that have runs, their cells at their realised
    rho, its seeds per cell) and the noise model and height its runs show (:func:`noise_model`)."""
    present = set(study.distinct["setting"])
    names = [n for n in study.classes.distinct if n in present]  # a partial study: the settings it ran
    layout = Layout.from_runs(study.distinct, names, study.seeds_per_cell)
    return names, layout, noise_model(study.distinct, names)


def post_hoc(study: Study, replicates: int = REPLICATES) -> pd.DataFrame:
    """``design.csv``'s post-hoc block: every simulated claim's operating characteristics at the
    design ``study`` ran, with the seed SDs, REML recipe SDs and frontier height its runs show
    (:func:`study_model`)."""
    _, layout, model = study_model(study)
    return simulated(layout, model.noise, model, study.classes, study.margins, "committed", replicates, 0)


RECIPE_CHECK_REPLICATES = 30  # simulated studies per (target, truth) for the recipe SD's bias and coverage
RECIPE_CHECK_TRUTHS = ("flat", "the paper's world", "peak at 0.45, skewed", "monotone rising")


def recipe_check(
    study: Study, replicates: int = RECIPE_CHECK_REPLICATES, seed: int = RNG_SEED
) -> pd.DataFrame:
    """The REML recipe SD checked at the design ``study`` ran: per target and truth (flat, smooth peaks
    and a slope as tall as the committed frontiers: :data:`RECIPE_CHECK_TRUTHS`; and the committed
    frontiers' own unimodal fits, which keep part of the recipe effects they were fitted to),
    ``replicates`` studies simulated with the seed SDs the runs show and the recipe SD they show as the
    true one: the mean estimate, its bias and how often the 90% profile interval covers the truth."""
    from paper_repro.analysis.stats.mixed import recipe_reml

    names, layout, model = study_model(study)
    world = truths(study.classes.prm_style, model.amplitude)
    chosen = {
        **{k: world[k] for k in RECIPE_CHECK_TRUTHS},
        "the committed frontiers' fits": fitted_truth(study.distinct, names),
    }
    rng = np.random.default_rng(seed)
    out = []
    for target in [t for t in CLAIM_TARGETS if t in study.distinct]:
        true = model.noise.tau(target)
        for name, truth in chosen.items():
            draws = (
                simulate(layout, truth, model.noise, rng, recipe_draw(layout, model.noise, rng))
                for _ in range(replicates)
            )
            fits = [recipe_reml(runs, target) for runs in draws]
            mean = float(np.nanmean([f.tau for f in fits]))
            covered = [f.low - 1e-12 <= true <= f.high + 1e-12 for f in fits if np.isfinite(f.low)]
            # rounded to 1e-6: the same bytes on every CPU's kernels (the fits agree far below it)
            out.append(
                {
                    "target": target,
                    "truth": name,
                    "true_recipe_sd": true,
                    "mean_estimate": round(mean, 6),
                    "bias": round(mean - true, 6),
                    "coverage_90": float(np.mean(covered)) if covered else np.nan,
                    "studies": replicates,
                    "seeds": layout.seeds,
                }
            )
    return pd.DataFrame(out)
