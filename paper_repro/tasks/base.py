"""What every task shares: one row schema (``prompt``, ``answer``, ``source``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Example:
    """One problem in the common schema. ``meta`` keeps task-specific fields (e.g. arith's ops)."""

    prompt: str  # the text (or chat-formatted text) the policy is given
    answer: str  # the reference final answer, as text
    source: str  # "<dataset>/<split>", e.g. "arith/gsm_tiny" or "openai/gsm8k/test"
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Example:
        rest = {k: v for k, v in record.items() if k not in ("prompt", "answer", "source")}
        return cls(str(record["prompt"]), str(record["answer"]), str(record["source"]), rest)

    def to_record(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "answer": self.answer, "source": self.source, **self.meta}
