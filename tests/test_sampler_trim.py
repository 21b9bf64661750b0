"""``lean_generate(trim=True)`` (the fused decoder's :meth:`~paper_repro.sampler.FusedDecoder.prefill`
and :meth:`~paper_repro.sampler.FusedDecoder.step`, what a run's evaluation decodes with) against the
fused decoder's own computation: the same logits, cache, tokens and log-probabilities, bit for bit,
on the shipped policies (with and without LoRA adapters), on one torch thread and on two; and a
run's evaluation against the one before it (``paper_repro.bench.evaluation.reference_evaluate_policy``)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools

import pytest
import torch

from paper_repro import models
from paper_repro.sampler import FusedDecoder, LeanStats, lean_generate
from paper_repro.sampler.fused import packed_floor

SETS = ("heldout", "gsm_tiny", "math_tiny")
PROBLEMS = 40  # per set: a few dozen, prompts of every length the sets have


@functools.cache
def _tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(models.checkpoint("data/models/policy-M"))


@functools.cache
def _prompt_ids(name: str, limit: int = PROBLEMS) -> list[list[int]]:
    from paper_repro.tasks import load_examples

    examples = load_examples(f"arith/{name}", limit=limit)
    return _tokenizer()([e.prompt for e in examples], add_special_tokens=False)["input_ids"]


def _policy(size: str, lora: bool):
    """A shipped policy; with ``lora``, LoRA adapters whose B is not zero (a trained policy's shape)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(models.checkpoint(f"data/models/policy-{size}"))
    if lora:
        model = get_peft_model(
            model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0)
        )
        generator = torch.Generator().manual_seed(1)
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.data.normal_(0, 0.05, generator=generator)
    return model.eval()


@contextlib.contextmanager
def _threads(n: int):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _padded(prompts: list[list[int]], pad_id: int):
    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    pad = torch.zeros((len(prompts), width), dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, width - len(p) :] = torch.tensor(p)
        pad[r, width - len(p) :] = 1
    return ids, pad, (pad.cumsum(-1) - 1).masked_fill(pad == 0, 0)


def _cached(decoder: FusedDecoder, pad: torch.Tensor) -> list[torch.Tensor]:
    """Each layer's cached keys and values of the prompts' tokens, ``(tokens, kv_heads, head_dim)``."""
    width, real = pad.shape[1], pad.bool()
    keys = [k[:, :, :, :width].permute(0, 3, 1, 2)[real] for k in decoder.keys]
    return keys + [v[:, :, :width].transpose(1, 2)[real] for v in decoder.values]


def _generate(model, prompts, trim: bool, **sampling):
    stats = LeanStats(logprobs=[])
    tokenizer = _tokenizer()
    torch.manual_seed(0)
    completions = lean_generate(
        model, prompts, max_new_tokens=96, eos_token_ids=[tokenizer.eos_token_id],
        pad_token_id=tokenizer.pad_token_id, fused=True, trim=trim, stats=stats,
        **(sampling or dict(do_sample=False, temperature=None, compact=True)),
    )  # fmt: skip
    return completions, stats.logprobs, stats.decode_rows


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("lora", [False, True], ids=["base", "lora"])
@pytest.mark.parametrize("size", ["S", "M", "L"])
def test_trimmed_decoding_is_the_fused_decoders_bit_for_bit(size, lora, threads):
    """On each evaluation set's first problems: :meth:`FusedDecoder.prefill` gives
    :meth:`FusedDecoder.forward`'s logits and its keys and values at every prompt token, bit for bit;
    greedy, ``trim=True`` gives the same completions, the same per-token log-probabilities (bit for
    bit) and the same batch at every step. On two threads the last layer's MLP runs over more than
    its last positions (fewer rows than the floor)."""
    model = _policy(size, lora)
    with _threads(threads), torch.inference_mode():
        for name in SETS:
            prompts = _prompt_ids(name)
            ids, pad, position = _padded(prompts, _tokenizer().pad_token_id)
            assert int(pad.sum()) >= packed_floor()  # the trimmed prefill runs, not forward
            full, trimmed = FusedDecoder(model, capacity=96), FusedDecoder(model, capacity=96)
            assert torch.equal(full.forward(ids, position, pad), trimmed.prefill(ids, position, pad))
            for a, b in zip(_cached(full, pad), _cached(trimmed, pad), strict=True):
                assert torch.equal(a, b)
            assert _generate(model, prompts, trim=True) == _generate(model, prompts, trim=False)


def test_trimmed_sampling_draws_the_same_tokens():
    """Sampled (the rows of a prompt sharing its prefill, none leaving the batch), ``trim=True``
    draws the same tokens from the same seed."""
    model = _policy("M", lora=True)
    prompts = [p for p in _prompt_ids("heldout", 16) for _ in range(4)]
    sampled = dict(do_sample=True, temperature=1.0, compact=False)
    with torch.inference_mode():
        assert _generate(model, prompts, True, **sampled) == _generate(model, prompts, False, **sampled)


def test_a_batch_below_the_floor_is_decoded_as_forward_decodes_it():
    """Fewer prompt tokens than the floor: the prefill is :meth:`FusedDecoder.forward`'s (its cache
    room for every step), and the decode steps still give forward's tokens."""
    model = _policy("S", lora=False)
    prompts = [_prompt_ids("heldout")[0][: packed_floor() - 1]]  # below the floor at any thread count
    with torch.inference_mode():
        assert _generate(model, prompts, trim=True) == _generate(model, prompts, trim=False)


def test_an_evaluation_is_the_one_before_it():
    """:func:`paper_repro.evaluation.evaluate.evaluate_policy` (the fused decoder, trimmed; the prompts' tokens
    cached) and the evaluation before it: the same metrics and the same greedy completions, with the
    run's reward, grader and judge, evaluated twice (the second time on cached prompts)."""
    from paper_repro.bench.evaluation import reference_evaluate_policy, reference_sample
    from paper_repro.evaluation.evaluate import EvalSets, SampleConfig, evaluate_policy, sample
    from paper_repro.evaluation.judge import build_judge
    from paper_repro.rewards import build_reward
    from paper_repro.tasks import load_examples
    from paper_repro.tasks.graders import grader

    sets = EvalSets(*(load_examples(f"arith/{name}", limit=PROBLEMS) for name in SETS))
    reward, judge = build_reward("dense", "arith"), build_judge("step_verifier", None, "arith")
    config = SampleConfig(max_new_tokens=96, batch_size=PROBLEMS, sampler="fused")
    tokenizer = _tokenizer()
    for model in (_policy("M", lora=False), _policy("L", lora=True)):
        old = reference_evaluate_policy(model, tokenizer, sets, reward, judge, grader("arith"), config)
        for _ in range(2):
            assert evaluate_policy(model, tokenizer, sets, reward, judge, grader("arith"), config) == old
        for examples in (sets.heldout, sets.gsm, sets.math):
            prompts = [e.prompt for e in examples]
            assert sample(model, tokenizer, prompts, config) == reference_sample(
                model, tokenizer, prompts, config
            )
    # sampled (pass@k): the same draws from the seed too
    sampled = dataclasses.replace(config, n=3, temperature=1.0)
    prompts = [e.prompt for e in sets.heldout]
    model = _policy("S", lora=True)
    assert sample(model, tokenizer, prompts, sampled) == reference_sample(model, tokenizer, prompts, sampled)


def test_prompts_are_encoded_once_per_tokenizer():
    from paper_repro.sampler import tokens

    tokenizer = _tokenizer()
    texts = ["3, add 4?\n", "12, times 2, minus 5?\n"]
    tokens.clear()
    first = tokens.encode(tokenizer, texts)
    assert first == tokenizer(texts, add_special_tokens=False)["input_ids"]
    first[0].append(-1)  # the caller's copy: the cache keeps its own
    calls = []
    encode = tokenizer.__call__

    class Counting(type(tokenizer)):
        def __call__(self, *args, **kwargs):
            calls.append(args)
            return encode(*args, **kwargs)

    tokenizer.__class__ = Counting
    try:
        assert tokens.encode(tokenizer, texts) == tokenizer(texts, add_special_tokens=False)["input_ids"]
        assert len(calls) == 1  # the comparison's own call: encode read its cache
        assert tokens.encode(tokenizer, texts[:1]) == [first[0][:-1]]
        assert len(calls) == 2  # other texts are encoded
    finally:
        tokenizer.__class__ = Counting.__bases__[0]
        tokens.clear()


@pytest.mark.parametrize("threads", [2, 3])
def test_the_activation_rounds_as_the_padded_layouts_threads_round_it(threads):
    """On more than one thread torch shares an elementwise op between threads at places that depend
    on the tensor's size, and the SiLU rounds a share's edges otherwise: the trimmed prefill's
    activation of the rows of a ``(rows, 2 * width)`` layout is the layout's own, row for row, where
    the shares split rows and where they do not."""
    from transformers.activations import ACT2FN

    from paper_repro.sampler import fused

    act = ACT2FN["silu"]
    split = 0
    with _threads(threads):
        for total, width in [(301, 176), (1960, 176), (12345, 176), (14700, 256), (210, 128)]:
            split += len(fused._thread_splits(total, width, threads))
            values = torch.randn((total, 2 * width), generator=torch.Generator().manual_seed(total))
            rows = torch.arange(0, total, 3)  # every third row, as the prompts' tokens are some rows
            laid_out = act(values[:, :width])[rows]
            gate_up = values[rows]  # the MLP's rows, as its matmul gives them: gate, then up
            for gate in (gate_up[:, :width], gate_up[:, :width].contiguous()):
                assert torch.equal(fused._thread_activation(act, gate, rows, total), laid_out)
                assert torch.equal(fused._laid_out(act, gate, rows, total), laid_out)
    assert split > 0  # some shares split rows


def test_a_wrong_reading_of_where_the_threads_meet_is_caught(monkeypatch):
    """The once-per-layout check that guards :func:`_thread_activation` (its fallback: the activation
    in the padded layout) fails where the threads' shares are misread, missed or invented."""
    from transformers.activations import ACT2FN

    from paper_repro.sampler import fused

    act = ACT2FN["silu"]
    with _threads(2):
        assert fused._splits_as_forward(act, 301, 176, torch.float32)
        monkeypatch.setattr(fused, "_thread_splits", lambda total, width, threads: [])
        assert not fused._splits_as_forward(act, 301, 176, torch.float32)
        monkeypatch.setattr(fused, "_thread_splits", lambda total, width, threads: [(5, 17)])
        assert not fused._splits_as_forward(act, 300, 176, torch.float32)
