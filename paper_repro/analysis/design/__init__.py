"""Operating characteristics: the study's own decision code run on simulated studies whose truth is known.

``paper-repro design --profile P`` (and notebook 40) answers, before any run, how often each claim's
test is wrong and how often two draws of the study agree. A simulated study has the profile's
design: its distinct settings, each with its cells at their realised rho (the committed runs' when
there are any, else the grid's targets) and ``n`` seeds per cell. A run's score of a target is

    truth(setting, target, rho of its cell) + recipe effect of the cell + seed noise,

- the **seed noise**, in two Gaussian parts: the **seed block**, one draw per (setting, seed,
  target) shared by every cell of the setting (a seed fixes the data order and sampling all its
  cells see), and the run's own **residual**; per (setting, target) each SD is the two-way ANOVA's
  of the committed runs (cells x seeds, :func:`~paper_repro.analysis.design.noise.seed_blocks`), or
  one SD given on the command line (no blocks). The targets' blocks and residuals are correlated as the
  committed residuals are (:func:`~paper_repro.analysis.design.noise.residual_correlation`), their recipe
  effects as the REML recipe SDs of the targets' per-run differences say
  (:func:`~paper_repro.analysis.design.noise.recipe_correlation`);
- the **recipe effect**: one Gaussian draw per (setting, cell, target) with SD ``tau``, shared by
  every seed of the cell. Cells differ in P, G, K and mu, not only in rho, and that shows in the
  committed data as cells scattered about a smooth frontier beyond their seeds' noise: per target,
  the REML recipe SD of :mod:`paper_repro.analysis.stats.mixed` (:func:`recipe_sds`). Two draws of
  one simulated study share their recipe effects (the same cells, rerun on new seeds), as the two
  committed draws did.

The **truths** (:func:`truths`): flat; a peak at 0.45, symmetric and skewed; a peak at 0.72; a
plateau over 0.3-0.7; monotone rising and falling; the paper's world (rule-based frontiers peak
at 0.72 and PRM-style at 0.445 on the native reward, pass@1 rises with rho, the judge peaks at 0.5);
and the paper's world reversed (rule-based at 0.445, PRM-style at 0.72).
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

with ``v_run`` and ``v_shared`` measured (``eval_noise.csv``, ``paper-repro bench
eval-noise``: :func:`read_eval_variance`) or given; without them only ``n0`` problems are simulated.
The recipe SD is per target (``Noise.recipe_by_target``), and the shrink moves it for the targets
that change; math (300 problems) keeps its
noise, and so does the judge (it scores the gsm completions) unless the evaluation noise has a row
for it. A cell the committed table lacks (a candidate design's new target or second recipe) takes
its setting's median seed SD for the target. The candidate designs and their cost:
:mod:`paper_repro.run.design_cost` and :mod:`paper_repro.analysis.design.candidates`.

The package's parts: :mod:`~paper_repro.analysis.design.noise` (the layout and the noise model),
:mod:`~paper_repro.analysis.design.studies` (the truths and a simulated study),
:mod:`~paper_repro.analysis.design.characteristics` (the claims' own decisions on simulated studies:
``design.csv`` and the power column), :mod:`~paper_repro.analysis.design.candidates` (candidate
designs compared at their cost), :mod:`~paper_repro.analysis.design.cost_check` (the cost model
checked on the runs it was measured on: ``design_cost.csv``). Their names are read from here, each imported on first use.
"""

from __future__ import annotations

from paper_repro.common.lazy import lazy_surface

# name -> the part that owns it
_OWNERS = {
    **dict.fromkeys(
        (
            "EVAL_PROBLEMS",
            "EVAL_TARGETS",
            "EvalVariance",
            "Layout",
            "Noise",
            "SEED_FLOOR",
            "VAR_COLUMNS",
            "eval_shrink",
            "eval_variance",
            "eval_variance_arg",
            "read_eval_variance",
            "recipe_sds",
            "recipe_correlation",
            "residual_correlation",
            "SeedBlocks",
            "seed_blocks",
        ),
        ".noise",
    ),
    **dict.fromkeys(
        (
            "SHAPES",
            "Truth",
            "fitted_truth",
            "noiseless",
            "recipe_draw",
            "simulate",
            "truths",
        ),
        ".studies",
    ),
    **dict.fromkeys(
        (
            "CLAIM_TARGETS",
            "COVERAGE_BOOTSTRAP",
            "COVERAGE_REPLICATES",
            "DECIDED",
            "about_cells",
            "design_claims",
            "Model",
            "POWER_REPLICATES",
            "REPLICATES",
            "RNG_SEED",
            "SEEDS",
            "design_table",
            "is_wrong",
            "noise_model",
            "operating_characteristics",
            "post_hoc",
            "recipe_check",
            "RECIPE_CHECK_REPLICATES",
            "RECIPE_CHECK_TRUTHS",
            "power_table",
            "simulated",
            "simulated_claims",
            "summary",
            "true_best_rhos",
            "truth_verdicts",
        ),
        ".characteristics",
    ),
    **dict.fromkeys(
        (
            "CANDIDATE_REPLICATES",
            "Comparison",
            "WRONG_LIMIT",
            "choice_rows",
            "compare",
            "cuts",
            "layout_of",
            "misfits",
            "recommend",
        ),
        ".candidates",
    ),
    **dict.fromkeys(("cost_check", "candidate_errors"), ".cost_check"),
}
__all__ = sorted(_OWNERS)


__getattr__, __dir__ = lazy_surface(__name__, _OWNERS)
