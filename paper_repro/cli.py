"""paper-repro: where should RL post-training compute go? Plan, run and analyse IsoFLOP GRPO studies.

Run `paper-repro <command> --help` for a command's options.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Sequence

from paper_repro.commands import command_modules
from paper_repro.commands._options import HelpFormatter
from paper_repro.tasks.hub import HubUnavailableError


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """``paper-repro`` with one subcommand per module of :mod:`paper_repro.commands`. ``commands``:
    those whose options are added (None: every one); the others are listed by name and help line
    alone, so that running one command imports what it needs and no more."""
    parser = argparse.ArgumentParser(prog="paper-repro", description=__doc__, formatter_class=HelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    for module in command_modules():
        if commands is None or module.NAME in commands:
            module.add_parser(sub).set_defaults(func=module.run)
        else:
            sub.add_parser(module.NAME, help=module.HELP)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(commands=argv[:1])  # the command, where the first argument names one
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    # a refusal, a missing file, a hub model or dataset this machine cannot fetch: one line, no traceback
    except (ValueError, FileNotFoundError, HubUnavailableError) as err:
        print(f"paper-repro {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
