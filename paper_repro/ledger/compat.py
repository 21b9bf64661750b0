"""What the ledger needs of TRL and of its caller, checked when a trainer is built, before any compute.

* The TRL release: the ledger overrides private ``GRPOTrainer`` methods, so it accepts the minor
  series it is tested with (:data:`SUPPORTED_TRL`, any patch release of it) and refuses others, unless
  the user opts in to an untested TRL (``LedgerConfig(allow_untested_trl=True)`` or the environment
  variable :data:`ALLOW_UNTESTED_TRL_ENV`), which then warns.
* The hooked methods: whatever the release, each method the ledger overrides must exist on
  ``GRPOTrainer`` with the leading parameters the ledger reads (:data:`HOOKED_METHODS`); an
  incompatible TRL fails here with the method's name, not somewhere inside training.
* The configs in their places: a ``LedgerConfig`` goes in ``ledger=``, TRL's ``GRPOConfig`` in
  ``args=``, a PEFT config in ``peft_config=``; anything else gets one ``TypeError`` saying where
  each belongs.
"""

from __future__ import annotations

import inspect
import os
import warnings
from collections.abc import Mapping
from typing import Any

from paper_repro.ledger.core import LedgerConfig

# The TRL minor series the ledger is tested with: every patch release of it is accepted.
SUPPORTED_TRL = "1.16"
# Set to 1 to build a LedgerGRPOTrainer under an untested TRL (it warns); or LedgerConfig(allow_untested_trl=True).
ALLOW_UNTESTED_TRL_ENV = "PAPER_REPRO_ALLOW_UNTESTED_TRL"

# The GRPOTrainer methods the ledger overrides or calls, and the leading parameters it passes or reads.
HOOKED_METHODS: dict[str, tuple[str, ...]] = {
    "_generate_single_turn": ("prompt_ids", "images", "multimodal_fields", "num_generations"),
    "_get_per_token_logps_and_entropies": ("model", "input_ids", "attention_mask", "logits_to_keep"),
    "_calculate_rewards": ("inputs", "prompts", "completions", "completion_ids_list"),
    "_generate_and_score_completions": ("inputs",),
    "_prepare_inputs": ("generation_batch",),
    "_tokenize_prompts": ("prompts",),
}

# Every private TRL name LedgerGRPOTrainer (with its mixins, card and probes) touches, and why: the
# surface a TRL release can break. tests/test_ledger_contract.py finds each private GRPOTrainer or
# Trainer name the code touches in this list, and each listed name in the code. FlopLedgerCallback
# touches none (paper_repro.ledger.callback.PRIVATE_TRL_NAMES is empty).
SUBCLASS_PRIVATE_TRL_NAMES: dict[str, str] = {
    "_generate_single_turn": "overridden: the rollouts' prompt and completion tokens (C_search); the lean and fused samplers",
    "_get_per_token_logps_and_entropies": "overridden: every policy forward (loss pass, old-policy, reference); the bucketed and fused update",
    "_calculate_rewards": "overridden: reward functions' flop_cost and reward models' forwards (C_reward)",
    "_generate_and_score_completions": "overridden: K-of-G down-sampling of each generation batch",
    "_tokenize_prompts": "called: the longest prompt as TRL tokenizes it, for the round's ceiling",
    "_buffered_inputs": "read (filled by _prepare_inputs): the round's rollouts, to price the next optimizer step exactly",
    "_step": "read: TRL's micro-batch counter, for round boundaries",
    "_metrics": "written: flops/*, tokens/* and perf/ledger_* into TRL's metrics at each step",
    "_is_vlm": "read: a vision-language model's encoder is unpriced, and the kernels fall back to TRL's",
}


def trl_version() -> str:
    import trl

    return str(trl.__version__)


def _series(version: str) -> str:
    from packaging.version import Version

    v = Version(version)
    return f"{v.major}.{v.minor}"


def check_trl(allow_untested: bool = False) -> None:
    """Refuse a TRL outside the tested minor series (:data:`SUPPORTED_TRL`) unless the user opted in,
    then check the hooked methods' signatures (:func:`check_hooked_methods`) whatever the version."""
    version = trl_version()
    if _series(version) != SUPPORTED_TRL:
        opted_in = allow_untested or os.environ.get(ALLOW_UNTESTED_TRL_ENV, "") not in ("", "0")
        if not opted_in:
            raise RuntimeError(
                f"the FLOP ledger hooks private methods of TRL's GRPOTrainer and is tested with TRL "
                f"{SUPPORTED_TRL}.x; found trl {version}. Install a tested release "
                f"(pip install 'trl>={SUPPORTED_TRL}.0,<{_next_minor(SUPPORTED_TRL)}'), or try this one at "
                f"your own risk with LedgerConfig(allow_untested_trl=True) or {ALLOW_UNTESTED_TRL_ENV}=1"
            )
        warnings.warn(
            f"the FLOP ledger is tested with TRL {SUPPORTED_TRL}.x, not trl {version}: its hooked methods have "
            "the expected signatures, but what they do may have changed; check its counts against "
            "torch.utils.flop_counter.FlopCounterMode on a short run before you trust them",
            stacklevel=3,
        )
    check_hooked_methods()


def _next_minor(series: str) -> str:
    major, minor = series.split(".")
    return f"{major}.{int(minor) + 1}"


def check_hooked_methods() -> None:
    """Each method the ledger overrides exists on ``trl.GRPOTrainer`` and takes the leading
    parameters the ledger passes and reads (:data:`HOOKED_METHODS`); a ``RuntimeError`` names the first
    that does not."""
    from trl import GRPOTrainer

    version = trl_version()
    for name, expected in HOOKED_METHODS.items():
        method = getattr(GRPOTrainer, name, None)
        if method is None:
            raise RuntimeError(
                f"trl {version}'s GRPOTrainer has no method {name}, which the FLOP ledger hooks: this TRL is "
                f"incompatible with the ledger (tested with TRL {SUPPORTED_TRL}.x)"
            )
        params = [p for p in inspect.signature(method).parameters.values() if p.name != "self"]
        if not _takes(params, expected):
            params = [str(p) for p in params]
            raise RuntimeError(
                f"trl {version}'s GRPOTrainer.{name} takes ({', '.join(params)}), but the FLOP ledger hooks it "
                f"as ({', '.join(expected)}, ...): this TRL is incompatible with the ledger (tested with TRL "
                f"{SUPPORTED_TRL}.x)"
            )


def _takes(params: list[inspect.Parameter], expected: tuple[str, ...]) -> bool:
    """Whether leading ``params`` take ``expected`` by position (a ``*args`` takes the rest)."""
    for i, name in enumerate(expected):
        if i < len(params) and params[i].kind is inspect.Parameter.VAR_POSITIONAL:
            return True
        if i >= len(params) or params[i].name != name:
            return False
    return True


def check_config_places(args: tuple[Any, ...], kwargs: dict[str, Any], ledger: Any) -> None:
    """One ``TypeError`` for a config in the wrong place: a ``LedgerConfig`` anywhere but ``ledger=``,
    or anything but a ``LedgerConfig`` (or None) in ``ledger=``. ``args`` and ``kwargs`` are
    ``GRPOTrainer``'s own (``model, reward_funcs, args, ...``)."""
    from transformers import TrainingArguments
    from trl import GRPOConfig

    where = "ledger=LedgerConfig(...) (the ledger's options; LedgerConfig.from_dict / from_yaml read them)"
    if ledger is not None and not isinstance(ledger, LedgerConfig):
        if isinstance(ledger, TrainingArguments):
            got = f"TRL's {type(ledger).__name__}, whose place is args=; the ledger's options go in {where}"
        elif isinstance(ledger, Mapping):
            got = f"a {type(ledger).__name__}; pass LedgerConfig.from_dict(...) of it, or {where}"
        elif _is_peft_config(ledger):
            got = f"a PEFT {type(ledger).__name__}, whose place is peft_config=; the ledger's go in {where}"
        else:
            got = f"a {type(ledger).__name__}; the ledger's options go in {where}"
        raise TypeError(f"LedgerGRPOTrainer(ledger=...) takes a LedgerConfig, got {got}")
    named = dict(zip(("model", "reward_funcs", "args"), args, strict=False)) | kwargs
    for name, value in named.items():
        if isinstance(value, LedgerConfig):
            place = "TRL's GRPOConfig" if name == "args" else f"{name}'s value"
            raise TypeError(
                f"LedgerGRPOTrainer got a LedgerConfig as {name}=, where {place} belongs: pass it as "
                f"ledger=LedgerConfig(...), and TRL's options as args=GRPOConfig(...)"
            )
    trl_args = named.get("args")
    if trl_args is not None and not isinstance(trl_args, GRPOConfig):
        more = (
            ": a plain TrainingArguments lacks GRPO's options (num_generations, max_completion_length, "
            "beta, ...); build trl.GRPOConfig(...) with the same fields"
            if isinstance(trl_args, TrainingArguments)
            else "; the ledger's options go in ledger=LedgerConfig(...)"
        )
        raise TypeError(
            f"LedgerGRPOTrainer(args=...) takes TRL's GRPOConfig, got a {type(trl_args).__name__}{more}"
        )


def _is_peft_config(value: Any) -> bool:
    try:
        from peft import PeftConfig
    except ImportError:  # pragma: no cover - peft is a requirement
        return False
    return isinstance(value, PeftConfig)
