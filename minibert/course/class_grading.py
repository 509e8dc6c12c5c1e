"""A class graded at once: every student's submission in one nbgrader course, the scores in its gradebook.

    python -m minibert.course.grading autograde-class CLASS_DIR [--course COURSE] [--source notebooks]

``CLASS_DIR`` holds one folder per student, named by the student's id, as nbgrader's ``collect`` leaves
them. They are taken in as data (`minibert.course.gradebook`) and graded by one run of nbgrader's own
``autograde`` with the walled pipeline in its chain (`minibert.course.execute`), so the scores land in the
course's ``gradebook.db``, where formgrader, ``nbgrader export`` and ``generate_feedback`` find them. A
progress bar counts the notebooks checked; each takes at most its cells' time limits.
"""
from __future__ import annotations

import re
import tempfile
from pathlib import Path

from tqdm.auto import tqdm

from . import gradebook
from .gradebook import ASSIGNMENT, GradingError, covered, new_course, prepare, run_nbgrader, test_points
from .nbgrader_log import cause
from .scores import CellGrade, Scores

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
    if course is None:
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
            return _grade(Path(tmp) / "course", class_dir, students, source, graded, timeout, user)
    course = Path(course)
    if course.exists() and not (course / MARK).exists():
        raise GradingError(f"--course {course} exists and was not made by autograde-class: choose a new folder "
                           "(nothing of yours is changed)")
    if course.exists():
        raise GradingError(f"--course {course} holds an earlier grading: move it away to grade again")
    return _grade(course, class_dir, students, source, graded, timeout, user)


def _grade(course: Path, class_dir: Path, students: list[str], source, graded: list[str], timeout, user):
    new_course(course, source)
    (course / MARK).write_text("made by python -m minibert.course.grading autograde-class\n")
    points = {name: test_points(Path(source) / name) for name in graded}
    reasons = {}
    for student in students:
        for name in graded:
            target = course / "submitted" / student / ASSIGNMENT
            if why := gradebook.take(class_dir / student, name, target, source):
                reasons[student, name] = why
    gradebook.configure(course, timeout, user, covered(source, class_dir / students[0]))
    run_nbgrader(course, "generate_assignment", private=True)
    gradebook.open_release(course)
    total = len(students) * len(graded) - len(reasons)
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
    for student in students:
        notebooks = {}
        for name in graded:
            why = reasons.get((student, name))
            if not why and not (course / "autograded" / student / ASSIGNMENT / name).exists():
                why = f"nbgrader could not grade {name}: {failure or 'see its log'}"
            notebooks[Path(name).stem] = ({g: CellGrade(0.0, most, why) for g, most in points[name].items()} if why
                                          else gradebook.scores(course, student, name, class_dir / student / name))
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
