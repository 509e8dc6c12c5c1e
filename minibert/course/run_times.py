"""How long each notebook takes, said the same way everywhere and kept true by every full test run.

A student plans a session by the run time a notebook's header states, so that figure is measured, not
guessed, and measured twice, because a laptop is rarely idle: **quiet**, the notebook alone on a 2-core
CPU with two threads, and **busy**, one thread while the other core works, which is how the course's
full test run (`python3 course.py test`: two workers, one thread each) executes every notebook under
nbval. Both live in ``notebooks/results/run_times.json``; the header and INSTRUCTORS.md say them with
`say`, and a full test run compares what it measured with the busy figure (`check`): a notebook over twice
its figure is reported at the end of the run, one over `FAIL_FACTOR` times it fails the run. Machines differ
by up to about 2x on the same work (a CI runner sharing its cores), so only a figure that is plainly wrong
(the notebook itself grew slower) may fail a test run; a slow machine gets a line in the report.
"""
from __future__ import annotations

import json
from pathlib import Path

FILE = Path("results") / "run_times.json"   # beside the notebooks
SLACK = 2.0       # a full run may take up to twice the stated busy time before the header counts as wrong,
SLACK_S = 60      # and a minute more in any case: a notebook of seconds varies by more than 2x with a kernel's start
FAIL_FACTOR = 4.0  # beyond this many times its busy figure (and the minute) a notebook fails the run


def say(seconds: float) -> str:
    """A run time as a header says it: "about 20 s", "about a minute", "about 2½ minutes"."""
    if seconds < 45:
        return f"about {max(5, 5 * int(seconds / 5 + 0.5))} s"
    if seconds < 90:
        return "about a minute"
    halves = int(seconds / 30 + 0.5)   # to the nearest half minute, halves up
    whole, half = divmod(halves, 2)
    return f"about {whole}{'½' if half else ''} minutes"


def stated(quiet_s: float | None, busy_s: float | None) -> str:
    """The header's words for the CPU: each figure that is measured, quiet first."""
    if quiet_s and busy_s:
        return f"{say(quiet_s)} on a quiet 2-core CPU, {say(busy_s)} on a busy one"
    if busy_s:
        return f"{say(busy_s)} on a busy 2-core CPU"
    if quiet_s:
        return f"{say(quiet_s)} on a quiet 2-core CPU"
    raise ValueError("no run time measured: give quiet_s or busy_s")


def load(notebooks: Path) -> dict[str, dict]:
    """notebook stem -> {"quiet_s": ..., "busy_s": ... or None}, from the course's file."""
    return json.loads((notebooks / FILE).read_text())["notebooks"]


def check(measured_s: dict[str, float], figures: dict[str, dict], factor: float = SLACK) -> list[str]:
    """What a run measured (notebook stem -> seconds under nbval) against the stated busy figures: one line
    per notebook that took more than ``factor`` times its figure and `SLACK_S` seconds more than it (`SLACK`
    for the report, `FAIL_FACTOR` for a failure). A notebook without a busy figure, or one this run did not
    execute, is not checked."""
    late = []
    for name, seconds in sorted(measured_s.items()):
        busy = figures.get(name, {}).get("busy_s")
        if busy and seconds > max(factor * busy, busy + SLACK_S):
            late.append(f"{name}: {seconds:.0f} s in this run, its header says {say(busy)} on a busy 2-core CPU "
                        f"({busy:.0f} s measured, {seconds / busy:.1f}x); if the notebook grew slower, measure it "
                        f"again and update {FILE} and the header")
    return late
