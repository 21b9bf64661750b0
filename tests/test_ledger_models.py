"""The ledger on the models it prices by measurement (families beyond the analytic FLOP model's four,
mixtures of experts, sliding windows, soft-capping, a custom model type) and on reward models priced
from the module that runs, each checked against FlopCounterMode around real TRL passes on CPU with
eager attention (``paper_repro.ledger.cost_models``)."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from paper_repro.accounting import flops
from paper_repro.accounting.profiling import flop_counter
from paper_repro.ledger import LedgerConfig, LedgerGRPOTrainer
from paper_repro.ledger.cost_models import Adapters, MeasuredCost, measure_policy, policy_cost
from paper_repro.testbed import build_tokenizer, random_model
from tests import fixtures
from tests.test_ledger import _dataset, length_reward, measuring

ATTENTION = ["q_proj", "k_proj", "v_proj", "o_proj"]


class TinyCustomConfig(LlamaConfig):
    """A Llama under a model type of its own, as a model shipped with its own code registers it."""

    model_type = "tiny_custom_llama"


class TinyCustomForCausalLM(LlamaForCausalLM):
    config_class = TinyCustomConfig


AutoConfig.register("tiny_custom_llama", TinyCustomConfig, exist_ok=True)
AutoModelForCausalLM.register(TinyCustomConfig, TinyCustomForCausalLM, exist_ok=True)

# Each family tiny (2 layers, hidden 32) and as its implementation in transformers runs it: a
# mixture of experts (top-2 of 4), sliding windows (wider than these runs' 14 tokens: generation
# past a window is a documented limit), attention and final-logit soft-capping (gemma2's defaults).
FAMILIES = {
    "cohere2": dict(sliding_window=16, layer_types=["sliding_attention", "full_attention"]),
    "gpt_oss": dict(
        num_local_experts=4, num_experts_per_tok=2, sliding_window=16,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    ),
    "qwen3_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16),
    "gemma2": dict(sliding_window=16, query_pre_attn_scalar=8),
    "tiny_custom_llama": {},
}  # fmt: skip


def tiny_causal_lm(model_type: str, **extra):
    """A random tiny causal LM of ``model_type`` over the testbed tokenizer, eager attention
    (FlopCounterMode cannot see the CPU sdpa kernel)."""
    tokenizer = build_tokenizer()
    config = AutoConfig.for_model(
        model_type, vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None, **extra,
    )  # fmt: skip
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def build(tmp_path, model, ledger=None, targets="all-linear", trainer_cls=LedgerGRPOTrainer, **overrides):
    """A LedgerGRPOTrainer over ``model`` with LoRA (rank 4 on ``targets``): one generation round of
    16 rows (G = 4) in two optimizer steps, 10-token completions."""
    from peft import LoraConfig
    from trl import GRPOConfig

    args = dict(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=8, num_generations=4,
        max_completion_length=10, max_steps=2, learning_rate=1e-3, report_to="none", logging_steps=100,
        save_strategy="no", use_cpu=True, beta=0.0, steps_per_generation=2, seed=0, disable_tqdm=True,
    )  # fmt: skip
    kwargs = {k: overrides.pop(k) for k in ("reward_funcs", "reward_processing_classes") if k in overrides}
    args.update(overrides)
    return trainer_cls(
        model=model,
        reward_funcs=kwargs.pop("reward_funcs", length_reward),
        args=GRPOConfig(**args),
        train_dataset=_dataset(),
        processing_class=build_tokenizer(),
        peft_config=LoraConfig(r=4, target_modules=targets, lora_dropout=0.0),
        ledger=ledger,
        **kwargs,
    )


def ledger_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if str(w.message).startswith("FLOP ledger:")]


# --- the measured pricer against the analytic model and the counter ---------------------------


@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "checkpointing"])
@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_measured_pricing_agrees_with_the_analytic_model(family, checkpointing):
    """Where both exist, measuring the PEFT-wrapped module prices every kind of pass as the analytic
    model does: the forward with adapters and without (the reference), the loss pass with TRL's head
    recompute, and under checkpointing its recompute and the input gradients it turns on."""
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(tiny_causal_lm(family), LoraConfig(r=4, target_modules="all-linear"))
    if checkpointing:
        model.enable_input_require_grads()  # as TRL does for PEFT under checkpointing
    shape, train = policy_cost(model, gradient_checkpointing=checkpointing)
    assert isinstance(shape, flops.ModelShape) and set(train.lora.target_modules) == set(flops.LINEAR_MODULES)
    measured = measure_policy(model)
    assert measured.per_call == 0 and measured.nonlinearity == 0
    work = flops.Work(tokens=1000, attn_pairs=30_000, head_tokens=700)
    assert measured.forward_flops(work, train.lora) == pytest.approx(
        flops.forward_flops(shape, work, train.lora), rel=1e-6
    )
    assert measured.forward_flops(work, None) == pytest.approx(flops.forward_flops(shape, work), rel=1e-6)
    assert measured.train_flops(work, train) == pytest.approx(flops.train_flops(shape, work, train), rel=1e-6)
    assert measured.parameter_count() == shape.parameter_count()
    assert measured.parameter_count(include_embeddings=False) == shape.parameter_count(False)


def test_the_counter_sees_the_grouped_mm_experts():
    """transformers runs a mixture of experts' experts with ``_grouped_mm`` by default, which the
    stock FlopCounterMode does not count; ``profiling.flop_counter`` counts it as the eager loop over
    the experts (whose matmuls the stock counter does see) runs it: each token through its top-k."""

    def counted(implementation: str, counter) -> int:
        model = tiny_causal_lm("qwen3_moe", **FAMILIES["qwen3_moe"])
        model.set_experts_implementation(implementation)
        with counter:
            model(input_ids=torch.arange(12)[None]).logits.sum().backward()
        return counter.get_total_flops()

    eager = counted("eager", FlopCounterMode(display=False))
    assert counted("grouped_mm", flop_counter()) == eager
    assert counted("grouped_mm", FlopCounterMode(display=False)) < eager


# --- real GRPO runs of models beyond the analytic families ----------------------------------


@pytest.mark.parametrize(
    "family, overrides",
    [
        ("cohere2", {}),
        ("gpt_oss", dict(beta=0.05)),  # the reference forward: the policy with its adapters disabled
        # LoRA on the attention: on expert parameters PEFT adds a cost per call (see the next test)
        ("qwen3_moe", dict(targets=ATTENTION)),
        ("gemma2", dict(beta=0.05)),
        ("tiny_custom_llama", dict(budget=False)),
    ],
)
def test_ledger_agrees_with_profiler_beyond_the_analytic_families(tmp_path, family, overrides):
    """Today's analytic model refuses each of these in the constructor; measured, the ledger's
    executed search and learning FLOPs match FlopCounterMode around ``train()`` (eager attention),
    with a budget (its round priced before training) or without one."""
    budget = overrides.pop("budget", True)
    ledger = LedgerConfig(budget_flops=1e12) if budget else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = build(
            tmp_path, tiny_causal_lm(family, **FAMILIES[family]), ledger,
            trainer_cls=measuring("_generate_single_turn"), **overrides,
        )  # fmt: skip
    assert not ledger_warnings(caught)  # everything priced, linearly, no cost per call
    assert isinstance(trainer.ledger.policy, MeasuredCost) and isinstance(trainer.ledger.train.lora, Adapters)
    counter = flop_counter()
    with counter:
        trainer.train()
    s = trainer.ledger.summary()
    executed, useful = s["executed"], s["useful"]
    assert counter.get_total_flops() / (executed["C_search"] + executed["C_learning"]) == pytest.approx(
        1, abs=0.03
    )
    assert trainer.measured / executed["C_search"] == pytest.approx(1, abs=0.03)
    for component in ("C_search", "C_learning"):
        assert 0 < useful[component] <= executed[component]
    if overrides.get("beta"):
        assert s["tokens"]["ref_forward_rows"] == s["tokens"]["gen_rows"]
    card = json.loads((tmp_path / "out" / "compute_card.json").read_text())
    assert card["model"]["model_type"] == family and card["lora"]["rank"] == 4
    price = trainer.price_round_ceiling()
    assert (trainer.round_price is not None) == budget
    assert max(trainer.ledger.rounds) <= price["C_total"]


def test_a_cost_per_call_is_reported_once_not_counted(tmp_path):
    """PEFT's ``all-linear`` LoRA on a mixture of experts adapts the expert parameters, whose delta
    weights it computes in every forward, whatever its tokens: the ledger measures that cost but counts
    tokens, not calls, and says so once."""
    with pytest.warns(UserWarning, match=r"the policy costs [\d.e+]+ FLOPs per model call") as caught:
        trainer = build(tmp_path, tiny_causal_lm("qwen3_moe", **FAMILIES["qwen3_moe"]))
    assert len(ledger_warnings(caught)) == 1
    assert "experts" in trainer.ledger.train.lora.target_modules


class TextlessRewardModel(torch.nn.Module):
    """A reward model that cannot score text alone: it needs an image (here, always missing)."""

    def __init__(self) -> None:
        super().__init__()
        self.config = AutoConfig.for_model("qwen2", hidden_size=8, num_attention_heads=2)
        self.score = torch.nn.Linear(8, 1)

    def forward(self, input_ids=None, attention_mask=None, pixel_values=None):
        raise ValueError("this reward model needs pixel_values")


def test_without_a_budget_a_model_it_cannot_price_is_counted_as_zero_with_one_warning(tmp_path):
    reward = TextlessRewardModel()
    with pytest.warns(UserWarning, match="cannot price reward model") as caught:
        trainer = build(
            tmp_path, random_model(attn_implementation="eager"), reward_funcs=[length_reward, reward]
        )
    (message,) = ledger_warnings(caught)
    assert "needs pixel_values" in message and "counted as 0 FLOPs" in message
    assert trainer.price_round_ceiling() is None  # a ceiling it cannot price is skipped, with a warning
    with pytest.raises(ValueError, match="cannot keep budget_flops"):
        build(tmp_path, random_model(attn_implementation="eager"), LedgerConfig(budget_flops=1e12),
              reward_funcs=[length_reward, reward])  # fmt: skip


# --- reward models priced from the module that runs --------------------------------------------


def _sequence_classifier_in_code():
    """A Qwen2 classification reward model built in code: its config has no ``architectures``."""
    from transformers import Qwen2ForSequenceClassification

    config = random_model().config
    config.num_labels, config.architectures = 1, None
    torch.manual_seed(1)
    return Qwen2ForSequenceClassification._from_config(config, attn_implementation="eager")


def _sequence_classifier_from_causal(path):
    """A causal-LM checkpoint loaded as a classifier: its config still says ``Qwen2ForCausalLM``."""
    from transformers import AutoModelForSequenceClassification

    return AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, attn_implementation="eager")


@pytest.mark.parametrize("how", ["built in code", "causal-LM checkpoint", "path in reward_funcs"])
def test_reward_models_are_priced_by_the_head_that_runs(tmp_path, tiny_policy, how):
    """A classification reward model runs a (hidden x 1) score head, whatever its config's
    ``architectures`` say (nothing, or ``...ForCausalLM``): C_reward matches FlopCounterMode around
    TRL's reward calls within 2%, and the round ceiling prices it the same way."""
    overrides = {}
    if how == "built in code":
        reward = _sequence_classifier_in_code()
        overrides["reward_processing_classes"] = build_tokenizer()
    elif how == "causal-LM checkpoint":
        reward = _sequence_classifier_from_causal(tiny_policy)
        overrides["reward_processing_classes"] = build_tokenizer()
    else:  # TRL loads it with AutoModelForSequenceClassification(num_labels=1)
        reward, overrides["model_init_kwargs"] = str(tiny_policy), {"attn_implementation": "eager"}
    trainer = build(
        tmp_path, random_model(attn_implementation="eager"), reward_funcs=[reward],
        trainer_cls=measuring("_calculate_rewards"), **overrides,
    )  # fmt: skip
    trainer.train()
    s = trainer.ledger.summary()
    assert trainer.measured / s["executed"]["C_reward"] == pytest.approx(1, abs=0.02)
    assert 0 < s["useful"]["C_reward"] < s["executed"]["C_reward"]  # TRL pads the batch on the right
    (module,) = trainer.reward_model_costs
    assert trainer.reward_model_costs[module].head == ((module.config.hidden_size, 1),)
    price = trainer.price_round_ceiling()
    per_row = flops.forward_flops(trainer.reward_model_costs[module], flops.sequence_work(4 + 10))
    assert price["C_reward"] == pytest.approx(price["rows"] * per_row)


def _check_reward_hook(trainer, module, ids, mask) -> None:
    """The reward hook's C_reward for one forward of ``module`` on a padded batch: ``executed`` within
    2% of FlopCounterMode around that forward, ``useful`` (real tokens) below it."""
    trainer.model.train()
    handle = module.register_forward_pre_hook(trainer._reward_model_hook(module), with_kwargs=True)
    counter = flop_counter()
    with counter, torch.inference_mode():
        module(input_ids=ids, attention_mask=mask)
    handle.remove()
    charged = trainer.ledger._current.flops
    assert counter.get_total_flops() / charged["executed"]["reward"] == pytest.approx(1, abs=0.02)
    assert 0 < charged["useful"]["reward"] < charged["executed"]["reward"]


@pytest.mark.parametrize("how", ["checkpoint", "built in code"])
def test_a_process_reward_model_is_priced_by_its_score_mlp(tmp_path, how):
    """Qwen2.5-Math-PRM's interface (remote code, a (h, h) -> (h, 2) score MLP at every position), as
    its checkpoint loads or built in code without ``architectures``: the reward hook's C_reward on a
    padded batch matches FlopCounterMode around the PRM's forward."""
    from transformers import AutoModel

    path = fixtures.write_tiny_math_prm(tmp_path / "prm")
    if how == "checkpoint":
        prm = AutoModel.from_pretrained(path, trust_remote_code=True, attn_implementation="eager")
    else:
        config = AutoConfig.from_pretrained(path, trust_remote_code=True)
        config.architectures = None
        prm = AutoModel.from_config(config, trust_remote_code=True, attn_implementation="eager")
    trainer = build(
        tmp_path, random_model(attn_implementation="eager"), reward_funcs=[prm],
        reward_processing_classes=fixtures.qwen25_style_tokenizer(),
    )  # fmt: skip
    ids = torch.randint(4, prm.config.vocab_size, (6, 19))
    mask = torch.ones_like(ids)
    mask[0, 11:] = mask[3, 16:] = 0
    _check_reward_hook(trainer, prm, ids, mask)
    h = prm.config.hidden_size
    assert trainer.reward_model_costs[prm].head == ((h, h), (h, 2))


def test_a_reward_model_outside_the_analytic_families_is_measured(tmp_path):
    """A gemma2 classification reward model (soft-capped, sliding-window attention): measured, head
    included; the hook's C_reward on a padded batch matches FlopCounterMode."""
    from transformers import AutoModelForSequenceClassification

    config = tiny_causal_lm("gemma2", **FAMILIES["gemma2"]).config
    config.num_labels = 1
    reward = AutoModelForSequenceClassification.from_config(config, attn_implementation="eager")
    trainer = build(
        tmp_path, random_model(attn_implementation="eager"), reward_funcs=[reward],
        reward_processing_classes=build_tokenizer(),
    )  # fmt: skip
    ids = torch.randint(2, 50, (5, 13))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    _check_reward_hook(trainer, reward, ids, mask)
    assert isinstance(trainer.reward_model_costs[reward], MeasuredCost)
