"""Pricing the costliest generation round before any compute, to refuse a budget that cannot buy one.

:class:`RoundPricing` is a mixin of :class:`~paper_repro.ledger.trainer.LedgerGRPOTrainer`.
:meth:`RoundPricing.price_round_ceiling` prices, with the analytic FLOP model, the most one round can
cost from what the trainer sees: its batch layout, the train dataset's longest prompt tokenized as TRL
tokenizes it, every completion at ``max_completion_length``, and the reward models and the reward
functions' ``flop_cost`` on a worst-case batch. At construction the trainer refuses a budget below one
round: below the user's ``first_round_flops`` / ``round_ceiling_flops`` when given, else below this
price.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from paper_repro import flops
from paper_repro.flops import GRPOStep, ModelShape
from paper_repro.ledger.core import as_conventions


class RoundPricing:
    """Prices the costliest generation round and refuses a budget below one round (a mixin of
    :class:`~paper_repro.ledger.trainer.LedgerGRPOTrainer`, which sets ``ledger``, ``_kept``,
    ``_prefix_cache`` and ``round_price``)."""

    def _check_first_round(self) -> None:
        """Refuse a budget below one round before any compute: against the user's
        ``first_round_flops`` / ``round_ceiling_flops`` when given, else against the ceiling the
        trainer prices itself (:meth:`price_round_ceiling`)."""
        config = self.ledger.config
        budget, first, ceiling = config.budget_flops, config.first_round_flops, config.round_ceiling_flops
        if budget is not None and first is None and ceiling is None:
            self.round_price = self.price_round_ceiling()
            if self.round_price is not None and self.round_price["C_total"] > budget:
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
        if budget is not None and ceiling is not None and ceiling > budget:
            raise ValueError(
                f"budget {budget:.3g} FLOPs does not surely buy one generation round: the costliest "
                f"round (every completion at the maximum length) needs {ceiling:.3g}"
            )

    def price_round_ceiling(self) -> dict[str, Any] | None:
        """The most one generation round can cost (useful FLOPs), priced with the analytic FLOP model
        (:func:`paper_repro.flops.grpo_step_cost`) from what the trainer sees, before any compute:

        * the batch layout: a round is ``per_device_train_batch_size x steps_per_generation x world
          size`` rows, P = rows / G prompts of G = ``num_generations`` completions, K kept
          (``LedgerConfig.kept``), mu = ``num_iterations`` update epochs;
        * the longest prompt of the train dataset, tokenized as TRL tokenizes it
          (``_tokenize_prompts``: through the chat template for conversational prompts), and every
          completion at ``max_completion_length``;
        * the policy's shape from its config, LoRA from its PEFT adapters, gradient checkpointing;
          the old-policy forward by TRL's rule (mu > 1, or vLLM importance sampling), the reference
          forward when beta != 0 (priced with the adapters on: a bound), prefix caching as counted;
        * reward models (``nn.Module``) from their config, one forward over the longest prompt plus
          ``max_completion_length`` tokens per completion (assumes the reward tokenizer splits no
          finer than the policy's); reward functions with ``flop_cost`` by calling it on a worst-case
          batch: the longest prompt and a ``max_completion_length`` completion of one repeated
          ordinary token in each of the P x G rows. A function without ``flop_cost`` costs 0.

        Returns the priced round (``C_*``, ``rho`` and the layout), or None, with a warning, when the
        train dataset's prompts cannot be read (an iterable dataset): then nothing is refused."""
        args = self.args
        world = self.accelerator.num_processes
        rows = args.per_device_train_batch_size * args.steps_per_generation * world
        g, k, mu = self.num_generations, self._kept, self.num_iterations
        longest = self._longest_prompt()
        if longest is None:
            warnings.warn(
                "the FLOP ledger cannot read the train dataset's prompts to price a round: the budget is "
                "not checked before training; pass round_ceiling_flops",
                stacklevel=3,
            )
            return None
        prompt, prompt_tokens = longest
        c = args.max_completion_length
        old = args.gradient_accumulation_steps % (args.steps_per_generation * mu) != 0 or bool(
            self.use_vllm and self.vllm_importance_sampling_correction
        )
        step = GRPOStep(
            prompts=rows // g, generations=g, kept=k, epochs=mu, prompt_tokens=prompt_tokens,
            completion_tokens=c, beta=self.beta, old_logprobs=old, prefix_cache=self._prefix_cache,
        )  # fmt: skip
        cost = flops.grpo_step_cost(self.ledger.policy, step, train=self.ledger.train)
        reward = self._reward_ceiling(prompt, prompt_tokens, rows)
        total = cost.C_total + reward
        return {
            "C_search": float(cost.C_search), "C_learning": float(cost.C_learning),
            "C_reward": float(reward), "C_total": float(total),
            "rho": cost.C_learning / total if total > 0 else float("nan"),
            "P": rows // g, "G": g, "K": k, "mu": mu, "rows": rows,
            "prompt_tokens": prompt_tokens, "completion_tokens": c,
        }  # fmt: skip

    def _longest_prompt(self) -> tuple[Any, int] | None:
        """The train dataset's longest prompt and its tokens as TRL tokenizes it, or None."""
        dataset = self.train_dataset
        try:
            prompts = list(dataset["prompt"])
        except Exception:  # no dataset, an iterable one, or no prompt column
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
                shape = ModelShape.from_config(func.config)
                total += rows * flops.forward_flops(shape, flops.sequence_work(prompt_tokens + c))
                continue
            cost_fn = getattr(func, "flop_cost", None)
            if cost_fn is None:
                continue
            if completions is None:
                completions, completion_ids = self._worst_completions(prompt, rows)
            try:
                cost = cost_fn(
                    prompts=[prompt] * rows, completions=completions, completion_ids=completion_ids
                )
                total += as_conventions(cost)["useful"]
            except Exception as err:  # a cost model that cannot read a synthetic completion
                warnings.warn(
                    f"could not price reward {getattr(func, '__name__', func)!r} on a worst-case batch "
                    f"({type(err).__name__}: {err}); the round ceiling leaves it out",
                    stacklevel=4,
                )
        return total

    def _worst_completions(self, prompt: Any, rows: int) -> tuple[list[Any], list[list[int]]]:
        """``rows`` completions of ``max_completion_length`` tokens (one ordinary token repeated), as
        TRL hands them to reward functions: text, or an assistant turn for conversational prompts."""
        tokenizer = getattr(self.processing_class, "tokenizer", self.processing_class)
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        token = next(i for i in range(len(tokenizer)) if i not in special)
        ids = [token] * self.args.max_completion_length
        text = tokenizer.decode(ids)
        conversational = isinstance(prompt, list)
        completion = [{"role": "assistant", "content": text}] if conversational else text
        return [completion] * rows, [list(ids) for _ in range(rows)]
