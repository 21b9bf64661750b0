"""Synthetic worlds for the tests: runs and curves tables whose truths are known by construction.

- :func:`design_rows` and :func:`write_runs`: a runs table of a profile's design (every planned
  cell, the pilots, the fresh seeds, TRL's default), each target a known frontier in rho (flat, or a
  parabola peaking at a chosen rho) plus seed noise; the analysis' end-to-end world.
- :func:`parabola_rows` and :func:`frontier_runs`: cells x seeds rows, each target a parabola in rho
  plus seed noise, with no profile and no specs; the estimator's, the figures' and the story's world.
- :func:`curve_rows` and its truths (:func:`moving_peak`, :func:`growing`, ...): ``curves.csv`` rows
  whose saturating curves, best cell by budget and best size by budget are known.

An expensive world that several tests only read is built once with :func:`tests.fixtures.shared`.
"""

from __future__ import annotations

import csv
import json
import math
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro import rewards
from paper_repro.analysis.stats.saturating import saturating
from paper_repro.common.results import CURVE_COLUMNS, METRICS, RUN_COLUMNS, curve_id
from paper_repro.config import Profile, load_profile
from paper_repro.run.allocation import plan_setting
from paper_repro.run.spec import default_cell_spec, spec_for

PROFILE = load_profile("cpu-tiny")
START = datetime(2026, 12, 1)  # when a synthetic study's first run finished


# ------------------------------------------------------------------------------- a profile's design


def paper_peaks(setting) -> float:
    """The paper's optima: rho* 0.445 under PRM-style rewards, 0.72 under rule-based ones."""
    return 0.445 if rewards.is_prm_based(setting.reward_system) else 0.72


def design_rows(
    peak, noise=0.01, seeds=3, pilot_seeds=1, fresh_seeds=2, judge_peak=None, rng_seed=0, curvature=1.0,
    profile: Profile = PROFILE, default_cells: bool = True, offsets: dict[str, float] | None = None,
) -> list[dict]:  # fmt: skip
    """The rows of a runs table of ``profile``'s design: ``peak(setting)`` is the rho* of every target
    (None: flat), ``judge_peak(setting)`` the judge's when it differs. The full grid on seeds
    0..seeds-1 and on the first ``fresh_seeds`` fresh seeds (where RACE's pick runs), the pilots at
    every pilot fraction on the first ``pilot_seeds`` pilot seeds, and (``default_cells``) TRL's
    default cell (K = G = 8, mu = 1, P = 8) on the fresh seeds: the grid's own cell for rule-based
    rewards, a run of its own for PRM-style ones. ``offsets``: cell label -> a shift of every target's
    mean in every setting (a recipe effect: e.g. a second recipe unlike its first)."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    fresh = list(profile.fresh_seeds[:fresh_seeds])
    budgets = [("full", profile.budget_flops, [*range(seeds), *fresh])]
    budgets += [("pilot", b, profile.pilot_seeds[:pilot_seeds]) for b in profile.pilot_budgets().values()]
    for kind, budget, seed_list in budgets:
        for s in profile.all_settings():
            prm_based = rewards.is_prm_based(s.reward_system)
            planned = plan_setting(profile, s, budget).cells
            cells = [(c.label, c.target_rho, c.P, c.G, c.K, c.mu, c) for c in planned]
            if kind == "full" and prm_based and default_cells:
                cells.append(("default", None, 8, 8, 8, 1, None))
            for label, target_rho, P, G, K, mu, cell in cells:
                for seed in seed_list:
                    if label == "default" and seed not in fresh:
                        continue
                    run = (
                        spec_for(profile, s, cell, seed, kind)
                        if cell
                        else default_cell_spec(profile, s, seed)
                    )
                    rho = (target_rho if target_rho is not None else 0.4) + rng.normal(0, 0.003)
                    p = peak(s)
                    jp = judge_peak(s) if judge_peak else p
                    mean = {t: 0.5 - (curvature * (rho - p) ** 2 if p is not None else 0) for t in METRICS}
                    if jp is not None:
                        mean["judge_score"] = 0.5 - curvature * (rho - jp) ** 2
                    shift = (offsets or {}).get(label, 0.0)
                    mean = {t: v + shift for t, v in mean.items()}
                    n = len(rows) + 1
                    rows.append({
                        "run_id": f"run{n:05d}", "profile": profile.name, "stage": s.stage, "setting": s.name,
                        "cell": label, "seed": seed, "budget_kind": kind, "budget_flops": budget,
                        "target_rho": target_rho, "rho": rho, "rho_executed": rho, "rho_time": rho / 2,
                        "C_total": budget * 0.99, "C_learning": budget * rho, "C_search": budget * 0.1,
                        "C_reward": budget * (0.6 - 0.5 * rho if prm_based else 0.0),
                        "P": P, "G": G, "K": K, "mu": mu, "rounds": {"S": 40, "M": 20, "L": 10}[s.policy] * (1.5 - rho),
                        "steps": 10, "model": s.policy, "reward_system": s.reward_system,
                        **{t: mean[t] + rng.normal(0, noise) for t in METRICS},
                        **{f"base_{t}": 0.3 for t in METRICS}, "status": "ok", "git_sha": "abc", "versions": "{}",
                        "created_at": (START + timedelta(seconds=n)).isoformat(),
                        "spec": json.dumps(run.canonical(), sort_keys=True, default=str),
                    })  # fmt: skip
    return rows


def write_rows(path, rows: list[dict], columns=RUN_COLUMNS) -> Path:
    """``rows`` as a table of ``columns``, written at once in the result store's own format (what
    ``ResultTable.append`` writes row by row, re-reading and syncing the file each time)."""

    def cell(value) -> str:
        if value is None:
            return ""
        if isinstance(value, float) and math.isnan(value):
            return "nan"
        return str(value)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([cell(row.get(c)) for c in columns] for row in rows)
    return path


def write_runs(path, peak, **kwargs) -> Path:
    """:func:`design_rows` (cpu-tiny's design unless ``profile=`` says otherwise) written to ``path``."""
    return write_rows(path, design_rows(peak, **kwargs))


def as_recorded(path) -> Path:
    """The runs table at ``path`` without stage B's sparse rows: B/sparse is A/M's runs, recorded
    once, as the study records them."""
    frame = pd.read_csv(path)
    frame[frame["setting"] != "sparse"].to_csv(path, index=False)
    return path


# ------------------------------------------------------------------------------- frontiers alone

FIGURE_CELLS = {"r15": 0.15, "r30": 0.30, "r50": 0.50, "r70": 0.70, "r85": 0.85}
FIGURE_SETTINGS = {"S": "A", "M": "A", "L": "A", "sparse": "B", "dense": "B"}


def parabola_rows(
    cells: dict[str, float], peak, seeds: int, sd: float, rng: np.random.Generator, targets=("y",),
    curvature: float = 1.0, top: float = 0.5,
) -> list[dict]:  # fmt: skip
    """Cell x seed rows (``cell``, ``rho``, ``seed`` and each target): each target is
    ``top - curvature * (rho - peak)^2`` (``top`` when ``peak`` is None) plus normal noise of SD
    ``sd``, drawn cell by cell, seed by seed, target by target."""
    rows = []
    for cell, rho in cells.items():
        for seed in range(seeds):
            mean = top - (curvature * (rho - peak) ** 2 if peak is not None else 0)
            rows.append(
                {"cell": cell, "rho": rho, "seed": seed, **{t: mean + rng.normal(0, sd) for t in targets}}
            )
    return rows


def frontier_runs(peak: float = 0.5, seeds: int = 3, sd: float = 0.02, rng_seed: int = 0) -> pd.DataFrame:
    """Run rows of every setting of :data:`FIGURE_SETTINGS` over :data:`FIGURE_CELLS`: each target a
    parabola in rho peaking at ``peak`` plus seed noise; stage B's sparse reuses stage A's M runs."""
    rng = np.random.default_rng(rng_seed)
    out = []
    for setting, stage in FIGURE_SETTINGS.items():
        if setting == "sparse":
            continue
        for row in parabola_rows(FIGURE_CELLS, peak, seeds, sd, rng, METRICS, top=0.6):
            rho, cell, seed = row["rho"], row["cell"], row["seed"]
            out.append({
                "stage": stage, "setting": setting, "cell": cell, "model": setting, "reward_system": "sparse",
                "P": 8, "G": 8, "K": 8, "mu": 1, "target_rho": rho, "rho": rho + 0.01, "rho_time": rho * 0.8,
                "C_reward": 1.0, "C_total": 10.0, "rounds": 4, "seconds_train": 1.0, "seed": seed,
                "run_id": f"{setting}-{cell}-{seed}",
                **{k: v for t in METRICS for k, v in ((t, row[t]), (f"base_{t}", 0.3))},
            })  # fmt: skip
    rows = pd.DataFrame(out)
    sparse = rows[rows["setting"] == "M"].assign(stage="B", setting="sparse")
    return pd.concat([rows, sparse], ignore_index=True)


# ------------------------------------------------------------------------------- compute curves

FULL_FLOPS = 1e11
LADDER = (0.0625, 0.125, 0.25, 0.5, 1.0)
LADDER_A = (*LADDER, 2.0, 4.0)  # stage A runs to 4C
CURVE_CELLS = {"r15": 0.15, "r30": 0.30, "r50": 0.50, "r70": 0.70, "r85": 0.85}
BASE = 0.3
STAGE_A = {"S": "A", "M": "A", "L": "A"}


def known(A: float, mid_point: float, B: float, R0: float = BASE):
    """A saturating truth in the budget point: asymptote ``A``, half the gain at ``mid_point`` C."""
    return lambda point: float(
        saturating(math.log10(point * FULL_FLOPS), A, math.log10(mid_point * FULL_FLOPS), B, R0)
    )


def curve_rows(
    truth,
    settings: dict[str, str] | None = None,
    cells: dict[str, float] | None = None,
    seeds: int = 5,
    points=LADDER,
    sd: float = 0.01,
    rng_seed: int = 0,
    base: float | None = BASE,
    infeasible: dict[tuple[str, float], str] | None = None,
) -> pd.DataFrame:
    """Rows of ``curves.csv`` (every :data:`CURVE_COLUMNS` column): ``truth(setting, cell, rho, point)``
    is each metric's mean, plus normal seed noise of SD ``sd``. ``settings``: name -> stage (a stage A
    setting's policy is its name); ``infeasible``: (cell, point) pairs that cannot buy a round
    (``"*"`` for every setting, else the setting named)."""
    settings = settings or {"M": "B"}
    cells = cells or CURVE_CELLS
    rng = np.random.default_rng(rng_seed)
    out = []
    for setting, stage in settings.items():
        model = setting if stage == "A" else "M"
        for cell, rho in cells.items():
            for seed in range(seeds):
                run_id = f"{setting}-{cell}-{seed}"
                for point in points:
                    off = (infeasible or {}).get((cell, point)) in ("*", setting)
                    row = dict.fromkeys(CURVE_COLUMNS, np.nan)
                    row.update(
                        curve_id=curve_id(run_id, point), run_id=run_id, profile="synthetic", stage=stage,
                        setting=setting, cell=cell, seed=seed, budget_kind="full", budget_flops=points[-1] * FULL_FLOPS,
                        point=point, point_flops=point * FULL_FLOPS, final=point == points[-1],
                        evaluation="all" if point in (0.25, 1.0, 4.0) else "native", target_rho=rho, P=8, G=8, K=8,
                        mu=1, model=model, reward_system="sparse", rho=rho + 0.01, C_total=point * FULL_FLOPS,
                        rounds=int(10 * point) + 1, status="infeasible" if off else "ok",
                    )  # fmt: skip
                    if not off:
                        mean = truth(setting, cell, rho, point)
                        for t in METRICS:
                            if t == "native_reward" or row["evaluation"] == "all":
                                row[t] = mean + rng.normal(0, sd)
                    if base is not None:
                        for t in METRICS:
                            row[f"base_{t}"] = base
                    out.append(row)
    return pd.DataFrame(out)


def moving_peak(setting, cell, rho, point):
    """The best rho moves from 0.15 at C/16 to 0.85 at C."""
    peak = 0.15 + 0.7 * (math.log2(point) + 4) / 4
    return 0.6 - 2.0 * (rho - peak) ** 2


def static_peak(setting, cell, rho, point):
    return 0.6 - 2.0 * (rho - 0.5) ** 2 + 0.05 * math.log2(point)


def flat(setting, cell, rho, point):
    return 0.5


SIZE_CURVES = {"S": known(0.5, 0.0625 / 4, 1.0), "M": known(0.7, 0.5, 1.5), "L": known(0.9, 2.0, 2.0)}


def growing(setting, cell, rho, point):
    """Stage A: the small policy is best at small budgets, the large one at large budgets."""
    return SIZE_CURVES[setting](point) - 0.3 * (rho - 0.5) ** 2


def large_always(setting, cell, rho, point):
    return 0.5 + 0.1 * ("SML".index(setting)) - 0.3 * (rho - 0.5) ** 2
