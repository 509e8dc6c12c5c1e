"""Step 5, score: the nbgrader course folder a grading works in, and the scores read back from its gradebook.

The instructor notebooks are checked (nbgrader's metadata validation and the course's own markup) and
copied into a course folder of the grader's own; nbgrader's autograde runs there with `WalledExecute`
(`minibert.grading.execute`) in its chain, and each test cell's grade comes back with why it lost points.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import stopping, walls

CONFIG = """c.Autograde.autograde_preprocessors = [
    "minibert.grading.execute.WalledExecute", "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor", "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades", "nbgrader.preprocessors.ClearHiddenTests",
    "nbgrader.preprocessors.AssignLatePenalties", "nbgrader.preprocessors.CheckCellMetadata"]
"""
# A cell that cannot change a score but costs minutes (notebook 04's pre-training run, before a judgement
# question on stored results) is a locked nbgrader cell with this tag: neither process runs it. Only the
# instructor's notebook says what is skipped, so a student cannot skip a test by tagging it.
SKIP_TAG = "skip-when-grading"


@dataclass(frozen=True)
class CellGrade:
    score: float
    max_score: float
    error: str = ""  # the check that failed and its message: why points were lost
    notes: tuple[str, ...] = ()  # integrity notes for the person grading (the library's answer used?): never a score
    # what the student's cells did wrong since the previous test (a cell that raised or ran out of time): in the
    # message of a failed test; on the instructor's own notebook, a sign that a cell fails when graded
    before: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scores:
    """An autograde's result: notebook name -> grade_id of each test cell -> its grade."""

    notebooks: dict[str, dict[str, CellGrade]]

    @property
    def score(self) -> float:
        return sum(cell.score for cells in self.notebooks.values() for cell in cells.values())

    @property
    def max_score(self) -> float:
        return sum(cell.max_score for cells in self.notebooks.values() for cell in cells.values())

    def table(self) -> str:
        width = max([len("total")] + [len(f"  {g}") for c in self.notebooks.values() for g in c] +
                    [len(name) for name in self.notebooks])
        lines = []
        for name, cells in self.notebooks.items():
            score, max_score = (sum(getattr(c, a) for c in cells.values()) for a in ("score", "max_score"))
            lines.append(f"{name:<{width}}  {score:g} / {max_score:g}")
            for grade_id, cell in cells.items():
                why = f"  ({cell.error})" if cell.error else ""
                lines.append(f"{'  ' + grade_id:<{width}}  {cell.score:g} / {cell.max_score:g}{why}")
                lines += [f"{'':<{width}}    note: {note}" for note in cell.notes]
        lines.append(f"{'total':<{width}}  {self.score:g} / {self.max_score:g}")
        return "\n".join(lines)


ASSIGNMENT = "notebooks"
IGNORED = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc", "CONVENTIONS.md",  # authors' notes stay home
                                 "my_bert.py")  # notebook 03b writes it from the capstone: a solution when the instructor runs it


class GradingError(RuntimeError):
    """The course cannot be released or graded; the message says which file and why."""


def prepare(source, timeout, run_as) -> tuple[list[str], object]:
    """Before grading: the notebooks of ``source`` that have tests, and the account student code runs as;
    a bad ``timeout``, markup or account is refused with what to do."""
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:
        raise GradingError(f"--timeout must be a positive number of seconds per cell, got {timeout!r}: without one, "
                           "a submission that loops forever stops the whole class's grading")
    graded = [nb.name for nb in notebooks(source) if test_points(nb)]
    if not graded:
        raise GradingError(f"no graded cells in any notebook of {source}")
    try:
        user = walls.user_to_run_as(run_as)
        if user is not None:
            walls.check_user(user)
    except walls.WallError as e:
        raise GradingError(str(e)) from None
    if user is not None and (why := walls.bubblewrap_missing()):
        print(f"note: student code runs as an id of its own, apart from the checks, but not in bubblewrap: {why}; "
              "it can read what that id may read on this machine", file=sys.stderr)
    if user is None and hasattr(os, "geteuid") and os.geteuid() == 0:
        print("warning: student code runs as root (--run-as root): it runs apart from the checks, but can read the "
              "hidden tests on disk and change anything; do this only in a throwaway container", file=sys.stderr)
    return graded, user


def test_points(notebook: Path) -> dict[str, float]:
    """grade_id -> points of each test cell of an instructor notebook."""
    return {c.metadata.nbgrader["grade_id"]: float(c.metadata.nbgrader.get("points", 0))
            for c in nbformat.read(notebook, as_version=4).cells if c.metadata.get("nbgrader", {}).get("grade")}


def notebooks(source) -> list[Path]:
    """The source notebooks, after nbgrader's own metadata validation (schema version 3, grade ids present and
    unique, points on graded cells) and the course's (`skipped_cells`), so a mistake is reported with its file."""
    from nbgrader.nbgraderformat import MetadataValidator, SchemaTooNewError, SchemaTooOldError, ValidationError

    source = Path(source)
    if not source.is_dir():
        raise GradingError(f"source folder not found: {source}")
    notebooks = sorted(source.glob("*.ipynb"))
    if not notebooks:
        raise GradingError(f"no notebooks in {source}")
    for path in notebooks:
        try:
            MetadataValidator().validate_nb(nbformat.read(path, as_version=4))
        except ValidationError as e:
            raise GradingError(f"{path}: invalid nbgrader markup: {e.message}") from None
        except (SchemaTooOldError, SchemaTooNewError) as e:
            raise GradingError(f"{path}: {e}; nbgrader 0.9 needs schema_version 3") from None
        skipped_cells(path)
    return notebooks


def skipped_cells(notebook) -> set[str]:
    """grade_ids of the instructor notebook's cells tagged `SKIP_TAG`. Each must be a locked nbgrader cell that is
    neither a solution nor a test: its grade_id finds the submission's copy, and a test or solution always runs."""
    skipped = set()
    for i, cell in enumerate(nbformat.read(notebook, as_version=4).cells):
        if SKIP_TAG not in cell.metadata.get("tags", []):
            continue
        meta = cell.metadata.get("nbgrader", {})
        if not (meta.get("locked") and meta.get("grade_id")) or meta.get("grade") or meta.get("solution"):
            raise GradingError(f"{notebook}, cell {i}: a cell tagged {SKIP_TAG!r} must be a read-only nbgrader cell "
                               "(locked, with a grade_id) and neither a solution nor a test; make it one in Jupyter's "
                               "nbgrader toolbar, or remove the tag")
        skipped.add(meta["grade_id"])
    return skipped


def new_course(root: Path, source) -> Path:
    """A fresh nbgrader course directory holding ``source``."""
    shutil.copytree(source, root / "source" / ASSIGNMENT, ignore=IGNORED)
    return root


def run_nbgrader(course: Path, command: str, *options: str, private: bool = False, progress=None) -> None:
    """Run one nbgrader command on ``course``; on failure raise with the part of its log that
    explains it (from the notebook it was converting on). ``private``: what it writes (gradebook,
    autograded copies) is readable by the grader's user only. ``progress()`` is called every second meanwhile."""
    def prepend(variable, folder):
        return os.pathsep.join(filter(None, [str(folder), os.environ.get(variable)]))

    env = {**os.environ, "PATH": prepend("PATH", Path(sys.executable).parent)}  # the gradebook shells out to `alembic`
    args = [sys.executable, "-m", "nbgrader", command, ASSIGNMENT, f"--CourseDirectory.root={course}", *options]
    # The log goes to a file, not a pipe: a process that outlived nbgrader and still held the pipe open would
    # make reading to its end wait forever.
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as output:
        result = subprocess.Popen(args, cwd=course, env=env, stdout=output, stderr=subprocess.STDOUT,
                                  umask=0o077 if private else -1, preexec_fn=stopping.ends_with_this_process())
        stopping.wait(result, progress)  # a stop of this process stops nbgrader, and what it runs, too
        output.seek(0)
        text = output.read()
    if result.returncode != 0:
        log = text.splitlines()
        start = max([i for i, line in enumerate(log) if "Converting notebook" in line], default=0)
        raise GradingError(f"nbgrader {command} failed:\n" + "\n".join(without_stack_frames(log[start:])))


def configure(course: Path, timeout: int, user, hidden) -> None:
    """The course's ``nbgrader_config.py``: nbgrader's autograde chain with the walled pipeline in it."""
    (course / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821 (nbgrader's config loader defines it)\n" + CONFIG +
        f"c.WalledExecute.timeout = {timeout}\nc.WalledExecute.run_as = {(user.pw_name if user else '')!r}\n"
        f"c.WalledExecute.covered = {[str(p) for p in hidden]!r}\n")
    for private in ("source", "submitted"):  # the instructor copy, hidden tests included: the grader's only
        if (course / private).is_dir():
            (course / private).chmod(0o700)


def open_release(course: Path, assignment="notebooks") -> None:
    """Let everyone read the release of a course folder of the grader's own (what students were given
    anyway): the student's process then reads its files where they are, not a copy."""
    release = course / "release" / assignment
    for path in [course / "release", release, *release.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def scores(course: Path, student: str, name: str, assignment=ASSIGNMENT) -> dict[str, CellGrade]:
    """One notebook's grades from the gradebook, each lost point with its reason and each test's notes."""
    from nbgrader.api import Gradebook  # imported here: nbgrader takes seconds to import

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as book:
        notebook = next(nb for nb in book.find_submission(assignment, student).notebooks
                        if nb.name == Path(name).stem)
        grades = {g.name: (g.score, g.max_score) for g in notebook.grades}
    submitted = course / "submitted" / student / assignment / name  # the grader's copy, taken in as data
    present = {c.metadata.get("nbgrader", {}).get("grade_id") for c in nbformat.read(submitted, as_version=4).cells}
    scored = with_errors(grades, course / "autograded" / student / assignment / name, present)
    results = course / ".minibert-check" / student / Path(name).stem / "results.json"
    checked = json.loads(results.read_text()) if results.exists() else {}
    return {g: CellGrade(c.score, c.max_score, c.error, tuple(checked.get(g, {}).get("notes", [])),
                         tuple(checked.get(g, {}).get("before", []))) for g, c in scored.items()}


def with_errors(grades: dict[str, tuple[float, float]], autograded: Path, present: set) -> dict[str, CellGrade]:
    """Each test cell's grade with the error it raised in the autograded notebook, or why it could not run: a
    test cell missing from the submission (``present``: the grade_ids it has)."""
    errors = {}
    for cell in nbformat.read(autograded, as_version=4).cells:
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
                errors[grade_id] = f"{output.ename}: {output.evalue}".rstrip(": ")
    for grade_id in grades:
        if grade_id not in present and grade_id not in errors:
            errors[grade_id] = ("this test cell is not in the submitted notebook (deleted, or its nbgrader metadata "
                                "removed): copy it back from the release")
    return {grade_id: CellGrade(score or 0.0, max_score, "" if score == max_score else errors.get(grade_id, ""))
            for grade_id, (score, max_score) in grades.items()}


# nbgrader ends a failed run with a generic line ("... see the above traceback"); the cause is the exception
# line above it: the grader's check that could not run, a notebook nbgrader could not read.
EXCEPTION = re.compile(r"\s*[\w.]+(Error|Exception): ")
CAUSE = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b.*)$")


def without_stack_frames(log: list[str]) -> list[str]:
    """The log with each traceback cut down to its last line, the exception and its message."""
    kept, in_traceback = [], False
    for line in log:
        if "Traceback (most recent call last)" in line:
            in_traceback = True
        elif in_traceback and EXCEPTION.match(line):
            kept.append(line.strip())
            in_traceback = False
        elif not in_traceback:
            kept.append(line)
    return kept


def cause(message: str) -> str:
    """The last exception line of a failed nbgrader run that is not nbgrader's own summary; else its last line."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    found = [line for line in lines if CAUSE.match(line) and "see the above traceback" not in line]
    return (found[-1] if found else lines[-1] if lines else "nbgrader gave no output")[:200]
