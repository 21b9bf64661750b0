"""Rewrite the generated documents from the committed result tables: README.md's plain answer, the
whole of RESULTS.md (the answer in detail, every claim, the study in numbers) and the study facts the
documents state (paper_repro.analysis.report.readme and .facts)."""

from __future__ import annotations

import argparse

from paper_repro.commands._options import add_command

NAME = "report"
HELP = "rewrite README.md's answer, RESULTS.md and the documents' study facts from the committed tables"


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = add_command(subparsers, NAME, HELP, __doc__)
    p.add_argument("profile", nargs="?", default="cpu-tiny", help="the profile whose tables are read")
    return p


def run(args: argparse.Namespace) -> int:
    from paper_repro.analysis.report.facts import update_documents
    from paper_repro.analysis.report.readme import update_readme

    changed = update_readme(args.profile)
    print("README.md and RESULTS.md updated" if changed else "README.md and RESULTS.md already current")
    for path in update_documents(args.profile):
        print(f"{path.name}: facts updated")
    return 0
