"""The claims told in sentences generated from their tables: what notebook 40 prints after the
answer (:mod:`paper_repro.analysis.report.answer`).

No number is typed here: every sentence is filled from a row of ``claims.csv``, ``race.csv``,
``optima.csv``, ``disagreement.csv``, ``conventions.csv`` or ``reward_hacking_summary.csv``, so the
text changes when the tables do. :func:`how_tested` states each test once; :func:`claim_paragraphs`
gives, per claim, the verdict, the estimate and its interval, the cells behind it, the power and the
simulated error rates; :func:`figure_readings` gives one line per figure.
"""

from __future__ import annotations

import re

import pandas as pd

from paper_repro.analysis.claims.curves import MOVES
from paper_repro.analysis.claims.sizes import GROWS
from paper_repro.analysis.wording import finite, fraction_words, num, percent, point_words

TARGET = "native_reward"
CURVE_CLAIMS = (MOVES, GROWS)  # the compute-curve claims the answer's budget line names


def estimate_sentence(row: pd.Series) -> str:
    """Our value, its interval when there is one, and the test's note."""
    note = str(row["note"]) if isinstance(row.get("note"), str) and row["note"] else ""
    if not finite(row["our_value"]):
        return f"There is no estimate; the test's note: {note}." if note else "There is no estimate."
    text = f"Our estimate is {num(row['our_value'])}"
    if finite(row["ci_low"]) and finite(row["ci_high"]):
        text += f" (95% interval {num(row['ci_low'])} to {num(row['ci_high'])})"
    return text + (f"; {note}." if note else ".")


def power_sentence(row: pd.Series) -> str:
    """What would change the verdict: how often the test decides in studies simulated at this
    study's seeds, and how many seeds per cell would make it decide 80% of the time."""
    if not finite(row.get("power_now")):
        return f"Power: {row['power_note']}."
    n = int(row["seeds_per_cell"]) if finite(row["seeds_per_cell"]) else 0
    p = float(row["power_now"])
    text = f"Power: it decides {percent(p)} of simulated studies at {n} seeds per cell"
    needed = row.get("seeds_for_80pct_power")
    if p >= 0.8:
        return text + "."
    if finite(needed):
        return text + f"; about {int(needed)} seeds per cell would make that 80%."
    return text + "; not even 40 seeds per cell would make that 80%."


def oc_sentence(row: pd.Series) -> str:
    """How often the test is wrong and how often two draws agree, from ``design.csv``."""
    if not finite(row.get("oc_wrong_max")):
        note = row.get("oc_note")
        return f" Error rates: {note}." if isinstance(note, str) and note else ""
    worst = (
        f" (under {row['oc_wrong_truth']})"
        if isinstance(row.get("oc_wrong_truth"), str) and row["oc_wrong_truth"]
        else ""
    )
    held = (
        f"; held in {percent(row['oc_held_when_true'])} where the truth holds"
        if finite(row.get("oc_held_when_true"))
        else ""
    )
    return (
        f" Error rates (simulated, design.csv): wrong in at most {percent(row['oc_wrong_max'])}{worst}, "
        f"two draws agree in at least {percent(row['oc_agreement_min'])}{held}."
    )


def source_sentence(row: pd.Series) -> str:
    """Where the claim comes from and what the paper says of it."""
    value = str(row["paper_value"])
    if row["kind"] == "paper claim":
        return (
            "The paper states it without a number."
            if value == "qualitative"
            else f"The paper reports {value}."
        )
    kind = "A consistency check" if row["kind"] == "consistency check" else "Our addition"
    if value in ("qualitative", "") or value.startswith("not "):
        return f"{kind}{', ' + value if value.startswith('not ') else ''}."
    return f"{kind}; the paper's value: {value}."


def family(claim: str) -> str:
    """The test a claim shares with its rows on other targets or pilot budgets."""
    name = re.sub(r" \(on [^)]*\)$", "", claim)
    return re.sub(r"at \d+/\d+ of the budget", "at a pilot budget", name)


def how_tested(claims: pd.DataFrame) -> list[str]:
    """Each test once, as the claims table states it (its first row's wording; the rows on other
    targets or pilot budgets run the same test on theirs)."""
    out = []
    for name, rows in claims.groupby(claims["claim"].map(family), sort=False):
        k = len(rows) - 1
        also = f" (and {k} row{'s' * (k != 1)} on other targets or pilot budgets)" if k else ""
        out.append(f"- **{name}**{also}: {str(rows['test'].iloc[0]).rstrip('.')}.")
    return out


def claim_paragraphs(claims: pd.DataFrame) -> list[str]:
    """One Markdown paragraph per claim: its verdict, where it comes from, our estimate with its
    interval, the cells behind it, the power and the simulated error rates."""
    out = []
    for _, row in claims.iterrows():
        loso = row.get("leave_one_seed_out")
        robust = (
            f" Dropping one grid seed at a time: {loso}."
            if isinstance(loso, str) and loso != "not recomputed"
            else ""
        )
        cells = row.get("best_cells")
        best = f" Could be best: {cells}." if isinstance(cells, str) and cells else ""
        out.append(
            f"**{row['claim']}: {row['verdict']}.** {source_sentence(row)} {estimate_sentence(row)}{best} "
            f"{power_sentence(row)}{oc_sentence(row)}{robust}"
        )
    return out


def verdict_counts(claims: pd.DataFrame) -> str:
    """``k held, m not held, j inconclusive`` over the paper's claims."""
    paper = claims[claims["kind"] == "paper claim"]["verdict"].value_counts()
    return ", ".join(
        f"{int(paper.get(v, 0))} {v}" for v in ("held", "not held", "inconclusive", "heterogeneous")
    )


def _optimum_phrase(row: pd.Series) -> str:
    if row["status"] in ("interior", "boundary") and finite(row["rho_star"]):
        interval = ""
        if finite(row["ci95_low"]) and finite(row["ci95_high"]):
            interval = f", 95% interval {num(row['ci95_low'], 2)} to {num(row['ci95_high'], 2)}"
        return f"{row['setting']} rho* {num(row['rho_star'], 2)} ({row['status']}{interval}; could be best: {row['best_cells']})"
    return f"{row['setting']} not identified ({row['reason']})"


def figure_readings(
    optima: pd.DataFrame,
    disagreement: pd.DataFrame,
    race: pd.DataFrame,
    conventions: pd.DataFrame,
    hacking_summary: pd.DataFrame,
    frontier: pd.DataFrame,
) -> dict[str, str]:
    """One line per figure (by its file name), read off the tables it draws."""
    native = optima[(optima["target"] == TARGET) & (optima["same_runs_as"].fillna("") == "")]
    readings = {}
    for stage, names in (("A", ("A",)), ("BD", ("B", "D"))):
        rows = native[native["stage"].isin(names)]
        if rows.empty:
            continue
        optimum = "; ".join(_optimum_phrase(r) for _, r in rows.iterrows())
        readings[f"targets_vs_rho_stage_{stage}"] = (
            f"Native reward's unimodal optimum per setting: {optimum}."
        )
        f = frontier[frontier["stage"].isin(names)]
        ratio = (f["rho_time"] / f["rho"]).median() if len(f) else float("nan")
        readings[f"targets_vs_rho_time_stage_{stage}"] = (
            f"The same frontiers against rho counted in wall time: per cell, the time share of the update "
            f"is {num(ratio, 2)} times its FLOP share (median over cells)."
        )
    if len(disagreement):
        n = len(disagreement)
        k = int(disagreement["targets_disagree"].sum())
        readings["argmax_cell_by_target"] = (
            f"The four targets' best cells differ in {k} of {n} settings (the claims table tests whether "
            "that is more than seed noise)."
        )
    if len(race):
        parts = []
        for fraction, rows in race[race["same_runs_as"].fillna("") == ""].groupby(
            "pilot_fraction", sort=False
        ):
            moved = rows[rows["pilot_moved"].astype(bool)]
            head = (
                f"at {fraction_words(fraction)} of the budget the pilots moved off the base policy in "
                f"{len(moved)} of {len(rows)} distinct settings"
            )
            if "same_best_regime" in rows:  # the paper's definition: the best cell's side, every setting
                same = rows["same_best_regime"] == True  # noqa: E712 (NaN in an older table)
                parts.append(
                    f"{head}; their best cell lies on the full grid's best cell's side of the regime "
                    f"threshold (the paper's same regime) in {int(same.sum())} of {len(rows)} "
                    f"({int(same[moved.index].sum())} of the {len(moved)} that moved)"
                )
            else:  # an older race.csv: the regime named by the best sets, where the pilots moved
                parts.append(
                    f"{head}, and name the full grid's regime in "
                    f"{int((moved['same_regime'] == True).sum())} of those"  # noqa: E712 (NaN where uninformative)
                )
        readings["race_pilot_vs_full_rho_star"] = "RACE: " + "; ".join(parts) + "."
    if len(conventions):
        useful = conventions[conventions["convention"] == "useful"].set_index("group")["status"]
        identified = int(useful.isin(["interior", "boundary"]).sum())
        readings["rho_star_by_convention"] = (
            f"Under the useful convention rho* is identified for {identified} of {len(useful)} groups; the "
            "other conventions move each estimate by the shift shown."
        )
    if len(hacking_summary):
        parts = [
            f"{r['reward_system']} {int(r['gaming_runs'])} of {int(r['classed'])}"
            for _, r in hacking_summary.iterrows()
        ]
        readings["reward_change_vs_outcomes"] = (
            "Runs that game their reward, per reward system: " + ", ".join(parts) + "."
        )
    return readings


def story(analysis) -> str:
    """The claims in Markdown, from an :class:`paper_repro.analysis.Analysis`: a count of the
    paper's verdicts, how each claim is tested (each test once), then one paragraph per claim."""
    claims = analysis.claims
    seeds = int(claims["seeds_per_cell"].max()) if len(claims) else 0
    head = (
        f"Of the paper's claims, {verdict_counts(claims)}, with {seeds} seed{'s' * (seeds != 1)} per "
        "full-budget cell. Each verdict comes from a test fixed in code before the runs."
    )
    return "\n\n".join(
        [
            head,
            "### How each claim is tested",
            "\n".join(how_tested(claims)),
            "### The claims",
            *claim_paragraphs(claims),
        ]
    )


def readings(analysis) -> dict[str, str]:
    """:func:`figure_readings` of an :class:`paper_repro.analysis.Analysis`, and
    :func:`curve_readings` of its compute curves."""
    a = analysis
    out = figure_readings(a.optima, a.disagreement, a.race, a.conventions, a.hacking_summary, a.frontiers)
    if a.curves is not None:
        out.update(curve_readings(a.curves))
    contrasts = contrast_reading(a.claims)
    if contrasts:
        out["regime_contrasts"] = contrasts
    return out


def contrast_reading(claims: pd.DataFrame) -> str:
    """The regime contrasts figure's line: how many of its rows (the regime claims, both levels)
    held, were not held and stayed open ("" when the claims table has none)."""
    from paper_repro.analysis.claims.regimes import FAMILY

    rows = claims[claims["id"].astype(str).str.startswith(FAMILY)] if "id" in claims else claims.iloc[0:0]
    if rows.empty:
        return ""
    counts = rows["verdict"].value_counts()
    said = ", ".join(
        f"{int(counts[v])} {v}" for v in ("held", "not held", "inconclusive", "heterogeneous") if v in counts
    )
    return (
        f"The paper's optima asked as contrasts, each with its 90% interval against 0 and the margin: {said} "
        f"of {len(rows)}."
    )


def curve_readings(curve, target: str = TARGET) -> dict[str, str]:
    """One line per compute-curve figure (:mod:`paper_repro.analysis.tables.curves`), from its tables."""
    out = {}
    fits = curve.fits[curve.fits["target"] == target] if len(curve.fits) else curve.fits
    if len(fits):
        identified = int((fits["status"] == "identified").sum())
        summary = curve.extrapolation_summary
        summary = summary[summary["target"] == target] if len(summary) else summary
        tail = ""
        if len(summary) and finite(summary["median_abs_error"].iloc[0]):
            tail = (
                f"; fitted on the points up to C/2, C is predicted with a median absolute error of "
                f"{num(summary['median_abs_error'].iloc[0], 2)}"
            )
        out[f"curves_{target}"] = (
            f"Native reward against the budget per cell, with ScaleRL-style saturating fits: the asymptote is "
            f"identified for {identified} of {len(fits)} cells{tail}."
        )
    best = curve.rho_star[curve.rho_star["target"] == target] if len(curve.rho_star) else curve.rho_star
    if len(best):
        parts = []
        for setting, rows in best.groupby("setting", sort=False):
            # the ends the claim reads: the points where every cell of the setting is measured
            whole = rows[rows["infeasible_cells"].fillna("").astype(str) == ""]
            rows = (whole if len(whole) else rows).sort_values("point")
            ends = [rows.iloc[0], rows.iloc[-1]] if len(rows) > 1 else [rows.iloc[0]]
            parts.append(
                f"{setting} {' -> '.join(f'{{{r.best_cells}}} at {point_words(r.point)}' for r in ends)}"
            )
        out[f"rho_star_vs_budget_{target}"] = (
            "The cells that could be best, at the ladder's ends: " + "; ".join(parts) + "."
        )
    sizes = curve.size_star[curve.size_star["target"] == target] if len(curve.size_star) else curve.size_star
    if len(sizes):
        parts = [f"{point_words(r.point)}: {r.best_sizes}" for r in sizes.sort_values("point").itertuples()]
        out[f"compute_optimal_envelope_{target}"] = (
            "The policy sizes that could be best at equal FLOPs, by budget: " + "; ".join(parts) + "."
        )
    return out
