"""Candidate designs compared (``paper-repro design --candidates``): each candidate the planner
prices (:mod:`paper_repro.run.design_cost`) is simulated under the known truths (its layout at the
planner's cells, :func:`layout_of`), and a rule picks one:

- **the simulation**: the profile's design and today's (the committed runs' layout and seeds, its
  minutes as measured) at ``replicates`` (with the rho* coverage), the others at
  ``candidate_replicates``; a candidate whose simulated design is an earlier one's (stage A's budget
  changes the cost, not the frontier at C) shares its table;
- **the rule** (:func:`recommend`): among the candidates within the minutes whose stage A reaches
  the ladder's top (:data:`LADDER_TOP`) and whose every claim's largest wrong share over the truths
  is at most 5% (a binomial test over its simulated studies, :func:`too_wrong`: the share is itself
  simulated), first those that meet the registered targets
  of the paper's three regime claims (:data:`TARGETS`, at the "any recipe at this rho" level:
  wrong at most 5%, two-draw agreement at least 85%, held in at least 80% of studies where true and
  not held in at least 80% where false), then the largest mean over those claims of the smaller of
  the two powers, then the largest mean over every claim of the held-when-true share; ties go to
  fewer minutes. The candidates include second recipes at the grid targets inside the claims'
  windows for every setting (:func:`window_targets`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from paper_repro.analysis.claims.registry import design_targets
from paper_repro.analysis.design import characteristics as oc
from paper_repro.analysis.design.bounds import (
    TARGETS,
    WRONG_ALPHA,
    WRONG_LIMIT,
    missed_targets,
    ruled,
    too_wrong,
)
from paper_repro.analysis.design.noise import EvalVariance, Layout
from paper_repro.config import Profile
from paper_repro.run.cost_model import (
    OVERHEAD_MINUTES,
    CostModel,
    committed_rows,
    measured_minutes,
    predicted_minutes,
    wall_span_minutes,
)
from paper_repro.run.design_cost import (
    CANDIDATE_REPLICATES,
    MINUTES,
    Candidate,
    Pricer,
    candidates,
    distinct_cells,
    more_settings,
    shared_settings,
)

# how far past C stage A must run (a multiple of C): the registered size*(C) and budget claims are read
# along the ladder, and on the committed runs the sizes separate only at 2C (S and M have saturated, L
# is still rising). The simulator scores the frontier at C alone, so it cannot see what a shorter ladder
# loses: a candidate whose stage A stops earlier is priced and simulated, never picked
LADDER_TOP = 2.0
# the regime claims the registered targets apply to
TARGET_CLAIMS = design_targets()  # the claims declared with design_target=True


def window_targets(profile: Profile, targets: Sequence[float] | None = None) -> tuple[float, ...]:
    """The grid targets (``targets``, default the profile's) inside the paper's update-heavy or
    search-heavy window (the regime claims')."""
    from paper_repro.analysis.claims.regimes import windows

    spans = windows(profile.margins)
    grid = profile.grid.targets if targets is None else targets
    return tuple(t for t in grid if any(lo - 1e-9 <= t <= hi + 1e-9 for lo, hi in spans))


FAMILIES = ("all", "prm-arm", "prm-settings")  # the candidate lists --family names


def listed_candidates(
    profile: Profile, pricer: Pricer, minutes: float, family: str = "all"
) -> list[Candidate]:
    """The candidates of ``family``: ``all`` (:func:`paper_repro.run.design_cost.candidates`),
    ``prm-arm`` (:func:`paper_repro.run.design_cost.prm_arm_candidates`) or ``prm-settings``
    (:func:`paper_repro.analysis.design.prm_settings.prm_settings_candidates`: not filled to ``minutes``)."""
    from paper_repro.analysis.design.prm_settings import prm_settings_candidates
    from paper_repro.run.design_cost import WINDOW_TARGETS, prm_arm_candidates

    if family == "all":
        return candidates(profile, pricer, minutes, window_targets(profile))
    if family == "prm-arm":
        return prm_arm_candidates(profile, pricer, minutes, window_targets(profile, WINDOW_TARGETS))
    if family == "prm-settings":
        return prm_settings_candidates(profile, window_targets(profile, WINDOW_TARGETS))
    raise ValueError(f"unknown candidate family {family!r}: {', '.join(FAMILIES)}")


def family_claims(family: str, more: Sequence[str] = ()) -> list | None:
    """The claims a family's candidates are simulated on: every simulated claim (None), or for
    ``prm-settings`` the regime contrasts alone
    (:data:`paper_repro.analysis.design.prm_settings.FAMILY_CLAIMS`), the question it answers; with
    ``more`` (id prefixes), besides them the claims the simulator can also run
    (:func:`~paper_repro.analysis.design.characteristics.design_claims`: the target claims)."""
    from paper_repro.analysis.design.prm_settings import FAMILY_CLAIMS

    if family != "prm-settings" and not more:
        return None
    base = oc.simulated_claims()
    if family == "prm-settings":
        base = [c for c in base if c.id.startswith(FAMILY_CLAIMS)]
    have = {c.id for c in base}
    return [*base, *(c for c in oc.design_claims(more) if c.id not in have)]


def target_misses(choices: pd.DataFrame, name: str) -> list[str]:
    """Which registered targets (:data:`TARGETS`) candidate ``name`` misses for the regime claims
    (none: it meets them all; a claim it has no rows of counts as missed)."""
    rows = choices[choices["name"] == name]
    if "claim_id" not in rows:
        return ["no claim ids"]
    out = []
    for claim in TARGET_CLAIMS:
        row = rows[rows["claim_id"] == claim]
        if row.empty:
            out.append(f"{claim}: not simulated")
            continue
        out += [f"{claim} {miss}" for miss in missed_targets(row.iloc[0])]
    return out


def _target_power(rows: pd.DataFrame) -> float:
    """The mean over the regime claims of the smaller of their two powers."""
    if "claim_id" not in rows:
        return np.nan
    part = rows[rows["claim_id"].isin(TARGET_CLAIMS)]
    if part.empty:
        return np.nan
    both = part[["held_when_true", "not_held_when_false"]].min(axis=1, skipna=False)
    return float(both.fillna(0).mean())


def layout_of(candidate: Candidate, base: Profile, names: Sequence[str]) -> Layout:
    """The simulated design of ``candidate``: per distinct setting in ``names`` the planner's cells at
    the full budget (second recipes included where the candidate runs them) at their predicted rho."""
    from paper_repro.run.allocation import plan_setting

    profile = candidate.profile(base)
    settings = [*(profile.setting(n) for n in names), *more_settings(candidate)]
    cells = {}
    for setting in settings:
        planned = distinct_cells(plan_setting(profile, setting).cells)
        cells[setting.name] = tuple(
            sorted(((c.label, float(c.predicted_rho)) for c in planned), key=lambda x: x[1])
        )
    return Layout(cells, candidate.seeds)


def classes_of(candidate: Candidate, classes: Any) -> Any:
    """``classes`` with ``candidate``'s more settings in their classes (PRM-style where the reward pays
    a PRM; a process reward where it reads the steps), none of them on the middle policy's claims."""
    from dataclasses import replace as swap

    from paper_repro import rewards

    extra = more_settings(candidate)
    prm = tuple(s.name for s in extra if rewards.is_prm_based(s.reward_system))
    rule = tuple(s.name for s in extra if s.name not in prm)
    process = tuple(s.name for s in extra if rewards.get(s.reward_system).reads != "answer")
    return swap(
        classes,
        rule_based=(*classes.rule_based, *rule),
        prm_style=(*classes.prm_style, *prm),
        process=(*classes.process, *process),
    )


def noise_of(candidate: Candidate, noise: Any) -> Any:
    """``noise`` with each of ``candidate``'s more settings given the seed blocks and residual SDs of
    the committed setting of its reward system (the reward's noise, not the policy's: the committed
    PRM-style settings are all on one policy)."""
    return noise.borrowed({s.name: s.reward_system for s in more_settings(candidate)})


def choice_rows(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """Per claim of one design's per-truth table (:func:`paper_repro.analysis.design.summary`), with
    the candidate's parameters and cost ``params``."""
    rows = oc.summary(table).drop(columns=["design"])
    return pd.DataFrame([{**params, **r} for r in rows.to_dict("records")])


def _ladder(rows: pd.DataFrame) -> float:
    """How far past C a candidate's stage A runs (inf when its rows do not say: a table of
    candidates that never vary it)."""
    if "stage_a_multiple" not in rows:
        return np.inf
    value = pd.to_numeric(rows["stage_a_multiple"], errors="coerce").iloc[0]
    return float(value) if np.isfinite(value) else np.inf


def recommend(
    choices: pd.DataFrame, minutes: float = MINUTES, wrong: float = WRONG_LIMIT, ladder: float = LADDER_TOP
) -> pd.Series | None:
    """The rule (the module's): among the candidates (rows with ``candidate`` true) within ``minutes``
    whose stage A runs to at least ``ladder`` x C (:data:`LADDER_TOP`) and whose every claim's
    ``wrong_max`` is at most ``wrong`` within its sampling error (:func:`too_wrong`), those meeting the regime claims' targets first, then the
    largest mean of their smaller power, then the largest mean over claims of ``held_when_true``;
    ties to fewer minutes. One row per candidate (its name, minutes and scores), or None."""
    rows = choices[choices["candidate"].astype(bool)] if "candidate" in choices else choices
    rows = rows.assign(_too_wrong=too_wrong(rows, wrong))
    per = rows.groupby("name", sort=False).agg(
        minutes=("minutes", "first"),
        too_wrong=("_too_wrong", lambda w: w.max() if w.notna().all() else np.nan),
        held_mean=("held_when_true", "mean"),
    )
    per["meets"] = [not target_misses(rows, n) for n in per.index]
    per["target_power"] = [_target_power(rows[rows["name"] == n]) for n in per.index]
    per["ladder"] = [_ladder(rows[rows["name"] == n]) for n in per.index]
    ok = per[(per["minutes"] <= minutes) & (per["too_wrong"] == 0) & (per["ladder"] >= ladder - 1e-9)]
    if ok.empty:
        return None
    best = ok.assign(score=ok["held_mean"].fillna(0), power=ok["target_power"].fillna(0)).sort_values(
        ["meets", "power", "score", "minutes"], ascending=[False, False, False, True]
    )
    return best.iloc[0].rename(best.index[0])


def misfits(
    choices: pd.DataFrame,
    name: str,
    minutes: float = MINUTES,
    wrong: float = WRONG_LIMIT,
    ladder: float = LADDER_TOP,
) -> list[str]:
    """Why candidate ``name`` does not meet the rule's bounds (none when it does)."""
    rows = choices[choices["name"] == name]
    out = []
    if rows["minutes"].iloc[0] > minutes:
        out.append(f"{rows['minutes'].iloc[0]:.1f} min > {minutes:g}")
    if (reach := _ladder(rows)) < ladder - 1e-9:
        out.append(f"stage A stops at {reach:g}C, before the ladder's {ladder:g}C")
    if "wrong_max" not in rows or rows["wrong_max"].isna().any():
        out.append("not simulated")
    else:
        beyond = too_wrong(rows, wrong)
        out += [
            f"{r.claim}: wrong {r.wrong_max:.3f} ({r.wrong_truth}), above {wrong:g} beyond sampling error"
            for r, b in zip(rows.itertuples(), beyond, strict=True)
            if b == 1
        ]
    return out


def cuts(chosen: Candidate, other: Candidate) -> list[str]:
    """What ``other`` changes of ``chosen``, in words."""
    out = []
    dropped = [t for t in chosen.targets if t not in other.targets]
    added = [t for t in other.targets if t not in chosen.targets]
    if dropped or added:
        out.append(
            f"targets {' '.join(f'{t:g}' for t in chosen.targets)} -> {' '.join(f'{t:g}' for t in other.targets)}"
        )
    for name, words in (
        ("seeds", "seeds per cell"),
        ("eval_problems", "held-out and gsm problems"),
        ("stage_a_multiple", "stage A's budget (x C)"),
        ("pilot_fractions", "pilot fractions"),
        ("pilot_seeds", "pilot seeds"),
        ("recipes", "second recipes"),
    ):
        a, b = getattr(chosen, name), getattr(other, name)
        if a != b:
            out.append(f"{words} {_words(a)} -> {_words(b)}")
    return out


def _words(value) -> str:
    if isinstance(value, tuple):
        return (
            f"{len(value)}" if all(isinstance(v, int) for v in value) else " ".join(f"{v:g}" for v in value)
        )
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass
class Comparison:
    """What :func:`compare` found: the per-truth table of today and the profile's design
    (``design.csv``), the choices table (``design_choices.csv``), the candidates, the cost model, and
    the recommended candidate (None when none meets the rule)."""

    design: pd.DataFrame
    choices: pd.DataFrame
    candidates: list[Candidate]
    cost_model: CostModel
    recommended: Candidate | None
    notes: list[str]
    cost_check: pd.DataFrame | None = None
    extra: tuple[str, ...] = ()  # the claims simulated besides the family's: reported, not ruled on


def compare(
    profile: Profile,
    runs_path: str | Path,
    replicates: int = oc.REPLICATES,
    candidate_replicates: int = CANDIDATE_REPLICATES,
    minutes: float = MINUTES,
    overhead: float = OVERHEAD_MINUTES,
    variance: EvalVariance | None = None,
    variance_source: str = "none",
    candidate_list: Sequence[Candidate] | None = None,
    coverage_replicates: int = oc.COVERAGE_REPLICATES,
    curves_path: str | Path | None = None,
    variants: dict[str, tuple[int, float]] | None = None,
    progress: Callable[[str], None] | None = None,
    simulate: bool = True,
    overrides: tuple[float | None, float | None, float | None] | None = None,
    family: str = "all",
    more_claims: Sequence[str] = (),
) -> Comparison:
    """Today's design (the committed runs' layout and seeds, at ``replicates``) and the candidates
    (:func:`candidates`, or ``candidate_list``; the profile's design ``chosen`` at ``replicates``, the
    others at ``candidate_replicates`` without coverage) simulated with the committed runs' noise,
    priced by the cost model, and the rule's pick (:func:`recommend`). A candidate whose evaluation
    size needs the evaluation noise when there is none is priced, not simulated (its note says why).
    ``simulate`` False: priced only (the choices table without operating characteristics).
    ``overrides``: (recipe SD, seed SD, amplitude), each replacing the committed runs' where given (a
    sensitivity: what the candidates would show were the effects taller or the recipes quieter).
    ``family``: which candidates (:func:`listed_candidates`); ``more_claims``: id prefixes of claims
    simulated besides the family's (:func:`family_claims`)."""
    from paper_repro.analysis.claims.study import Classes
    from paper_repro.analysis.design.cost_check import cost_check

    chosen = family_claims(family, more_claims)  # an unknown prefix fails before any simulation
    extra = _extra(family, chosen)
    rows = committed_rows(runs_path, profile)
    curves = _curves(curves_path)
    model = CostModel.from_runs(rows, curves)
    check = cost_check(rows, curves, overhead)
    shared = shared_settings(profile)
    classes = Classes.of(profile, shared)
    names = [*classes.rule_based, *classes.prm_style]
    grid = _committed_grid(profile, rows, curves, runs_path, curves_path)
    problems = int(grid["heldout"].median())  # what the committed runs were evaluated on
    noise_model = oc.noise_model(grid, names, *(overrides or (None, None, None)), problems=problems)
    today = Layout.from_runs(grid, names, int(grid["seed"].nunique()))
    pricer = Pricer(profile, model, overhead)
    given = candidate_list is not None
    listed = list(candidate_list) if given else listed_candidates(profile, pricer, minutes, family)
    measured = measured_minutes(rows, overhead, model.parallel)
    notes = _notes(noise_model, overrides, rows, model, measured, overhead, curves)
    setting_names = {(s.policy, s.reward_system): s.name for s in profile.all_settings() if s.name in names}
    priced = _priced(
        listed, pricer, profile, names, overhead, progress or (lambda _: None), check, setting_names
    )

    today_params = _today_params(today, problems, len(rows), measured, overhead)
    if not simulate:
        frames = [pd.DataFrame([{**p, "replicates": 0} for p in [today_params, *(p for *_, p in priced)]])]
        choices = pd.concat(frames, ignore_index=True)
        return Comparison(pd.DataFrame(), choices, listed, model, None, notes, check)

    today_table = oc.design_table(
        today,
        noise_model,
        classes,
        profile.margins,
        variants,
        replicates,
        coverage_replicates,
        progress,
        chosen,
    )
    design_frames = [today_table]
    frames = [
        choice_rows(
            today_table[today_table["design"] == "committed"], {**today_params, "replicates": replicates}
        )
    ]
    design_frames += _simulate(
        priced,
        noise_model,
        classes,
        profile,
        problems,
        notes,
        frames,
        variance,
        variance_source,
        replicates,
        candidate_replicates,
        coverage_replicates,
        progress,
        chosen,
    )
    choices = pd.concat(frames, ignore_index=True)
    recommended = _marked_pick(choices, listed, minutes, extra)
    return Comparison(
        pd.concat(design_frames, ignore_index=True), choices, listed, model, recommended, notes, check, extra
    )


def _extra(family: str, chosen: list | None) -> tuple[str, ...]:
    """The ids of ``chosen`` beyond ``family``'s own claims (:func:`family_claims`)."""
    own = family_claims(family)
    base = {c.id for c in (oc.simulated_claims() if own is None else own)}
    return tuple(c.id for c in chosen or [] if c.id not in base)


def _marked_pick(
    choices: pd.DataFrame, listed: Sequence[Candidate], minutes: float, extra: Sequence[str] = ()
) -> Candidate | None:
    """The rule's pick among ``listed`` (:func:`recommend` on the rows it reads, :func:`ruled`), marked
    in ``choices``' ``recommended``."""
    pick = recommend(ruled(choices, extra), minutes)
    recommended = next((c for c in listed if pick is not None and c.name == pick.name), None)
    choices["recommended"] = choices["name"] == (recommended.name if recommended else None)
    return recommended


def _committed_grid(profile: Profile, rows: pd.DataFrame, curves, runs_path, curves_path) -> pd.DataFrame:
    """The committed full-budget grid runs (neither pilot nor fresh seeds), a run past C (stage A's)
    counted by its point at C, as the analysis reads it: the noise model's and today's layout's."""
    from paper_repro.analysis.tables.frontiers import at_full_budget, load_curves, setting_rows

    if curves is not None:
        rows = at_full_budget(rows, load_curves(curves_path, rows), profile.budget_flops)
    full = setting_rows(rows, profile.all_settings(), "full", profile.budget_flops)
    grid = full[~full["seed"].isin({*profile.pilot_seeds, *profile.fresh_seeds})]
    if grid.empty:
        raise ValueError(f"{runs_path}: no committed full-budget grid runs to take the noise model from")
    return grid


def _notes(
    noise_model: Any,
    overrides: tuple[float | None, float | None, float | None] | None,
    rows: pd.DataFrame,
    model: CostModel,
    measured: float,
    overhead: float,
    curves: pd.DataFrame | None = None,
) -> list[str]:
    """The comparison's first notes: the noise model it simulates with (and what was given in its
    place), and today's committed runs' minutes as measured and as the cost model prices them."""
    given = [
        f"{k} {v:g}"
        for k, v in zip(("recipe SD", "seed SD", "amplitude"), overrides or (), strict=False)
        if v is not None
    ]
    return [
        f"noise model: recipe SD {noise_model.noise.recipe_sd:.4f}, median seed SD {noise_model.noise.default:.4f}, "
        f"truths' height {noise_model.amplitude:.4f}" + (f" ({', '.join(given)} given)" if given else ""),
        f"today's {len(rows)} committed runs: {measured - overhead:.1f} min of runs as measured (seconds_total / "
        f"{model.parallel:.2f} job-seconds per wall second / 60), {predicted_minutes(rows, model, curves):.1f} as "
        f"the cost model prices them, written over {wall_span_minutes(rows):.1f} min of wall time",
    ]


def _priced(
    listed: Sequence[Candidate],
    pricer: Pricer,
    profile: Profile,
    names: list[str],
    overhead: float,
    say: Callable[[str], None],
    check: pd.DataFrame | None = None,
    setting_names: dict[tuple[str, str], str] | None = None,
) -> list[tuple[Candidate, Layout, dict[str, Any]]]:
    """Each candidate with its layout and its row of the choices table as priced (runs, minutes in
    all and by role, the overhead, and the cost model's expected error of those minutes:
    :func:`paper_repro.analysis.design.cost_check.candidate_errors` on ``check``)."""
    from paper_repro.analysis.design.cost_check import candidate_errors

    priced = []
    for c in listed:
        price, layout = pricer(c), layout_of(c, profile, names)
        errors = (
            candidate_errors(pricer.jobs(c), pricer.model, check, setting_names or {}, c.eval_problems)
            if check is not None
            else {}
        )
        params = {
            "name": c.name,
            "candidate": True,
            **c.describe(),
            "cells": sum(len(v) for v in layout.cells.values()),
            "runs": price.runs,
            "minutes": price.minutes,
            **errors,
            "overhead_minutes": overhead,
            **{f"minutes_{k}": v for k, v in price.role_minutes().items()},
        }
        say(f"priced {c.name}: {price.runs:.0f} runs, {price.minutes:.1f} min")
        priced.append((c, layout, params))
    return priced


def _today_params(
    today: Layout, problems: int, runs: int, measured: float, overhead: float
) -> dict[str, Any]:
    """The choices table's row of today's committed design: its layout, ``runs`` runs evaluated on
    ``problems`` problems, in the ``measured`` minutes (overhead included)."""
    return {
        "name": "today (committed)",
        "candidate": False,
        "targets": "committed cells",
        "seeds": today.seeds,
        "eval_problems": problems,
        "stage_a_multiple": 1.0,
        "pilot_fractions": "",
        "pilot_seeds": np.nan,
        "second_recipes": False,
        "cells": sum(len(c) for c in today.cells.values()),
        "runs": runs,
        "minutes": measured,
        "overhead_minutes": overhead,
        "note": "minutes as measured: the committed runs' seconds_total / 2 / 60 + overhead",
    }


def _simulate(
    priced: list[tuple[Candidate, Layout, dict[str, Any]]],
    noise_model: Any,
    classes: Any,
    profile: Profile,
    problems: int,
    notes: list[str],
    frames: list[pd.DataFrame],
    variance: EvalVariance | None,
    variance_source: str,
    replicates: int,
    candidate_replicates: int,
    coverage_replicates: int,
    progress: Callable[[str], None] | None,
    chosen: list | None = None,
) -> list[pd.DataFrame]:
    """Simulate each priced candidate (``chosen`` at ``replicates`` with coverage, the others at
    ``candidate_replicates`` without; a candidate whose layout, seeds and evaluation size an earlier one
    shares reuses its simulation), appending its rows to ``frames`` and a candidate that cannot be
    simulated to ``notes``; returns the design table's frames of ``chosen``."""
    say = progress or (lambda _: None)
    design_frames = []
    sims: dict[tuple, tuple[pd.DataFrame, int]] = {}
    for c, layout, params in priced:
        try:
            noise = noise_model.noise.at_problems(c.eval_problems, variance)
        except ValueError as err:
            notes.append(f"{c.name}: not simulated: {err}")
            frames.append(pd.DataFrame([{**params, "replicates": 0, "note": f"not simulated: {err}"}]))
            continue
        key = (tuple(sorted(layout.cells.items())), layout.seeds, c.eval_problems)
        if key not in sims:  # a candidate that differs in cost alone shares an earlier one's simulation
            reps = replicates if c.name == "chosen" else candidate_replicates
            say(f"simulating {c.name}: {layout.seeds} seeds, {params['cells']} cells, {reps} replicates")
            cover = coverage_replicates if c.name == "chosen" else 0
            mine, groups = noise_of(c, noise), classes_of(c, classes)
            sims[key] = (
                oc.simulated(
                    layout, mine, noise_model, groups, profile.margins, c.name, reps, cover, progress, chosen
                ),
                reps,
            )
        table, reps = sims[key]
        if c.name == "chosen":
            design_frames.append(table.assign(design="chosen"))
        source = f"evaluation noise: {variance_source}" if c.eval_problems != problems else ""
        note = "; ".join(x for x in (c.note, source) if x)
        frames.append(choice_rows(table, {**params, "replicates": reps, "note": note}))
    return design_frames


def _curves(path) -> pd.DataFrame | None:
    if path is None or not Path(path).exists():
        return None
    table = pd.read_csv(path, low_memory=False)
    return table if not table.empty else None


def rule_words(minutes: float) -> str:
    """The rule (:func:`recommend`) in one sentence, its bounds read from :data:`WRONG_LIMIT` and
    :data:`TARGETS`, within ``minutes`` (wall minutes)."""
    targets = ", ".join(
        f"{column.removesuffix('_max').removesuffix('_min').replace('_', ' ')} "
        f"{'<=' if kind == 'max' else '>='} {bound:.2f}"
        for column, (bound, kind) in TARGETS.items()
    )
    return (
        f"the rule: within {minutes:g} min, every claim's largest wrong share <= {WRONG_LIMIT:g} (not rejected by a "
        f"one-sided binomial test at {WRONG_ALPHA:g} over the candidate's simulated studies); first those "
        f"meeting the regime claims' registered targets ({targets}), then their smaller power, then the mean "
        "held-when-true; ties to fewer minutes"
    )
