"""The noise of a simulated study: its layout (:class:`Layout`: per setting its cells at their
realised rho, and the seeds per cell), the seed and recipe noise the committed runs show
(:class:`Noise`), and how a design's evaluation size moves both (:meth:`Noise.at_problems`, from the
evaluation noise ``eval_noise.csv``: :func:`read_eval_variance`). The model is set out in
:mod:`paper_repro.analysis.design`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from paper_repro.analysis.stats.contrasts import Grid
from paper_repro.analysis.stats.mixed import recipe_reml
from paper_repro.common.results import METRICS
from paper_repro.run.cost_model import EVAL_PROBLEMS

# EVAL_PROBLEMS: the problems per evaluation set at which the evaluation noise is stated (eval_noise.csv)
# the targets scored on the held-out and gsm sets, whose size a design chooses: their evaluation noise
# must be known to simulate another size. math stays at 300 problems. The judge scores the gsm
# completions, so it would shrink too; it does where the evaluation noise has a judge_score row, and
# keeps its noise (a conservative reading of its claims) where it has none
EVAL_TARGETS = ("native_reward", "gsm_pass1")
SEED_FLOOR = 0.25  # a larger evaluation keeps at least this share of a run's residual variance (training's)
EvalVariance = dict[str, tuple[float, float]]  # target -> (v_run, v_shared) at EVAL_PROBLEMS problems


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
    """A run's noise around its cell's mean, in two parts: the **seed block** (the seed effect: one draw
    per (setting, seed, target), shared by every cell of the setting that ran the seed: its data order
    and sampling) with SD ``block_sd[(setting, target)]``, and the **residual** (the run's own, after
    its cell and its seed) with SD per (setting, cell, target) in ``seed_sd`` (a cell given its own),
    else its setting's in ``setting_sd``, else ``default``. The recipe SD (``recipe_by_target`` where a
    target's differs) is the cell's draw. ``correlation``: the targets' correlation (in
    :data:`~paper_repro.common.results.METRICS`' order) every part is drawn with (None: independent).
    ``shrink``: per target, the residual variance a larger evaluation removes (:meth:`at_problems`)."""

    recipe_sd: float
    default: float
    seed_sd: dict[tuple[str, str, str], float]
    setting_sd: dict[tuple[str, str], float] = field(default_factory=dict)
    recipe_by_target: dict[str, float] = field(default_factory=dict)
    shrink: dict[str, float] = field(default_factory=dict)
    problems: int = EVAL_PROBLEMS  # held-out and gsm problems per evaluation of the runs it was measured on
    block_sd: dict[tuple[str, str], float] = field(default_factory=dict)
    correlation: tuple[tuple[float, ...], ...] | None = None
    # the recipe effects' own correlation across the targets (None: ``correlation``'s): a pair's is what
    # the REML recipe SD of its per-run difference implies (:func:`recipe_correlation`)
    recipe_correlation: tuple[tuple[float, ...], ...] | None = None

    @classmethod
    def from_runs(
        cls,
        runs: pd.DataFrame,
        names: Sequence[str],
        recipe_sd: float | None = None,
        problems: int = EVAL_PROBLEMS,
    ) -> Noise:
        """The seed blocks, the residual SDs and the recipe SD of ``runs`` (each evaluated on ``problems``
        held-out and gsm problems per set): per (setting, target), the additive cell + seed model's
        components (:func:`seed_blocks`), the targets' correlation of its residuals
        (:func:`residual_correlation`), and the REML recipe SD per target."""
        rows = runs[runs["setting"].isin(list(names))]
        block, residual = {}, {}
        for name in names:
            part = rows[rows["setting"] == name]
            for t in METRICS:
                parts = seed_blocks(part, t) if t in part else None
                if parts is not None:
                    block[(name, t)] = float(np.sqrt(parts.seed))
                    residual[(name, t)] = float(np.sqrt(parts.residual))
        default = float(np.median(list(residual.values()))) if residual else 0.05
        by_target = {} if recipe_sd is not None else recipe_sds(runs, names)
        tau = by_target.get("native_reward", 0.0) if recipe_sd is None else recipe_sd
        correlation = residual_correlation(rows, names)
        return cls(
            tau,
            default,
            {},
            residual,
            recipe_by_target=by_target,
            problems=problems,
            block_sd=block,
            correlation=correlation,
            recipe_correlation=recipe_correlation(rows, by_target, correlation) if by_target else None,
        )

    @property
    def block_median(self) -> float:
        """The median seed-block SD over (setting, target) (0 without blocks)."""
        return float(np.median(list(self.block_sd.values()))) if self.block_sd else 0.0

    def block(self, setting: str, target: str) -> float:
        """The SD of ``setting``'s seed effect on ``target`` (0 where none was measured)."""
        return self.block_sd.get((setting, target), 0.0)

    def borrowed(self, aliases: dict[str, str]) -> Noise:
        """This noise with each new setting of ``aliases`` (new -> measured) given the measured one's
        seed block and residual SDs (a candidate's setting the committed study never ran)."""
        per = {k: v for k, v in self.setting_sd.items()}
        block = dict(self.block_sd)
        for new, old in aliases.items():
            for (s, t), v in self.setting_sd.items():
                if s == old:
                    per[(new, t)] = v
            for (s, t), v in self.block_sd.items():
                if s == old:
                    block[(new, t)] = v
        return replace(self, setting_sd=per, block_sd=block)

    def sd(self, setting: str, cell: str, target: str) -> float:
        """The residual SD of a run of ``setting``'s ``cell`` on ``target`` (the seed block's apart)."""
        base = self.seed_sd.get((setting, cell, target), self.setting_sd.get((setting, target), self.default))
        cut = self.shrink.get(target, 0.0)
        return float(np.sqrt(max(base**2 - cut, SEED_FLOOR * base**2))) if cut else base

    def tau(self, target: str) -> float:
        """The recipe SD of ``target``."""
        return self.recipe_by_target.get(target, self.recipe_sd)

    def divided(self, divisor: float) -> Noise:
        """The recipe SD of every target divided by ``divisor`` (r recipes averaged: sqrt(r))."""
        return replace(
            self,
            recipe_sd=self.recipe_sd / divisor,
            recipe_by_target={t: v / divisor for t, v in self.recipe_by_target.items()},
        )

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
                f"the evaluation noise at {EVAL_PROBLEMS} (data/results/<profile>/eval_noise.csv, written by paper-repro bench "
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
}


def read_eval_variance(path) -> EvalVariance | None:
    """Per target, (v_run, v_shared) at :data:`EVAL_PROBLEMS` problems from ``eval_noise.csv`` (one row
    per target; ``paper-repro bench eval-noise``), or None when there is no such file. A
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
    from paper_repro.common.paths import repo_relative

    return table, (repo_relative(path) if table is not None else "none")


def recipe_sds(
    runs: pd.DataFrame, names: Sequence[str], targets: Sequence[str] = METRICS
) -> dict[str, float]:
    """Per target, the recipe SD the runs of settings ``names`` show, by REML
    (:func:`paper_repro.analysis.stats.mixed.recipe_reml`; 0 where it cannot be separated)."""
    rows = runs[runs["setting"].isin(list(names))]
    out = {}
    for t in targets:
        tau = recipe_reml(rows, t, interval=False).tau
        out[t] = float(tau) if np.isfinite(tau) else 0.0
    return out


@dataclass(frozen=True)
class SeedBlocks:
    """One setting's variance components on one target (the additive cell + seed model, on the seeds
    every cell ran): ``seed`` the seed effect's, ``residual`` the run's own, ``raw`` the plain
    within-cell variance over seeds (what the simulator drew before the blocks), with the cells and
    seeds they come from."""

    seed: float
    residual: float
    raw: float
    cells: int
    seeds: int


def seed_blocks(rows: pd.DataFrame, target: str) -> SeedBlocks | None:
    """The variance components of one setting's ``rows`` on ``target`` by the two-way ANOVA without
    interaction (the model the allocation claim's pairwise test uses): residual = the residual mean
    square, ``(k - 1)(n - 1)`` df; seed = (seed mean square - residual) / k; where the seed mean square
    is the smaller, seed = 0 and the residual pools both (the REML estimate of a balanced layout, at
    its boundary); raw = the within-cell mean square (the raw = seed + residual of the old model).
    None with under two cells or seeds run by every cell."""
    grid = Grid.of(rows, target)
    count = grid.count
    full = (count > 0).all(axis=1)
    y = grid.total[full] / count[full] if full.any() else np.empty((0, 0))
    n, k = y.shape
    if n < 2 or k < 2:
        return None
    seed_means, cell_means, grand = y.mean(axis=1), y.mean(axis=0), y.mean()
    resid = y - seed_means[:, None] - cell_means[None, :] + grand
    ss_resid, ss_seed = float(np.sum(resid**2)), k * float(np.sum((seed_means - grand) ** 2))
    ms_resid, ms_seed = ss_resid / ((k - 1) * (n - 1)), ss_seed / (n - 1)
    raw = float(np.sum((y - cell_means[None, :]) ** 2)) / (k * (n - 1))
    if ms_seed <= ms_resid:  # REML's boundary: no seed effect, the seeds' df join the residual's
        return SeedBlocks(0.0, (ss_resid + ss_seed) / ((k - 1) * (n - 1) + n - 1), raw, k, n)
    return SeedBlocks((ms_seed - ms_resid) / k, ms_resid, raw, k, n)


def recipe_correlation(
    rows: pd.DataFrame, tau: dict[str, float], fallback: tuple[tuple[float, ...], ...] | None
) -> tuple[tuple[float, ...], ...]:
    """The recipe effects' correlation across the targets (:data:`METRICS`' order) that the runs
    ``rows`` show: for a pair of targets with recipe SDs ``tau`` (REML, each its own), the REML recipe
    SD ``d`` of their per-run difference gives ``(tau_a^2 + tau_b^2 - d^2) / (2 tau_a tau_b)``, clipped
    to [-1, 1]; a pair it cannot be read for keeps ``fallback``'s (the residuals' correlation) or 0.
    The matrix is then made a correlation matrix (eigenvalues clipped at 1e-6, unit diagonal). The
    residuals' correlation alone got the differences' recipe SD wrong: on the first registered study
    native - judge 0.026 where the runs show 0.037, native - gsm 0.014 where they show 0.003, so a target
    claim's power and error at a candidate design were off (issue 53)."""
    k = len(METRICS)
    base = np.array(fallback, float) if fallback is not None else np.eye(k)
    for i, a in enumerate(METRICS):
        for j in range(i + 1, k):
            b = METRICS[j]
            ta, tb = tau.get(a, 0.0), tau.get(b, 0.0)
            if a not in rows or b not in rows or ta <= 0 or tb <= 0:
                continue
            d = recipe_reml(rows.assign(_pair=rows[a] - rows[b]), "_pair", interval=False).tau
            if np.isfinite(d):
                base[i, j] = base[j, i] = float(np.clip((ta**2 + tb**2 - d**2) / (2 * ta * tb), -1.0, 1.0))
    values, vectors = np.linalg.eigh(base)
    fixed = vectors @ np.diag(np.clip(values, 1e-6, None)) @ vectors.T
    scale = np.sqrt(np.diag(fixed))
    fixed = fixed / np.outer(scale, scale)
    return tuple(tuple(round(float(v), 6) for v in row) for row in fixed)


def residual_correlation(rows: pd.DataFrame, names: Sequence[str]) -> tuple[tuple[float, ...], ...] | None:
    """The targets' correlation (:data:`METRICS`' order) of the additive model's residuals, pooled over
    the settings ``names`` (each setting's residuals standardised by its own SD, so a noisy setting
    does not set it); None when some target has no residuals."""
    columns = []
    for t in METRICS:
        parts = []
        for name in names:
            part = rows[rows["setting"] == name]
            grid = Grid.of(part, t) if t in part else None
            if grid is None or grid.count.size == 0:
                continue
            full = (grid.count > 0).all(axis=1)
            y = grid.total[full] / grid.count[full]
            if y.shape[0] < 2 or y.shape[1] < 2:
                continue
            r = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0) + y.mean()
            sd = float(np.sqrt(np.mean(r**2)))
            parts.append((r / sd).ravel() if sd > 0 else np.zeros(r.size))
        columns.append(np.concatenate(parts) if parts else np.empty(0))
    sizes = {len(c) for c in columns}
    if len(sizes) != 1 or 0 in sizes:
        return None
    matrix = np.corrcoef(np.vstack(columns))
    if not np.all(np.isfinite(matrix)):
        return None
    return tuple(tuple(round(float(v), 6) for v in row) for row in matrix)
