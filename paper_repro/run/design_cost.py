"""The pre-run cost model of designs: what a candidate design of the study costs, before any run
(``paper-repro design --candidates``; the analysis simulates each candidate's operating
characteristics: :mod:`paper_repro.analysis.design.candidates`). Not the allocation planner
(:mod:`paper_repro.run.allocation`), which lays out the cells of one setting at one budget.

Each **candidate** (its grid targets, seeds per cell, evaluation size, stage A's budget, pilots,
second recipes) is priced in wall minutes on the cpu-tiny machine:

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
  candidate's values (:meth:`Candidate.profile`; :func:`paper_repro.run.spec.setting_specs`,
  :func:`~paper_repro.run.spec.pilot_specs`, :func:`~paper_repro.run.spec.default_cell_spec`), per distinct
  setting (stage B's ``sparse`` is stage A's M: counted once, :func:`shared_settings`): its grid at
  its budget multiple of C with its ladder points and second-recipe cells, the pilots at every pilot
  fraction on every pilot seed with theirs, and the fresh seeds' runs
  (:func:`~paper_repro.run.spec.race_check_specs`: TRL's default and two picks, RACE's and RACE+'s, taken
  as two grid cells other than the default's: every cell costs the same at one budget). A full
  evaluation decodes the held-out and gsm sets (the candidate's problems each) and math (300); a
  ``native`` ladder point the held-out set alone. The base policy's evaluation (once per setting,
  cached) and a ladder point the budget cannot reach (not evaluated) are left out;
- **minutes**: the runs' job-seconds / 2 (two jobs at a time on two cores) / 60, plus a fixed
  ``overhead`` (default 6 minutes for the notebooks and the analysis: a parameter, not measured);
- **the candidates** (:func:`candidates`): the profile's design (``chosen``); at the minutes limit,
  the profile's targets with the seeds the limit buys, fewer and more cells (evenly spaced over the
  profile's range) with the seeds the limit buys, the same at the other evaluation size (900 problems
  per held-out and gsm set where the profile has 300, 300 where it has 900), stage A at the other
  budgets (C, 2C, 4C: at the profile's seeds, and for 2C and 4C with the seeds the limit buys), the
  design without its second recipes, and (where the profile has more than one pilot fraction) the
  pilots at the largest fraction only (at the profile's seeds, with the seeds the limit buys, and
  with stage A at C).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro import rewards
from paper_repro.config import Profile

EVAL_PROBLEMS = 300  # problems per held-out and gsm set of an evaluation, where a profile names none
OVERHEAD_MINUTES = 6.0  # notebooks and the analysis, on top of the runs (a parameter, not measured)
MINUTES = 75.0  # the study's wall-time limit the rule picks under
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
    weights, training recipe, data and evaluation (:func:`paper_repro.run.study_design.design_key`), at any budget
    and seed; a (policy, reward) that has none keeps its newest generation's (the design key of its
    newest row). Adds ``policy``, ``reward_class``, ``problems`` (decoded by its full evaluation) and
    ``heldout`` (by a ``native`` one)."""
    from paper_repro.run.study_design import Design, design_key

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
    limit = int(spec.get("eval_limit") or EVAL_PROBLEMS)
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
            rates[(str(policy), str(kind))] = _rate(
                g, extra[(extra["policy"] == policy) & (extra["reward_class"] == kind)]
            )
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
        return pd.DataFrame(
            [
                {
                    "policy": p,
                    "reward_class": k,
                    "rows": r.rows,
                    "train_s_per_run": r.intercept,
                    "train_s_per_GFLOP": r.per_flop * 1e9,
                    "median_train_s_per_GFLOP": r.median_per_flop * 1e9,
                    "eval_ms_per_problem": r.per_problem * 1e3,
                    "setup_s_per_run": r.setup,
                }
                for (p, k), r in self.rates.items()
                if "*" not in (p, k)
            ]
        )


def _rate(rows: pd.DataFrame, ladder: pd.DataFrame) -> Rate:
    budget, train = rows["budget_flops"].to_numpy(float), rows["seconds_train"].to_numpy(float)
    ratio = float(np.median(train / rows["C_total"].to_numpy(float)))
    intercept, slope = 0.0, float(np.median(train / budget))
    if np.nanmax(budget) > 1.5 * np.nanmin(budget):  # two budgets or more: the per-run part is identified
        slope, intercept = (float(v) for v in np.polyfit(budget, train, 1))
        if intercept < 0 or slope <= 0:
            intercept, slope = 0.0, float(np.sum(train * budget) / np.sum(budget**2))
    evals = pd.concat(
        [
            pd.DataFrame({"seconds": rows["seconds_eval"], "problems": rows["problems"]}),
            ladder[["seconds", "problems"]],
        ]
    )
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
    return pd.DataFrame(
        {
            "policy": points["policy"],
            "reward_class": points["reward_class"],
            "seconds": pd.to_numeric(points["seconds_eval"], errors="coerce"),
            "problems": np.where(native, points["heldout"], points["problems"]),
        }
    )


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
    eval_problems: int = EVAL_PROBLEMS
    stage_a_multiple: float = 1.0
    pilot_fractions: tuple[float, ...] = (0.125,)
    pilot_seeds: tuple[int, ...] = (100,)
    recipes: bool = True
    second_at: tuple[float, ...] = ()  # grid targets every distinct setting also runs by a second recipe
    note: str = ""

    @classmethod
    def from_profile(cls, profile: Profile, name: str = "chosen", **overrides) -> Candidate:
        stage_a = profile.curves.stage_budgets.get("A", 1.0)
        base = cls(
            name,
            tuple(profile.grid.targets),
            profile.seeds,
            eval_problems=eval_size(profile),
            stage_a_multiple=stage_a,
            pilot_fractions=tuple(profile.pilot_fractions),
            pilot_seeds=tuple(profile.pilot_seeds),
        )
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
        if self.second_at:  # every distinct setting: a second recipe at each of these targets it can reach
            pairs = dict.fromkeys((s.policy, s.reward_system) for s in base.all_settings())
            at = tuple(t for t in self.targets if any(abs(t - x) < 1e-9 for x in self.second_at))
            kept = [(policy, reward, at) for policy, reward in pairs]
        changes["recipes"] = tuple(kept)
        stages = dict(base.curves.stage_budgets)
        points = tuple(base.curves.points)
        if self.stage_a_multiple > 1:
            stages["A"] = float(self.stage_a_multiple)
            points = tuple(sorted({*points, 1.0, float(self.stage_a_multiple)}))
        else:
            stages.pop("A", None)
        curves = replace(base.curves, points=points, stage_budgets=stages)
        return replace(
            base,
            grid=replace(grid, **changes),
            seeds=self.seeds,
            pilot_fractions=tuple(self.pilot_fractions),
            pilot_seeds=tuple(self.pilot_seeds),
            curves=curves,
        )

    def describe(self) -> dict:
        return {
            "targets": " ".join(f"{t:g}" for t in self.targets),
            "seeds": self.seeds,
            "eval_problems": self.eval_problems,
            "stage_a_multiple": self.stage_a_multiple,
            "pilot_fractions": " ".join(f"{f:g}" for f in self.pilot_fractions),
            "pilot_seeds": len(self.pilot_seeds),
            "second_recipes": (
                f"every setting at {' '.join(f'{t:g}' for t in self.second_at)}"
                if self.second_at
                else self.recipes
            ),
        }


def eval_size(profile: Profile) -> int:
    """Held-out and gsm problems per evaluation set of ``profile``'s runs."""
    return int(profile.eval.get("heldout_limit") or profile.eval.get("limit") or EVAL_PROBLEMS)


def shared_settings(profile: Profile) -> dict[str, str]:
    """Settings that ask for an earlier setting's experiment (the same policy and reward system):
    {later: earlier}, as :func:`paper_repro.analysis.tables.frontiers.shared_runs` finds them in a runs table."""
    seen: dict[tuple[str, str], str] = {}
    out = {}
    for s in profile.all_settings():
        key = (s.policy, s.reward_system)
        if key in seen:
            out[s.name] = seen[key]
        else:
            seen[key] = s.name
    return out


def distinct_settings(profile: Profile) -> list:
    """The profile's settings less those that ask for an earlier one's runs (stage B's ``sparse`` is
    stage A's M; :func:`shared_settings`)."""
    shared = shared_settings(profile)
    return [s for s in profile.all_settings() if s.name not in shared]


def _job(spec, role: str, count: float = 1.0) -> Job:
    unit = spec.ladder_unit or spec.budget_flops
    below = [e for m, e in spec.ladder if m * unit < spec.budget_flops * (1 - 1e-9)]
    return Job(
        role,
        spec.policy,
        reward_class(spec.reward_system),
        spec.budget_flops,
        full_evals=1 + below.count("all"),
        native_evals=below.count("native"),
        count=count,
    )


def jobs(candidate: Candidate, base: Profile) -> list[Job]:
    """Every run of ``candidate`` (see the module's docstring), through the run specs of its profile."""
    from paper_repro.run.spec import pilot_specs, setting_specs

    profile = candidate.profile(base)
    out = []
    for s in distinct_settings(profile):
        grid = setting_specs(profile, s, seeds=[0])
        out += [_job(spec, "grid", candidate.seeds) for spec in grid]
        out += [_job(spec, "pilot") for spec in pilot_specs(profile, s)]
        out += [_job(spec, "fresh") for spec in _fresh_specs(profile, s, grid)]
    return out


def _fresh_specs(profile: Profile, setting, grid: Sequence) -> list:
    """The fresh seeds' runs of ``setting`` (:func:`paper_repro.run.spec.race_check_specs`): TRL's default
    and two picks, taken as the first two cells of its ``grid`` (specs) whose allocation is not the
    default's (the pilots name the picks; any two distinct cells cost alike at one budget)."""
    from paper_repro.run.spec import default_cell_spec, race_check_specs

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
        key = (c.targets, c.stage_a_multiple, c.pilot_fractions, c.pilot_seeds, c.recipes, c.second_at)
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


def candidates(
    profile: Profile, pricer: Pricer, minutes: float = MINUTES, second_at: Sequence[float] = ()
) -> list[Candidate]:
    """The candidates compared (the module's docstring): the profile's design first, then the
    alternatives at ``minutes`` (each with the most seeds the limit buys), without duplicates.
    ``second_at``: grid targets (the claims' windows) at which further candidates give every
    distinct setting a second recipe, with the pilots at their largest fraction only and stage A at
    C or at the profile's multiple."""
    chosen = Candidate.from_profile(profile, "chosen", note="the profile as written")
    k = len(chosen.targets)
    fill = lambda c: pricer.fill(c, minutes)  # noqa: E731
    out = [chosen, replace(fill(chosen), name="profile's targets, seeds to the limit")]
    for n in (k - 2, k - 1, k + 1):
        if n >= 3:
            words = f"{n} cells evenly spaced" + (" (fewer)" if n < k else " (more)")
            out.append(replace(fill(replace(chosen, targets=spaced(chosen.targets, n))), name=words))
    size = MORE_PROBLEMS if chosen.eval_problems < MORE_PROBLEMS else EVAL_PROBLEMS
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
    if len(chosen.pilot_fractions) > 1:  # RACE as the paper runs it: pilots at one budget
        one = replace(chosen, pilot_fractions=(max(chosen.pilot_fractions),))
        out.append(replace(one, name="pilots at the largest fraction only", note="the profile's seeds"))
        out.append(replace(fill(one), name="pilots at the largest fraction only, seeds to the limit"))
        out.append(
            replace(
                one,
                stage_a_multiple=1.0,
                name="pilots at the largest fraction only, stage A to 1C",
                note="the profile's seeds",
            )
        )
    at = tuple(t for t in chosen.targets if any(abs(t - x) < 1e-9 for x in second_at))
    if at:
        both = replace(chosen, second_at=at)
        top = (max(chosen.pilot_fractions),) if chosen.pilot_fractions else ()
        for name, other in (
            ("second recipes in both windows, seeds to the limit", both),
            (
                "second recipes in both windows, pilots at the largest fraction only, seeds to the limit",
                replace(both, pilot_fractions=top),
            ),
            (
                "second recipes in both windows, pilots at the largest fraction only, stage A to 1C, seeds to the limit",
                replace(both, pilot_fractions=top, stage_a_multiple=1.0),
            ),
            (
                f"second recipes in both windows, pilots at the largest fraction only, stage A to 1C, {size} problems, "
                "seeds to the limit",
                replace(both, pilot_fractions=top, stage_a_multiple=1.0, eval_problems=size),
            ),
        ):
            out.append(replace(fill(other), name=name))
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
            c.second_at,
        )
        unique.setdefault(key, c)
    return list(unique.values())
