"""The interfaces of the gpu-paper models and datasets without their weights or rows: a byte-level tokenizer in
Qwen2.5-Instruct's form (its special tokens and ChatML template) and Qwen2.5-Math-PRM's remote code,
as its model card loads it. The tests' tiny checkpoints and the rehearsal's real-width ones
(:mod:`paper_repro.drivers.rehearsal_round`) are saved with them, so both load through the same
``AutoTokenizer`` / ``AutoModel(trust_remote_code=True)`` path as the hub's checkpoints."""

from __future__ import annotations

from pathlib import Path

# a few rows of each gpu-paper dataset, in the hub's own columns (written to local files that a
# profile's ``<hub id>=<file>`` data entries read)
HUB_ROWS = {
    # a few rows of each gpu-paper dataset, in the hub's own columns
    "polaris": [{"problem": f"What is {a} + {b}?", "answer": str(a + b), "difficulty": "1/8"} for a, b in
                [(1, 2), (3, 4), (5, 6), (7, 8), (2, 9), (4, 4), (6, 1), (8, 3), (9, 9), (5, 2)]],
    "gsm8k": [{"question": "Tom has 3 apples and buys 39 more. How many?", "answer": "3+39=<<3+39=42>>42\n#### 42"},
              {"question": "A shop sells 1,000 pens a day. How many in 2 days?", "answer": "2*1000=2000\n#### 2,000"}],
    "math500": [{"problem": "Compute $\\frac{2}{4}$.", "solution": "...", "answer": "\\frac{1}{2}",
                 "subject": "Algebra", "level": 1, "unique_id": "test/algebra/1.json"},
                {"problem": "What is $3^2$?", "solution": "...", "answer": "9", "subject": "Algebra",
                 "level": 1, "unique_id": "test/algebra/2.json"}],
}  # fmt: skip

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
# what a PRM checkpoint's config.json adds to its Qwen2 config so AutoModel finds the code above
PRM_CONFIG_KEYS = {
    "architectures": ["Qwen2ForProcessRewardModel"],
    "auto_map": {
        "AutoConfig": "configuration_qwen2_rm.Qwen2RMConfig",
        "AutoModel": "modeling_qwen2_rm.Qwen2ForProcessRewardModel",
    },
}


def write_prm_code(out) -> None:
    """Write Qwen2.5-Math-PRM's two code files into the checkpoint folder ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "configuration_qwen2_rm.py").write_text(PRM_CONFIGURATION)
    (out / "modeling_qwen2_rm.py").write_text(PRM_MODELING)


def write_hub_rows(root) -> dict[str, Path]:
    """Write :data:`HUB_ROWS` as JSON-lines files under ``root / "hub"``; return each dataset's file, by
    the key a profile's ``<hub id>=<file>`` data entry names."""
    import json

    files = {}
    for key, rows in HUB_ROWS.items():
        files[key] = Path(root) / "hub" / f"{key}.jsonl"
        files[key].parent.mkdir(parents=True, exist_ok=True)
        files[key].write_text("".join(json.dumps(r) + "\n" for r in rows))
    return files


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
