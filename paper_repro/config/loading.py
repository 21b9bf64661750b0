"""Reading a profile: its YAML file (``extends:`` resolved) into a :class:`Profile` and its
sections (:func:`load_profile`)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

from paper_repro.config.profile import PROFILE_DIR, Profile, profile_names
from paper_repro.config.sections import (
    STAGES,
    Curves,
    Estimate,
    Grid,
    Margins,
    PredictedLengths,
    Resources,
    StageDesign,
    TrainConfig,
)


def load_profile(name: str | Path) -> Profile:
    """The profile ``name`` (a shipped name such as ``cpu-tiny``, or a path to a YAML file)."""
    path = Path(name)
    if path.suffix not in (".yaml", ".yml"):
        path = PROFILE_DIR / f"{name}.yaml"
        if not path.is_file():
            raise ValueError(f"unknown profile {name!r}; known: {', '.join(profile_names())}")
    elif not path.is_file():
        raise FileNotFoundError(f"profile file {path} does not exist")
    raw = _read_raw(path)
    return _profile_from_dict(raw, source=str(path))


def _read_raw(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A profile's YAML, with ``extends: <profile>`` resolved: the base profile's values, then this
    file's on top (mappings merged key by key, anything else replaced). A hardware variant such as
    ``gpu-paper-1gpu`` extends ``gpu-paper`` and changes only ``resources``: the same runs (a run's id
    ignores where it runs), the same results table."""
    if path.resolve() in seen:
        raise ValueError(f"profile {path} extends itself (through {' -> '.join(map(str, seen))})")
    raw = yaml.safe_load(path.read_text()) or {}
    base = raw.pop("extends", None)
    if base is None:
        return raw
    base_path = Path(base) if Path(base).suffix in (".yaml", ".yml") else PROFILE_DIR / f"{base}.yaml"
    if not base_path.is_absolute() and not base_path.is_file():
        base_path = path.parent / base_path
    if not base_path.is_file():
        raise ValueError(f"profile {path} extends {base!r}, which is not a profile ({base_path})")
    return _merge(_read_raw(base_path, (*seen, path.resolve())), raw)


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "resources":
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _profile_from_dict(raw: dict[str, Any], source: str = "") -> Profile:
    raw = dict(raw)
    train = TrainConfig(**_known(TrainConfig, raw.pop("train", {})))
    grid_raw = dict(raw.pop("grid", {}))
    allowed = raw.pop("allowed", {})
    grid = Grid(
        targets=tuple(float(t) for t in grid_raw.get("targets", Grid.targets)),
        tolerance=float(grid_raw.get("tolerance", Grid.tolerance)),
        preferred_G=int(grid_raw.get("preferred_G", Grid.preferred_G)),
        recipes=tuple(
            (str(r["policy"]), str(r["reward"]), tuple(float(t) for t in r["targets"]))
            for r in grid_raw.get("recipes", ())
        ),
        **{k: tuple(int(v) for v in allowed[k]) for k in ("P", "G", "K", "mu") if k in allowed},
    )
    budget = raw.pop("budget")
    policies = {str(k): _reference(v, f"policies.{k}") for k, v in raw["policies"].items()}
    return Profile(
        name=raw["name"],
        task=raw["task"],
        policies=policies,
        stages=_stages(raw.get("stages", {}), list(policies)),
        prm=_reference(raw["prm"], "prm"),
        judge=raw.get("judge", "step_verifier"),
        data={str(k): _reference(v, f"data.{k}") for k, v in raw["data"].items()},
        eval=dict(raw.get("eval", {})),
        expected_lengths={k: int(v) for k, v in raw["expected_lengths"].items()},
        train=train,
        budget_flops=float(budget["full_flops"]),
        pilot_fractions=_pilot_fractions(budget),
        grid=grid,
        **_seeds(raw.get("seeds", 3)),
        margins=Margins(**_known(Margins, raw.get("margins", {}))),
        offline=bool(raw.get("offline", False)),
        testbed=bool(raw.get("testbed", False)),
        source=source,
        resources={str(k): Resources(**_known(Resources, v)) for k, v in raw.get("resources", {}).items()},
        estimate=Estimate(**_known(Estimate, raw.get("estimate", {}))),
        curves=_curves(raw.get("curves", {})),
        predicted_lengths=_predicted_lengths(raw.get("predicted_lengths") or {}),
    )


def _predicted_lengths(raw: dict[str, Any]) -> PredictedLengths:
    """``predicted_lengths:`` of a profile: ``source``, ``settings`` and ``completion_range``
    (:class:`PredictedLengths`)."""
    raw = _known(PredictedLengths, dict(raw))
    span = raw.get("completion_range")
    return PredictedLengths(
        source=raw.get("source", "assumed"),
        settings={str(k): dict(v) for k, v in (raw.get("settings") or {}).items()},
        completion_range=tuple(int(v) for v in span) if span is not None else None,
    )


def _curves(raw: dict[str, Any]) -> Curves:
    """``curves:`` of a profile: ``points``, ``evaluate_all_at`` and ``stage_budgets`` (:class:`Curves`)."""
    raw = _known(Curves, dict(raw or {}))
    return Curves(
        points=tuple(float(p) for p in raw.get("points", ())),
        evaluate_all_at=tuple(float(p) for p in raw.get("evaluate_all_at", (1.0,))),
        stage_budgets={str(k): float(v) for k, v in (raw.get("stage_budgets") or {}).items()},
    )


def _reference(raw: Any, where: str) -> str:
    """A model or dataset of a profile: a string (a local path, a shipped split, ``<hub id>=<path>``
    or a hub reference ``owner/name[@revision]``), or a hub id with its revision,
    ``{id: owner/name, revision: <40-hex commit, branch or tag, or null>}``, as the reference
    ``owner/name@revision`` (the bare id when the revision is null: a run refuses it until pinned)."""
    from paper_repro.tasks import hub

    if not isinstance(raw, dict):
        return str(raw)
    unknown = sorted(set(raw) - {"id", "revision"})
    if unknown or "id" not in raw or "revision" not in raw:
        raise ValueError(
            f"{where}: a hub id with its revision is {{id: owner/name, revision: <commit> or null}}, "
            f"got {raw!r}"
        )
    repo, revision = str(raw["id"]), raw["revision"]
    if "@" in repo or "=" in repo or repo.count("/") != 1:
        raise ValueError(f"{where}: id must be a hub id owner/name, got {repo!r}")
    if revision is None:
        return repo
    ref = f"{repo}@{revision}"
    hub.parse_ref(ref)  # an empty or malformed revision is refused here
    return ref


def _pilot_fractions(budget: dict[str, Any]) -> tuple[float, ...]:
    """``budget.pilot_fractions`` (a list; the first picks), or a single ``pilot_fraction``."""
    if "pilot_fractions" in budget and "pilot_fraction" in budget:
        raise ValueError("budget: give pilot_fractions or pilot_fraction, not both")
    raw = budget.get("pilot_fractions", [budget.get("pilot_fraction", 0.125)])
    return tuple(float(f) for f in (raw if isinstance(raw, list | tuple) else [raw]))


def _seeds(raw: Any) -> dict[str, Any]:
    """``seeds:`` of a profile: a count of grid seeds, or ``{grid: n, pilot: [...], fresh: [...]}``."""
    if isinstance(raw, int):
        return {"seeds": raw}
    if not isinstance(raw, dict):
        raise ValueError(f"seeds: a count or a mapping with grid, pilot and fresh, got {raw!r}")
    unknown = sorted(set(raw) - {"grid", "pilot", "fresh"})
    if unknown:
        raise ValueError(f"seeds: unknown keys {unknown}; allowed: fresh, grid, pilot")
    out: dict[str, Any] = {"seeds": int(raw.get("grid", 3))}
    for key, name in (("pilot", "pilot_seeds"), ("fresh", "fresh_seeds")):
        if key in raw:
            out[name] = tuple(int(s) for s in raw[key])
    return out


def _stages(raw: dict[str, Any], policies: list[str]) -> dict[str, StageDesign]:
    """``stages:`` of a profile. Stage A: ``{policies: [...], reward: r}`` (policies default to all);
    stages B and D: ``{policy: p, rewards: [...]}``."""
    unknown_stages = sorted(set(map(str, raw)) - set(STAGES))
    if unknown_stages:
        raise ValueError(f"unknown stages {unknown_stages}; stages: {', '.join(STAGES)}")
    out = {}
    for stage, spec in raw.items():
        spec = dict(spec or {})
        allowed = {"policies", "reward"} if stage == "A" else {"policy", "rewards"}
        unknown = sorted(set(spec) - allowed)
        if unknown:
            raise ValueError(f"stage {stage}: unknown keys {unknown}; allowed: {sorted(allowed)}")
        if stage == "A":
            chosen = tuple(str(p) for p in spec.get("policies", policies))
            out[str(stage)] = StageDesign(chosen, (str(spec.get("reward", "")),))
        else:
            out[str(stage)] = StageDesign(
                (str(spec.get("policy", "")),), tuple(str(r) for r in spec.get("rewards", []))
            )
    return out


def _known(cls, values: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} fields {unknown}; known: {sorted(names)}")
    return dict(values)


def changes_from_shipped(profile: Profile) -> list[str]:
    """The fields (``grid``, ``seeds``, ...) in which ``profile``, read from a file of one's own,
    differs from the shipped profile whose name it carries (a file that ``extends:`` a shipped
    profile inherits its name unless it says ``name:``); [] for a shipped profile as shipped, for a
    profile with a name of its own, and for a hardware variant that changes only ``resources``
    (where its runs run, not what they compute)."""
    shipped = PROFILE_DIR / f"{profile.name}.yaml"
    if profile.name not in profile_names() or Path(profile.source or shipped).resolve() == shipped.resolve():
        return []
    base = load_profile(profile.name)
    skip = ("source", "resources")
    return [
        f.name
        for f in fields(profile)
        if f.name not in skip and getattr(profile, f.name) != getattr(base, f.name)
    ]
