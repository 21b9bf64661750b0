"""The lean sampler against HF ``generate``: the same tokens from the same random state, the same
log-probabilities, the same runs, and the ledger's ``executed`` count of what it ran."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from paper_repro import flops, models
from paper_repro.flops import LoRASpec, ModelShape
from paper_repro.ledger import LedgerConfig
from paper_repro.profiling import flop_counter
from paper_repro.sampler import LeanStats, lean_generate, unsupported

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
            for a, b in zip(logprobs, ref_logprobs, strict=True):  # log_softmax of a row vs of a batch
                assert a == pytest.approx(b, rel=1e-5, abs=1e-5)
        if seed == 0:
            assert min(map(len, ref)) < max(map(len, ref))  # rows did finish at different steps
            assert stats.decode_rows[-1] < stats.rows  # and left the batch


def test_the_ledgers_executed_count_is_what_the_lean_sampler_ran():
    """FlopCounterMode (eager attention) around the lean sampler, finished rows leaving the batch,
    against the executed work the ledger charges from the sampler's record."""
    model = _policy("M", "eager")
    prompts = _prompts(32, 4)
    stats = LeanStats()
    counter = flop_counter()
    torch.manual_seed(0)
    with counter:
        lean_generate(model, prompts, max_new_tokens=48, eos_token_ids=[EOS], pad_token_id=PAD, compact=True,
                      stats=stats)  # fmt: skip
    assert stats.decode_rows[-1] < stats.rows
    shape = ModelShape.from_config(model.get_base_model().config)
    lora = LoRASpec(
        rank=4, target_modules=("down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj")
    )
    work = flops.padded_generation_work(stats.rows, stats.prompt_width, 0, stats.decode_rows)
    assert counter.get_total_flops() / flops.forward_flops(shape, work, lora) == pytest.approx(1.0, abs=0.02)
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

    from paper_repro.evaluate import EvalSets, SampleConfig, evaluate_policy
    from paper_repro.judge import build_judge
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
