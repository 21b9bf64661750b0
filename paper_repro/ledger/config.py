"""The ledger's options: :class:`LedgerConfig`, every field with a working default and checked for
type and range when it is built (a ``TypeError`` or ``ValueError`` that names the field and its valid
range, before any trainer is built), and :class:`BudgetWarning`, the warning of a run that passed, or
was set up so that it could pass, its budget."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, get_args, get_type_hints

BUDGET_STOPS = ("step", "round", "overshoot")


class BudgetWarning(UserWarning):
    """A ledger-wrapped run spent more useful FLOPs than its budget, or was set up so that it could."""


@dataclass(frozen=True)
class LedgerConfig:
    """Options of the ledger; every field has a working default."""

    budget_flops: float | None = None  # useful FLOPs the run may spend (the budget contract)
    # How the budget stops the run (docs/ledger.md, the budget contract): "step" (default) stops
    # before the optimizer step that could pass it, a step inside a round priced exactly from its
    # rollouts, one that starts a round at the round's ceiling, so C_total never passes the budget;
    # "round" stops only at the end of a round, before the next round priced at its ceiling (never
    # passes either, but may leave up to one costliest round unspent); "overshoot" prices the next
    # round as the dearest so far, an estimate that a run can outgrow by one round (warns when used).
    budget_stop: Literal["step", "round", "overshoot"] = "step"
    kept: int | None = None  # K completions kept per prompt for the update; None keeps all G
    downsample: Literal["max_variance", "random"] = "max_variance"
    log_path: str | Path | None = None  # one JSONL line per optimizer step
    prefix_cache: bool | None = None  # prompt prefilled once per prompt; default: on with vLLM
    first_round_flops: float | None = None  # the planner's estimate, to refuse a budget below one round
    # The most one round can cost (the longest prompt, every completion at the maximum length). With
    # it the budget stop is a guarantee: the run stops while another round could pass the budget.
    # Without it the next round is priced as the dearest so far, which completions that grow under
    # RL can outrun.
    round_ceiling_flops: float | None = None
    # The most tokens a prompt has, as TRL tokenizes it (chat template included): the round's ceiling
    # is priced with it instead of reading the train dataset (which an iterable dataset never is). A
    # longer prompt seen in training warns and is priced from then on.
    max_prompt_tokens: int | None = None
    downsample_seed: int = (
        0  # for random down-sampling (not `seed`: that is GRPOConfig's, TrlParser reads both)
    )
    # Max-variance down-sampling compares rewards rounded to this many decimals (None: exact): float
    # noise in a learned reward then cannot change which completions are kept.
    selection_decimals: int | None = None
    # The compute card: written to ``<card_path>.json`` and ``<card_path>.md`` at the end of training;
    # default ``<output_dir>/compute_card``. ``write_card=False`` writes none.
    card_path: str | Path | None = None
    write_card: bool = True
    # The peak FLOP/s per device the card states MFU and HFU against; default: the device's peak for
    # each phase's compute dtype (paper_repro.accounting.devices.resolve_peak: TRL's get_peak_flops, else the
    # project's table of what TRL lacks), none on CPU (no MFU there).
    peak_flops: float | None = None
    # Build the trainer under a TRL outside the tested minor series (a warning instead of a refusal;
    # or set PAPER_REPRO_ALLOW_UNTESTED_TRL=1). The hooked methods' signatures are checked either way.
    allow_untested_trl: bool = False

    @classmethod
    def from_dict(cls, options: Mapping[str, Any]) -> LedgerConfig:
        """A ``LedgerConfig`` from a mapping of its fields (numbers written as strings, as YAML reads
        ``3e15``, are converted); an unknown key is a ``TypeError`` that lists the fields."""
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise TypeError(
                f"LedgerConfig has no option {', '.join(map(repr, unknown))}; its options: {', '.join(known)}. "
                "A file that mixes GRPOConfig's and the ledger's options reads with "
                "trl.TrlParser((GRPOConfig, LedgerConfig)).parse_args_and_config()"
            )
        # the numeric fields, by their annotations (float | None -> float)
        hints = get_type_hints(cls)
        numbers = {k: t for k in known for t in (float, int) if t in (get_args(hints[k]) or (hints[k],))}
        values = {
            k: _from_text(k, numbers[k], v) if k in numbers and isinstance(v, str) else v
            for k, v in options.items()
        }
        return cls(**values)

    @classmethod
    def from_yaml(cls, path: str | Path) -> LedgerConfig:
        """A ``LedgerConfig`` from a YAML file of its fields, or from the ``ledger:`` section of one."""
        import yaml

        options = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(options, Mapping):
            raise TypeError(
                f"{path}: expected a mapping of LedgerConfig options, got {type(options).__name__}"
            )
        if isinstance(options.get("ledger"), Mapping):
            options = options["ledger"]
        return cls.from_dict(options)

    def __post_init__(self) -> None:
        for name in ("budget_flops", "first_round_flops", "round_ceiling_flops", "peak_flops"):
            _check_number(name, getattr(self, name), "FLOPs" if name != "peak_flops" else "FLOP/s per device")
        for name, low in (("kept", 1), ("max_prompt_tokens", 1), ("selection_decimals", 0)):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
                raise _field_error(name, value, f"an int >= {low}, or None")
        if isinstance(self.downsample_seed, bool) or not isinstance(self.downsample_seed, int):
            raise _field_error("downsample_seed", self.downsample_seed, "an int")
        if self.downsample not in ("max_variance", "random"):
            raise ValueError(f"downsample must be 'max_variance' or 'random', got {self.downsample!r}")
        if self.budget_stop not in BUDGET_STOPS:
            raise ValueError(
                f"budget_stop must be one of {', '.join(map(repr, BUDGET_STOPS))}, got {self.budget_stop!r}"
            )


def _from_text(name: str, kind: type, text: str) -> float | int:
    """A number written as a string (``"3e15"``, ``"64"``), as ``kind``; a ``ValueError`` that names the
    field when the string is not one."""
    try:
        return kind(text)
    except ValueError:
        example = "3e15" if kind is float else "64"
        raise ValueError(
            f"LedgerConfig.{name} must be {'a number' if kind is float else 'an int'}, got the string "
            f"{text!r}, which is not one: write it as a number (e.g. {name}: {example})"
        ) from None


def _field_error(name: str, value: Any, valid: str) -> TypeError | ValueError:
    """The error for a LedgerConfig field outside its valid range: a TypeError for the wrong type."""
    wrong_type = isinstance(value, (str, bytes, bool)) or not isinstance(value, (int, float))
    kind = TypeError if wrong_type else ValueError
    hint = (
        " (LedgerConfig.from_dict / from_yaml convert numbers written as strings)"
        if isinstance(value, str)
        else ""
    )
    return kind(f"LedgerConfig.{name} must be {valid}, got {type(value).__name__} {value!r}{hint}")


def _check_number(name: str, value: Any, unit: str) -> None:
    """A positive, finite number of ``unit``, or None."""
    if value is None:
        return
    if isinstance(value, (str, bytes, bool)) or not isinstance(value, (int, float)):
        raise _field_error(name, value, f"a positive, finite number of {unit}, or None")
    if not math.isfinite(value) or value <= 0:
        raise _field_error(name, value, f"a positive, finite number of {unit}, or None")


def show_run_lines() -> None:
    """Show the one line a run logs when it stops (rounds, spent / budget, why) on stderr, as
    transformers shows its own logs: a handler on the ``paper_repro.ledger`` logger at INFO, set up
    when a ledger run starts, not when the ledger is imported (a library installs no handler at
    import). A handler or a level set before stays:
    ``logging.getLogger("paper_repro.ledger").setLevel(logging.WARNING)`` silences it."""
    logger = logging.getLogger("paper_repro.ledger")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
