"""The model hooks of :class:`~paper_repro.ledger.callback.FlopLedgerCallback`: what sees the passes.

:class:`PassWatcher`, a mixin of the callback, owns every hook the callback installs on the models and
the work it counts from them (the callback's module docstring says what each pass is charged):

* the ``generate`` / ``generate_batch`` wrapper on the policy instance (C_search: its wall time, the
  executed work its prefill and decode forwards ran, the useful work read from its output, and the
  ``(prompt, completion)`` tokens of the round's rows, :attr:`_round_rows`, which the callback's budget
  stop reads and resets through :attr:`_new_round`);
* the forward pre/post hooks on the policy and the pre-hook on its LM head (C_learning: loss,
  old-policy and reference forwards, their useful and executed work from mask and labels);
* the global forward hooks on every other ``transformers.PreTrainedModel`` (``watch_models``: a
  separate reference model, reward models, C_reward priced by
  :func:`~paper_repro.ledger.cost_models.reward_model_cost`);
* installing and removing all of them (:meth:`_install`, :meth:`_remove_hooks`) and the CUDA sync
  that brackets timed work (:meth:`_sync`).

The host (the callback) sets :attr:`ledger`, :attr:`_policy`, :attr:`_device`, :attr:`_lora_layer` and
:attr:`_policy_ids` in ``on_train_begin`` and sets :attr:`_busy` while it prices the policy. Like the
callback, it touches no private TRL name (``paper_repro.ledger.callback.PRIVATE_TRL_NAMES``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from paper_repro.accounting import flops
from paper_repro.accounting.flops import Work
from paper_repro.ledger.core import FlopLedger, generation_pass_work, real_rows_work
from paper_repro.ledger.cost_models import check_priced, reward_model_cost

# what torch passes for the output to an always_call global hook when the forward raised (it then
# calls the hook as hook(module, args, result), without the kwargs)
_RAISED = object()


@dataclass
class _Call:
    """One policy forward in flight: what the pre-hook read, the head positions the LM head ran."""

    rows: int
    width: int
    keys: int
    mask: torch.Tensor | None
    labels: torch.Tensor | None
    fused: bool
    grad: bool
    head: int = 0


def _kwarg(args: tuple, kwargs: dict, name: str, position: int | None = None) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[position] if position is not None and len(args) > position else None


def _base(model: Any) -> Any:
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _compact_head(device: torch.device) -> bool:
    """Whether TRL's fused head scores only the labelled positions (its Triton path)."""
    from transformers.utils import is_triton_available

    return device.type in ("cuda", "xpu") and is_triton_available()


def _first_eos_lengths(completions: torch.Tensor, eos: Any) -> list[int]:
    """Each row's completion length up to and including its first EOS (the whole width without one)."""
    width = completions.size(1)
    if eos is None or width == 0:
        return [width] * completions.size(0)
    eos_ids = torch.tensor([eos] if isinstance(eos, int) else list(eos), device=completions.device)
    is_eos = torch.isin(completions, eos_ids)
    first = torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1) + 1, width)
    return first.tolist()


class PassWatcher:
    """The hooks that see a run's passes and charge them to :attr:`ledger` (module docstring)."""

    ledger: FlopLedger | None

    def _init_watch(self, watch_models: bool) -> None:
        """The hooks' state, none installed; ``watch_models``: also hook models other than the policy."""
        self.watch_models = watch_models
        self.ledger = None
        self._handles: list[Any] = []
        self._restore: list[tuple[Any, str, Any]] = []
        self._policy: Any = None
        self._lora_layer: Any = None
        self._call: _Call | None = None
        self._in_generate = False
        self._gen_executed = Work()
        self._foreign: Any = None
        self._foreign_start = 0.0
        self._is_model_type: dict[type, bool] = {}
        self._policy_ids: set[int] = set()
        self._reward_costs: dict[int, Any] = {}
        self._busy = False  # pricing a model (a measurement runs it): its calls are not charged
        self._round_rows: list[tuple[int, int]] = []  # (prompt, completion) tokens of this round's rows
        self._new_round = True
        self._device: torch.device | None = None

    # --- installing ----------------------------------------------------------------------------
    def _install(self, model: Any) -> None:
        base = _base(model)
        self._handles.append(base.register_forward_pre_hook(self._policy_pre, with_kwargs=True))
        self._handles.append(base.register_forward_hook(self._policy_post, always_call=True))
        head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
        if isinstance(head, torch.nn.Module):
            self._handles.append(head.register_forward_pre_hook(self._head_pre))
        for name in ("generate", "generate_batch"):
            if hasattr(base, name):
                self._wrap_method(base, name)
        if self.watch_models:
            from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

            self._handles.append(register_module_forward_pre_hook(self._global_pre))
            self._handles.append(
                register_module_forward_hook(self._global_post, with_kwargs=True, always_call=True)
            )

    def _wrap_method(self, obj: Any, name: str) -> None:
        original = getattr(obj, name)
        had_own = name in vars(obj)
        wrapper = self._generate_wrapper(original, batched=name == "generate_batch")
        setattr(obj, name, wrapper)
        self._restore.append((obj, name, original if had_own else None))

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        for obj, name, previous in reversed(self._restore):
            if previous is None:
                vars(obj).pop(name, None)
            else:
                setattr(obj, name, previous)
        self._restore = []
        self._call = self._foreign = None
        self._in_generate = False

    # --- generation ----------------------------------------------------------------------------
    def _generate_wrapper(self, original: Callable[..., Any], batched: bool) -> Callable[..., Any]:
        @functools.wraps(original)
        def generate(*args: Any, **kwargs: Any) -> Any:
            if self._in_generate or self.ledger is None or not self._policy.training:
                return original(*args, **kwargs)
            self._sync()
            start = time.perf_counter()
            self._in_generate, self._gen_executed = True, Work()
            try:
                out = original(*args, **kwargs)
            finally:
                self._in_generate = False
            self._sync()
            self.ledger.add_seconds("search", time.perf_counter() - start)
            if batched:
                self._charge_batched_generation(args, kwargs, out)
            else:
                self._charge_generation(args, kwargs, out)
            return out

        return generate

    def _charge_generation(self, args: tuple, kwargs: dict, out: Any) -> None:
        ids = _kwarg(args, kwargs, "input_ids", 0)
        if not isinstance(ids, torch.Tensor):  # inputs_embeds only: nothing to count from
            return
        mask = kwargs.get("attention_mask")
        width = ids.size(1)
        p_lens = mask.sum(dim=1).tolist() if mask is not None else [width] * ids.size(0)
        sequences = getattr(out, "sequences", out)
        config = kwargs.get("generation_config") or getattr(_base(self._policy), "generation_config", None)
        c_lens = _first_eos_lengths(sequences[:, width:], getattr(config, "eos_token_id", None))
        useful = generation_pass_work(p_lens, c_lens, 1, prefix_cache=False, padded=False)["useful"]
        self._charge_rollouts(p_lens, c_lens, {"useful": useful, "executed": self._gen_executed})

    def _charge_batched_generation(self, args: tuple, kwargs: dict, out: Any) -> None:
        """Continuous batching: no padded batch to count; useful = executed from the token counts."""
        outputs = list(out.values()) if isinstance(out, dict) else []
        p_lens = [len(o.prompt_ids) for o in outputs]
        c_lens = [len(o.generated_tokens) for o in outputs]
        work = generation_pass_work(p_lens, c_lens, 1, prefix_cache=False, padded=False)
        self._charge_rollouts(p_lens, c_lens, work)

    def _charge_rollouts(self, p_lens: list[int], c_lens: list[int], work: dict[str, Work]) -> None:
        self.ledger.charge_generation(work, adapters_active=self._adapters_active())
        self.ledger.count(
            gen_rows=len(p_lens),
            gen_prompt_tokens=sum(p_lens),
            gen_completion_tokens=sum(c_lens),
            gen_executed_tokens=work["executed"].tokens,
        )
        if self._new_round:
            self._round_rows, self._new_round = [], False
        self._round_rows += list(zip(p_lens, c_lens, strict=True))

    # --- policy forwards -----------------------------------------------------------------------
    def _policy_pre(self, module: Any, args: tuple, kwargs: dict) -> None:
        if self._call is not None or self._busy or self.ledger is None or not self._policy.training:
            return
        ids = _kwarg(args, kwargs, "input_ids", 0)
        embeds = kwargs.get("inputs_embeds")
        if isinstance(ids, torch.Tensor):
            rows, width = ids.shape[:2]
        elif isinstance(embeds, torch.Tensor):
            rows, width = embeds.shape[:2]
        else:
            return
        mask = kwargs.get("attention_mask")
        if isinstance(mask, torch.Tensor) and mask.dim() in (2, 4):
            keys = mask.size(-1)
        else:
            # no mask (no padding): every cached key ("cache" in transformers 5, "past_key_values" before)
            mask, past = None, kwargs.get("cache", kwargs.get("past_key_values"))
            keys = width + (int(past.get_seq_length()) if hasattr(past, "get_seq_length") else 0)
        labels = kwargs.get("shift_labels")
        if labels is None and isinstance(kwargs.get("labels"), torch.Tensor):
            labels = kwargs["labels"][:, 1:]
        self._call = _Call(
            rows=int(rows),
            width=int(width),
            keys=int(keys),
            mask=mask if mask is not None and mask.dim() == 2 else None,
            labels=labels,
            fused=bool(kwargs.get("fused_lm_head", False)),
            grad=torch.is_grad_enabled(),
        )

    def _head_pre(self, module: Any, args: tuple) -> None:
        if self._call is not None and args and isinstance(args[0], torch.Tensor):
            x = args[0]
            self._call.head += x.numel() // max(x.size(-1), 1)

    def _policy_post(self, module: Any, args: tuple, output: Any) -> None:
        call, self._call = self._call, None
        if call is None or self.ledger is None:
            return
        if self._in_generate:
            self._gen_executed = self._gen_executed + Work(
                call.rows * call.width, call.rows * call.width * call.keys, call.head
            )
            return
        work = self._forward_work(call)
        ledger = self.ledger
        if call.grad:  # the loss pass: its backward follows
            # TRL's fused head recomputes its logits in backward; a head run as a module (TRL before
            # 1.14's fused head) keeps them: the executed count has no recompute, useful is the planner's
            executed_train = None if call.fused else replace(ledger.train, head_recompute=False)
            ledger.charge_training_pass(work, executed_train)
            ledger.count(
                loss_rows=call.rows,
                loss_tokens=work["useful"].tokens,
                loss_executed_tokens=work["executed"].tokens,
            )
        else:  # old-policy or reference log-probs
            part, adapters = self._no_grad_role()
            ledger.charge_forward(work, adapters_active=adapters, part=part)
            ledger.count(**{f"{part}_forward_rows": call.rows})

    def _forward_work(self, call: _Call) -> dict[str, Work]:
        """Useful and executed work of a full-sequence forward (keys = width), from its mask and labels."""
        rows, width = call.rows, call.width
        if call.fused and call.labels is not None:
            head_useful = int((call.labels != -100).sum())
            head_executed = head_useful if _compact_head(call.labels.device) else rows * (width - 1)
        else:  # the head ran as a module, on the last `per_row` positions of each row
            head_executed = call.head
            per_row = head_executed // rows if rows else 0
            if call.mask is not None and 0 < per_row <= width:
                # useful: a real position scoring a real next token
                low = width - per_row
                head_useful = int((call.mask[:, low : width - 1] * call.mask[:, low + 1 :]).sum())
            else:
                head_useful = head_executed
        if call.mask is not None:
            useful = real_rows_work(call.mask, head_useful)
        else:
            useful = Work(rows * width, rows * flops.causal_pairs(width), head_useful)
        executed = Work(rows * width, rows * width * call.keys, head_executed)
        return {"useful": useful, "executed": executed}

    def _adapters_active(self) -> bool:
        layer = self._lora_layer
        return layer is not None and not layer.disable_adapters

    def _no_grad_role(self) -> tuple[str, bool]:
        """("old" or "ref", adapters active) of a no-grad policy forward in training."""
        layer = self._lora_layer
        if layer is None:
            return "old", False
        if layer.disable_adapters:
            return "ref", False
        return ("ref" if "ref" in layer.active_adapters else "old"), True

    # --- other models (global hooks) -----------------------------------------------------------
    def _is_model(self, module: Any) -> bool:
        kind = type(module)
        known = self._is_model_type.get(kind)
        if known is None:
            from transformers import PreTrainedModel

            known = self._is_model_type[kind] = isinstance(module, PreTrainedModel)
        return known

    def _global_pre(self, module: Any, args: tuple) -> None:
        if self._foreign is not None or self._busy or self._in_generate or not self._is_model(module):
            return
        if id(module) in self._policy_ids or self.ledger is None or not self._policy.training:
            return
        self._foreign = module
        self._sync()
        self._foreign_start = time.perf_counter()

    def _global_post(self, module: Any, args: tuple, kwargs: Any, output: Any = _RAISED) -> None:
        if module is not self._foreign:
            return
        self._foreign = None
        if output is _RAISED:  # the forward raised: torch calls an always_call hook without its kwargs
            return
        ids = _kwarg(args, kwargs, "input_ids", 0)
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2:
            return
        mask = kwargs.get("attention_mask")
        mask = mask if isinstance(mask, torch.Tensor) and mask.dim() == 2 else torch.ones_like(ids)
        rows, width = ids.shape
        if kwargs.get("fused_lm_head"):  # a log-prob forward of another model: the reference model
            labels = kwargs.get("shift_labels")
            if labels is None and isinstance(kwargs.get("labels"), torch.Tensor):
                labels = kwargs["labels"][:, 1:]
            call = _Call(rows, width, width, mask, labels, fused=True, grad=False)
            self.ledger.charge_forward(self._forward_work(call), adapters_active=False, part="ref")
            self.ledger.count(ref_forward_rows=rows)
            return
        cost = self._reward_cost(module)
        useful = real_rows_work(mask)
        executed = flops.padded_batch_work(rows, width, rows * width)
        self.ledger.charge(
            "reward",
            {c: flops.forward_flops(cost, w) for c, w in (("useful", useful), ("executed", executed))},
        )
        self.ledger.count(reward_tokens=useful.tokens)
        self._sync()
        self.ledger.add_seconds("reward", time.perf_counter() - self._foreign_start)

    def _reward_cost(self, module: Any) -> Any:
        cost = self._reward_costs.get(id(module))
        if cost is None:
            self._busy = True  # a measured model runs here: its calls are not charged
            try:
                cost = self._reward_costs[id(module)] = reward_model_cost(module)
            finally:
                self._busy = False
            check_priced({f"reward model {type(module).__name__}": cost}, None)
        return cost

    # --- timing --------------------------------------------------------------------------------
    def _sync(self) -> None:
        device = self._device
        if device is not None and getattr(device, "type", None) == "cuda" and torch.cuda.is_available():
            torch.cuda.synchronize()
