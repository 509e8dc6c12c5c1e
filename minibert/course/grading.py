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
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from . import bubblewrap, canary, graded_run, release_zip, review, sandbox
from .nbgrader_log import cause, kernel_trouble, without_stack_frames
from .scores import CellGrade, Scores, with_errors

ASSIGNMENT = "notebooks"
ZIP_NAME = f"{release_zip.FOLDER}.zip"
STUDENT = "student"
KERNEL = "minibert-grader"  # a kernelspec of our own: notebooks run in the Python that grades
IGNORED = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc", "CONVENTIONS.md",  # authors' notes stay home
                                 "my_bert.py")  # notebook 03 writes it from the capstone: a solution when the instructor runs it


class GradingError(RuntimeError):
    """The course cannot be released or graded; the message says which file and why."""


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
    _notebooks(source)
    check_release_target(source, out)
    out = Path(out)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        course = _course(Path(tmp), source)
        _nbgrader(course, "generate_assignment")
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


def autograde(submission_dir, source="notebooks", timeout=600, run_as: str | None = None,
              reviewed: bool = False) -> Scores:
    """Grade the notebooks in ``submission_dir`` with nbgrader's autograder.

    ``submission_dir`` is a filled-in student release, or ``source`` itself as a sanity check.
    Only notebooks of ``source`` with graded cells are executed (the others score nothing and may
    train for minutes), and each only as far as its last test cell: what comes after cannot change a
    score, and it is where the notebooks train models. Test cells come back from the source, hidden
    tests included, whatever the submission did to them. ``timeout`` is seconds per cell.

    Each notebook is graded on its own, in a course folder of its own: one that is missing, is not a
    notebook, or makes nbgrader fail (a dying kernel, duplicated cells) scores zero with the reason,
    and the others are graded as usual.

    A notebook whose own code could change how its hidden tests run (`minibert.course.review`: the
    kernel's hooks, a patched library, a rebound name the tests read, ...) is held: each test cell scores zero,
    and the reason names the cell and line. ``reviewed`` grades it as nbgrader scores it, once a person has
    read that code.

    A grader started as root runs the student code as ``run_as`` (default ``nobody``), which can reach
    only its own copy of the submitted notebook (`minibert.course.sandbox`); instructor notebooks or
    submissions that this user could still read are named in a warning. Not root, the student code
    runs as the grader (INSTRUCTORS.md says what that leaves to you).
    """
    submission_dir = Path(submission_dir)
    if not submission_dir.is_dir():
        raise GradingError(f"submission folder not found: {submission_dir}")
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:  # nbgrader reads 0 or less as none
        raise GradingError(f"--timeout must be a positive number of seconds per cell, got {timeout!r}: without one, "
                           "a submission that loops forever stops the whole class's grading")
    notebooks = _notebooks(source)
    graded = [nb.name for nb in notebooks if graded_cells(nb)]
    if not graded:
        raise GradingError(f"no graded cells in any notebook of {source}")
    try:
        user = sandbox.user_to_run_as(run_as)
        exposed = sandbox.check_user(user, notebooks + sandbox.secrets_beside(source, submission_dir)) if user else []
    except sandbox.SandboxError as e:
        raise GradingError(str(e)) from None
    if user is not None and (why := bubblewrap.missing()):
        print(f"note: student code runs in minibert's own sandbox, not in bubblewrap: {why}", file=sys.stderr)
    if user is None and hasattr(os, "geteuid") and os.geteuid() == 0:
        print("warning: student code runs as root (--run-as root): it can read the hidden tests and change "
              "anything; do this only in a throwaway container", file=sys.stderr)
    hidden = [p.resolve() for p in exposed] if exposed and sandbox.can_hide() else []  # emptied for the kernel
    if exposed and not hidden:
        folders = sorted({str(p.resolve() if p.is_dir() else p.parent.resolve()) for p in exposed})  # .git: itself
        print(f"warning: student code runs as {user.pw_name}, who can read {len(exposed)} of the instructor "
              f"notebooks, submissions or the checkout's git history (in {', '.join(folders)}): a submission "
              f"could copy hidden tests or "
              f"another student's work. Make them private to the grader, e.g. chmod -R go-rwx "
              f"{' '.join(shlex.quote(f) for f in folders)}", file=sys.stderr)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        if user:
            Path(tmp).chmod(sandbox.TRAVERSE_ONLY)
        return Scores({Path(name).stem: _autograde_one(Path(tmp) / Path(name).stem, submission_dir, source, name,
                                                       timeout, user, hidden, reviewed) for name in sorted(graded)})


def _autograde_one(root: Path, submission_dir: Path, source, name: str, timeout: int,
                   user=None, hidden=(), reviewed=False) -> dict[str, CellGrade]:
    """One notebook's grades: nbgrader's, or zero for every test cell with the reason it could not run."""
    from nbgrader.api import Gradebook  # imported here: nbgrader takes seconds to import

    cells = [c for c in nbformat.read(Path(source) / name, as_version=4).cells
             if c.metadata.get("nbgrader", {}).get("grade")]
    points = {c.metadata.nbgrader["grade_id"]: float(c.metadata.nbgrader.get("points", 0)) for c in cells}

    def zero(reason: str) -> dict[str, CellGrade]:
        return {grade_id: CellGrade(0.0, most, reason) for grade_id, most in points.items()}

    submitted = submission_dir / name
    if not submitted.exists() and not submitted.is_symlink():
        return zero("not submitted")
    if _not_plain_files(submission_dir, [name]):  # read as data: a named pipe would block, a link reach elsewhere
        return zero(f"{name} is not a plain file (a link or a named pipe): submit the notebook file Jupyter saved")
    try:
        nbformat.validate(nbformat.read(submitted, as_version=4))
    except Exception as e:  # JSON, schema or encoding: whatever keeps it from being a notebook
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return zero(f"{name} is not a readable notebook ({first[:120]}); submit the file Jupyter saved")
    uid = sandbox.reserve_identity() if user else None  # this notebook's own: nothing it starts outlives its grading
    try:
        course = _course(root, source, only=[name], user=user, uid=uid, hidden=hidden)
        others = {nb.name for nb in submission_dir.glob("*.ipynb")} - {name}
        shutil.copytree(submission_dir, course / "submitted" / STUDENT / ASSIGNMENT,
                        ignore=lambda d, names: IGNORED(d, names) | _not_plain_files(d, names) |
                        (others if Path(d) == submission_dir else set()))
        for private in ("source", "submitted"):  # the instructor copy, hidden tests included: root's only
            (course / private).chmod(0o700)
        skip = graded_run.skipped_cells(Path(source) / name)
        for folder in (course / "source" / ASSIGNMENT, course / "submitted" / STUDENT / ASSIGNMENT):
            graded_run.trim(folder / name, set(points), skip)
        try:
            held = [] if reviewed else review.review(course / "submitted" / STUDENT / ASSIGNMENT / name,
                                                     Path(source) / name)
        except Exception as e:  # whatever a submission does to the reader, it stops neither it nor the class
            held = [f"the review could not read this notebook ({type(e).__name__}: {e})"]
        if held:  # read before it runs: inside the kernel, this code could change how the tests run
            more = f" (and {len(held) - 1} more)" if len(held) > 1 else ""
            print(f"{name} is held for review: its own code could change how its hidden tests run\n" +
                  "\n".join(f"  {finding}" for finding in held), file=sys.stderr)
            return zero(f"held for review: {held[0]}{more}; read the code, then grade again with --reviewed")
        token = canary.plant(course / "source" / ASSIGNMENT / name)  # each test cell proves it ran
        autograde = ("autograde", f"--Execute.timeout={timeout}", f"--Execute.kernel_name={KERNEL}")
        try:
            _nbgrader(course, "generate_assignment", private=True)  # fills the gradebook with the test cells
            try:
                _nbgrader(course, *autograde, private=True)
            except GradingError as e:  # a kernel that died or started slowly under load: once more, not the student's fault
                if not kernel_trouble(str(e)):
                    raise
                _nbgrader(course, *autograde, "--force", private=True)
        except GradingError as e:
            return zero(f"nbgrader could not grade {name}: {cause(str(e))}")
    finally:
        if uid is not None:
            sandbox.release_identity(uid)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        notebook = next(nb for nb in gradebook.find_submission(ASSIGNMENT, STUDENT).notebooks
                        if nb.name == Path(name).stem)
        grades = {g.name: (g.score, g.max_score) for g in notebook.grades}
    present = {c.metadata.get("nbgrader", {}).get("grade_id") for c in nbformat.read(submitted, as_version=4).cells}
    autograded = course / "autograded" / STUDENT / ASSIGNMENT / name
    scored = with_errors(grades, autograded, present)
    did_not_run, passed_with_stderr = canary.verdicts(autograded, token)
    for grade_id in did_not_run & set(scored):
        scored[grade_id] = CellGrade(0.0, scored[grade_id].max_score, canary.REASON)
    for grade_id in passed_with_stderr & set(scored):  # a warning is no failure
        scored[grade_id] = CellGrade(scored[grade_id].max_score, scored[grade_id].max_score, "")
    return scored


def _not_plain_files(folder, names) -> set[str]:
    """What of a submission the grader does not copy: a submission is data, so only regular files and
    folders. A symbolic link would be followed by the grader (root), and what it points at copied in
    where the student's code can read it; a hard link can be another name of a file the grader may
    read; a named pipe would block the copy, and the whole class's grading, forever."""
    skipped = set()
    for name in names:
        info = os.lstat(os.path.join(folder, name))
        if stat.S_ISDIR(info.st_mode):
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            skipped.add(name)
    return skipped


def _notebooks(source) -> list[Path]:
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


def _course(root: Path, source, only=None, user=None, uid=None, hidden=()) -> Path:
    """A fresh nbgrader course directory holding ``source`` (or only its notebooks ``only``), whose
    kernel runs as ``user`` (a pwd entry) when given, as the bare id ``uid`` when given, with the files
    ``hidden`` emptied (`minibert.course.sandbox`)."""
    source = Path(source)
    skip = set()
    if only is not None:
        skip = {nb.name for nb in source.glob("*.ipynb")} - set(only)
    shutil.copytree(source, root / "source" / ASSIGNMENT,
                    ignore=lambda d, names: IGNORED(d, names) | (skip if Path(d) == source else set()))
    kernel = root / "jupyter" / "kernels" / KERNEL
    kernel.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    if user is not None:
        argv = [sys.executable, "-m", "minibert.course.sandbox", "--user", user.pw_name, "--course", str(root),
                *(["--uid", str(uid)] if uid is not None else []),
                *(option for path in hidden for option in ("--hide", str(path))), "--", *argv]
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": argv,
        "display_name": "Python (minibert grader)", "language": "python"}))
    return root


def _nbgrader(course: Path, command: str, *options: str, private: bool = False) -> None:
    """Run one nbgrader command on ``course``; on failure raise with the part of its log that
    explains it (from the notebook it was converting on). ``private``: what it writes (gradebook,
    autograded copies) is readable by the grader's user only."""
    def prepend(variable, folder):
        return os.pathsep.join(filter(None, [str(folder), os.environ.get(variable)]))

    env = {**os.environ,
           "PATH": prepend("PATH", Path(sys.executable).parent),  # the gradebook shells out to `alembic`
           "JUPYTER_PATH": prepend("JUPYTER_PATH", course / "jupyter")}  # finds our kernelspec first
    args = [sys.executable, "-m", "nbgrader", command, ASSIGNMENT, f"--CourseDirectory.root={course}", *options]
    # The log goes to a file, not a pipe: a process the student's code left running (it inherits the kernel's
    # output) would hold a pipe open, and reading to its end would wait for that process, forever.
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as output:
        result = subprocess.run(args, cwd=course, env=env, stdout=output, stderr=subprocess.STDOUT,
                                umask=sandbox.PRIVATE_UMASK if private else -1)
        output.seek(0)
        text = output.read()
    if result.returncode != 0:
        log = text.splitlines()
        start = max([i for i, line in enumerate(log) if "Converting notebook" in line], default=0)
        raise GradingError(f"nbgrader {command} failed:\n" + "\n".join(without_stack_frames(log[start:])))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minibert.course.grading", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("release", help="write the student version of the notebooks")
    make.add_argument("--source", default="notebooks", help="instructor notebooks (default: notebooks)")
    make.add_argument("--out", default="release",
                      help=f"the release goes to OUT/notebooks and OUT/{ZIP_NAME} (default: release)")
    grade = commands.add_parser("autograde", help="grade a folder of submitted notebooks")
    grade.add_argument("submission_dir", help="folder of submitted notebooks")
    grade.add_argument("--source", default="notebooks", help="instructor notebooks (default: notebooks)")
    grade.add_argument("--timeout", type=int, default=600, help="seconds per cell (default: 600)")
    grade.add_argument("--reviewed", action="store_true",
                       help="grade notebooks held for review as nbgrader scores them (after reading their code)")
    grade.add_argument("--run-as", metavar="USER", help="grading as root, run student code as USER (default: "
                       f"$MINIBERT_GRADER_RUN_AS, else {sandbox.DEFAULT_USER}); not root, student code runs as you")
    args = parser.parse_args(argv)
    try:
        if args.command == "release":
            notebooks = release(args.source, args.out)
            print(f"student release written to {notebooks}")
            print(f"for an LMS or JupyterHub: {release_zip.write(notebooks, Path(args.out) / ZIP_NAME)} "
                  f"(unzip, then python3 course.py lab in {release_zip.FOLDER}/)")
        else:
            print(autograde(args.submission_dir, args.source, args.timeout, args.run_as, args.reviewed).table())
    except (GradingError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
