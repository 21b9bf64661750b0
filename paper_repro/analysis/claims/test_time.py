"""Stage E's three claims in the registry (issue 54): RL against test-time sampling at equal FLOPs.

Each is decided, per policy size (or pair of sizes) and evaluation set, by the rules of
:mod:`paper_repro.analysis.tables.test_time_claims`, fixed before stage E's runs
(:data:`~paper_repro.analysis.tables.test_time_claims.REGISTERED`): a seed x problem matrix of
paired differences, a percentile bootstrap over seeds and problems, held / not held / inconclusive
by which side of 0 the 95% interval lies. This module only declares them; the decisions, intervals
and simulations are that module's, so ``claims.csv``'s rows equal ``test_time_claims.csv``'s.

They read stage E's per-problem rows (:attr:`Study.test_time`, ``test_time/*.csv``), which exist
once ``paper-repro run --stage test_time`` has run; before, each claim is one row, inconclusive,
whose note says stage E has not run. The study runs the analysis before stage E, so stage E's step
decides these rows of ``claims.csv`` again once its own are written
(:func:`paper_repro.analysis.pipeline.refresh_claims`). Leaving a grid seed out drops its retrained RL policy's rows
too (:meth:`Study.without_seed`).
"""

from __future__ import annotations

import itertools

import pandas as pd

from paper_repro.analysis.claims.columns import NO_OC
from paper_repro.analysis.claims.registry import OwnSimulation, Variant, register_claim
from paper_repro.analysis.claims.study import Study
from paper_repro.analysis.stats.verdict import NAN, Result
from paper_repro.analysis.tables import test_time_claims as rules

SETS = {"gsm": "gsm", "heldout": "held-out"}  # the sets stage E samples, as the sentences name them
NOT_RUN = "not run: stage E's rows are not in this folder (paper-repro run --profile P --stage test_time)"
WORDS = {
    "test_time.rl_beats_sampling": "RL's greedy answer minus the base's best mix of greedy and majority vote @k at "
    "RL's greedy FLOPs per query, per problem; held if its 95% interval (bootstrap over seeds and problems) is "
    "above 0 (RL wins beyond a finite Q*), not held if below (no Q* exists)",
    "test_time.rl_narrows_passk": "(pass@kmax(RL) - pass@kmax(base)) - (pass@1(RL) - pass@1(base)), per problem, "
    "kmax the largest k sampled; held if its 95% interval (bootstrap over seeds and problems) is below 0, not "
    "held if above",
    "test_time.small_rl_beats_large": "the smaller RL policy's best mix of greedy and majority vote @k at the larger "
    "base's greedy FLOPs per query minus the larger base's greedy answer, per problem; held if its 95% interval "
    "(bootstrap over seeds and problems) is above 0, not held if below",
}


def _decided(study: Study) -> tuple[pd.DataFrame, dict]:
    """Stage E's claims decided once per study: the rules' table (no simulation) and each claim's
    difference matrix, keyed by (id, where, set)."""
    cache = study.__dict__.setdefault("_own", {})
    if "test_time" not in cache:
        rows = study.test_time
        kinds = rows.groupby("size")["kind"].agg(set)  # a size needs its base and an RL policy
        order = [s for s in study.classes.sizes if {"base", "rl"} <= kinds.get(s, set())]
        table = rules.claims_table(rows, order, simulate=False)
        diffs = {(d["id"], d["where"], d["set"]): d for d in rules.differences(rows, order)}
        cache["test_time"] = (table.set_index(["id", "where", "set"]), diffs)
    return cache["test_time"]


def decide(study: Study, id: str, where: str | None = None, set_name: str | None = None) -> Result:
    """The rules' verdict of claim ``id`` at ``where`` (a size, or "S<M") on ``set_name``; a note that
    stage E has not run where its rows are absent."""
    if where is None or study.test_time is None:
        return Result(note=NOT_RUN)
    table, _ = _decided(study)
    if (id, where, set_name) not in table.index:  # a seed or size left out leaves no RL policy here
        return Result(note=f"no stage-E rows of {where} on {set_name} in this study")
    r = table.loc[(id, where, set_name)]
    note = f"{int(r.seeds)} RL seeds x {int(r.problems)} problems, paired with the base's samples"
    return Result(float(r.estimate), float(r.ci_low), float(r.ci_high), str(r.verdict), note)


def operating(study: Study, id: str, where: str | None = None, set_name: str | None = None) -> dict:
    """The claims table's ``oc_*`` and ``power_*`` columns from the rules' own simulation
    (:func:`paper_repro.analysis.tables.test_time_claims.operating`) at this row's seeds, problems and
    the spreads its differences show."""
    if where is None or study.test_time is None or (id, where, set_name) not in _decided(study)[1]:
        words = "not simulated: stage E has not run"
        return {
            **NO_OC,
            "oc_note": words,
            "power_now": NAN,
            "seeds_for_80pct_power": NAN,
            "power_note": words,
        }
    d = _decided(study)[1][(id, where, set_name)]
    oc = rules.operating(d["diff"], d["direction"])
    verdicts = {  # per truth: the shares of held and not held (the rest inconclusive)
        "0": (oc["false_held"], oc["false_not_held"]),
        "true": (oc["power"], oc["true_not_held"]),
        "false": (oc["false_held_reverse"], oc["power_not_held"]),
    }
    wrong = {"0": oc["false_held"], "true": oc["true_not_held"], "false": oc["false_held_reverse"]}
    worst = max(wrong, key=wrong.get)
    truths = {"0": "a true difference of 0", "true": f"{rules.EFFECT:+.2f} on the claimed side"}
    truths["false"] = f"{rules.EFFECT:.2f} on the other side"
    seeds, problems = d["diff"].shape
    return {
        "oc_wrong_max": wrong[worst],
        "oc_wrong_truth": truths[worst] if wrong[worst] > 0 else "",
        "oc_agreement_min": min(h**2 + n**2 + (1 - h - n) ** 2 for h, n in verdicts.values()),
        "oc_held_when_true": oc["power"],
        "oc_not_held_when_false": oc["power_not_held"],
        "oc_note": f"{rules.REPLICATES} simulated studies per truth ({seeds} seeds x {problems} problems, this "
        f"row's seed and problem spreads): at 0 held {oc['false_held']:.2f}, not held {oc['false_not_held']:.2f}",
        "power_now": oc["power"],
        "seeds_for_80pct_power": NAN,
        "power_note": f"held when the true difference is {rules.EFFECT:.2f} on the claimed side, at this row's seeds "
        "and problems (other designs not simulated)",
    }


def _variants(id: str, pairs: bool):
    """Per size (``pairs``: per pair of neighbouring sizes) and set in stage E's rows; one row saying
    it has not run without them."""

    def variants(study: Study) -> list[Variant]:
        rows = study.test_time
        if rows is None:
            return [Variant("", {"id": id}, {"where": "each size", "set": "each set"})]
        sizes = [s for s in study.classes.sizes if s in set(rows["size"])]
        wheres = [f"{a}<{b}" for a, b in itertools.pairwise(sizes)] if pairs else sizes
        return [
            Variant(f".{w}.{s}", {"id": id, "where": w, "set_name": s}, {"where": w, "set": SETS.get(s, s)})
            for s in sorted(set(rows["set"]))
            for w in wheres
        ]

    return variants


def _declare(id: str, sentence: str, unit: str, pairs: bool = False) -> None:
    register_claim(
        id,
        sentence=sentence,
        kind="our addition",
        paper="not tested",
        reads=("test_time",),
        unit=unit,
        simulation=OwnSimulation(
            operating, "a true paired difference of 0 and of +-0.05 at the data's seed and problem spreads"
        ),
        variants=_variants(id, pairs),
        registered=rules.REGISTERED,
        words=lambda study, **params: WORDS[id],
    )(decide)


_declare(
    "test_time.rl_beats_sampling",
    f"{rules.CLAIMS['test_time.rl_beats_sampling']} ({{where}}, {{set}})",
    "RL's greedy accuracy minus the base's at RL's greedy FLOPs per query (mean over seeds and problems)",
)
_declare(
    "test_time.rl_narrows_passk",
    f"{rules.CLAIMS['test_time.rl_narrows_passk']} ({{where}}, {{set}})",
    "RL's pass@kmax gain over the base minus its pass@1 gain (mean over seeds and problems)",
)
_declare(
    "test_time.small_rl_beats_large",
    f"{rules.CLAIMS['test_time.small_rl_beats_large']} ({{where}}, {{set}})",
    "the smaller RL policy's accuracy at the larger base's greedy FLOPs per query minus the larger base's greedy "
    "accuracy (mean over seeds and problems)",
    pairs=True,
)
