"""Operating characteristics: the study's own decision code run on simulated studies whose truth is known.

``paper-repro design --profile P`` (and notebook 40) answers, before any run, how often each claim's
test is wrong and how often two draws of the study agree. A simulated study has the profile's
design: its distinct settings, each with its cells at their realised rho (the committed runs' when
there are any, else the grid's targets) and ``n`` seeds per cell. A run's score of a target is

    truth(setting, target, rho of its cell) + recipe effect of the cell + seed noise,

- the **seed noise**: Gaussian, with each (setting, cell, target)'s SD over the committed seeds
  (or one SD given on the command line);
- the **recipe effect**: one Gaussian draw per (setting, cell, target) with SD ``tau``, shared by
  every seed of the cell. Cells differ in P, G, K and mu, not only in rho, and that shows in the
  committed data as a lack of fit of any smooth frontier (:func:`recipe_sd_estimate`). Two draws of
  one simulated study share their recipe effects (the same cells, rerun on new seeds), as the two
  committed draws did.

The **truths** (:func:`truths`): flat; a peak at 0.45, symmetric and skewed; a peak at 0.72; a
plateau over 0.3-0.7; monotone rising and falling; and the paper's world (rule-based frontiers peak
at 0.72 and PRM-style at 0.445 on the native reward, pass@1 rises with rho, the judge peaks at 0.5).
Each truth's height is ``amplitude`` (by default the median range of the committed frontiers'
unimodal fits).

Per truth and claim, :func:`operating_characteristics` tabulates the share of studies held / not
held / inconclusive / heterogeneous, the **wrong** share, the coverage of the settings' rho*
intervals and the share of study pairs that give the same verdict. A verdict is wrong when it is
decided (held, not held or heterogeneous) and differs from the verdict the same test gives on the
truth itself, noiselessly (:func:`truth_verdicts`: the best set is then exactly the truth's best
cells): held where the truth's best cells are not all inside the window, not held where some are.

:func:`power_table` is the claims table's power column: the same simulator with each frontier's
unimodal fit of the committed cell means as the truth.

A design's **evaluation size** moves both noises (:meth:`Noise.at_problems`). A run's score owes
part of its variance to the problems drawn: ``v_run`` its own (a run x problem interaction) and
``v_shared`` its cell's (a cell x problem interaction, so part of the recipe effect), each stated
at 300 problems per set (:data:`EVAL_PROBLEMS`) and each ~ 1 / problems. From runs evaluated on
``n0`` problems (the committed runs': 300 before the study that decides, 900 in it), at ``n``
held-out and gsm problems a target scored on them (native reward, gsm pass@1: :data:`EVAL_TARGETS`) has

    sd^2(n) = sd^2(n0) - v_run 300 (1 / n0 - 1 / n), at least 25% of sd^2(n0) (training's share);
    tau^2(n) = tau^2 - v_shared 300 (1 / n0 - 1 / n), at least 0,

with ``v_run`` and ``v_shared`` measured (``eval_noise.csv``, ``python -m paper_repro.bench
eval-noise``: :func:`read_eval_variance`) or given; without them only ``n0`` problems are simulated.
The recipe SD stays one number, ``tau``, estimated over every target; the shrink makes it per
target for the targets that change (``Noise.recipe_by_target``); math (300 problems) keeps its
noise, and so does the judge (it scores the gsm completions) unless the evaluation noise has a row
for it. A cell the committed table lacks (a candidate design's new target or second recipe) takes
its setting's median seed SD for the target. The candidate designs and their cost:
:mod:`paper_repro.analysis.design_cost`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from paper_repro.analysis import optima
from paper_repro.analysis.best_sets import DEFAULT, Frontiers
from paper_repro.analysis.claims.paper import PAPER_RHO
from paper_repro.analysis.claims.registry import Claim, claims
from paper_repro.analysis.claims.study import Classes, Study
from paper_repro.analysis.optima import Cells, fit_optimum, unimodal
from paper_repro.results import METRICS

SEEDS: tuple[int, ...] = (3, 5, 10, 20, 40)  # seed counts the power column tries
REPLICATES = 200  # study pairs per truth: a 5% rate to about +-1.1 points
POWER_REPLICATES = 40  # simulated studies per seed count for the power column
COVERAGE_REPLICATES = 40  # studies per truth whose rho* intervals are bootstrapped
COVERAGE_BOOTSTRAP = 200
RNG_SEED = 0
DECIDED = ("held", "not held", "heterogeneous")
EVAL_PROBLEMS = 300  # problems per evaluation set at which the evaluation noise is stated (eval_noise.csv)
# the targets scored on the held-out and gsm sets, whose size a design chooses: their evaluation noise
# must be known to simulate another size. math stays at 300 problems. The judge scores the gsm
# completions, so it would shrink too; it does where the evaluation noise has a judge_score row, and
# keeps its noise (a conservative reading of its claims) where it has none
EVAL_TARGETS = ("native_reward", "gsm_pass1")
SEED_FLOOR = 0.25  # a larger evaluation keeps at least this share of a run's seed variance (training's)
EvalVariance = dict[str, tuple[float, float]]  # target -> (v_run, v_shared) at EVAL_PROBLEMS problems

Truth = Callable[[str, str, np.ndarray], np.ndarray]  # (setting, target, cell rhos) -> true means


@dataclass(frozen=True)
class Layout:
    """A study's design: per distinct setting its cells ``((name, realised rho), ...)``, and the seeds
    per cell."""

    cells: dict[str, tuple[tuple[str, float], ...]]
    seeds: int

    @classmethod
    def from_runs(cls, runs: pd.DataFrame, names: Sequence[str], seeds: int) -> Layout:
        cells = {}
        for name in names:
            rows = runs[runs["setting"] == name]
            means = rows.groupby("cell")["rho"].mean().sort_values()
            cells[name] = tuple((str(c), float(r)) for c, r in means.items())
        return cls(cells, seeds)

    def with_seeds(self, seeds: int) -> Layout:
        return replace(self, seeds=seeds)


@dataclass(frozen=True)
class Noise:
    """Seed SD per (setting, cell, target) (where the table has none: the setting's median over its
    cells for that target, else ``default``) and the recipe SD (``recipe_by_target`` where a target's
    differs). ``shrink``: per target, the seed variance a larger evaluation removes (:meth:`at_problems`)."""

    recipe_sd: float
    default: float
    seed_sd: dict[tuple[str, str, str], float]
    setting_sd: dict[tuple[str, str], float] = field(default_factory=dict)
    recipe_by_target: dict[str, float] = field(default_factory=dict)
    shrink: dict[str, float] = field(default_factory=dict)
    problems: int = EVAL_PROBLEMS  # held-out and gsm problems per evaluation of the runs it was measured on

    @classmethod
    def from_runs(
        cls,
        runs: pd.DataFrame,
        names: Sequence[str],
        recipe_sd: float | None = None,
        problems: int = EVAL_PROBLEMS,
    ) -> Noise:
        """The seed SDs and the recipe SD of ``runs`` (each evaluated on ``problems`` held-out and gsm
        problems per set)."""
        sd = runs[runs["setting"].isin(list(names))].groupby(["setting", "cell"])[list(METRICS)].std(ddof=1)
        table = {
            (s, c, t): float(v) for (s, c), row in sd.iterrows() for t, v in row.items() if np.isfinite(v)
        }
        by_setting: dict[tuple[str, str], list[float]] = {}
        for (s, _, t), v in table.items():
            by_setting.setdefault((s, t), []).append(v)
        default = float(np.median(list(table.values()))) if table else 0.05
        tau = recipe_sd_estimate(runs, names) if recipe_sd is None else recipe_sd
        return cls(
            tau, default, table, {k: float(np.median(v)) for k, v in by_setting.items()}, problems=problems
        )

    def sd(self, setting: str, cell: str, target: str) -> float:
        base = self.seed_sd.get((setting, cell, target), self.setting_sd.get((setting, target), self.default))
        cut = self.shrink.get(target, 0.0)
        return float(np.sqrt(max(base**2 - cut, SEED_FLOOR * base**2))) if cut else base

    def tau(self, target: str) -> float:
        """The recipe SD of ``target``."""
        return self.recipe_by_target.get(target, self.recipe_sd)

    def divided(self, divisor: float) -> Noise:
        """The recipe SD of every target divided by ``divisor`` (r recipes averaged: sqrt(r))."""
        return replace(self, recipe_sd=self.recipe_sd / divisor,
                       recipe_by_target={t: v / divisor for t, v in self.recipe_by_target.items()})  # fmt: skip

    def at_problems(self, problems: int, variance: EvalVariance | None) -> Noise:
        """The noise of a study whose held-out and gsm sets have ``problems`` problems each, from this
        one's (at ``self.problems``, :func:`eval_shrink`). ``variance``: per target, (v_run, v_shared),
        the variance a run's score and a cell's mean owe to the problems drawn, at
        :data:`EVAL_PROBLEMS` problems."""
        if problems == self.problems:
            return self
        if variance is None:
            raise ValueError(
                f"{problems} problems per evaluation set (the runs had {self.problems}): the noise model needs "
                f"the evaluation noise at {EVAL_PROBLEMS} (data/results/<profile>/eval_noise.csv, written by python -m paper_repro.bench "
                "eval-noise, or --eval-var-run and --eval-var-shared); only the runs' own size can be simulated without it"
            )
        missing = [t for t in EVAL_TARGETS if t not in variance]
        if missing:
            raise ValueError(
                f"the evaluation noise has no row for {', '.join(missing)} (it has {sorted(variance)})"
            )
        shrink, recipe = {}, {}
        for target in [t for t in variance if t in (*EVAL_TARGETS, "judge_score")]:
            v_run, v_shared = variance[target]
            shrink[target] = eval_shrink(v_run, problems, self.problems)
            cut = eval_shrink(v_shared, problems, self.problems)
            recipe[target] = float(np.sqrt(max(self.tau(target) ** 2 - cut, 0.0)))
        return replace(
            self, shrink=shrink, recipe_by_target={**self.recipe_by_target, **recipe}, problems=problems
        )


def eval_shrink(variance: float, problems: int, base: int = EVAL_PROBLEMS) -> float:
    """The variance that evaluating on ``problems`` problems instead of ``base`` removes from a score
    whose evaluation variance is ``variance`` at :data:`EVAL_PROBLEMS` (variance ~ 1 / problems;
    negative when ``problems`` is below ``base``: it adds)."""
    return variance * EVAL_PROBLEMS * (1 / base - 1 / problems)


VAR_COLUMNS = {  # what eval_noise.csv may call its columns: the first one present is read
    # bench eval-noise: nonshared_eval_var is what a run's evaluation adds of its own (the seed x block
    # residual), shared_bias_var the block's difficulty its cell's seeds share; per_run_eval_var (their
    # sum) is neither, so it is not read
    "target": ("target", "metric"),
    "run": ("nonshared_eval_var", "v_run", "var_run", "sd_run"),
    "shared": ("shared_bias_var", "v_shared", "var_shared", "sd_shared"),
    "problems": ("problems_per_block", "problems", "n_problems"),
}  # fmt: skip


def read_eval_variance(path) -> EvalVariance | None:
    """Per target, (v_run, v_shared) at :data:`EVAL_PROBLEMS` problems from ``eval_noise.csv`` (one row
    per target; ``python -m paper_repro.bench eval-noise``), or None when there is no such file. A
    column read as an SD (its name says ``sd``) is squared; a ``problems`` column rescales to 300.
    A target with two rows (several cells measured) takes their mean."""
    from pathlib import Path

    if not Path(path).exists():
        return None
    table = pd.read_csv(path)
    found = {k: next((c for c in names if c in table.columns), None) for k, names in VAR_COLUMNS.items()}
    missing = [k for k in ("target", "run", "shared") if found[k] is None]
    if missing:
        raise ValueError(
            f"{path}: cannot tell its {', '.join(missing)} column(s) among {list(table.columns)} "
            f"(read: {', '.join(f'{k}: {list(v)}' for k, v in VAR_COLUMNS.items() if k in missing)})"
        )
    rows: dict[str, list[tuple[float, float]]] = {}
    for _, row in table.iterrows():
        scale = float(row[found["problems"]]) / EVAL_PROBLEMS if found["problems"] else 1.0
        values = []
        for k in ("run", "shared"):
            v = float(row[found[k]])
            values.append((v**2 if "sd" in found[k] else v) * scale)
        rows.setdefault(str(row[found["target"]]), []).append((values[0], values[1]))
    return {
        t: (float(np.mean([r for r, _ in v])), float(np.mean([s for _, s in v]))) for t, v in rows.items()
    }


def eval_variance_arg(values: Sequence[str] | None) -> dict[str, float] | None:
    """``--eval-var-run`` / ``--eval-var-shared``: one number for every target of :data:`EVAL_TARGETS`,
    or ``target=number`` pairs."""
    if not values:
        return None
    out = {}
    for value in values:
        target, _, number = value.rpartition("=")
        if target and target not in (*EVAL_TARGETS, "judge_score"):
            raise ValueError(
                f"evaluation variance for {target!r}: targets are {', '.join(EVAL_TARGETS)} and judge_score"
            )
        for t in [target] if target else EVAL_TARGETS:
            out[t] = float(number)
    return out


def eval_variance(
    path, run: dict[str, float] | None = None, shared: dict[str, float] | None = None
) -> tuple[EvalVariance | None, str]:
    """The evaluation variances and where they came from: the command line's where given (both
    needed), else ``path`` (eval_noise.csv), else none."""
    if run or shared:
        if not (run and shared) or set(run) != set(shared):
            raise ValueError("give --eval-var-run and --eval-var-shared for the same targets")
        return {t: (run[t], shared[t]) for t in run}, "the command line"
    table = read_eval_variance(path)
    from paper_repro.paths import repo_relative

    return table, (repo_relative(path) if table is not None else "none")


def recipe_sd_estimate(runs: pd.DataFrame, names: Sequence[str], targets: Sequence[str] = METRICS) -> float:
    """The recipe-effect SD the runs of settings ``names`` show (:func:`paper_repro.analysis.optima.recipe_sd_estimate`)."""
    return optima.recipe_sd_estimate(
        [Cells.of(runs[runs["setting"] == n], t) for n in names for t in targets]
    )


# ---------------------------------------------------------------------------------------- truths


def _bump(rho: np.ndarray, centre: float, left: float, right: float) -> np.ndarray:
    width = np.where(rho < centre, left, right)
    return np.exp(-0.5 * ((rho - centre) / width) ** 2)


def _plateau(rho: np.ndarray, low: float, high: float, edge: float = 0.1) -> np.ndarray:
    gap = np.maximum(low - rho, 0) + np.maximum(rho - high, 0)
    return np.exp(-0.5 * (gap / edge) ** 2)


SHAPES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "flat": lambda r: np.zeros_like(r),
    "peak at 0.45, symmetric": lambda r: _bump(r, 0.45, 0.2, 0.2),
    "peak at 0.45, skewed": lambda r: _bump(r, 0.45, 0.35, 0.12),
    "peak at 0.72": lambda r: _bump(r, 0.72, 0.2, 0.2),
    "plateau over 0.3-0.7": lambda r: _plateau(r, 0.3, 0.7),
    "monotone rising": lambda r: (r - 0.15) / 0.7,
    "monotone falling": lambda r: 1 - (r - 0.15) / 0.7,
}


def truths(prm_style: Sequence[str], amplitude: float, base: float = 0.5) -> dict[str, Truth]:
    """The known truths, each a function of (setting, target, rho) scaled to ``amplitude``;
    ``prm_style``: the settings the paper's world gives a PRM-style frontier."""
    out: dict[str, Truth] = {
        name: (lambda s, t, r, f=shape: base + amplitude * f(np.asarray(r, float)))
        for name, shape in SHAPES.items()
    }

    def paper(setting: str, target: str, rho: np.ndarray) -> np.ndarray:
        rho = np.asarray(rho, float)
        if target in ("gsm_pass1", "math_pass1"):
            shape = SHAPES["monotone rising"](rho)
        elif target == "judge_score":
            shape = _bump(rho, 0.5, 0.2, 0.2)
        else:
            shape = _bump(rho, PAPER_RHO["PRM-style" if setting in prm_style else "rule-based"], 0.2, 0.2)
        return base + amplitude * shape

    out["the paper's world"] = paper
    return out


def fitted_truth(runs: pd.DataFrame, names: Sequence[str]) -> Truth:
    """The committed study as a truth: each frontier's unimodal fit of its cell means, read at the
    fitted cell nearest each rho asked for."""
    table: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    for name in names:
        rows = runs[runs["setting"] == name]
        for target in METRICS:
            cells = Cells.of(rows, target)
            if cells.k:
                table[(name, target)] = (cells.rho, unimodal(cells.mean, cells.n)[0])

    def truth(setting: str, target: str, rho: np.ndarray) -> np.ndarray:
        if (setting, target) not in table:
            return np.full(len(rho), np.nan)
        at, fit = table[(setting, target)]
        return fit[np.abs(np.asarray(rho, float)[:, None] - at[None, :]).argmin(axis=1)]

    return truth


# ---------------------------------------------------------------------------------------- studies


def recipe_draw(layout: Layout, noise: Noise, rng: np.random.Generator) -> dict[tuple[str, str, str], float]:
    """One draw of every (setting, cell, target)'s recipe effect."""
    return {
        (s, c, t): float(rng.normal(0.0, tau)) if (tau := noise.tau(t)) > 0 else 0.0
        for s, cells in layout.cells.items()
        for c, _ in cells
        for t in METRICS
    }


def simulate(
    layout: Layout,
    truth: Truth,
    noise: Noise,
    rng: np.random.Generator,
    recipe: dict[tuple[str, str, str], float] | None = None,
) -> pd.DataFrame:
    """One simulated study: a runs table (run_id, setting, cell, seed, rho and every target)."""
    recipe = recipe or {}
    frames = []
    for setting, cells in layout.cells.items():
        names = [c for c, _ in cells]
        rho = np.array([r for _, r in cells])
        n = layout.seeds
        frame = {
            "run_id": [f"{setting}-{c}-{i}" for c in names for i in range(n)],
            "setting": setting,
            "cell": np.repeat(names, n),
            "seed": np.tile(np.arange(n), len(names)),
            "rho": np.repeat(rho, n),
        }
        for target in METRICS:
            mean = truth(setting, target, rho) + np.array(
                [recipe.get((setting, c, target), 0.0) for c in names]
            )
            sd = np.array([noise.sd(setting, c, target) for c in names])
            frame[target] = np.repeat(mean, n) + rng.normal(size=n * len(names)) * np.repeat(sd, n)
        frames.append(pd.DataFrame(frame))
    return pd.concat(frames, ignore_index=True)


def noiseless(layout: Layout, truth: Truth) -> pd.DataFrame:
    """The truth as a study: two identical seeds per cell, no recipe effect (the best set is then
    exactly the truth's best cells)."""
    quiet = Noise(0.0, 0.0, {})
    return simulate(layout.with_seeds(2), truth, quiet, np.random.default_rng(0))


def simulated_claims() -> list[Claim]:
    """The claims the simulator runs: every registered claim declared :class:`Simulated`."""
    return claims(simulated=True)


def truth_verdicts(layout: Layout, truth: Truth, classes: Classes, margins, chosen: list[Claim]) -> dict:
    """Each claim's verdict (a Result, by id) on the truth itself: its own decision on the noiseless
    study, with no recipe effect allowed for (the best set is then exactly the truth's best cells)."""
    study = Study.simulated(noiseless(layout, truth), classes, replace(margins, recipe_sd=0.0))
    return {c.id: c.decide(study) for c in chosen}


def is_wrong(verdict: str, truth) -> bool:
    """A decided verdict that the truth's own (a Result) contradicts. Where the truth is heterogeneous
    yet every setting's truth gives one verdict, that verdict is not wrong: the class reading it misses
    is the settings' disagreement, not the claim."""
    if verdict not in DECIDED or verdict == truth.verdict:
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
    targets = {c.id: c.simulation.target for c in chosen if c.simulation.target}
    rng = np.random.default_rng(seed)
    rows = []
    for truth_name, truth in world.items():
        if progress:
            progress(truth_name)
        truth_verdict = truth_verdicts(layout, truth, classes, margins, chosen)
        verdicts: dict[str, list[tuple[str, str]]] = {c.id: [] for c in chosen}
        for _ in range(replicates):
            recipe = recipe_draw(layout, noise, rng)
            pair = [
                Study.simulated(simulate(layout, truth, noise, rng, recipe), classes, margins)
                for _ in range(2)
            ]
            for c in chosen:
                verdicts[c.id].append(tuple(c.decide(study).verdict for study in pair))
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
            wrong = sum(is_wrong(v, truth_verdict[c.id]) for v in flat) / len(flat)
            rows.append({
                "truth": truth_name, "claim": c.sentence, "claim_id": c.id, "true_verdict": truth_verdict[c.id].verdict,
                **{f"share_{k.replace(' ', '_')}": v for k, v in share.items()},
                "wrong": wrong, "agreement": sum(a == b for a, b in pairs) / len(pairs),
                "coverage": coverage.get(targets.get(c.id), np.nan),
                "seeds": layout.seeds, "cells_per_setting": int(np.median([len(c) for c in layout.cells.values()])),
                "recipe_sd": noise.recipe_sd, "seed_sd_median": noise.default, "studies": len(flat),
                "eval_problems": noise.problems,
            })  # fmt: skip
    return pd.DataFrame(rows)


def _coverage(layout, noise, truth, targets, replicates, rng, margins=DEFAULT) -> dict[str, float]:
    """Per target: the share of (study, setting) with an identified rho* whose 95% seed-bootstrap
    interval holds the rho of one of the truth's best cells."""
    out = {}
    for target in targets:
        best = true_best_rhos(layout, truth, target)
        hits = []
        for _ in range(replicates):
            study = simulate(layout, truth, noise, rng, recipe_draw(layout, noise, rng))
            tau = Frontiers(study).recipe_sd(margins)
            for setting in layout.cells:
                opt = fit_optimum(study[study["setting"] == setting], target, tau,
                                  bootstrap=COVERAGE_BOOTSTRAP, describe=False)  # fmt: skip
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
            study = Study.simulated(simulate(design, truth, noise, rng, recipe_draw(design, noise, rng)), classes,
                                    margins)  # fmt: skip
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
    recipe SD of :func:`recipe_sd_estimate`, the median range of the frontiers' unimodal fits), each
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
        ranges = [np.ptp(unimodal(c.mean, c.n)[0]) for n in names for t in CLAIM_TARGETS
                  if (c := Cells.of(runs[runs["setting"] == n], t)).k >= 2]  # fmt: skip
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
) -> pd.DataFrame:
    """The operating characteristics of every frontier claim under every truth, for the committed
    design and each of ``variants`` (name -> (seeds per cell, recipe-SD divisor): a divisor sqrt(r)
    stands for r recipes averaged per cell, the rule's allowance divided with it)."""
    variants = {"committed": (layout.seeds, 1.0), **(variants or {})}
    frames = []
    for name, (seeds, divisor) in variants.items():
        rule = (
            margins if margins.recipe_sd is None else replace(margins, recipe_sd=margins.recipe_sd / divisor)
        )
        frames.append(simulated(layout.with_seeds(seeds), model.noise.divided(divisor), model, classes, rule,
                                name, replicates, coverage_replicates, progress))  # fmt: skip
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
) -> pd.DataFrame:
    """:func:`operating_characteristics` of one design (``layout`` with ``noise``, the truths as tall
    as ``model``'s), every frontier claim tested by the rule ``margins``, its rows named ``name``."""
    world = truths(classes.prm_style, model.amplitude)
    table = operating_characteristics(
        layout, noise, world, classes, margins, replicates, coverage_replicates,
        progress=(lambda t: progress(f"{name}: {t}")) if progress else None,
    )  # fmt: skip
    allowance = "estimated per study" if margins.recipe_sd is None else margins.recipe_sd
    return table.assign(design=name, rule_recipe_sd=allowance, amplitude=model.amplitude,
                        noise_source=model.source)  # fmt: skip


def summary(table: pd.DataFrame | None) -> pd.DataFrame:
    """Per design and claim, over the truths: the largest wrong share (and its truth), the smallest
    two-draw agreement, and the share held where the truth holds (notebook 40's view of ``design.csv``)."""
    if table is None or table.empty:
        return pd.DataFrame({"note": ["no design.csv: run paper-repro design --profile <profile>"]})
    rows = []
    for (name, claim), g in table.groupby(["design", "claim"], sort=False):
        worst = g.loc[g["wrong"].idxmax()]
        held = g[g["true_verdict"] == "held"]["share_held"]
        rows.append({"design": name, "claim": claim, "wrong_max": worst["wrong"],
                     "wrong_truth": worst["truth"] if worst["wrong"] > 0 else "",
                     "agreement_min": g["agreement"].min(), "held_when_true": held.min() if len(held) else np.nan,
                     "coverage_min": g["coverage"].min()})  # fmt: skip
    return pd.DataFrame(rows).round(3)
