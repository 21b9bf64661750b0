"""The FLOP ledger: its pieces by hand, and real TRL GRPO runs on CPU checked with a profiler."""

from __future__ import annotations

import itertools
import json
import random
import re
import statistics

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from paper_repro.accounting import flops
from paper_repro.accounting.flops import ModelShape, TrainSpec, Work
from paper_repro.accounting.profiling import flop_counter
from paper_repro.ledger import (
    METRIC_NAMES,
    BudgetWarning,
    FlopLedger,
    LedgerConfig,
    LedgerGRPOTrainer,
    forward_pass_work,
    generation_pass_work,
    group_advantages,
    max_variance_subset,
)
from paper_repro.testbed import build_tokenizer, random_model


def eager_policy():
    """A fresh random tiny policy with eager attention (FlopCounterMode cannot see the CPU sdpa kernel)."""
    return random_model(attn_implementation="eager")


# --- pieces --------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    rewards=st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0]), min_size=2, max_size=8),
    data=st.data(),
)
def test_max_variance_subset_is_the_best_subset(rewards, data):
    k = data.draw(st.integers(1, len(rewards)))
    chosen = max_variance_subset(rewards, k)
    assert len(chosen) == k == len(set(chosen))
    best = max(
        statistics.pvariance([rewards[i] for i in c]) for c in itertools.combinations(range(len(rewards)), k)
    )
    assert statistics.pvariance([rewards[i] for i in chosen]) == pytest.approx(best)


def test_max_variance_keeps_both_ends():
    assert sorted(max_variance_subset([0.0, 0.1, 0.5, 0.9, 1.0], 2)) == [0, 4]
    with pytest.raises(ValueError):
        max_variance_subset([1.0], 2)


@settings(max_examples=60, deadline=None)
@given(
    scores=st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=2, max_size=12),
    noise_seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_max_variance_subset_with_decimals_ignores_float_noise(scores, noise_seed, data):
    """A learned PRM's scores differ by ~1e-9 across machines: with ``decimals`` the kept subset is
    the same for the noisy scores as for the exact ones (scores on the 1e-4 grid plus a 1e-9 jitter:
    the jitter cannot cross a rounding boundary), and still a max-variance subset of the rounded ones."""
    exact = [round(s, 4) for s in scores]
    rng = random.Random(noise_seed)
    noisy = [s + rng.uniform(-1e-9, 1e-9) for s in exact]
    k = data.draw(st.integers(1, len(exact)))
    chosen = max_variance_subset(noisy, k, decimals=4)
    assert chosen == max_variance_subset(exact, k, decimals=4)
    best = max(
        statistics.pvariance([exact[i] for i in c]) for c in itertools.combinations(range(len(exact)), k)
    )
    assert statistics.pvariance([exact[i] for i in chosen]) == pytest.approx(best, abs=1e-12)


def test_max_variance_subset_without_decimals_follows_the_noise():
    """Why the rounding exists: exactly, a 1e-9 difference decides which of two tied scores is kept."""
    assert max_variance_subset([0.5, 0.5 + 1e-9, 0.0], 2) == [1, 2]
    assert max_variance_subset([0.5 + 1e-9, 0.5, 0.0], 2) == [0, 2]
    assert max_variance_subset([0.5, 0.5 + 1e-9, 0.0], 2, decimals=4) == [0, 2]
    assert max_variance_subset([0.5 + 1e-9, 0.5, 0.0], 2, decimals=4) == [0, 2]


def test_group_advantages_are_trl_group_normalised():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0])
    centred = r - torch.tensor([0.5, 0.5, 0.5, 0.5, 2.0, 2.0])
    group_std = torch.tensor([0.5**0.5] * 4 + [0.0] * 2)  # unbiased std of {0, 1} and of {2, 2}
    assert torch.allclose(group_advantages(r, 2, "group"), centred / (group_std + 1e-4), atol=1e-5)
    assert torch.allclose(group_advantages(r, 2, "none"), centred)
    assert torch.allclose(group_advantages(r, 2, "batch"), centred / (r.std() + 1e-4), atol=1e-5)
    nan = torch.tensor([1.0, float("nan"), 0.0, 1.0])
    assert group_advantages(nan, 2, "none")[:2].tolist() == [0.0, 0.0]


def test_forward_pass_work_counts_real_tokens_and_padding():
    # two rows: prompt width 3 (first row left-padded by 1), completion width 3 (second row 1 pad)
    mask = torch.tensor([[0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]])
    work = forward_pass_work(mask, logits_to_keep=3, compact_head=False)
    assert work["useful"] == Work(10, 2 * flops.causal_pairs(5), 3 + 2)
    assert work["executed"] == Work(12, 2 * 36, 2 * 5)
    assert forward_pass_work(mask, 3, compact_head=True)["executed"].head_tokens == 5


def test_generation_pass_work_padding_and_prefix_cache():
    work = generation_pass_work([3, 5], [4, 2], num_generations=1, prefix_cache=False, padded=True)
    assert work["useful"] == flops.generation_work(3, 4) + flops.generation_work(5, 2)
    assert work["executed"] == flops.padded_generation_work(2, 5, 4)
    cached = generation_pass_work([3, 3], [4, 4], num_generations=2, prefix_cache=True, padded=False)
    assert cached["useful"] == flops.generation_work(3, 4) + flops.generation_work(3, 4, prefill=False)
    assert cached["executed"] == cached["useful"]


# --- real TRL runs -------------------------------------------------------------------------


def _dataset(n: int = 64):
    from datasets import Dataset

    return Dataset.from_list([{"prompt": f"{i % 9}+{(3 * i) % 7}="} for i in range(n)])


def length_reward(completions, **kwargs):
    return [float(len(c)) / 10 for c in completions]


def measuring(hook: str) -> type[LedgerGRPOTrainer]:
    """A LedgerGRPOTrainer that adds up FlopCounterMode's count inside ``hook`` in ``measured``."""

    def wrapped(self, *args, **kwargs):
        counter = flop_counter()
        with counter:
            out = getattr(LedgerGRPOTrainer, hook)(self, *args, **kwargs)
        self.measured += counter.get_total_flops()
        return out

    return type(f"Measuring_{hook}", (LedgerGRPOTrainer,), {"measured": 0, hook: wrapped})


def run_tiny_grpo(tmp_path, ledger: LedgerConfig, measure: bool = False, **kwargs):
    trainer = build_tiny_grpo(tmp_path, ledger, measure=measure, **kwargs)
    counter = flop_counter()
    with counter:
        trainer.train()
    trainer.measured_total = counter.get_total_flops()
    return trainer


def build_tiny_grpo(
    tmp_path,
    ledger: LedgerConfig,
    measure: bool = False,
    reward_funcs=None,
    trainer_cls=None,
    trainer_kwargs=None,
    train_dataset=None,
    **overrides,
):
    from peft import LoraConfig
    from trl import GRPOConfig

    args = dict(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=8, num_generations=4,
        max_completion_length=10, max_steps=4, num_iterations=1, learning_rate=1e-3, report_to="none",
        logging_steps=100, save_strategy="no", use_cpu=True, beta=0.0, gradient_accumulation_steps=1,
        steps_per_generation=2, seed=0, disable_tqdm=True,
    )  # fmt: skip
    args.update(overrides)
    trainer_cls = trainer_cls or (measuring("_generate_single_turn") if measure else LedgerGRPOTrainer)
    trainer = trainer_cls(
        model=eager_policy(),
        reward_funcs=reward_funcs or length_reward,
        args=GRPOConfig(**args),
        train_dataset=_dataset() if train_dataset is None else train_dataset,
        processing_class=build_tokenizer(),
        peft_config=LoraConfig(r=4, target_modules="all-linear", lora_dropout=0.0),
        ledger=ledger,
        **(trainer_kwargs or {}),
    )
    return trainer


@pytest.mark.parametrize(
    "overrides",
    [
        dict(num_iterations=2),  # old-policy forward, K < G
        dict(beta=0.05),  # reference forward with adapters disabled
        # rollouts by the lean sampler (paper_repro.sampler), finished rows leaving its batch
        dict(num_iterations=2, max_completion_length=24, trainer_kwargs={"sampler": "lean"}),
        # the fused decoder (merged weights) and the update over length buckets (paper_repro.sampler.buckets)
        dict(
            num_iterations=2,
            max_completion_length=24,
            trainer_kwargs={"sampler": "fused", "update_layout": "bucketed"},
        ),
        # ... and over the buckets by the fused update forward (paper_repro.sampler.fused_update), with the
        # reference forward of disabled adapters
        dict(
            num_iterations=2,
            beta=0.05,
            max_completion_length=24,
            trainer_kwargs={"sampler": "fused", "update_layout": "fused"},
        ),
    ],
    ids=["mu2-old-forward", "beta-ref-forward", "lean-sampler", "fused-bucketed", "fused-fused"],
)
def test_ledger_agrees_with_profiler(tmp_path, overrides):
    trainer = run_tiny_grpo(tmp_path, LedgerConfig(kept=2), measure=True, **overrides)
    executed = trainer.ledger.summary()["executed"]
    measured_learning = trainer.measured_total - trainer.measured
    # measured 1.00000 in every case, GRPOConfig's default non-reentrant checkpointing on (the target: 0.5%)
    assert trainer.measured / executed["C_search"] == pytest.approx(1.0, abs=0.005)
    assert measured_learning / executed["C_learning"] == pytest.approx(1.0, abs=0.005)
    tokens = trainer.ledger.summary()["tokens"]
    kind = "old_forward_rows" if overrides.get("num_iterations", 1) > 1 else "ref_forward_rows"
    assert tokens[kind] == tokens["gen_rows"]  # the extra forward runs on all G, before down-sampling
    assert tokens["kept_rows"] == tokens["gen_rows"] / 2
    if overrides.get("trainer_kwargs", {}).get("update_layout") in ("bucketed", "fused"):
        assert trainer.lean_fallback is None and tokens["update_buckets"] > 0  # both new paths ran
        assert trainer.fused_update_fallback is None
    # the round ceiling the trainer prices itself bounds every round it ran
    assert max(trainer.ledger.rounds) <= trainer.price_round_ceiling()["C_total"]


def test_useful_is_at_most_executed_and_rho_is_consistent(tmp_path):
    trainer = run_tiny_grpo(tmp_path, LedgerConfig())
    s = trainer.ledger.summary()
    for comp in ("C_search", "C_learning", "C_total"):
        assert 0 < s["useful"][comp] <= s["executed"][comp]
    assert s["useful"]["rho"] == pytest.approx(s["useful"]["C_learning"] / s["useful"]["C_total"])
    assert 0 < s["rho_time"] < 1
    assert s["seconds"]["total"] == pytest.approx(
        sum(s["seconds"][c] for c in ("search", "learning", "reward"))
    )


def test_the_overshoot_stop_ends_before_the_round_the_dearest_so_far_says_would_exceed_it(tmp_path):
    free = run_tiny_grpo(tmp_path / "a", LedgerConfig(), max_steps=6)
    rounds = free.ledger.rounds
    assert len(rounds) == 3  # steps_per_generation=2 optimizer steps per round
    budget = sum(rounds[:2]) + 0.5 * max(rounds)
    with pytest.warns(BudgetWarning, match="budget_stop='overshoot'"):
        capped = run_tiny_grpo(
            tmp_path / "b", LedgerConfig(budget_flops=budget, budget_stop="overshoot"), max_steps=50
        )
    s = capped.ledger.summary()
    assert s["stopped_by_budget"] and not s["over_budget"]
    assert s["useful"]["C_total"] <= budget
    assert budget - s["useful"]["C_total"] <= max(capped.ledger.rounds)  # within one round of the budget
    assert len(capped.ledger.rounds) == 2


def test_budget_below_one_round_is_refused_before_training(tmp_path):
    with pytest.raises(ValueError, match="buys 0 generation rounds"):
        run_tiny_grpo(tmp_path, LedgerConfig(budget_flops=1e6, first_round_flops=5e7))


def test_jsonl_log_and_summary(tmp_path):
    log = tmp_path / "ledger.jsonl"
    trainer = run_tiny_grpo(tmp_path, LedgerConfig(log_path=log), max_steps=3)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2, 3]
    assert [x["generated"] for x in lines] == [True, False, True]
    assert sum(x["flops"]["useful"]["total"] for x in lines) == pytest.approx(trainer.ledger.total())
    summary = json.loads(log.with_suffix(".summary.json").read_text())
    assert summary["steps"] == 3
    card = json.loads((tmp_path / "out" / "compute_card.json").read_text())  # default: in output_dir
    assert card["steps"] == 3 and (tmp_path / "out" / "compute_card.md").is_file()


def test_the_summary_file_is_strict_json_when_no_round_completes(tmp_path):
    log = tmp_path / "ledger.jsonl"
    run_tiny_grpo(tmp_path, LedgerConfig(log_path=log), max_steps=1)  # half a round
    text = log.with_suffix(".summary.json").read_text()
    summary = json.loads(text, parse_constant=lambda name: pytest.fail(f"bare {name} in the summary"))
    assert summary["max_round_flops"] is None
    assert summary["missing"] == {"max_round_flops": "no generation round completed"}


@pytest.mark.parametrize(
    "ledger, overrides, match",
    [
        (LedgerConfig(kept=5), {}, "cannot exceed"),
        (LedgerConfig(kept=3), dict(per_device_train_batch_size=2, steps_per_generation=8), "do not split"),
    ],
)
def test_bad_downsampling_is_refused(tmp_path, ledger, overrides, match):
    with pytest.raises(ValueError, match=match):
        run_tiny_grpo(tmp_path, ledger, **overrides)


def test_reward_costs_from_flop_cost_attribute(tmp_path):
    def priced_reward(completions, **kwargs):
        return [1.0 if "1" in c else 0.0 for c in completions]

    priced_reward.flop_cost = lambda prompts, completions, completion_ids: {
        "useful": 1e3 * len(completions),
        "executed": 2e3 * len(completions),
    }
    trainer = run_tiny_grpo(tmp_path, LedgerConfig(), reward_funcs=priced_reward, max_steps=2)
    s = trainer.ledger.summary()
    assert s["useful"]["C_reward"] == pytest.approx(1e3 * s["tokens"]["gen_rows"])
    assert s["executed"]["C_reward"] == pytest.approx(2e3 * s["tokens"]["gen_rows"])
    # the function's model reads tokens the ledger never sees: no tokens/reward 0 beside its C_reward
    assert s["tokens"]["reward_priced_rows"] == s["tokens"]["gen_rows"]
    logged = [e for e in trainer.state.log_history if "flops/reward" in e]
    assert logged and all(e["flops/reward"] > 0 and "tokens/reward" not in e for e in logged)


def test_tokens_reward_is_logged_only_where_it_accounts_for_c_reward():
    """A reward model's tokens are logged as tokens/reward (and 0 beside a C_reward of 0); once a
    reward function's flop_cost has priced C_reward, tokens/reward is left out, not a partial count."""
    ledger = FlopLedger(ModelShape(8, 2, 2, 2, 4, 16, 10), TrainSpec())
    ledger.end_step(1, round_complete=True)
    assert ledger.metrics()["tokens/reward"] == 0 == ledger.metrics()["flops/reward"]
    ledger.charge("reward", {"useful": 5.0, "executed": 6.0})  # a reward model, as its hook charges it
    ledger.count(reward_tokens=12)
    ledger.end_step(2, round_complete=True)
    assert ledger.metrics()["tokens/reward"] == 12
    ledger.charge_priced_reward({"useful": 7.0, "executed": 7.0}, rows=4)
    ledger.end_step(3, round_complete=True)
    metrics = ledger.metrics()
    assert metrics["flops/reward"] == 12.0 and "tokens/reward" not in metrics
    assert ledger.summary()["tokens"]["reward_priced_rows"] == 4


def _reward_model():
    from transformers import Qwen2Config, Qwen2ForSequenceClassification

    config = Qwen2Config(
        **{
            **eager_policy().config.to_dict(),
            "num_labels": 1,
            "hidden_size": 48,
            "num_attention_heads": 4,
        }
    )
    config.architectures = ["Qwen2ForSequenceClassification"]
    torch.manual_seed(1)
    rm = Qwen2ForSequenceClassification(config)
    rm.config._attn_implementation = "eager"
    return rm


def test_reward_model_module_is_charged_its_forward(tmp_path):
    trainer = run_tiny_grpo(
        tmp_path,
        LedgerConfig(),
        reward_funcs=_reward_model(),
        trainer_cls=measuring("_calculate_rewards"),
        trainer_kwargs=dict(reward_processing_classes=build_tokenizer()),
        max_steps=2,
    )
    s = trainer.ledger.summary()
    assert s["executed"]["C_reward"] > 0
    assert trainer.measured / s["executed"]["C_reward"] == pytest.approx(1.0, abs=0.02)
    assert s["useful"]["C_reward"] <= s["executed"]["C_reward"]


def test_vllm_generation_is_costed_from_token_counts_with_each_prompt_prefilled_once(tmp_path, monkeypatch):
    """vLLM (colocate) runs outside FlopCounterMode's sight: the ledger prices it from the token
    counts it returns, each prompt prefilled once (prefix caching), no padding, merged weights.
    Recorded counts of two prompts x G=4 stand in for a vLLM engine on this CPU machine."""
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=10, use_cpu=True, report_to="none", save_strategy="no")  # fmt: skip
    trainer = LedgerGRPOTrainer(
        model=eager_policy(), reward_funcs=length_reward, args=args, train_dataset=_dataset(),
        processing_class=build_tokenizer(), peft_config=LoraConfig(r=4, target_modules="all-linear"),
    )  # fmt: skip
    trainer.use_vllm, trainer._prefix_cache = True, True  # what __init__ sets with use_vllm=True
    prompt_ids = [[5] * 7] * 4 + [[6] * 7] * 4
    recorded = [[9] * 6] * 8  # uniform lengths: the analytic step cost prices exactly this round
    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", lambda self, *a, **k: (recorded, None))
    trainer.model.train()
    trainer._generate_single_turn(prompt_ids, None, None, 4)

    charged = trainer.ledger._current.flops
    step = flops.GRPOStep(prompts=2, generations=4, kept=4, epochs=1, prompt_tokens=7, completion_tokens=6,
                          prefix_cache=True)  # fmt: skip
    merged = flops.TrainSpec(lora=None)  # vLLM generates with the adapter merged into the weights
    expected = flops.grpo_step_cost(trainer.ledger.policy, step, train=merged).C_search
    assert charged["useful"]["search"] == pytest.approx(expected, rel=1e-9)
    assert charged["executed"]["search"] == charged["useful"]["search"]  # no padding in vLLM
    no_cache = flops.grpo_step_cost(
        trainer.ledger.policy, flops.GRPOStep(**{**step.__dict__, "prefix_cache": False}), train=merged
    )
    assert no_cache.C_search > expected  # without the cache every copy of a prompt is prefilled
    tokens = trainer.ledger._current.tokens
    assert tokens["gen_prompt_tokens"] == 56 and tokens["gen_completion_tokens"] == 48


def test_a_round_ceiling_makes_the_budget_a_guarantee(tmp_path):
    """Priced at the costliest possible round, the stop comes while one more round could pass the
    budget: C_total never does, and what is left is less than one such round."""
    free = run_tiny_grpo(tmp_path / "a", LedgerConfig(), max_steps=8)
    dearest = max(free.ledger.rounds)
    ceiling = 1.5 * dearest  # any bound at least the dearest real round
    budget = sum(free.ledger.rounds[:3]) + 0.2 * dearest
    capped = run_tiny_grpo(
        tmp_path / "b", LedgerConfig(budget_flops=budget, round_ceiling_flops=ceiling), max_steps=50
    )
    total = capped.ledger.total()
    assert capped.ledger.stopped_by_budget and total <= budget
    assert budget - total < ceiling
    assert len(capped.ledger.rounds) < 3  # the dearest-so-far rule would have run a third round
    with pytest.raises(ValueError, match="does not surely buy one generation round"):
        run_tiny_grpo(tmp_path / "c", LedgerConfig(budget_flops=budget, round_ceiling_flops=2 * budget))


# --- what reaches the outside: TRL's metrics, total_flos, the compute card ---------------------


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    """One real run logged every 2 optimizer steps through TRL's own path (``report_to="none"``),
    its card at an explicit ``card_path``. Steps 1 and 3 generate, 2 and 4 reuse the rollouts."""
    tmp = tmp_path_factory.mktemp("logged")
    ledger = LedgerConfig(log_path=tmp / "steps" / "run.jsonl", card_path=tmp / "steps" / "run.card")
    trainer = run_tiny_grpo(tmp, ledger, max_steps=4, logging_steps=2)
    steps = [json.loads(x) for x in (tmp / "steps" / "run.jsonl").read_text().splitlines()]
    return trainer, steps, tmp


def _sums(steps):
    """Per component and convention, the step log's sums."""
    out = {c: {k: sum(s["flops"][c][k] for s in steps) for k in ("search", "learning", "reward", "total")}
           for c in flops.CONVENTIONS}  # fmt: skip
    seconds = {k: sum(s["seconds"][k] for s in steps) for k in ("search", "learning", "reward", "total")}
    tokens = {k: sum(s["tokens"].get(k, 0) for s in steps) for k in {k for s in steps for k in s["tokens"]}}
    return out, seconds, tokens


def test_flop_metrics_go_through_trls_metrics_path_as_running_totals(logged_run):
    trainer, steps, _ = logged_run
    logged = [e for e in trainer.state.log_history if "flops/search" in e]
    assert [e["step"] for e in logged] == [2, 4]
    assert set(METRIC_NAMES) <= set(logged[-1])
    for entry in logged:
        # the totals up to the logging step, not the mean of the window's steps (step 2 generated nothing)
        sums, seconds, tokens = _sums([s for s in steps if s["step"] <= entry["step"]])
        for convention, prefix in (("useful", "flops/"), ("executed", "flops/executed/")):
            for k in ("search", "learning", "reward", "total"):
                assert entry[prefix + k] == pytest.approx(sums[convention][k], rel=1e-12)
            assert entry[prefix + "rho"] == pytest.approx(
                sums[convention]["learning"] / sums[convention]["total"]
            )
        assert entry["flops/rho_time"] == pytest.approx(seconds["learning"] / seconds["total"])
        assert entry["tokens/search"] == tokens["gen_prompt_tokens"] + tokens["gen_completion_tokens"]
        assert entry["tokens/learning"] == tokens["loss_tokens"] > 0
        assert entry["tokens/reward"] == 0  # a plain reward function reads no model tokens
    assert logged[0]["flops/search"] > 0 and logged[1]["flops/search"] > logged[0]["flops/search"]


def test_total_flos_is_the_ledgers_useful_c_total(logged_run):
    trainer, steps, _ = logged_run
    c_total = trainer.ledger.summary()["useful"]["C_total"]
    assert trainer.state.total_flos == c_total == pytest.approx(_sums(steps)[0]["useful"]["total"])
    (final,) = [e for e in trainer.state.log_history if "total_flos" in e]  # the end-of-training summary
    assert final["total_flos"] == c_total > 0


def test_compute_card_numbers_are_the_step_logs_sums(logged_run):
    _, steps, tmp = logged_run
    card = json.loads((tmp / "steps" / "run.card.json").read_text())
    sums, seconds, tokens = _sums(steps)
    for convention in flops.CONVENTIONS:
        f = card["flops"][convention]
        for k in ("search", "learning", "reward", "total"):
            assert f[f"C_{k}"] == pytest.approx(sums[convention][k], rel=1e-12)
        assert f["rho"] == pytest.approx(sums[convention]["learning"] / sums[convention]["total"])
    assert card["rho"] == card["flops"]["useful"]["rho"]
    assert card["seconds"] == pytest.approx(seconds)
    assert card["rho_time"] == pytest.approx(seconds["learning"] / seconds["total"])
    assert card["tokens"] == tokens
    assert card["steps"] == len(steps) == 4 and card["rounds"] == 2
    assert card["round"] == {**card["round"], "P": 4, "G": 4, "K": 4, "mu": 1, "rows": 16}
    assert card["lora"]["rank"] == 4 and set(card["lora"]["target_modules"]) == set(flops.LINEAR_MODULES)
    assert card["model"]["trainable_parameters"] == card["lora"]["adapter_parameters"] > 0
    assert card["model"]["parameters"] == card["model"]["parameters_analytic"]
    device = card["device"]
    # a CPU has no datasheet peak: no MFU, a measured matmul beside it (tests/test_card.py)
    assert device["type"] == "cpu" and device["peak_flops_per_s"] is None and card["mfu"]["total"] is None
    assert card["measured_matmul"]["flops_per_s"] > 0
    achieved = card["achieved_flops_per_s"]
    assert achieved["total"] == pytest.approx(sums["executed"]["total"] / seconds["total"])
    useful_rate = sums["useful"]["total"] / seconds["total"]
    assert card["achieved_useful_flops_per_s"]["total"] == pytest.approx(useful_rate)
    md = (tmp / "steps" / "run.card.md").read_text()
    assert f"{card['flops']['useful']['C_total']:.4g}" in md and "| FLOPs (executed) |" in md
    assert not (tmp / "out" / "compute_card.json").exists()  # card_path replaces the default


def test_the_study_writes_the_card_beside_its_step_log(tmp_path):
    from paper_repro.config import load_profile
    from paper_repro.run.allocation import planner_for
    from paper_repro.run.spec import spec_for
    from paper_repro.run.trainer import ledger_config

    profile = load_profile("cpu-tiny")
    setting = profile.settings("A")[0]
    planner = planner_for(profile, setting)
    cell = planner.cell(0.7, 6 * planner.cell(0.7, 1e30).round_cost.C_total)
    spec = spec_for(profile, setting, cell, seed=0)
    log = tmp_path / "steps" / f"{spec.run_id}.jsonl"
    config = ledger_config(spec, log)
    assert f"{config.card_path}.json" == str(tmp_path / "steps" / f"{spec.run_id}.card.json")
    assert ledger_config(spec, None).card_path is None  # other processes: the trainer's default, unwritten


# --- the budget as a contract without help ---------------------------------------------------


def test_a_budget_below_one_round_is_refused_without_help_before_any_step(tmp_path, monkeypatch):
    """No first_round_flops, no round_ceiling_flops: the trainer prices the costliest round from the
    config, the data and the layout, and refuses in __init__, naming the budget and that cost."""
    from trl import GRPOTrainer

    price = build_tiny_grpo(tmp_path / "a", LedgerConfig()).price_round_ceiling()
    generated = []
    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", lambda self, *a, **k: generated.append(a))
    with pytest.raises(ValueError, match="does not surely buy one generation round") as err:
        run_tiny_grpo(tmp_path / "b", LedgerConfig(budget_flops=1e6))
    assert "budget 1e+06 FLOPs" in str(err.value)
    assert f"one round needs up to {price['C_total']:.3g} useful FLOPs" in str(err.value)
    assert not generated and not (tmp_path / "b" / "out" / "compute_card.json").exists()
    assert price == {**price, "P": 4, "G": 4, "K": 4, "mu": 1, "prompt_tokens": 4, "completion_tokens": 10}
    # the planner's estimate of a first round stays possible, and wins the refusal
    build_tiny_grpo(tmp_path / "c", LedgerConfig(budget_flops=1e6, first_round_flops=5e5))
    # a given ceiling above the trainer's own price stands; one below it is raised to it
    looser = 2 * price["C_total"]
    trainer = build_tiny_grpo(tmp_path / "d", LedgerConfig(budget_flops=1e9, round_ceiling_flops=looser))
    assert trainer.round_price is None and trainer.ledger.config.round_ceiling_flops == looser
    needs = f"the costliest round .* needs {re.escape(format(price['C_total'], '.3g'))}"
    with (
        pytest.warns(BudgetWarning, match="is below the ledger's own price"),
        pytest.raises(ValueError, match=needs),
    ):
        build_tiny_grpo(tmp_path / "e", LedgerConfig(budget_flops=1e6, round_ceiling_flops=9e5))


def test_the_round_ceiling_prices_reward_functions_and_reward_models(tmp_path):
    def priced_reward(completions, **kwargs):
        return [0.0] * len(completions)

    priced_reward.flop_cost = lambda prompts, completions, completion_ids: 1e3 * sum(map(len, completion_ids))
    price = build_tiny_grpo(tmp_path / "a", LedgerConfig(), reward_funcs=priced_reward).price_round_ceiling()
    assert price["C_reward"] == 1e3 * price["rows"] * 10  # every row at max_completion_length=10

    rm = _reward_model()
    trainer = build_tiny_grpo(
        tmp_path / "b", LedgerConfig(), reward_funcs=rm,
        trainer_kwargs=dict(reward_processing_classes=build_tokenizer()),
    )  # fmt: skip
    price = trainer.price_round_ceiling()
    per_row = flops.forward_flops(flops.ModelShape.from_config(rm.config), flops.sequence_work(4 + 10))
    assert price["C_reward"] == pytest.approx(price["rows"] * per_row)
    assert price["C_total"] == pytest.approx(price["C_search"] + price["C_learning"] + price["C_reward"])
