"""Rewrite the README's generated blocks (the plain answer, the answer in detail, the results) and the
study facts the documents state, from the committed result tables (paper_repro.analysis.report.readme
and .facts)."""

from __future__ import annotations

import argparse

from paper_repro.commands._options import add_command

NAME = "report"
HELP = "rewrite the README's generated results and the documents' study facts from the committed tables"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = add_command(subparsers, NAME, HELP, __doc__)
    p.add_argument("profile", nargs="?", default="cpu-tiny", help="the profile whose tables are read")
    return p


def run(args: argparse.Namespace) -> int:
    from paper_repro.analysis.report.facts import update_documents
    from paper_repro.analysis.report.readme import update_readme

    changed = update_readme(args.profile)
    print("README.md updated" if changed else "README.md already current")
    for path in update_documents(args.profile):
        print(f"{path.name}: facts updated")
    return 0
