"""Every ``paper-repro`` command line the README and ``docs/usage.md`` show parses, and every
``paper-repro cells`` line passes the refusals a run meets before its compute.

The README and ``cells --help`` once showed ``paper-repro cells ... --seed 3 4``, which the committed
table refuses (seed 3 is not a design seed): a reader's first exploration failed as documented. A
command line is one in a code block, or an inline one that names its ``--profile`` (a bare
``paper-repro cells`` or ``--jobs N`` is a mention, not a command)."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from paper_repro import cli
from paper_repro.commands import cells as cells_command
from paper_repro.common.paths import repo_root
from paper_repro.run import runner
from paper_repro.run.study_design import check_committed

DOCUMENTS = ("README.md", "docs/usage.md")
FENCE = re.compile(r"```(?:bash|sh)?\n(.*?)```", re.S)
INLINE = re.compile(r"`(?:\.venv/bin/)?(paper-repro [^`\n]*)`")


def command_lines(text: str) -> list[str]:
    """The ``paper-repro`` command lines of a Markdown text: each line of a code block that runs it
    (continuations joined, a trailing ``# comment`` dropped), and each inline one naming ``--profile``."""
    out = []
    for block in FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = " ".join(line.split(" #")[0].split()).removeprefix(".venv/bin/")
            if line.startswith("paper-repro "):
                out.append(line)
    out += [m for m in INLINE.findall(FENCE.sub("", text)) if "--profile" in m]
    return list(dict.fromkeys(out))


def _documented() -> list[tuple[str, str]]:
    return [(doc, line) for doc in DOCUMENTS for line in command_lines((repo_root() / doc).read_text())]


def test_the_documents_show_command_lines_and_the_reported_one():
    lines = [line for _, line in _documented()]
    assert any(" cells " in line and "--seed 3 4" in line for line in lines)
    assert any("--recipe" in line for line in lines) and any("--beside" in line for line in lines)
    assert command_lines(
        "`paper-repro cells --jobs N` and\n```bash\n.venv/bin/paper-repro plan \\\n  --profile x  # y\n```"
    ) == ["paper-repro plan --profile x"]


@pytest.mark.parametrize(("doc", "line"), _documented())
def test_a_documented_command_line_parses(doc, line, capsys):
    argv = shlex.split(line)[1:]
    args = cli.build_parser(commands=argv[:1]).parse_args(argv)  # argparse exits 2 on a bad line
    assert args.command == argv[0], f"{doc}: {line}"


CELLS = [(doc, line) for doc, line in _documented() if line.startswith("paper-repro cells ")]


@pytest.mark.parametrize(("doc", "line"), CELLS)
def test_a_documented_cells_line_passes_the_refusals_before_compute(doc, line, monkeypatch, capsys):
    """The command as written, up to its runs: its specs built and checked as ``run_specs`` checks
    them (the committed table's refusal), nothing computed or written."""
    checked = []

    def refusals_only(specs, results_root=None, **kwargs):
        check_committed(specs, results_root)
        checked.append(len(specs))
        return []

    monkeypatch.setattr(runner, "run_specs", refusals_only)
    code = cli.main(shlex.split(line)[1:])
    assert code == 0 and checked, f"{doc}: `{line}` fails: {capsys.readouterr().err}"


def test_the_cells_help_examples_pass_the_same_refusals(monkeypatch, capsys):
    examples = [
        line.strip()
        for line in cells_command.add_parser(
            argparse.ArgumentParser().add_subparsers()
        ).description.splitlines()
        if line.strip().startswith("paper-repro cells ")
    ]
    assert len(examples) >= 2
    monkeypatch.setattr(
        runner, "run_specs", lambda specs, root=None, **kw: check_committed(specs, root) or []
    )
    for line in examples:
        assert cli.main(shlex.split(line)[1:]) == 0, f"cells --help: `{line}`: {capsys.readouterr().err}"


def test_the_check_catches_the_reported_line(monkeypatch, capsys):
    monkeypatch.setattr(
        runner, "run_specs", lambda specs, root=None, **kw: check_committed(specs, root) or []
    )
    line = "paper-repro cells --profile cpu-tiny --setting dense --cells r40 r66 --seed 3 4"
    assert cli.main(shlex.split(line)[1:]) == 2
    assert "seed 3 is not one of the design's" in capsys.readouterr().err
