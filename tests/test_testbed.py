"""The cpu-tiny testbed: tokenizer/model building, the PRM interface, and the committed checkpoints."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from paper_repro import testbed
from paper_repro.common.paths import repo_root
from paper_repro.evaluation import evaluate
from paper_repro.rewards import prm_scorer as prm
from paper_repro.tasks import arith

BASE_TABLE = repo_root() / "data/results/cpu-tiny/base_models.csv"
MODELS = repo_root() / "data/models"


def test_auroc_against_hand_worked_cases():
    assert prm.auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)
    assert prm.auroc([0.5, 0.5, 0.5], [0, 1, 1]) == pytest.approx(0.5)  # ties count one half
    assert prm.auroc([0.9, 0.1], [0, 1]) == 0.0
    assert math.isnan(prm.auroc([0.2, 0.3], [1, 1]))


def test_pass_at_k_estimator():
    correct = np.array([[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=bool)
    assert evaluate.pass_at_k(correct, 1) == pytest.approx((0.25 + 0 + 1) / 3)
    assert evaluate.pass_at_k(correct, 4) == pytest.approx(2 / 3)
    # one correct of four, two draws: 1 - C(3,2)/C(4,2) = 0.5
    assert evaluate.pass_at_k(correct[:1], 2) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="pass@5 needs at least 5 samples"):
        evaluate.pass_at_k(correct, 5)
    assert math.isnan(evaluate.pass_at_k(np.zeros((0, 4), dtype=bool), 1))


def test_prm_features_train_on_the_right_steps_only():
    """The PRM's LM loss is on the tokens of the right steps and their separators: the problem and
    every wrong step are masked, so the PRM learns what a right next step is."""
    tokenizer = testbed.build_tokenizer()
    record = {"prompt": "2, add 3, times 2, add 1?\n", "steps": ["2+3=5", "5*2=11", "11+1=12"],
              "labels": [True, False, True]}  # fmt: skip
    feats = testbed.prm_features(tokenizer, [record])
    ids, labels = feats["input_ids"][0], feats["labels"][0]
    assert tokenizer.decode(ids) == prm.prm_text(record["prompt"], record["steps"])
    learned = tokenizer.decode([t for t, lab in zip(ids, labels, strict=True) if lab != -100])
    assert learned == "2+3=5<extra_0>11+1=12<extra_0>"
    assert all(lab in (-100, t) for t, lab in zip(ids, labels, strict=True))


def test_prm_training_data_is_fresh_and_never_an_evaluation_prompt():
    splits = arith.build_splits(0.05, testbed.PRM_ERROR_RATE)
    taken = {r["prompt"] for records in splits.values() for r in records}
    records = testbed.prm_training_records(2000, taken)
    assert not {r["prompt"] for r in records} & taken
    wrong = sum(not v for r in records for v in r["labels"]) / sum(len(r["labels"]) for r in records)
    assert 0.2 < wrong < 0.45  # slips at PRM_ERROR_RATE, plus the steps an operation slip leaves right
    kinds = {k for r in records for k in r["kinds"]}
    assert kinds == {None, *arith.SLIP_KINDS}
    assert records == testbed.prm_training_records(2000, taken)  # a seed fixes the stream


def test_the_likelihood_prm_scores_a_step_by_its_least_likely_token():
    """Hand-made logits: the score at each separator is exp of the smallest next-token log-prob of
    its step (separator included); the problem's tokens never count; a step restarts the minimum."""
    import torch

    from paper_repro.rewards.likelihood_prm import step_probabilities

    sep, end = 9, 8
    ids = torch.tensor([[5, 8, 1, 2, 9, 3, 9]])  # problem "5 end", step "1 2 sep", step "3 sep"
    logp = torch.log(torch.tensor([[1.0, 0.1, 0.9, 0.5, 0.8, 0.7, 0.95]]))
    p = step_probabilities(logp, ids, sep, end)
    assert p[0, 4].item() == pytest.approx(0.5) and p[0, 6].item() == pytest.approx(0.7)
    assert p[0, 2].item() == pytest.approx(0.9)  # the step so far


def test_random_model_is_seeded_and_speaks_the_tokenizers_ids(tmp_path):
    """The one builder of random tiny Qwen2s: a seed fixes the weights; a policy pads and stops
    generating with the tokenizer's pad and eos; a PRM loads back from its directory alone (its
    modelling code ships with it) and gives two outputs per position."""
    import torch

    tokenizer = testbed.build_tokenizer()
    a, b, c = (testbed.random_model(tokenizer=tokenizer, seed=s) for s in (0, 0, 1))
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)
    assert a.generation_config.eos_token_id == tokenizer.eos_token_id
    assert a.generation_config.pad_token_id == tokenizer.pad_token_id
    testbed.random_model(tokenizer=tokenizer, head="prm").save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "likelihood_prm.py").exists()
    scorer = prm.PRMScorer.load(tmp_path)
    assert type(scorer.model).__name__ == "Qwen2LikelihoodPRM" and scorer.format is prm.plain_format
    logits = scorer.model(**tokenizer(["2+3=5<extra_0>"], return_tensors="pt")).logits
    assert logits.shape[-1] == 2
    (scores,) = scorer.step_scores(["2, add 3?\n"], [["2+3=5", "5+1=6"]])
    assert len(scores) == 2 and all(0 < s < 1 for s in scores)
    with pytest.raises(ValueError, match="head must be 'lm', 'prm' or 'token-classification'"):
        testbed.random_model(head="value")


# build_all end to end (a tiny testbed, then a partial rebuild): tests/test_notebooks.py runs notebook
# 00 at that scale.


def test_config_rejects_bad_input():
    with pytest.raises(ValueError, match="unknown policy sizes \\['XL'\\]"):
        testbed.BuildConfig(sizes=("S", "XL"))
    with pytest.raises(ValueError, match="steps_scale"):
        testbed.BuildConfig(steps_scale=0)


# ------------------------------------------------------------------------- the committed testbed


@pytest.fixture(scope="module")
def base_table():
    if not BASE_TABLE.exists():
        pytest.fail(f"{BASE_TABLE} is missing: run notebook 00_embedded_models")
    return pd.read_csv(BASE_TABLE).set_index("model")


def test_committed_base_policies_meet_the_testbed_contract(base_table):
    policies = base_table.loc[["S", "M", "L"]]
    assert policies["gsm_pass1"].between(0.10, 0.60).all(), policies["gsm_pass1"]
    assert policies.loc["S", "gsm_pass1"] < policies.loc[["M", "L"], "gsm_pass1"].min()
    assert (policies["gsm_pass8"] >= policies["gsm_pass1"] + 0.15).all()
    sizes = policies["non_embedding_params"].to_numpy()
    ratios = sizes[1:] / sizes[:-1]  # "roughly 2-4x apart": M/S is 1.81, L/M 2.20
    assert (ratios >= 1.75).all() and (ratios <= 4.5).all()
    assert base_table.loc["PRM", "non_embedding_params"] > sizes[-1]
    total = sum(f.stat().st_size for f in MODELS.rglob("*") if f.is_file())
    assert total < 60e6


def test_committed_base_policies_increase_with_size(base_table):
    assert base_table.loc[["S", "M", "L"], "gsm_pass1"].is_monotonic_increasing


def test_committed_prm_meets_the_auroc_target(base_table):
    """The PRM ranks right steps above wrong ones: on the step-labelled split, on every kind of slip
    and on what the base policies sample (docs/CHOICES.md, *The PRM*)."""
    assert base_table.loc["PRM", "prm_auroc"] >= 0.80
    assert base_table.loc["PRM", "prm_auroc_policy_samples"] >= 0.80
    profile = pd.read_csv(BASE_TABLE.with_name("prm_error_profile.csv"))
    assert set(arith.SLIP_KINDS) <= set(profile["error_kind"])
    assert (profile["auroc"] >= 0.80).all(), profile


@pytest.mark.parametrize("size", ["S", "M", "L"])
def test_committed_greedy_pass1_is_reproducible(base_table, size):
    """The table's greedy gsm_tiny pass@1 is re-measured from the committed checkpoint."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = MODELS / testbed.POLICIES[size].name
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    examples = arith.load_split("gsm_tiny")[: arith.SPLITS["gsm_tiny"].first_size]  # as the table measured
    greedy = evaluate.sample(model, tokenizer, [e.prompt for e in examples], evaluate.SampleConfig())
    correct = evaluate.score_matrix(greedy, [e.answer for e in examples], arith.is_correct)
    assert evaluate.pass_at_k(correct, 1) == pytest.approx(base_table.loc[size, "gsm_pass1"], abs=1e-9)


def test_committed_prm_ships_the_packages_modelling_code():
    """The checkpoint runs the code it ships; it must be the package's, or the two have drifted apart
    (rebuild the PRM, or copy paper_repro/rewards/likelihood_prm.py into it and rerun its runs)."""
    shipped = (MODELS / testbed.PRM.name / "likelihood_prm.py").read_text()
    assert shipped == (repo_root() / "paper_repro/rewards/likelihood_prm.py").read_text()


def test_committed_prm_auroc_is_reproducible(base_table):
    """The PRM's step AUROC is re-measured from the committed checkpoint (loaded as the study loads
    it) on the shipped ``prm`` split, none of which it was trained on."""
    scorer = testbed.load_prm(MODELS / testbed.PRM.name)
    records = [e.to_record() for e in arith.load_split("prm")]
    auc, n_steps = testbed.prm_auroc(scorer, records)
    assert n_steps == base_table.loc["PRM", "prm_heldout_steps"]
    assert auc == pytest.approx(base_table.loc["PRM", "prm_auroc"], abs=1e-6)
    assert auc >= 0.80


def test_the_profile_names_the_sizes_the_testbed_declares():
    """The sizes are declared once (testbed.POLICIES); the cpu-tiny profile, which is data, names
    their checkpoints, and must name exactly those."""
    from paper_repro.config import load_profile
    from paper_repro.testbed import POLICIES, repo_path

    assert load_profile("cpu-tiny").policies == {size: repo_path(spec) for size, spec in POLICIES.items()}
