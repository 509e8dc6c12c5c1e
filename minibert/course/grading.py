"""Student release and autograding of the course notebooks, headless, with nbgrader's own tools.

Exercises follow nbgrader's markup: a solution cell (``### BEGIN SOLUTION`` / ``### END SOLUTION``)
followed by a locked test cell with points (visible asserts, then ``### BEGIN HIDDEN TESTS`` /
``### END HIDDEN TESTS``). All notebooks of a folder form one nbgrader assignment.

nbgrader works on a course directory (``source/<assignment>/``, ``release/``,
``submitted/<student>/<assignment>/``, ``autograded/``, ``gradebook.db``). Each call here builds a
throwaway one, so the repository never holds nbgrader state, and runs the ``nbgrader`` command
line in a subprocess: that keeps its kernels, event loop, database sessions and chatty log away
from the caller (a pytest run, a notebook, the ``minibert`` command); the log is shown only when
nbgrader fails.

    python -m minibert.course.grading release [--source notebooks] [--out release]
    python -m minibert.course.grading autograde SUBMISSION_DIR [--source notebooks]

``release`` writes the nbgrader release folder (graders keep it) and ``minibert-course.zip`` beside
it, the student release with the package for an LMS or JupyterHub (`minibert.course.release_zip`).
"""
import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

from . import gradebook, release_zip, walls
from .gradebook import (
    ASSIGNMENT,
    GradingError,
    covered,
    graded_cells,  # noqa: F401 (part of this module's interface: which notebooks have tests)
    new_course,
    notebooks,
    prepare,
    run_nbgrader,
    test_points,
)
from .nbgrader_log import cause
from .scores import CellGrade, Scores

ZIP_NAME = f"{release_zip.FOLDER}.zip"
STUDENT = "student"


def exercises(notebook) -> list[tuple[str, str, float]]:
    """(solution grade_id, test grade_id, points) of each solution cell directly followed by a
    graded test cell: the course's exercise convention."""
    cells = [c for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code"]
    meta = [c.metadata.get("nbgrader", {}) for c in cells]
    return [(m["grade_id"], n["grade_id"], n["points"]) for m, n in zip(meta, meta[1:])
            if m.get("solution") and n.get("grade") and not n.get("solution") and n.get("points", 0) > 0]


RELEASE_MARK = ".minibert-release"  # in every folder release() writes: the one kind of folder it may replace


def check_release_target(source="notebooks", out="release") -> None:
    """Refuse an ``out`` whose release would overlap the instructor notebooks, or replace a folder or zip
    that `release` did not write: the release replaces only its own earlier output, never the user's files."""
    source_dir, target = Path(source).resolve(), (Path(out) / ASSIGNMENT).resolve()
    if target == source_dir or source_dir in target.parents or target in source_dir.parents:
        raise GradingError(f"--out {out} would write the release to {target}, which overlaps the instructor "
                           f"notebooks in {source}; choose an --out folder outside them (default: release)")
    ours = (target / RELEASE_MARK).is_file()
    if target.exists() and not ours:
        raise GradingError(f"{target} exists and was not written by `release`; refusing to replace it: move it "
                           "away or choose another --out")
    if (Path(out) / ZIP_NAME).exists() and not ours:
        raise GradingError(f"{Path(out) / ZIP_NAME} exists and was not written by `release`; refusing to replace "
                           "it: move it away or choose another --out")


def release(source="notebooks", out="release") -> Path:
    """Write the student version of every notebook in ``source`` to ``out/notebooks``.

    nbgrader's generate_assignment checks the markup, replaces solutions with
    ``raise NotImplementedError()``, removes hidden tests, clears outputs and locks test cells.
    The new release replaces the old one only once it is complete, and only if `release` wrote it
    (`check_release_target`).
    """
    notebooks(source)
    check_release_target(source, out)
    out = Path(out)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        course = new_course(Path(tmp), source)
        run_nbgrader(course, "generate_assignment")
        out.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".release-", dir=out))
        shutil.copytree(course / "release" / ASSIGNMENT, staging / ASSIGNMENT)
        (staging / ASSIGNMENT / RELEASE_MARK).write_text("written by python -m minibert.course.grading release; "
                                                         "the next release replaces this folder\n")
        target = out / ASSIGNMENT
        if target.exists():
            target.rename(staging / "previous")
        (staging / ASSIGNMENT).rename(target)
        shutil.rmtree(staging)
    return target


def autograde(submission_dir, source="notebooks", timeout=600, run_as: str | None = None) -> Scores:
    """Grade the notebooks in ``submission_dir`` with nbgrader's autograder, its kernel replaced by the walled
    pipeline (`minibert.course.execute`): copy in, run walled, hand back data, check, score.

    ``submission_dir`` is a filled-in student release, or ``source`` itself as a sanity check. Only notebooks of
    ``source`` with graded cells are executed, each only as far as its last test cell, less the cells the
    instructor marks slow (`graded_run`). ``timeout`` is seconds per cell (and per call a test makes).

    Each notebook is graded on its own: one that is missing, is not a notebook, or cannot be graded scores zero
    with the reason, and the others are graded as usual. The student's code runs in a process of its own
    (`minibert.course.walls`); every test runs in another, on the instructor's notebook, with the student's
    definitions reached as data (`minibert.course.check`). A grader started as root runs each submission as a
    user id of its own inside bubblewrap; ``run_as`` (default ``nobody``) is the account whose reach is checked.
    """
    submission_dir = Path(submission_dir)
    if not submission_dir.is_dir():
        raise GradingError(f"submission folder not found: {submission_dir}")
    graded, user = prepare(source, timeout, run_as)
    hidden = covered(source, submission_dir)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        return Scores({Path(name).stem: _autograde_one(Path(tmp) / Path(name).stem, submission_dir, source, name,
                                                       timeout, user, hidden) for name in sorted(graded)})


def _autograde_one(root: Path, submission_dir: Path, source, name: str, timeout: int,
                   user=None, hidden=()) -> dict[str, CellGrade]:
    """One notebook's grades, in an nbgrader course of its own: nbgrader's, or zero for every test cell with
    the reason it could not run."""
    points = test_points(Path(source) / name)
    course = new_course(root, source, only=[name])
    if why := gradebook.take(submission_dir, name, course / "submitted" / STUDENT / ASSIGNMENT, source):
        return {grade_id: CellGrade(0.0, most, why) for grade_id, most in points.items()}
    gradebook.configure(course, timeout, user, hidden)
    try:
        run_nbgrader(course, "generate_assignment", private=True)  # fills the gradebook with the test cells
        gradebook.open_release(course)
        run_nbgrader(course, "autograde", private=True)
    except GradingError as e:
        return {grade_id: CellGrade(0.0, most, f"nbgrader could not grade {name}: {cause(str(e))}")
                for grade_id, most in points.items()}
    return gradebook.scores(course, STUDENT, name, submission_dir / name)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minibert.course.grading", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("release", help="write the student version of the notebooks")
    make.add_argument("--source", default="notebooks", help="instructor notebooks (default: notebooks)")
    make.add_argument("--out", default="release",
                      help=f"the release goes to OUT/notebooks and OUT/{ZIP_NAME} (default: release)")
    whole = commands.add_parser("autograde-class", help="grade a class: a folder with one folder per student")
    whole.add_argument("class_dir", help="folder of students' folders, each named by the student's id")
    whole.add_argument("--course", help="the nbgrader course folder to grade in and keep (its gradebook.db is what "
                       "formgrader shows); default: a throwaway one")
    grade = commands.add_parser("autograde", help="grade a folder of submitted notebooks")
    grade.add_argument("submission_dir", help="folder of submitted notebooks")
    for command in (grade, whole):
        command.add_argument("--source", default="notebooks", help="instructor notebooks (default: notebooks)")
        command.add_argument("--timeout", type=int, default=600, help="seconds per cell (default: 600)")
        command.add_argument("--run-as", metavar="USER", help="grading as root: the account whose reach student code "
                             f"gets (default: $MINIBERT_GRADER_RUN_AS, else {walls.DEFAULT_USER}), as an id of its "
                             "own; not root, student code runs as you")
    args = parser.parse_args(argv)
    try:
        if args.command == "release":
            folder = release(args.source, args.out)
            print(f"student release written to {folder}")
            print(f"for an LMS or JupyterHub: {release_zip.write(folder, Path(args.out) / ZIP_NAME)} "
                  f"(unzip, then python3 course.py lab in {release_zip.FOLDER}/)")
        elif args.command == "autograde-class":
            from .class_grading import autograde_class, summary
            print(summary(autograde_class(args.class_dir, args.source, args.timeout, args.run_as, args.course)))
        else:
            print(autograde(args.submission_dir, args.source, args.timeout, args.run_as).table())
    except (GradingError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
