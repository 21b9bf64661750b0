"""The command surface: every user-facing action is a subcommand of ``paper-repro``, found from
:mod:`paper_repro.commands` (a new command is one new module); ``python -m paper_repro`` is the same command
line; a default a command reads from its owner moves with the owner's."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys

import pytest

from paper_repro import cli
from paper_repro.commands import command_modules
from paper_repro.common.paths import repo_root

# every user-facing action of the project
COMMANDS = {
    *("flops", "plan", "cells", "run", "analyse", "design", "split-history", "reproduce", "recheck"),
    *("report", "draws", "bench", "validate", "smoke", "reward-comparison", "task-data", "rehearse"),
}


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    assert done.value.code == 0
    return capsys.readouterr().out


def test_help_lists_every_command(capsys):
    text = _help(["--help"], capsys)
    listed = set(re.findall(r"^    (\S+)", text.split("options:")[0], re.M))
    assert listed == COMMANDS == {m.NAME for m in command_modules()}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_parses_its_own_help(name, capsys):
    text = _help([name, "--help"], capsys)
    assert text.startswith(f"usage: paper-repro {name} ")


def test_python_m_paper_repro_is_the_command_line():
    """``python -m paper_repro <command>``, for an environment whose scripts are not on PATH, runs the
    same parser as ``paper-repro <command>``."""
    done = subprocess.run(
        [sys.executable, "-m", "paper_repro", "reproduce", "--where"],
        capture_output=True,
        text=True,
        cwd=repo_root(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "out/reproduce/cpu-tiny" and done.stderr == ""


def _parse(argv: list[str]):
    return cli.build_parser(argv[:1]).parse_args(argv)


def test_defaults_are_read_from_their_owners(monkeypatch):
    from paper_repro.accounting import flops
    from paper_repro.analysis.tables.race import RegimeThresholds
    from paper_repro.run import design_cost

    fields = {f.name: f for f in dataclasses.fields(RegimeThresholds)}
    monkeypatch.setattr(fields["rho_threshold"], "default", 0.7)
    assert _parse(["analyse", "--profile", "cpu-tiny"]).rho_threshold == 0.7
    fields = {f.name: f for f in dataclasses.fields(flops.TrainSpec)}
    monkeypatch.setattr(fields["gradient_checkpointing"], "default", True)
    required = ["--model", "x", "--prompt-tokens", "4", "--completion-tokens", "8"]
    args = _parse(["flops", *required, "--generations", "4"])
    assert (args.prompts, args.epochs, args.gradient_checkpointing) == (1, 1, True)
    # how the policy trains is the train section's, read when the command runs (tests/test_flops.py)
    assert (args.lora_rank, args.beta, args.kept, args.prefix_cache) == (None, None, None, None)
    monkeypatch.setattr(design_cost, "MINUTES", 33.0)
    assert _parse(["design", "--profile", "cpu-tiny"]).minutes == 33.0


def test_a_field_without_default_is_a_required_option(capsys):
    with pytest.raises(SystemExit):
        _parse(["flops", "--model", "x", "--prompt-tokens", "4", "--completion-tokens", "8"])
    assert "--generations" in capsys.readouterr().err


def test_the_design_rule_is_worded_from_its_bounds(monkeypatch):
    from paper_repro.analysis.design import candidates as dc

    assert "agreement >= 0.85" in dc.rule_words(60) and "within 60 min" in dc.rule_words(60)
    monkeypatch.setitem(dc.TARGETS, "agreement_min", (0.9, "min"))
    monkeypatch.setattr(dc, "WRONG_LIMIT", 0.1)
    words = dc.rule_words(45)
    assert "agreement >= 0.90" in words and "wrong share <= 0.1 (" in words and "within 45 min" in words


def test_a_new_command_is_one_new_module(tmp_path, monkeypatch, capsys):
    """A module dropped into the commands package is a command, listed and run; nothing else changes."""
    import paper_repro.commands as package

    (tmp_path / "hello.py").write_text(
        'NAME = "hello"\nHELP = "say hello"\n\n'
        "def add_parser(sub):\n    p = sub.add_parser(NAME, help=HELP)\n"
        '    p.add_argument("--to", default="world")\n    return p\n\n'
        'def run(args):\n    print(f"hello {args.to}")\n    return 0\n'
    )
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "paper_repro.commands.hello", raising=False)
    assert "say hello" in _help(["--help"], capsys)
    assert cli.main(["hello", "--to", "you"]) == 0
    assert capsys.readouterr().out == "hello you\n"
    (tmp_path / "broken.py").write_text('NAME = "broken"\n')
    with pytest.raises(TypeError, match=r"paper_repro\.commands\.broken lacks HELP, add_parser, run"):
        command_modules()


def test_an_error_names_the_command_and_exits_2(capsys):
    assert cli.main(["plan", "--profile", "no-such-profile", "--stage", "A"]) == 2
    assert capsys.readouterr().err.startswith("paper-repro plan: error: ")


def test_a_hub_model_this_machine_cannot_fetch_is_one_line(monkeypatch, capsys):
    """Offline, a pinned gpu-paper cell stops at its first hub model: one line naming how to get it,
    exit 2, no traceback (the ladder's second rung, docs/gpu-paper.md)."""
    from paper_repro.commands import cells
    from paper_repro.tasks.hub import HubUnavailableError

    def offline(args):
        raise HubUnavailableError(
            "model Qwen/Qwen2.5-1.5B-Instruct is not in the cache; run `hf download ...`"
        )

    monkeypatch.setattr(cells, "run", offline)
    assert cli.main(["cells", "--profile", "gpu-paper", "--setting", "1.5B"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("paper-repro cells: error: model Qwen/Qwen2.5-1.5B-Instruct") and err.count("\n") == 1
    )


def test_a_bench_shows_its_module_docstring():
    from paper_repro.bench import ledger
    from paper_repro.commands import bench

    assert bench._doc("ledger") == ledger.__doc__.strip()
