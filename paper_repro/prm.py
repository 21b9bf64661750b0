"""Process reward models in the interface of Qwen2.5-Math-PRM: per-step scores read at separators.

A solution's steps are joined by the separator token (``<extra_0>``), one after each step; the model
returns two logits per position, and the softmax probability of class 1 at each separator is that
step's score in ``[0, 1]``. The tiny PRM of the cpu-tiny profile (:mod:`paper_repro.embedded`) is a
``Qwen2ForTokenClassification`` with exactly this interface; :class:`paper_repro.rewards.prm.PRMScorer`
runs either. This module holds the input format and the AUROC used to rate a PRM.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

STEP_TOKEN = "<extra_0>"


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
