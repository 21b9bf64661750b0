"""The profile's design: which runs belong to the study a profile defines, and the refusal of any
other run in its committed table.

:class:`Design` answers whether a run (a :class:`~paper_repro.run.spec.RunSpec`, or a row's recorded
spec) is one of the design's: the profile's weights, training recipe, data and evaluation
(:func:`design_key`), at one of its budgets, on one of its seeds; :meth:`Design.recipe_problem` whether
its (P, G, K, mu) is a cell of the design's grid. :func:`check_committed` refuses, before any compute,
a run that would go into a shipped profile's committed table without being one, and
:func:`check_named` a profile file that changes a shipped design but keeps its name;
:func:`paper_repro.run.history.split_history` moves such rows out of a table after the fact; the analysis
reads only the design's rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from paper_repro.common.paths import repo_relative
from paper_repro.common.results import quick_dir, results_dir
from paper_repro.config import Profile, changes_from_shipped, load_profile, profile_names
from paper_repro.run.allocation import plan_setting
from paper_repro.run.spec import RunSpec, default_cell_spec

# What varies between the runs of one setting of a design: the rest of a run's canonical spec
# (weights, training recipe, data, evaluation, profile) is the design's, shared by all of them.
PER_RUN_FIELDS = ("seed", "budget_kind", "budget_flops", "P", "G", "K", "mu")


def design_key(spec: RunSpec | dict[str, Any]) -> dict[str, Any]:
    """What a run shares with every run of its setting's design: its canonical spec (a
    :class:`RunSpec`'s, or a row's recorded ``spec``) without the seed, the budget and the
    allocation (:data:`PER_RUN_FIELDS`)."""
    canonical = dict(spec.canonical() if isinstance(spec, RunSpec) else spec)
    for key in PER_RUN_FIELDS:
        canonical.pop(key, None)
    return json.loads(json.dumps(canonical, sort_keys=True, default=str))


def _differences(key: dict[str, Any], design: dict[str, Any]) -> list[str]:
    """The fields (``train.x`` for the training recipe's) where a run's design key differs."""
    out = []
    for name in sorted(set(key) | set(design)):
        a, b = key.get(name), design.get(name)
        if isinstance(a, dict) and isinstance(b, dict):
            out += [f"{name}.{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif a != b:
            out.append(name)
    return out


class Design:
    """The runs of ``profile``'s design, and why a run is not one of them (:meth:`problem`).

    A run of the design is computed with the profile's weights, training recipe, data and
    evaluation (the :func:`design_key` of one of its settings), at the full budget or a pilot
    budget, on a seed that budget's runs use: the grid's ``0 .. seeds-1`` or the fresh seeds at the
    full budget, the pilot seeds at a pilot budget. A quick run (a quarter budget, a smaller
    evaluation, the estimate's budget stop), a run on another seed or with another recipe is not."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.keys = {
            (s.policy, s.reward_system): design_key(default_cell_spec(profile, s, 0))
            for s in profile.all_settings()
        }

    def problem(self, spec: RunSpec | str, any_seed: bool = False) -> str | None:
        """Why ``spec`` (a :class:`RunSpec`, or a row's recorded canonical spec as JSON) is not a
        run of the design, or None when it is one. ``any_seed``: a run on a seed the design does not
        use counts too (an exploration folder's runs, analysed as the design they make up)."""
        profile = self.profile
        if isinstance(spec, RunSpec):
            spec = spec.canonical()
        else:
            try:
                spec = json.loads(spec)
            except (TypeError, ValueError):
                return "it records no readable spec"
        if spec.get("profile") != profile.name:
            return f"it belongs to profile {spec.get('profile')!r}, not {profile.name!r}"
        policy, reward = spec.get("policy"), spec.get("reward_system")
        key = self.keys.get((policy, reward))
        if key is None:
            return f"no setting of the design trains policy {policy} with reward {reward}"
        differ = _differences(design_key(spec), key)
        if differ:
            return f"its {', '.join(differ)} {'differ' if len(differ) > 1 else 'differs'} from the design's"
        kind, budget, seed = spec.get("budget_kind"), float(spec.get("budget_flops", "nan")), spec.get("seed")
        if kind == "full":
            setting = next(
                s for s in profile.all_settings() if (s.policy, s.reward_system) == (policy, reward)
            )
            multiples = sorted({1.0, profile.budget_multiple(setting)})
            budgets = [profile.budget_flops * m for m in multiples]
            seeds = [*range(profile.seeds), *profile.fresh_seeds]
        else:
            budgets, seeds = list(profile.pilot_budgets().values()), list(profile.pilot_seeds)
        if not any(abs(budget - b) <= 1e-9 * b for b in budgets):
            allowed = ", ".join(f"{b:.3g}" for b in budgets)
            return f"its {kind} budget {budget:.3g} is not the design's ({allowed})"
        if seed not in seeds and not any_seed:
            return f"seed {seed} is not one of the design's {kind}-budget seeds {_ranges(seeds)}"
        return None

    def recipe_problem(self, spec: RunSpec) -> str | None:
        """Why ``spec``'s recipe (P, G, K, mu) is not one the design runs in its setting at its budget
        kind, or None when it is: a cell of the grid the planner plans at the full budget (a stage
        that runs on past C trains the same recipes) or at the run's pilot budget, or TRL's default
        cell on a fresh seed. :meth:`problem` reads a run's spec without its recipe; this is asked of
        a run about to go into the committed table (:func:`check_committed`)."""
        profile = self.profile
        setting = profile.setting(spec.setting)
        budget = profile.budget_flops if spec.budget_kind == "full" else spec.budget_flops
        cells = plan_setting(profile, setting, budget).cells
        recipes = {(c.P, c.G, c.K, c.mu): c.label for c in cells}
        if spec.budget_kind == "full" and spec.seed in profile.fresh_seeds:
            default = default_cell_spec(profile, setting, spec.seed)
            recipes.setdefault((default.P, default.G, default.K, default.mu), "default")
        if (spec.P, spec.G, spec.K, spec.mu) in recipes:
            return None
        grid = ", ".join(f"{label} (P={p}, G={g}, K={k}, mu={m})" for (p, g, k, m), label in recipes.items())
        return (
            f"its recipe P={spec.P}, G={spec.G}, K={spec.K}, mu={spec.mu} is not a cell of the design's "
            f"{spec.budget_kind}-budget grid of setting {spec.setting}: {grid}"
        )


def check_committed(specs: Sequence[RunSpec], results_root: str | Path | None = None) -> None:
    """Refuse, before any compute, a run that would go into a shipped profile's committed table
    (``data/results/<profile>``) without being a run of that profile's design
    (:class:`Design`): a quick run, a seed or budget the design does not use, a
    changed recipe. Such a run is exploration, and goes into a results folder of its own."""
    for name in sorted({s.profile for s in specs} & set(profile_names())):
        table = results_dir(name, results_root)
        if table.resolve() != results_dir(name).resolve():
            continue
        design = Design(load_profile(name))
        refused = [
            (s, why)
            for s in specs
            if s.profile == name and (why := design.problem(s) or design.recipe_problem(s))
        ]
        if refused:
            first, why = refused[0]
            raise ValueError(
                f"refused: {len(refused)} run(s) are not runs of the {name} design and would be written "
                f"into its committed table {repo_relative(table / 'runs.csv')} (e.g. setting {first.setting}, "
                f"cell {first.cell}, seed {first.seed}: {why}). Explore in a results folder of your own: "
                f"results_root='out/explore' (papermill: -p results_root out/explore; paper-repro: "
                f"--results out/explore), or quick=True, which writes to {repo_relative(quick_dir(name))}; "
                f"a profile file of your own: give it a name of its own (name: my-study), and its runs go "
                f"to data/results/my-study/."
            )


def check_named(profile: Profile, results_root: str | Path | None = None) -> None:
    """Refuse, before any compute, a profile file that changes a shipped profile's design
    (:func:`~paper_repro.config.changes_from_shipped`) yet keeps its name, as a file that
    ``extends:`` it does unless it says ``name:``, when its runs or tables would go into that
    profile's committed folder: they would be filed as the committed study's."""
    changed = changes_from_shipped(profile)
    committed = results_dir(profile.name)
    if not changed or results_dir(profile.name, results_root).resolve() != committed.resolve():
        return
    raise ValueError(
        f"refused: the profile file {profile.source} changes the {profile.name} design ({', '.join(changed)}) "
        f"but keeps the name {profile.name}, so its runs and tables would go into the committed "
        f"{repo_relative(committed)}. Give it a name of its own in the file (name: my-study, after "
        f"extends: {profile.name}): its runs then go to data/results/my-study/; or pass a results folder "
        f"of your own (--results out/explore; papermill: -p results_root out/explore)."
    )


def _ranges(seeds: Sequence[int]) -> str:
    """``[0..9, 200..204]`` for a list of seeds."""
    runs: list[list[int]] = []
    for s in sorted(seeds):
        if runs and s == runs[-1][-1] + 1:
            runs[-1].append(s)
        else:
            runs.append([s])
    return "[" + ", ".join(f"{r[0]}..{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs) + "]"
