"""The analytic FLOP model against hand-worked cases, public model cards and a profiler.

Profiler checks run FlopCounterMode on real passes of three tiny models with *eager* attention:
the CPU sdpa kernel (``_scaled_dot_product_flash_attention_for_cpu``) is invisible to it. Eager
attention computes the full square of scores before masking, so the profiler is compared with the
``executed`` form (``padded_*_work``); the ``useful`` (causal) form is checked by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from paper_repro import models
from paper_repro.accounting import flops, validate
from paper_repro.accounting.flops import LoRASpec, ModelShape, TrainSpec, Work

# --- hand-worked ---------------------------------------------------------------------------


def test_hand_worked_forward_per_token():
    # h=8, 2 layers, 2 heads of 4 (MHA), mlp 16, vocab 10
    shape = ModelShape(8, 2, 2, 2, 4, 16, 10)
    layer = 8 * 8 * 4 + 3 * 8 * 16  # q,k,v,o + gate,up,down = 256 + 384
    assert shape.layer_matmul_params == 640
    # one token with one attended key: 2*(2*640) body + 4*2*8*1 attention + 2*80 head
    assert flops.forward_flops(shape, Work(1, 1, 1)) == 2 * 2 * layer + 4 * 2 * 8 + 2 * 80


def test_hand_worked_fused_head_recompute_where_the_head_dominates():
    """TRL's fused LM head recomputes its logits in backward: one more head forward (2 x head params)
    per scored position. The shipped test models' heads are < 5% of their FLOPs, so this shape is
    nearly all head, and the expected counts are written out by hand."""
    # h=4, 1 layer, 1 head of 4, mlp 4, vocab 1000: body 7 linears of 4x4, head 4x1000
    shape = ModelShape(4, 1, 1, 1, 4, 4, 1000)
    body = 7 * 4 * 4  # q, k, v, o, gate, up, down
    head = 4 * 1000
    assert (shape.body_matmul_params, shape.head_matmul_params) == (body, head) == (112, 4000)
    token = Work(tokens=1, attn_pairs=0, head_tokens=1)  # one scored position, attention left out

    # LoRA rank 1 on all 7 linears (as the study trains), no gradient checkpointing
    lora = LoRASpec(rank=1)
    adapter = 7 * 1 * (4 + 4)  # A (1x4) + B (4x1) per linear = 56
    forward = 2 * body + 2 * adapter + 2 * head  # 224 + 112 + 8000 = 8336
    # backward, body: q/k/v read the frozen embeddings, so no input gradient, only their adapters'
    # grad_B, grad of A's output and grad_A (3 x 2 x r x 4 each); o, gate, up, down also pass the
    # gradient to their input, through the frozen weight (2 x 16) and through A (2 x r x 4)
    qkv = 3 * (2 * 4 + 2 * 4 + 2 * 4)  # 72
    rest = 4 * (2 * 16 + 2 * 4 + 2 * 4 + 2 * 4 + 2 * 4)  # 256
    # backward, head (frozen): the gradient into the hidden state (2 x head); the fused head adds
    # its recomputed logits (another 2 x head)
    backward_off = qkv + rest + 2 * head  # 8328
    backward_on = qkv + rest + 2 * head + 2 * head  # 16328
    off = flops.train_flops(shape, token, TrainSpec(lora=lora))
    on = flops.train_flops(shape, token, TrainSpec(lora=lora, head_recompute=True))
    assert off == forward + backward_off == 16664
    assert on == forward + backward_on == 24664
    assert on - off == 2 * head  # exactly one extra head forward, nothing else
    assert 2 * head / on > 0.3  # the term is a third of the total here, not lost in a tolerance

    # full fine-tuning: 6 x params in the body and in the head (forward 2, input grad 2, weight
    # grad 2), plus the recomputed logits
    full_off = 6 * body + 6 * head  # 672 + 24000
    full_on = 6 * body + 6 * head + 2 * head
    assert flops.train_flops(shape, token, TrainSpec(lora=None)) == full_off == 24672
    assert flops.train_flops(shape, token, TrainSpec(lora=None, head_recompute=True)) == full_on == 32672

    # the recompute is paid per head position only: a prompt position (no logits kept) adds none
    prompt_token = Work(tokens=1, attn_pairs=0, head_tokens=0)
    assert flops.train_flops(shape, prompt_token, TrainSpec(lora=lora, head_recompute=True)) == (
        flops.train_flops(shape, prompt_token, TrainSpec(lora=lora))
    )


def test_causal_pairs_counts_positions_exactly():
    assert flops.causal_pairs(1) == 1
    assert flops.causal_pairs(4) == 1 + 2 + 3 + 4
    assert flops.causal_pairs(3, past=5) == 6 + 7 + 8
    # a full forward of p+c equals a prefill of p and c positions against the cache
    assert flops.causal_pairs(7) == flops.causal_pairs(3) + flops.causal_pairs(4, past=3)


def test_generation_with_cache_never_uses_the_no_cache_form():
    shape = models.shape("qwen2.5-1.5b-instruct")
    p, c = 256, 1024
    cached = flops.forward_flops(shape, flops.generation_work(p, c))
    # the no-cache form re-runs the whole prefix for every new token
    no_cache = sum(flops.forward_flops(shape, flops.sequence_work(p + t, head_tokens=1)) for t in range(c))
    assert no_cache / cached > 100
    # with a cache, generation costs about one forward over the final sequence
    assert cached == pytest.approx(flops.forward_flops(shape, flops.sequence_work(p + c - 1)), rel=0.2)


def test_prefix_cache_prefills_each_prompt_once():
    shape = models.shape("qwen2.5-1.5b-instruct")
    base = dict(prompts=4, generations=8, kept=8, epochs=1, prompt_tokens=512, completion_tokens=64)
    plain = flops.grpo_step_cost(shape, flops.GRPOStep(**base))
    cached = flops.grpo_step_cost(shape, flops.GRPOStep(**base, prefix_cache=True))
    # each cached copy skips the prefill but reruns the last prompt position for its first token
    saved = Work(512, flops.causal_pairs(512), 1) + Work(-1, -512, -1)
    lora = TrainSpec().lora  # generation runs the unmerged adapters too
    assert plain.C_search - cached.C_search == pytest.approx(4 * 7 * flops.forward_flops(shape, saved, lora))
    assert plain.C_learning == cached.C_learning


def test_grpo_step_components():
    shape = models.shape("qwen2.5-3b-instruct")
    prm = models.shape("qwen2.5-math-prm-7b")
    s = flops.GRPOStep(prompts=2, generations=4, kept=2, epochs=3, prompt_tokens=100, completion_tokens=200)
    train = TrainSpec(lora=LoRASpec(8))
    cost = flops.grpo_step_cost(shape, s, train=train, reward_model=prm)
    seq = flops.sequence_work(300, head_tokens=200)
    expected_learning = 3 * 2 * 2 * flops.train_flops(shape, seq, train) + 8 * flops.forward_flops(
        shape, seq, train.lora
    )  # mu > 1: TRL runs the old-policy forward over all G
    assert cost.C_learning == pytest.approx(expected_learning)
    assert cost.C_reward == pytest.approx(8 * flops.forward_flops(prm, flops.sequence_work(300)))
    assert cost.rho == pytest.approx(cost.C_learning / cost.C_total)
    # beta != 0 adds the reference forward
    with_ref = flops.grpo_step_cost(shape, flops.GRPOStep(**{**s.__dict__, "beta": 0.04}), train=train)
    assert with_ref.C_learning - cost.C_learning == pytest.approx(
        8 * flops.forward_flops(shape, seq, train.lora)
    )


def test_lora_training_is_about_4n_not_6n():
    shape = models.shape("qwen2.5-7b-instruct")
    pt = flops.per_token_flops(shape, LoRASpec(16))
    assert pt.full_train == pytest.approx(3 * pt.forward)
    assert 1.95 < pt.lora_train / pt.forward < 2.1


@pytest.mark.parametrize(
    "bad",
    [
        dict(kept=9),
        dict(prompts=0),
        dict(epochs=0),
        dict(beta=-1.0),
    ],
)
def test_step_rejects_bad_input(bad):
    base = dict(prompts=1, generations=8, kept=8, epochs=1, prompt_tokens=4, completion_tokens=4)
    with pytest.raises(ValueError):
        flops.GRPOStep(**{**base, **bad})


def test_unknown_model_and_targets_are_refused():
    with pytest.raises(FileNotFoundError, match="shipped names"):
        models.shape("qwen9-900b")
    with pytest.raises(ValueError, match="not supported"):
        ModelShape.from_config({"model_type": "gpt2", "hidden_size": 8})
    with pytest.raises(ValueError, match="unknown LoRA target"):
        LoRASpec(8, ("c_attn",))


# --- public Qwen2.5 configs ----------------------------------------------------------------

# (total params, non-embedding params) from the Qwen2.5 model cards, in billions
MODEL_CARDS = {
    "qwen2.5-1.5b-instruct": (1.54, 1.31),
    "qwen2.5-3b-instruct": (3.09, 2.77),
    "qwen2.5-7b-instruct": (7.61, 6.53),
}


@pytest.mark.parametrize("name", sorted(MODEL_CARDS))
def test_qwen25_configs_match_model_cards_and_2n(name):
    shape = models.shape(name)
    total, non_embedding = MODEL_CARDS[name]
    assert shape.parameter_count() / 1e9 == pytest.approx(total, abs=0.006)
    assert shape.parameter_count(include_embeddings=False) / 1e9 == pytest.approx(non_embedding, abs=0.006)
    # forward per token (no attention) is exactly 2 x the matmul weights, LM head included
    n = shape.body_matmul_params + shape.head_matmul_params
    assert flops.per_token_flops(shape).forward == 2 * n


def test_prm_config_has_a_two_layer_score_head():
    prm = models.shape("qwen2.5-math-prm-7b")
    assert prm.head == ((3584, 3584), (3584, 2))
    policy = models.shape("qwen2.5-7b-instruct")
    assert prm.body_matmul_params == policy.body_matmul_params


def test_cli_contract_prints_one_json_object():
    cmd = [sys.executable, "-m", "paper_repro.cli", "flops", "--model", "qwen2.5-1.5b-instruct",
           "--prompt-tokens", "128", "--completion-tokens", "512", "--generations", "8", "--kept", "4",
           "--epochs", "2", "--prompts", "16", "--lora-rank", "32", "--beta", "0.01",
           "--reward-model", "qwen2.5-math-prm-7b", "--prefix-cache", "--json"]  # fmt: skip
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    for key in ("C_search", "C_learning", "C_reward", "C_total", "rho"):
        assert isinstance(out[key], float)
    assert out["C_total"] == pytest.approx(out["C_search"] + out["C_learning"] + out["C_reward"])
    assert set(out["per_token"]) >= {"forward", "lora_train", "full_train"}
    shape = models.shape("qwen2.5-1.5b-instruct")
    step = flops.GRPOStep(16, 8, 4, 2, 128, 512, beta=0.01, prefix_cache=True)
    cost = flops.grpo_step_cost(shape, step, TrainSpec(LoRASpec(32)), models.shape("qwen2.5-math-prm-7b"))
    assert out["C_learning"] == pytest.approx(cost.C_learning)


def _flops_json(capsys, *options: str) -> dict:
    from paper_repro import cli

    argv = [
        "flops",
        "--model",
        "qwen2.5-1.5b-instruct",
        "--prompt-tokens",
        "64",
        "--completion-tokens",
        "256",
    ]
    assert cli.main([*argv, "--generations", "8", *options, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_defaults_keep_all_g_for_one_epoch_at_the_train_sections_rank(capsys):
    """Without --kept, --epochs or --profile: K = G, mu = 1, and the LoRA rank, targets and beta of a
    train section that names none (TrainConfig's defaults), priced as the FLOP model prices them."""
    from paper_repro.config import TrainConfig

    out = _flops_json(capsys)
    section = TrainConfig()
    assert out["profile"] is None
    assert (out["step"]["kept"], out["step"]["epochs"], out["step"]["prompts"]) == (8, 1, 1)
    assert (out["step"]["lora_rank"], out["step"]["beta"]) == (section.lora_rank, section.beta)
    step = flops.GRPOStep(1, 8, 8, 1, 64, 256)
    lora = LoRASpec(section.lora_rank, (section.lora_targets,))
    cost = flops.grpo_step_cost(models.shape("qwen2.5-1.5b-instruct"), step, TrainSpec(lora))
    assert out["C_learning"] == cost.C_learning and out["C_search"] == cost.C_search


def test_cli_prices_the_profiles_rank_unless_one_is_given(capsys):
    from paper_repro.config import load_profile

    rank = load_profile("gpu-paper").train.lora_rank
    out = _flops_json(capsys, "--profile", "gpu-paper")
    assert out["profile"] == "gpu-paper" and out["step"]["lora_rank"] == rank != LoRASpec().rank
    step = flops.GRPOStep(1, 8, 8, 1, 64, 256)
    cost = flops.grpo_step_cost(models.shape("qwen2.5-1.5b-instruct"), step, TrainSpec(LoRASpec(rank)))
    assert out["C_learning"] == cost.C_learning
    given = _flops_json(capsys, "--profile", "gpu-paper", "--lora-rank", "8", "--kept", "4", "--epochs", "2")
    assert (given["step"]["lora_rank"], given["step"]["kept"], given["step"]["epochs"]) == (8, 4, 2)
    assert given["step"]["old_logprobs"]  # mu = 2 runs the old-policy forward


def test_cli_refuses_k_greater_than_g():
    cmd = [sys.executable, "-m", "paper_repro.cli", "flops", "--model", "qwen2.5-3b-instruct",
           "--prompt-tokens", "8", "--completion-tokens", "8", "--generations", "2", "--kept", "4",
           "--epochs", "1"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 2 and "cannot exceed" in proc.stderr


# --- against FlopCounterMode -----------------------------------------------------------------


@pytest.mark.parametrize("kind", validate.PASSES)
@pytest.mark.parametrize("shape", sorted(validate.SHAPES))
def test_analytic_counts_match_profiler(shape, kind):
    case = validate.measure(shape, kind)
    # validate's own bar (what `paper-repro validate` passes by); the counts agree exactly in practice
    assert case.ratio == pytest.approx(1.0, abs=validate.TOLERANCE)
