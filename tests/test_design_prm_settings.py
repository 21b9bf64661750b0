"""The PRM-style settings family (``paper-repro design --candidates --family prm-settings``): which
further PRM-style settings the project can run, how a PRM aggregation becomes a setting of its own,
and the ladder of candidates up to every one of them."""

from __future__ import annotations

import pytest

from paper_repro.analysis.claims.study import Classes
from paper_repro.analysis.design import prm_settings as ps
from paper_repro.analysis.design.candidates import classes_of, family_claims, layout_of, window_targets
from paper_repro.config import load_profile
from paper_repro.run import design_cost as dc

PROFILE = load_profile("cpu-tiny")


def test_the_extra_prm_settings_are_the_other_policies_then_the_other_aggregation():
    extra = ps.extra_settings(PROFILE)
    # the profile runs proxy_prm and prm on M: the other policies first (L, whose cap reaches the
    # update-heavy window, before S), then the mean aggregation of both on every policy
    assert extra[:4] == [("L", "proxy_prm"), ("L", "prm"), ("S", "proxy_prm"), ("S", "prm")]
    assert extra[4:] == [(p, r, "mean") for p in ("L", "M", "S") for r in ("proxy_prm", "prm")]
    assert ps.trained_aggregation() == "min" and ps.other_aggregations() == ("mean",)


def test_an_aggregation_is_a_setting_of_its_own_priced_and_planned_as_its_reward():
    one = dc.Candidate.from_profile(PROFILE, more_settings=(("L", "prm"),))
    two = dc.Candidate.from_profile(PROFILE, more_settings=(("L", "prm"), ("L", "prm", "mean")))
    assert [s.name for s in dc.more_settings(two)] == ["prm@L", "prm-mean@L"]
    assert {s.reward_system for s in dc.more_settings(two)} == {"prm"}
    runs = {
        c: sum(j.count for j in dc.jobs(c, PROFILE)) for c in (dc.Candidate.from_profile(PROFILE), one, two)
    }
    base, with_one, with_two = runs.values()
    assert with_two - base == 2 * (with_one - base) > 0  # the same grid again: the aggregation is free
    names = [s.name for s in dc.distinct_settings(PROFILE)]
    layout = layout_of(two, PROFILE, names)
    assert layout.cells["prm-mean@L"] == layout.cells["prm@L"]
    classes = classes_of(two, Classes.of(PROFILE, dc.shared_settings(PROFILE)))
    assert {"prm@L", "prm-mean@L"} <= set(classes.prm_style)


def test_the_family_climbs_to_every_prm_style_setting_and_says_which_need_new_code():
    listed = ps.prm_settings_candidates(PROFILE, window_targets(PROFILE, dc.WINDOW_TARGETS))
    assert listed[0].name == "chosen" and len({c.name for c in listed}) == len(listed)
    settings = {c.name: 2 + len(c.more_settings) for c in listed[1:]}
    assert sorted(set(settings.values())) == list(ps.LADDER)
    for c in listed[1:]:
        novel = any(len(m) > 2 for m in c.more_settings)
        assert ("needs new code" in c.note) == novel, c.name
        assert c.name.startswith(f"{2 + len(c.more_settings)} PRM-style settings")
    # the family simulates the regime contrasts alone
    assert {c.id.rsplit(".", 1)[0] for c in family_claims("prm-settings")} == {
        "regime.rule_based",
        "regime.prm_style",
        "regime.interaction",
    }
    assert family_claims("prm-arm") is None


def test_the_target_claims_join_a_familys_claims_when_asked_and_a_bad_prefix_fails_first():
    """``--with-claims targets.``: the target claims simulate their own table on the committed
    layout, and the design simulator can run them too, so the candidates can be compared on them."""
    from paper_repro.analysis.design import characteristics as oc

    ids = [c.id for c in family_claims("prm-settings", ("targets.",))]
    regimes = [c.id for c in family_claims("prm-settings")]
    assert ids[: len(regimes)] == regimes
    added = ids[len(regimes) :]
    assert added and all(i.startswith("targets.") for i in added)
    assert "targets.gsm_judge.pooled.any" in added and "targets.pass1_high_judge_mid.these" in added
    # a "these recipes" target claim is scored against the cells as drawn, an "any recipe" one the frontier
    by_id = {c.id: c for c in oc.design_claims(("targets.",))}
    assert oc.about_cells(by_id["targets.gsm_judge.pooled.these"])
    assert not oc.about_cells(by_id["targets.gsm_judge.pooled.any"])
    everything = [c.id for c in family_claims("prm-arm", ("targets.",))]
    assert everything == [*(c.id for c in oc.simulated_claims()), *added]
    with pytest.raises(ValueError, match=r"'conventions\.'.*these can"):
        family_claims("prm-arm", ("conventions.",))  # simulated on the committed layout only
