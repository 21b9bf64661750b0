"""The study's answer, which the README (:mod:`paper_repro.analysis.report.readme`) and notebook 40
open with, generated from its tables (:func:`answer`): where a fixed budget should go per policy
size and per reward system (the cells that could be best, ``optima.csv``, with their realised rho,
``frontiers.csv``), which size at equal FLOPs and how both move with the budget
(``size_star_by_budget.csv``, ``rho_star_by_budget.csv``; or that they are not measured yet), and
which of the paper's claims held, were refuted or stayed open, with what would decide the open ones
(``claims.csv``'s power columns). No number is typed here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from paper_repro.analysis.report.plain import largest_count, plain_answer
from paper_repro.analysis.report.story import CURVE_CLAIMS, TARGET
from paper_repro.analysis.wording import finite, num, percent, point_words
from paper_repro.common.results import TARGET_SHORT

ANSWER_TABLES = ("optima", "frontiers", "claims", "rho_star_by_budget", "size_star_by_budget", "conventions")
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
        "conventions": source.conventions,
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
    rhos = [float(r) for r in rhos if finite(r)]
    if not names:
        return "no cell measured"
    span = f" ({_rho(rhos)})" if rhos else ""
    if len(names) == 1:
        return f"only {names[0]}{span}"
    if finite(n_cells) and len(names) == int(n_cells):
        return f"all {int(n_cells)} cells{span}"
    return f"{{{' '.join(names)}}}{span}"


def _ordered(names, order=None) -> list[str]:
    """``names`` in ``order`` (the profile's), the rest after; without ``order``, sizes smallest first."""
    from paper_repro.analysis.tables.curve_rows import size_order

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
    label = TARGET_SHORT.get(target, target)
    if rows.empty:
        return [
            f"**Where a fixed budget C should go** (by {label}): no setting has a frontier yet.",
            "",
            "- **Stage A, by policy size:** no runs yet.",
            "- **Stages B and D, by reward system:** no runs yet.",
            "- **Other targets:** none measured yet.",
        ]
    distinct = rows[_distinct(rows)]
    whole = [len(str(r.best_cells).split()) == r.n_cells for r in distinct.itertuples()]
    if all(whole):
        summary = f"In all {len(distinct)} distinct settings every cell could be best: no split of the budget is ruled out."
    elif any(whole):
        summary = f"In {sum(whole)} of {len(distinct)} distinct settings every cell could be best; the others rule some cells out."
    else:
        summary = f"Each of the {len(distinct)} distinct settings rules some cells out."
    tau = float(rows["recipe_sd"].iloc[0]) if "recipe_sd" in rows else float("nan")
    allowed = f", a recipe effect of SD {num(tau)} allowed for" if finite(tau) and tau > 0 else ""
    out = [
        f"**Where a fixed budget C should go** (by {label}: the cells that could be best at 95%{allowed}, "
        f"with their realised rho). {summary}",
        "",
    ]
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
    others = [t for t in TARGET_SHORT if t != target and t in set(optima["target"])]
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
                differ.setdefault(_best_words(r, frontiers), []).append(TARGET_SHORT[r["target"]])
        parts += [f"{name} {' and '.join(ts)} {words}" for words, ts in differ.items()]
    names = ", ".join(TARGET_SHORT[t] for t in others)
    if not parts:
        return f"- **Other targets** ({names}): the same sets in every setting."
    return f"- **Other targets** ({names}): the same sets, except {'; '.join(parts)}."


def size_line(size_star: pd.DataFrame, target: str = TARGET) -> str:
    """One bullet: the policy sizes that could be best at equal FLOPs at C (``size_star_by_budget.csv``)."""
    rows = size_star[size_star["target"] == target] if len(size_star) else size_star
    at_c = rows[np.isclose(rows["point"].astype(float), 1.0)] if len(rows) else rows
    if at_c.empty:
        return (
            "- **Which policy size at equal FLOPs:** not measured yet. size*(C) compares stage A's (policy, "
            "cell) pairs on their compute curves, and no committed run has one (`size_star_by_budget.csv` "
            f"has no row at C); {CURVES_MEASURED_BY.format(it='it')}."
        )
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


def growth_line(
    rho_star: pd.DataFrame,
    size_star: pd.DataFrame,
    claims: pd.DataFrame,
    shared=(),
    order=None,
    target: str = TARGET,
) -> str:
    """One bullet: how the answer moves as the budget grows (rho*(C) at each distinct setting's ends,
    size*(C) at every point, the two curve claims' verdicts), or that the curves are not measured yet."""
    best = rho_star[rho_star["target"] == target] if len(rho_star) else rho_star
    sizes = size_star[size_star["target"] == target] if len(size_star) else size_star
    if best.empty and sizes.empty:
        return (
            "- **As the budget grows:** not measured yet. No committed run has its compute curve, so "
            "rho*(C) (`rho_star_by_budget.csv`) and size*(C) (`size_star_by_budget.csv`) are empty; "
            f"{CURVES_MEASURED_BY.format(it='them')}."
        )
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


def decider(row: pd.Series, them: bool = False) -> str:
    """What would decide an open claim (``them``: said of several), from its power columns: the seeds
    per cell for 80% power, or that no simulated seed count reaches it (with how often a study like
    this one holds it where it is true); where its power is not simulated, its test's note."""
    it = "them" if them else "it"
    if finite(row.get("seeds_for_80pct_power")):
        return f"about {int(row['seeds_for_80pct_power'])} seeds per cell would decide {it} in 80% of simulated studies"
    note = row.get("power_note") if isinstance(row.get("power_note"), str) else ""
    if finite(row.get("power_now")):
        top = largest_count(note)
        text = (
            f"no seed count{f' up to {top}' if top else ''} per cell decides {it} in 80% of simulated "
            "studies at the recipe effect these runs show"
        )
        if finite(row.get("oc_held_when_true")):
            held, true = float(row["oc_held_when_true"]), "they are" if them else "it is"
            text += (
                f", and a study like this one never holds {it} even where {true} true"
                if held == 0
                else f", and a study like this one holds {it} in {percent(held)} of studies where {true} true"
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
        return [
            "- **The paper's claims:** not tested yet (`claims.csv` is empty).",
            "- **Our consistency checks and additions:** not tested yet.",
        ]
    paper = claims["kind"] == "paper claim"
    parts = []
    for verdict, word in (("held", "Held"), ("not held", "Refuted (not held)")):
        names = claims[paper & (claims["verdict"] == verdict)]["claim"].tolist()
        parts.append(f"{word}: {'; '.join(names) if names else 'none'}.")
    still = claims[paper & claims["verdict"].isin(OPEN)]
    parts.append(open_sentence(still) if len(still) else "None stayed open.")
    described = claims["kind"] == "description"  # where rho* lies: not counted among the decided
    rest = claims[~paper & ~described]
    said = [
        f"{word}: {'; '.join(names)}."
        for verdict, word in (("held", "Held"), ("not held", "Not held"))
        if (names := rest[rest["verdict"] == verdict]["claim"].tolist())
    ]
    k = int(rest["verdict"].isin(OPEN).sum())
    if k:
        said.append(f"{k} open (the claims table says what would decide each).")
    return [
        f"- **The paper's claims** ({int(paper.sum())}{_seeds(claims)}): {' '.join(parts)}",
        f"- **Our consistency checks and additions** ({len(rest)}): {' '.join(said) if said else 'none.'}"
        + (
            f" The {int(described.sum())} descriptions of where each class's rho* lies (on each target) are not "
            "counted: their test cannot hold at this design, and the regime contrasts decide the optima."
            if described.any()
            else ""
        ),
    ]


def regime_line(claims: pd.DataFrame) -> str:
    """The paper's optima asked as contrasts (``regime.*`` at the "any recipe at this rho" level):
    each verdict with its estimate and interval, whether it was registered before the runs, and its
    operating characteristics at this design (wrong, held when true, not held when false) beside it."""
    if claims.empty or "id" not in claims:
        return "- **The paper's optima as contrasts:** not tested yet (`claims.csv` is empty)."
    rows = claims[claims["id"].astype(str).str.match(r"regime\..*\.any$")]
    if rows.empty:
        return "- **The paper's optima as contrasts:** not in this claims table."
    said = []
    for _, r in rows.iterrows():
        value = (
            f"{float(r['our_value']):+.3f} (90% {float(r['ci_low']):+.3f} to {float(r['ci_high']):+.3f})"
            if finite(r.get("our_value")) and finite(r.get("ci_low"))
            else "no estimate"
        )
        oc = (
            f"wrong in at most {percent(r.get('oc_wrong_max'))} of simulated studies, held in "
            f"{percent(r.get('oc_held_when_true'))} where true, not held in {percent(r.get('oc_not_held_when_false'))} "
            "where false"
        )
        said.append(f"{r['claim'].split(' [')[0]}: **{r['verdict']}**, {value}; {oc}")
    registered = set(rows.get("registration", pd.Series(dtype=str)).dropna().astype(str)) - {""}
    how = (
        "registered after these runs, so exploratory"
        if registered == {"exploratory"}
        else "registered before these runs"
        if registered == {"pre-registered"}
        else "registration unknown"
    )
    return (
        f"- **The paper's optima as contrasts** (the update-heavy window's cells minus the search-heavy "
        f"window's, native reward, any recipe at each rho; {how}): " + "; ".join(said) + "."
    )


ANSWER_LINES = 10  # what :func:`answer` returns, whatever the tables (the README's answer must end early)


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
        regime_line(claims),
        *claims_lines(claims),
    ]
    if len(lines) != ANSWER_LINES:  # the README's answer must end where tests/test_readme.py reads it
        raise ValueError(f"the answer has {len(lines)} lines, not {ANSWER_LINES}: {lines}")
    return lines


def answer_markdown(source, profile: str | None = None, quick: bool = False) -> str:
    """The answer of an :class:`paper_repro.analysis.Analysis` or a results folder as one Markdown
    text: in plain words (:func:`paper_repro.analysis.report.plain.plain_answer`), then in detail
    (:func:`answer`); ``profile`` (its name) orders the settings as the profile does, and gives the
    margins and the models' size the plain words name. ``quick``: a
    smoke run's, which says so first (:meth:`paper_repro.config.Profile.quick_note`)."""
    order, head, full = None, [], None
    if profile is not None:
        from paper_repro.config import load_profile

        full = load_profile(profile)
        order = [s.name for s in full.all_settings()]
        head = [full.quick_note(), ""] if quick else []
    tables = answer_tables(source)
    plain = plain_answer(tables["claims"], full, tables["conventions"])
    return "\n".join([*head, *plain, "", "**In detail.**", "", *answer(tables, order)])
