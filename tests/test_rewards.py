"""Reward systems and the common judge: values, names, FLOP costs, and no crash on any input."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paper_repro import rewards, testbed
from paper_repro.accounting.profiling import flop_counter
from paper_repro.evaluation import judge
from paper_repro.rewards.prm_scorer import PRMScorer, aggregate
from paper_repro.tasks import arith

PROBLEM = arith.Problem(7, (("+", 3), ("*", 2), ("-", 4)))
ROW = {"answer": "16", "start": 7, "ops": ["+3", "*2", "-4"]}
PROMPT = PROBLEM.prompt


@pytest.fixture(scope="module")
def scorer():
    """A small random PRM of the testbed's kind (a likelihood PRM, two outputs per position)."""
    tokenizer = testbed.build_tokenizer()
    # eager attention: FlopCounterMode cannot see the CPU sdpa kernel
    model = testbed.random_model(tokenizer=tokenizer, head="prm", attn_implementation="eager")
    return PRMScorer(model.eval(), tokenizer, batch_size=3)


@pytest.fixture(scope="module")
def systems(scorer):
    return {name: rewards.build_reward(name, "arith", prm=scorer) for name in rewards.REWARD_SYSTEMS}


def _call(fn, completions, row=ROW):
    n = len(completions)
    return fn(prompts=[PROMPT] * n, completions=completions, **{k: [v] * n for k, v in row.items()})


def test_registry_names_are_the_functions_names_and_trl_sees_them(systems):
    for name, system in rewards.REGISTRY.items():
        assert system.fn.__name__ == name == systems[name].__name__  # TRL labels its logs by __name__
        assert getattr(rewards, name) is system.fn  # a module-level function, importable by name
    with pytest.raises(ValueError, match="unknown reward system 'vibes'; known: sparse"):
        rewards.build_reward("vibes")


def test_cost_and_columns_are_declared_once_and_obeyed(systems):
    """A PRM-based system is charged the PRM's forward, a free one nothing; each reads what it says."""
    completions = [PROBLEM.solution(), "answer: 16"]
    for name, system in rewards.REGISTRY.items():
        cost = systems[name].flop_cost(prompts=[PROMPT] * 2, completions=completions)
        assert (cost["useful"] > 0) == system.prm_based, name
        needed = {"nothing": set(), "answer": {"answer"}}.get(system.reads, set(ROW))
        for column in needed:
            partial = {k: [v] * 2 for k, v in ROW.items() if k != column}
            with pytest.raises(ValueError, match=f"needs dataset columns .*missing \\['{column}'\\]"):
                systems[name](prompts=[PROMPT] * 2, completions=completions, **partial)


def test_a_new_reward_is_one_registered_function(monkeypatch):
    """What the rewards module's docstring promises: one function, and every layer knows it."""
    monkeypatch.setattr(rewards, "REGISTRY", dict(rewards.REGISTRY))

    @rewards.reward_system(reads="answer")
    def terse_for_this_test(completions, rows, ctx):
        return [
            float(ctx.grader.is_correct(c, r) and len(c) <= 40)
            for c, r in zip(completions, rows, strict=True)
        ]

    fn = rewards.build_reward("terse_for_this_test", "arith")
    assert fn.__name__ == "terse_for_this_test" and not rewards.is_prm_based("terse_for_this_test")
    assert _call(fn, [PROBLEM.solution(), "x" * 60]) == [float(len(PROBLEM.solution()) <= 40), 0.0]


def test_rule_based_values_on_worked_cases(systems):
    right = PROBLEM.solution()
    slipped = PROBLEM.solution(errors=[0, 1, 0])  # one wrong step, wrong answer
    trailing = right + "\nanswer: 99"  # a second, fake final answer after the first
    no_marker = "7+3=10\n10*2=20\n20-4=16"
    got = {
        n: _call(systems[n], [right, slipped, trailing, no_marker]) for n in ("sparse", "structured", "dense")
    }
    assert got["sparse"] == [1.0, 0.0, 1.0, 0.0]
    assert got["structured"] == pytest.approx([1.0, 0.2, 0.8 + 0.2 * 2 / 3, 0.2 * 1 / 3])
    assert got["dense"] == pytest.approx([1.0, 0.5 * 2 / 3, 1.0, 0.5])


def test_proxy_prm_is_the_exact_checker_aggregated(scorer):
    slipped = PROBLEM.solution(errors=[0, 1, 0])
    for how, want in (("min", [1.0, 0.0]), ("mean", [1.0, 2 / 3])):
        fn = rewards.build_reward("proxy_prm", "arith", prm=scorer, aggregation=how)
        assert _call(fn, [PROBLEM.solution(), slipped]) == pytest.approx(want)


def test_proxy_and_real_prm_are_charged_the_same_flops_the_prm_runs(systems, scorer):
    completions = [PROBLEM.solution(), PROBLEM.solution(errors=[1, 0, 0]), "", "7+3=10\n" * 40]
    prompts = [PROMPT] * len(completions)
    proxy = systems["proxy_prm"].flop_cost(prompts=prompts, completions=completions)
    real = systems["prm"].flop_cost(prompts=prompts, completions=completions)
    assert proxy == real and real["useful"] > 0
    assert systems["sparse"].flop_cost(prompts=prompts, completions=completions) == {
        "useful": 0.0,
        "executed": 0.0,
    }
    counter = flop_counter()
    with counter:
        _call(systems["prm"], completions)
    assert counter.get_total_flops() == pytest.approx(real["executed"], rel=1e-9)
    assert real["useful"] < real["executed"]  # padding costs


def test_a_token_classification_prm_is_priced_by_its_own_head():
    """The generic PRM interface (a 2-way token-classification head, as the earlier testbed PRM had):
    its forward is priced with a 2-wide head, not the vocabulary, and FlopCounterMode agrees."""
    tokenizer = testbed.build_tokenizer()
    model = testbed.random_model(
        tokenizer=tokenizer, head="token-classification", attn_implementation="eager"
    )
    scorer = PRMScorer(model.eval(), tokenizer, batch_size=3)
    assert scorer.shape.head == ((testbed.TINY.hidden, 2),)
    steps = [["7+3=10", "10*2=20"], ["7+3=11"]]
    cost = scorer.flop_cost([PROMPT] * 2, steps)
    counter = flop_counter()
    with counter:
        scorer.step_scores([PROMPT] * 2, steps)
    assert counter.get_total_flops() == pytest.approx(cost["executed"], rel=1e-9)


def test_prm_reward_reads_the_scores_at_separators(systems, scorer):
    scores = scorer.step_scores([PROMPT], [["7+3=10", "10*2=20", "20-4=16"]])
    assert len(scores[0]) == 3 and all(0 <= s <= 1 for s in scores[0])
    assert _call(systems["prm"], [PROBLEM.solution()]) == pytest.approx([min(scores[0])])
    assert _call(systems["prm"], ["", "answer: 16"]) == [0.0, 0.0]  # no step lines, nothing to score
    assert aggregate([], "min") == 0.0


def test_unknown_names_and_missing_prm_are_refused(scorer):
    with pytest.raises(ValueError, match="unknown reward system 'rlhf'; known: sparse, structured"):
        rewards.build_reward("rlhf")
    with pytest.raises(ValueError, match="needs a PRM"):
        rewards.build_reward("prm")
    with pytest.raises(ValueError, match="proxy_prm needs an exact step checker; task 'math' has none"):
        rewards.build_reward("proxy_prm", "math", prm=scorer)
    with pytest.raises(ValueError, match="dense needs an exact step checker; task 'math' has none"):
        rewards.build_reward("dense", "math")
    with pytest.raises(ValueError, match="unknown task 'chess'"):
        rewards.build_reward("sparse", "chess")


def test_a_dataset_without_the_columns_a_reward_reads_is_refused(systems):
    with pytest.raises(
        ValueError,
        match=r"reward 'dense' needs dataset columns \['answer', 'start', 'ops'\]; missing \['start', 'ops'\]",
    ):
        systems["dense"](prompts=[PROMPT], completions=[PROBLEM.solution()], answer=["16"])
    assert systems["sparse"](prompts=[PROMPT], completions=[PROBLEM.solution()], answer=["16"]) == [1.0]


def test_math_task_rewards_use_math_verify():
    sparse = rewards.build_reward("sparse", "math")
    structured = rewards.build_reward("structured", "math")
    completions = ["First.\n\nSo $x = \\frac{1}{2}$.\n\nThe answer is \\boxed{0.5}.", "I think 3."]
    kwargs = {"prompts": ["q", "q"], "completions": completions, "answer": ["\\frac{1}{2}"] * 2}
    assert sparse(**kwargs) == [1.0, 0.0]
    assert structured(**kwargs) == pytest.approx([1.0, 0.0])
    # TRL's conversational form
    assert sparse(
        prompts=["q"], completions=[[{"role": "assistant", "content": "\\boxed{2}"}]], answer=["2"]
    ) == [1.0]


def test_judge_scores_process_quality():
    j = judge.build_judge("step_verifier")
    got = j.score([PROMPT] * 3, [PROBLEM.solution(), PROBLEM.solution(errors=[0, 1, 0]), ""], [ROW] * 3)
    assert got == pytest.approx([1.0, 2 / 3, 0.0])
    assert j.eval_flops == 0.0
    with pytest.raises(ValueError, match="unknown judge"):
        judge.build_judge("gpt")


def test_prm_judge_reports_eval_flops(scorer):
    j = judge.build_judge("prm_judge", scorer=scorer, task="arith")
    scores = j.score([PROMPT], [PROBLEM.solution()], [ROW])
    assert 0 <= scores[0] <= 1 and j.eval_flops > 0


# ------------------------------------------------------------------------------- adversarial input

step_line = st.builds(
    lambda a, op, b, c: f"{a}{op}{b}={c}",
    st.integers(-5, 200), st.sampled_from("+-*/"), st.integers(-5, 20), st.integers(-999, 9999),
)  # fmt: skip
completion_text = st.one_of(
    st.text(max_size=300),  # anything, non-ASCII included
    st.lists(step_line, max_size=12).map("\n".join),
    st.builds(lambda steps, ans, tail: "\n".join(steps) + f"\nanswer: {ans}{tail}",
              st.lists(step_line, max_size=8), st.text(max_size=12), st.text(max_size=30)),
    st.builds(lambda line, n: (line + "\n") * n, step_line, st.integers(50, 400)),  # runaway repeats
    st.just("answer: 16"),  # a fake final answer with no work
)  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(completion_text, min_size=1, max_size=4))
def test_every_reward_and_the_judge_accept_any_completion(systems, texts):
    for name, fn in systems.items():
        values = _call(fn, texts)
        assert len(values) == len(texts)
        assert all(0.0 <= v <= 1.0 for v in values), (name, values)
    scores = judge.StepVerifierJudge().score([PROMPT] * len(texts), texts, [ROW] * len(texts))
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_a_fake_final_answer_without_work_earns_only_the_answer(systems):
    got = {n: _call(systems[n], ["answer: 16"])[0] for n in ("sparse", "structured", "dense", "proxy_prm")}
    assert got == pytest.approx(
        {"sparse": 1.0, "structured": 0.8 + 0.2 * 2 / 3, "dense": 0.5, "proxy_prm": 0.0}
    )


def test_trl_grpo_passes_the_arith_columns_and_the_ledger_charges_the_prm(tmp_path, scorer):
    """A real LedgerGRPOTrainer run on arith prompts: TRL hands the reward the dataset's columns,
    and C_reward is exactly the PRM forward that ``flop_cost`` prices (the proxy is charged alike)."""
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig

    from paper_repro.ledger import LedgerConfig, LedgerGRPOTrainer

    records = [e.to_record() for e in arith.load_split("train")[:16]]
    data = Dataset.from_list([{k: r[k] for k in ("prompt", "answer", "start", "ops")} for r in records])
    calls = []
    prm_reward = rewards.build_reward("prm", "arith", prm=scorer)
    proxy = rewards.build_reward("proxy_prm", "arith", prm=scorer)

    def spy(**kwargs):
        calls.append(kwargs)
        return prm_reward(**kwargs)

    spy.__name__ = "prm"
    spy.flop_cost = prm_reward.flop_cost
    tokenizer = testbed.build_tokenizer()
    policy = testbed.random_model(tokenizer=tokenizer)
    args = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=4, max_completion_length=12,
        max_steps=2, learning_rate=1e-3, report_to="none", save_strategy="no", use_cpu=True, beta=0.0,
        bf16=False, gradient_checkpointing=False, disable_tqdm=True, seed=0, reward_weights=[1.0, 0.0],
    )  # fmt: skip
    trainer = LedgerGRPOTrainer(
        model=policy, reward_funcs=[spy, proxy], args=args, train_dataset=data,
        processing_class=tokenizer, peft_config=LoraConfig(r=4, target_modules="all-linear"), ledger=LedgerConfig(),
    )  # fmt: skip
    trainer.train()
    assert calls and {"answer", "start", "ops"} <= set(calls[0])
    charged = trainer.ledger.component_totals("useful")["reward"]
    expected = 2 * sum(
        prm_reward.flop_cost(prompts=c["prompts"], completions=c["completions"])["useful"] for c in calls
    )
    assert charged == pytest.approx(expected, rel=1e-9) and charged > 0


def test_qwen_math_prm_input_format():
    """Qwen2.5-Math-PRM's usage: system, user question, assistant steps each ended by <extra_0>."""
    from paper_repro.rewards.prm_scorer import qwen_math_prm_format
    from paper_repro.tasks.hub import CHATML_TEMPLATE

    tokenizer = testbed.build_tokenizer()
    tokenizer.chat_template = CHATML_TEMPLATE
    text = qwen_math_prm_format(tokenizer)("what is 1+1?", ["1+1=2", "so 2"])
    assert text.startswith("<|im_start|>system\nPlease reason step by step")
    assert "<|im_start|>user\nwhat is 1+1?<|im_end|>" in text
    assert "<|im_start|>assistant\n1+1=2<extra_0>so 2<extra_0><|im_end|>" in text


def test_committed_prm_loads_as_a_scorer():
    from paper_repro.common.paths import repo_root

    scorer = PRMScorer.load(repo_root() / "data/models/prm")
    scores = scorer.step_scores([PROMPT], [PROBLEM.solution().split("\n")[:-1]])
    assert len(scores[0]) == 3 and all(0 <= s <= 1 for s in scores[0])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        PRMScorer.load(repo_root() / "data/models/no-such-prm")


def test_reward_comparison_table_on_committed_models(tmp_path):
    from paper_repro import cli

    out = tmp_path / "rewards.csv"
    assert cli.main(["reward-comparison", "--n", "12", "--out", str(out)]) == 0
    import pandas as pd

    table = pd.read_csv(out)
    assert list(table["reward_system"]) == list(rewards.REWARD_SYSTEMS)
    assert (table["n_completions"] == 12).all() and table["mean"].between(0, 1).all()
    charged = table["reward_system"].map(rewards.is_prm_based)
    rule, prm_based = table[~charged], table[charged]
    assert (rule["flops_per_completion_useful"] == 0).all()
    assert prm_based["flops_per_completion_useful"].nunique() == 1  # proxy charged the PRM's cost
    assert (prm_based["flops_per_completion_useful"] > 0).all()
    assert table["policy"].iloc[0] == "data/models/policy-M"  # repo-relative: the same on every machine


def test_a_judge_model_reward_is_one_registered_function_named_by_its_path(tmp_path):
    """A reward outside the package, registered with its own model's cost, is found by its dotted
    path and priced through that one object: by the planner (C_reward = P x G forwards of the
    judge), by the budget check and by the ledger's charge on real completions."""
    import yaml

    from paper_repro import rewards
    from paper_repro.accounting.flops import forward_flops, sequence_work
    from paper_repro.config import load_profile
    from paper_repro.models import shape
    from paper_repro.run.allocation import plan_setting
    from paper_repro.run.preflight import round_ceiling
    from paper_repro.run.spec import setting_specs
    from tests.judge_reward import JUDGE

    name = "tests.judge_reward.judged"
    system = rewards.get(name)
    assert system.name == "judged" and system.own_cost is not None and not system.prm_based
    with pytest.raises(ValueError, match="cannot import"):
        rewards.get("tests.no_such_module.judged")

    raw = yaml.safe_load(Path(load_profile("cpu-tiny").source).read_text())
    raw["stages"] = {"B": {"policy": "M", "rewards": ["sparse", name]}}
    (tmp_path / "judged.yaml").write_text(yaml.safe_dump(raw))
    profile = load_profile(tmp_path / "judged.yaml")
    (cell,) = [c for c in plan_setting(profile, profile.setting(name)).cells if c.label == "r50"]
    p, c = profile.expected_lengths["prompt"], profile.expected_lengths["completion"]
    per_completion = forward_flops(shape(JUDGE), sequence_work(p + c))
    assert cell.round_cost.C_reward == pytest.approx(cell.P * cell.G * per_completion)
    (sparse,) = [c for c in plan_setting(profile, profile.setting("sparse")).cells if c.label == "r50"]
    assert sparse.round_cost.C_reward == 0

    spec = setting_specs(profile, name, seeds=1, cells=["r50"])[0]
    assert (
        spec.prm is None
        and spec.weights != setting_specs(profile, "sparse", seeds=1, cells=["r50"])[0].weights
    )
    assert round_ceiling(spec) > round_ceiling(setting_specs(profile, "sparse", seeds=1, cells=["r50"])[0])

    fn = rewards.build_reward(name, "arith")
    cost = fn.flop_cost(prompts=["7, add 3?"], completions=["7+3=10\nanswer: 10"])
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(JUDGE)
    n = len(tok("7, add 3?")["input_ids"]) + len(tok("7+3=10\nanswer: 10")["input_ids"])
    assert cost["useful"] == pytest.approx(forward_flops(shape(JUDGE), sequence_work(n)))
