"""The lean sampler against HF ``generate``: the same tokens from the same random state, the same
log-probabilities, the same runs, and the ledger's ``executed`` count of what it ran."""

from __future__ import annotations

import dataclasses
import functools
import math

import pytest
import torch

from paper_repro import models
from paper_repro.accounting import flops
from paper_repro.accounting.flops import LoRASpec, ModelShape
from paper_repro.accounting.profiling import flop_counter
from paper_repro.ledger import LedgerConfig
from paper_repro.sampler import (
    FusedDecoder,
    LeanStats,
    inverse_cdf,
    lean_generate,
    merge_flops,
    unsupported,
)

EOS, PAD = 1, 0


@functools.cache
def _prompts(rows: int, copies: int) -> list[list[int]]:
    from transformers import AutoTokenizer

    from paper_repro.tasks import load_examples

    tokenizer = AutoTokenizer.from_pretrained(models.checkpoint("data/models/policy-M"))
    examples = load_examples("arith/train")[: rows // copies]
    return [
        tokenizer(e.prompt, add_special_tokens=False)["input_ids"] for e in examples for _ in range(copies)
    ]


def _policy(size: str, attn: str = "sdpa", lora: bool = True):
    """A shipped policy, with LoRA adapters whose B is not zero (so they change the logits)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        models.checkpoint(f"data/models/policy-{size}"), attn_implementation=attn
    )
    if not lora:
        return model.eval()
    model = get_peft_model(
        model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0)
    )
    generator = torch.Generator().manual_seed(1)
    for name, param in model.named_parameters():
        if "lora_B" in name:
            param.data.normal_(0, 0.05, generator=generator)
    return model.train()  # as TRL generates: the policy in training mode


def _hf(model, prompts, seed, **sampling):
    """HF generate's completions (each up to its first EOS, as TRL keeps them), the per-token
    log-probabilities of its processed scores, and the RNG state it leaves."""
    from transformers import GenerationConfig

    width = max(map(len, prompts))
    ids = torch.tensor([[PAD] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    config = GenerationConfig(
        max_new_tokens=48, pad_token_id=PAD, eos_token_id=[EOS], disable_compile=True,
        output_scores=True, return_dict_in_generate=True, **sampling,
    )  # fmt: skip
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    state = torch.random.get_rng_state()
    completions, logprobs = [], []
    for r, row in enumerate(out.sequences[:, width:].tolist()):
        end = row.index(EOS) + 1 if EOS in row else len(row)
        completions.append(row[:end])
        logprobs.append([torch.log_softmax(out.scores[t][r], -1)[row[t]].item() for t in range(end)])
    return completions, logprobs, state


def _lean(model, prompts, seed, compact, **sampling):
    stats = LeanStats(logprobs=[])
    torch.manual_seed(seed)
    completions = lean_generate(
        model, prompts, max_new_tokens=48, eos_token_ids=[EOS], pad_token_id=PAD, compact=compact,
        stats=stats, **sampling,
    )  # fmt: skip
    return completions, stats.logprobs, torch.random.get_rng_state(), stats


SAMPLED = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0)


@pytest.mark.parametrize(
    ("size", "attn", "sampling"),
    [
        ("S", "sdpa", SAMPLED),
        ("L", "sdpa", SAMPLED),
        ("M", "eager", SAMPLED),
        ("M", "sdpa", dict(do_sample=True, temperature=0.7, top_k=12, top_p=0.9)),  # every warper
        ("M", "sdpa", dict(do_sample=False)),  # greedy
    ],
    ids=["S-sampled", "L-sampled", "M-eager", "M-warpers", "M-greedy"],
)
def test_lean_sampler_reproduces_hf_generate(size, attn, sampling):
    """Same tokens from the same seed, the generator left in the same state (so a run's later draws
    are unchanged too), and the same per-token log-probabilities of the processed scores, whether
    finished rows stay in the batch or leave it; padded rows (varied prompts) and an unpadded batch."""
    model = _policy(size, attn)
    for seed, prompts in ((0, _prompts(32, 4)), (1, [_prompts(32, 4)[0]] * 8)):
        ref, ref_logprobs, ref_state = _hf(model, prompts, seed, **sampling)
        for compact in (False, True):
            got, logprobs, state, stats = _lean(model, prompts, seed, compact, **sampling)
            assert got == ref
            assert torch.equal(state, ref_state)
            # log_softmax of a row vs of a batch, and a compacted batch's other matmul shapes: rounding
            # (up to 4e-5 seen at temperature 0.7, run to run), with the tokens and RNG state exact
            for a, b in zip(logprobs, ref_logprobs, strict=True):
                assert a == pytest.approx(b, rel=1e-4, abs=1e-4)
        if seed == 0:
            assert min(map(len, ref)) < max(map(len, ref))  # rows did finish at different steps
            assert stats.decode_rows[-1] < stats.rows  # and left the batch


@pytest.mark.parametrize("fused", [False, True], ids=["exact", "fused"])
def test_the_ledgers_executed_count_is_what_the_lean_sampler_ran(fused):
    """FlopCounterMode (eager attention) around the lean sampler on groups of rows sharing a prompt,
    finished rows leaving the batch, against the executed work the ledger charges from the sampler's
    record. The fused decoder prefills each distinct prompt once and runs the base model's matmuls
    per position, plus the merge."""
    model = _policy("M", "eager")
    prompts = _prompts(32, 4)
    stats = LeanStats()
    counter = flop_counter()
    torch.manual_seed(0)
    with counter:
        lean_generate(model, prompts, max_new_tokens=48, eos_token_ids=[EOS], pad_token_id=PAD, compact=True,
                      stats=stats, fused=fused)  # fmt: skip
    assert stats.decode_rows[-1] < stats.rows == 32
    assert stats.prefill_rows == (8 if fused else 32)
    shape = ModelShape.from_config(model.get_base_model().config)
    lora = LoRASpec(
        rank=4, target_modules=("down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj")
    )
    work = flops.padded_generation_work(
        stats.rows, stats.prompt_width, 0, stats.decode_rows, stats.prefill_rows
    )
    if fused:
        expected = flops.forward_flops(shape, work, None) + merge_flops(model)
    else:
        expected = flops.forward_flops(shape, work, lora)
    assert counter.get_total_flops() / expected == pytest.approx(1.0, abs=0.02)
    # every row decoding to the end is HF generate's count
    full = [stats.rows] * len(stats.decode_rows)
    assert flops.padded_generation_work(
        stats.rows, stats.prompt_width, 0, full
    ) == flops.padded_generation_work(stats.rows, stats.prompt_width, len(stats.decode_rows) + 1)


def test_what_it_cannot_reproduce_falls_back_to_hf():
    from transformers import GenerationConfig

    model = _policy("S")
    assert unsupported(model) is None
    assert unsupported(model, GenerationConfig(max_new_tokens=4, do_sample=True, top_p=0.9)) is None
    assert "repetition_penalty" in unsupported(
        model, GenerationConfig(max_new_tokens=4, repetition_penalty=1.2)
    )
    assert "suppress_tokens" in unsupported(model, GenerationConfig(max_new_tokens=4, suppress_tokens=[3]))
    assert "beam" in unsupported(model, GenerationConfig(max_new_tokens=4, num_beams=2))
    dropout = _policy("S", lora=False)
    from peft import LoraConfig, get_peft_model

    dropout = get_peft_model(dropout, LoraConfig(r=4, target_modules="all-linear", lora_dropout=0.1)).train()
    assert "dropout" in unsupported(dropout)


def test_a_grpo_run_is_the_same_run_on_either_sampler(tmp_path):
    """The ledger's run with rollouts by HF generate and by the lean sampler: the same useful FLOPs
    step by step, the same rewards, the same trained adapter; the lean run's executed search count
    is at most HF's (finished rows leave its batch)."""
    from tests.test_ledger import build_tiny_grpo

    runs = {}
    for sampler in ("hf", "lean"):
        trainer = build_tiny_grpo(
            tmp_path / sampler,
            LedgerConfig(kept=2),
            trainer_kwargs={"sampler": sampler},
            max_completion_length=24,
        )
        trainer.train()
        assert trainer.sampler == sampler and (sampler == "hf" or trainer.lean_fallback is None)
        runs[sampler] = trainer
    hf, lean = runs["hf"], runs["lean"]
    assert [s["flops"]["useful"] for s in hf.ledger.steps] == [
        s["flops"]["useful"] for s in lean.ledger.steps
    ]
    assert [s["tokens"]["gen_completion_tokens"] for s in hf.ledger.steps if s["generated"]] == [
        s["tokens"]["gen_completion_tokens"] for s in lean.ledger.steps if s["generated"]
    ]
    for (name, a), (_, b) in zip(hf.model.named_parameters(), lean.model.named_parameters(), strict=True):
        if a.requires_grad:
            assert torch.equal(a, b), name
    executed = {k: t.ledger.summary()["executed"]["C_search"] for k, t in runs.items()}
    assert executed["lean"] <= executed["hf"]


def test_evaluation_is_the_same_on_either_sampler():
    from transformers import AutoTokenizer

    from paper_repro.evaluation.evaluate import EvalSets, SampleConfig, evaluate_policy
    from paper_repro.evaluation.judge import build_judge
    from paper_repro.rewards import build_reward
    from paper_repro.tasks import load_examples
    from paper_repro.tasks.graders import grader

    model = _policy("M", lora=False)
    tokenizer = AutoTokenizer.from_pretrained(models.checkpoint("data/models/policy-M"))
    sets = EvalSets(
        *(load_examples(f"arith/{name}", limit=40) for name in ("heldout", "gsm_tiny", "math_tiny"))
    )
    reward, judge = build_reward("dense", "arith"), build_judge("step_verifier", None, "arith")
    config = SampleConfig(max_new_tokens=96, batch_size=32)
    metrics = {
        sampler: evaluate_policy(
            model,
            tokenizer,
            sets,
            reward,
            judge,
            grader("arith"),
            dataclasses.replace(config, sampler=sampler),
        )
        for sampler in ("hf", "lean")
    }
    assert metrics["hf"] == metrics["lean"]


# ============================================================================ the fused decoder
# ``lean_generate(fused=True)``: ``FusedDecoder`` (LoRA merged into the weights, fused q/k/v and
# gate/up matmuls, rotary on queries and keys at once, manual attention with an additive padding mask)
# and, when sampling, ``inverse_cdf`` instead of ``multinomial``. The same model and the same sampling
# distribution with other float roundings and another use of the generator: greedy outputs must be
# HF's, sampled tokens are not (so they are checked against an HF forward and by frequencies).


def _adapted(size: str, **lora):
    """A shipped policy with LoRA adapters of ``lora`` (``LoraConfig`` fields), B random as ``_policy``'s."""
    from peft import LoraConfig, get_peft_model

    config = dict(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0) | lora
    model = get_peft_model(_policy(size, lora=False), LoraConfig(**config))
    generator = torch.Generator().manual_seed(1)
    for name, param in model.named_parameters():
        if "lora_B" in name:
            param.data.normal_(0, 0.05, generator=generator)
    return model.train()


def _hf_warpers(temperature=1.0, top_p=1.0, **_):
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

    out = []
    if temperature != 1.0:
        out.append(TemperatureLogitsWarper(temperature))
    if top_p < 1.0:
        out.append(TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1))
    return out


def _scores(model, sequences, prompt_lengths, warpers):
    """HF forward of left-padded ``sequences`` (prompt then completion; position ids from the padding,
    as ``generate`` makes them): the processed float32 scores that predict each completion token."""
    width = max(prompt_lengths)
    length = max(len(s) - n for s, n in zip(sequences, prompt_lengths, strict=True))
    ids, mask = [], []
    for s, n in zip(sequences, prompt_lengths, strict=True):
        tail = length - (len(s) - n)
        ids.append([PAD] * (width - n) + list(s) + [PAD] * tail)
        mask.append([0] * (width - n) + [1] * len(s) + [0] * tail)
    ids, mask = torch.tensor(ids), torch.tensor(mask)
    with torch.no_grad():
        logits = model(
            input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)
        ).logits.float()
    out = []
    for r, (s, n) in enumerate(zip(sequences, prompt_lengths, strict=True)):
        scores = logits[r, width - 1 : width - 1 + len(s) - n]
        for warper in warpers:
            scores = warper(None, scores)
        out.append(scores)
    return out


def _forward_logprobs(model, prompts, completions, warpers):
    """Each completion token's log-probability under the processed scores of an HF forward."""
    scores = _scores(
        model, [p + c for p, c in zip(prompts, completions, strict=True)], list(map(len, prompts)), warpers
    )
    return [
        torch.log_softmax(s, -1).gather(1, torch.tensor(c, dtype=torch.long)[:, None]).squeeze(1).tolist()
        for s, c in zip(scores, completions, strict=True)
    ]


def _max_error(a: list[list[float]], b: list[list[float]]) -> float:
    assert [len(x) for x in a] == [len(x) for x in b]
    return max(abs(x - y) for u, v in zip(a, b, strict=True) for x, y in zip(u, v, strict=True))


@pytest.mark.parametrize(
    ("size", "lora"),
    [("S", {}), ("M", {}), ("L", {}), ("M", dict(r=8, lora_alpha=12))],  # 12 / 8: scaling not a power of two
    ids=["S", "M", "L", "M-scaling-1.5"],
)
def test_fused_greedy_is_hf_generate(size, lora):
    """Greedy, the fused decoder gives HF generate's tokens exactly (and its scores' log-probabilities
    to 1e-4), on a left-padded batch of prompts of different lengths and on an unpadded one, whether
    finished rows stay in the batch or leave it; with extra left padding, the unfused lean sampler's."""
    model = _adapted(size, **lora)
    greedy = dict(do_sample=False)
    for prompts in (_prompts(32, 1), [_prompts(32, 1)[3]] * 4):
        ref, ref_logprobs, _ = _hf(model, prompts, 0, **greedy)
        for compact in (False, True):
            got, logprobs, _, stats = _lean(model, prompts, 0, compact, fused=True, **greedy)
            assert got == ref
            assert _max_error(logprobs, ref_logprobs) < 1e-4
            assert stats.prefill_rows == len(set(map(tuple, prompts)))  # a shared prompt prefilled once
        if len(set(map(len, prompts))) > 1:
            assert min(map(len, ref)) < max(map(len, ref))  # rows did finish at different steps
            assert stats.decode_rows[-1] < stats.rows  # and left the batch
    prompts = _prompts(32, 1)
    ref, *_ = _lean(model, prompts, 0, False, pad_to_multiple_of=16, **greedy)
    got, *_ = _lean(model, prompts, 0, True, pad_to_multiple_of=16, fused=True, **greedy)
    assert got == ref
    with model.disable_adapter():  # the adapters change these outputs (so the comparison sees them)
        assert _lean(model, prompts, 0, False, fused=True, **greedy)[0] != ref


FUSED_SAMPLED = [
    ("S", SAMPLED),
    ("L", SAMPLED),
    ("M", dict(do_sample=True, temperature=0.7, top_k=0, top_p=0.9)),
]


@pytest.mark.parametrize(("size", "sampling"), FUSED_SAMPLED, ids=["S-T1", "L-T1", "M-T0.7-top_p0.9"])
def test_fused_samples_score_as_an_hf_forward(size, sampling):
    """The fused sampler's completions (each up to its first EOS) and its per-token log-probabilities:
    within 1e-4 of the log-softmax of HF's warped scores of an HF forward of the full sequences (so
    no token filtered by top-p is drawn), with and without ``compact``; the same seed, the same
    completions, compacted or not."""
    model = _policy(size)
    prompts = _prompts(32, 1)
    warpers = _hf_warpers(**sampling)
    runs = {}
    for compact in (False, True):
        got, logprobs, _, stats = _lean(model, prompts, 0, compact, fused=True, **sampling)
        runs[compact] = got
        assert len(got) == len(prompts)
        for row in got:  # up to and including the first EOS, or all 48 tokens
            assert 0 < len(row) <= 48 and EOS not in row[:-1] and (row[-1] == EOS or len(row) == 48)
            assert PAD not in row
        assert min(map(len, got)) < max(map(len, got))
        reference = _forward_logprobs(model, prompts, got, warpers)
        assert _max_error(logprobs, reference) < 1e-4
        assert all(math.isfinite(x) for row in reference for x in row)
        if compact:
            assert stats.decode_rows[-1] < stats.rows
        else:
            assert _lean(model, prompts, 0, compact, fused=True, **sampling)[0] == got
    # finished rows leaving the batch still draw their uniforms: no other row's tokens change
    assert runs[True] == runs[False]
    with model.disable_adapter():  # the adapters matter to these log-probabilities far beyond 1e-4
        assert _max_error(logprobs, _forward_logprobs(model, prompts, got, warpers)) > 1e-2


@pytest.mark.parametrize("sampling", [SAMPLED, FUSED_SAMPLED[2][1]], ids=["T1", "T0.7-top_p0.9"])
def test_fused_sampling_draws_hf_processed_probabilities(sampling):
    """Where the policy is least certain along its greedy completions, 4000 fused draws of the next
    token: frequencies consistent (chi-square, p > 1e-3, fixed seed) with HF's processed probabilities
    there; tokens of probability 0 (filtered by top-p) never drawn."""
    from scipy.stats import chisquare

    model = _policy("M")
    warpers = _hf_warpers(**sampling)
    prompts = _prompts(32, 1)[:8]
    completions, *_ = _lean(model, prompts, 0, False, do_sample=False)
    scores = _scores(
        model, [p + c for p, c in zip(prompts, completions, strict=True)], list(map(len, prompts)), warpers
    )
    entropies = [torch.distributions.Categorical(logits=s).entropy() for s in scores]
    row = max(range(len(prompts)), key=lambda r: float(entropies[r].max()))
    step = int(entropies[row].argmax())
    prefix = prompts[row] + completions[row][:step]
    probs = torch.softmax(scores[row][step].double(), -1)
    assert float(entropies[row][step]) > 1.0  # a spread-out distribution, not a near-certain token

    counts = torch.zeros_like(probs)
    torch.manual_seed(0)
    for _ in range(4):
        tokens = lean_generate(
            model, [prefix] * 1000, max_new_tokens=1, eos_token_ids=[EOS], pad_token_id=PAD, fused=True,
            **sampling,
        )  # fmt: skip
        counts += torch.bincount(torch.tensor([t[0] for t in tokens]), minlength=len(probs)).double()
    assert counts[probs == 0].sum() == 0
    expected = probs * counts.sum()
    rare = expected < 5  # pooled into one bin
    observed = torch.cat([counts[~rare], counts[rare].sum()[None]])
    expected = torch.cat([expected[~rare], expected[rare].sum()[None]])
    keep = expected > 0
    assert chisquare(observed[keep].numpy(), expected[keep].numpy()).pvalue > 1e-3


def _test_probabilities() -> torch.Tensor:
    """Rows over a vocabulary of 50 with exact zeros (leading, trailing, scattered), a one-hot row
    and a row summing to 0.5 (``inverse_cdf`` scales its uniform by the row's total)."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 50, generator=generator)
    zero = torch.rand(5, 50, generator=generator) < 0.3
    zero[0, :3] = True
    zero[1, -4:] = True
    zero[2, 0] = zero[2, -1] = False
    zero[3] = True
    zero[3, 17] = False
    probs = torch.softmax(logits.masked_fill(zero, float("-inf")), -1)
    probs[4] *= 0.5
    return probs


def test_inverse_cdf_draws_from_the_probabilities():
    """200k draws (40k per row, in batches) from a fixed matrix: each row's frequencies consistent with
    its probabilities (chi-square, p > 1e-3, fixed seed), a token of probability 0 never drawn."""
    from scipy.stats import chisquare

    probs = _test_probabilities()
    rows, vocab = probs.shape
    assert (probs == 0).any(-1)[:4].all()
    counts = torch.zeros(rows, vocab, dtype=torch.long)
    torch.manual_seed(0)
    for _ in range(5):
        tokens = inverse_cdf(probs.repeat(8000, 1)).view(8000, rows).t()
        assert tokens.dtype == torch.long and tokens.min() >= 0 and tokens.max() < vocab
        counts.scatter_add_(1, tokens, torch.ones_like(tokens))
    assert (counts.sum(-1) == 40000).all()
    assert counts[probs == 0].sum() == 0
    for r in range(rows):
        nonzero = probs[r] > 0
        if nonzero.sum() == 1:
            assert counts[r, nonzero].item() == 40000
            continue
        expected = probs[r, nonzero].double() / probs[r].double().sum() * 40000
        assert expected.min() >= 5
        assert chisquare(counts[r, nonzero].double().numpy(), expected.numpy()).pvalue > 1e-3, r


def test_inverse_cdf_at_the_extremes_of_its_uniform(monkeypatch):
    """The smallest and the largest uniform ``torch.rand`` returns (0 and 1 - 2^-24) draw each row's
    first and last token of nonzero probability: never a zero before or after them."""
    probs = _test_probabilities()
    nonzero = [(p > 0).nonzero().squeeze(1) for p in probs]
    for u, expected in ((0.0, [int(n[0]) for n in nonzero]), (1.0 - 2.0**-24, [int(n[-1]) for n in nonzero])):
        assert torch.tensor(u, dtype=torch.float32).item() == u  # representable in float32
        monkeypatch.setattr(
            torch, "rand", lambda size, dtype=None, device=None, u=u: torch.full(size, u, dtype=dtype)
        )
        assert inverse_cdf(probs).tolist() == expected


def test_merge_flops_is_what_the_fused_decoder_merges():
    """``merge_flops``: 2 r in out per adapted projection, from the PEFT model's own lora_A and lora_B;
    0 without adapters (none, or disabled); and the matmul FLOPs that building a ``FusedDecoder``
    (which merges the adapters into the weights) runs, under FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    for model in (_policy("S"), _policy("L"), _adapted("M", r=8, lora_alpha=12)):
        expected, adapted = 0, 0
        for module in model.modules():
            if (
                isinstance(getattr(module, "lora_A", None), torch.nn.ModuleDict)
                and "default" in module.lora_A
            ):
                a, b = module.lora_A["default"].weight, module.lora_B["default"].weight
                rank, fan_in = a.shape
                fan_out, rank_b = b.shape
                assert rank == rank_b == model.peft_config["default"].r
                assert (fan_in, fan_out) == (module.in_features, module.out_features)
                expected += 2 * rank * fan_in * fan_out
                adapted += 1
        assert adapted == 7 * model.get_base_model().config.num_hidden_layers  # all-linear, not lm_head
        assert merge_flops(model) == expected
        counter = FlopCounterMode(display=False)
        with counter:
            FusedDecoder(model, capacity=8)
        assert counter.get_total_flops() == expected
        with model.disable_adapter():
            assert merge_flops(model) == 0
    plain = _policy("M", lora=False)
    assert merge_flops(plain) == 0
    counter = FlopCounterMode(display=False)
    with counter:
        FusedDecoder(plain, capacity=8)
    assert counter.get_total_flops() == 0


def test_what_the_fused_decoder_cannot_merge_is_refused():
    from peft import LoraConfig

    if "lora_bias" not in {f.name for f in dataclasses.fields(LoraConfig)}:
        pytest.skip("this PEFT has no lora_bias")
    assert unsupported(_policy("S"), fused=True) is None
    with pytest.warns(UserWarning, match="bias"):  # PEFT: the base layers have no bias to merge it into
        biased = _adapted("S", lora_bias=True)
    reason = unsupported(biased, fused=True)
    assert isinstance(reason, str) and "bias" in reason
