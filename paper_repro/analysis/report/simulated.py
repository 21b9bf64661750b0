"""What the design simulation says, in sentences for RESULTS.md's answer in detail
(:func:`paper_repro.analysis.report.readme.detail_block`): the study's simulated operating
characteristics (``design.csv``), the design the simulator picked and whether it meets the
registered targets (``design_choices.csv``, ``design_registered.csv``), what would meet them
(``design_beyond.csv``) and what more seeds or recipes buy (``design_sensitivity.csv``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from paper_repro.analysis.claims import registry
from paper_repro.analysis.claims.columns import powers
from paper_repro.analysis.claims.frontier import FAMILY as WINDOWS
from paper_repro.analysis.wording import percent


def _design_sentences(results: Path) -> list[str]:
    """How often the study's tests are wrong, agree between draws, hold a true claim and refute a
    false one, in simulation with the noise these runs show (``design.csv``'s post-hoc block): the
    regime contrasts (which decide) and the best-cell windows (descriptions) apart, and the recipe
    effect beside a frontier's height."""
    path = results / "design.csv"
    if not path.exists():
        return []
    from paper_repro.analysis.claims.columns import study_design

    now = study_design(pd.read_csv(path))
    if now.empty:
        return []
    ids = now["claim_id"].astype(str) if "claim_id" in now else pd.Series("", index=now.index)
    regime = now[ids.isin([s.id for s in registry.headlines("question")])]
    windows = now[ids.str.startswith(WINDOWS)]
    said = []
    for words, part in (
        ("the paper's optima as contrasts (any recipe at each rho)", regime),
        ("the rho* windows on the best-cell sets (descriptions)", windows),
    ):
        if part.empty:
            continue
        held, refuted = _claim_powers(part)
        if len(held) and len(refuted) and held.max() == 0 and refuted.max() == 0:
            said.append(
                f"{words} never decide: held in 0% of studies where true and not held in 0% where false, so their "
                f"wrong share ({percent(part['wrong'].max())}) and agreement ({percent(part['agreement'].min())}) say "
                "they are silent, not sure"
            )
            continue
        said.append(
            f"{words} are wrong in at most {percent(part['wrong'].max())} of studies, two draws agree in at least "
            f"{percent(part['agreement'].min())}, and each is held in at least {percent(held.min()) if len(held) else 'n/a'} "
            f"of studies where it is true and not held in at least {percent(refuted.min()) if len(refuted) else 'n/a'} "
            "where it is false"
        )
    block = "post-hoc block" if "block" in now and (now["block"] == "post-hoc").any() else "design.csv"
    return [
        f"Simulated with the noise these runs show ({int(now['studies'].iloc[0])} studies per truth, `design.csv`'s "
        f"{block}): "
        + "; ".join(said)
        + f". A cell's recipe effect (REML SD {_fmt(now['recipe_sd'].iloc[0])}, "
        f"shared by all its seeds) is {_fmt(now['recipe_sd'].iloc[0] / now['amplitude'].iloc[0])} of a typical "
        f"frontier's height ({_fmt(now['amplitude'].iloc[0])}).",
    ]


def _choice_sentences(results: Path) -> list[str]:
    """The design the simulator picks (``design_choices.csv``, ``paper-repro design --candidates``):
    once registered (``design_registered.csv``, ``--candidates --registered``: the pick as the
    profile, simulated before its runs) this study's design and its pre-registered operating
    characteristics, else the recommendation for the next study; its minutes and seeds, and per regime
    claim whether it meets the registered targets (wrong, agreement, held where true, not held where
    false), or which it misses; then what would meet them (:func:`_beyond_sentences`)."""
    path = results / "design_choices.csv"
    if not path.exists():
        return []
    choices = pd.read_csv(path)
    if "recommended" not in choices or "claim_id" not in choices or not choices["recommended"].any():
        return []
    name = str(choices.loc[choices["recommended"].astype(bool), "name"].iloc[0])
    registered = results / "design_registered.csv"
    if registered.exists():
        table = pd.read_csv(registered)
        table = table[table["name"] == "chosen"]
        said = (
            f"This study's design is `paper-repro design --candidates`'s pick, *{name}*, registered before its runs "
            "(the README names the commit, under *The study*); simulated then, with the noise of the study before it"
        )
    else:
        table = choices[choices["name"] == name]
        said = f"For the next study, `paper-repro design --candidates` recommends *{name}*"
    from paper_repro.analysis.design.candidates import target_misses

    head = table.iloc[0]
    misses = target_misses(table, str(head["name"]))
    each = "; ".join(
        f"{r['claim_id']}: wrong {percent(r['wrong_max'])}, agreement {percent(r['agreement_min'])}, held where true "
        f"{percent(r['held_when_true'])}, not held where false {percent(r['not_held_when_false'])}"
        for _, r in table[table["claim_id"].isin(registry.design_targets())].iterrows()
    )
    verdict = (
        "it meets the registered targets (wrong at most 5%, agreement at least 85%, both powers at least 80%)"
        if not misses
        else f"no candidate within the time meets every registered target; this one misses {'; '.join(misses)}"
    )
    return [
        f"{said} ({_fmt(head['minutes'])} min by the cost model, {int(head['seeds'])} seeds per cell, "
        f"{int(head['replicates'])} simulated study pairs per truth): {each}; {verdict}.",
        *_beyond_sentences(results),
    ]


def _beyond_sentences(results: Path) -> list[str]:
    """What design would meet the registered targets past the time limit (``design_beyond.csv``:
    ``paper-repro design --candidates --minutes M`` at a larger M): the cheapest candidate that meets
    them, or the one closest (the rule's pick at that limit) and what it still misses."""
    path = results / "design_beyond.csv"
    if not path.exists():
        return []
    from paper_repro.analysis.design.candidates import recommend, target_misses

    choices = pd.read_csv(path)
    limit = (
        float(choices["minutes_limit"].iloc[0])
        if "minutes_limit" in choices
        else float(choices["minutes"].max())
    )
    pick = recommend(choices, minutes=limit)
    if pick is None:
        return []
    name = str(pick.name)
    head = choices[choices["name"] == name].iloc[0]
    misses = target_misses(choices, name)
    what = (
        f"*{name}* meets every registered target ({_fmt(head['minutes'])} min by the cost model, "
        f"{int(head['seeds'])} seeds per cell)"
        if not misses
        else f"no candidate meets every registered target; the closest, *{name}* ({_fmt(head['minutes'])} min by the "
        f"cost model, {int(head['seeds'])} seeds per cell), still misses {'; '.join(misses)}"
    )
    return [
        f"What would meet them: with up to {limit:g} minutes (`design_beyond.csv`, "
        f"{int(head['replicates'])} simulated study pairs per truth), {what}.",
        *_sensitivity_sentences(results),
    ]


def _sensitivity_sentences(results: Path) -> list[str]:
    """The most each regime claim's powers reach with more seeds or more recipes per cell at the cells
    the sensitivity was simulated on (``design_sensitivity.csv``: ``paper-repro design --more-seeds ...
    --recipes ...``; the committed file's are the study before this one's)."""
    path = results / "design_sensitivity.csv"
    if not path.exists():
        return []

    table = pd.read_csv(path)
    variants = [d for d in table["design"].unique() if d != "committed"]
    rows = table[table["design"].isin(variants) & table["claim_id"].isin(registry.design_targets())]
    if rows.empty:
        return []
    per = rows.groupby(["claim_id", "design"]).agg(
        held=("held_if_true", "min"), refuted=("not_held_if_false", "min")
    )
    best = per.groupby("claim_id").max()
    each = "; ".join(
        f"{claim}: held where true at most {percent(best.loc[claim, 'held'])}, not held where false at most "
        f"{percent(best.loc[claim, 'refuted'])}"
        for claim in registry.design_targets()
        if claim in best.index
    )
    return [
        f"More seeds or more recipes per cell at the cells of the study before this one ({', '.join(variants)}; `design_sensitivity.csv`): {each}."
    ]


def _fmt(value) -> str:
    if isinstance(value, float):
        return "" if pd.isna(value) else f"{value:.3g}"
    return str(value)


def _claim_powers(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per claim of ``design.csv`` rows, its two powers (:func:`paper_repro.analysis.claims.columns.powers`):
    held where true, not held where false, each without the claims that have no such truth."""
    key = "claim_id" if "claim_id" in rows else "claim"
    both = [powers(g) for _, g in rows.groupby(key, sort=False)]
    return pd.Series([h for h, _ in both]).dropna(), pd.Series([r for _, r in both]).dropna()


# the committed candidate tables an open question's design is read from: paper-repro design --candidates
# --family prm-arm --choices design_next_<N>.csv, and --family prm-settings --choices design_prm_settings.csv
NEXT_DESIGNS = ("design_next_*.csv", "design_prm_settings.csv")


def _limit(path: Path, table: pd.DataFrame) -> float:
    """The minutes a candidates table was filled to: the N of its name ``design_next_<N>.csv`` (the
    ``--minutes`` it was written with, docs/usage.md), else (a table not filled to a limit, such as
    ``design_prm_settings.csv``) its costliest candidate's minutes."""
    number = path.stem.rpartition("_")[2]
    return float(number) if number.isdigit() else float(table["minutes"].max())


def open_question_designs(results: Path, claims: pd.DataFrame, ids: Sequence[str]) -> dict[str, str]:
    """What design would decide each question of ``ids`` (a regime question, a target claim) that the
    study leaves open (neither held nor not held in ``claims``) or that its design does not decide reliably (its row's simulated
    ``oc_*`` columns miss the registered targets: wrong above 5% or a power under 80%), from the
    committed candidate tables (:data:`NEXT_DESIGNS`): the cheapest
    candidate whose row for the claim meets the registered targets
    (:data:`paper_repro.analysis.design.candidates.TARGETS`), else that no candidate priced does and the
    closest (wrong at most 5% within its sampling error first,
    :func:`~paper_repro.analysis.design.bounds.too_wrong`; then the largest smaller power, then fewer
    minutes) with its two powers. A sentence per open question (by claim id); none where no table is
    committed."""
    from paper_repro.analysis.design.bounds import TARGETS, missed_targets, too_wrong

    paths = sorted(path for pattern in NEXT_DESIGNS for path in results.glob(pattern))
    if not paths or "id" not in claims:
        return {}
    frames = []
    for path in paths:
        table = pd.read_csv(path)
        frames.append(
            table[table["candidate"].astype(bool)].assign(file=path.name, limit=_limit(path, table))
        )
    rows = pd.concat(frames, ignore_index=True)
    decided = claims.set_index("id")["verdict"].isin(["held", "not held"])
    said = {}
    for claim_id in ids:
        mine = rows[rows["claim_id"] == claim_id]
        if claim_id not in decided.index or mine.empty:
            continue
        if decided[claim_id] and _reliable(claims[claims["id"] == claim_id].iloc[0]):
            continue
        meets = np.array([not missed_targets(row) for _, row in mine.iterrows()], bool)
        if meets.any():
            pick = mine[meets].sort_values("minutes").iloc[0]
            said[claim_id] = f"{_design_words(pick)} would decide it: it {_powers_words(pick)}"
            continue
        closest = mine.assign(
            # wrong at most 5% as the design rule reads it: not rejected by the binomial test over the
            # candidate's own studies (a bare 0.05 ranked a weak design on 40 studies above a strong one
            # on 240 whose 0.058 is 5% within its sampling error)
            right=too_wrong(mine, TARGETS["wrong_max"][0]) == 0,
            power=mine[["held_when_true", "not_held_when_false"]].min(axis=1),
        ).sort_values(["right", "power", "minutes"], ascending=[False, False, True])
        pick = closest.iloc[0]
        said[claim_id] = (
            f"no design priced up to {_fmt(float(rows['limit'].max()))} minutes decides it (both powers at least 80%, wrong at "
            f"most 5%, the same verdict from two draws of the study at least 85%): the closest, {_design_words(pick)}, "
            f"{_powers_words(pick)}"
        )
    return said


def _reliable(claim: pd.Series) -> bool:
    """Whether a claim's own simulated operating characteristics (``claims.csv``'s ``oc_*``) meet the
    registered targets (:func:`~paper_repro.analysis.design.bounds.missed_targets`). A row without
    them is taken as reliable (nothing says otherwise)."""
    from paper_repro.analysis.design.bounds import missed_targets

    if not any(str(c).startswith("oc_") for c in claim.index):
        return True
    return not missed_targets(claim, prefix="oc_")


def _design_words(row: pd.Series) -> str:
    return (
        f"*{row['name']}* ({int(row['runs'])} runs, {_fmt(float(row['minutes']))} min by the cost model, "
        f"{int(row['seeds'])} seeds per allocation; `{row['file']}`, {2 * int(row['replicates'])} simulated studies "
        "per truth)"
    )


def _powers_words(row: pd.Series) -> str:
    return (
        f"says yes in {percent(row['held_when_true'])} of simulated studies where the answer is yes and no in "
        f"{percent(row['not_held_when_false'])} of those where it is no, wrong in at most {percent(row['wrong_max'])}"
        + (
            f", the same verdict from two draws in {percent(row['agreement_min'])}"
            if np.isfinite(pd.to_numeric(row.get("agreement_min"), errors="coerce"))
            else ""
        )
    )
