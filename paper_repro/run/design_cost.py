"""The pre-run cost model of designs: what a candidate design of the study costs, before any run
(``paper-repro design --candidates``; the analysis simulates each candidate's operating
characteristics: :mod:`paper_repro.analysis.design.candidates`). Not the allocation planner
(:mod:`paper_repro.run.allocation`), which lays out the cells of one setting at one budget.

Each **candidate** (its grid targets, seeds per cell, evaluation size, stage A's budget, pilots,
second recipes) is priced in wall minutes on the cpu-tiny machine:

- **the cost model** (:class:`~paper_repro.run.cost_model.CostModel`, :mod:`paper_repro.run.cost_model`),
  measured from the committed runs (the ``ok`` rows of the design's current generation in
  ``runs.csv``; :func:`~paper_repro.run.cost_model.committed_rows`), per setting (policy, reward
  system; a reward never run on a policy at the policy's rule-based rate times the reward's ratio to
  the rule-based ones where it ran): a run's training seconds ``a + b x its budget`` (least squares
  over the full-budget runs and the pilots: each run pays about half a second whatever its budget),
  its evaluation seconds per problem decoded (its final evaluation and its ladder points' in
  ``curves.csv``), and its setup (``seconds_total`` less training and every evaluation);
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
- **minutes**: the runs' job-seconds / the job-seconds per wall second the committed runs made (two
  jobs at a time on two cores, less the waits: 1.85 on the registered study) / 60, plus a fixed
  ``overhead`` (default 2.5 minutes for the notebooks and the analysis, measured on the registered study);
- **the candidates** (:func:`candidates`): the profile's design (``chosen``); at the minutes limit,
  the profile's targets with the seeds the limit buys, fewer and more cells (evenly spaced over the
  profile's range) with the seeds the limit buys, the same at the other evaluation size (900 problems
  per held-out and gsm set where the profile has 300, 300 where it has 900), stage A at the other
  budgets (C, 2C, 4C: at the profile's seeds, and for 2C and 4C with the seeds the limit buys), the
  design without its second recipes, and (where the profile has more than one pilot fraction) the
  pilots at the largest fraction only (at the profile's seeds, with the seeds the limit buys, and
  with stage A at C); the PRM-arm candidates (:func:`prm_arm_candidates`): PRM-style rewards on
  every policy and more recipes in the claims' windows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from paper_repro.config import Profile, Setting
from paper_repro.run.cost_model import EVAL_PROBLEMS, JOBS, OVERHEAD_MINUTES, CostModel, Job, _job

MINUTES = 75.0  # the study's wall-time limit the rule picks under
CANDIDATE_REPLICATES = 60  # study pairs per truth for a candidate (a 5% rate to about +-2 points)
MORE_PROBLEMS = 900  # the other evaluation size the candidates try (300 where the profile's is 900)
PICKS = 2  # RACE's and RACE+'s picks, run on every fresh seed beside TRL's default


# ---------------------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class Candidate:
    """A design the simulator compares: its grid targets, seeds per grid cell, problems per held-out
    and gsm set (math stays at 300), stage A's budget as a multiple of C, the pilots' fractions and
    seeds, whether the profile's second recipes (``grid.recipes``) are run, and the settings it runs
    beside the profile's (``more_settings``: (policy, reward system) pairs, each a distinct setting
    named ``reward@policy``, its cells the planner's at its own rho cap, run as a grid alone, with no
    RACE pilots or fresh seeds: :func:`more_settings`)."""

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
    # (policy, reward system) run beside the profile's; a third entry, a PRM aggregation the reward
    # supports other than its default (``mean``), makes it a setting of its own (priced and planned as
    # the reward: the aggregation charges nothing)
    more_settings: tuple[tuple[str, ...], ...] = ()

    @property
    def runs_key(self) -> tuple:
        """What sets which runs the candidate enumerates, its seeds and evaluation size apart (the
        pricer enumerates once per key and scales the grid by the seeds; two candidates that also
        share their seeds and evaluation size are one design)."""
        return (
            self.targets,
            self.stage_a_multiple,
            self.pilot_fractions,
            self.pilot_seeds,
            self.recipes,
            self.second_at,
            self.more_settings,
        )

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
        # a setting of more_settings runs the second recipes its reward system runs on the profile's policy
        kept += [
            (policy, reward, next(t for p, r, t in kept if r == reward))
            for policy, reward, *_ in self.more_settings
            if any(r == reward for _, r, _ in kept)
        ]
        if self.second_at:  # every distinct setting: a second recipe at each of these targets it can reach
            pairs = dict.fromkeys(
                [
                    *((s.policy, s.reward_system) for s in base.all_settings()),
                    *(m[:2] for m in self.more_settings),
                ]
            )
            at = tuple(t for t in self.targets if any(abs(t - x) < 1e-9 for x in self.second_at))
            kept = [(policy, reward, at) for policy, reward in pairs]
        changes["recipes"] = tuple(dict.fromkeys(kept))  # a variant of a setting runs its recipes once
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
            "more_settings": " ".join(s.name for s in more_settings(self)),
        }


def more_settings(candidate: Candidate) -> list[Setting]:
    """The settings ``candidate`` runs beside its profile's (``reward@policy``; stage B's, so at C like
    the reward systems' settings), each planned like any other (:func:`paper_repro.run.allocation.plan_setting`:
    a PRM-charged one's cells stop at its policy's rho cap); one with an aggregation is
    ``reward-aggregation@policy``."""
    return [
        Setting("B", f"{'-'.join((reward, *how))}@{policy}", policy, reward)
        for policy, reward, *how in candidate.more_settings
    ]


def distinct_cells(cells: Sequence) -> list:
    """``cells`` (the planner's, or run specs) less any whose (P, G, K, mu) an earlier one has: two
    targets a tolerance apart can plan one shape, which is one experiment (a spec's seed and budget
    apart)."""
    seen, out = set(), []
    for c in cells:
        key = (c.P, c.G, c.K, c.mu, getattr(c, "seed", None), c.budget_flops)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


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


def jobs(candidate: Candidate, base: Profile) -> list[Job]:
    """Every run of ``candidate`` (see the module's docstring), through the run specs of its profile."""
    from paper_repro.run.spec import pilot_specs, setting_specs

    profile = candidate.profile(base)
    out = []
    for s in distinct_settings(profile):
        grid = distinct_cells(setting_specs(profile, s, seeds=[0]))
        out += [_job(spec, "grid", candidate.seeds) for spec in grid]
        out += [_job(spec, "pilot") for spec in distinct_cells(pilot_specs(profile, s))]
        out += [_job(spec, "fresh") for spec in _fresh_specs(profile, s, grid)]
    for s in more_settings(
        candidate
    ):  # the frontier claims' settings: their grid, no RACE pilots or fresh seeds
        out += [
            _job(spec, "grid", candidate.seeds)
            for spec in distinct_cells(setting_specs(profile, s, seeds=[0]))
        ]
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
    parallel: float = JOBS  # job-seconds per wall second (CostModel.parallel)

    @property
    def minutes(self) -> float:
        return self.job_seconds / self.parallel / 60 + self.overhead

    def role_minutes(self) -> dict[str, float]:
        """Wall minutes by role (grid, pilot, fresh), the overhead apart."""
        return {k: v / self.parallel / 60 for k, v in self.by_role.items()}


def cost(
    candidate: Candidate, model: CostModel, job_list: Sequence[Job], overhead: float = OVERHEAD_MINUTES
) -> Cost:
    """``job_list``'s (:func:`jobs`) runs and minutes at the candidate's evaluation size."""
    n = candidate.eval_problems
    by_role: dict[str, float] = {}
    for job in job_list:
        by_role[job.role] = by_role.get(job.role, 0.0) + job.count * model.seconds(job, n, n)
    return Cost(sum(j.count for j in job_list), sum(by_role.values()), by_role, overhead, model.parallel)


class Pricer:
    """Prices candidates of one profile, each candidate's runs enumerated once per (targets, stage A
    budget, pilots, recipes); the grid's share scales with the seeds."""

    def __init__(self, base: Profile, model: CostModel, overhead: float = OVERHEAD_MINUTES) -> None:
        self.base, self.model, self.overhead = base, model, overhead
        self._jobs: dict[tuple, list[Job]] = {}

    def jobs(self, c: Candidate) -> list[Job]:
        key = c.runs_key
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
        unique.setdefault((*c.runs_key, c.seeds, c.eval_problems), c)
    return list(unique.values())


# the PRM-style settings across policy sizes a PRM-arm candidate adds beside the profile's (on the
# profile's other policies: the committed ones are on the middle policy)
PRM_REWARDS = ("proxy_prm", "prm")
# grid targets with more recipes inside the claims' windows (0.445 +- 0.10, 0.72 +- 0.10): four first
# recipes in each, every one also by a second where the planner realises one
WINDOW_TARGETS = (0.15, 0.35, 0.40, 0.45, 0.50, 0.62, 0.66, 0.72, 0.78, 0.90)


def prm_arm_candidates(
    profile: Profile, pricer: Pricer, minutes: float = MINUTES, window: Sequence[float] = ()
) -> list[Candidate]:
    """The candidates that could decide the PRM-style arm (``paper-repro design --candidates --family
    prm-arm``), each with the seeds ``minutes`` buys: the profile's design; its PRM-style rewards
    (:data:`PRM_REWARDS`) also on every other policy of the profile, their cells the planner's up to
    each policy's rho cap; more recipes in the windows (:data:`WINDOW_TARGETS`, second recipes at
    every window target: ``window`` says which targets are in the windows); and both."""
    chosen = Candidate.from_profile(profile, "chosen", note="the profile as written")
    systems = {s.reward_system for s in profile.all_settings()}
    rewards_run = [r for r in PRM_REWARDS if r in systems]
    have = {(s.policy, s.reward_system) for s in profile.all_settings()}
    more = tuple(
        (policy, reward)
        for reward in rewards_run
        for policy in profile.policies
        if (policy, reward) not in have
    )
    at = tuple(t for t in WINDOW_TARGETS if any(abs(t - x) < 1e-9 for x in window))
    wide = replace(chosen, targets=WINDOW_TARGETS, second_at=at)
    sizes = "PRM-style rewards on every policy"
    out = [
        chosen,
        replace(pricer.fill(chosen, minutes), name="profile's targets, seeds to the limit"),
        replace(
            pricer.fill(replace(chosen, more_settings=more), minutes), name=f"{sizes}, seeds to the limit"
        ),
        replace(pricer.fill(wide, minutes), name="more window recipes, seeds to the limit"),
        replace(
            pricer.fill(replace(wide, more_settings=more), minutes),
            name=f"{sizes}, more window recipes, seeds to the limit",
        ),
    ]
    return out
