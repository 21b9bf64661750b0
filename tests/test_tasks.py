"""The arith task, its shipped splits and tokenizer, and the hub dataset mapping (offline)."""

from __future__ import annotations

import json
import random

import pytest

from paper_repro import models, testbed
from paper_repro.common.paths import repo_root
from paper_repro.tasks import arith, hub


def test_problem_solution_and_checks():
    p = arith.Problem(7, (("+", 3), ("*", 2), ("-", 4)))
    assert p.prompt == "7, add 3, times 2, minus 4?\n"
    assert p.solution() == "7+3=10\n10*2=20\n20-4=16\nanswer: 16"
    assert p.answer == 16
    assert arith.is_correct(p.solution(), "16")
    assert arith.step_verdicts(p, p.solution()) == [True, True, True]
    assert arith.process_score(p, p.solution()) == 1.0
    # a slip in step 2 is carried on: one wrong step, a wrong answer
    wrong = p.solution(errors=[0, 1, 0])
    assert wrong == "7+3=10\n10*2=21\n21-4=17\nanswer: 17"
    assert arith.step_verdicts(p, wrong) == [True, False, True]
    assert not arith.is_correct(wrong, "16")
    assert arith.process_score(p, wrong) == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "text, answer, verdicts",
    [
        ("", None, []),
        ("answer: 16", 16, []),
        ("7+3=10\nanswer:", None, [True]),
        ("7+3=10\n10*2=20\n20-4=16\n20-4=16\nanswer: 16", 16, [True, True, True, False]),
        ("7+3=10\ngarbage\n", None, [True, False]),
        ("7-3=4\n4*2=8\n8-4=4\nanswer: 4", 4, [False, True, True]),  # wrong op once, then right on its values
        ("7+3=10\n" * 500, None, [True] + [False] * 499),
        ("answer: -3\nmore text", -3, []),
    ],
)
def test_parsing_malformed_completions_never_raises(text, answer, verdicts):
    p = arith.Problem(7, (("+", 3), ("*", 2), ("-", 4)))
    assert arith.extract_answer(text) == answer
    assert arith.step_verdicts(p, text) == verdicts
    assert 0.0 <= arith.process_score(p, text) <= 1.0


def test_generation_is_deterministic_and_bounded():
    spec = arith.SPLITS["gsm_tiny"]
    a = [p for p, _ in arith.generate_split(spec, set())]
    b = [p for p, _ in arith.generate_split(spec, set())]
    assert a == b
    for p in a:
        assert len(p.ops) in spec.difficulty.steps
        assert all(0 <= c <= spec.difficulty.max_value for *_, c in p.steps)
    errors = arith.sample_errors(random.Random(0), 10_000, 0.1)
    assert 0.08 < sum(e != 0 for e in errors) / 10_000 < 0.12


def test_shipped_splits_match_the_generator_and_never_overlap():
    shipped = {name: arith.load_split(name) for name, spec in arith.SPLITS.items() if spec.shipped}
    regenerated = arith.build_splits(**_shipped_error_rates())
    for name, examples in shipped.items():
        assert len(examples) == arith.SPLITS[name].size
        assert [e.to_record() for e in examples] == regenerated[name], f"{name} is stale: regenerate it"
    prompts = {name: {e.prompt for e in ex} for name, ex in shipped.items()}
    prompts["pretrain"] = {r["prompt"] for r in regenerated["pretrain"]}
    for test in ("gsm_tiny", "math_tiny", "heldout"):
        for train in ("train", "pretrain", "prm"):
            assert not prompts[test] & prompts[train], f"{test} overlaps {train}"
    assert not prompts["gsm_tiny"] & prompts["math_tiny"]
    # the harder split really is harder
    steps = {
        n: sum(e.meta["n_steps"] for e in shipped[n]) / len(shipped[n]) for n in ("gsm_tiny", "math_tiny")
    }
    assert steps["math_tiny"] > steps["gsm_tiny"] + 1.5


def test_nested_splits_keep_their_first_rows_and_the_distribution_of_steps():
    """heldout and gsm_tiny grew from 300 to 900 problems: their first 300 rows are the stream their
    seed drew in SPLIT_ORDER (what every evaluation with ``limit: 300`` reads), the rest avoid every
    prompt of every split (the SFT corpus's too) and keep the split's distribution of steps."""
    splits = arith.build_splits(**_shipped_error_rates())
    prompts = {name: [r["prompt"] for r in records] for name, records in splits.items()}
    nested = [name for name, spec in arith.SPLITS.items() if spec.base is not None]
    assert nested == ["gsm_tiny", "heldout"]
    for name in nested:
        spec = arith.SPLITS[name]
        assert (spec.base, spec.size) == (300, 900)
        others = {p for other, ps in prompts.items() if other != name for p in ps}
        assert len(set(prompts[name])) == spec.size and not set(prompts[name]) & others
        # the first rows: the split's own stream, cut at base, whatever it is asked for beyond
        earlier = {p for other in arith.SPLIT_ORDER[: arith.SPLIT_ORDER.index(name)] for p in prompts[other]}
        stream = [p.prompt for p, _ in arith.generate_split(spec, earlier)]
        assert prompts[name][: spec.base] == stream[: spec.base]
        assert arith.first_pass_prompts(splits) >= set(prompts[name][: spec.base])
        assert not arith.first_pass_prompts(splits) & set(prompts[name][spec.base :])
        # each block of 300 holds every step count about equally (75 expected, sd ~7.5)
        for start in range(0, spec.size, spec.base):
            block = splits[name][start : start + spec.base]
            counts = [sum(r["n_steps"] == n for r in block) for n in spec.difficulty.steps]
            assert min(counts) >= 55, (name, start, counts)
    with pytest.raises(ValueError, match="needs its extension_seed"):
        arith.SplitSpec("x", 10, 1, arith.MIXED, base=5)
    with pytest.raises(ValueError, match="must be in"):
        arith.SplitSpec("x", 10, 1, arith.MIXED, base=11, extension_seed=2)


def test_splits_json_records_the_generator():
    meta = json.loads((repo_root() / arith.TASK_DIR / "splits.json").read_text())
    for name, spec in arith.SPLITS.items():
        entry = meta["splits"][name]
        assert (entry["size"], entry["seed"]) == (spec.size, spec.seed)
        assert (entry.get("base"), entry.get("extension_seed")) == (spec.base, spec.extension_seed)


def test_prm_labels_are_the_step_checker_verdicts():
    examples = arith.load_split("prm")
    labels = [label for e in examples for label in e.meta["labels"]]
    assert 0.6 < sum(labels) / len(labels) < 0.9  # both classes well represented
    for e in examples[:200]:
        problem = arith.record_to_problem(e.meta)
        text = "\n".join([*e.meta["steps"], "answer: 0"])
        assert arith.step_verdicts(problem, text) == e.meta["labels"]


def test_unknown_or_missing_split_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown arith split 'nope'"):
        arith.load_split("nope")
    with pytest.raises(FileNotFoundError, match="paper-repro task-data"):
        arith.load_split("gsm_tiny", directory=tmp_path)


def test_tokenizer_round_trips_every_split(tmp_path):
    tokenizer = testbed.build_tokenizer()
    tokenizer.save_pretrained(tmp_path)
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.unk_token_id is not None
    texts = []
    for name, spec in arith.SPLITS.items():
        if spec.shipped:
            for e in arith.load_split(name):
                problem = arith.record_to_problem(e.meta)
                texts.append(e.prompt + problem.solution())
    encoded = loaded(texts, add_special_tokens=False)["input_ids"]
    assert all(loaded.unk_token_id not in ids for ids in encoded)
    assert loaded.batch_decode(encoded) == texts
    # the eos and PRM step separator are single special tokens
    ids = loaded("1+1=2<extra_0><eos>", add_special_tokens=False)["input_ids"]
    assert ids[-2:] == [loaded.convert_tokens_to_ids("<extra_0>"), loaded.eos_token_id]


def _shipped_error_rates() -> dict[str, float]:
    meta = json.loads((repo_root() / arith.TASK_DIR / "splits.json").read_text())
    return {"pretrain_error_rate": meta["pretrain_error_rate"], "prm_error_rate": meta["prm_error_rate"]}


# ---------------------------------------------------------------------------------------- hub data


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_gsm8k_mapping_from_a_local_file_of_the_hub_schema(tmp_path):
    rows = [
        {"question": "Tom has 3 apples and buys 39 more. How many?", "answer": "3+39=<<3+39=42>>42\n#### 42"},
        {"question": "A shop sells 1,000 pens.", "answer": "It sells 1,000.\n#### 1,000"},
    ]
    examples = hub.load_hub_dataset("gsm8k", local_path=_write_jsonl(tmp_path / "test.jsonl", rows))
    assert [e.answer for e in examples] == ["42", "1000"]
    assert examples[0].source == "openai/gsm8k/test"
    assert examples[0].prompt.endswith(hub.BOXED_INSTRUCTION)
    assert examples[0].prompt.startswith("Tom has 3 apples")


def test_math500_and_polaris_mapping(tmp_path):
    math_rows = [
        {
            "problem": "Compute $\\frac{2}{4}$.",
            "solution": "...",
            "answer": "\\frac{1}{2}",
            "subject": "Algebra",
            "level": 1,
            "unique_id": "test/algebra/1.json",
        },
    ]
    polaris_rows = [{"problem": "What is 6*7?", "answer": "42", "difficulty": "1/8"}]
    math = hub.load_hub_dataset("math500", local_path=_write_jsonl(tmp_path / "m.jsonl", math_rows))
    polaris = hub.load_hub_dataset("polaris", local_path=_write_jsonl(tmp_path / "p.jsonl", polaris_rows))
    assert math[0].answer == "\\frac{1}{2}" and math[0].source == "HuggingFaceH4/MATH-500/test"
    assert polaris[0].answer == "42" and polaris[0].source == "POLARIS-Project/Polaris-Dataset-53K/train"


@pytest.mark.parametrize(
    "completion, reference, expected",
    [
        ("so the total is \\boxed{42}.", "42", True),
        ("so the total is \\boxed{43}.", "42", False),
        ("#### 42", "42", True),
        ("The answer is \\boxed{\\frac{1}{2}}", "\\frac{1}{2}", True),
        ("The answer is \\boxed{0.5}", "\\frac{1}{2}", True),
        ("The answer is \\boxed{\\dfrac12}", "\\frac{1}{2}", True),
        ("It costs \\boxed{18 \\text{ dollars}}", "18", True),
        ("\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "\\left( 3, \\frac{\\pi}{2} \\right)", True),
        ("\\boxed{1000}", "1000", True),
        ("no final answer at all", "42", False),
        ("", "42", False),
    ],
)
def test_math_verify_answer_check(completion, reference, expected):
    assert hub.is_equivalent(completion, reference) is expected


def test_chat_prompt_uses_chatml_when_the_tokenizer_has_no_template():
    example = hub.Example(prompt="What is 1+1?\n" + hub.BOXED_INSTRUCTION, answer="2", source="x")
    tokenizer = testbed.build_tokenizer()
    text = hub.format_prompt(tokenizer, example)
    assert text.startswith("<|im_start|>system\nYou are Qwen")
    assert "<|im_start|>user\nWhat is 1+1?" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_offline_missing_dataset_and_model_say_what_and_where(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(hub, "_datasets_cache", lambda: str(tmp_path / "hf" / "datasets"))
    with pytest.raises(hub.HubUnavailableError) as err:
        hub.load_hub_dataset("gsm8k")
    message = str(err.value)
    assert "'openai/gsm8k'" in message and "HF_HUB_OFFLINE=1" in message
    assert str(tmp_path / "hf") in message and "cpu-tiny profile needs no download" in message
    with pytest.raises(
        hub.HubUnavailableError, match=r"model 'Qwen/Qwen2\.5-1\.5B-Instruct' is not available"
    ):
        models.checkpoint("Qwen/Qwen2.5-1.5B-Instruct")
    with pytest.raises(ValueError, match="unknown dataset 'gsm9k'; known: polaris, gsm8k, math500"):
        hub.load_hub_dataset("gsm9k")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        models.checkpoint(str(tmp_path / "no-such-model"))


def test_resolve_model_takes_local_checkpoints(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    assert models.checkpoint(tmp_path / "ckpt") == tmp_path / "ckpt"
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"has no config\.json"):
        models.checkpoint(tmp_path / "empty")
