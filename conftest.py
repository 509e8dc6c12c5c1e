"""Test-session environment, shared by tests/ and the notebooks that nbval runs.

A classroom or CI machine keeps its offline material in a ``shared/`` folder beside the checkout:
``shared/data`` is a data mirror (see data/README.md) and ``shared/hf-home`` a pre-filled Hugging
Face cache. When they are there and the caller has not chosen otherwise, the tests use them and
stay offline; without them the tests use the network like a student's machine would.
"""
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
SHARED = ROOT.parent / "shared"

if (SHARED / "data").is_dir():
    os.environ.setdefault("MINIBERT_DATA_MIRROR", str(SHARED / "data"))
if (SHARED / "hf-home").is_dir() and "HF_HOME" not in os.environ:
    os.environ["HF_HOME"] = str(SHARED / "hf-home")
    os.environ["HF_HUB_OFFLINE"] = "1"
# tokenizers' thread pool stays quiet when nbval's kernels fork. (No MPLBACKEND here: the notebook
# kernels inherit it, and their figures must render inline to be stored.)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items):
    """Running a notebook (nbval executes it cell by cell) is slow; ``-m "not slow"`` leaves it out."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)


def pytest_collectstart(collector):
    """nbval: outputs that differ on every run by construction are not compared (images never are)."""
    if getattr(collector, "fspath", None) is not None and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("text/html", "application/javascript",
                                   "application/vnd.jupyter.widget-view+json")


# --- how long each notebook took under nbval: the run times the headers state are measured here ------
_notebook_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Adds up each notebook's cells, setup to teardown (nbval runs one test per cell and starts the kernel in
    the first one's setup; under pytest-xdist the reports reach the controller, so the sums cover every worker)."""
    path = report.nodeid.split("::")[0]
    if path.endswith(".ipynb"):
        _notebook_seconds[path] = _notebook_seconds.get(path, 0.0) + report.duration


def _late_notebooks(factor=None) -> list[str]:
    from minibert.course import run_times

    measured = {Path(path).stem: seconds for path, seconds in _notebook_seconds.items()}
    return run_times.check(measured, run_times.load(ROOT / "notebooks"), factor or run_times.SLACK)


def pytest_sessionfinish(session, exitstatus):
    """A full run executes every notebook the way a busy laptop does: one that took more than four times the
    busy time its header states (and a minute more) fails the run; over twice, it is reported
    (minibert.course.run_times.check)."""
    from minibert.course import run_times

    on_a_worker = hasattr(session.config, "workerinput")   # pytest-xdist: the controller decides
    if (not on_a_worker and _notebook_seconds and exitstatus == pytest.ExitCode.OK
            and _late_notebooks(run_times.FAIL_FACTOR)):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    """One line per notebook that ran: the time this run measured, beside the figures its header states."""
    if not _notebook_seconds:
        return
    from minibert.course import run_times

    figures = run_times.load(ROOT / "notebooks")
    terminalreporter.section("notebook run times (nbval, this run)")
    for path, seconds in sorted(_notebook_seconds.items()):
        stem = Path(path).stem
        if stem not in figures:   # a test's own fixture notebook, not the course's
            continue
        stated = figures.get(stem, {})
        terminalreporter.write_line(f"{stem:<28} {seconds:6.0f} s   stated: quiet {stated.get('quiet_s')} s, "
                                    f"busy {stated.get('busy_s')} s")
    failing = set(_late_notebooks(run_times.FAIL_FACTOR))
    for line in _late_notebooks():
        if line in failing:
            terminalreporter.write_line(f"TOO SLOW FOR ITS HEADER (fails the run): {line}", red=True)
        else:
            terminalreporter.write_line(f"slower than its header (a slow or shared machine?): {line}", yellow=True)
