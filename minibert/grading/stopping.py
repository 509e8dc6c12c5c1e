"""A stop reaches every process a grading started.

Grading is a chain: the command, the ``nbgrader`` it runs, the checker nbgrader's walled step runs, and the
student's process the checker talks to. Ctrl-C reaches the terminal's whole process group, but SIGTERM (a
scheduler's time limit, ``kill``) or SIGHUP (a closed terminal) reaches only the process it is sent to: left to
Python's default, that one ended at once and the rest ran on, orphaned, still writing into the course folder,
holding a grading id, the student's code still running. So each link of the chain takes those signals as
Ctrl-C while it works (`minibert.stops.as_ctrl_c`) and passes a stop on to the one child it waits for (`wait`);
and on Linux a child is also sent SIGTERM when its parent dies of SIGKILL, which no handler sees
(`ends_with_this_process`).
"""
from __future__ import annotations

import os
import signal
import subprocess
import time

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def wait(process: subprocess.Popen, progress=None, grace: float = 20.0) -> int:
    """``process``'s exit status, calling ``progress()`` about every second meanwhile. If the wait is cut short
    (Ctrl-C, a stop taken as Ctrl-C, an error in ``progress``), the child is asked to stop too (SIGTERM, so that
    it stops its own children) and killed after ``grace`` seconds; then the interruption goes on."""
    try:
        while process.poll() is None:
            if progress is not None:
                progress()
            time.sleep(0.5)
    except BaseException:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        raise
    return process.returncode


def _prctl():
    """Linux's ``prctl``, looked up now: a forked child must not load a library before it runs its program."""
    try:
        import ctypes
        return getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)
    except Exception:  # no C library to look in (Windows)
        return None


_PRCTL = _prctl()


def ends_with_this_process():
    """A ``preexec_fn`` for a child of this process: on Linux the child gets SIGTERM when this process ends,
    however it ended (SIGKILL too); elsewhere it does nothing."""
    parent = os.getpid()

    def preexec():
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent:  # this process ended before the request was made
                os.kill(os.getpid(), signal.SIGTERM)

    return preexec
