"""A budgeted run on an iterable (streaming) dataset never reads the stream ahead: the round's ceiling
is priced from a declared maximum prompt length, or from the longest prompt seen so far, and the stop
line says which."""

from __future__ import annotations

import logging

import pytest

from paper_repro.ledger import BudgetWarning, LedgerConfig
from tests.test_ledger import build_tiny_grpo


class Stream:
    """A long stream of prompts that counts the rows pulled from it; the prompts grow after row 8 (two
    rounds of four prompts)."""

    def __init__(self, rows: int = 200_000) -> None:
        self.rows, self.pulled = rows, 0

    def dataset(self):
        from datasets import IterableDataset

        def rows():
            for i in range(self.rows):
                self.pulled += 1
                long = " ".join(f"{(i * j) % 9}+{j % 7}=" for j in range(6))
                yield {"prompt": f"{i % 9}+{(3 * i) % 7}=" if i < 8 else long}

        return IterableDataset.from_generator(rows)


def _budgeted(tmp_path, stream: Stream, budget: float = 3e8, **ledger):
    return build_tiny_grpo(
        tmp_path, LedgerConfig(budget_flops=budget, **ledger), train_dataset=stream.dataset(), max_steps=12,
        shuffle_dataset=False,
    )  # fmt: skip


def test_a_budget_on_a_stream_reads_no_row_when_the_trainer_is_built(tmp_path):
    stream = Stream()
    with pytest.warns(UserWarning, match="does not read an iterable .* longest prompt seen so far"):
        trainer = _budgeted(tmp_path, stream)
    assert stream.pulled == 0
    assert trainer.round_price is None and trainer.ledger.prompt_length_source is None


def test_a_stream_is_priced_with_the_longest_prompt_seen_so_far(tmp_path, caplog):
    stream = Stream()
    with pytest.warns(UserWarning, match="does not read an iterable"):
        trainer = _budgeted(tmp_path, stream, budget=1.5e8)
    # the prompts grow past row 8: a longer prompt than the ceiling was priced with is a BudgetWarning
    grew = (
        r"a prompt of \d+ tokens is longer than the round's ceiling was priced with \(the longest prompt seen"
    )
    with caplog.at_level(logging.INFO, logger="paper_repro.ledger"), pytest.warns(BudgetWarning, match=grew):
        trainer.train()
    assert stream.pulled < 1000  # the batches trained on, and the loader's prefetch
    source = trainer.ledger.prompt_length_source
    assert source.startswith("the longest prompt seen so far (") and "an estimate" in source
    assert trainer.round_price["prompt_tokens"] > 8  # priced again when the prompts grew
    assert trainer.ledger.summary()["stopped_by_budget"]
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("FLOP ledger: stopped")]
    assert "priced with the longest prompt seen so far" in line


def test_a_declared_prompt_length_prices_a_stream_before_training(tmp_path):
    stream = Stream()
    trainer = _budgeted(tmp_path, stream, max_prompt_tokens=64)
    assert stream.pulled == 0
    assert trainer.round_price["prompt_tokens"] == 64
    assert trainer.ledger.prompt_length_source == "LedgerConfig.max_prompt_tokens (64 tokens)"
    with pytest.raises(ValueError, match="does not surely buy one generation round"):
        build_tiny_grpo(
            tmp_path, LedgerConfig(budget_flops=1e6, max_prompt_tokens=64), train_dataset=Stream().dataset()
        )


def test_a_prompt_past_the_declared_length_warns_and_is_priced(tmp_path):
    trainer = _budgeted(tmp_path, Stream(), max_prompt_tokens=3)
    with pytest.warns(BudgetWarning) as caught:
        trainer.train()
    said = [str(w.message) for w in caught if w.category is BudgetWarning]
    assert all("longer than the round's ceiling was priced with" in s for s in said)
    assert "max_prompt_tokens" in said[0]
    # the stream's prompts grow again (past row 8) beyond the length it was priced again with: that warns too
    assert len(said) == 2 and "(the longest prompt seen so far (" in said[1]
    assert trainer.round_price["prompt_tokens"] > 3
    assert trainer.ledger.prompt_length_source.startswith("the longest prompt seen so far")
