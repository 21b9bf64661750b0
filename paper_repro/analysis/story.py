"""The study told in sentences generated from its tables: what notebook 40 and the README print.

No number is typed here: every sentence is filled from a row of ``claims.csv``, ``race.csv``,
``optima.csv``, ``disagreement.csv``, ``conventions.csv`` or ``reward_hacking_summary.csv``, so the
text changes when the tables do. :func:`answer` is the study's answer, which the README
(:mod:`paper_repro.analysis.report`) and notebook 40 open with: where a fixed budget should go per
policy size and per reward system (the cells that could be best, ``optima.csv``, with their realised
rho, ``frontiers.csv``), which size at equal FLOPs and how both move with the budget
(``size_star_by_budget.csv``, ``rho_star_by_budget.csv``; or that they are not measured yet), and
which of the paper's claims held, were refuted or stayed open, with what would decide the open ones
(``claims.csv``'s power columns). :func:`how_tested` states each test once; :func:`claim_paragraphs`
gives, per claim, the verdict, the estimate and its interval, the cells behind it, the power and the
simulated error rates; :func:`figure_readings` gives one line per figure.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from paper_repro.analysis.wording import fraction_words

TARGET = "native_reward"
CURVE_CLAIMS = (
    "curves.moves",
    "curves.grows",
)  # the compute-curve claims' ids (paper_repro.analysis.claims.curves)


def _num(value, digits: int = 3) -> str:
    return f"{float(value):.{digits}g}"


def _finite(value) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def estimate_sentence(row: pd.Series) -> str:
    """Our value, its interval when there is one, and the test's note."""
    note = str(row["note"]) if isinstance(row.get("note"), str) and row["note"] else ""
    if not _finite(row["our_value"]):
        return f"There is no estimate; the test's note: {note}." if note else "There is no estimate."
    text = f"Our estimate is {_num(row['our_value'])}"
    if _finite(row["ci_low"]) and _finite(row["ci_high"]):
        text += f" (95% interval {_num(row['ci_low'])} to {_num(row['ci_high'])})"
    return text + (f"; {note}." if note else ".")


def power_sentence(row: pd.Series) -> str:
    """What would change the verdict: how often the test decides in studies simulated at this
    study's seeds, and how many seeds per cell would make it decide 80% of the time."""
    if not _finite(row.get("power_now")):
        return f"Power: {row['power_note']}."
    n = int(row["seeds_per_cell"]) if _finite(row["seeds_per_cell"]) else 0
    p = float(row["power_now"])
    text = f"Power: it decides {p:.0%} of simulated studies at {n} seeds per cell"
    needed = row.get("seeds_for_80pct_power")
    if p >= 0.8:
        return text + "."
    if _finite(needed):
        return text + f"; about {int(needed)} seeds per cell would make that 80%."
    return text + "; not even 40 seeds per cell would make that 80%."


def oc_sentence(row: pd.Series) -> str:
    """How often the test is wrong and how often two draws agree, from ``design.csv``."""
    if not _finite(row.get("oc_wrong_max")):
        note = row.get("oc_note")
        return f" Error rates: {note}." if isinstance(note, str) and note else ""
    worst = (
        f" (under {row['oc_wrong_truth']})"
        if isinstance(row.get("oc_wrong_truth"), str) and row["oc_wrong_truth"]
        else ""
    )
    held = (
        f"; held in {float(row['oc_held_when_true']):.0%} where the truth holds"
        if _finite(row.get("oc_held_when_true")) else ""
    )  # fmt: skip
    return (
        f" Error rates (simulated, design.csv): wrong in at most {float(row['oc_wrong_max']):.1%}{worst}, "
        f"two draws agree in at least {float(row['oc_agreement_min']):.0%}{held}."
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
    if row["status"] in ("interior", "boundary") and _finite(row["rho_star"]):
        interval = ""
        if _finite(row["ci95_low"]) and _finite(row["ci95_high"]):
            interval = f", 95% interval {_num(row['ci95_low'], 2)} to {_num(row['ci95_high'], 2)}"
        return f"{row['setting']} rho* {_num(row['rho_star'], 2)} ({row['status']}{interval}; could be best: {row['best_cells']})"
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
            f"is {_num(ratio, 2)} times its FLOP share (median over cells)."
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
            parts.append(
                f"at {fraction_words(fraction)} of the budget the pilots moved off the base policy in "
                f"{len(moved)} of {len(rows)} distinct settings, and name the full grid's regime in "
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
        [head, "### How each claim is tested", "\n".join(how_tested(claims)), "### The claims",
         *claim_paragraphs(claims)]
    )  # fmt: skip


def readings(analysis) -> dict[str, str]:
    """:func:`figure_readings` of an :class:`paper_repro.analysis.Analysis`, and
    :func:`curve_readings` of its compute curves."""
    a = analysis
    out = figure_readings(a.optima, a.disagreement, a.race, a.conventions, a.hacking_summary, a.frontiers)
    if a.curves is not None:
        out.update(curve_readings(a.curves))
    return out


def point_words(point: float) -> str:
    """A budget point as a multiple of C: ``C/16``, ``C``, ``4C``."""
    point = float(point)
    if point >= 1:
        return "C" if point == 1 else f"{point:g}C"
    return f"C/{1 / point:g}"


def curve_readings(curve, target: str = TARGET) -> dict[str, str]:
    """One line per compute-curve figure (:mod:`paper_repro.analysis.curves`), from its tables."""
    out = {}
    fits = curve.fits[curve.fits["target"] == target] if len(curve.fits) else curve.fits
    if len(fits):
        identified = int((fits["status"] == "identified").sum())
        summary = curve.extrapolation_summary
        summary = summary[summary["target"] == target] if len(summary) else summary
        tail = ""
        if len(summary) and _finite(summary["median_abs_error"].iloc[0]):
            tail = (
                f"; fitted on the points up to C/2, C is predicted with a median absolute error of "
                f"{_num(summary['median_abs_error'].iloc[0], 2)}"
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


# ---------------------------------------------------------------------------------------- the answer

ANSWER_TABLES = ("optima", "frontiers", "claims", "rho_star_by_budget", "size_star_by_budget")
SHORT_LABELS = {"native_reward": "native reward", "gsm_pass1": "gsm pass@1", "math_pass1": "math pass@1",
                "judge_score": "judge"}  # fmt: skip
OPEN = ("inconclusive", "heterogeneous")
CURVES_MEASURED_BY = (  # {it}: what is measured
    "`make reproduce` measures {it} (every grid run evaluated along its budget ladder, into `curves.csv`)"
)


def answer_tables(source) -> dict[str, pd.DataFrame]:
    """The tables :func:`answer` reads (:data:`ANSWER_TABLES`), from an
    :class:`paper_repro.analysis.Analysis` or a results folder (``data/results/<profile>``); a table
    that is missing or empty is an empty frame."""
    from pathlib import Path

    if isinstance(source, str | Path):
        out = {}
        for name in ANSWER_TABLES:
            try:
                out[name] = pd.read_csv(Path(source) / f"{name}.csv")
            except (FileNotFoundError, pd.errors.EmptyDataError):
                out[name] = pd.DataFrame()
        return out
    curve = getattr(source, "curves", None)
    return {
        "optima": source.optima,
        "frontiers": source.frontiers,
        "claims": source.claims,
        "rho_star_by_budget": curve.rho_star if curve is not None else pd.DataFrame(),
        "size_star_by_budget": curve.size_star if curve is not None else pd.DataFrame(),
    }


def _rho(values) -> str:
    """Realised rhos as one value or a span: ``rho 0.52``, ``rho 0.16–0.84``."""
    low, high = min(values), max(values)
    return f"rho {low:.2f}" if abs(high - low) < 0.005 else f"rho {low:.2f}–{high:.2f}"


def set_words(cells, rhos=(), n_cells=None) -> str:
    """One best set in words: ``all 5 cells (rho 0.16–0.84)``, ``only r66 (rho 0.70)`` or
    ``{r40 r50} (rho 0.39–0.52)``; ``rhos``: its cells' realised rhos, ``n_cells``: how many cells
    the frontier has."""
    names = cells.split() if isinstance(cells, str) else []
    rhos = [float(r) for r in rhos if _finite(r)]
    if not names:
        return "no cell measured"
    span = f" ({_rho(rhos)})" if rhos else ""
    if len(names) == 1:
        return f"only {names[0]}{span}"
    if _finite(n_cells) and len(names) == int(n_cells):
        return f"all {int(n_cells)} cells{span}"
    return f"{{{' '.join(names)}}}{span}"


def _ordered(names, order=None) -> list[str]:
    """``names`` in ``order`` (the profile's), the rest after; without ``order``, sizes smallest first."""
    from paper_repro.analysis.curves import size_order

    names = list(dict.fromkeys(map(str, names)))
    if order is None:
        return size_order(names)
    return [n for n in order if n in names] + [n for n in names if n not in order]


def _blank(column: pd.Series) -> pd.Series:
    """Where a text column is empty (NaN or ``""``: a CSV's empty cell is read as NaN)."""
    return column.isna() | (column.astype(str) == "")


def _distinct(table: pd.DataFrame) -> pd.Series:
    """Rows of settings that are not another setting's runs (``same_runs_as`` empty)."""
    if "same_runs_as" not in table:
        return pd.Series(True, index=table.index)
    return _blank(table["same_runs_as"])


def _best_words(row: pd.Series, frontiers: pd.DataFrame) -> str:
    """An ``optima.csv`` row's best set in words, with each cell's realised rho from ``frontiers``."""
    cells = row["best_cells"] if isinstance(row["best_cells"], str) else ""
    rhos = [row.get("best_low"), row.get("best_high")]
    if len(frontiers) and cells:
        mine = frontiers[frontiers["setting"].astype(str) == str(row["setting"])].set_index("cell")["rho"]
        rhos = [mine[c] for c in cells.split() if c in mine.index] or rhos
    return set_words(cells, rhos, row.get("n_cells"))


def _one_value(frontiers: pd.DataFrame, stages, column: str) -> str:
    """The single value of ``column`` (the reward system, the policy) over ``stages``' frontier rows."""
    if frontiers.empty or column not in frontiers:
        return ""
    values = frontiers.loc[frontiers["stage"].isin(stages), column].dropna().astype(str).unique()
    return str(values[0]) if len(values) == 1 else ""


def where_lines(optima: pd.DataFrame, frontiers: pd.DataFrame, order=None, target: str = TARGET) -> list[str]:
    """Where a fixed budget should go at C (five lines): a sentence over the distinct settings; a
    bullet for stage A by policy size and one for stages B and D by reward system, each setting's cells
    that could be best for ``target`` with their realised rho; a bullet on where the other targets'
    sets differ."""
    rows = optima[optima["target"] == target] if len(optima) else optima
    label = SHORT_LABELS.get(target, target)
    if rows.empty:
        return [f"**Where a fixed budget C should go** (by {label}): no setting has a frontier yet.", "",
                "- **Stage A, by policy size:** no runs yet.", "- **Stages B and D, by reward system:** no runs yet.",
                "- **Other targets:** none measured yet."]  # fmt: skip
    distinct = rows[_distinct(rows)]
    whole = [len(str(r.best_cells).split()) == r.n_cells for r in distinct.itertuples()]
    if all(whole):
        summary = f"In all {len(distinct)} distinct settings every cell could be best: no split of the budget is ruled out."
    elif any(whole):
        summary = f"In {sum(whole)} of {len(distinct)} distinct settings every cell could be best; the others rule some cells out."
    else:
        summary = f"Each of the {len(distinct)} distinct settings rules some cells out."
    tau = float(rows["recipe_sd"].iloc[0]) if "recipe_sd" in rows else float("nan")
    allowed = f", a recipe effect of SD {_num(tau)} allowed for" if _finite(tau) and tau > 0 else ""
    out = [f"**Where a fixed budget C should go** (by {label}: the cells that could be best at 95%{allowed}, "
           f"with their realised rho). {summary}", ""]  # fmt: skip
    for stages, title, column, noun in (
        (("A",), "Stage A, by policy size", "reward_system", "reward"),
        (("B", "D"), "Stages B and D, by reward system", "model", "policy"),
    ):
        mine = {str(r["setting"]): r for _, r in rows[rows["stage"].isin(stages)].iterrows()}
        if not mine:
            out.append(f"- **{title}:** no runs yet.")
            continue
        parts = []
        for name in _ordered(mine, order):
            same = mine[name].get("same_runs_as")
            same = same if isinstance(same, str) and same else ""
            parts.append(
                f"{name} {f'= {same} (the same runs)' if same else _best_words(mine[name], frontiers)}"
            )
        fixed = _one_value(frontiers, stages, column)
        out.append(f"- **{title}**{f' ({noun} `{fixed}`)' if fixed else ''}: {'; '.join(parts)}.")
    out.append(other_targets_line(optima, frontiers, order, target))
    return out


def other_targets_line(
    optima: pd.DataFrame, frontiers: pd.DataFrame, order=None, target: str = TARGET
) -> str:
    """One bullet: where each other target's best set differs from ``target``'s, per distinct setting."""
    others = [t for t in SHORT_LABELS if t != target and t in set(optima["target"])]
    if not others:
        return "- **Other targets:** none measured yet."
    distinct = optima[_distinct(optima)]
    own = {str(r.setting): r.best_cells for r in distinct[distinct["target"] == target].itertuples()}
    parts = []
    for name in _ordered(distinct["setting"], order):
        mine = distinct[(distinct["setting"].astype(str) == name) & distinct["target"].isin(others)]
        differ: dict[str, list[str]] = {}
        for _, r in mine.iterrows():
            if r["best_cells"] != own.get(name):
                differ.setdefault(_best_words(r, frontiers), []).append(SHORT_LABELS[r["target"]])
        parts += [f"{name} {' and '.join(ts)} {words}" for words, ts in differ.items()]
    names = ", ".join(SHORT_LABELS[t] for t in others)
    if not parts:
        return f"- **Other targets** ({names}): the same sets in every setting."
    return f"- **Other targets** ({names}): the same sets, except {'; '.join(parts)}."


def size_line(size_star: pd.DataFrame, target: str = TARGET) -> str:
    """One bullet: the policy sizes that could be best at equal FLOPs at C (``size_star_by_budget.csv``)."""
    rows = size_star[size_star["target"] == target] if len(size_star) else size_star
    at_c = rows[np.isclose(rows["point"].astype(float), 1.0)] if len(rows) else rows
    if at_c.empty:
        return ("- **Which policy size at equal FLOPs:** not measured yet. size*(C) compares stage A's (policy, "
                "cell) pairs on their compute curves, and no committed run has one (`size_star_by_budget.csv` "
                f"has no row at C); {CURVES_MEASURED_BY.format(it='it')}.")  # fmt: skip
    r = at_c.iloc[0]
    sizes = str(r["best_sizes"]).split()
    which = f"only {sizes[0]}" if len(sizes) == 1 else f"{', '.join(sizes[:-1])} or {sizes[-1]}"
    return (
        f"- **Which policy size at equal FLOPs:** at C, {which} could be best (the (policy, cell) pairs "
        f"that could be best: {r['best_pairs']})."
    )


def _ends(rows: pd.DataFrame) -> list[pd.Series]:
    """A setting's rho*(C) rows at the ladder's ends: its smallest and largest point where every cell
    is measured (any point when none is)."""
    whole = rows[_blank(rows["infeasible_cells"])] if "infeasible_cells" in rows else rows
    rows = (whole if len(whole) else rows).sort_values("point")
    return [rows.iloc[0], rows.iloc[-1]] if len(rows) > 1 else [rows.iloc[0]]


def growth_line(rho_star: pd.DataFrame, size_star: pd.DataFrame, claims: pd.DataFrame, shared=(), order=None,
                target: str = TARGET) -> str:  # fmt: skip
    """One bullet: how the answer moves as the budget grows (rho*(C) at each distinct setting's ends,
    size*(C) at every point, the two curve claims' verdicts), or that the curves are not measured yet."""
    best = rho_star[rho_star["target"] == target] if len(rho_star) else rho_star
    sizes = size_star[size_star["target"] == target] if len(size_star) else size_star
    if best.empty and sizes.empty:
        return ("- **As the budget grows:** not measured yet. No committed run has its compute curve, so "
                "rho*(C) (`rho_star_by_budget.csv`) and size*(C) (`size_star_by_budget.csv`) are empty; "
                f"{CURVES_MEASURED_BY.format(it='them')}.")  # fmt: skip
    parts = []
    best = best[~best["setting"].astype(str).isin(set(shared))] if len(best) else best
    if len(best):
        ends = []
        for name in _ordered(best["setting"], order):
            steps = [
                f"{set_words(r['best_cells'], str(r.get('best_rhos', '')).split(), r.get('n_cells'))} "
                f"at {point_words(r['point'])}"
                for r in _ends(best[best["setting"].astype(str) == name])
            ]
            ends.append(f"{name} {' -> '.join(steps)}")
        parts.append("rho*(C), the cells that could be best at the ladder's ends: " + "; ".join(ends))
    if len(sizes):
        steps = [
            f"{' or '.join(str(r.best_sizes).split())} at {point_words(r.point)}"
            for r in sizes.sort_values("point").itertuples()
        ]
        parts.append("size*(C), the policy sizes that could be best at equal FLOPs: " + "; ".join(steps))
    rows = claims.set_index("id") if len(claims) else pd.DataFrame(columns=["claim", "verdict"])
    said = [f"{rows.loc[i, 'claim']}: {rows.loc[i, 'verdict']}" for i in CURVE_CLAIMS if i in rows.index]
    return f"- **As the budget grows:** {'. '.join(parts)}." + (
        f" Claims: {'; '.join(said)}." if said else ""
    )


def _largest_count(note) -> int | None:
    """The largest seed count a power note simulated (``3 seeds: 0.00, ..., 40 seeds: 0.00; ...``)."""
    counts = [int(n) for n in re.findall(r"(\d+) seeds:", str(note))]
    return max(counts) if counts else None


def decider(row: pd.Series, them: bool = False) -> str:
    """What would decide an open claim (``them``: said of several), from its power columns: the seeds
    per cell for 80% power, or that no simulated seed count reaches it (with how often a study like
    this one holds it where it is true); where its power is not simulated, its test's note."""
    it = "them" if them else "it"
    if _finite(row.get("seeds_for_80pct_power")):
        return f"about {int(row['seeds_for_80pct_power'])} seeds per cell would decide {it} in 80% of simulated studies"
    note = row.get("power_note") if isinstance(row.get("power_note"), str) else ""
    if _finite(row.get("power_now")):
        top = _largest_count(note)
        text = (f"no seed count{f' up to {top}' if top else ''} per cell decides {it} in 80% of simulated "
                "studies at the recipe effect these runs show")  # fmt: skip
        if _finite(row.get("oc_held_when_true")):
            held, true = float(row["oc_held_when_true"]), "they are" if them else "it is"
            text += (
                f", and a study like this one never holds {it} even where {true} true"
                if held == 0
                else f", and a study like this one holds {it} in {held:.0%} of studies where {true} true"
            )
        return text
    own = row.get("note")
    if note.startswith("not simulated") and isinstance(own, str) and own:
        return f"{'their' if them else 'its'} power is not simulated; the test's note: {own}"
    return f"power: {note}" if note else "its power is not simulated"


def open_sentence(rows: pd.DataFrame) -> str:
    """The open claims (inconclusive, or heterogeneous: said so), grouped by what would decide them."""
    groups: dict[str, list[pd.Series]] = {}
    for _, r in rows.iterrows():
        groups.setdefault(decider(r), []).append(r)
    out = []
    for i, same in enumerate(groups.values()):
        names = [
            r["claim"] if r["verdict"] == "inconclusive" else f"{r['claim']} ({r['verdict']})" for r in same
        ]
        out.append(
            f"{'Also open' if i else 'Open'}: {'; '.join(names)} — {decider(same[0], them=len(same) > 1)}."
        )
    return " ".join(out)


def _seeds(claims: pd.DataFrame) -> str:
    """``, at 5 seeds per full-budget cell`` from the claims table (nothing without the column)."""
    seeds = (
        pd.to_numeric(claims.get("seeds_per_cell"), errors="coerce") if "seeds_per_cell" in claims else None
    )
    if seeds is None or not seeds.notna().any():
        return ""
    n = int(seeds.max())
    return f", at {n} seed{'s' * (n != 1)} per full-budget cell"


def claims_lines(claims: pd.DataFrame) -> list[str]:
    """Two bullets: which of the paper's claims held, were refuted (not held) or stayed open, with what
    would decide the open ones; and our consistency checks and additions, counted."""
    if claims.empty:
        return ["- **The paper's claims:** not tested yet (`claims.csv` is empty).",
                "- **Our consistency checks and additions:** not tested yet."]  # fmt: skip
    paper = claims["kind"] == "paper claim"
    parts = []
    for verdict, word in (("held", "Held"), ("not held", "Refuted (not held)")):
        names = claims[paper & (claims["verdict"] == verdict)]["claim"].tolist()
        parts.append(f"{word}: {'; '.join(names) if names else 'none'}.")
    still = claims[paper & claims["verdict"].isin(OPEN)]
    parts.append(open_sentence(still) if len(still) else "None stayed open.")
    rest = claims[~paper]
    said = [f"{word}: {'; '.join(names)}." for verdict, word in (("held", "Held"), ("not held", "Not held"))
            if (names := rest[rest["verdict"] == verdict]["claim"].tolist())]  # fmt: skip
    k = int(rest["verdict"].isin(OPEN).sum())
    if k:
        said.append(f"{k} open (the claims table says what would decide each).")
    return [
        f"- **The paper's claims** ({int(paper.sum())}{_seeds(claims)}): {' '.join(parts)}",
        f"- **Our consistency checks and additions** ({len(rest)}): {' '.join(said) if said else 'none.'}",
    ]


ANSWER_LINES = 9  # what :func:`answer` returns, whatever the tables (the README's answer must end early)


def answer(tables, order=None, target: str = TARGET) -> list[str]:
    """The study's answer as :data:`ANSWER_LINES` Markdown lines, every number from ``tables``
    (:func:`answer_tables`): where a fixed budget should go, per policy size and per reward system
    (the cells that could be best, with their realised rho, and where the other targets differ); which
    policy size at equal FLOPs; how that moves as the budget grows (rho*(C), size*(C)); which of the
    paper's claims held, were refuted or stayed open, and what would decide the open ones.
    ``order``: the settings' names in the profile's order (None: sizes smallest first, else as found)."""
    get = lambda name: tables.get(name) if tables.get(name) is not None else pd.DataFrame()  # noqa: E731
    optima, claims = get("optima"), get("claims")
    shared = optima.loc[~_distinct(optima), "setting"].astype(str).tolist() if len(optima) else []
    lines = [
        *where_lines(optima, get("frontiers"), order, target),
        size_line(get("size_star_by_budget"), target),
        growth_line(get("rho_star_by_budget"), get("size_star_by_budget"), claims, shared, order, target),
        *claims_lines(claims),
    ]
    if len(lines) != ANSWER_LINES:  # the README's answer must end where tests/test_readme.py reads it
        raise ValueError(f"the answer has {len(lines)} lines, not {ANSWER_LINES}: {lines}")
    return lines


def answer_markdown(source, profile: str | None = None) -> str:
    """:func:`answer` of an :class:`paper_repro.analysis.Analysis` or a results folder as one Markdown
    text; ``profile`` (its name) orders the settings as the profile does."""
    order = None
    if profile is not None:
        from paper_repro.config import load_profile

        order = [s.name for s in load_profile(profile).all_settings()]
    return "\n".join(answer(answer_tables(source), order))
