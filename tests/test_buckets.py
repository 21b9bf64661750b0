"""The update over length buckets (paper_repro.sampler.buckets) against TRL's own padded forward."""

from __future__ import annotations

import pytest
import torch

from paper_repro.accounting import flops
from paper_repro.common.paths import repo_root
from paper_repro.sampler.buckets import (
    ATTENTION_WIDTH,
    BUCKET_OVERHEAD_TOKENS,
    bucketed_logps,
    plan_buckets,
    real_spans,
)


def trl_batch(rows=24, prompt_width=12, completion_width=20, seed=0, pad=0):
    """A batch in TRL's layout: left-padded prompts, right-padded completions."""
    g = torch.Generator().manual_seed(seed)
    prompts = torch.randint(3, prompt_width + 1, (rows,), generator=g)
    completions = torch.randint(1, completion_width + 1, (rows,), generator=g)
    completions[0] = completion_width
    width = prompt_width + completion_width
    ids = torch.randint(2, 50, (rows, width), generator=g)
    mask = torch.zeros(rows, width, dtype=torch.long)
    for r in range(rows):
        mask[r, prompt_width - prompts[r] : prompt_width + completions[r]] = 1
    return ids.masked_fill(mask == 0, pad), mask, completion_width


def test_plan_puts_every_row_in_one_bucket_as_wide_as_its_longest_row():
    _, mask, keep = trl_batch(rows=40)
    plan = plan_buckets(mask, keep)
    rows = torch.cat([r for r, _ in plan.buckets])
    assert sorted(rows.tolist()) == list(range(40))
    lengths = mask.sum(1)
    for bucket_rows, width in plan.buckets:
        assert width == int(lengths[bucket_rows].max())
    assert len(plan_buckets(mask, keep, max_rows=8).buckets) >= 5
    assert all(len(r) <= 8 for r, _ in plan_buckets(mask, keep, max_rows=8).buckets)


def test_plan_costs_no_more_than_one_bucket_or_one_bucket_per_row():
    _, mask, keep = trl_batch(rows=64, prompt_width=30, completion_width=64, seed=3)

    def cost(plan):
        return sum(len(r) * w * (1 + w / ATTENTION_WIDTH) + BUCKET_OVERHEAD_TOKENS for r, w in plan.buckets)

    plan = plan_buckets(mask, keep)
    lengths = mask.sum(1).double()
    widest = float(lengths.max())
    one = 64 * widest * (1 + widest / ATTENTION_WIDTH) + BUCKET_OVERHEAD_TOKENS
    each = float((lengths * (1 + lengths / ATTENTION_WIDTH)).sum()) + 64 * BUCKET_OVERHEAD_TOKENS
    assert cost(plan) <= min(one, each) + 1e-6
    assert 1 < len(plan.buckets) < 64


def test_layouts_that_are_not_trls_fall_back():
    _, mask, keep = trl_batch()
    holed = mask.clone()
    holed[0, -keep + 2] = 0  # a hole inside row 0's completion
    assert real_spans(holed, keep) is None and plan_buckets(holed, keep) is None
    no_completion = mask.clone()
    no_completion[1, -keep:] = 0
    assert plan_buckets(no_completion, keep) is None
    empty = mask.clone()
    empty[2] = 0
    assert plan_buckets(empty, keep) is None


def test_executed_work_is_each_buckets_padded_square():
    _, mask, keep = trl_batch(rows=32, seed=1)
    plan = plan_buckets(mask, keep)
    expected = flops.Work()
    for rows, width in plan.buckets:
        expected = expected + flops.padded_batch_work(len(rows), width, len(rows) * (width - 1))
    assert plan.executed_work(head_all_positions=True, completion_tokens=0) == expected
    rows, width = mask.shape
    padded = flops.padded_batch_work(rows, width, rows * (width - 1))
    assert expected.tokens < padded.tokens and expected.attn_pairs < padded.attn_pairs


@pytest.fixture(scope="module")
def policy():
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(repo_root() / "data" / "models" / "policy-S")
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))  # as TRL's GRPOTrainer does
    model = get_peft_model(
        model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0)
    )
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.05)
    return model


def _padded(model, ids, mask, keep):
    """TRL 1.16's ``_get_per_token_logps_and_entropies`` for text rows, as it computes them."""
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-keep] = -100
    out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    return out.log_probs[:, -keep:], out.entropy[:, -keep:]


def _bucketed(model, ids, mask, keep, max_rows=None):
    def forward(bucket_ids, labels):
        out = model(input_ids=bucket_ids, labels=labels, fused_lm_head=True)
        return out.log_probs, out.entropy

    return bucketed_logps(forward, ids, mask, keep, plan_buckets(mask, keep, max_rows=max_rows))


@pytest.mark.parametrize("max_rows", [None, 5])
def test_bucketed_logps_entropies_and_gradients_are_trls(policy, max_rows):
    ids, mask, keep = trl_batch(rows=24, prompt_width=14, completion_width=24, seed=2)
    completion = mask[:, -keep:].bool()
    grads = []
    outs = []
    for fn in (_padded, lambda *a: _bucketed(*a, max_rows=max_rows)):
        policy.zero_grad()
        logps, entropy = fn(policy, ids, mask, keep)
        (logps * completion).sum().backward()
        grads.append({n: p.grad.clone() for n, p in policy.named_parameters() if p.requires_grad})
        outs.append((logps.detach(), entropy.detach()))
    (lp0, e0), (lp1, e1) = outs
    assert lp1.shape == lp0.shape == (24, keep)
    assert torch.allclose(lp1[completion], lp0[completion], atol=2e-4, rtol=0)
    assert torch.allclose(e1[completion], e0[completion], atol=2e-4, rtol=0)
    assert bool((lp1[~completion] == 0).all()) and bool((lp0[~completion] == 0).all())
    for name, g0 in grads[0].items():
        g1 = grads[1][name]
        assert torch.allclose(g1, g0, atol=1e-5 + 1e-3 * float(g0.abs().max())), name


# ------------------------------------------------------------------ the fused update forward


def _fused(model, ids, mask, keep, max_rows=None):
    from paper_repro.sampler.fused_update import FusedUpdateForward

    return bucketed_logps(
        FusedUpdateForward(model), ids, mask, keep, plan_buckets(mask, keep, max_rows=max_rows)
    )


def _against_trls_padded(model, forward, ids, mask, keep, atol=2e-4):
    """``forward``'s log-probabilities, entropies and gradients against TRL's padded forward."""
    completion = mask[:, -keep:].bool()
    grads, outs = [], []
    for fn in (_padded, forward):
        model.zero_grad()
        logps, entropy = fn(model, ids, mask, keep)
        (logps * completion).sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        outs.append((logps.detach(), entropy.detach()))
    (lp0, e0), (lp1, e1) = outs
    assert lp1.shape == lp0.shape == e1.shape == (ids.shape[0], keep)
    assert torch.allclose(lp1[completion], lp0[completion], atol=atol, rtol=0)
    assert torch.allclose(e1[completion], e0[completion], atol=atol, rtol=0)
    assert bool((lp1[~completion] == 0).all()) and bool((e1[~completion] == 0).all())
    assert grads[0].keys() == grads[1].keys() and grads[0]  # the same parameters get gradients
    for name, g0 in grads[0].items():
        assert torch.allclose(grads[1][name], g0, atol=1e-5 + 1e-3 * float(g0.abs().max())), name


@pytest.mark.parametrize("max_rows", [None, 5])
def test_fused_forward_logps_entropies_and_gradients_are_trls(policy, max_rows):
    ids, mask, keep = trl_batch(rows=24, prompt_width=14, completion_width=24, seed=2)
    _against_trls_padded(policy, lambda *a: _fused(*a, max_rows=max_rows), ids, mask, keep)


def _lora_policy(model_type, targets, alpha, temperature=1.0):
    """A random ``model_type`` policy (HF's Qwen2 or Llama) with TRL's fused head and LoRA adapters on
    ``targets`` whose B is not zero."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(3)
    config = AutoConfig.for_model(
        model_type, vocab_size=50, hidden_size=32, intermediate_size=72, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    add_fused_lm_head(model, temperature=temperature, outputs=("log_probs", "entropy"))
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0))
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.1)
    return model


@pytest.mark.parametrize(
    "model_type, targets, alpha",
    [
        ("llama", "all-linear", 8),
        ("qwen2", ["q_proj", "v_proj", "down_proj"], 6),  # adapters on some projections; scaling 1.5
    ],
)
def test_fused_forward_on_other_models_and_adapters(model_type, targets, alpha):
    model = _lora_policy(model_type, targets, alpha)
    ids, mask, keep = trl_batch(rows=12, prompt_width=10, completion_width=16, seed=4)
    _against_trls_padded(model, _fused, ids, mask, keep)


def test_fused_forward_divides_by_the_temperature_and_follows_disabled_adapters():
    from paper_repro.sampler.fused_update import FusedUpdateForward

    model = _lora_policy("qwen2", "all-linear", 8, temperature=0.7)
    ids, mask, keep = trl_batch(rows=10, prompt_width=10, completion_width=12, seed=5)
    completion = mask[:, -keep:].bool()
    plan = plan_buckets(mask, keep)
    with torch.no_grad():
        for disabled in (False, True):
            if disabled:
                model.base_model.disable_adapter_layers()  # as TRL's reference forward, via disable_adapter()
            lp0, _ = _padded(model, ids, mask, keep)
            lp1, _ = bucketed_logps(FusedUpdateForward(model, temperature=0.7), ids, mask, keep, plan)
            assert torch.allclose(lp1[completion], lp0[completion], atol=2e-4, rtol=0)
            wrong, _ = bucketed_logps(FusedUpdateForward(model), ids, mask, keep, plan)
            assert not torch.allclose(wrong[completion], lp0[completion], atol=1e-2, rtol=0)
        model.base_model.enable_adapter_layers()


def test_the_fused_lora_linear_backward_is_its_forwards_gradient():
    from paper_repro.sampler.fused_update import _LoRALinear

    g = torch.Generator().manual_seed(0)

    def t(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_()

    spans = ((0, 4, 3), (4, 5, 2), (4, 5, 1))  # two adapters on the second projection
    inputs = (t(2, 5, 6), t(9, 6), t(9), t(6, 6), t(4, 3), t(5, 2), t(5, 1))

    def fn(x, w, b, a, *bs):
        return _LoRALinear.apply(x, w, b, a, spans, *bs)

    assert torch.autograd.gradcheck(fn, inputs)


def test_what_the_fused_forward_cannot_compute_is_refused():
    from peft import LoraConfig, get_peft_model

    from paper_repro.sampler.fused_update import FusedUpdateForward, unsupported
    from paper_repro.testbed import random_model

    dropout = get_peft_model(random_model(), LoraConfig(r=4, target_modules="all-linear", lora_dropout=0.1))
    dropout.train()
    assert "dropout" in unsupported(dropout)
    with pytest.raises(ValueError, match="cannot compute"):
        FusedUpdateForward(dropout)
    biased = get_peft_model(random_model(), LoraConfig(r=4, target_modules="all-linear", lora_bias=True))
    assert "biases" in unsupported(biased)
    assert unsupported(get_peft_model(random_model(), LoraConfig(r=4, target_modules="all-linear"))) is None


def test_fused_forward_under_activation_checkpointing_is_trls():
    """With the policy's activation checkpointing on (TRL's default), the fused forward replays each
    layer in backward as HF does, and its gradients are still TRL's."""
    model = _lora_policy("qwen2", "all-linear", 8)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model.enable_input_require_grads()
    model.train()
    ids, mask, keep = trl_batch(rows=12, prompt_width=10, completion_width=16, seed=6)
    _against_trls_padded(model, _fused, ids, mask, keep)


def test_fused_forward_of_a_bfloat16_policy_with_float32_adapters():
    """A bfloat16 policy with float32 adapters (PEFT's default for a half-precision base) takes the
    fused forward's mixed-dtype path: TRL's log-probabilities to bfloat16 rounding, every adapter
    trained."""
    model = _lora_policy("qwen2", "all-linear", 8).to(torch.bfloat16)
    for name, p in model.named_parameters():
        if "lora" in name:
            p.data = p.data.float()
    ids, mask, keep = trl_batch(rows=12, prompt_width=10, completion_width=16, seed=4)
    completion = mask[:, -keep:].bool()
    with torch.no_grad():
        lp0, _ = _padded(model, ids, mask, keep)
    lp1, _ = _fused(model, ids, mask, keep)
    assert lp1.dtype == torch.float32
    assert torch.allclose(lp1[completion], lp0[completion].float(), atol=2e-2, rtol=0)
    (lp1 * completion).sum().backward()
    adapters = [p for n, p in model.named_parameters() if "lora" in n]
    assert adapters and all(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in adapters)
