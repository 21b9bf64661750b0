"""The cpu-tiny testbed: tokenizer/model building, the PRM interface, and the committed checkpoints."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from paper_repro import evaluate, testbed
from paper_repro.paths import repo_root
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


def test_prm_features_put_labels_on_separators_only():
    tokenizer = testbed.build_tokenizer()
    record = {"prompt": "2, add 3?\n", "steps": ["2+3=5", "5*2=11"], "labels": [True, False]}
    feats = testbed.prm_features(tokenizer, [record])
    ids, labels = feats["input_ids"][0], feats["labels"][0]
    sep = tokenizer.convert_tokens_to_ids(prm.STEP_TOKEN)
    assert [i for i, t in enumerate(ids) if t == sep] == [i for i, lab in enumerate(labels) if lab != -100]
    assert [lab for lab in labels if lab != -100] == [1, 0]
    assert tokenizer.decode(ids) == prm.prm_text(record["prompt"], record["steps"])


def test_random_model_is_seeded_and_speaks_the_tokenizers_ids(tmp_path):
    """The one builder of random tiny Qwen2s: a seed fixes the weights; a policy pads and stops
    generating with the tokenizer's pad and eos; a PRM's two classes load back as a token classifier."""
    import torch
    from transformers import AutoModelForTokenClassification

    tokenizer = testbed.build_tokenizer()
    a, b, c = (testbed.random_model(tokenizer=tokenizer, seed=s) for s in (0, 0, 1))
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.model.embed_tokens.weight, c.model.embed_tokens.weight)
    assert a.generation_config.eos_token_id == tokenizer.eos_token_id
    assert a.generation_config.pad_token_id == tokenizer.pad_token_id
    testbed.random_model(tokenizer=tokenizer, head="prm").save_pretrained(tmp_path)
    prm_model = AutoModelForTokenClassification.from_pretrained(tmp_path)
    assert prm_model.config.id2label == testbed.PRM_LABELS
    logits = prm_model(**tokenizer(["2+3=5<extra_0>"], return_tensors="pt")).logits
    assert logits.shape[-1] == 2
    with pytest.raises(ValueError, match="head must be 'lm' or 'prm'"):
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


@pytest.mark.xfail(strict=True, reason="known gap (issue 3): the tiny PRM's held-out AUROC is below 0.80")
def test_committed_prm_meets_the_auroc_target(base_table):
    assert base_table.loc["PRM", "prm_auroc"] >= 0.80


@pytest.mark.parametrize("size", ["S", "M", "L"])
def test_committed_greedy_pass1_is_reproducible(base_table, size):
    """The table's greedy gsm_tiny pass@1 is re-measured from the committed checkpoint."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = MODELS / testbed.POLICIES[size].name
    model = AutoModelForCausalLM.from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    examples = arith.load_split("gsm_tiny")
    greedy = evaluate.sample(model, tokenizer, [e.prompt for e in examples], evaluate.SampleConfig())
    correct = evaluate.score_matrix(greedy, [e.answer for e in examples], arith.is_correct)
    assert evaluate.pass_at_k(correct, 1) == pytest.approx(base_table.loc[size, "gsm_pass1"], abs=1e-9)


def test_committed_prm_auroc_is_reproducible(base_table):
    """The PRM's held-out step AUROC is re-measured from the committed checkpoint and shipped split."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    path = MODELS / testbed.PRM.name
    records = [e.to_record() for e in arith.load_split("prm")]
    heldout = records[round(len(records) * (1 - testbed.BuildConfig().prm_heldout)) :]
    model = AutoModelForTokenClassification.from_pretrained(path)
    auc, n_steps = testbed.prm_auroc(model, AutoTokenizer.from_pretrained(path), heldout)
    assert n_steps == base_table.loc["PRM", "prm_heldout_steps"]
    assert auc == pytest.approx(base_table.loc["PRM", "prm_auroc"], abs=1e-6)
