"""What nbgrader's log says went wrong, in one line a grader can act on.

nbgrader ends a failed run with a generic line ("... see the above traceback"); the cause is the
exception line above it: the grader's check that could not run, a notebook nbgrader could not read.
"""
from __future__ import annotations

import re

EXCEPTION = re.compile(r"\s*[\w.]+(Error|Exception): ")  # where a traceback ends: the exception and its message
CAUSE = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b.*)$")


def without_stack_frames(log: list[str]) -> list[str]:
    """The log with each traceback cut down to its last line, the exception and its message."""
    kept, in_traceback = [], False
    for line in log:
        if "Traceback (most recent call last)" in line:
            in_traceback = True
        elif in_traceback and EXCEPTION.match(line):
            kept.append(line.strip())
            in_traceback = False
        elif not in_traceback:
            kept.append(line)
    return kept


def cause(message: str) -> str:
    """The last exception line of a failed nbgrader run that is not nbgrader's own summary; else its last line."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    found = [line for line in lines if CAUSE.match(line) and "see the above traceback" not in line]
    return (found[-1] if found else lines[-1] if lines else "nbgrader gave no output")[:200]
