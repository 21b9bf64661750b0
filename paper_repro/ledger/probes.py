"""What dtype each phase of a run computed in, measured as it runs (the compute card's
``execution.compute_dtype_by_phase``).

The dtype a run's matmuls run in is not one number: under ``bf16`` autocast accelerate wraps the
prepared model's ``forward``, so the loss and log-prob forwards run in bfloat16, while TRL's HF
``generate`` path unwraps the model first and generates in the weights' dtype (fp32 weights: fp32).
:func:`install_dtype_probes` puts one forward hook on one ``nn.Linear`` of each model the run calls
(the first found in the policy, in the reference model if any, and in each ``nn.Module`` reward
model); each hook records the dtype of that Linear's output under the phase the trainer is in
(``trainer.ledger.phase``: ``search``, ``loss``, ``old``, ``ref``, ``reward``; None between them,
then nothing is recorded). A phase never run is absent, not guessed. Matmuls that bypass the
module's ``forward`` (vLLM, the ledger's lean and fused samplers, the fused update) are not seen:
:meth:`DtypeProbes.missing` says which phases ran without being seen, and why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from paper_repro.ledger.trainer import LedgerGRPOTrainer

PHASES = ("search", "loss", "old", "ref", "reward")
# The ledger's component each phase is part of.
PHASE_COMPONENT = {
    "search": "search",
    "loss": "learning",
    "old": "learning",
    "ref": "learning",
    "reward": "reward",
}
# The token count that says a phase ran in training (the ledger's TOKEN_COUNTS).
PHASE_ROWS = {
    "search": "gen_rows",
    "loss": "loss_rows",
    "old": "old_forward_rows",
    "ref": "ref_forward_rows",
    "reward": "reward_tokens",
}


def _first_tensor(output: Any) -> torch.Tensor | None:
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)):
        return next((o for o in output if isinstance(o, torch.Tensor)), None)
    return None


def first_linear(model: torch.nn.Module) -> tuple[str, torch.nn.Linear] | None:
    """The first ``nn.Linear`` of ``model`` (by ``named_modules`` order) and its name."""
    return next(((n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)), None)


class _Probe:
    """The forward hook on a probed Linear. A deep copy of the module (the budget ladder merges a copy of
    the policy for evaluation) shares it instead of copying it, and with it the trainer it reports to."""

    def __init__(self, probes: DtypeProbes) -> None:
        self.probes = probes

    def __call__(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        self.probes._hook(module, args, output)

    def __deepcopy__(self, memo: dict[int, Any]) -> _Probe:
        return self


class DtypeProbes:
    """The dtypes seen per phase (:attr:`seen`: phase -> dtypes in the order first seen) and the
    hooks that see them (:attr:`probed`: the model -> the Linear probed in it)."""

    def __init__(self, trainer: LedgerGRPOTrainer) -> None:
        self.trainer = trainer
        self.seen: dict[str, list[str]] = {}
        self.probed: dict[str, str] = {}
        self._handles: list[Any] = []

    def _hook(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        phase = self.trainer.ledger.phase
        if phase is None or not self.trainer.model.training:  # evaluation is not the run's compute
            return
        tensor = _first_tensor(output)
        if tensor is None:
            return
        dtype = str(tensor.dtype).removeprefix("torch.")
        seen = self.seen.setdefault(phase, [])
        if dtype not in seen:
            seen.append(dtype)

    def install(self, models: dict[str, torch.nn.Module]) -> None:
        self.remove()
        for role, model in models.items():
            found = first_linear(model)
            if found is not None:
                self.probed[role] = found[0]
                self._handles.append(found[1].register_forward_hook(_Probe(self)))

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.probed.clear()

    def by_phase(self) -> dict[str, str | list[str]]:
        """phase -> its dtype (a list of them, in the order seen, where a phase ran in more than one);
        only phases seen, in :data:`PHASES` order."""
        return {
            p: self.seen[p][0] if len(self.seen[p]) == 1 else list(self.seen[p])
            for p in PHASES
            if p in self.seen
        }

    def missing(self, tokens: dict[str, float]) -> dict[str, str]:
        """phase -> why it is absent from :meth:`by_phase`, for each phase that ran in training
        (``tokens``: the ledger's token counts over the run) without the probe seeing it."""
        trainer = self.trainer
        out = {}
        for phase in PHASES:
            if phase in self.seen or not tokens.get(PHASE_ROWS[phase]):
                continue
            if phase == "search" and getattr(trainer, "use_vllm", False):
                why = "generation ran in vLLM: its kernels are outside the probed model"
            elif phase == "search" and getattr(trainer, "sampler", "hf") in ("lean", "fused"):
                why = (
                    f"the ledger's {trainer.sampler} sampler computes with the weights directly "
                    "(F.linear), past the probed nn.Linear's forward"
                )
            elif (
                phase != "search" and phase != "reward" and getattr(trainer, "update_layout", None) == "fused"
            ):
                why = "the fused update forward computes with the weights directly, past the probed nn.Linear's forward"
            else:
                why = "ran, but the probed nn.Linear's forward did not (no probe saw it)"
            out[phase] = why
        return out


def install_dtype_probes(trainer: LedgerGRPOTrainer) -> DtypeProbes:
    """Hook one ``nn.Linear`` in the policy, the reference model (if any) and each ``nn.Module``
    reward model to record its output's dtype per phase; the trainer keeps them as
    ``trainer.dtype_probes`` (installing again replaces them). Call once the trainer's models exist
    (the end of ``LedgerGRPOTrainer.__init__``)."""
    old = getattr(trainer, "dtype_probes", None)
    if isinstance(old, DtypeProbes):
        old.remove()
    models: dict[str, torch.nn.Module] = {"policy": trainer.model}
    ref = getattr(trainer, "ref_model", None)
    if isinstance(ref, torch.nn.Module):
        models["reference"] = ref
    names = getattr(trainer, "reward_func_names", None) or [None] * len(trainer.reward_funcs)
    for i, (func, name) in enumerate(zip(trainer.reward_funcs, names, strict=False)):
        if isinstance(func, torch.nn.Module):
            models[f"reward model {name or i}"] = func
    probes = DtypeProbes(trainer)
    probes.install(models)
    trainer.dtype_probes = probes
    return probes
