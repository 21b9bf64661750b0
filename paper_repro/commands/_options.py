"""What the command modules share: the help formatter, the argument types, the common options, and
options derived from a config dataclass's fields (:func:`dataclass_options`)."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from collections.abc import Callable, Mapping

PROFILE_HELP = "cpu-tiny, gpu-paper, or a profile YAML file"
RESULTS_HELP = "results directory (default: data/results/<profile>)"
RUNS_HELP = "directory of runs.csv (default: data/results/<profile>)"


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """An option's help ends with its default unless it says it (or has none); descriptions keep
    their line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "default" in text or default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        shown = " ".join(map(str, default)) if isinstance(default, list) else default
        return f"{text} (default: {shown})"


def add_command(
    subparsers: argparse._SubParsersAction, name: str, help: str, description: str
) -> argparse.ArgumentParser:
    """The parser of command ``name`` under ``paper-repro`` (``help``: its line in ``paper-repro
    --help``; ``description``: the top of its own ``--help``)."""
    return subparsers.add_parser(name, help=help, description=description, formatter_class=HelpFormatter)


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def seed(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"a seed is a non-negative integer, got {text}")
    return value


def default_of(owner: type | Callable, name: str):
    """The default of field ``name`` of dataclass ``owner``, or of parameter ``name`` of function
    ``owner``: a command's default read from its owner, never retyped."""
    if dataclasses.is_dataclass(owner):
        found = {f.name: f for f in dataclasses.fields(owner)}[name]
        if found.default_factory is not dataclasses.MISSING:
            return found.default_factory()
        return None if found.default is dataclasses.MISSING else found.default
    default = inspect.signature(owner).parameters[name].default
    return None if default is inspect.Parameter.empty else default


def dataclass_options(
    parser: argparse.ArgumentParser,
    owner: type,
    helps: Mapping[str, str],
    defaults: Mapping[str, object] = {},
) -> None:
    """One option per field of dataclass ``owner`` named in ``helps`` (``--field-name``, in that
    order): a bool field a flag, an int one a positive integer, a float one a float; its default the
    field's (``defaults`` overrides it; a field with neither is required)."""
    fields = {f.name: f for f in dataclasses.fields(owner)}
    for name, help in helps.items():
        kind = str(fields[name].type).split(" |")[0]  # the annotation as written (postponed evaluation)
        default = defaults[name] if name in defaults else default_of(owner, name)
        flag = "--" + name.replace("_", "-")
        if kind == "bool":
            parser.add_argument(flag, action="store_true", default=bool(default), help=help)
            continue
        kind_type = {"int": positive_int, "float": float}[kind]
        parser.add_argument(flag, type=kind_type, default=default, required=default is None, help=help)
