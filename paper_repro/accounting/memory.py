"""Bytes on one device in each phase of a GRPO round: the memory model the dry run checks layouts with.

A run's phases (:data:`PHASES`) are what TRL's ``GRPOTrainer`` and this package do, one after the other,
on each process: ``generation`` (the process's whole share of P x G rows decoded at once by HF
``generate``, its KV cache growing to prompt + completion tokens; or vLLM's colocated engine),
``prm`` (the PRM reading the rollouts, in batches of :data:`PRM_BATCH` rows, without gradients),
``old_pass`` (the old policy's log-probs, no gradients, in micro-batches: only when TRL runs it),
``loss`` (forward and backward of one micro-batch through LoRA, with or without gradient
checkpointing) and ``evaluation`` (greedy answers in batches of ``eval.batch_size`` rows of up to
``max_new_tokens``, the PRM judging them). Each phase is a sum of named components in bytes
(:class:`PhaseMemory`); a phase's peak is the resident state (weights, LoRA and its optimizer state, a
colocated PRM, vLLM's reservation) plus what the phase itself holds at its largest moment.

What it follows, read from the code the runs execute (TRL 1.16, PEFT, transformers 5):

* Weights at the run's dtype; LoRA adapters in fp32 (PEFT's ``autocast_adapter_dtype``) and Adam's
  two moments in fp32, resident; LoRA's fp32 gradients during the loss pass only (the Trainer sets
  them to None after each step); ZeRO-2 shards the gradients and moments over the processes, DDP
  keeps a copy of the gradients in its buckets.
* Log-probs through TRL's fused LM head (``add_fused_lm_head``): the logits are never whole; its
  forward fills a tile of at most 4096 positions x 32768 vocabulary columns in the compute dtype. On
  a GPU a Triton kernel folds it in place over the scored positions only; elsewhere torch's ops run
  over every position and make fp32 copies of the tile (:data:`HEAD_FORWARD_COPIES`,
  :data:`HEAD_BACKWARD_COPIES`), and the backward's fp32 accumulation upcasts each vocabulary chunk
  of the head's weight. Its backward accumulates the hidden states' gradient in fp32, and runs
  before the layers' backward: the loss pass holds the larger of the two moments, not their sum.
* A decoder layer's saved tensors per token (:func:`layer_saved_bytes`), enumerated from Qwen2's
  layer under PEFT's LoRA: the RMSNorms' fp32 copies, the inputs of every linear (and of each LoRA
  adapter, cast to the adapter's dtype: under autocast cast back to bf16), the attention's q, k, v and
  output, the gated MLP's four intermediate-width tensors. With gradient checkpointing only each
  layer's input is kept, and one layer is recomputed at a time during the backward.
* The attention implementation (``RunMemory.attention``): the runs' ``sdpa`` (or flash) holds no
  attention weights; ``eager`` (the rehearsal's round, which ``FlopCounterMode`` must see) holds each
  layer's [rows, heads, T, T] weights through the layer's MLP (:func:`attention_weights`).
* HF ``generate`` holds its KV cache and the larger of two moments: the prefill's widest layer (the
  rollouts' policy under PEFT: its adapters' outputs at intermediate width, fp32 off autocast) and the
  sampling step's fp32 copies of the last token's logits.
* Depth enters linearly: weights, the KV cache and the saved activations are per layer, the
  embeddings, the head and the head's tile are not; :func:`phases` at any ``num_layers`` is the same
  formula, which the rehearsal (:mod:`paper_repro.drivers.rehearsal`) checks at two depths.

Not modelled (only a GPU shows them; ``docs/gpu-paper.md``): the CUDA context (given as a constant,
:data:`CUDA_CONTEXT_GIB`), the caching allocator's fragmentation, kernels' workspaces (cuBLAS,
flash attention), NCCL's buffers, and how vLLM splits its reservation between weights and paged KV.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from paper_repro.accounting.flops import LINEAR_MODULES, ModelShape

GIB = 2**30
PHASES = ("generation", "prm", "old_pass", "loss", "evaluation")
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}

# TRL's fused LM head (trl/kernels/chunked_logprob.py): TOKEN_CHUNK_SIZE scored tokens by
# _CHUNKED_LOGPROB_CHUNK_SIZE vocabulary columns per tile (trl/trainer/utils.py).
HEAD_TOKEN_CHUNK = 4096
HEAD_VOCAB_CHUNK = 32768
# fp32 copies of one tile alive at once in TRL's torch fold (trl/kernels/chunked_logprob.py, off
# Triton): forward (_forward_tile) the upcast tile, z minus the running max and its exp; backward
# (_backward_tile) y, z, log p, p, the gradient, 1[j = target] - p and its product with the
# log-prob gradient (temporaries freed as each op returns)
HEAD_FORWARD_COPIES = 3
HEAD_BACKWARD_COPIES = 7
# fp32 copies of the last token's logits alive at once in one sampling step of HF generate (measured
# with a minimum length and sampling, as the rehearsal decodes: the upcast, the minimum-length
# processor's clone and two where's, its masked_fill, softmax), beside the compute-dtype logits and
# that processor's vocabulary-long int64 index and bool mask; the study's rollouts (no minimum
# length) make fewer: the model is high there by rows x vocabulary x 12 bytes, far below the prefill
SAMPLING_COPIES = 6
PRM_BATCH = 64  # rows per PRM forward (paper_repro.rewards.prm_scorer.PRMScorer.batch_size)
ADAM_MOMENTS = 2
CUDA_CONTEXT_GIB = 0.5  # the CUDA context and cuBLAS handles: an assumption, measured only on a GPU

# Usable memory per device as torch reports it (total_memory), GiB: what the dry run fits layouts in.
DEVICE_MEMORY_GIB: dict[str, float] = {
    "H200": 139.8,
    "H100": 79.2,
    "A100 80GB": 79.2,
    "A100": 39.4,
    "L40S": 44.4,
}


def device_memory_gib(name: str) -> float:
    """Usable GiB of the GPU ``name`` (the longest table name it contains, case-blind); raises with
    the table's names when it is not known."""
    for key in sorted(DEVICE_MEMORY_GIB, key=len, reverse=True):
        if key.lower() in name.lower():
            return DEVICE_MEMORY_GIB[key]
    raise ValueError(
        f"no memory size for GPU {name!r}; known: {', '.join(DEVICE_MEMORY_GIB)} "
        "(add it to paper_repro.accounting.memory.DEVICE_MEMORY_GIB)"
    )


@dataclass(frozen=True)
class Precision:
    """Bytes per element of the run's tensors: ``weights`` (the model's dtype), ``compute`` (what
    matmuls produce: bf16 under autocast), ``adapter`` (LoRA's weights, fp32 under PEFT), ``cast``
    (what a LoRA adapter saves of its input: PEFT casts it to the adapter's dtype, and autocast casts
    it back to the compute dtype on a GPU; 0 when the cast is a no-op and the input is shared) and
    ``triton_head`` (TRL's fused head folds each tile in a Triton kernel and projects only the scored
    positions; False: torch's ops over every position, with fp32 copies of each tile)."""

    weights: int
    compute: int
    adapter: int = 4
    cast: int = 0
    triton_head: bool = True

    @classmethod
    def of(cls, dtype: str, device: str = "cuda") -> Precision:
        """The precision of a run in ``dtype`` on ``device`` ("cuda": bf16 autocast and Triton where
        the dtype is 16-bit; "cpu": no autocast, PEFT's fp32 casts kept, torch's head)."""
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPE_BYTES)}")
        w = DTYPE_BYTES[dtype]
        triton = device == "cuda"
        if w == 4:
            return cls(weights=4, compute=4, cast=0, triton_head=triton)
        return cls(weights=w, compute=w, cast=w if triton else 4, triton_head=triton)


def weight_bytes(shape: ModelShape, precision: Precision) -> float:
    """The model's weights in bytes at the run's dtype."""
    return shape.parameter_count() * precision.weights


def lora_parameters(shape: ModelShape, rank: int, targets: tuple[str, ...] = LINEAR_MODULES) -> int:
    """LoRA's trainable parameters: rank x (in + out) of every targeted module of every layer."""
    mods = shape.module_shapes()
    return shape.num_layers * sum(rank * (mods[m][0] + mods[m][1]) for m in targets)


def kv_bytes_per_token(shape: ModelShape, precision: Precision) -> int:
    """Bytes one token's keys and values take in the cache, over all layers."""
    return 2 * shape.num_layers * shape.num_kv_heads * shape.head_dim * precision.compute


def layer_saved_bytes(shape: ModelShape, precision: Precision, rank: int, lora: bool = True) -> int:
    """Bytes one decoder layer saves for its backward per token (its own input excluded: the
    previous layer's output, counted by the caller): Qwen2's layer with LoRA on all linear modules."""
    h, q, i = shape.hidden_size, shape.attention_width, shape.intermediate_size
    w, c, cast = precision.weights, precision.compute, precision.cast
    fp32_copy = 4 * h if w != 4 else 0  # RMSNorm's fp32 copy of its input (in fp32, the input itself)
    norms = 2 * (fp32_copy + 2 * w * h)  # two norms: that copy, the normalised input cast back, the output
    # q and k rotated, and k and v repeated to q's width (a padded batch has a mask, so transformers
    # repeats them rather than asking sdpa for GQA); sdpa's output and its contiguous copy for o_proj
    attention = 3 * c * q + 2 * c * q
    mlp = 4 * c * i  # gate's output (SiLU's input), SiLU's output, up's output, their product (down's input)
    adapters = 0
    if lora:
        a = cast if cast else precision.adapter
        adapters = cast * (3 * h + q + 2 * h + i) + len(LINEAR_MODULES) * rank * a
    return norms + attention + mlp + adapters


def _forward_transient(shape: ModelShape, precision: Precision, lora: bool = False) -> int:
    """Bytes per token one layer holds at once in a forward without gradients, at its MLP (the
    layer's widest moment), beside three hidden-width tensors in the compute dtype (the embeddings'
    output, the residual and the normalised input): without ``lora``, gate's activation, up's output
    and their product; with ``lora`` (the policy under PEFT, unmerged) up's moment instead: gate's
    activation and up's base output in the compute dtype beside its adapter's output and that output
    scaled, in the adapter's dtype where PEFT's cast is kept (off autocast: fp32), and the adapter's
    cast of the layer's input (measured: ``docs/gpu-paper.md``, the rehearsal's round)."""
    h, i, c = shape.hidden_size, shape.intermediate_size, precision.compute
    if not lora:
        return c * (3 * i + 3 * h)
    adapter = precision.cast or precision.adapter
    return c * (2 * i + 3 * h) + adapter * (2 * i + h)


def attention_weights(
    shape: ModelShape, rows: int, tokens: int, precision: Precision, attention: str, grad: bool = False
) -> int:
    """Bytes of one layer's attention weights over ``rows`` rows of ``tokens`` tokens that a forward
    holds beyond its per-token tensors: none under ``sdpa`` or flash attention (fused kernels: the
    weights never exist as a tensor); under ``eager`` the [rows, heads, tokens, tokens] weights in the
    compute dtype, which Qwen2's decoder layer keeps (its discarded ``_``) through the layer's MLP,
    and with ``grad`` also softmax's fp32 output, which autograd saves."""
    if attention != "eager":
        return 0
    cells = rows * shape.num_heads * tokens * tokens
    return cells * (precision.compute + (4 if grad else 0))


def head_positions(rows: int, prompt: int, completion: int, precision: Precision) -> int:
    """Positions TRL's fused head projects over ``rows`` rows: the scored (completion) tokens under
    Triton, which gathers them; with torch's ops every position but each row's last (TRL keeps the
    tile shapes fixed there and masks the rest)."""
    return rows * completion if precision.triton_head else rows * (prompt + completion - 1)


def head_workspace(positions: int, shape: ModelShape, precision: Precision, backward: bool) -> float:
    """Bytes of TRL's fused LM head at its peak over ``positions`` (:func:`head_positions`): the
    gathered hidden states and the tile in the compute dtype, and

    * forward, with torch's ops: :data:`HEAD_FORWARD_COPIES` fp32 copies of the tile;
    * backward: the hidden states' fp32 gradient, and with torch's ops the larger of two moments:
      folding a tile (:data:`HEAD_BACKWARD_COPIES` fp32 copies and the one-byte target mask) or
      accumulating it (its fp32 copy and the fp32 upcast of the head's vocabulary chunk, which
      ``_addmm_fp32`` makes off CUDA)."""
    if not positions:
        return 0.0
    h, vocab = shape.hidden_size, min(shape.head[-1][1], HEAD_VOCAB_CHUNK)
    cells = min(positions, HEAD_TOKEN_CHUNK) * vocab
    base = positions * h * precision.compute + cells * precision.compute
    if not backward:
        return base + (0 if precision.triton_head else cells * 4 * HEAD_FORWARD_COPIES)
    base += positions * h * 4
    if precision.triton_head:
        return base
    fold = cells * (4 * HEAD_BACKWARD_COPIES + 1)
    accumulate = cells * 4 + h * vocab * 4
    return base + max(fold, accumulate)


@dataclass(frozen=True)
class PhaseMemory:
    """One phase's peak on one device, by component (bytes)."""

    phase: str
    parts: Mapping[str, float]

    @property
    def total(self) -> float:
        return float(sum(self.parts.values()))

    def largest(self) -> str:
        return max(self.parts, key=lambda k: self.parts[k])


@dataclass(frozen=True)
class RunMemory:
    """What one process of a run holds, as the memory model needs it.

    ``rows``: generated rows on this process per round (its share of P x G); ``micro_rows``: rows
    per loss micro-batch (kept rows); ``old_pass``: whether TRL runs the old-policy forward;
    ``processes`` and ``zero_stage``: the data-parallel group (ZeRO-2 shards LoRA's gradients and
    moments); ``prm``: a PRM on this device (None: none or on another device); ``vllm_share``: the
    fraction of the device vLLM's colocated engine reserves (0: HF generate); ``device_gib``: the
    device's usable memory; ``attention``: the models' attention implementation (transformers'
    ``attn_implementation``: the runs' default ``sdpa``; the rehearsal's round runs ``eager``, which
    FlopCounterMode sees)."""

    policy: ModelShape
    precision: Precision
    prompt_tokens: int
    completion_tokens: int
    rows: int
    micro_rows: int
    lora_rank: int = 64
    checkpointing: bool = True
    old_pass: bool = False
    processes: int = 1
    zero_stage: int = 0
    prm: ModelShape | None = None
    reward_tokens: int | None = None  # tokens the PRM reads per row; None: prompt + completion
    judge_tokens: int | None = None  # tokens the PRM judge reads per answer; None: prompt + eval_new_tokens
    eval_rows: int = 64
    eval_new_tokens: int = 2048
    vllm_share: float = 0.0
    attention: str = "sdpa"  # the attention implementation: "eager" holds its weights (attention_weights)
    device_gib: float = 79.2
    cuda_context_gib: float = CUDA_CONTEXT_GIB
    notes: tuple[str, ...] = field(default=())

    @property
    def sequence(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def resident(self) -> dict[str, float]:
        """What stays on the device through every phase, by component (bytes)."""
        lora = lora_parameters(self.policy, self.lora_rank)
        shard = self.processes if self.zero_stage >= 2 else 1
        parts = {
            "policy weights": weight_bytes(self.policy, self.precision),
            "LoRA weights": lora * self.precision.adapter,
            "Adam moments": lora * 4 * ADAM_MOMENTS / shard,
        }
        if self.processes > 1 and self.zero_stage == 0:
            parts["DDP grad buckets"] = lora * 4
        if self.prm is not None:
            parts["PRM weights"] = weight_bytes(self.prm, self.precision)
        if self.vllm_share:
            parts["vLLM reservation"] = self.vllm_share * self.device_gib * GIB
        if self.cuda_context_gib:
            parts["CUDA context"] = self.cuda_context_gib * GIB
        return parts


def _decoding(run: RunMemory, rows: int, new_tokens: int, lora: bool) -> dict[str, float]:
    """HF ``generate`` of ``new_tokens`` tokens after ``rows`` prompts: the KV cache at its full
    length, and the larger of its two moments, the prefill's widest layer (with ``lora`` the policy
    under PEFT, its adapters unmerged) or the sampling step's copies of the last token's logits
    (:data:`SAMPLING_COPIES`; made after the prefill's layers have freed theirs)."""
    p, shape = run.precision, run.policy
    cache = (
        rows * (run.prompt_tokens + new_tokens) * kv_bytes_per_token(shape, p) * (1 + 1 / shape.num_layers)
    )
    prefill = rows * run.prompt_tokens * _forward_transient(shape, p, lora=lora) + attention_weights(
        shape, rows, run.prompt_tokens, p, run.attention
    )
    vocab = shape.vocab_size
    logits = rows * vocab * (p.compute + 4 * SAMPLING_COPIES) + vocab * (8 + 1)
    moment = {"prefill activations": prefill} if prefill > logits else {"last-token logits": logits}
    return {"KV cache": cache, **moment}


def _generation(run: RunMemory) -> dict[str, float]:
    if run.vllm_share:  # vLLM's engine holds its weights copy and paged KV inside its reservation
        return {}
    # rollouts come from the policy under PEFT, its adapters unmerged
    return _decoding(run, run.rows, run.completion_tokens, lora=True)


def _prm(run: RunMemory) -> dict[str, float]:
    if run.prm is None:
        return {}
    rows, length = min(run.rows, PRM_BATCH), run.reward_tokens or run.sequence
    tokens = rows * length
    layer = tokens * _forward_transient(run.prm, run.precision) + attention_weights(
        run.prm, rows, length, run.precision, run.attention
    )
    # its head after the layers: the last hidden states, Linear(h, h)'s output and ReLU's, two logits
    head = tokens * (3 * run.prm.hidden_size + 2) * run.precision.compute
    return {"PRM activations": layer} if layer > head else {"PRM head": head}


def _old_pass(run: RunMemory) -> dict[str, float]:
    if not run.old_pass:
        return {}
    # one layer's transients (the policy under PEFT), freed before the head runs over the last hidden
    # states: the larger one
    tokens = run.micro_rows * run.sequence
    layer = tokens * _forward_transient(run.policy, run.precision, lora=True) + attention_weights(
        run.policy, run.micro_rows, run.sequence, run.precision, run.attention
    )
    positions = head_positions(run.micro_rows, run.prompt_tokens, run.completion_tokens, run.precision)
    head = head_workspace(positions, run.policy, run.precision, False)
    return {"activations (no grad)": layer} if layer > head else {"fused head": head}


def _loss(run: RunMemory) -> dict[str, float]:
    p, shape = run.precision, run.policy
    tokens = run.micro_rows * run.sequence
    layer = layer_saved_bytes(shape, p, run.lora_rank)
    scores = attention_weights(shape, run.micro_rows, run.sequence, p, run.attention, grad=True)
    residual = shape.hidden_size * p.compute  # each layer's input, kept for its backward
    if run.checkpointing:
        saved = {
            "layer inputs (checkpointed)": tokens * shape.num_layers * residual,
            "one layer recomputed": tokens * layer + scores,
        }
    else:
        saved = {"saved activations": shape.num_layers * (tokens * (residual + layer) + scores)}
    shard = run.processes if run.zero_stage >= 2 else 1
    # fp32, freed after each optimizer step (the Trainer zeroes them to None); ZeRO-2 keeps a shard
    grads = {"LoRA grads": lora_parameters(shape, run.lora_rank) * 4 / shard}
    recomputed = saved.pop("one layer recomputed", 0.0)
    # the backward's two moments, one after the other: the head first (LoRA's gradients exist by then
    # only from an earlier micro-batch of the step), then the layers, one recomputed at a time
    positions = head_positions(run.micro_rows, run.prompt_tokens, run.completion_tokens, p)
    head = {"fused head": head_workspace(positions, shape, p, True)}
    if run.micro_rows < run.rows:
        head = {**grads, **head}
    layers = {
        **grads,
        **({"one layer recomputed": recomputed} if recomputed else {}),
        "backward grads (hidden, MLP)": tokens
        * (3 * shape.hidden_size + 2 * shape.intermediate_size)
        * p.compute,
    }
    return {**saved, **max(head, layers, key=lambda parts: sum(parts.values()))}


def _evaluation(run: RunMemory) -> dict[str, float]:
    # the policy merged (paper_repro.run.train), then the PRM judging the answers once decoded: the KV
    # cache is gone by then, so the phase holds the larger of the two
    parts = _decoding(run, run.eval_rows, run.eval_new_tokens, lora=False)
    if run.prm is not None:
        rows, length = (
            min(run.eval_rows, PRM_BATCH),
            run.judge_tokens or run.prompt_tokens + run.eval_new_tokens,
        )
        judge = rows * length * _forward_transient(run.prm, run.precision) + attention_weights(
            run.prm, rows, length, run.precision, run.attention
        )
        parts = parts if judge < sum(parts.values()) else {"judge activations": judge}
    return parts


_PHASE_PARTS = {
    "generation": _generation,
    "prm": _prm,
    "old_pass": _old_pass,
    "loss": _loss,
    "evaluation": _evaluation,
}


def phases(run: RunMemory) -> list[PhaseMemory]:
    """Each phase's peak on one device (:data:`PHASES` order; a phase the run skips has only the
    resident state): resident components plus the phase's own, in bytes."""
    resident = run.resident()
    return [PhaseMemory(name, {**resident, **_PHASE_PARTS[name](run)}) for name in PHASES]


def peak(run: RunMemory) -> PhaseMemory:
    """The phase with the largest total."""
    return max(phases(run), key=lambda ph: ph.total)


# The knobs that lower a phase, tried in this order (the cheapest change first), each as a function of
# the run: its new RunMemory and the words that say it.
def _knobs(run: RunMemory):
    if run.micro_rows > 1:
        yield (
            replace(run, micro_rows=max(1, run.micro_rows // 2)),
            f"micro_batch {max(1, run.micro_rows // 2)}",
        )
    if not run.checkpointing:
        yield replace(run, checkpointing=True), "gradient_checkpointing: true"
    if run.prm is not None:
        yield replace(run, prm=None), "the PRM on a separate device"
    if run.eval_rows > 8:
        yield replace(run, eval_rows=run.eval_rows // 2), f"eval.batch_size {run.eval_rows // 2}"
    if run.vllm_share:
        yield (
            replace(run, vllm_share=run.vllm_share / 2),
            f"vllm_gpu_memory_utilization {run.vllm_share / 2:g}",
        )


def remedy(run: RunMemory, budget_gib: float | None = None, depth: int = 6) -> str | None:
    """The first change, or chain of changes (up to ``depth``), that makes every phase of ``run`` fit
    in ``budget_gib`` (default: the device); None when none does (tensor parallel is then the knob:
    the caller says so)."""
    budget = (budget_gib or run.device_gib) * GIB
    frontier = [(run, [])]
    for _ in range(depth):
        nxt = []
        for current, said in frontier:
            for changed, words in _knobs(current):
                if peak(changed).total <= budget:
                    return ", ".join([*said, words])
                nxt.append((changed, [*said, words]))
        frontier = nxt[:32]
    return None
