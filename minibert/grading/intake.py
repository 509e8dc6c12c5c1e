"""Step 1, copy in: a submission is taken in as data, regular files only.

Its notebook must be one (nbformat reads and validates it); its other files are found without recursion and
without following anything: no link (the grader would copy in what it points at), no hard link (another
name of a file the grader may read), no named pipe (the copy would block), no device. The student's process
later gets those files over a pipe, so nothing of the course folder is ever within its reach.
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import nbformat

MOST_FILES, MOST_BYTES, MOST_DEPTH = 1000, 200 * 2**20, 16  # what a submission may bring besides its notebooks
MOST_NOTEBOOK_BYTES = 100 * 2**20  # a notebook: the course's largest with its figures is under 2 MB


def is_plain_file(path) -> bool:
    info = os.lstat(path)
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1


def submitted_files(folder: Path, course_files=frozenset()) -> list[dict]:
    """The submission's files besides its notebooks: regular files only, within `MOST_FILES`, `MOST_BYTES` and
    `MOST_DEPTH`, and none the course ships beside its notebooks (``course_files``: its own are used)."""
    found, total, queue = [], 0, [(folder, Path("."))]
    while queue:
        here, relative = queue.pop()
        try:
            names = sorted(os.listdir(here))
        except OSError:
            continue
        for name in names:
            path = here / name
            if name.startswith(".") or name.endswith(".ipynb") or (relative == Path(".") and name in course_files):
                continue
            info = path.lstat()
            if stat.S_ISDIR(info.st_mode):
                if len(relative.parts) < MOST_DEPTH and name != "__pycache__":
                    queue.append((path, relative / name))
            elif is_plain_file(path) and len(found) < MOST_FILES and total + info.st_size <= MOST_BYTES:
                found.append({"path": str(relative / name), "from": str(path)})
                total += info.st_size
    return found


def take(submission_dir: Path, name: str, target: Path, source) -> str:
    """Copy notebook ``name`` of ``submission_dir`` and its other files into ``target`` (nbgrader's
    ``submitted/<student>/<assignment>``); why it cannot be graded, or "" if it can."""
    submitted = Path(submission_dir) / name
    if not submitted.exists() and not submitted.is_symlink():
        return "not submitted"
    if not is_plain_file(submitted):
        return f"{name} is not a plain file (a link or a named pipe): submit the notebook file Jupyter saved"
    if submitted.stat().st_size > MOST_NOTEBOOK_BYTES:  # parsed as JSON below, at several times its size
        return (f"{name} is {submitted.stat().st_size / 2**20:,.0f} MiB, more than a notebook needs "
                f"({MOST_NOTEBOOK_BYTES // 2**20} MiB at most): clear its outputs (Edit > Clear All Outputs) and save")
    try:
        notebook = nbformat.read(submitted, as_version=4)
        nbformat.validate(notebook)
    except Exception as e:  # JSON, schema or encoding: whatever keeps it from being a notebook
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"{name} is not a readable notebook ({first[:120]}); submit the file Jupyter saved"
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in notebook.cells]
    if twice := sorted({i for i in ids if i and ids.count(i) > 1}):  # nbgrader would refuse the whole submission
        return (f"{name}: its grading cells are damaged ({twice[0]} is there twice); copy your answers into a "
                "fresh copy of the release's notebook")
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(submitted, target / name, follow_symlinks=False)
    for file in submitted_files(Path(submission_dir), set(os.listdir(source))):
        (target / file["path"]).parent.mkdir(parents=True, exist_ok=True)
        if not (target / file["path"]).exists():
            shutil.copyfile(file["from"], target / file["path"], follow_symlinks=False)
    return ""


def covered(source, submission_dir: Path) -> list[Path]:
    """What the student's process must not see: the instructor notebooks, the class's submissions, the git
    history of the checkout they live in (every hidden test), and the instructor notebooks, tests and history
    of the checkout the library runs from (the student's process reads the library there)."""
    import minibert

    source = Path(source).resolve()
    found = [source, submission_dir.resolve().parent]
    found += [folder / ".git" for folder in [source, *source.parents] if (folder / ".git").exists()][:1]
    checkout = Path(minibert.__file__).resolve().parents[1]
    found += [checkout / name for name in (".git", "notebooks", "tests")]
    return list(dict.fromkeys(p for p in found if p.exists()))
