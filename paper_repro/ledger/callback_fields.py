"""What :class:`~paper_repro.ledger.callback.FlopLedgerCallback` does with each :class:`LedgerConfig`
field: every field is honoured (:data:`CALLBACK_HONOURS`, how) or refused when the callback is built
(:data:`CALLBACK_REFUSES`, why), and a test keeps the two tables covering every field.

:class:`CallbackFields`, a mixin of the callback, is its side of the honoured fields that need more
than the ledger: the TRL release it accepts (``allow_untested_trl``), the costliest round priced from a
declared prompt length (``max_prompt_tokens``), MFU and HFU against ``peak_flops`` and the compute card
(``card_path``, ``write_card``), both read through :class:`CallbackRun`, what
:func:`~paper_repro.ledger.card.compute_card` reads of a trainer, built from the callback's arguments;
and :meth:`CallbackFields.attach`, which lets the callback see the trainer's reward functions.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, fields
from typing import Any

import torch

from paper_repro.accounting import flops
from paper_repro.ledger.config import BudgetWarning, LedgerConfig

# The TRL releases the callback is tested with (tests/test_trl_releases.py), first and last minor series.
CALLBACK_TRL = ("1.13", "1.16")

# How the callback honours each field it honours.
CALLBACK_HONOURS: dict[str, str] = {
    "budget_flops": "the budget stop (control.should_training_stop) and the refusal of a budget below one round",
    "budget_stop": "the stop rule: 'step', 'round' or 'overshoot', as LedgerGRPOTrainer",
    "log_path": "one JSONL line per optimizer step, and the summary beside it",
    "prefix_cache": "None and False: generation counted as transformers' generate runs it, every row "
    "prefilling its prompt",
    "first_round_flops": "a budget below it is refused at train begin",
    "round_ceiling_flops": "the next round's price at a round boundary; a budget below it is refused",
    "max_prompt_tokens": "the round's ceiling priced from it at train begin (the policy's passes, the "
    "wrapped reward functions on a worst-case batch; reward models from their first forward on), a "
    "budget below it refused; a longer prompt seen in training warns and is priced from then on",
    "card_path": "the compute card written there at train end (.json and .md)",
    "write_card": "False writes no compute card (and no summary without log_path)",
    "peak_flops": "MFU and HFU against it: perf/ledger_* in the logs and on the compute card",
    "allow_untested_trl": "a TRL outside the releases the callback is tested with "
    f"({CALLBACK_TRL[0]} to {CALLBACK_TRL[1]}) is refused unless set (then it warns)",
}

_USE_THE_SUBCLASS = "; use paper_repro.ledger.LedgerGRPOTrainer for K-of-G"
_NO_BATCH = "TRL's trainers do not expose the generation batch to a callback, so it cannot down-sample"

# Why the callback refuses each field it refuses, when set to anything but its default
# (prefix_cache: when True).
CALLBACK_REFUSES: dict[str, str] = {
    "kept": f"K-of-G down-sampling keeps K rows of each group: {_NO_BATCH}{_USE_THE_SUBCLASS}",
    "downsample": f"it chooses the rows K-of-G down-sampling keeps: {_NO_BATCH}{_USE_THE_SUBCLASS}",
    "downsample_seed": f"it seeds random K-of-G down-sampling: {_NO_BATCH}{_USE_THE_SUBCLASS}",
    "selection_decimals": f"it rounds the rewards max-variance K-of-G compares: {_NO_BATCH}{_USE_THE_SUBCLASS}",
    "prefix_cache": "True counts each prompt prefilled once per group, but the callback counts what the "
    "policy runs: transformers' generate prefills every row's prompt, and vLLM, whose prefix cache would, "
    "generates outside the policy module where a callback cannot see it; LedgerGRPOTrainer counts a "
    "prefix cache",
}


def check_callback_fields(config: LedgerConfig) -> None:
    """A ``ValueError`` naming the first field of ``config`` the callback refuses, with why."""
    defaults = {f.name: f.default for f in fields(LedgerConfig)}
    for name, why in CALLBACK_REFUSES.items():
        value = getattr(config, name)
        if (value is True) if name == "prefix_cache" else value != defaults[name]:
            raise ValueError(f"FlopLedgerCallback cannot honour LedgerConfig.{name}={value!r}: {why}")


def check_callback_trl(allow_untested: bool) -> None:
    """Refuse a TRL outside :data:`CALLBACK_TRL` unless ``allow_untested`` (or the environment's
    opt-in, :data:`~paper_repro.ledger.compat.ALLOW_UNTESTED_TRL_ENV`), which then warns."""
    from packaging.version import Version

    from paper_repro.ledger.compat import ALLOW_UNTESTED_TRL_ENV, trl_version

    version = trl_version()
    series = Version(version).release[:2]
    first, last = (Version(s).release[:2] for s in CALLBACK_TRL)
    if first <= series <= last:
        return
    tested = f"TRL {CALLBACK_TRL[0]} to {CALLBACK_TRL[1]}"
    if not (allow_untested or os.environ.get(ALLOW_UNTESTED_TRL_ENV, "") not in ("", "0")):
        raise RuntimeError(
            f"FlopLedgerCallback relies on TRL's public behaviour as tested with {tested} "
            f"(paper_repro.ledger.callback.TRL_CONVENTIONS); found trl {version}. Install a tested release, "
            f"or try this one with LedgerConfig(allow_untested_trl=True) or {ALLOW_UNTESTED_TRL_ENV}=1"
        )
    warnings.warn(
        f"FlopLedgerCallback is tested with {tested}, not trl {version}: check its counts against "
        "torch.utils.flop_counter.FlopCounterMode on a short run before you trust them",
        stacklevel=3,
    )


@dataclass
class _Accelerator:
    """What the card reads of a trainer's ``accelerator``."""

    device: torch.device
    num_processes: int
    mixed_precision: str


class CallbackRun:
    """What :func:`~paper_repro.ledger.card.compute_card` and
    :func:`~paper_repro.ledger.card.utilisation_metrics` read of a trainer, from the callback's
    arguments (TRL's config, the model, the train dataloader) and its ledger. TRL's own generate and
    update run (``sampler`` and ``update_layout`` ``"trl"``), every completion is kept (K = G), and no
    dtype probe watches the phases: the card states each phase's dtype as nominal."""

    sampler = update_layout = "trl"
    use_transformers_continuous_batching = False

    def __init__(self, callback: Any, args: Any, model: Any, train_dataloader: Any = None) -> None:
        self.ledger = callback.ledger
        self._callback = callback
        self.args, self.model = args, model
        device = getattr(args, "device", None) or torch.device("cpu")
        mixed = "bf16" if getattr(args, "bf16", False) else "fp16" if getattr(args, "fp16", False) else "no"
        self.accelerator = _Accelerator(device, int(getattr(args, "world_size", 1) or 1), mixed)
        self.num_generations = int(args.num_generations)
        self._kept = self.num_generations
        self.num_iterations = int(getattr(args, "num_iterations", 1) or 1)
        self.beta = getattr(args, "beta", 0.0)
        self.use_vllm = bool(getattr(args, "use_vllm", False))
        self.train_dataset = getattr(train_dataloader, "dataset", None)

    @property
    def round_price(self) -> dict[str, Any] | None:
        return self._callback.round_price


class CallbackFields:
    """The callback's side of the fields it honours beyond the ledger (module docstring). The host sets
    :attr:`ledger`, :attr:`config` and, in the watcher, ``_round_rows`` and ``_reward_costs``."""

    round_price: dict[str, Any] | None = None  # the self-priced round ceiling (max_prompt_tokens)
    _run: CallbackRun | None = None
    _attached = False
    _warned_unseen = False

    def _init_fields(self) -> None:
        check_callback_fields(self.config)
        check_callback_trl(self.config.allow_untested_trl)
        self._priced_funcs: list[tuple[str, Any]] = []  # (name, flop_cost) of each wrapped reward
        self._priced_key: tuple[Any, ...] | None = None
        self._prompt_tokens: tuple[int, str] | None = None  # the prompt length the ceiling is priced with

    # --- the trainer's reward functions ---------------------------------------------------------
    def attach_rewards(self, trainer: Any) -> Any:
        """Let the callback see ``trainer``'s reward functions (TRL's ``GRPOTrainer`` or
        ``RLOOTrainer``; a ``TrainerCallback`` is not given them): each one with a ``flop_cost``
        attribute is replaced in ``trainer.reward_funcs`` by :meth:`priced_reward`'s wrapper, and the
        callback is added to the trainer's callbacks if it is not there yet (part of
        :meth:`FlopLedgerCallback.attach`). Returns ``trainer``."""
        funcs = getattr(trainer, "reward_funcs", None)
        if not isinstance(funcs, list):
            raise TypeError(
                "FlopLedgerCallback.attach takes TRL's GRPOTrainer or RLOOTrainer (a trainer with a "
                f"reward_funcs list), got a {type(trainer).__name__}"
            )
        for i, func in enumerate(funcs):
            if not isinstance(func, torch.nn.Module) and getattr(func, "flop_cost", None) is not None:
                funcs[i] = self.priced_reward(func)
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        self._attached = True
        self._measure_before_training(trainer.args)
        return trainer

    def on_init_end(self, args, state, control, **kwargs):
        """When the trainer is built (``callbacks=[...]``): what the card shows must be measured
        before training (:meth:`_measure_before_training`)."""
        self._measure_before_training(args)

    def _measure_before_training(self, args: Any) -> None:
        """On a CPU, the matmul throughput the compute card shows beside the run, measured once per
        process before training, as LedgerGRPOTrainer measures it: inside ``train()`` it would show in
        a profiler around it and in its wall time."""
        device = getattr(args, "device", None)
        if self.config.write_card and getattr(device, "type", None) == "cpu":
            from paper_repro.ledger.card import cpu_matmul_throughput

            cpu_matmul_throughput()

    def _warn_unseen_rewards(self) -> None:
        """Once per callback never attached: a ``flop_cost`` it cannot see is charged 0."""
        if not self._attached and not self._warned_unseen:
            self._warned_unseen = True
            warnings.warn(
                "FlopLedgerCallback cannot see the trainer's reward functions (a TrainerCallback is not "
                "given them): a reward function with a flop_cost attribute passed to the trainer as it is "
                "is charged 0 FLOPs. Call ledger.attach(trainer) once the trainer is built (it wraps each "
                "such function), or pass ledger.priced_reward(func) as the reward function",
                stacklevel=4,
            )

    # --- train begin ----------------------------------------------------------------------------
    def _begin_fields(self, args: Any, model: Any, kwargs: dict[str, Any]) -> None:
        """At train begin: what the card and the metrics read, the round's ceiling priced from
        ``max_prompt_tokens`` (a budget below it refused), and the warning on unseen reward functions."""
        self._warn_unseen_rewards()
        self._run = CallbackRun(self, args, model, kwargs.get("train_dataloader"))
        self._tokenizer = kwargs.get("processing_class")
        self.round_price, self._priced_key = None, None
        declared = self.config.max_prompt_tokens
        self._prompt_tokens = None
        if declared is None or self.config.round_ceiling_flops is not None:
            return
        self._prompt_tokens = (declared, f"LedgerConfig.max_prompt_tokens ({declared} tokens)")
        price, budget = self._self_priced_ceiling(), self.config.budget_flops
        if budget is not None and price > budget:
            p = self.round_price
            raise ValueError(
                f"budget {budget:.3g} FLOPs does not surely buy one generation round: one round needs up "
                f"to {price:.3g} useful FLOPs (P={p['P']} prompts x G={p['G']}, mu={p['mu']}; "
                f"{p['prompt_source']} and every completion at max_completion_length="
                f"{p['completion_tokens']}; reward models not yet seen not included). Raise the budget"
            )

    # --- the round's ceiling ----------------------------------------------------------------------
    def _round_ceiling(self) -> float | None:
        """The most the next round can cost (useful FLOPs): ``round_ceiling_flops`` when given, else
        the ceiling priced from ``max_prompt_tokens`` (re-priced with the longest prompt seen when one
        outgrew it, and with each reward model seen so far), else None (the stop then estimates)."""
        given = self.config.round_ceiling_flops
        if given is not None or self._prompt_tokens is None:
            return given
        longest = max((p for p, _ in self._round_rows), default=0)
        tokens, source = self._prompt_tokens
        if longest > tokens:
            warnings.warn(
                f"a prompt of {longest} tokens is longer than the round's ceiling was priced with "
                f"({source}): the budget's guarantee no longer holds; the ceiling is priced again with the "
                "longest prompt seen so far",
                BudgetWarning,
                stacklevel=4,
            )
            self._prompt_tokens = (longest, f"the longest prompt seen so far ({longest} tokens)")
        return self._self_priced_ceiling()

    def _self_priced_ceiling(self) -> float:
        """The ceiling at :attr:`_prompt_tokens`, priced again only when what it depends on changed."""
        key = (self._prompt_tokens, tuple(sorted(self._reward_costs)), len(self._priced_funcs))
        if key != self._priced_key:
            self.round_price, self._priced_key = self._price_round(*self._prompt_tokens), key
            self.ledger.prompt_length_source = self.round_price["prompt_source"]
        return self.round_price["C_total"]

    def _price_round(self, prompt_tokens: int, source: str) -> dict[str, Any]:
        """The costliest round at ``prompt_tokens`` (TRL's batch layout from its config, every
        completion at ``max_completion_length``), priced by
        :func:`~paper_repro.ledger.pricing.round_price` as LedgerGRPOTrainer prices it."""
        from paper_repro.ledger.pricing import round_price, runs_old_policy_forward

        args = self._run.args
        rows = (
            args.per_device_train_batch_size * args.steps_per_generation * self._run.accelerator.num_processes
        )
        g, mu, c = self._run.num_generations, self._run.num_iterations, args.max_completion_length
        old = runs_old_policy_forward(
            args,
            mu,
            self._run.use_vllm,
            getattr(args, "vllm_importance_sampling_correction", False),
            rloo=type(args).__name__.startswith("RLOO"),
        )
        step = flops.GRPOStep(
            prompts=rows // g,
            generations=g,
            kept=g,
            epochs=mu,
            prompt_tokens=prompt_tokens,
            completion_tokens=c,
            beta=self._run.beta,
            old_logprobs=old,
            prefix_cache=False,
        )
        return round_price(self.ledger, step, self._reward_ceiling(prompt_tokens, rows), source)

    def _reward_ceiling(self, prompt_tokens: int, rows: int) -> float:
        """Useful FLOPs of the rewards on ``rows`` worst-case completions: each reward model seen so far
        over the longest prompt plus ``max_completion_length`` tokens, each wrapped reward function's
        ``flop_cost`` on a batch of such completions (one ordinary token repeated)."""
        from paper_repro.ledger.core import as_conventions

        c = self._run.args.max_completion_length
        seq = flops.sequence_work(prompt_tokens + c)
        total = sum(rows * flops.forward_flops(cost, seq) for cost in self._reward_costs.values())
        if not self._priced_funcs:
            return total
        tokenizer = getattr(self._tokenizer, "tokenizer", self._tokenizer)
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        token = next(i for i in range(len(tokenizer)) if i not in special)
        prompt, completion = tokenizer.decode([token] * prompt_tokens), tokenizer.decode([token] * c)
        for name, cost_fn in self._priced_funcs:
            source = f"reward function {name!r}'s flop_cost (on a worst-case batch)"
            cost = cost_fn(
                prompts=[prompt] * rows, completions=[completion] * rows, completion_ids=[[token] * c] * rows
            )
            total += as_conventions(cost, source)["useful"]
        return total

    # --- the card and the utilisation metrics -----------------------------------------------------
    def _utilisation_metrics(self) -> dict[str, float]:
        """MFU and HFU so far (``perf/ledger_*``, percent), where a peak is known: on CUDA, or against
        ``LedgerConfig.peak_flops``."""
        if self._run is None:
            return {}
        from paper_repro.ledger.card import utilisation_metrics

        return utilisation_metrics(self._run)

    def card_paths(self, args: Any) -> tuple[Any, Any] | None:
        """Where the compute card goes: ``LedgerConfig.card_path`` + ``.json`` / ``.md``, default
        ``<output_dir>/compute_card``; None with ``write_card=False``."""
        from pathlib import Path

        if not self.config.write_card:
            return None
        stem = self.config.card_path or Path(args.output_dir) / "compute_card"
        return Path(f"{stem}.json"), Path(f"{stem}.md")

    def write_compute_card(self, args: Any) -> dict[str, Any] | None:
        """Write the compute card (:func:`~paper_repro.ledger.card.compute_card` of :class:`CallbackRun`)
        as JSON and Markdown to :meth:`card_paths`; return it (None with ``write_card=False``)."""
        import json

        from paper_repro.ledger.card import card_markdown, compute_card

        paths = self.card_paths(args)
        if paths is None or self._run is None:
            return None
        card = compute_card(self._run)
        paths[0].parent.mkdir(parents=True, exist_ok=True)
        paths[0].write_text(json.dumps(card, indent=2) + "\n")
        paths[1].write_text(card_markdown(card))
        return card
