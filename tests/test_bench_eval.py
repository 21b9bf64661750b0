"""``paper-repro bench eval``: the old and new evaluation timed side by side, checked
identical first."""

from __future__ import annotations

from paper_repro.bench import evaluation
from paper_repro.cli import main


def test_the_evaluation_benchmark_times_both_paths_and_checks_them_identical(capsys):
    assert main(["bench", "eval", "--sizes", "S", "--repeats", "1", "--limit", "40"]) == 0
    out = capsys.readouterr().out
    assert "old/new" in out and "yes" in out.splitlines()[-1]
    result = evaluation.bench_eval(("S",), repeats=1, sets="heldout", limit=40)
    cell = result["policies"]["S/1"]
    assert cell["identical"] and cell["problems"] == 40
    assert set(cell["median"]) == set(evaluation.EVAL_PATHS) and cell["ratio"] > 0
