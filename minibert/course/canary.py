"""A one-time token at the end of every test cell: the grader's proof that the cell ran as written.

Student code runs in the same kernel as the tests after it, and can change how that kernel runs later
cells: one line that adds an IPython input transformer turning every cell into ``pass``, or a patched
``run_cell``, and every hidden test "passes" without running. So the grader appends to each test cell of
its private instructor copy a line that prints a token drawn for this grading alone; a test cell that ends
without an error and without its token did not run as written, and scores zero.

What this does not stop: code that reads the token out of each cell's source as it goes by and prints it.
That needs the tests run outside the student's kernel (INSTRUCTORS.md says so).
"""
from __future__ import annotations

import secrets
from pathlib import Path

import nbformat

MARK = "minibert-grader-ran-this-test:"
REASON = ("this test cell did not run as written: code before it changed how the notebook runs cells "
          "(an input transformer, a patched run_cell, ...), so its result cannot be trusted")


def test_cells(nb) -> list:
    """The autograder's test cells: graded code cells that are not answers."""
    return [cell for cell in nb.cells if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade")
            and not cell.metadata["nbgrader"].get("solution")]


def plant(notebook: Path) -> str:
    """Append ``print(<MARK><token>)`` to every test cell of ``notebook`` (the grader's private copy); the token."""
    token = secrets.token_hex(16)
    nb = nbformat.read(notebook, as_version=4)
    for cell in test_cells(nb):
        cell.source = f"{cell.source.rstrip()}\nprint({MARK + token!r})"
    nbformat.write(nb, notebook)
    return token


def did_not_run(autograded: Path, token: str) -> set[str]:
    """grade_ids of the test cells of ``autograded`` that ended with neither an error nor their token."""
    if not autograded.exists():
        return set()
    found = set()
    for cell in test_cells(nbformat.read(autograded, as_version=4)):
        outputs = cell.get("outputs", [])
        failed = any(output.output_type == "error" for output in outputs)
        printed = "".join(output.get("text", "") for output in outputs if output.output_type == "stream")
        if not failed and MARK + token not in printed:
            found.add(cell.metadata["nbgrader"]["grade_id"])
    return found


def ran_to_the_end_with_stderr(autograded: Path, token: str) -> set[str]:
    """grade_ids of the test cells of ``autograded`` that ended without an error and with their token, so every
    assertion in them held, but that wrote to stderr on the way (a warning from the student's code, say).
    nbgrader gives such a cell no points, as if it had failed; its token says it passed."""
    if not autograded.exists():
        return set()
    found = set()
    for cell in test_cells(nbformat.read(autograded, as_version=4)):
        outputs = cell.get("outputs", [])
        failed = any(output.output_type == "error" for output in outputs)
        printed = "".join(output.get("text", "") for output in outputs
                          if output.output_type == "stream" and output.get("name") == "stdout")
        warned = any(output.output_type == "stream" and output.get("name") == "stderr" for output in outputs)
        if warned and not failed and MARK + token in printed:
            found.add(cell.metadata["nbgrader"]["grade_id"])
    return found
