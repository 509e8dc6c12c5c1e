"""What of a notebook the autograder runs: the cells up to the last test, less the slow ones.

Grading a notebook executes it from the top. Cells after the last test cannot change a score, so they
are cut. Some cells before it cannot change one either but cost minutes: notebook 04's pre-training
run sits before its last exercise, a judgement question on stored results. The instructor marks such
a cell as a read-only nbgrader cell (``locked``, with a ``grade_id``) tagged ``skip-when-grading``;
the grader drops the cells with those grade_ids from both copies before nbgrader runs them.

Only the instructor's notebook says what is skipped, so a student cannot skip a test by tagging it:
a submission is matched to the instructor's cells by grade_id, the same key nbgrader uses, and a
test cell that did not run scores zero (`minibert.course.canary`). A later cell that needed what a
skipped cell made may fail in grading; that costs nothing unless it is a test cell, and a test that
needs the skipped work must not sit behind a skipped cell (`skipped_cells` refuses the markup).
"""
from pathlib import Path

import nbformat

SKIP_TAG = "skip-when-grading"


class MarkupError(ValueError):
    """A notebook's grading markup is inconsistent: the message names the notebook and the cell."""


def skipped_cells(notebook) -> set[str]:
    """grade_ids of the instructor notebook's cells that grading does not run.

    Each must be a locked nbgrader cell that is neither a solution nor a test: the grade_id is how a
    submission's copy of the cell is found, and a test or a solution must always run."""
    skipped = set()
    for i, cell in enumerate(nbformat.read(notebook, as_version=4).cells):
        if SKIP_TAG not in cell.metadata.get("tags", []):
            continue
        meta = cell.metadata.get("nbgrader", {})
        if not (meta.get("locked") and meta.get("grade_id")) or meta.get("grade") or meta.get("solution"):
            raise MarkupError(f"{notebook}, cell {i}: a cell tagged {SKIP_TAG!r} must be a read-only "
                              "nbgrader cell (locked, with a grade_id) and neither a solution nor a test; make it "
                              "one in Jupyter's nbgrader toolbar, or remove the tag")
        skipped.add(meta["grade_id"])
    return skipped


def trim(notebook: Path, test_ids: set[str], skip_ids: set[str] = frozenset()) -> None:
    """Cut ``notebook`` after the last cell whose grade_id is in ``test_ids`` (if it has any) and drop
    the cells whose grade_id is in ``skip_ids``."""
    if not notebook.exists():
        return
    nb = nbformat.read(notebook, as_version=4)

    def grade_id(cell):
        return cell.metadata.get("nbgrader", {}).get("grade_id")

    positions = [i for i, cell in enumerate(nb.cells) if grade_id(cell) in test_ids]
    cells = nb.cells[:max(positions) + 1] if positions else nb.cells
    nb.cells = [cell for cell in cells if grade_id(cell) not in skip_ids or grade_id(cell) in test_ids]
    nbformat.write(nb, notebook)
