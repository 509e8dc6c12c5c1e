"""Step 5, score: nbgrader's autograder with its kernel replaced by the walled pipeline.

nbgrader's ``autograde`` restores every test cell (and a solution cell's type: a solution saved as markdown or
raw is code again), executes the notebook, and scores each test cell by its outputs. `WalledExecute` takes the
place of its executor: it hands the student's cells to `minibert.grading.check` and writes each test's verdict
back as the cell's outputs. Collect, gradebook, feedback and formgrader stay nbgrader's, so a course in
nbgrader's own layout grades with three lines of ``nbgrader_config.py`` (`gradebook.CONFIG`; INSTRUCTORS.md).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nbformat.v4 import new_output
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer, List, Unicode

from .. import stops
from . import stopping
from .gradebook import skipped_cells
from .intake import submitted_files


def student_cells(nb, skip=frozenset()) -> list[dict]:
    """The notebook as the student's process runs it: each code cell's source, and a stop where a test was;
    nothing after the last test, and none of the cells ``skip`` names."""
    cells = []
    for number, cell in enumerate(nb.cells, 1):
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") in skip and not meta.get("grade"):
            continue
        if meta.get("grade") and not meta.get("solution") and cell.cell_type == "code":
            cells.append({"stop": meta["grade_id"]})
        elif cell.cell_type == "code":
            mine = f" (your solution {meta['grade_id']})" if meta.get("solution") else ""
            cells.append({"source": cell.source, "label": f"{number}{mine}"})
    last = max((i for i, c in enumerate(cells) if c.get("stop")), default=-1)
    return cells[:last + 1]


class WalledExecute(NbGraderPreprocessor):
    """Runs the notebook through `minibert.grading.check` (module docstring)."""

    timeout = Integer(600, help="seconds each cell of the student's, and the calls one test makes together, "
                               "may take").tag(config=True)
    run_as = Unicode("", help="grading as root: the account whose reach the student's process gets (default "
                     "nobody); it runs as a user id of its own").tag(config=True)
    covered = List(Unicode(), help="folders the student's process must not see, besides the course's").tag(
        config=True)

    def preprocess(self, nb, resources):
        with stops.as_ctrl_c():  # nbgrader stopped: the checker, the student's process, the id too
            return self._preprocess(nb, resources)

    def _preprocess(self, nb, resources):
        from . import walls

        info = resources["nbgrader"]
        course = CourseDirectory(config=self.config)
        root = Path(course.root).resolve()
        source_dir = Path(course.format_path(course.source_directory, ".", info["assignment"]))
        release_dir = Path(course.format_path(course.release_directory, ".", info["assignment"]))
        submitted = Path(course.format_path(course.submitted_directory, info["student"], info["assignment"]))
        source = source_dir / f"{info['notebook']}.ipynb"
        skip = skipped_cells(source)
        work = root / ".minibert-check" / info["student"] / info["notebook"]
        work.mkdir(parents=True, exist_ok=True, mode=0o700)
        user = walls.user_to_run_as(self.run_as or None)
        uid = walls.reserve_identity() if user is not None else None
        try:
            assets = readable(release_dir, root / ".minibert-check" / ".course-files")
            spec = {"source": str(source), "timeout": self.timeout, "uid": uid, "skip": sorted(skip),
                    "assets": str(assets), "covered": [str(root), *self.covered], "work": str(work),
                    "log": str(work / "student-output.log"), "cells": student_cells(nb, skip),
                    "files": submitted_files(submitted, {p.name for p in walls.course_files(release_dir)})}
            (work / "spec.json").write_text(json.dumps(spec))
            with open(work / "check.log", "wb") as log:
                checker = subprocess.Popen([sys.executable, "-m", "minibert.grading.check", str(work / "spec.json"),
                                            str(work / "results.json")], cwd=source_dir, stdout=log,
                                           stderr=subprocess.STDOUT, preexec_fn=stopping.ends_with_this_process())
                returncode = stopping.wait(checker)
        finally:
            if uid is not None:
                walls.release_identity(uid)
        if returncode == 0 and (work / "results.json").exists():
            results = json.loads((work / "results.json").read_text())
        else:  # the grader's own failure: every test of this notebook at zero, with the cause, and the class goes on
            tail = (work / "check.log").read_text(errors="replace").strip().splitlines()[-1:]
            why = f"the grader could not check this notebook ({' '.join(tail)[:300]}); see {work / 'check.log'}"
            results = {c.metadata.nbgrader["grade_id"]: {"passed": False, "error": f"GraderError: {why}",
                                                          "printed": "", "notes": []}
                       for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
            (work / "results.json").write_text(json.dumps(results))
        write_outputs(nb, results)
        return nb, resources


def readable(release: Path, copy: Path) -> Path:
    """The files students get beside their notebooks, where the student's process (another user) can read
    them: ``release`` itself if they all are, else a readable copy, made once for the course."""
    from .walls import course_files

    entries = [p for entry in course_files(release) for p in [entry, *(entry.rglob("*") if entry.is_dir() else [])]]
    if all(p.stat().st_mode & (0o005 if p.is_dir() else 0o004) for p in entries):
        return release
    if not copy.exists():
        import shutil
        staging = copy.with_name(copy.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for entry in course_files(release):
            (shutil.copytree if entry.is_dir() else shutil.copyfile)(entry, staging / entry.name)
        for path in [staging, *staging.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        staging.rename(copy)
    return copy


def write_outputs(nb, results: dict) -> None:
    """Each test cell's verdict as nbgrader reads it: what the test printed, integrity notes, and an error
    output (expected and got, no code of the test's) where it failed. The student's cells get no outputs."""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None
        result = results.get(meta.get("grade_id")) if meta.get("grade") and not meta.get("solution") else None
        if result is None:
            continue
        text = result["printed"] + "".join(f"integrity note: {note}\n" for note in result["notes"])
        if text:
            cell.outputs.append(new_output("stream", name="stdout", text=text))
        if not result["passed"]:
            ename, _, evalue = result["error"].partition(": ")
            cell.outputs.append(new_output("error", ename=ename, evalue=evalue, traceback=[result["error"]]))
