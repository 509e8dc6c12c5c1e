"""The grader's commands: release the course, grade a folder of notebooks, grade a class.

    python -m minibert.grading release [--source notebooks] [--out release]
    python -m minibert.grading autograde SUBMISSION_DIR [--source notebooks]
    python -m minibert.grading autograde-class CLASS_DIR [--course COURSE] [--source notebooks]

Exercises follow nbgrader's markup: a solution cell (``### BEGIN SOLUTION`` / ``### END SOLUTION``), then a
locked test cell with points (visible asserts, then ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS``);
all notebooks of a folder form one nbgrader assignment. Each command runs the ``nbgrader`` command line in
a course folder of its own (`minibert.grading.gradebook`), in a subprocess that keeps its kernels, event
loop and chatty log away from the caller; the log is shown only when nbgrader fails.
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

from tqdm.auto import tqdm

from .. import stops
from ..course import release_zip
from . import gradebook, intake, walls
from .gradebook import (
    ASSIGNMENT,
    CellGrade,
    GradingError,
    Scores,
    cause,
    new_course,
    prepare,
    run_nbgrader,
    test_points,
)

ZIP_NAME = f"{release_zip.FOLDER}.zip"
STUDENT = "student"
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
    gradebook.notebooks(source)
    check_release_target(source, out)
    out = Path(out)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        course = new_course(Path(tmp), source)
        run_nbgrader(course, "generate_assignment")
        out.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".release-", dir=out))
        shutil.copytree(course / "release" / ASSIGNMENT, staging / ASSIGNMENT)
        (staging / ASSIGNMENT / RELEASE_MARK).write_text("written by python -m minibert.grading release; "
                                                         "the next release replaces this folder\n")
        target = out / ASSIGNMENT
        if target.exists():
            target.rename(staging / "previous")
        (staging / ASSIGNMENT).rename(target)
        shutil.rmtree(staging)
    return target


def autograde(submission_dir, source="notebooks", timeout=600, run_as: str | None = None) -> Scores:
    """Grade the notebooks in ``submission_dir`` (a filled-in student release, or ``source`` itself as a sanity
    check) as a class of one (`autograde_class`): a notebook that is missing or not a notebook scores zero with
    the reason, the others are graded as usual. Only notebooks of ``source`` with graded cells run, each as far
    as its last test cell; ``timeout`` is seconds per cell and for the calls one test makes together;
    ``run_as`` (grading as root) is the account whose reach student code gets (`walls.user_to_run_as`)."""
    submission_dir = Path(submission_dir)
    if not submission_dir.is_dir():
        raise GradingError(f"submission folder not found: {submission_dir}")
    graded, user = prepare(source, timeout, run_as)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        return _grade(Path(tmp) / "course", {STUDENT: submission_dir}, source, graded, timeout, user)[STUDENT]


STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,99}")
MARK = ".minibert-course"  # in a course folder this command made: the one kind it grades into again


def autograde_class(class_dir, source="notebooks", timeout=600, run_as=None, course=None) -> dict[str, Scores]:
    """Each student's `Scores` (student id -> notebook -> test cell), graded in ``course`` (kept: its gradebook
    holds the scores) or in a throwaway course folder."""
    class_dir = Path(class_dir)
    if not class_dir.is_dir():
        raise GradingError(f"class folder not found: {class_dir}")
    students = sorted(p.name for p in class_dir.iterdir() if p.is_dir() and not p.is_symlink()
                      and not p.name.startswith("."))
    if not students:
        raise GradingError(f"no student folders in {class_dir}: it should hold one folder per student")
    if bad := [s for s in students if not STUDENT_ID.fullmatch(s)]:
        raise GradingError(f"{class_dir / bad[0]}: a student folder is named by the student's id (letters, digits "
                           "and _ . @ + -); rename it")
    graded, user = prepare(source, timeout, run_as)
    folders = {student: class_dir / student for student in students}
    if course is None:
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
            return _grade(Path(tmp) / "course", folders, source, graded, timeout, user)
    course = Path(course)
    if course.exists() and not (course / MARK).exists():
        raise GradingError(f"--course {course} exists and was not made by autograde-class: choose a new folder "
                           "(nothing of yours is changed)")
    if course.exists():
        raise GradingError(f"--course {course} holds an earlier grading: move it away to grade again")
    return _grade(course, folders, source, graded, timeout, user)


def _grade(course: Path, folders: dict[str, Path], source, graded: list[str], timeout, user) -> dict[str, Scores]:
    """Each student's submission (``folders``: student id -> folder) taken in, then one nbgrader autograde."""
    new_course(course, source)
    (course / MARK).write_text("made by python -m minibert.grading autograde-class\n")
    points = {name: test_points(Path(source) / name) for name in graded}
    reasons = {}
    for student, folder in folders.items():
        for name in graded:
            if why := intake.take(folder, name, course / "submitted" / student / ASSIGNMENT, source):
                reasons[student, name] = why
    gradebook.configure(course, timeout, user, intake.covered(source, next(iter(folders.values()))))
    run_nbgrader(course, "generate_assignment", private=True)
    gradebook.open_release(course)
    total = len(folders) * len(graded) - len(reasons)
    failure = ""
    with tqdm(total=total, desc="notebooks checked", unit="notebook") as bar:
        def progress():
            bar.update(len(list((course / ".minibert-check").glob("*/*/results.json"))) - bar.n)
        try:
            run_nbgrader(course, "autograde", private=True, progress=progress)
        except GradingError as e:  # some student's notebook nbgrader itself could not take: the others are graded
            failure = cause(str(e))
        progress()
    found = {}
    for student in folders:
        notebooks = {}
        for name in graded:
            why = reasons.get((student, name))
            if not why and not (course / "autograded" / student / ASSIGNMENT / name).exists():
                why = f"nbgrader could not grade {name}: {failure or 'see its log'}"
            notebooks[Path(name).stem] = ({g: CellGrade(0.0, most, why) for g, most in points[name].items()} if why
                                          else gradebook.scores(course, student, name))
        found[student] = Scores(notebooks)
    return found


def summary(scores: dict[str, Scores]) -> str:
    """One line a student (score / most, what was lost), then the class's mean."""
    width = max(len(s) for s in scores)
    lines = []
    for student, result in scores.items():
        lost = [f"{g}: {c.error[:60]}" for cells in result.notebooks.values() for g, c in cells.items()
                if c.score < c.max_score]
        lines.append(f"{student:<{width}}  {result.score:g} / {result.max_score:g}" +
                     (f"  ({'; '.join(lost[:3])}{' ...' if len(lost) > 3 else ''})" if lost else ""))
    mean = sum(r.score for r in scores.values()) / len(scores)
    lines.append(f"{'mean':<{width}}  {mean:.1f} / {next(iter(scores.values())).max_score:g}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minibert.grading", description=__doc__.split("\n")[0])
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
        command.add_argument("--timeout", type=int, default=600,
                             help="seconds per cell, and for the calls one test makes together (default: 600)")
        command.add_argument("--run-as", metavar="USER", help="grading as root: the account whose reach student code "
                             f"gets (default: $MINIBERT_GRADER_RUN_AS, else {walls.DEFAULT_USER}), as an id of its "
                             "own; not root, student code runs as you")
    args = parser.parse_args(argv)
    with stops.as_ctrl_c():  # SIGTERM or SIGHUP: nbgrader, the checker and the student's process end too
        try:
            if args.command == "release":
                folder = release(args.source, args.out)
                print(f"student release written to {folder}")
                print(f"for an LMS or JupyterHub: {release_zip.write(folder, Path(args.out) / ZIP_NAME)} "
                      f"(unzip, then python3 course.py lab in {release_zip.FOLDER}/)")
            elif args.command == "autograde-class":
                print(summary(autograde_class(args.class_dir, args.source, args.timeout, args.run_as, args.course)))
            else:
                print(autograde(args.submission_dir, args.source, args.timeout, args.run_as).table())
        except (GradingError, FileNotFoundError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt as e:  # what it started has ended; the gradebook holds what was scored before
            print(f"grading interrupted{f': {e}' if str(e) else ''}", file=sys.stderr)
            return 130
    return 0
