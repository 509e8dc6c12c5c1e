"""What of a notebook the autograder runs: the cells up to the last test, less the slow ones.

Grading a notebook executes it from the top. Cells after the last test cannot change a score, so neither
the student's process nor the grader's runs them (`minibert.course.check`). Some cells before it cannot
change one either but cost minutes: notebook 04's pre-training run sits before its last exercise, a
judgement question on stored results. The instructor marks such a cell as a read-only nbgrader cell
(``locked``, with a ``grade_id``) tagged ``skip-when-grading``; both processes skip the cells with those
grade_ids.

Only the instructor's notebook says what is skipped, so a student cannot skip a test by tagging it: a
submission is matched to the instructor's cells by grade_id, the same key nbgrader uses, and every test runs
in the grader's process whatever the submission says. A later cell that needed what a skipped cell made may
fail in grading; that costs nothing unless it is a test cell, and a test that needs the skipped work must not
sit behind a skipped cell (`skipped_cells` refuses the markup).
"""

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
