"""Step 4, check (``python -m minibert.grading.check SPEC.json RESULTS.json``): where no student code ever runs.

The *instructor's* notebook (solutions included) runs here beside the student's process (`Student`): at each
test cell, the names the solution cells define are bound to the student's values (`minibert.grading.remote`),
the test runs, and its verdict goes to RESULTS.json. A student's cell that loops or kills its process is
skipped on a restart (at most `RESTARTS`): its own exercise loses its points, with the real limit in the message.
"""
from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import sys
import traceback
from pathlib import Path

from ..course import integrity
from ..stops import as_ctrl_c, raise_if_received
from . import plain, remote, walls

RESTARTS = 3  # student processes started again for one notebook, after a timeout or a death


def bound_names(source: str) -> list[str]:
    """Names a solution cell binds at its top level (functions, classes, variables, imports)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return list(dict.fromkeys(names))


class Student:
    """The student's process for one notebook, started again (without the cell at fault) when it loops or dies."""

    def __init__(self, spec: dict):
        self.spec, self.skip, self.restarts = spec, set(), 0
        self.running: int | None = None
        self.events: list[str] = []  # what the student's cells did that a failing test should mention
        self.connection: remote.Connection | None = None
        self.served: set[str] = set()

    def start(self) -> None:
        spec = self.spec
        work = Path(spec["work"]) / f"run-{self.restarts}"
        process, requests, answers = walls.start(
            assets=Path(spec["assets"]), work=work, uid=spec.get("uid"), covered=[Path(p) for p in spec["covered"]],
            cpu_seconds=spec["timeout"] * (len(spec["cells"]) + 10) * 4, log=Path(spec["log"]),
            exchange=Path(spec["exchange"]) if spec.get("exchange") else None)
        self.connection = remote.Connection(process, requests, answers, spec["timeout"], spec.get("exchange"))
        files = spec.get("files", [])
        plain.send(requests, {"cells": spec["cells"], "timeout": spec["timeout"], "skip": sorted(self.skip),
                              "files": [f["path"] for f in files]}, [_read(f["from"]) for f in files])

    def reach(self, grade_id: str) -> None:
        """Run the student's cells up to the stop of test ``grade_id``; raise StudentProcessError if it cannot."""
        if self.connection.process.poll() is not None:  # stopped during the last test: a call that looped
            walls.stop(self.connection.process)
            if self.restarts >= RESTARTS:
                raise remote.StudentProcessError(f"the notebook's process was started {RESTARTS + 1} times")
            self.restarts += 1
            self.running = None
            self.start()
        while True:
            try:
                event, _ = self.connection.receive(self.spec["timeout"] + 10)
            except remote.StudentTimeout:
                self.lost(f"your cell {self._label(self.running)} did not finish in {self.spec['timeout']} s "
                          "(the grader's --timeout) and could not be stopped: it was skipped")
                continue
            except (EOFError, plain.WireError) as e:
                self.lost(f"your cell {self._label(self.running)} ended the notebook's process ({e}): it was "
                          "skipped")
                continue
            kind, stop = event.get("event"), str(event.get("grade_id"))
            if kind == "cell" and type(event.get("index")) is int:
                self.running = event["index"]
            elif kind == "cell-timeout":
                self.events.append(f"your cell {self._label(event.get('index'))} did not finish in "
                                   f"{self.spec['timeout']} s (the grader's --timeout) and was stopped")
            elif kind == "cell-error":
                self.events.append(f"your cell {self._label(event.get('index'))} raised "
                                   f"{str(event.get('error'))[:300]}")
            elif kind == "stop" and stop == grade_id:
                return
            elif kind == "stop" and stop in self.served:  # a replay after a restart
                self.connection.send({"op": "continue"})
            elif kind in ("end", "stop"):
                raise remote.StudentProcessError(f"the notebook's process did not reach this test ({kind})")

    def lost(self, why: str) -> None:
        walls.stop(self.connection.process)
        self.events.append(why)
        if self.running is None or self.restarts >= RESTARTS:
            raise remote.StudentProcessError(why)
        self.skip.add(self.running)
        self.restarts += 1
        self.running = None
        self.start()

    def _label(self, index) -> str:
        cells = self.spec["cells"]
        if type(index) is not int or not 0 <= index < len(cells):
            return "(none yet: before the first cell)"
        return cells[index].get("label") or str(index)


def _read(path: str) -> bytes:
    """A submitted file's bytes, never through a link (it was a regular file when listed)."""
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
        return f.read()


def run_test(shell, source: str, names: list[str], connection: remote.Connection) -> dict:
    """Run one test cell here, with the student's values for ``names``; its verdict."""
    saved = {n: shell.user_ns[n] for n in names if n in shell.user_ns}
    printed = io.StringIO()
    connection.spent = 0.0  # the test's calls, its values fetched included, share one --timeout
    unfetched = {}  # name -> why its value could not cross: it fails the tests that read it, and only those
    try:
        for name in names:
            try:
                shell.user_ns[name] = connection.get(name)
            except (remote.StudentTimeout, remote.StudentProcessError):
                raise  # the process is gone: nothing more can be fetched
            except Exception as e:  # NameError: not defined; else a value that cannot cross
                shell.user_ns.pop(name, None)
                if not isinstance(e, NameError):
                    unfetched[name] = e
        connection.notes = []
        with contextlib.redirect_stdout(printed):
            result = shell.run_cell(source, store_history=False)
        error = result.error_before_exec or result.error_in_exec
        if isinstance(error, NameError) and error.name in unfetched:
            error = unfetched[error.name]
    except Exception as e:  # the student's process could not be reached: this test fails, the next one restarts it
        error = e
    finally:
        for name in names:
            shell.user_ns.pop(name, None)
        shell.user_ns.update(saved)
    trace = "".join(traceback.format_exception(error))[-5000:] if error is not None else ""
    return {"passed": error is None, "error": None if error is None else describe(error),
            "printed": printed.getvalue()[-5000:], "notes": list(dict.fromkeys(connection.notes))[:10],
            "trace": trace}  # for the instructor's eyes (the test's code): never in the feedback


def describe(error: BaseException) -> str:
    """The failed check as the student should read it: the exception, its message, and the line of the test
    cell it stopped on (not the test's code)."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename.startswith("<ipython-input")
              or f.filename.startswith("/tmp/ipykernel") or "<cell" in f.filename]
    where = f" (line {frames[-1].lineno} of the test cell)" if frames and not str(error) else ""
    return f"{type(error).__name__}: {error}".rstrip(": ")[:3000] + where


def check(spec: dict) -> dict:
    import nbformat

    from .runner import new_shell

    integrity.GRADING = True
    instructor = nbformat.read(spec["source"], as_version=4)
    tests = [i for i, c in enumerate(instructor.cells) if _is_test(c)]
    shell = new_shell()
    # a test's traceback shows the test's code: kept in the results for the instructor, never printed where the
    # feedback would show it
    shell.showtraceback = shell.showsyntaxerror = lambda *args, **kwargs: None
    student = Student(spec)
    stops = {c["stop"] for c in spec["cells"] if c.get("stop")}
    names: list[str] = []
    results = {}
    started = False
    try:  # however this ends (a stop included), the student's process ends with it
        # what comes after the last test scores nothing
        for cell in instructor.cells[:max(tests, default=-1) + 1]:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade_id") in spec.get("skip", ()) and not meta.get("grade"):
                continue
            if meta.get("solution"):
                names += bound_names(cell.source)
            if _is_test(cell):
                grade_id = meta["grade_id"]
                if grade_id not in stops:
                    results[grade_id] = {"passed": False, "error": "this test cell is not in the submitted notebook, "
                                         "or was moved (deleted, or its nbgrader metadata removed): copy it back "
                                         "from the release, in its place", "printed": "", "notes": []}
                    continue
                try:
                    if not started:
                        student.start()
                        started = True
                    student.events = []
                    student.reach(grade_id)
                    results[grade_id] = run_test(shell, cell.source, list(dict.fromkeys(names)),
                                                 student.connection)
                    raise_if_received()  # a stop during the test: IPython took it for the test's error
                    student.served.add(grade_id)
                    with contextlib.suppress(remote.StudentProcessError, remote.StudentTimeout, OSError):
                        student.connection.send({"op": "continue"})  # if it cannot go on, the next test restarts it
                except (remote.StudentProcessError, remote.StudentTimeout, OSError) as e:
                    results[grade_id] = {"passed": False, "error": str(e), "printed": "", "notes": []}
                results[grade_id]["before"] = list(student.events)  # for the person grading, passed or not
                if not results[grade_id]["passed"] and student.events:
                    results[grade_id]["error"] += "; before it, " + "; ".join(student.events[:3])
            elif cell.cell_type == "code":
                with contextlib.redirect_stdout(io.StringIO()):
                    shell.run_cell(cell.source, store_history=False)
                raise_if_received()
    finally:
        if student.connection is not None:
            walls.stop(student.connection.process)
    return results


def _is_test(cell) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution") and cell.cell_type == "code"


def instructor_folder(spec: dict) -> Path:
    """Where the instructor's notebook runs: a folder of the grader's own, with the files beside the notebook
    linked in, so that what its cells write stays in the grading's folder."""
    here = Path(spec["work"]) / "instructor"
    here.mkdir(exist_ok=True)
    for entry in Path(spec["source"]).parent.iterdir():
        if not entry.name.endswith(".ipynb") and not (here / entry.name).exists():
            (here / entry.name).symlink_to(entry.resolve())
    return here


def main(argv=None) -> int:
    import shutil
    import tempfile

    argv = sys.argv[1:] if argv is None else argv
    spec = json.loads(Path(argv[0]).read_text())
    os.chdir(instructor_folder(spec))
    # A test's temporary files (a checkpoint folder it writes for the student's loader) go where the student's
    # process can read them: a folder of their own, bound into its walls at the same path.
    exchange = Path(tempfile.mkdtemp(prefix="minibert-exchange-"))
    exchange.chmod(0o755)
    os.environ["TMPDIR"] = tempfile.tempdir = spec["exchange"] = str(exchange)
    try:
        with as_ctrl_c():
            results = check(spec)
    finally:
        shutil.rmtree(exchange, ignore_errors=True)
    Path(argv[1]).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
