"""The cost model's measured seconds (:class:`CostModel`), from the committed runs: a run's training,
evaluation and setup seconds per setting, and the job-seconds two runs at a time make per wall second.
What it prices and how: :mod:`paper_repro.run.design_cost`, the candidate designs' cost."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro import rewards
from paper_repro.config import Profile

EVAL_PROBLEMS = 300  # problems per held-out and gsm set of an evaluation, where a profile names none
# notebooks and the analysis on top of the runs: the registered study's wall time (44 min 34 s,
# docs/MEASUREMENTS.md) less the span its runs were written over (42.0 min)
OVERHEAD_MINUTES = 2.5
JOBS = 2  # runs at a time on the cpu-tiny machine's two cores
MATH_PROBLEMS = 300  # the math set's problems (math_tiny holds 300: an evaluation decodes no more)


def reward_class(reward_system: str) -> str:
    """``prm`` for a reward that pays the PRM's forward, else ``rule``."""
    return "prm" if rewards.is_prm_based(reward_system) else "rule"


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
    reward_system: str = ""  # the setting's reward (its own measured rate), "" for the class's


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
        reward_system=spec.reward_system,
    )


# ---------------------------------------------------------------------------------------- the cost model


def committed_rows(path: str | Path, profile: Profile) -> pd.DataFrame:
    """The ``ok`` rows of ``runs.csv`` of the design's current generation: computed with ``profile``'s
    weights, training recipe, data and evaluation (:func:`paper_repro.run.study_design.design_key`), at any budget
    and seed; a (policy, reward) that has none keeps its newest generation's (the design key of its
    newest row). Adds ``policy``, ``reward_class``, ``role`` (grid, pilot, fresh), ``problems``
    (decoded by its full evaluation) and ``heldout`` (by a ``native`` one)."""
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
    fresh = {int(x) for x in profile.fresh_seeds}
    out["role"] = [
        "pilot" if kind == "pilot" else ("fresh" if int(seed) in fresh else "grid")
        for kind, seed in zip(out["budget_kind"], pd.to_numeric(out["seed"]), strict=True)
    ]
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

    def scaled(self, measured: Rate, base: Rate) -> Rate:
        """This rate with each part times ``measured``'s over ``base``'s (a reward's cost relative to the
        rule-based ones, carried to another policy); no rows of its own."""

        def ratio(a: float, b: float) -> float:
            return a / b if b > 0 and np.isfinite(a / b) else 1.0

        return Rate(
            self.intercept * ratio(measured.intercept, base.intercept),
            self.per_flop * ratio(measured.per_flop, base.per_flop),
            self.per_problem * ratio(measured.per_problem, base.per_problem),
            self.setup * ratio(measured.setup, base.setup),
            self.median_per_flop * ratio(measured.median_per_flop, base.median_per_flop),
            0,
        )


@dataclass(frozen=True)
class CostModel:
    """Seconds per run by setting (policy, reward system), else by (policy, reward class), measured
    (:meth:`from_runs`); ``parallel``: the runs' job-seconds per wall second (two jobs at a time on two
    cores, less the waits between them: measured over the committed runs' span where they have
    times, else :data:`JOBS`)."""

    rates: dict[tuple[str, str], Rate]
    source: str = "the committed runs"
    parallel: float = JOBS
    settings: dict[tuple[str, str], Rate] = field(default_factory=dict)  # (policy, reward system) -> its own

    @classmethod
    def from_runs(cls, rows: pd.DataFrame, curves: pd.DataFrame | None = None, source: str = "") -> CostModel:
        """The rates of ``rows`` (:func:`committed_rows`: ``policy``, ``reward_class``, ``budget_flops``,
        ``C_total``, ``seconds_train``, ``seconds_eval``, ``seconds_total``, ``problems``), pooled
        over the policy's classes where a class has none. ``curves``: ``curves.csv`` rows (with
        ``run_id``, ``final``, ``evaluation``, ``seconds_eval``), whose ladder points add evaluations."""
        if rows.empty:
            raise ValueError("no committed ok runs to measure the cost model from")
        extra = _ladder_evaluations(rows, curves)
        # a run's ladder evaluations are inside its seconds_total: its setup is what is left beside them
        ladder = extra.groupby("run_id")["seconds"].sum() if len(extra) else pd.Series(dtype=float)
        rows = rows.assign(seconds_ladder=rows["run_id"].map(ladder).fillna(0.0) if "run_id" in rows else 0.0)
        rates, settings = {}, {}
        if (
            "reward_system" in rows
        ):  # per setting: each reward system's own cost (a PRM's forward, its lengths)
            for (policy, system), g in rows.groupby(["policy", "reward_system"]):
                settings[(str(policy), str(system))] = _rate(
                    g, extra[(extra["policy"] == policy) & (extra["reward_system"] == system)]
                )
        for (policy, kind), g in rows.groupby(["policy", "reward_class"]):
            rates[(str(policy), str(kind))] = _rate(
                g, extra[(extra["policy"] == policy) & (extra["reward_class"] == kind)]
            )
        for policy in rows["policy"].unique():
            rates[(str(policy), "*")] = _rate(
                rows[rows["policy"] == policy], extra[extra["policy"] == policy]
            )
        rates[("*", "*")] = _rate(rows, extra)
        return cls(rates, source or "the committed runs", _parallel(rows), settings)

    def rate(self, policy: str, kind: str) -> Rate:
        for key in ((policy, kind), (policy, "*"), ("*", "*")):
            if key in self.rates:
                return self.rates[key]
        raise KeyError(policy)

    def rate_for(self, policy: str, system: str, kind: str) -> Rate:
        """The rate of a run of ``policy`` under reward ``system`` (of class ``kind``): the setting's
        own where measured; else, for a reward measured on another policy, the policy's rate for the
        rule-based rewards times the reward's ratio to them on that policy (each part: a PRM's forward
        costs alike in proportion on every policy); else :meth:`rate`."""
        if (policy, system) in self.settings:
            return self.settings[(policy, system)]
        base = self.rates.get((policy, "rule"))
        other = next((p for (p, s) in self.settings if s == system), None)
        if base is not None and other is not None and (other, "rule") in self.rates:
            return base.scaled(self.settings[(other, system)], self.rates[(other, "rule")])
        return self.rate(policy, kind)

    def seconds(self, job: Job, heldout: int, gsm: int, math: int = MATH_PROBLEMS) -> float:
        """A job's seconds, its full evaluations decoding ``heldout + gsm + math`` problems and its
        ``native`` ones ``heldout``."""
        rate = self.rate_for(job.policy, job.reward_system, job.reward_class)
        decoded = job.full_evals * (heldout + gsm + math) + job.native_evals * heldout
        return rate.train(job.budget_flops) + rate.per_problem * decoded + rate.setup

    def table(self) -> pd.DataFrame:
        """The rates, one row per measured setting (policy, reward system: its ``reward_class`` column)."""
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
                for (p, k), r in self.settings.items()
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
    ladder_seconds = rows.get("seconds_ladder", 0.0)
    setup = rows["seconds_total"] - rows["seconds_train"] - rows["seconds_eval"] - ladder_seconds
    return Rate(intercept, slope, per_problem, float(max(np.nanmedian(setup), 0.0)), ratio, len(rows))


def _ladder_evaluations(rows: pd.DataFrame, curves: pd.DataFrame | None) -> pd.DataFrame:
    """The ladder points' evaluations (not a run's last, which its row holds): policy, reward class,
    seconds, problems decoded."""
    columns = ["run_id", "policy", "reward_system", "reward_class", "seconds", "problems"]
    if curves is None or curves.empty or "run_id" not in rows:
        return pd.DataFrame(columns=columns)
    points = curves[(curves["status"] == "ok") & (curves["final"].astype(str) != "True")]
    keep = ["run_id", "policy", "reward_system", "reward_class", "problems", "heldout"]
    points = points.drop(columns=[c for c in keep[1:] if c in points]).merge(rows[keep], on="run_id")
    native = points["evaluation"] == "native"
    return pd.DataFrame(
        {
            "run_id": points["run_id"],
            "policy": points["policy"],
            "reward_system": points["reward_system"],
            "reward_class": points["reward_class"],
            "seconds": pd.to_numeric(points["seconds_eval"], errors="coerce"),
            "problems": np.where(native, points["heldout"], points["problems"]),
        }
    )


def _parallel(rows: pd.DataFrame) -> float:
    """The job-seconds ``rows`` ran per second of the wall time they were written over
    (:func:`wall_span_minutes`), at most :data:`JOBS`; :data:`JOBS` where the rows carry no times."""
    if "created_at" not in rows or rows["created_at"].isna().all():
        return float(JOBS)
    span = wall_span_minutes(rows) * 60
    return float(min(rows["seconds_total"].sum() / span, JOBS)) if span > 0 else float(JOBS)


def measured_minutes(rows: pd.DataFrame, overhead: float = OVERHEAD_MINUTES, parallel: float = JOBS) -> float:
    """What ``rows`` (the committed runs) took: their ``seconds_total`` / ``parallel`` (job-seconds per
    wall second: :attr:`CostModel.parallel`) / 60 + ``overhead``."""
    return float(rows["seconds_total"].sum()) / parallel / 60 + overhead


def row_jobs(rows: pd.DataFrame, curves: pd.DataFrame | None = None) -> list[Job]:
    """The committed runs of ``rows`` (:func:`committed_rows`) as the :class:`Job` the pricer counts
    for each: its role, its budget, and its evaluations (its ladder's points from ``curves``: a run's
    spec leaves its ladder out where it is the default)."""
    points = pd.DataFrame(columns=["run_id", "evaluation"])
    if curves is not None and not curves.empty:
        points = curves[(curves["status"] == "ok") & (curves["final"].astype(str) != "True")]
    native_points = points["evaluation"] == "native"
    natives = points[native_points].groupby("run_id").size()
    fulls = points[~native_points].groupby("run_id").size()
    out = []
    for row in rows.itertuples():
        native = int(natives.get(row.run_id, 0))
        full = 1 + int(fulls.get(row.run_id, 0))
        out.append(
            Job(
                row.role,
                row.policy,
                row.reward_class,
                float(row.budget_flops),
                full,
                native,
                1.0,
                row.reward_system,
            )
        )
    return out


def predicted_seconds(rows: pd.DataFrame, model: CostModel, curves: pd.DataFrame | None = None) -> pd.Series:
    """The cost model's seconds of each committed run of ``rows`` (:func:`committed_rows`), as it was
    run: its training at its budget, its evaluations (its ladder's, from ``curves``) at its sizes, its
    setup."""
    out = []
    for row, job in zip(rows.itertuples(), row_jobs(rows, curves), strict=True):
        heldout, rest = _limits(_json(row.spec))
        out.append(model.seconds(job, heldout, rest, 0))
    return pd.Series(out, index=rows.index, dtype=float)


def predicted_minutes(rows: pd.DataFrame, model: CostModel, curves: pd.DataFrame | None = None) -> float:
    """The cost model's wall minutes of runs (no overhead) for the committed ``rows``, as they were run."""
    return float(predicted_seconds(rows, model, curves).sum()) / model.parallel / 60


def wall_span_minutes(rows: pd.DataFrame) -> float:
    """The wall time the committed rows were written over (the first run's start, taken as its end less
    its seconds, to the last run's end): a check on the model's two jobs at a time."""
    end = pd.to_datetime(rows["created_at"], utc=True)
    start = end - pd.to_timedelta(rows["seconds_total"], unit="s")
    return float((end.max() - start.min()).total_seconds()) / 60
