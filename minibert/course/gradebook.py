"""The nbgrader course folder a grading works in: the instructor notebooks checked and copied in, a
submission taken in as data, the grader's configuration, nbgrader run on it, the scores read back from its
gradebook.

A submission is taken in as regular files only: its notebook, checked to be one, and its other files
(`submitted_files`), never through a link, a named pipe or a device. The student's
process gets those files over a pipe; nothing of the course folder is ever within its reach.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from . import graded_run, walls
from .nbgrader_log import without_stack_frames
from .scores import CellGrade, with_errors

MOST_FILES, MOST_BYTES, MOST_DEPTH = 1000, 200 * 2**20, 16  # what a submission may bring besides its notebooks
CONFIG = """c.Autograde.autograde_preprocessors = [
    "minibert.course.execute.WalledExecute", "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor", "nbgrader.preprocessors.LimitOutput",
    "nbgrader.preprocessors.SaveAutoGrades", "nbgrader.preprocessors.ClearHiddenTests",
    "nbgrader.preprocessors.AssignLatePenalties", "nbgrader.preprocessors.CheckCellMetadata"]
"""


def submitted_files(folder: Path, course_files=frozenset()) -> list[dict]:
    """The submission's files besides its notebooks, for the student's process: regular files only (no links,
    pipes or devices, nothing hard-linked), found without recursion within `MOST_FILES`, `MOST_BYTES` and
    `MOST_DEPTH`, and none that the course ships beside its notebooks (``course_files``: its own are used)."""
    found, total, queue = [], 0, [(folder, Path("."))]
    while queue:
        here, relative = queue.pop()
        try:
            names = sorted(os.listdir(here))
        except OSError:
            continue
        for name in names:
            path = here / name
            info = path.lstat()
            if name.startswith(".") or name.endswith(".ipynb") or (relative == Path(".") and name in course_files):
                continue
            if stat.S_ISDIR(info.st_mode):
                if len(relative.parts) < MOST_DEPTH and name != "__pycache__":
                    queue.append((path, relative / name))
            elif stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and len(found) < MOST_FILES and \
                    total + info.st_size <= MOST_BYTES:
                found.append({"path": str(relative / name), "from": str(path)})
                total += info.st_size
    return found


ASSIGNMENT = "notebooks"
IGNORED = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc", "CONVENTIONS.md",  # authors' notes stay home
                                 "my_bert.py")  # notebook 03 writes it from the capstone: a solution when the instructor runs it


class GradingError(RuntimeError):
    """The course cannot be released or graded; the message says which file and why."""


def prepare(source, timeout, run_as) -> tuple[list[str], object]:
    """Before grading: the notebooks of ``source`` that have tests, and the account student code runs as;
    a bad ``timeout``, markup or account is refused with what to do."""
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:
        raise GradingError(f"--timeout must be a positive number of seconds per cell, got {timeout!r}: without one, "
                           "a submission that loops forever stops the whole class's grading")
    graded = [nb.name for nb in notebooks(source) if graded_cells(nb)]
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


def covered(source, submission_dir: Path) -> list[Path]:
    """What the student's process must not see: the instructor notebooks, the class's submissions, the git
    history of the checkout they live in (every hidden test), and the course's own instructor notebooks, tests
    and history in the checkout the library runs from (the student's process reads the library there)."""
    import minibert

    found = [Path(source).resolve(), submission_dir.resolve().parent]
    found += [folder / ".git" for folder in [Path(source).resolve(), *Path(source).resolve().parents]
              if (folder / ".git").exists()][:1]
    checkout = Path(minibert.__file__).resolve().parents[1]
    found += [checkout / name for name in (".git", "notebooks", "tests")]
    return list(dict.fromkeys(p for p in found if p.exists()))


def test_points(notebook: Path) -> dict[str, float]:
    """grade_id -> points of each test cell of an instructor notebook."""
    return {c.metadata.nbgrader["grade_id"]: float(c.metadata.nbgrader.get("points", 0))
            for c in nbformat.read(notebook, as_version=4).cells if c.metadata.get("nbgrader", {}).get("grade")}


def notebooks(source) -> list[Path]:
    """The source notebooks, after nbgrader's own metadata validation (schema version 3, grade ids
    present and unique, points on graded cells) and ours (`graded_run`), so a mistake is reported
    with its file."""
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
            graded_run.skipped_cells(path)
        except graded_run.MarkupError as e:
            raise GradingError(str(e)) from None
        except ValidationError as e:
            raise GradingError(f"{path}: invalid nbgrader markup: {e.message}") from None
        except (SchemaTooOldError, SchemaTooNewError) as e:
            raise GradingError(f"{path}: {e}; nbgrader 0.9 needs schema_version 3") from None
    return notebooks


def graded_cells(notebook) -> list[str]:
    """grade_ids of the cells that score points (the test cells, in the course's convention)."""
    return [cell.metadata.nbgrader["grade_id"] for cell in nbformat.read(notebook, as_version=4).cells
            if cell.metadata.get("nbgrader", {}).get("grade")]


def new_course(root: Path, source, only=None) -> Path:
    """A fresh nbgrader course directory holding ``source`` (or only its notebooks ``only``)."""
    source = Path(source)
    skip = set()
    if only is not None:
        skip = {nb.name for nb in source.glob("*.ipynb")} - set(only)
    shutil.copytree(source, root / "source" / ASSIGNMENT,
                    ignore=lambda d, names: IGNORED(d, names) | (skip if Path(d) == source else set()))
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
                                  umask=0o077 if private else -1)
        while result.poll() is None:
            if progress is not None:
                progress()
            time.sleep(0.5)
        output.seek(0)
        text = output.read()
    if result.returncode != 0:
        log = text.splitlines()
        start = max([i for i, line in enumerate(log) if "Converting notebook" in line], default=0)
        raise GradingError(f"nbgrader {command} failed:\n" + "\n".join(without_stack_frames(log[start:])))


def not_plain_files(folder, names) -> set[str]:
    """What of a submission the grader does not take: a submission is data, so only regular files and
    folders. A symbolic link would be followed by the grader, and what it points at copied in; a hard link
    can be another name of a file the grader may read; a named pipe would block the copy forever."""
    skipped = set()
    for name in names:
        info = os.lstat(os.path.join(folder, name))
        if stat.S_ISDIR(info.st_mode):
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            skipped.add(name)
    return skipped


def take(submission_dir: Path, name: str, target: Path, source) -> str:
    """Copy notebook ``name`` of ``submission_dir`` and its other files into ``target`` (nbgrader's
    ``submitted/<student>/<assignment>``); why it cannot be graded, or "" if it can."""
    submitted = Path(submission_dir) / name
    if not submitted.exists() and not submitted.is_symlink():
        return "not submitted"
    if not_plain_files(submission_dir, [name]):  # read as data: a named pipe would block, a link reach elsewhere
        return f"{name} is not a plain file (a link or a named pipe): submit the notebook file Jupyter saved"
    try:
        nbformat.validate(nbformat.read(submitted, as_version=4))
    except Exception as e:  # JSON, schema or encoding: whatever keeps it from being a notebook
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"{name} is not a readable notebook ({first[:120]}); submit the file Jupyter saved"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(submitted, target / name, follow_symlinks=False)
    for file in submitted_files(Path(submission_dir), set(os.listdir(source))):
        (target / file["path"]).parent.mkdir(parents=True, exist_ok=True)
        if not (target / file["path"]).exists():
            shutil.copyfile(file["from"], target / file["path"], follow_symlinks=False)
    return ""


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


def scores(course: Path, student: str, name: str, submitted: Path, assignment="notebooks") -> dict[str, CellGrade]:
    """One notebook's grades from the gradebook, each lost point with its reason and each test's notes."""
    from nbgrader.api import Gradebook  # imported here: nbgrader takes seconds to import

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as book:
        notebook = next(nb for nb in book.find_submission(assignment, student).notebooks
                        if nb.name == Path(name).stem)
        grades = {g.name: (g.score, g.max_score) for g in notebook.grades}
    present = {c.metadata.get("nbgrader", {}).get("grade_id") for c in nbformat.read(submitted, as_version=4).cells}
    scored = with_errors(grades, course / "autograded" / student / assignment / name, present)
    results = course / ".minibert-check" / student / Path(name).stem / "results.json"
    notes = {g: r.get("notes", []) for g, r in json.loads(results.read_text()).items()} if results.exists() else {}
    return {g: CellGrade(c.score, c.max_score, c.error, tuple(notes.get(g, ()))) for g, c in scored.items()}
