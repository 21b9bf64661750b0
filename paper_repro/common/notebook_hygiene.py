"""Whether an executed notebook is fit to commit (:func:`notebook_problems`): no trainer log dicts or
warnings in its outputs, no absolute path of this machine, no oversized output.

``tests/test_notebook_hygiene.py`` runs it on every committed executed notebook.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

# What an executed notebook that is committed must not show (:func:`notebook_problems`)
OUTPUT_LIMIT = 100_000  # characters of one output's JSON
LOG_DICT = re.compile(r"\{'(loss|train_runtime)': [^\n]{0,40}")  # a trainer's printed log dict
WARNING_LINE = re.compile(r"^.*\w+Warning: .*$", re.MULTILINE)
ABSOLUTE_PATH = re.compile(r"(/work/|/tmp/|/home/|/root/|site-packages)[^\s\"']*")


def notebook_problems(path: str | Path) -> list[str]:
    """What keeps the executed notebook at ``path`` from being committed as it is: trainer log dicts
    and warnings in its text outputs, absolute paths (of this machine: its checkout, temporary files,
    home, site-packages) in its outputs or metadata, and any output over :data:`OUTPUT_LIMIT`. One
    line per problem; none for a clean notebook. Images are checked for size only."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    problems = [f"metadata: absolute path {m[0]}" for m in ABSOLUTE_PATH.finditer(json.dumps(nb.metadata))]
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            where = f"cell {index} {output.output_type}"
            size = len(json.dumps(output))
            if size > OUTPUT_LIMIT:
                problems.append(f"{where}: {size // 1000} kB output")
            text = _output_text(output)
            for kind, pattern in (
                ("log dict", LOG_DICT),
                ("warning", WARNING_LINE),
                ("absolute path", ABSOLUTE_PATH),
            ):
                problems += [f"{where}: {kind} {m[0][:120]}" for m in pattern.finditer(text)]
    return problems


def _output_text(output) -> str:
    """The text of one notebook output: a stream's, an error's traceback, a value's text forms (not
    its images, whose base64 could match anything)."""
    if output.output_type == "stream":
        return output.text
    if output.output_type == "error":
        return "\n".join(output.traceback)
    return "\n".join(str(v) for k, v in output.get("data", {}).items() if not k.startswith("image/"))
