"""Tiny models built in memory: a character-level tokenizer and a small Qwen2 policy.

Used by the ledger benchmark and the tests; nothing here touches the network.
"""

from __future__ import annotations

CHARS = tuple("0123456789+-*=() abcdefghijklmnopqrstuvwxyz.?:")
SPECIAL = ("<pad>", "<eos>", "<unk>")


def char_tokenizer():
    """A character-level HF fast tokenizer: ids 0/1/2 are pad/eos/unk, then one id per character."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL + CHARS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


def tiny_qwen2(seed: int = 0, hidden: int = 32, layers: int = 2, heads: int = 4, kv_heads: int = 2):
    """A randomly initialised Qwen2 causal LM over :func:`char_tokenizer`'s vocabulary, with eager
    attention (FlopCounterMode cannot see the CPU sdpa kernel)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(SPECIAL) + len(CHARS),
        hidden_size=hidden,
        intermediate_size=2 * hidden + 16,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.config._attn_implementation = "eager"
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = 1
    return model


# --------------------------------------------------------------------------------------------
# Tiny checkpoints with the gpu-paper models' interfaces (tests and the GPU smoke check)
# --------------------------------------------------------------------------------------------

QWEN_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<extra_0>")

# Qwen2.5-Math-PRM's remote code, in the form its model card loads (AutoModel, trust_remote_code):
# a Qwen2 backbone and a two-way MLP head at every position, logits first in the output.
PRM_CONFIGURATION = """from transformers import Qwen2Config


class Qwen2RMConfig(Qwen2Config):
    model_type = "qwen2"
"""
PRM_MODELING = """import torch
from transformers import Qwen2Model, Qwen2PreTrainedModel
from transformers.modeling_outputs import TokenClassifierOutput

from .configuration_qwen2_rm import Qwen2RMConfig


class Qwen2ForProcessRewardModel(Qwen2PreTrainedModel):
    config_class = Qwen2RMConfig

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = 2
        self.model = Qwen2Model(config)
        self.score = torch.nn.Sequential(
            torch.nn.Linear(config.hidden_size, config.hidden_size),
            torch.nn.ReLU(),
            torch.nn.Linear(config.hidden_size, 2),
        )
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask)[0]
        return TokenClassifierOutput(logits=self.score(hidden))
"""


def qwen25_style_tokenizer():
    """A byte-level tokenizer in Qwen2.5-Instruct's form: every byte one token (no merges), its
    special tokens (``<|endoftext|>`` pad, ``<|im_end|>`` eos, ``<|im_start|>``, and the PRM's
    ``<extra_0>``) and the ChatML chat template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from paper_repro.tasks.hub import CHATML_TEMPLATE

    table = pre_tokenizers.ByteLevel.alphabet()
    vocab = {tok: i for i, tok in enumerate(list(QWEN_SPECIALS) + sorted(table))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIALS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>", "<extra_0>"],
        padding_side="left",
        model_max_length=4096,
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def _qwen2_config(tokenizer, hidden: int, layers: int, **extra):
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden + 16,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        **extra,
    )


def write_tiny_qwen25(out_dir, hidden: int = 32, layers: int = 2, seed: int = 0):
    """Save a random tiny policy with Qwen2.5-Instruct's interface (Qwen2ForCausalLM, the tokenizer
    of :func:`qwen25_style_tokenizer`, eos ``<|im_end|>``) to ``out_dir``; return the path."""
    from pathlib import Path

    import torch
    from transformers import Qwen2ForCausalLM

    out = Path(out_dir)
    tokenizer = qwen25_style_tokenizer()
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(_qwen2_config(tokenizer, hidden, layers, tie_word_embeddings=True))
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.pad_token_id]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def write_tiny_math_prm(out_dir, hidden: int = 32, layers: int = 2, seed: int = 0):
    """Save a random tiny PRM with Qwen2.5-Math-PRM-7B's interface to ``out_dir``: its remote code
    (``Qwen2ForProcessRewardModel``, loaded by ``AutoModel`` with ``trust_remote_code``), its
    config's ``architectures``/``auto_map`` and a tokenizer with ``<extra_0>``; return the path."""
    import json
    from pathlib import Path

    import torch
    from transformers import AutoConfig, AutoModel

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "configuration_qwen2_rm.py").write_text(PRM_CONFIGURATION)
    (out / "modeling_qwen2_rm.py").write_text(PRM_MODELING)
    tokenizer = qwen25_style_tokenizer()
    config = _qwen2_config(tokenizer, hidden, layers, tie_word_embeddings=False).to_dict()
    config.update(
        architectures=["Qwen2ForProcessRewardModel"],
        auto_map={
            "AutoConfig": "configuration_qwen2_rm.Qwen2RMConfig",
            "AutoModel": "modeling_qwen2_rm.Qwen2ForProcessRewardModel",
        },
    )
    (out / "config.json").write_text(json.dumps(config, indent=2))
    torch.manual_seed(seed)
    model = AutoModel.from_config(
        AutoConfig.from_pretrained(out, trust_remote_code=True), trust_remote_code=True
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
