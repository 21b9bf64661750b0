"""The cost of a design, and candidate designs compared at their cost (``paper-repro design --candidates``).

The next study's design is chosen by the design simulator (:mod:`paper_repro.analysis.design`)
before any run: each **candidate** (its grid targets, seeds per cell, evaluation size, stage A's
budget, pilots, second recipes) is priced in wall minutes on the cpu-tiny machine and simulated
under the known truths, and a rule picks one.

- **the cost model** (:class:`CostModel`), measured from the committed runs (the ``ok`` rows of the
  design's current generation in ``runs.csv``; :func:`committed_rows`), per policy and reward class
  (rule-based, or PRM-charged: the reward pays the PRM's forward): a run's training seconds
  ``a + b x its budget`` (least squares over the full-budget runs and the pilots: each run pays about
  half a second whatever its budget, so one seconds-per-FLOP ratio cannot price both: the full runs'
  median ratio prices a pilot at C/8 at under half its measured seconds; the median ratio over all
  the class's rows is reported beside the fit), its evaluation seconds per
  problem decoded (``seconds_eval`` over the problems a full evaluation decodes: held-out, gsm and
  math, ``eval.limit`` each; the ladder points of ``curves.csv`` too, where it has rows), and its setup
  (``seconds_total`` less both);
- **a candidate's runs** (:func:`jobs`), through the planner and the run specs of the profile with the
  candidate's values (:meth:`Candidate.profile`; :func:`paper_repro.spec.setting_specs`,
  :func:`~paper_repro.spec.pilot_specs`, :func:`~paper_repro.spec.default_cell_spec`), per distinct
  setting (stage B's ``sparse`` is stage A's M: counted once): its grid at its budget multiple of C
  with its ladder points and second-recipe cells, the pilots at every pilot fraction on every pilot
  seed with theirs, and the fresh seeds' runs (:func:`~paper_repro.spec.race_check_specs`: TRL's
  default and two picks, RACE's and RACE+'s, taken as two grid cells other than the default's: every
  cell costs the same at one budget). A
  full evaluation decodes the held-out and gsm sets (the candidate's problems each) and math (300);
  a ``native`` ladder point the held-out set alone. The base policy's evaluation (once per setting,
  cached) and a ladder point the budget cannot reach (not evaluated) are left out;
- **minutes**: the runs' job-seconds / 2 (two jobs at a time on two cores) / 60, plus a fixed
  ``overhead`` (default 6 minutes for the notebooks and the analysis: a parameter, not measured);
- **the candidates** (:func:`candidates`): the profile's design (``chosen``); at the minutes limit,
  the profile's targets with the seeds the limit buys, fewer and more cells (evenly spaced over the
  profile's range) with the seeds the limit buys, the same at the other evaluation size (900 problems
  per held-out and gsm set where the profile has 300, 300 where it has 900), stage A at the other
  budgets (C, 2C, 4C: at the profile's seeds, and for 2C and 4C with the seeds the limit buys), and
  the design without its second recipes; beside them ``today`` (the committed runs' layout and
  seeds, its minutes as measured). The profile's design and today's are simulated at ``replicates``
  (with the rho* coverage), the others at ``candidate_replicates``; a candidate whose simulated design
  is an earlier one's (stage A's budget changes the cost, not the frontier at C) shares its table;
- **the rule** (:func:`recommend`): among the candidates within the minutes whose every claim's
  largest wrong share over the truths is at most 5%, the one with the largest mean over claims of
  the held-when-true share (its smallest over the truths that hold); ties go to fewer minutes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro import rewards
from paper_repro.analysis import design as sim
from paper_repro.config import Profile

OVERHEAD_MINUTES = 6.0  # notebooks and the analysis, on top of the runs (a parameter, not measured)
MINUTES = 75.0  # the study's wall-time limit the rule picks under
WRONG_LIMIT = 0.05  # a candidate's every claim: largest wrong share over the truths at most this
CANDIDATE_REPLICATES = 60  # study pairs per truth for a candidate (a 5% rate to about +-2 points)
JOBS = 2  # runs at a time on the cpu-tiny machine's two cores
MORE_PROBLEMS = 900  # the other evaluation size the candidates try (300 where the profile's is 900)
MATH_PROBLEMS = 300  # the math set's problems (math_tiny holds 300: an evaluation decodes no more)
PICKS = 2  # RACE's and RACE+'s picks, run on every fresh seed beside TRL's default


def reward_class(reward_system: str) -> str:
    """``prm`` for a reward that pays the PRM's forward, else ``rule``."""
    return "prm" if rewards.is_prm_based(reward_system) else "rule"


# ---------------------------------------------------------------------------------------- the cost model


def committed_rows(path: str | Path, profile: Profile) -> pd.DataFrame:
    """The ``ok`` rows of ``runs.csv`` of the design's current generation: computed with ``profile``'s
    weights, training recipe, data and evaluation (:func:`paper_repro.spec.design_key`), at any budget
    and seed; a (policy, reward) that has none keeps its newest generation's (the design key of its
    newest row). Adds ``policy``, ``reward_class``, ``problems`` (decoded by its full evaluation) and
    ``heldout`` (by a ``native`` one)."""
    from paper_repro.spec import Design, design_key

    runs = pd.read_csv(path, low_memory=False)
    runs = runs[runs["status"] == "ok"].copy()
    if runs.empty:
        return runs
    specs = [_json(s) for s in runs["spec"]]
    runs["policy"] = [s.get("policy", m) for s, m in zip(specs, runs["model"], strict=True)]
    keys = [json.dumps(design_key(s), sort_keys=True) if s else "" for s in specs]
    runs["_key"] = keys
    wanted = {pr: json.dumps(k, sort_keys=True) for pr, k in Design(profile).keys.items()}
    keep = []
    for (policy, reward), rows in runs.groupby(["policy", "reward_system"]):
        key = wanted.get((policy, reward))
        if key is None or not (rows["_key"] == key).any():
            key = rows.sort_values("created_at")["_key"].iloc[-1]
        keep.append(rows[rows["_key"] == key])
    out = pd.concat(keep).sort_index().drop(columns="_key")
    limit = [_limits(s) for s in (_json(s) for s in out["spec"])]
    out["heldout"] = [h for h, _ in limit]
    out["problems"] = [h + n for h, n in limit]
    out["reward_class"] = [reward_class(r) for r in out["reward_system"]]
    for column in ("budget_flops", "C_total", "seconds_train", "seconds_eval", "seconds_total", "seed"):
        out[column] = pd.to_numeric(out[column], errors="coerce")
    return out


def _json(text) -> dict:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return {}


def _limits(spec: dict) -> tuple[int, int]:
    """(held-out problems, gsm and math problems together) a run's full evaluation decodes: ``eval_limit``
    each, the math set's 300 at most."""
    limit = int(spec.get("eval_limit") or sim.EVAL_PROBLEMS)
    return int(spec.get("eval_heldout_limit") or limit), limit + min(limit, MATH_PROBLEMS)


@dataclass(frozen=True)
class Rate:
    """One (policy, reward class)'s measured seconds: training ``intercept + per_flop x budget``, evaluation
    per problem decoded, setup per run; ``median_per_flop`` the plain median of seconds_train / C_total."""

    intercept: float  # s per run
    per_flop: float  # s per FLOP of budget
    per_problem: float  # evaluation s per problem decoded
    setup: float  # s per run beside training and evaluation
    median_per_flop: float
    rows: int

    def train(self, budget_flops: float) -> float:
        return self.intercept + self.per_flop * budget_flops


@dataclass(frozen=True)
class CostModel:
    """Seconds per run by (policy, reward class), measured (:meth:`from_runs`)."""

    rates: dict[tuple[str, str], Rate]
    source: str = "the committed runs"

    @classmethod
    def from_runs(cls, rows: pd.DataFrame, curves: pd.DataFrame | None = None, source: str = "") -> CostModel:
        """The rates of ``rows`` (:func:`committed_rows`: ``policy``, ``reward_class``, ``budget_flops``,
        ``C_total``, ``seconds_train``, ``seconds_eval``, ``seconds_total``, ``problems``), pooled
        over the policy's classes where a class has none. ``curves``: ``curves.csv`` rows (with
        ``run_id``, ``final``, ``evaluation``, ``seconds_eval``), whose ladder points add evaluations."""
        if rows.empty:
            raise ValueError("no committed ok runs to measure the cost model from")
        extra = _ladder_evaluations(rows, curves)
        rates = {}
        for (policy, kind), g in rows.groupby(["policy", "reward_class"]):
            rates[(str(policy), str(kind))] = _rate(g, extra[(extra["policy"] == policy)
                                                              & (extra["reward_class"] == kind)])  # fmt: skip
        for policy in rows["policy"].unique():
            rates[(str(policy), "*")] = _rate(
                rows[rows["policy"] == policy], extra[extra["policy"] == policy]
            )
        rates[("*", "*")] = _rate(rows, extra)
        return cls(rates, source or "the committed runs")

    def rate(self, policy: str, kind: str) -> Rate:
        for key in ((policy, kind), (policy, "*"), ("*", "*")):
            if key in self.rates:
                return self.rates[key]
        raise KeyError(policy)

    def seconds(self, job: Job, heldout: int, gsm: int, math: int = MATH_PROBLEMS) -> float:
        """A job's seconds, its full evaluations decoding ``heldout + gsm + math`` problems and its
        ``native`` ones ``heldout``."""
        rate = self.rate(job.policy, job.reward_class)
        decoded = job.full_evals * (heldout + gsm + math) + job.native_evals * heldout
        return rate.train(job.budget_flops) + rate.per_problem * decoded + rate.setup

    def table(self) -> pd.DataFrame:
        """The rates, one row per measured (policy, reward class)."""
        return pd.DataFrame([
            {"policy": p, "reward_class": k, "rows": r.rows, "train_s_per_run": r.intercept,
             "train_s_per_GFLOP": r.per_flop * 1e9, "median_train_s_per_GFLOP": r.median_per_flop * 1e9,
             "eval_ms_per_problem": r.per_problem * 1e3, "setup_s_per_run": r.setup}
            for (p, k), r in self.rates.items() if "*" not in (p, k)
        ])  # fmt: skip


def _rate(rows: pd.DataFrame, ladder: pd.DataFrame) -> Rate:
    budget, train = rows["budget_flops"].to_numpy(float), rows["seconds_train"].to_numpy(float)
    ratio = float(np.median(train / rows["C_total"].to_numpy(float)))
    intercept, slope = 0.0, float(np.median(train / budget))
    if np.nanmax(budget) > 1.5 * np.nanmin(budget):  # two budgets or more: the per-run part is identified
        slope, intercept = (float(v) for v in np.polyfit(budget, train, 1))
        if intercept < 0 or slope <= 0:
            intercept, slope = 0.0, float(np.sum(train * budget) / np.sum(budget**2))
    evals = pd.concat([
        pd.DataFrame({"seconds": rows["seconds_eval"], "problems": rows["problems"]}),
        ladder[["seconds", "problems"]],
    ])  # fmt: skip
    evals = evals[(evals["problems"] > 0) & evals["seconds"].notna()]
    per_problem = (
        float(np.median(evals["seconds"] / evals["problems"])) if len(evals) else np.nan
    )  # unmeasured
    setup = rows["seconds_total"] - rows["seconds_train"] - rows["seconds_eval"]
    return Rate(intercept, slope, per_problem, float(max(np.nanmedian(setup), 0.0)), ratio, len(rows))


def _ladder_evaluations(rows: pd.DataFrame, curves: pd.DataFrame | None) -> pd.DataFrame:
    """The ladder points' evaluations (not a run's last, which its row holds): policy, reward class,
    seconds, problems decoded."""
    columns = ["policy", "reward_class", "seconds", "problems"]
    if curves is None or curves.empty:
        return pd.DataFrame(columns=columns)
    points = curves[(curves["status"] == "ok") & (curves["final"].astype(str) != "True")]
    points = points.merge(rows[["run_id", "policy", "reward_class", "problems", "heldout"]], on="run_id")
    native = points["evaluation"] == "native"
    return pd.DataFrame({
        "policy": points["policy"], "reward_class": points["reward_class"],
        "seconds": pd.to_numeric(points["seconds_eval"], errors="coerce"),
        "problems": np.where(native, points["heldout"], points["problems"]),
    })  # fmt: skip


def measured_minutes(rows: pd.DataFrame, overhead: float = OVERHEAD_MINUTES) -> float:
    """What ``rows`` (the committed runs) took: their ``seconds_total`` / :data:`JOBS` / 60 + ``overhead``."""
    return float(rows["seconds_total"].sum()) / JOBS / 60 + overhead


def predicted_minutes(rows: pd.DataFrame, model: CostModel) -> float:
    """The cost model's minutes of runs (no overhead) for the committed ``rows``, as they were run."""
    seconds = 0.0
    for row in rows.itertuples():
        rate = model.rate(row.policy, row.reward_class)
        seconds += rate.train(row.budget_flops) + rate.per_problem * row.problems + rate.setup
    return seconds / JOBS / 60


def wall_span_minutes(rows: pd.DataFrame) -> float:
    """The wall time the committed rows were written over (the first run's start, taken as its end less
    its seconds, to the last run's end): a check on the model's two jobs at a time."""
    end = pd.to_datetime(rows["created_at"], utc=True)
    start = end - pd.to_timedelta(rows["seconds_total"], unit="s")
    return float((end.max() - start.min()).total_seconds()) / 60


# ---------------------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class Job:
    """Runs alike in cost: ``count`` runs of one policy and reward class at ``budget_flops``, each
    evaluated on every set ``full_evals`` times and on the held-out set alone ``native_evals`` times."""

    role: str  # grid, pilot, fresh
    policy: str
    reward_class: str
    budget_flops: float
    full_evals: int
    native_evals: int
    count: float = 1.0


@dataclass(frozen=True)
class Candidate:
    """A design the simulator compares: its grid targets, seeds per grid cell, problems per held-out
    and gsm set (math stays at 300), stage A's budget as a multiple of C, the pilots' fractions and
    seeds, and whether the profile's second recipes (``grid.recipes``) are run."""

    name: str
    targets: tuple[float, ...]
    seeds: int
    eval_problems: int = sim.EVAL_PROBLEMS
    stage_a_multiple: float = 1.0
    pilot_fractions: tuple[float, ...] = (0.125,)
    pilot_seeds: tuple[int, ...] = (100,)
    recipes: bool = True
    note: str = ""

    @classmethod
    def from_profile(cls, profile: Profile, name: str = "chosen", **overrides) -> Candidate:
        stage_a = profile.curves.stage_budgets.get("A", 1.0)
        base = cls(name, tuple(profile.grid.targets), profile.seeds, eval_size(profile), stage_a,
                   tuple(profile.pilot_fractions), tuple(profile.pilot_seeds), True)  # fmt: skip
        return replace(base, **overrides)

    def profile(self, base: Profile) -> Profile:
        """``base`` with this candidate's targets, seeds, pilots and stage A budget (the ladder gains
        stage A's multiple where it lacks it); the second recipes kept at the nearest of its targets,
        or dropped. The evaluation's size is the cost model's and the noise model's, not the profile's."""
        grid = base.grid
        changes: dict = {"targets": tuple(self.targets)}
        kept = []
        for policy, reward, targets in grid.recipes if self.recipes else ():
            near = tuple(dict.fromkeys(min(self.targets, key=lambda t, x=x: abs(t - x)) for x in targets))
            kept.append((policy, reward, near))
        changes["recipes"] = tuple(kept)
        stages = dict(base.curves.stage_budgets)
        points = tuple(base.curves.points)
        if self.stage_a_multiple > 1:
            stages["A"] = float(self.stage_a_multiple)
            points = tuple(sorted({*points, 1.0, float(self.stage_a_multiple)}))
        else:
            stages.pop("A", None)
        curves = replace(base.curves, points=points, stage_budgets=stages)
        return replace(base, grid=replace(grid, **changes), seeds=self.seeds,
                       pilot_fractions=tuple(self.pilot_fractions), pilot_seeds=tuple(self.pilot_seeds),
                       curves=curves)  # fmt: skip

    def describe(self) -> dict:
        return {
            "targets": " ".join(f"{t:g}" for t in self.targets),
            "seeds": self.seeds,
            "eval_problems": self.eval_problems,
            "stage_a_multiple": self.stage_a_multiple,
            "pilot_fractions": " ".join(f"{f:g}" for f in self.pilot_fractions),
            "pilot_seeds": len(self.pilot_seeds),
            "second_recipes": self.recipes,
        }


def eval_size(profile: Profile) -> int:
    """Held-out and gsm problems per evaluation set of ``profile``'s runs."""
    return int(profile.eval.get("heldout_limit") or profile.eval.get("limit") or sim.EVAL_PROBLEMS)


def distinct_settings(profile: Profile) -> list:
    """The profile's settings less those that ask for an earlier one's runs (stage B's ``sparse`` is
    stage A's M; :func:`paper_repro.analysis.shared_settings`)."""
    from paper_repro.analysis import shared_settings

    shared = shared_settings(profile)
    return [s for s in profile.all_settings() if s.name not in shared]


def _job(spec, role: str, count: float = 1.0) -> Job:
    unit = spec.ladder_unit or spec.budget_flops
    below = [e for m, e in spec.ladder if m * unit < spec.budget_flops * (1 - 1e-9)]
    return Job(role, spec.policy, reward_class(spec.reward_system), spec.budget_flops,
               1 + below.count("all"), below.count("native"), count)  # fmt: skip


def jobs(candidate: Candidate, base: Profile) -> list[Job]:
    """Every run of ``candidate`` (see the module's docstring), through the run specs of its profile."""
    from paper_repro.spec import pilot_specs, setting_specs

    profile = candidate.profile(base)
    out = []
    for s in distinct_settings(profile):
        grid = setting_specs(profile, s, seeds=[0])
        out += [_job(spec, "grid", candidate.seeds) for spec in grid]
        out += [_job(spec, "pilot") for spec in pilot_specs(profile, s)]
        out += [_job(spec, "fresh") for spec in _fresh_specs(profile, s, grid)]
    return out


def _fresh_specs(profile: Profile, setting, grid: Sequence) -> list:
    """The fresh seeds' runs of ``setting`` (:func:`paper_repro.spec.race_check_specs`): TRL's default
    and two picks, taken as the first two cells of its ``grid`` (specs) whose allocation is not the
    default's (the pilots name the picks; any two distinct cells cost alike at one budget)."""
    from paper_repro.spec import default_cell_spec, race_check_specs

    default = default_cell_spec(profile, setting, profile.fresh_seeds[0])
    alloc = (default.P, default.G, default.K, default.mu)
    cells = [g.cell for g in grid if (g.P, g.G, g.K, g.mu) != alloc]
    picks = [*cells, None, None][:PICKS]
    return race_check_specs(profile, setting, *picks)


@dataclass(frozen=True)
class Cost:
    """A candidate's runs and wall minutes (:func:`cost`)."""

    runs: float
    job_seconds: float
    by_role: dict[str, float] = field(default_factory=dict)  # job-seconds by grid / pilot / fresh
    overhead: float = OVERHEAD_MINUTES

    @property
    def minutes(self) -> float:
        return self.job_seconds / JOBS / 60 + self.overhead


def cost(
    candidate: Candidate, model: CostModel, job_list: Sequence[Job], overhead: float = OVERHEAD_MINUTES
) -> Cost:
    """``job_list``'s (:func:`jobs`) runs and minutes at the candidate's evaluation size."""
    n = candidate.eval_problems
    by_role: dict[str, float] = {}
    for job in job_list:
        by_role[job.role] = by_role.get(job.role, 0.0) + job.count * model.seconds(job, n, n)
    return Cost(sum(j.count for j in job_list), sum(by_role.values()), by_role, overhead)


class Pricer:
    """Prices candidates of one profile, each candidate's runs enumerated once per (targets, stage A
    budget, pilots, recipes); the grid's share scales with the seeds."""

    def __init__(self, base: Profile, model: CostModel, overhead: float = OVERHEAD_MINUTES) -> None:
        self.base, self.model, self.overhead = base, model, overhead
        self._jobs: dict[tuple, list[Job]] = {}

    def jobs(self, c: Candidate) -> list[Job]:
        key = (c.targets, c.stage_a_multiple, c.pilot_fractions, c.pilot_seeds, c.recipes)
        if key not in self._jobs:
            self._jobs[key] = jobs(replace(c, seeds=1), self.base)
        return [replace(j, count=c.seeds) if j.role == "grid" else j for j in self._jobs[key]]

    def __call__(self, c: Candidate) -> Cost:
        return cost(c, self.model, self.jobs(c), self.overhead)

    def fill(self, c: Candidate, minutes: float, least: int = 2) -> Candidate:
        """``c`` with the most seeds per cell whose minutes are within ``minutes`` (at least ``least``)."""
        one, two = self(replace(c, seeds=1)).minutes, self(replace(c, seeds=2)).minutes
        per_seed = two - one
        seeds = int(np.floor((minutes - (one - per_seed)) / per_seed + 1e-9)) if per_seed > 0 else least
        return replace(c, seeds=max(seeds, least))


def spaced(targets: Sequence[float], k: int) -> tuple[float, ...]:
    """``k`` targets evenly spaced over the range of ``targets``, to 0.01."""
    lo, hi = min(targets), max(targets)
    return tuple(float(round(t, 2)) for t in np.linspace(lo, hi, k))


def candidates(profile: Profile, pricer: Pricer, minutes: float = MINUTES) -> list[Candidate]:
    """The candidates compared (the module's docstring): the profile's design first, then the
    alternatives at ``minutes`` (each with the most seeds the limit buys), without duplicates."""
    chosen = Candidate.from_profile(profile, "chosen", note="the profile as written")
    k = len(chosen.targets)
    fill = lambda c: pricer.fill(c, minutes)  # noqa: E731
    out = [chosen, replace(fill(chosen), name="profile's targets, seeds to the limit")]
    for n in (k - 2, k - 1, k + 1):
        if n >= 3:
            words = f"{n} cells evenly spaced" + (" (fewer)" if n < k else " (more)")
            out.append(replace(fill(replace(chosen, targets=spaced(chosen.targets, n))), name=words))
    size = MORE_PROBLEMS if chosen.eval_problems < MORE_PROBLEMS else sim.EVAL_PROBLEMS
    other = replace(chosen, eval_problems=size)
    out.append(replace(fill(other), name=f"profile's targets, {size} problems"))
    for n in (k - 2, k - 1):
        if n >= 3:
            words = f"{n} cells evenly spaced, {size} problems"
            out.append(replace(fill(replace(other, targets=spaced(chosen.targets, n))), name=words))
    for multiple in (1.0, 2.0, 4.0):
        if multiple != chosen.stage_a_multiple:
            other = replace(chosen, stage_a_multiple=multiple)
            out.append(replace(other, name=f"stage A to {multiple:g}C", note="the profile's seeds"))
            if multiple > 1:
                out.append(replace(fill(other), name=f"stage A to {multiple:g}C, seeds to the limit"))
    if profile.grid.recipes:
        out.append(
            replace(fill(replace(chosen, recipes=False)), name="no second recipes, seeds to the limit")
        )
    unique: dict[tuple, Candidate] = {}
    for c in out:
        key = (
            c.targets,
            c.seeds,
            c.eval_problems,
            c.stage_a_multiple,
            c.pilot_fractions,
            c.pilot_seeds,
            c.recipes,
        )
        unique.setdefault(key, c)
    return list(unique.values())


# ---------------------------------------------------------------------------------------- the comparison


def layout_of(candidate: Candidate, base: Profile, names: Sequence[str]) -> sim.Layout:
    """The simulated design of ``candidate``: per distinct setting in ``names`` the planner's cells at
    the full budget (second recipes included where the candidate runs them) at their predicted rho."""
    from paper_repro.allocation import plan_setting

    profile = candidate.profile(base)
    cells = {}
    for name in names:
        planned = plan_setting(profile, profile.setting(name))
        cells[name] = tuple(
            sorted(((c.label, float(c.predicted_rho)) for c in planned.cells), key=lambda x: x[1])
        )
    return sim.Layout(cells, candidate.seeds)


def choice_rows(table: pd.DataFrame, params: dict) -> pd.DataFrame:
    """Per claim of one design's per-truth table (:func:`paper_repro.analysis.design.summary`), with
    the candidate's parameters and cost ``params``."""
    rows = sim.summary(table).drop(columns=["design"])
    return pd.DataFrame([{**params, **r} for r in rows.to_dict("records")])


def recommend(
    choices: pd.DataFrame, minutes: float = MINUTES, wrong: float = WRONG_LIMIT
) -> pd.Series | None:
    """The rule: among the candidates (rows with ``candidate`` true) within ``minutes`` whose every
    claim's ``wrong_max`` is at most ``wrong``, the largest mean over claims of ``held_when_true``;
    ties to fewer minutes. One row per candidate (its name, minutes and score), or None."""
    rows = choices[choices["candidate"].astype(bool)] if "candidate" in choices else choices
    per = rows.groupby("name", sort=False).agg(
        minutes=("minutes", "first"),
        wrong_max=("wrong_max", lambda w: w.max() if w.notna().all() else np.nan),
        held_mean=("held_when_true", "mean"),
    )
    ok = per[(per["minutes"] <= minutes) & (per["wrong_max"] <= wrong)]
    if ok.empty:
        return None
    best = ok.assign(score=ok["held_mean"].fillna(0)).sort_values(
        ["score", "minutes"], ascending=[False, True]
    )
    return best.iloc[0].rename(best.index[0])


def misfits(
    choices: pd.DataFrame, name: str, minutes: float = MINUTES, wrong: float = WRONG_LIMIT
) -> list[str]:
    """Why candidate ``name`` does not meet the rule's bounds (none when it does)."""
    rows = choices[choices["name"] == name]
    out = []
    if rows["minutes"].iloc[0] > minutes:
        out.append(f"{rows['minutes'].iloc[0]:.1f} min > {minutes:g}")
    if "wrong_max" not in rows or rows["wrong_max"].isna().any():
        out.append("not simulated")
    else:
        out += [
            f"{r.claim}: wrong {r.wrong_max:.3f} ({r.wrong_truth})"
            for r in rows.itertuples()
            if r.wrong_max > wrong
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
    for name, words in (("seeds", "seeds per cell"), ("eval_problems", "held-out and gsm problems"),
                        ("stage_a_multiple", "stage A's budget (x C)"), ("pilot_fractions", "pilot fractions"),
                        ("pilot_seeds", "pilot seeds"), ("recipes", "second recipes")):  # fmt: skip
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


def compare(
    profile: Profile,
    runs_path: str | Path,
    replicates: int = sim.REPLICATES,
    candidate_replicates: int = CANDIDATE_REPLICATES,
    minutes: float = MINUTES,
    overhead: float = OVERHEAD_MINUTES,
    variance: sim.EvalVariance | None = None,
    variance_source: str = "none",
    candidate_list: Sequence[Candidate] | None = None,
    coverage_replicates: int = sim.COVERAGE_REPLICATES,
    curves_path: str | Path | None = None,
    variants: dict[str, tuple[int, float]] | None = None,
    progress: Callable[[str], None] | None = None,
    simulate: bool = True,
    overrides: tuple[float | None, float | None, float | None] | None = None,
) -> Comparison:
    """Today's design (the committed runs' layout and seeds, at ``replicates``) and the candidates
    (:func:`candidates`, or ``candidate_list``; the profile's design ``chosen`` at ``replicates``, the
    others at ``candidate_replicates`` without coverage) simulated with the committed runs' noise,
    priced by the cost model, and the rule's pick (:func:`recommend`). A candidate whose evaluation
    size needs the evaluation noise when there is none is priced, not simulated (its note says why).
    ``simulate`` False: priced only (the choices table without operating characteristics).
    ``overrides``: (recipe SD, seed SD, amplitude), each replacing the committed runs' where given (a
    sensitivity: what the candidates would show were the effects taller or the recipes quieter)."""
    from paper_repro.analysis import shared_settings
    from paper_repro.analysis.claims.study import Classes
    from paper_repro.analysis.frontiers import at_full_budget, load_curves, setting_rows

    rows = committed_rows(runs_path, profile)
    curves = _curves(curves_path)
    model = CostModel.from_runs(rows, curves)
    shared = shared_settings(profile)
    classes = Classes.of(profile, shared)
    names = [*classes.rule_based, *classes.prm_style]
    others = {*profile.pilot_seeds, *profile.fresh_seeds}
    if curves is not None:  # a run past C (stage A's) counts by its point at C, as the analysis reads it
        rows_at_c = at_full_budget(rows, load_curves(curves_path, rows), profile.budget_flops)
    else:
        rows_at_c = rows
    full = setting_rows(rows_at_c, profile.all_settings(), "full", profile.budget_flops)
    grid = full[~full["seed"].isin(others)]
    if grid.empty:
        raise ValueError(f"{runs_path}: no committed full-budget grid runs to take the noise model from")
    problems = int(grid["heldout"].median())  # what the committed runs were evaluated on
    noise_model = sim.noise_model(grid, names, *(overrides or (None, None, None)), problems=problems)
    today = sim.Layout.from_runs(grid, names, int(grid["seed"].nunique()))
    pricer = Pricer(profile, model, overhead)
    listed = list(candidate_list) if candidate_list is not None else candidates(profile, pricer, minutes)
    say = progress or (lambda _: None)
    measured = measured_minutes(rows, overhead)
    given = [f"{k} {v:g}" for k, v in zip(("recipe SD", "seed SD", "amplitude"), overrides or (), strict=False)
             if v is not None]  # fmt: skip
    notes = [
        f"noise model: recipe SD {noise_model.noise.recipe_sd:.4f}, median seed SD {noise_model.noise.default:.4f}, "
        f"truths' height {noise_model.amplitude:.4f}" + (f" ({', '.join(given)} given)" if given else ""),
        f"today's {len(rows)} committed runs: {measured - overhead:.1f} min of runs as measured (seconds_total / "
        f"{JOBS} / 60), {predicted_minutes(rows, model):.1f} as the cost model prices them, written over "
        f"{wall_span_minutes(rows):.1f} min of wall time",
    ]
    priced = []
    for c in listed:
        price, layout = pricer(c), layout_of(c, profile, names)
        params = {"name": c.name, "candidate": True, **c.describe(),
                  "cells": sum(len(v) for v in layout.cells.values()), "runs": price.runs,
                  "minutes": price.minutes, "overhead_minutes": overhead,
                  **{f"minutes_{k}": v / JOBS / 60 for k, v in price.by_role.items()}}  # fmt: skip
        say(f"priced {c.name}: {price.runs:.0f} runs, {price.minutes:.1f} min")
        priced.append((c, layout, params))

    today_params = {
        "name": "today (committed)", "candidate": False, "targets": "committed cells", "seeds": today.seeds,
        "eval_problems": problems, "stage_a_multiple": 1.0, "pilot_fractions": "",
        "pilot_seeds": np.nan, "second_recipes": False, "cells": sum(len(c) for c in today.cells.values()),
        "runs": len(rows), "minutes": measured, "overhead_minutes": overhead,
        "note": "minutes as measured: the committed runs' seconds_total / 2 / 60 + overhead",
    }  # fmt: skip
    if not simulate:
        frames = [pd.DataFrame([{**p, "replicates": 0} for p in [today_params, *(p for *_, p in priced)]])]
        choices = pd.concat(frames, ignore_index=True)
        return Comparison(pd.DataFrame(), choices, listed, model, None, notes)

    today_table = sim.design_table(today, noise_model, classes, profile.margins, variants, replicates,
                                   coverage_replicates, progress)  # fmt: skip
    design_frames = [today_table]
    frames = [
        choice_rows(
            today_table[today_table["design"] == "committed"], {**today_params, "replicates": replicates}
        )
    ]
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
            sims[key] = (sim.simulated(layout, noise, noise_model, classes, profile.margins, c.name, reps,
                                       cover, progress), reps)  # fmt: skip
        table, reps = sims[key]
        if c.name == "chosen":
            design_frames.append(table.assign(design="chosen"))
        source = f"evaluation noise: {variance_source}" if c.eval_problems != problems else ""
        note = "; ".join(x for x in (c.note, source) if x)
        frames.append(choice_rows(table, {**params, "replicates": reps, "note": note}))
    choices = pd.concat(frames, ignore_index=True)
    pick = recommend(choices, minutes)
    recommended = next((c for c in listed if pick is not None and c.name == pick.name), None)
    choices["recommended"] = choices["name"] == (recommended.name if recommended else None)
    return Comparison(pd.concat(design_frames, ignore_index=True), choices, listed, model, recommended, notes)


def _curves(path) -> pd.DataFrame | None:
    if path is None or not Path(path).exists():
        return None
    table = pd.read_csv(path, low_memory=False)
    return table if not table.empty else None
