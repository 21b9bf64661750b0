"""A likelihood-reading process reward model: the cpu-tiny PRM's modelling code.

``Qwen2LikelihoodPRM`` is a Qwen2 causal LM trained (by :func:`paper_repro.testbed.train_prm`) on
step-labelled solutions with the language-model loss on the *right* steps only, so it learns what a
right next step looks like, including after an earlier slip (the step checker judges each step on
the value the solution holds). It scores a step by how much it expected it: the probability of the
step's least likely token, its closing separator included,

    score(step k) = exp(min over the tokens t of step k of log p(t | everything before t)),

a generative PRM in the sense of implicit / generative PRMs, which read step quality off token
likelihoods (here without a reference model: the LM is trained on right steps only, so there is no
base likelihood to subtract).

It keeps the interface of Qwen2.5-Math-PRM and of the study's :class:`~paper_repro.rewards.
prm_scorer.PRMScorer`: steps joined by ``<extra_0>``, one after each step, and two logits per
position whose class-1 softmax at a separator is that step's score. At other positions the logits
carry the score of the step so far. A step starts after the previous separator; the first one after
the problem's last ``problem_end_token_id`` (the newline that ends an arith prompt).

This file is self-contained (torch and transformers only): ``save_pretrained`` copies it next to the
weights, and the checkpoint loads with ``AutoModel.from_pretrained(path, trust_remote_code=True)``,
as Qwen2.5-Math-PRM's own checkpoint does.
"""

from __future__ import annotations

import torch
from transformers import Qwen2ForCausalLM
from transformers.modeling_outputs import TokenClassifierOutput

_CLAMP = 1e-6  # keeps log(1 - p) finite when the PRM is certain


class Qwen2LikelihoodPRM(Qwen2ForCausalLM):
    """Step scores from token likelihoods under a Qwen2 LM; see the module docstring."""

    def forward(self, input_ids=None, attention_mask=None, labels=None, score=True, **kwargs):
        """``score=False`` (or ``labels`` given): the plain causal-LM output, for training.
        Otherwise a ``TokenClassifierOutput`` whose ``logits`` (batch, length, 2) give at every
        position log(1 - p) and log(p), p the probability of the step so far."""
        if labels is not None or not score:
            return super().forward(
                input_ids=input_ids, attention_mask=attention_mask, labels=labels, **kwargs
            )
        kwargs.setdefault("use_cache", False)  # one pass over whole inputs: no cache to keep
        out = super().forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        token_logp = next_token_logprobs(out.logits, input_ids)
        p = step_probabilities(
            token_logp, input_ids, self.config.step_token_id, self.config.problem_end_token_id
        )
        p = p.clamp(_CLAMP, 1 - _CLAMP)
        logits = torch.stack([torch.log1p(-p), torch.log(p)], dim=-1)
        return TokenClassifierOutput(logits=logits)


def next_token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """log p(token t | tokens before t) at every position t (0 at position 0, which has no context)."""
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    taken = logp.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    return torch.cat([taken.new_zeros(taken.shape[0], 1), taken], dim=1)


def step_probabilities(
    token_logp: torch.Tensor, input_ids: torch.Tensor, step_token_id: int, problem_end_token_id: int
) -> torch.Tensor:
    """exp of the running minimum of ``token_logp`` within each step, at every position.

    A step is the run of tokens after a boundary (a separator, or the problem's end token) up to and
    including the next boundary; the running minimum restarts after every boundary."""
    boundary = (input_ids == step_token_id) | (input_ids == problem_end_token_id)
    running = torch.empty_like(token_logp)
    current = token_logp.new_zeros(token_logp.shape[0])
    restart = torch.ones_like(current, dtype=torch.bool)
    for t in range(token_logp.shape[1]):  # tens of positions: a loop is clearer than a segmented scan
        current = torch.where(restart, token_logp[:, t], torch.minimum(current, token_logp[:, t]))
        running[:, t] = current
        restart = boundary[:, t]
    return running.exp()
