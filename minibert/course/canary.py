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


def verdicts(autograded: Path, token: str) -> tuple[set[str], set[str]]:
    """Two sets of grade_ids, read from the test cells of ``autograded`` in one pass:

    - those that did not run as written: they ended with neither an error nor their token;
    - those that passed though nbgrader gave them nothing: they ended without an error and with their token
      on stdout, so every assertion in them held, but wrote to stderr on the way (a warning from the
      student's code, say), which nbgrader takes for a failure.
    """
    did_not_run, passed_with_stderr = set(), set()
    if not autograded.exists():
        return did_not_run, passed_with_stderr
    for cell in test_cells(nbformat.read(autograded, as_version=4)):
        outputs, grade_id = cell.get("outputs", []), cell.metadata["nbgrader"]["grade_id"]
        failed = any(output.output_type == "error" for output in outputs)
        streams = {name: "".join(o.get("text", "") for o in outputs if o.output_type == "stream" and o.get("name") == name)
                   for name in ("stdout", "stderr")}
        if not failed and MARK + token not in streams["stdout"] + streams["stderr"]:
            did_not_run.add(grade_id)
        elif not failed and MARK + token in streams["stdout"] and any(
                o.output_type == "stream" and o.get("name") == "stderr" for o in outputs):
            passed_with_stderr.add(grade_id)
    return did_not_run, passed_with_stderr
