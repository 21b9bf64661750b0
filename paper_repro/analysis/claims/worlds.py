"""The operating characteristics of the claims that simulate their own grid runs (the FLOP
conventions' regime contrasts, the targets' paired contrasts): grid studies drawn from known worlds
with the noise the committed runs show, decided by the claims' own decisions.

**The noise** (:class:`SeedNoise`), per setting and column, from the committed grid as seeds x cells
(the additive cell + seed model): the **seed effect** ``b[s, k]``, drawn once per setting and seed
and shared by all the setting's cells (a seed's data order and sampling are common to its cells), SD
``sqrt(max(0, (MS_seed - s^2) / cells))``; the **residual** ``e``, SD ``s`` (the model's residual
variance, ``(cells - 1)(seeds - 1)`` df); and the **recipe effect** ``u[s, c] ~ N(0, tau^2)`` per
cell, ``tau`` the study's REML recipe SD of the column.

**A world** is each cell's frontier mean ``f[s, c]`` (the mean any recipe of the cell's rho gets).
A simulated study keeps the committed layout (its settings, cells, seeds and every run's rho under
every convention) and draws ``y = f + u + b + e``. **The truth** a verdict is scored against is the
same decision on the noiseless study (every seed equal to the mean, recipe SD 0): ``f`` for a claim
about any recipe, ``f + u`` (the study's own draw) for one about these recipes.

**Scored**: wrong (a decided verdict that is neither the truth's verdict nor its grey-zone
alternative), per world; held when true (the smallest held share over worlds whose truth is held),
not held when false (the smallest not-held share over worlds whose truth is not held, the flat world
among them); the two-draw agreement (the chance two such studies give one verdict); and
``power_now``, the decided share in the observed world.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.columns import NO_OC
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.verdict import NAN, Result

Frontier = dict[str, dict[str, float]]  # setting -> cell -> mean
Decide = Callable[[Study], Result]
# simulated studies per world in the published analysis: a 5% rate to about +-1.1 points (at 60 it was
# +-2.8, and the target claims' wrong shares read 7-10% around a 5% test); a quick analysis sets fewer
# (Study.replicates: paper_repro.analysis.pipeline.claim_replicates)
REPLICATES = 400
RNG_SEED = 53
EXACT = 1e-9  # a noiseless contrast this close to 0 is 0 (the cells' weights sum to 0 only up to rounding)


@dataclass(frozen=True)
class SeedNoise:
    """Per setting, the SD of its seed effect and of its residual (the module's noise)."""

    block: dict[str, float]
    residual: dict[str, float]

    @classmethod
    def of(cls, study: Study, column: str) -> SeedNoise:
        block, residual = {}, {}
        for setting, grid in study.grids(column).items():
            full = (grid.count > 0).all(axis=1)
            y = grid.total[full] / grid.count[full]
            n, k = y.shape
            if n < 2 or k < 2:
                continue
            resid = y - y.mean(axis=0) - y.mean(axis=1, keepdims=True) + y.mean()
            s2 = float(np.sum(resid**2)) / ((k - 1) * (n - 1))
            seed_ms = k * float(np.var(y.mean(axis=1), ddof=1))
            block[setting], residual[setting] = (
                float(np.sqrt(max(0.0, (seed_ms - s2) / k))),
                float(np.sqrt(s2)),
            )
        return cls(block, residual)


def cell_means(study: Study, column: str) -> Frontier:
    """Per distinct setting, each cell's mean of ``column`` (the observed world)."""
    return {s: g.groupby("cell")[column].mean().to_dict() for s, g in study.by_setting.items()}


def flat(world: Frontier) -> Frontier:
    """Every cell of a setting at the setting's mean."""
    return {s: dict.fromkeys(cells, float(np.mean(list(cells.values())))) for s, cells in world.items()}


def shaped(
    study: Study, shape: Callable[[str, np.ndarray], np.ndarray], height: float, base: Frontier
) -> Frontier:
    """A world of ``shape(setting, rho)`` (0 to 1 over the cells' useful-FLOP rho) times ``height``,
    about each setting's mean in ``base``."""
    out = {}
    for s, cells in study.cell_rho.items():
        names = list(cells)
        values = height * np.asarray(shape(s, np.array([cells[c] for c in names])), float)
        centre = float(np.mean(list(base[s].values())))
        out[s] = dict(zip(names, centre + values - values.mean(), strict=True))
    return out


def height(world: Frontier) -> float:
    """The median over settings of the range of their cell means (a world's height)."""
    return float(np.median([max(c.values()) - min(c.values()) for c in world.values()]))


def _draw(rows: pd.DataFrame, columns: Mapping[str, tuple[Frontier, SeedNoise, float]], rng, noisy: bool):
    """``rows`` with each column drawn from (world, noise, tau); and the recipe draw's cell means."""
    out, truths = rows.copy(), {}
    for column, (world, noise, tau) in columns.items():
        keys = list(zip(rows["setting"], rows["cell"], strict=True))
        mean = np.array([world.get(s, {}).get(c, NAN) for s, c in keys])
        cells = {k: float(rng.normal(0.0, tau)) if noisy and tau > 0 else 0.0 for k in dict.fromkeys(keys)}
        u = np.array([cells[k] for k in keys])
        truths[column] = mean + u
        if noisy:
            seeds = {
                k: rng.normal(0.0, noise.block.get(k[0], 0.0))
                for k in dict.fromkeys(zip(rows["setting"], rows["seed"], strict=True))
            }
            b = np.array([seeds[k] for k in zip(rows["setting"], rows["seed"], strict=True)])
            e = rng.normal(size=len(rows)) * rows["setting"].map(noise.residual).fillna(0.0).to_numpy()
            out[column] = mean + u + b + e
        else:
            out[column] = mean
    return out, truths


def _noiseless(study: Study, rows: pd.DataFrame) -> Study:
    return _laid_out(
        study, replace(study, grid_rows=rows, margins=replace(study.margins, recipe_sd=0.0), estimate=False)
    )


_LAYOUT = "_layout"


def _laid_out(study: Study, drawn: Study) -> Study:
    """``drawn`` (a study simulated on ``study``'s layout) marked as such, its cells' rho taken from
    ``study`` (the runs' rho are the committed ones: only the scores are drawn)."""
    drawn.__dict__["cell_rho"] = study.cell_rho
    drawn.__dict__[_LAYOUT] = study
    return drawn


def layout_of(study: Study) -> Study | None:
    """The study whose layout ``study`` was simulated on (:func:`simulate`), or None for a real one."""
    return study.__dict__.get(_LAYOUT)


def _is_wrong(verdict: str, truth: Result) -> bool:
    decided = verdict in ("held", "not held") and truth.verdict in ("held", "not held")
    return decided and verdict not in (truth.verdict, truth.also)


def simulate(
    study: Study,
    decides: Mapping[str, tuple[Decide, bool]],
    worlds: Mapping[str, Mapping[str, Frontier]],
    replicates: int | None = None,
    truths: Mapping[str, Result] | None = None,
) -> dict[str, dict[str, dict]]:
    """Per claim id of ``decides`` (id -> (decision, whether its truth is about these recipes)), per
    world of ``worlds`` (name -> column -> frontier), the shares of its verdicts, its wrong share and
    the truth's verdict(s). ``truths``: per world, the verdict its truth is (for a claim whose decision
    cannot read a noiseless study, as a fit's AICc cannot: it needs residuals); else the decision on
    the noiseless study. Returns id -> world -> {"held", "not held", "wrong", "truth held",
    "held if true", "truth not held", "not held if false"} (shares; NaN where no study's truth was so)."""
    rng = np.random.default_rng(RNG_SEED)
    replicates = replicates or study.replicates or REPLICATES
    rows = study.distinct
    noise = {
        c: (SeedNoise.of(study, c), study.grid.recipe_sd(study.margins, c))
        for w in worlds.values()
        for c in w
    }
    out: dict[str, dict[str, dict]] = {i: {} for i in decides}
    for name, world in worlds.items():
        spec = {c: (f, *noise[c]) for c, f in world.items()}
        frontier = _noiseless(study, _draw(rows, spec, rng, noisy=False)[0])
        given = (truths or {}).get(name)
        fixed = {
            i: given if given is not None else d(frontier) for i, (d, cells) in decides.items() if not cells
        }
        tally = {i: dict.fromkeys(_COUNTS, 0) for i in decides}
        for _ in range(replicates):
            drawn, means = _draw(rows, spec, rng, noisy=True)
            sim = _laid_out(study, replace(study, grid_rows=drawn, estimate=False))
            these = _noiseless(study, rows.assign(**means))
            for i, (decide, cells) in decides.items():
                _count(tally[i], decide(sim).verdict, decide(these) if cells else fixed[i])
        for i, t in tally.items():
            out[i][name] = _shares(t, replicates)
    return out


_COUNTS = ("held", "not held", "wrong", "truth held", "held if true", "truth not held", "not held if false")


def _count(tally: dict, verdict: str, truth: Result) -> None:
    """Add one simulated study's verdict, scored against its truth, to ``tally``."""
    if truth.also and abs(truth.value) < EXACT:  # a flat world's contrast, 0 up to rounding
        truth = replace(truth, verdict="not held", also="")  # every rule here says not held at 0
    held = truth.verdict == "held" and not truth.also  # a grey-zone truth counts for neither power
    refuted = truth.verdict == "not held" and not truth.also
    tally["held"] += verdict == "held"
    tally["not held"] += verdict == "not held"
    tally["wrong"] += _is_wrong(verdict, truth)
    tally["truth held"] += held
    tally["held if true"] += held and verdict == "held"
    tally["truth not held"] += refuted
    tally["not held if false"] += refuted and verdict == "not held"


def _shares(tally: dict, n: int) -> dict:
    def share(k: str, of: str) -> float:
        return tally[k] / tally[of] if tally[of] else NAN

    return {
        "held": tally["held"] / n,
        "not held": tally["not held"] / n,
        "wrong": tally["wrong"] / n,
        "held if true": share("held if true", "truth held"),
        "not held if false": share("not held if false", "truth not held"),
    }


def columns(claim_id: str, shares: Mapping[str, dict], observed: str, about: str, replicates: int) -> dict:
    """The claims table's ``oc_*`` and ``power_*`` columns of one claim from :func:`simulate`'s shares
    (``observed``: the world whose decided share is ``power_now``; ``about``: the worlds in words)."""
    if not shares:
        return {
            **NO_OC,
            "oc_note": "not simulated: no world",
            "power_now": NAN,
            "seeds_for_80pct_power": NAN,
            "power_note": "not simulated",
        }
    worst = max(shares, key=lambda w: shares[w]["wrong"])
    held = [s["held if true"] for s in shares.values() if np.isfinite(s["held if true"])]
    refuted = [s["not held if false"] for s in shares.values() if np.isfinite(s["not held if false"])]
    agreement = min(
        s["held"] ** 2 + s["not held"] ** 2 + (1 - s["held"] - s["not held"]) ** 2 for s in shares.values()
    )
    each = "; ".join(
        f"{w}: held {s['held']:.2f}, not held {s['not held']:.2f}, wrong {s['wrong']:.2f}"
        for w, s in shares.items()
    )
    obs = shares.get(observed, {})
    return {
        "oc_wrong_max": shares[worst]["wrong"],
        "oc_wrong_truth": worst if shares[worst]["wrong"] > 0 else "",
        "oc_agreement_min": agreement,
        "oc_held_when_true": min(held) if held else NAN,
        "oc_not_held_when_false": min(refuted) if refuted else NAN,
        "oc_note": f"{len(shares)} worlds ({about}), {replicates} studies each, seed blocks and the committed "
        f"residual noise: {each}",
        "power_now": obs.get("held", NAN) + obs.get("not held", NAN),
        "seeds_for_80pct_power": NAN,
        "power_note": f"the decided share in the {observed} world at the study's seeds (other seed counts not simulated)",
    }
