"""Stopping cleanly: SIGTERM and SIGHUP taken as Ctrl-C.

`kill`, `docker stop`, SLURM and systemd send SIGTERM; a closed terminal sends SIGHUP. Left to Python's
default, either ends the process at once, skipping every ``finally``: a half-written file stays, a child
process runs on, orphaned. Within `as_ctrl_c` they raise KeyboardInterrupt instead, so that the one path
written for Ctrl-C cleans up after all three. (The Trainer puts a handler of its own in their place while it
trains: it finishes the update and saves a checkpoint first.)
"""
from __future__ import annotations

import contextlib
import signal
import threading

STOPS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
received: list[int] = []  # the stops that came within `as_ctrl_c`, for code that catches KeyboardInterrupt


@contextlib.contextmanager
def as_ctrl_c():
    """Within: SIGTERM and SIGHUP raise ``KeyboardInterrupt("stopped by SIGTERM")``. A no-op off the main
    thread, the only one signals reach (the main thread's handlers then decide)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(number, frame):
        received.append(number)
        raise KeyboardInterrupt(f"stopped by {signal.Signals(number).name}")

    received.clear()
    previous = {number: signal.signal(number, interrupt) for number in STOPS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def raise_if_received() -> None:
    """Raise the stop again if it came while code that catches KeyboardInterrupt ran (IPython's ``run_cell``
    reports it as the cell's error and goes on)."""
    if received:
        raise KeyboardInterrupt(f"stopped by {signal.Signals(received[0]).name}")
