"""Process reward models in the interface of Qwen2.5-Math-PRM: per-step scores read at separators.

A solution's steps are joined by the separator token (``<extra_0>``), one after each step; the model
returns two logits per position, and the softmax probability of class 1 ("step is right") at each
separator is that step's score in ``[0, 1]``. The PRM of the cpu-tiny testbed
(:mod:`paper_repro.testbed`) is a likelihood-reading PRM with exactly this interface
(:mod:`paper_repro.rewards.likelihood_prm`: its two outputs come from token log-likelihoods); a
plain ``Qwen2ForTokenClassification`` with two labels loads and scores the same way.

:class:`PRMScorer` runs either it or ``Qwen/Qwen2.5-Math-PRM-7B``. Its :meth:`~PRMScorer.flop_cost`
prices exactly the forward it runs (the same tokenisation, the same batches), which is what both
``prm`` and ``proxy_prm`` are charged. :func:`auroc` rates a PRM on step-labelled solutions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from paper_repro.accounting import flops

STEP_TOKEN = "<extra_0>"

QWEN_PRM_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


def prm_text(prompt: str, steps: Sequence[str], separator: str = STEP_TOKEN) -> str:
    """The PRM's input: the problem, then every step followed by the separator."""
    return prompt + "".join(f"{step}{separator}" for step in steps)


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve (Mann-Whitney U with tied ranks averaged); ``NaN`` if one class is
    absent."""
    scores = np.asarray(scores, dtype=float)
    labels = np.asarray(labels, dtype=bool)
    n_pos, n_neg = labels.sum(), (~labels).sum()
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    # average ranks over ties
    i = 0
    while i < len(scores):
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def aggregate(scores: Sequence[float], how: str) -> float:
    """One number per solution: the min or mean of its step scores; 0 for a solution with no steps."""
    scores = [s for s in scores if not math.isnan(s)]
    if not scores:
        return 0.0
    return min(scores) if how == "min" else sum(scores) / len(scores)


def plain_format(prompt: str, steps: Sequence[str]) -> str:
    """The tiny PRM's input: the problem, then each step followed by ``<extra_0>``."""
    return prm_text(prompt, steps)


def qwen_math_prm_format(tokenizer) -> Callable[[str, Sequence[str]], str]:
    """Qwen2.5-Math-PRM's input: its chat template with the question as the user turn and the steps,
    each followed by ``<extra_0>``, as the assistant turn (the model card's usage)."""

    def fmt(prompt: str, steps: Sequence[str]) -> str:
        messages = [
            {"role": "system", "content": QWEN_PRM_SYSTEM},
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": "".join(f"{s}{STEP_TOKEN}" for s in steps)},
        ]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)

    return fmt


def _config(local: Path) -> dict:
    return json.loads((Path(local) / "config.json").read_text())


def has_remote_code(local: Path) -> bool:
    """A checkpoint with its own modelling code: Qwen2.5-Math-PRM's ``Qwen2ForProcessRewardModel``
    or the testbed's likelihood PRM (:mod:`paper_repro.rewards.likelihood_prm`)."""
    config = _config(local)
    architectures = " ".join(config.get("architectures") or [])
    return "ProcessRewardModel" in architectures or "AutoModel" in config.get("auto_map", {})


def input_format(local: Path, tokenizer) -> Callable[[str, Sequence[str]], str]:
    """The text a PRM checkpoint reads: Qwen2.5-Math-PRM's chat form, or the testbed PRM's plain form."""
    architectures = " ".join(_config(local).get("architectures") or [])
    return qwen_math_prm_format(tokenizer) if "ProcessRewardModel" in architectures else plain_format


@dataclass
class PRMScorer:
    """Scores solutions step by step with a PRM and prices the forward passes it runs."""

    model: object
    tokenizer: object
    format: Callable[[str, Sequence[str]], str] = plain_format
    batch_size: int = 64
    max_length: int = 4096  # tokens per input; a runaway solution's tail beyond it is not scored
    shape: flops.ModelShape = field(init=False)

    def __post_init__(self) -> None:
        config = self.model.config.to_dict()
        if not config.get("architectures"):  # a model built in memory: its class names its head
            config["architectures"] = [type(self.model).__name__]
        self.shape = flops.ModelShape.from_config(config)
        self.separator = self.tokenizer.convert_tokens_to_ids(STEP_TOKEN)
        if self.separator is None or self.separator == self.tokenizer.unk_token_id:
            raise ValueError(f"the PRM tokenizer has no {STEP_TOKEN} token")

    @classmethod
    def load(cls, path: str | Path, model_kwargs: dict | None = None, **kwargs) -> PRMScorer:
        """A local checkpoint or a hub id at a revision (``Qwen/Qwen2.5-Math-PRM-7B@<commit>``). A
        checkpoint with its own modelling code (Qwen2.5-Math-PRM, the testbed's likelihood PRM) loads
        through it, from a local folder or a hub commit only (:func:`paper_repro.models.checkpoint`
        refuses a hub branch, tag or no revision). ``model_kwargs`` go to ``from_pretrained``
        (``dtype``, ``device_map``)."""
        model_kwargs = model_kwargs or {}
        from transformers import AutoModel, AutoModelForTokenClassification, AutoTokenizer

        from paper_repro import models

        local = models.checkpoint(path)
        trust = models.trust_remote_code(path)
        tokenizer = AutoTokenizer.from_pretrained(local, trust_remote_code=trust)
        if has_remote_code(local):
            # Qwen2.5-Math-PRM and the testbed PRM ship their own modelling code. Their configs say
            # model_type "qwen2", so AutoModelForTokenClassification would load them too, with a
            # freshly initialised head.
            model = AutoModel.from_pretrained(local, trust_remote_code=trust, **model_kwargs)
        else:
            model = AutoModelForTokenClassification.from_pretrained(local, **model_kwargs)
        model.eval()
        fmt = input_format(local, tokenizer)
        return cls(model, tokenizer, kwargs.pop("format", fmt), **kwargs)

    def _encode(self, prompts: Sequence[str], steps: Sequence[Sequence[str]]) -> list[list[int]]:
        texts = [self.format(p, s) for p, s in zip(prompts, steps, strict=True)]
        ids = self.tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
        # keep the first max_length tokens: the prompt and the first steps of a runaway completion
        return [row[: self.max_length] for row in ids]

    def lengths(self, prompts: Sequence[str], steps: Sequence[Sequence[str]]) -> list[int]:
        """The tokens the PRM reads for each solution (what :meth:`step_scores` runs it over)."""
        return [len(r) for r in self._encode(prompts, steps)]

    def step_scores(self, prompts: Sequence[str], steps: Sequence[Sequence[str]]) -> list[list[float]]:
        """P(step right) at each separator of each solution; [] for a solution without steps."""
        import torch

        encoded = self._encode(prompts, steps)
        out: list[list[float]] = []
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        with torch.inference_mode():
            for start in range(0, len(encoded), self.batch_size):
                rows = encoded[start : start + self.batch_size]
                width = max(len(r) for r in rows)
                ids = torch.full((len(rows), width), pad, dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for i, r in enumerate(rows):  # left padding, as the PRM's positions expect
                    ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
                    mask[i, width - len(r) :] = 1
                device = next(self.model.parameters()).device
                result = self.model(input_ids=ids.to(device), attention_mask=mask.to(device))
                logits = result.logits if hasattr(result, "logits") else result[0]
                probs = torch.softmax(logits.float(), dim=-1)[..., 1]
                probs = probs.cpu()
                is_sep = (ids == self.separator) & mask.bool()
                out.extend(p[m].tolist() for p, m in zip(probs, is_sep, strict=True))
        return out

    def flop_cost(self, prompts: Sequence[str], steps: Sequence[Sequence[str]]) -> dict[str, float]:
        """FLOPs of :meth:`step_scores` on these inputs: ``useful`` over real tokens (causal),
        ``executed`` over the padded batches it runs."""
        lengths = self.lengths(prompts, steps)
        useful = sum((flops.sequence_work(n) for n in lengths), flops.Work())
        executed = flops.Work()
        for start in range(0, len(lengths), self.batch_size):
            rows = lengths[start : start + self.batch_size]
            executed = executed + flops.padded_batch_work(len(rows), max(rows), len(rows) * max(rows))
        return {
            "useful": flops.forward_flops(self.shape, useful),
            "executed": flops.forward_flops(self.shape, executed),
        }
