"""Pricing the costliest generation round before any compute, to refuse a budget that cannot buy one.

:class:`RoundPricing` is a mixin of :class:`~paper_repro.ledger.trainer.LedgerGRPOTrainer`.
:meth:`RoundPricing.price_round_ceiling` prices, with the cost models the ledger charges
(:mod:`paper_repro.ledger.cost_models`) and the one price of a round's ceiling
(:func:`paper_repro.accounting.ceiling.round_ceiling_cost`, the planner's too), the most one round can cost
from what the trainer sees: its batch layout, the train dataset's longest prompt tokenized as TRL
tokenizes it, every completion at ``max_completion_length``, and the reward models and the reward
functions' ``flop_cost`` on a worst-case batch. At construction the trainer refuses a budget below one
round: below the user's ``first_round_flops`` / ``round_ceiling_flops`` when given, else below this
price.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import torch

from paper_repro.accounting import flops
from paper_repro.accounting.ceiling import round_ceiling_cost
from paper_repro.accounting.flops import GRPOStep
from paper_repro.ledger.core import BudgetWarning, as_conventions, forward_pass_work
from paper_repro.ledger.cost_models import unpriced_parts


def runs_old_policy_forward(args: Any, mu: int, use_vllm: bool, correction: bool, rloo: bool = False) -> bool:
    """Whether TRL runs the old-policy forward in each round (so a round's price includes it): always
    for RLOO (``rloo``); for GRPO when the optimizer steps do not line up with the rounds
    (``gradient_accumulation_steps`` not a multiple of ``steps_per_generation`` x ``mu``) or under vLLM
    with its importance-sampling ``correction``. The one statement of TRL 1.16's rule, read by the
    subclass's pricing and the callback's (``max_prompt_tokens``)."""
    if rloo:
        return True
    return args.gradient_accumulation_steps % (args.steps_per_generation * mu) != 0 or bool(
        use_vllm and correction
    )


def round_price(ledger: Any, step: GRPOStep, reward_flops: float, source: str) -> dict[str, Any]:
    """The costliest round of ``step`` (every completion at its ``completion_tokens``) on ``ledger``'s
    policy, rewards of ``reward_flops``, priced by :func:`round_ceiling_cost`: its cost split,
    ``C_loss`` (the loss passes: the part of the round spread over its steps), its layout and where
    its prompt length came from (``source``). The one shape of a round's price, for the subclass's
    pricing and the callback's (``max_prompt_tokens``)."""
    ceiling = round_ceiling_cost(ledger.policy, step, ledger.train, reward_flops=reward_flops)
    rows = step.prompts * step.generations
    return {
        **{key: float(value) for key, value in ceiling.cost.as_dict().items()},
        "C_loss": float(ceiling.C_loss),
        **{"P": step.prompts, "G": step.generations, "K": step.kept, "mu": step.epochs, "rows": rows},
        **{"prompt_tokens": step.prompt_tokens, "completion_tokens": step.completion_tokens},
        "prompt_source": source,
    }


class RoundPricing:
    """Prices the costliest generation round and refuses a budget below one round (a mixin of
    :class:`~paper_repro.ledger.trainer.LedgerGRPOTrainer`, which sets ``ledger``, ``_kept``,
    ``_prefix_cache``, ``round_price`` and ``reward_model_costs``)."""

    # what the step after the latest one could cost, and what it is (:meth:`_price_of_next`)
    next_price: tuple[float, str] | None = None

    def _check_first_round(self) -> None:
        """Refuse a budget below one round before any compute: against the user's
        ``first_round_flops`` / ``round_ceiling_flops`` when given, else against the ceiling the
        trainer prices itself (:meth:`price_round_ceiling`)."""
        config = self.ledger.config
        budget, first, ceiling = config.budget_flops, config.first_round_flops, config.round_ceiling_flops
        if budget is not None and config.budget_stop == "overshoot":
            warnings.warn(
                "LedgerConfig(budget_stop='overshoot') prices each next round as the dearest round so far: "
                "a run whose completions grow can pass its budget by up to one round; the default "
                "budget_stop='step' never passes it",
                BudgetWarning,
                stacklevel=3,
            )
        # the stop needs a round's ceiling too, unless it only estimates (overshoot) or was given one
        stop_needs_price = config.budget_stop != "overshoot"
        if budget is not None and ceiling is None and (first is None or stop_needs_price):
            self._set_round_price(self.price_round_ceiling())  # warns when it cannot
            # the user's first_round_flops, when given, is the price the refusal goes by
            if first is None and self.round_price is not None and self.round_price["C_total"] > budget:
                price = self.round_price
                raise ValueError(
                    f"budget {budget:.3g} FLOPs does not surely buy one generation round: one round needs up "
                    f"to {price['C_total']:.3g} useful FLOPs (P={price['P']} prompts x G={price['G']}, "
                    f"K={price['K']}, mu={price['mu']}; the longest prompt, {price['prompt_tokens']} tokens, "
                    f"and every completion at max_completion_length={price['completion_tokens']}). Raise "
                    "the budget, or pass first_round_flops / round_ceiling_flops to price the round yourself"
                )
        if budget is not None and first is not None and first > budget:
            raise ValueError(
                f"budget {budget:.3g} FLOPs buys 0 generation rounds: one round needs about {first:.3g}"
            )
        if budget is not None and ceiling is not None:
            ceiling = self._check_given_ceiling(ceiling)
            if ceiling > budget:
                raise ValueError(
                    f"budget {budget:.3g} FLOPs does not surely buy one generation round: the costliest "
                    f"round (every completion at the maximum length) needs {ceiling:.3g}"
                )
        top = ceiling if ceiling is not None else (self.round_price or {}).get("C_total")
        if budget is not None and config.budget_stop == "round" and top is not None and budget < 2 * top:
            warnings.warn(
                f"budget {budget:.3g} FLOPs buys fewer than two generation rounds at their ceiling "
                f"({top:.3g} each) under budget_stop='round': the run can stop after one round and leave "
                f"up to {budget - top:.3g} unspent; budget_stop='step' spends most of it",
                BudgetWarning,
                stacklevel=3,
            )

    def _check_given_ceiling(self, ceiling: float) -> float:
        """The user's ``round_ceiling_flops``, raised (with a warning) to the ledger's own price of the
        costliest round where that is higher: a ceiling below what a round can cost would let the
        budget stop pass the budget."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # unpriceable: the user's ceiling stands
            own = self.price_round_ceiling()
        if own is None or own["C_total"] <= ceiling:
            return ceiling
        warnings.warn(
            f"LedgerConfig.round_ceiling_flops={ceiling:.4g} is below the ledger's own price of the costliest "
            f"round, {own['C_total']:.4g} useful FLOPs ({own['prompt_source']}, every completion at "
            f"max_completion_length={own['completion_tokens']}): raised to it, so the budget stop holds",
            BudgetWarning,
            stacklevel=4,
        )
        self.ledger.config = replace(self.ledger.config, round_ceiling_flops=own["C_total"])
        self._set_round_price(own)
        return own["C_total"]

    def price_round_ceiling(self) -> dict[str, Any] | None:
        """The most one generation round can cost (useful FLOPs), priced by
        :func:`paper_repro.accounting.ceiling.round_ceiling_cost` (the one price of a round's ceiling: the
        planner's too) with the ledger's cost models from what the trainer sees, before any compute:

        * the batch layout: a round is ``per_device_train_batch_size x steps_per_generation x world
          size`` rows, P = rows / G prompts of G = ``num_generations`` completions, K kept
          (``LedgerConfig.kept``), mu = ``num_iterations`` update epochs;
        * the longest prompt of the train dataset, tokenized as TRL tokenizes it
          (``_tokenize_prompts``: through the chat template for conversational prompts), and every
          completion at ``max_completion_length``;
        * the policy's cost model (the analytic shape from its config and LoRA from its PEFT adapters,
          or its measured rates: :mod:`paper_repro.ledger.cost_models`), gradient checkpointing;
          the old-policy forward by TRL's rule (mu > 1, or vLLM importance sampling), the reference
          forward when beta != 0 (priced with the adapters on: a bound), prefix caching as counted;
        * reward models (``nn.Module``) by the cost models the trainer charges them with
          (``reward_model_costs``: priced from the module that runs), one forward over the longest prompt plus
          ``max_completion_length`` tokens per completion (assumes the reward tokenizer splits no
          finer than the policy's); reward functions with ``flop_cost`` by calling it on a worst-case
          batch: the longest prompt and a ``max_completion_length`` completion of one repeated
          ordinary token in each of the P x G rows. A function without ``flop_cost`` costs 0.

        Returns the priced round (``C_*``, ``rho`` and the layout), or None, with a warning, when the
        train dataset's prompts cannot be read (an iterable dataset) or a model cannot be priced (the
        trainer has warned which): then nothing is refused."""
        args = self.args
        world = self.accelerator.num_processes
        rows = args.per_device_train_batch_size * args.steps_per_generation * world
        g, k, mu = self.num_generations, self._kept, self.num_iterations
        gaps = unpriced_parts(self.priced_models())
        if gaps:
            warnings.warn(
                f"the FLOP ledger cannot price a round: it cannot price {'; '.join(gaps)}", stacklevel=3
            )
            return None
        longest = self._prompt_for_pricing()
        if longest is None:
            warnings.warn(
                "the FLOP ledger does not read an iterable (streaming) train dataset to price a round: the "
                "budget is not checked before training, and the stop prices each new round with the "
                "longest prompt seen so far (an estimate: a longer prompt later can pass the budget by "
                "less than one round); pass LedgerConfig(max_prompt_tokens=...) or "
                "round_ceiling_flops=... for a guarantee",
                stacklevel=3,
            )
            return None
        prompt, prompt_tokens, source = longest
        c = args.max_completion_length
        old = runs_old_policy_forward(args, mu, self.use_vllm, self.vllm_importance_sampling_correction)
        step = GRPOStep(
            prompts=rows // g,
            generations=g,
            kept=k,
            epochs=mu,
            prompt_tokens=prompt_tokens,
            completion_tokens=c,
            beta=self.beta,
            old_logprobs=old,
            prefix_cache=self._prefix_cache,
        )
        # the reward functions and reward modules, priced on a worst-case batch of what they see
        reward = self._reward_ceiling(prompt, prompt_tokens, rows)
        return round_price(self.ledger, step, reward, source)

    # --- the budget stop ----------------------------------------------------------------------
    def _stops_before_next_step(self, round_complete: bool) -> bool:
        """At the end of an optimizer step, whether the budget stops the run here: when what comes next
        (:meth:`next_price`) could take the useful C_total past the budget. The price is kept in
        :attr:`next_price`, so a callback can ask the same question of another budget (the budget
        points of :mod:`paper_repro.curves`, evaluated along a run)."""
        self.next_price = self._price_of_next(round_complete)
        if self.ledger.config.budget_flops is None or self.next_price is None:
            return False
        return self.ledger.stop_before(*self.next_price)

    def _price_of_next(self, round_complete: bool) -> tuple[float, str] | None:
        """The useful FLOPs that what comes after this optimizer step could cost, and what it is, under
        ``LedgerConfig.budget_stop`` (docs/ledger.md, the budget contract); None where the stop rule
        asks nothing here. It does not depend on the budget:

        * ``"step"``: the next optimizer step. A step inside a round runs loss passes over rollouts
          already in TRL's buffer, priced exactly (useful FLOPs) from their masks; a step that starts
          a round is priced at the round's ceiling less the loss passes of the round's other steps.
          The total never passes the budget;
        * ``"round"``: at the end of a round only, the next round at its ceiling;
        * ``"overshoot"``: at the end of a round only, the next round priced as the dearest so far.
        """
        ledger = self.ledger
        mode = ledger.config.budget_stop
        if mode == "step":
            return self._next_step_price()
        if not round_complete or not ledger.rounds:
            return None
        ceiling = self._round_ceiling_price() if mode == "round" else None
        if ceiling:
            return ceiling, f"the next round, at its ceiling{self._ceiling_source()},"
        return max(ledger.rounds), "the next round, priced as the dearest so far,"

    def _round_ceiling_price(self) -> float | None:
        """The most a whole round can cost: the user's ``round_ceiling_flops``, else the trainer's own
        price (:meth:`price_round_ceiling`), else None (the stop then estimates)."""
        given = self.ledger.config.round_ceiling_flops
        if given is not None:
            return self.ledger.round_ceiling(given)  # raised to the dearest finished round, if dearer
        return None if self.round_price is None else self.round_price["C_total"]

    def _next_step_price(self) -> tuple[float, str]:
        """Useful FLOPs the next optimizer step can cost (summed over processes), and what it is."""
        args = self.args
        per_round = args.steps_per_generation * self.num_iterations  # micro-batches of one round
        start = self._step  # TRL's micro-batch counter
        local, new_round_micro = 0.0, 0
        for j in range(start, start + self.current_gradient_accumulation_steps):
            if new_round_micro or j % per_round == 0 or self._buffered_inputs is None:
                new_round_micro += 1
            else:
                local += self._buffered_loss_price(self._buffered_inputs[j % args.steps_per_generation])
        if self.accelerator.num_processes > 1:
            local = float(self.accelerator.reduce(torch.tensor(local, device=self.accelerator.device), "sum"))
        if not new_round_micro:
            return local, "the next optimizer step (loss passes over rollouts already generated)"
        return local + self._round_start_price(new_round_micro, per_round), (
            f"the next optimizer step, which starts a generation round{self._ceiling_source()},"
        )

    def _ceiling_source(self) -> str:
        """Where the round ceiling a stop is priced at comes from, in words for the stop line."""
        if self.ledger.config.round_ceiling_flops is not None:
            return " (its ceiling: LedgerConfig.round_ceiling_flops)"
        if self.round_price is not None:
            return f" (its ceiling priced with {self.round_price['prompt_source']})"
        return " (no ceiling could be priced: the dearest round so far)"

    def _round_start_price(self, micro_batches: int, per_round: int) -> float:
        """The most the opening of a round can cost: generation, rewards, the old-policy and reference
        forwards, and the loss passes of its first ``micro_batches`` of ``per_round`` micro-batches."""
        given = self.ledger.config.round_ceiling_flops
        if given is not None:
            # the whole round's ceiling (raised to the dearest finished round, if dearer): a bound on any
            # part of it
            return self.ledger.round_ceiling(given)
        if self.round_price is not None:
            price = self.round_price
            return price["C_total"] - price["C_loss"] * (1 - micro_batches / per_round)
        # no ceiling could be priced (warned at construction): the dearest round so far, an estimate
        return max(self.ledger.rounds, default=0.0)

    def _buffered_loss_price(self, batch: dict[str, Any]) -> float:
        """Useful FLOPs of the loss pass over one buffered micro-batch, as the ledger will charge it."""
        mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        work = forward_pass_work(mask, batch["completion_ids"].size(1), compact_head=True)
        return self.ledger.training_pass_flops(work["useful"])

    def _prompt_for_pricing(self) -> tuple[Any, int, str] | None:
        """The prompt a round's ceiling is priced with, its tokens, and where its length comes from:
        ``LedgerConfig.max_prompt_tokens`` when declared; else the train dataset's longest prompt (a
        map-style dataset, read once); else the config's ``max_prompt_length`` (TRL releases that
        truncate prompts); else the longest prompt seen so far in training (an iterable dataset, which
        is never read ahead); None before any is seen."""
        declared = self.ledger.config.max_prompt_tokens
        limit = getattr(self.args, "max_prompt_length", None)
        if self._priced_from_seen:
            pass  # a prompt outgrew the length it was priced with
        elif declared is not None:
            return (
                self._filler_prompt(declared),
                declared,
                f"LedgerConfig.max_prompt_tokens ({declared} tokens)",
            )
        elif (longest := self._longest_prompt()) is not None:
            prompt, tokens = longest
            return prompt, tokens, f"the train dataset's longest prompt ({tokens} tokens)"
        elif limit:
            return self._filler_prompt(limit), limit, f"max_prompt_length ({limit} tokens)"
        if self._longest_seen is not None:
            prompt, tokens = self._longest_seen
            return (
                prompt,
                tokens,
                f"the longest prompt seen so far ({tokens} tokens; an iterable dataset: an estimate)",
            )
        return None

    # the longest prompt of the rollouts so far (its text and tokens), and whether the round's ceiling
    # is priced with it (an iterable dataset, or a prompt past the declared length)
    _longest_seen: tuple[Any, int] | None = None
    _priced_from_seen: bool = False

    def _set_round_price(self, price: dict[str, Any] | None) -> None:
        self.round_price = price
        self.ledger.prompt_length_source = None if price is None else price["prompt_source"]

    def _see_prompts(self, prompt_ids: list[list[int]]) -> None:
        """After a generation in training: re-price the round's ceiling when a prompt is longer than
        the one it was priced with (the longest seen so far on an iterable dataset; a prompt past a
        declared ``max_prompt_tokens`` or ``max_prompt_length`` also warns: the guarantee is broken)."""
        config = self.ledger.config
        if config.budget_flops is None or config.round_ceiling_flops is not None or not prompt_ids:
            return
        row = max(prompt_ids, key=len)
        if self._longest_seen is not None and len(row) <= self._longest_seen[1]:
            return
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        self._longest_seen = (tokenizer.decode(row, skip_special_tokens=True), len(row))
        priced = self.round_price
        if priced is not None and len(row) <= priced["prompt_tokens"]:
            return
        if priced is not None:
            warnings.warn(
                f"a prompt of {len(row)} tokens is longer than the round's ceiling was priced with "
                f"({priced['prompt_source']}): the budget's guarantee no longer holds; the ceiling is "
                "priced again with the longest prompt seen so far",
                BudgetWarning,
                stacklevel=3,
            )
        self._priced_from_seen = True
        self._set_round_price(self.price_round_ceiling())

    def _filler_prompt(self, tokens: int) -> str:
        """A text prompt of ``tokens`` ordinary tokens, for pricing reward functions at a declared
        prompt length."""
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        return tokenizer.decode([self._ordinary_token(tokenizer)] * tokens)

    @staticmethod
    def _ordinary_token(tokenizer: Any) -> int:
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        return next(i for i in range(len(tokenizer)) if i not in special)

    def _longest_prompt(self) -> tuple[Any, int] | None:
        """The train dataset's longest prompt and its tokens as TRL tokenizes it, or None. Only a
        map-style dataset is read: an iterable one (``datasets.IterableDataset``, a torch
        ``IterableDataset``, a stream, possibly endless) never."""
        dataset = self.train_dataset
        if (
            dataset is None
            or isinstance(dataset, torch.utils.data.IterableDataset)
            or not hasattr(dataset, "__len__")
        ):
            return None
        from datasets import IterableDataset

        if isinstance(dataset, IterableDataset):
            return None
        try:
            prompts = list(dataset["prompt"])
        except Exception:  # no prompt column
            return None
        if not prompts:
            return None
        best, best_len = None, -1
        for start in range(0, len(prompts), 1024):
            chunk = prompts[start : start + 1024]
            ids = self._tokenize_prompts(chunk)[0]
            for prompt, row in zip(chunk, ids, strict=True):
                if len(row) > best_len:
                    best, best_len = prompt, len(row)
        return best, best_len

    def _reward_ceiling(self, prompt: Any, prompt_tokens: int, rows: int) -> float:
        """Useful FLOPs of the reward functions on ``rows`` worst-case completions (see
        :meth:`price_round_ceiling`)."""
        c = self.args.max_completion_length
        total = 0.0
        completions = completion_ids = None
        for func in self.reward_funcs:
            if isinstance(func, torch.nn.Module):
                cost = self.reward_model_costs[func]
                total += rows * flops.forward_flops(cost, flops.sequence_work(prompt_tokens + c))
                continue
            cost_fn = getattr(func, "flop_cost", None)
            if cost_fn is None:
                continue
            if completions is None:
                completions, completion_ids = self._worst_completions(prompt, rows)
            name = getattr(func, "__name__", func)
            try:
                cost = cost_fn(
                    prompts=[prompt] * rows, completions=completions, completion_ids=completion_ids
                )
            except Exception as err:  # a cost model that cannot read a synthetic completion
                warnings.warn(
                    f"could not price reward {name!r} on a worst-case batch "
                    f"({type(err).__name__}: {err}); the round ceiling leaves it out",
                    stacklevel=4,
                )
                continue
            total += as_conventions(cost, f"reward function {name!r}'s flop_cost (on a worst-case batch)")[
                "useful"
            ]
        return total

    def _worst_completions(self, prompt: Any, rows: int) -> tuple[list[Any], list[list[int]]]:
        """``rows`` completions of ``max_completion_length`` tokens (one ordinary token repeated), as
        TRL hands them to reward functions: text, or an assistant turn for conversational prompts."""
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        ids = [self._ordinary_token(tokenizer)] * self.args.max_completion_length
        text = tokenizer.decode(ids)
        conversational = isinstance(prompt, list)
        completion = [{"role": "assistant", "content": text}] if conversational else text
        return [completion] * rows, [list(ids) for _ in range(rows)]
