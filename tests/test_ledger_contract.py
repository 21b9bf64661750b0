"""The ledger's contract with a TRL user: the budget is never passed silently, the reference forward
of a pre-wrapped PeftModel is counted as reference, configs in the wrong place get one clear error,
options load from a dict or YAML, and the TRL release and hooked methods are checked when the
trainer is built."""

from __future__ import annotations

import logging

import pytest
import torch

from paper_repro.accounting.profiling import flop_counter
from paper_repro.ledger import (
    ALLOW_UNTESTED_TRL_ENV,
    BudgetWarning,
    LedgerConfig,
    LedgerGRPOTrainer,
    check_hooked_methods,
)
from paper_repro.testbed import build_tokenizer
from tests.test_ledger import _dataset, build_tiny_grpo, eager_policy, length_reward, measuring


@pytest.fixture
def ledger_lines():
    """The lines the ledger logs (``paper_repro.ledger``, shown on stderr by default)."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    handler = Keep()
    logger = logging.getLogger("paper_repro.ledger")
    level = logger.level  # the study's quiet_libraries, run by other tests in this process, raises it
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield lines
    logger.removeHandler(handler)
    logger.setLevel(level)


# --- the budget contract ---------------------------------------------------------------------


def _short_prompts_first():
    """Eight short prompts (two rounds), then long ones: the third round costs several times the
    first two, so pricing the next round as the dearest so far passes the budget."""
    from datasets import Dataset

    short = [{"prompt": f"{i % 9}+{i % 7}="} for i in range(8)]
    long = [{"prompt": " ".join(f"{(i * j) % 9}+{j % 7}=" for j in range(12))} for i in range(56)]
    return Dataset.from_list(short + long)


def _unshuffled_run(tmp_path, ledger: LedgerConfig, max_steps: int = 60):
    """G=4 of P=4 prompts a round, K=2 kept, mu=2: a round is 4 optimizer steps."""
    trainer = build_tiny_grpo(
        tmp_path, ledger, num_iterations=2, max_steps=max_steps, shuffle_dataset=False,
        train_dataset=_short_prompts_first(),
    )  # fmt: skip
    trainer.train()
    return trainer


@pytest.fixture(scope="module")
def short_then_long(tmp_path_factory):
    """The rounds of the unshuffled run without a budget, and a budget that ends inside the third."""
    free = _unshuffled_run(tmp_path_factory.mktemp("free"), LedgerConfig(kept=2), max_steps=12)
    rounds = free.ledger.rounds
    assert len(rounds) == 3 and rounds[2] > 3 * max(rounds[:2])
    return rounds, sum(rounds[:2]) + 0.9 * rounds[2]


def test_the_default_stop_never_passes_the_budget_and_spends_most_of_it(
    tmp_path, short_then_long, ledger_lines
):
    _, budget = short_then_long
    trainer = _unshuffled_run(tmp_path, LedgerConfig(budget_flops=budget, kept=2))
    summary = trainer.ledger.summary()
    assert summary["budget_stop"] == "step" and summary["stopped_by_budget"] and not summary["over_budget"]
    # measured 0.952: the stop came inside the third round, before a loss pass that would not fit
    assert 0.85 <= summary["budget_spent"] <= 1.0
    assert summary["steps"] % 4 != 0  # a round cut short: the stop is at an optimizer step
    (line,) = [x for x in ledger_lines if x.startswith("FLOP ledger: stopped")]
    assert f"of the budget {budget:.4g} ({summary['budget_spent']:.1%})" in line
    assert "the next optimizer step" in line and "learning rate there" in line


def test_the_overshoot_stop_passes_the_budget_and_warns_twice(tmp_path, short_then_long):
    rounds, budget = short_then_long
    with pytest.warns(BudgetWarning, match="budget_stop='overshoot'"):  # when it is chosen
        trainer = build_tiny_grpo(
            tmp_path, LedgerConfig(budget_flops=budget, kept=2, budget_stop="overshoot"), num_iterations=2,
            max_steps=60, shuffle_dataset=False, train_dataset=_short_prompts_first(),
        )  # fmt: skip
    with pytest.warns(BudgetWarning, match=r"passed its budget: .* \(\+\d+\.\d%\)"):  # when it happens
        trainer.train()
    summary = trainer.ledger.summary()
    assert summary["over_budget"] and summary["useful"]["C_total"] == pytest.approx(sum(rounds))


def test_the_round_stop_never_passes_the_budget_either(tmp_path, short_then_long):
    _, budget = short_then_long
    # the budget pays for two rounds and most of a third as they cost, fewer than two at the priced
    # ceiling: the round stop says so when the trainer is built (it may stop early, leaving budget)
    with pytest.warns(
        BudgetWarning, match=r"fewer than two generation rounds at their ceiling .* budget_stop='round'"
    ):
        trainer = _unshuffled_run(tmp_path, LedgerConfig(budget_flops=budget, kept=2, budget_stop="round"))
    summary = trainer.ledger.summary()
    assert summary["stopped_by_budget"] and summary["useful"]["C_total"] <= budget
    assert summary["steps"] % 4 == 0  # only at the end of a round


def test_a_run_that_ends_at_max_steps_says_so(tmp_path, ledger_lines):
    trainer = build_tiny_grpo(tmp_path, LedgerConfig(), max_steps=2)
    trainer.train()
    (line,) = [x for x in ledger_lines if x.startswith("FLOP ledger: stopped")]
    assert "(no budget): max_steps=2 reached" in line and "linear schedule over max_steps=2" in line


def test_budget_stop_is_checked():
    with pytest.raises(ValueError, match="budget_stop must be one of 'step', 'round', 'overshoot'"):
        LedgerConfig(budget_stop="dearest")


@pytest.mark.parametrize(
    "field, value, error, words",
    [
        (
            "budget_flops",
            "3e15",
            TypeError,
            r"budget_flops must be a positive, finite number of FLOPs, or None, got str '3e15' \(LedgerConfig.from_dict",
        ),
        ("budget_flops", float("inf"), ValueError, "budget_flops must be a positive, finite number of FLOPs"),
        ("budget_flops", float("nan"), ValueError, "budget_flops must be a positive"),
        ("budget_flops", 0, ValueError, "budget_flops must be a positive"),
        (
            "peak_flops",
            -5,
            ValueError,
            r"peak_flops must be a positive, finite number of FLOP/s per device, or None, got int -5",
        ),
        ("round_ceiling_flops", -1.0, ValueError, "round_ceiling_flops must be a positive"),
        ("first_round_flops", True, TypeError, "first_round_flops must be"),
        ("kept", 0, ValueError, r"kept must be an int >= 1, or None, got int 0"),
        ("kept", 2.5, ValueError, "kept must be an int >= 1"),
        ("max_prompt_tokens", "64", TypeError, "max_prompt_tokens must be an int >= 1"),
        ("selection_decimals", -1, ValueError, "selection_decimals must be an int >= 0"),
        ("downsample_seed", None, TypeError, "downsample_seed must be an int"),
    ],
)
def test_every_invalid_option_names_its_field_and_range(field, value, error, words):
    with pytest.raises(error, match=words):
        LedgerConfig(**{field: value})


def test_a_negative_flop_cost_is_refused_naming_the_function(tmp_path):
    def judge(completions, **kwargs):
        return [0.0] * len(completions)

    judge.flop_cost = lambda prompts, completions, completion_ids: -1e12
    trainer = build_tiny_grpo(tmp_path, LedgerConfig(), reward_funcs=judge, max_steps=1)
    with pytest.raises(
        ValueError, match=r"reward function 'judge''s flop_cost returned .*must be finite and >= 0"
    ):
        trainer.train()
    with pytest.raises(
        ValueError, match=r"'judge''s flop_cost \(on a worst-case batch\) returned"
    ):  # at construction
        build_tiny_grpo(tmp_path, LedgerConfig(budget_flops=1e12), reward_funcs=judge)


def test_a_ceiling_below_the_ledgers_own_price_is_raised_to_it(tmp_path, short_then_long):
    _, budget = short_then_long
    with pytest.warns(
        BudgetWarning, match=r"round_ceiling_flops=2e\+06 is below the ledger's own price .*raised"
    ):
        trainer = build_tiny_grpo(
            tmp_path, LedgerConfig(budget_flops=budget, kept=2, round_ceiling_flops=2e6), num_iterations=2,
            max_steps=60, shuffle_dataset=False, train_dataset=_short_prompts_first(),
        )  # fmt: skip
    own = trainer.round_price["C_total"]
    assert trainer.ledger.config.round_ceiling_flops == own > 2e6
    trainer.train()
    summary = trainer.ledger.summary()
    assert summary["stopped_by_budget"] and not summary["over_budget"]


def test_the_round_stop_warns_when_the_budget_buys_fewer_than_two_rounds(tmp_path):
    probe = build_tiny_grpo(tmp_path, LedgerConfig(budget_flops=1e12))
    ceiling = probe.round_price["C_total"]
    with pytest.warns(BudgetWarning, match="buys fewer than two generation rounds at their ceiling"):
        build_tiny_grpo(tmp_path, LedgerConfig(budget_flops=1.5 * ceiling, budget_stop="round"))


# --- the reference forward of a pre-wrapped PeftModel ------------------------------------------


def test_a_pre_wrapped_peft_models_reference_adapter_is_counted_as_reference(tmp_path):
    """TRL copies a pre-wrapped PeftModel's adapter to one named "ref" and runs the reference forward
    through it (adapters on), not with the adapters disabled."""
    from peft import LoraConfig, get_peft_model
    from trl import GRPOConfig

    model = get_peft_model(eager_policy(), LoraConfig(r=4, target_modules="all-linear", lora_dropout=0.0))
    cls = measuring("_generate_single_turn")
    trainer = cls(
        model=model, reward_funcs=length_reward, processing_class=build_tokenizer(),
        args=GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=8, num_generations=4,
                        max_completion_length=10, max_steps=2, learning_rate=1e-3, report_to="none",
                        save_strategy="no", use_cpu=True, beta=0.04, steps_per_generation=2, seed=0,
                        gradient_accumulation_steps=2,  # one step a round: no old-policy forward
                        disable_tqdm=True),
        train_dataset=_dataset(), ledger=LedgerConfig(write_card=False),
    )  # fmt: skip
    assert "ref" in trainer.model.peft_config  # TRL's path for a pre-wrapped adapter
    counter = flop_counter()
    with counter:
        trainer.train()
    summary = trainer.ledger.summary()
    tokens = summary["tokens"]
    assert tokens["ref_forward_rows"] == tokens["gen_rows"] and "old_forward_rows" not in tokens
    parts = summary["learning_parts"]
    assert parts["useful"]["ref"] > 0 and parts["useful"]["old"] == 0
    # the "ref" adapter runs: its forward costs the adapters too, as the profiler sees
    measured_learning = counter.get_total_flops() - trainer.measured
    assert measured_learning / summary["executed"]["C_learning"] == pytest.approx(1.0, abs=0.03)


# --- configs in their places -----------------------------------------------------------------


def _trainer_with(tmp_path, **kwargs):
    from trl import GRPOConfig

    options = dict(
        model=eager_policy(), reward_funcs=length_reward, processing_class=build_tokenizer(),
        args=GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none"),
        train_dataset=_dataset(),
    )  # fmt: skip
    return LedgerGRPOTrainer(**{**options, **kwargs})


def test_misplaced_configs_get_one_clear_type_error(tmp_path, monkeypatch):
    from peft import LoraConfig
    from transformers import TrainingArguments
    from trl import GRPOConfig, GRPOTrainer

    built = []
    monkeypatch.setattr(GRPOTrainer, "__init__", lambda self, *a, **k: built.append(a))
    grpo = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none")
    cases = [
        (dict(args=LedgerConfig()), r"got a LedgerConfig as args=, where TRL's GRPOConfig belongs"),
        (dict(ledger=grpo), r"takes a LedgerConfig, got TRL's GRPOConfig, whose place is args="),
        (dict(ledger={"budget_flops": 1e9}), r"got a dict; pass LedgerConfig.from_dict"),
        (dict(ledger=LoraConfig(r=4)), r"got a PEFT LoraConfig, whose place is peft_config="),
        (dict(peft_config=LedgerConfig()), r"got a LedgerConfig as peft_config="),
        (dict(args={"num_generations": 4}), r"args=\.\.\.\) takes TRL's GRPOConfig, got a dict"),
        (
            dict(args=TrainingArguments(output_dir=str(tmp_path / "plain"), use_cpu=True, report_to="none")),
            r"got a TrainingArguments: a plain TrainingArguments lacks GRPO's options",
        ),
    ]
    for kwargs, message in cases:
        with pytest.raises(TypeError, match=message):
            _trainer_with(tmp_path, **kwargs)
    assert not built  # refused before GRPOTrainer builds anything


def test_ledger_options_load_from_a_dict_or_yaml(tmp_path):
    assert LedgerConfig.from_dict({"budget_flops": "3e15", "kept": 2}) == LedgerConfig(
        budget_flops=3e15, kept=2
    )
    flat = tmp_path / "ledger.yaml"
    flat.write_text("budget_flops: 3e15\nbudget_stop: round\nlog_path: run/ledger.jsonl\n")
    assert LedgerConfig.from_yaml(flat) == LedgerConfig(
        budget_flops=3e15, budget_stop="round", log_path="run/ledger.jsonl"
    )
    nested = tmp_path / "run.yaml"
    nested.write_text("model: Qwen/Qwen2.5-1.5B\nledger:\n  budget_flops: 1.0e+12\n  kept: 4\n")
    assert LedgerConfig.from_yaml(nested) == LedgerConfig(budget_flops=1e12, kept=4)
    with pytest.raises(TypeError, match=r"no option 'budget'; its options: budget_flops, budget_stop"):
        LedgerConfig.from_dict({"budget": 1e9})


def test_a_grpo_config_style_file_holds_the_ledgers_options_too(tmp_path):
    """TRL's own parser reads GRPOConfig's and the ledger's options from one file."""
    from trl import GRPOConfig, TrlParser

    config = tmp_path / "grpo.yaml"
    config.write_text(
        f"output_dir: {tmp_path / 'out'}\nuse_cpu: true\nnum_generations: 4\nseed: 3\n"
        "budget_flops: 3.0e+15\nkept: 2\nbudget_stop: round\n"
    )
    grpo, ledger = TrlParser((GRPOConfig, LedgerConfig)).parse_args_and_config(["--config", str(config)])
    assert grpo.num_generations == 4 and grpo.seed == 3
    assert ledger == LedgerConfig(budget_flops=3e15, kept=2, budget_stop="round")


# --- TRL releases and the hooked methods --------------------------------------------------------


def test_patch_releases_of_the_tested_trl_are_accepted_and_others_need_an_opt_in(tmp_path, monkeypatch):
    import trl

    monkeypatch.setattr(trl, "__version__", "1.16.3")
    build_tiny_grpo(tmp_path / "a", LedgerConfig())
    monkeypatch.setattr(trl, "__version__", "1.17.0")
    with pytest.raises(
        RuntimeError, match=r"tested with TRL 1\.16\.x; found trl 1\.17\.0.*allow_untested_trl=True"
    ):
        build_tiny_grpo(tmp_path / "b", LedgerConfig())
    with pytest.warns(UserWarning, match=r"tested with TRL 1\.16\.x, not trl 1\.17\.0"):
        build_tiny_grpo(tmp_path / "c", LedgerConfig(allow_untested_trl=True))
    monkeypatch.setenv(ALLOW_UNTESTED_TRL_ENV, "1")
    with pytest.warns(UserWarning, match=r"not trl 1\.17\.0"):
        build_tiny_grpo(tmp_path / "d", LedgerConfig())


def test_a_trl_whose_hooked_methods_changed_fails_at_construction_naming_the_method(tmp_path, monkeypatch):
    from trl import GRPOTrainer

    check_hooked_methods()  # this TRL's are as the ledger hooks them

    def renamed(self, inputs, prompts, completions, completion_ids):  # the last parameter renamed
        return torch.zeros(len(prompts), 1)

    monkeypatch.setattr(GRPOTrainer, "_calculate_rewards", renamed)
    with pytest.raises(RuntimeError, match=r"GRPOTrainer\._calculate_rewards takes .*completion_ids\)"):
        build_tiny_grpo(tmp_path, LedgerConfig())
    monkeypatch.undo()
    monkeypatch.delattr(GRPOTrainer, "_tokenize_prompts")
    with pytest.raises(RuntimeError, match=r"has no method _tokenize_prompts"):
        check_hooked_methods()


def test_the_stop_line_can_be_silenced_before_the_ledger_is_imported():
    """The study silences the line in each worker before the ledger is imported there (the runner's
    pool initializer): importing the ledger must not raise the level back."""
    import subprocess
    import sys

    code = (
        "import logging; logging.getLogger('paper_repro.ledger').setLevel(logging.WARNING); "
        "import paper_repro.ledger; print(logging.getLogger('paper_repro.ledger').level)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(logging.WARNING)


def test_every_private_trl_name_the_subclass_touches_is_listed_with_its_reason():
    """The subclass's surface on TRL, found in the code: every ``self._x`` / ``trainer._x`` /
    ``super()._x`` that GRPOTrainer or Trainer defines is in SUBCLASS_PRIVATE_TRL_NAMES, and every
    listed name is still touched."""
    import re
    from pathlib import Path

    import transformers
    import trl

    from paper_repro.ledger.compat import SUBCLASS_PRIVATE_TRL_NAMES

    root = Path(__file__).resolve().parents[1] / "paper_repro" / "ledger"
    ours = "".join(
        (root / f"{m}.py").read_text()
        for m in ("trainer", "pricing", "downsample", "kernels", "card", "probes")
    )
    touched = set(re.findall(r"\b(?:self|trainer|super\(\))\.(_[a-z]\w*)", ours))
    theirs = (Path(trl.__file__).parent / "trainer" / "grpo_trainer.py").read_text() + (
        Path(transformers.__file__).parent / "trainer.py"
    ).read_text()
    private = {n for n in touched if re.search(rf"(def {n}\b|self\.{n}\s*[:=])", theirs)}
    assert private == set(SUBCLASS_PRIVATE_TRL_NAMES)
