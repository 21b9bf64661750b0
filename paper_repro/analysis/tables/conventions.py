"""Does the conclusion depend on the accounting? rho* under four conventions of counting compute.

Papers on compute-optimal scaling have flipped their conclusions by changing what a FLOP counts.
Each run records its update fraction under three conventions, and its step log (``steps/<run_id>.jsonl``)
gives the tokens for a fourth:

- ``useful``: the paper's: real tokens only, analytic FLOPs of every pass (``rho``);
- ``executed``: padding and the rows HF ``generate`` keeps decoding included (``rho_executed``);
- ``6N``: 6 x parameters for every token a model reads, whatever the pass (what verl and several
  scaling studies count): ``rho_6N = L / (G + L + R)``, with ``L`` the tokens of the loss passes, ``G``
  the generated rounds' prompt and completion tokens, and ``R`` the PRM's reads in policy-token
  units (its FLOPs over the policy's FLOPs per generated token; 0 for rule-based rewards);
- ``wall time``: seconds spent updating over seconds in all (``rho_time``).

:func:`convention_table` refits rho* of the native reward (:func:`paper_repro.analysis.stats.optima.fit_optimum`:
the cells that could be best, the unimodal estimate) with each convention's rho on the x axis, per
distinct setting.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

CONVENTIONS = {"useful": "rho", "executed": "rho_executed", "6N": "rho_6N", "wall time": "rho_time"}


def rho_6n(step_log: Path, steps: int | None = None) -> float:
    """``rho_6N`` of one run from its step log (its first ``steps`` optimizer steps: a run's state at
    a point of its ladder); NaN when the log is missing or holds no tokens."""
    if not step_log.exists():
        return float("nan")
    loss = generated = search = reward = 0.0
    for line in step_log.read_text().splitlines()[:steps]:
        step = json.loads(line)
        tokens, useful = step.get("tokens", {}), step.get("flops", {}).get("useful", {})
        loss += tokens.get("loss_tokens", 0.0)
        generated += tokens.get("gen_prompt_tokens", 0.0) + tokens.get("gen_completion_tokens", 0.0)
        search += useful.get("search", 0.0)
        reward += useful.get("reward", 0.0)
    if loss + generated == 0 or search == 0:
        return float("nan")
    reads = reward * generated / search  # the PRM's FLOPs in policy-token units
    return loss / (generated + loss + reads)


def with_rho_6n(rows: pd.DataFrame, steps_dir: Path) -> pd.DataFrame:
    rows = rows.copy()
    steps = rows["steps"] if "steps" in rows else [None] * len(rows)
    rows["rho_6N"] = [
        rho_6n(steps_dir / f"{run_id}.jsonl", None if pd.isna(n) else int(n))
        for run_id, n in zip(rows["run_id"], steps, strict=True)
    ]
    return rows


def convention_table(
    rows: pd.DataFrame, groups: dict[str, tuple[str, ...]], recipe_sd: float = 0.0
) -> pd.DataFrame:
    """rho* of the native reward per (group, convention): ``groups`` maps a label to its settings
    (one each, in the analysis), fitted over their runs with the convention's rho on the x axis."""
    from paper_repro.analysis.stats.optima import fit_optimum

    out = []
    for label, names in groups.items():
        data = rows[rows["setting"].isin(names)]
        for convention, column in CONVENTIONS.items():
            if data.empty or data[column].isna().all():
                continue
            view = data.assign(rho=data[column])
            opt = fit_optimum(view, "native_reward", recipe_sd)
            out.append(
                {"group": label, "settings": " ".join(names), "convention": convention, **opt.as_dict()}
            )
    return pd.DataFrame(out)


# why "robust to the FLOP convention" has no share: no convention decided a verdict to keep or change
NOTHING_DECIDED = (
    "not computable: every rho* verdict is inconclusive under every FLOP convention, so there is no decision "
    "to be robust (no share is reported)"
)


def robustness(verdicts: pd.DataFrame) -> tuple[float, str, str]:
    """From one row per (claim, convention) with a verdict: (the share of conventions whose verdicts all
    match ``useful``'s, the verdict of "the conclusion is robust to the FLOP convention", why the share
    is NaN or ""): held if every convention gives the same verdicts and some verdict is decided; not
    held if some claim is held under one convention and not held under another; inconclusive otherwise
    (verdicts differ only between decided and open). Where no verdict is decided under any convention
    the claim decides nothing: the share is NaN, with :data:`NOTHING_DECIDED` as the reason (a share of
    1.0 would read as "robust" when nothing was there to keep)."""
    table = verdicts.pivot(index="claim", columns="convention", values="verdict")
    if table.empty or "useful" not in table:
        return float("nan"), "inconclusive", "not computable: no rho* verdict under the useful convention"
    if not table.isin(["held", "not held"]).to_numpy().any():
        return float("nan"), "inconclusive", NOTHING_DECIDED
    matches = [(table[c] == table["useful"]).all() for c in table.columns]
    flips = any({"held", "not held"} <= set(row) for _, row in table.iterrows())
    verdict = "held" if all(matches) else "not held" if flips else "inconclusive"
    return float(np.mean(matches)), verdict, ""
