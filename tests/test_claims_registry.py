"""The claims registry: a claim is one declaration, and everything that lists claims reads it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from paper_repro.analysis import analyse, simulate_design
from paper_repro.analysis.claims import registry
from paper_repro.analysis.claims.registry import NotSimulated, Simulated, register_claim, registered
from paper_repro.analysis.report import readme, story
from paper_repro.analysis.stats.verdict import Result
from tests.worlds import PROFILE, paper_peaks, write_runs

TOY = "toy.middle_cell_best"
TOY_SENTENCE = "toy: the middle policy's best native-reward cell lies above rho 0.5"


def _toy(study) -> Result:
    """Held when every cell that could be best for M lies above rho 0.5, not held when none does."""
    from paper_repro.analysis.stats.best_sets import setting_best

    best = setting_best(study.grid, "M", "native_reward", study.margins, estimate=False)
    if not len(best.rhos):
        return Result(note="no runs of M")
    verdict = (
        "held" if (best.rhos > 0.5).all() else "not held" if (best.rhos <= 0.5).all() else "inconclusive"
    )
    return Result(float(best.rhos.mean()), verdict=verdict, note="toy", best_cells=best.words())


TOY_DECLARATION = dict(sentence=TOY_SENTENCE, kind="our addition", paper="not tested", reads=("grid",),
                       margins=("recipe_sd",), words=lambda study: "toy: M's best set against rho 0.5",
                       simulation=Simulated(target="native_reward"),
                       unit="rho: the toy's best set's middle")  # fmt: skip


def test_a_toy_claim_is_one_declaration_and_every_consumer_finds_it(tmp_path):
    """Registered from here, with no other file touched: the toy claim has its row in claims.csv, the
    README's table, notebook 40's story and the design simulator's design.csv (and its power)."""
    results = tmp_path / "data" / "results" / PROFILE.name
    results.mkdir(parents=True)
    write_runs(results / "runs.csv", paper_peaks, noise=0.01, seeds=3)
    with registered(TOY, _toy, **TOY_DECLARATION):
        design = simulate_design(PROFILE, results, replicates=1)
        toy = design[design["claim_id"] == TOY]
        assert len(toy) == len(set(design["truth"])) and (toy["claim"] == TOY_SENTENCE).all()
        assert set(toy.loc[toy["truth"] == "peak at 0.72", "true_verdict"]) == {"held"}
        assert set(toy.loc[toy["truth"] == "peak at 0.45, symmetric", "true_verdict"]) == {"not held"}
        result = analyse(PROFILE, results, tmp_path / "figures", power_replicates=2, figures=False)
        row = pd.read_csv(results / "claims.csv").set_index("id").loc[TOY]
        assert row["claim"] == TOY_SENTENCE and row["test"] == "toy: M's best set against rho 0.5"
        # the analysis regenerated design.csv's post-hoc block (2 pairs per truth), which its oc_* read
        assert row["oc_note"].endswith("(design.csv, post-hoc block)") and np.isfinite(row["oc_wrong_max"])
        blocks = pd.read_csv(results / "design.csv").groupby("block")["claim_id"].apply(set)
        assert TOY in blocks["pre-registered"] and TOY in blocks["post-hoc"]
        assert row["power_note"].startswith("3 seeds:")
        assert row["leave_one_seed_out"].startswith(("the same", "changes"))
        assert f"| {TOY_SENTENCE} | our addition |" in readme.results_block(PROFILE.name, tmp_path)
        assert f"**{TOY_SENTENCE}: {row['verdict']}.**" in story.story(result)
    assert TOY not in {c.id for c in registry.claims()}


def test_every_declaration_is_checked_when_it_is_made():
    def declare(**changes):
        register_claim("toy.bad", **{**TOY_DECLARATION, **changes})(_toy)

    with pytest.raises(ValueError, match="kind"):
        declare(kind="a finding")
    with pytest.raises(ValueError, match="no paper value"):
        declare(paper="0.72")
    with pytest.raises(ValueError, match="reads"):
        declare(reads=("the runs",))
    with pytest.raises(ValueError, match="margins"):
        declare(margins=("width",))
    with pytest.raises(ValueError, match="what its estimate measures"):
        declare(unit=" ")
    assert "toy.bad" not in {s.id for s in registry.specs()}
    with registered(TOY, _toy, **TOY_DECLARATION), pytest.raises(ValueError, match="registered twice"):
        declare_twice = register_claim(TOY, **TOY_DECLARATION)
        declare_twice(_toy)


def test_the_registry_lists_the_claims_table_in_order_with_unique_ids():
    specs = registry.specs()
    ids = [s.id for s in specs]
    assert len(ids) == len(set(ids))
    assert ids[:3] == ["regime.rule_based.any", "regime.prm_style.any", "regime.interaction.any"]
    first_frontier = ids.index("rho_star.rule_based")  # the frontier family follows the regimes
    assert ids[first_frontier : first_frontier + 3] == [
        "rho_star.rule_based",
        "rho_star.prm_style",
        "rho_star.prm_lower",
    ]
    assert all(i.startswith(("regime.", "allocation.")) for i in ids[:first_frontier])
    at = ids.index("recipes.rho_suffices")  # sizes, then recipes, then issue 53's families
    assert ids[at - 2 : at + 1] == ["curves.grows", "size_star.top", "recipes.rho_suffices"]
    assert ids[at + 1] == "convention.rule_based.any"
    assert ids[ids.index("race.same_regime") + 1 :] == [  # stage E's claims close the table
        "test_time.rl_beats_sampling",
        "test_time.rl_narrows_passk",
        "test_time.small_rl_beats_large",
    ]
    families = [s.decide.__module__.rpartition(".")[2] for s in specs]
    assert families == sorted(families, key=registry.FAMILIES.index)  # grouped in FAMILIES order
    for s in specs:  # each says how it is simulated, and a claim that is not says why
        assert isinstance(s.simulation, (Simulated, NotSimulated, registry.OwnSimulation))
        if isinstance(s.simulation, NotSimulated):
            assert len(s.simulation.reason) > 20
