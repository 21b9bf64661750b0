"""Checks before compute: everything that would fail later is refused before a run spends a FLOP.

:func:`check_spec` refuses a hub model or dataset without a revision (:func:`check_pins`: pin before
you run), resolves the policy and PRM checkpoints (a hub model that ships its own code must be pinned
to a commit: :func:`paper_repro.models.checkpoint`), reads one row of every dataset, and prices the
budget against one round: the planner's first round, and with the ``ceiling`` budget stop the
costliest round the run could meet (:func:`round_ceiling`). Needs tokenizers and data, never weights.
"""

from __future__ import annotations

from paper_repro import models
from paper_repro.run import allocation
from paper_repro.run.spec import RunSpec, own_model


def hub_refs(spec: RunSpec) -> dict[str, str]:
    """The hub references ``spec`` loads, {reference: "model" | "dataset"}: its policy, PRM and a
    reward's own model when they are hub ids, its datasets unless their rows are local."""
    from paper_repro.tasks import hub_dataset

    refs = {
        m: "model" for m in (spec.model, spec.prm, own_model(spec.reward_system)) if m and models.is_hub_id(m)
    }
    refs.update({d: "dataset" for _, ref in spec.data if (d := hub_dataset(ref))})
    return refs


def unpinned(refs: dict[str, str]) -> dict[str, str]:
    """The hub references among ``refs`` that name no revision."""
    from paper_repro.tasks import hub

    return {ref: kind for ref, kind in refs.items() if hub.parse_ref(ref)[1] is None}


def pin_message(refs: dict[str, str], what: str) -> str:
    """Why ``refs`` (unpinned hub references) are refused, and how to pin each."""
    from paper_repro.tasks import hub

    listed = ", ".join(f"{kind} {ref}" for ref, kind in sorted(refs.items()))
    how = "; ".join(f"{ref}: {hub.pin_instructions(ref, kind)}" for ref, kind in sorted(refs.items()))
    return (
        f"refused: {what} names hub ids without a revision ({listed}), which would load whatever the "
        f"hub serves that day. Pin before you run: give each a revision, a 40-hex commit (a branch or "
        f"tag also runs, and the run records the commit it resolved to; a model with its own code needs "
        f"the commit). {how}."
    )


def check_pins(spec: RunSpec) -> None:
    """Refuse a run whose hub models or datasets name no revision (README, *gpu-paper*)."""
    missing = unpinned(hub_refs(spec))
    if missing:
        raise ValueError(pin_message(missing, f"run {spec.run_id} ({spec.setting} {spec.cell})"))


def check_spec(spec: RunSpec) -> None:
    """Raise a clear error for anything that would fail later: a hub id without a revision, a hub
    model with its own code not pinned to a commit, a missing checkpoint or dataset, a budget below
    one round. Costs no FLOPs (hub checkpoints are resolved from the local cache)."""
    from paper_repro.tasks import load_examples

    check_pins(spec)
    models.checkpoint(spec.model)
    if spec.prm is not None:
        models.checkpoint(spec.prm)
    for role in ("train", "heldout", "gsm", "math"):
        if role not in spec.data_map:
            raise ValueError(f"run {spec.run_id}: no {role!r} dataset in the spec")
        load_examples(spec.data_map[role], limit=1)
    problem = budget_problem(spec)
    if problem:
        raise ValueError(problem)


def budget_problem(spec: RunSpec, budget: float | None = None) -> str | None:
    """Why ``budget`` (default: the spec's) cannot buy one round of ``spec``'s cell, or None: below
    the planner's first round, or, with the ``ceiling`` budget stop, below the costliest round."""
    budget = spec.budget_flops if budget is None else budget
    first = spec.first_round_flops
    if first is not None and first > budget:
        return f"budget {budget:.3g} FLOPs buys 0 rounds of cell {spec.cell} for model {spec.policy}; one round needs {first:.3g}"
    if spec.train.budget_stop == "ceiling":
        ceiling = round_ceiling(spec)
        if ceiling > budget:
            return (
                f"budget {budget:.3g} FLOPs does not surely buy one round of cell {spec.cell} "
                f"for model {spec.policy}: the costliest round (every completion at the maximum length) "
                f"needs {ceiling:.3g}"
            )
    return None


def round_ceiling(spec: RunSpec) -> float:
    """The most one generation round of ``spec`` can cost (useful FLOPs): the planner's price of its
    cell's costliest round (:func:`paper_repro.run.allocation.round_ceiling`, which the grid keeps a cell
    by), for the run's model, PRM, training data and recipe. Needs tokenizers and data only."""
    return allocation.round_ceiling(
        spec.model,
        spec.prm,
        spec.data_map["train"],
        spec.train,
        spec.P,
        spec.G,
        spec.K,
        spec.mu,
        spec.reward_system,
        spec.task,
    )
