"""Stage E's test-time arms (paper_repro.evaluation.test_time): each arm's value on hand-made samples,
and each arm's FLOPs per query against FlopCounterMode on one real problem of the testbed."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from paper_repro import models
from paper_repro.accounting import flops
from paper_repro.accounting.profiling import count_flops
from paper_repro.evaluation import test_time
from paper_repro.evaluation.evaluate import pass_at_k


def _samples(correct, answers, scores, lengths=None) -> test_time.ProblemSamples:
    n = len(correct)
    return test_time.ProblemSamples(
        prompt_tokens=10,
        correct=correct,
        answers=answers,
        completion_tokens=lengths or [5] * n,
        prm_scores=scores,
        prm_tokens=[12] * n,
    )


def test_the_k_ladder_doubles_up_to_n():
    assert test_time.k_ladder(64) == (1, 2, 4, 8, 16, 32, 64)
    assert test_time.k_ladder(5) == (1, 2, 4)


def test_majority_vote_counts_answers_not_samples_right():
    # two samples say 7 (wrong), one says 9 (right): the vote is wrong though pass@3 is 1
    assert not test_time.majority_vote(["7", "9", "7"], [False, True, False])
    assert test_time.majority_vote(["9", None, None], [True, False, False])  # no answer: no vote
    assert not test_time.majority_vote([None, None], [False, False])
    assert test_time.majority_vote(["9", "7"], [True, False])  # a tie: the answer seen first


def test_each_arm_reads_its_own_group_of_k_samples():
    s = _samples(
        correct=[True, False, False, False],
        answers=["1", "2", "2", "3"],
        scores=[0.1, 0.9, 0.2, 0.8],
    )
    shape = flops.ModelShape(
        hidden_size=8,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        head_dim=4,
        intermediate_size=16,
        vocab_size=20,
    )
    k1 = test_time.arm_values(s, 1, shape, shape)
    k2 = test_time.arm_values(s, 2, shape, shape)
    assert k1["pass"] == k1["majority"] == k1["prm"] == 0.25  # one sample: every arm is its verdict
    # groups (0, 1) and (2, 3): the PRM picks sample 1 then 3 (both wrong); the vote picks "1" then "2"
    assert k2["prm"] == 0.0 and k2["majority"] == 0.5
    assert k2["pass"] == pytest.approx(pass_at_k(np.array([[True, False, False, False]]), 2))
    # two samples cost two decodes but one prefill: less than twice one sample's FLOPs
    assert k1["sample_flops"] < k2["sample_flops"] < 2 * k1["sample_flops"]
    assert k2["prm_flops"] == pytest.approx(2 * k1["prm_flops"])
    assert test_time.arm_flops("prm", 3.0, 2.0) == 5.0 and test_time.arm_flops("majority", 3.0, 2.0) == 3.0


def test_samples_of_unequal_counts_are_refused():
    with pytest.raises(ValueError, match="same number"):
        _samples(correct=[True, False], answers=["1"], scores=[0.1, 0.2])


@pytest.fixture(scope="module")
def one_problem():
    """The M policy (eager attention: FlopCounterMode cannot see the CPU sdpa kernel), the PRM and
    four samples of the first gsm problem, scored by :func:`test_time.sample_policy`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from paper_repro.evaluation.evaluate import SampleConfig
    from paper_repro.rewards.prm_scorer import PRMScorer
    from paper_repro.tasks import arith
    from paper_repro.tasks.graders import grader

    path = models.checkpoint("data/models/policy-M")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")
    # eager attention: FlopCounterMode cannot see the CPU sdpa kernel
    scorer = PRMScorer.load("data/models/prm", model_kwargs={"attn_implementation": "eager"})
    example = arith.load_split("gsm_tiny")[0]
    config = SampleConfig(n=4, temperature=1.0, max_new_tokens=96, sampler="fused", seed=3)
    sampled = test_time.sample_policy(model, tokenizer, [example], grader("arith"), scorer, "min", config)
    return model, scorer, example, sampled[0]


def _replayed_sampling(model, prompt_tokens: int, lengths) -> int:
    """What sampling one query costs, run for real: the prompt prefilled once (all but its last
    position through the body alone), then per sample its last prompt position and its completion
    decoded one token at a time against a copy of that cache (token values do not change FLOPs).
    The prefill feeds one position at a time too: eager attention scores a whole block's square
    before masking it, work the causal (useful) count leaves out."""
    ids = torch.full((1, prompt_tokens + max(lengths)), 5, dtype=torch.long)

    def run():
        with torch.inference_mode():
            prefix = None
            for t in range(prompt_tokens - 1):
                prefix = model.model(input_ids=ids[:, t : t + 1], past_key_values=prefix, use_cache=True)
                prefix = prefix.past_key_values
            for c in lengths:
                cache = copy.deepcopy(prefix)
                for t in range(prompt_tokens - 1, prompt_tokens + c - 1):
                    model(input_ids=ids[:, t : t + 1], past_key_values=cache, use_cache=True)

    return count_flops(run)[1]


def _replayed_reading(prm, lengths) -> int:
    """What the PRM's reading of each solution costs, run for real: every position through the LM and
    its head (the likelihood PRM reads each token's probability), one position at a time against the
    cache (the causal work; eager attention would score a whole block's square)."""
    ids = torch.full((1, max(lengths)), 5, dtype=torch.long)

    def run():
        with torch.inference_mode():
            for n in lengths:
                cache = None
                for t in range(n):
                    out = prm(input_ids=ids[:, t : t + 1], past_key_values=cache, use_cache=True, score=False)
                    cache = out.past_key_values

    return count_flops(run)[1]


@pytest.mark.slow  # about a minute on a loaded 2-core machine: FlopCounterMode over ~200 one-token passes
def test_each_arms_flops_match_the_profiler_on_one_problem(one_problem):
    model, scorer, _, sampled = one_problem
    samples = sampled["samples"]
    shape = flops.ModelShape.from_config(model.config)
    values = test_time.arm_values(samples, 4, shape, scorer.shape)  # one group: the four samples
    measured_samples = _replayed_sampling(model, samples.prompt_tokens, samples.completion_tokens)
    assert abs(measured_samples / values["sample_flops"] - 1) <= 0.005
    measured_prm = _replayed_reading(scorer.model, samples.prm_tokens)
    assert abs(measured_prm / values["prm_flops"] - 1) <= 0.005
    for arm, measured in (
        ("pass", measured_samples),
        ("majority", measured_samples),
        ("prm", measured_samples + measured_prm),
    ):
        assert (
            abs(measured / test_time.arm_flops(arm, values["sample_flops"], values["prm_flops"]) - 1) <= 0.005
        )
    # the greedy answer is one sample of the same model
    greedy = test_time.sampling_flops(shape, samples.prompt_tokens, [sampled["greedy_tokens"]])
    assert (
        abs(_replayed_sampling(model, samples.prompt_tokens, [sampled["greedy_tokens"]]) / greedy - 1)
        <= 0.005
    )


@pytest.mark.slow  # its fixture samples the M policy and loads the PRM
def test_sampled_problems_carry_what_the_arms_read(one_problem):
    _, _, example, sampled = one_problem
    samples = sampled["samples"]
    assert len(samples.correct) == 4 and all(1 <= c <= 96 for c in samples.completion_tokens)
    assert all(0.0 <= s <= 1.0 for s in samples.prm_scores)
    # a sample's vote is its final answer: right exactly when it equals the problem's answer
    for answer, right in zip(samples.answers, samples.correct, strict=True):
        assert right == (answer == str(example.answer))


def test_the_envelope_mixes_points_and_drops_those_below_a_mix():
    from paper_repro.analysis.tables.test_time import at_budget, budget_for, envelope

    # (2, 0.3) lies below the mix of (1, 0.4) and (3, 0.6): dropped; (4, 0.5) reaches less than (3, 0.6)
    hull = envelope([(1.0, 0.4), (2.0, 0.3), (3.0, 0.6), (4.0, 0.5)])
    assert hull == [(0.0, 0.0), (1.0, 0.4), (3.0, 0.6)]
    assert at_budget(hull, 2.0) == pytest.approx(0.5)  # half the queries each way
    assert at_budget(hull, 0.5) == pytest.approx(0.2)  # half the queries unanswered
    assert at_budget(hull, 10.0) == pytest.approx(0.6)
    assert budget_for(hull, 0.5) == pytest.approx(2.0) and budget_for(hull, 0.7) == float("inf")


def test_break_even_queries_pay_back_the_training_flops():
    from paper_repro.analysis.tables.test_time import break_even, envelope

    hull = envelope([(1.0, 0.4), (3.0, 0.6)])
    # RL: 0.5 at 1 FLOP a query after 100 training FLOPs; the base needs 2 a query for 0.5: it
    # gets 100 / Q + 1 at equal totals, enough until Q = 100 / (2 - 1)
    assert break_even(100.0, 1.0, 0.5, hull) == pytest.approx(100.0)
    assert break_even(100.0, 1.0, 0.7, hull) == 0.0  # the base never reaches 0.7: RL wins at any Q
    assert break_even(100.0, 2.5, 0.5, hull) == float("inf")  # the base reaches it for less than RL pays


def test_a_claims_rule_says_held_only_beyond_noise():
    from paper_repro.analysis.tables.test_time_claims import interval, operating, verdict

    rng = np.random.default_rng(1)
    flat = rng.normal(0.0, 0.3, (3, 200))
    shifted = flat + 0.3
    assert verdict(*interval(shifted, rng)[1:], 1) == "held"
    assert verdict(*interval(-shifted, rng)[1:], 1) == "not held"
    assert verdict(*interval(shifted, rng)[1:], -1) == "not held"
    oc = operating(flat, 1)
    assert oc["false_held"] <= 0.1 and oc["power"] >= 0.5  # 5 points on 600 paired draws: seen


def test_the_notebooks_design_is_validated_and_never_mixed(tmp_path):
    from paper_repro.common.results import ResultTable
    from paper_repro.drivers.test_time import (
        POLICY_COLUMNS,
        QUICK,
        StageE,
        _check_same_design,
        stage_e_design,
    )

    assert stage_e_design(quick=True, n=4) == StageE(n=4, problems=QUICK.problems, seeds=QUICK.seeds)
    with pytest.raises(TypeError, match="problems: expected a positive integer"):
        stage_e_design(problems="100")
    table = ResultTable(tmp_path / "test_time_policies.csv", POLICY_COLUMNS, key="policy_id")
    table.append({"policy_id": "base-M", "n": 64, "problems": 100, "status": "ok"})
    _check_same_design(table, StageE(n=64, problems=100))  # the same design: more policies may join
    with pytest.raises(ValueError, match=r"\(n, problems\)"):
        _check_same_design(table, StageE(n=16, problems=100))


def test_a_stage_e_worker_silences_the_known_library_warnings_before_it_samples(monkeypatch):
    """A spawned worker starts without the study's warning filters: each task sets them first, so the
    executed notebook 60 holds no library FutureWarning from a retraining worker."""
    from paper_repro.common import quiet
    from paper_repro.drivers import test_time as stage

    calls = []
    monkeypatch.setattr(quiet, "quiet_libraries", lambda: calls.append("quiet"))
    monkeypatch.setattr(stage, "_sample_base", lambda *a: calls.append("sample") or {})
    stage._Task(None, None, None, "prm", None, None)()
    assert calls == ["quiet", "sample"]
