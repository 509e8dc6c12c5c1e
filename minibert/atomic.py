"""Files that appear whole or not at all, and a full disk said in one line.

A download, a dataset copy or a checkpoint interrupted half-way (Ctrl-C, a full disk, a killed
kernel) must never leave a file that looks complete. We write to a hidden temporary file in the
same folder, so that the final ``os.replace`` is a single atomic rename on the same file system.

A full disk (or a spent quota) is the one write error a user meets in ordinary use, and each library
says it its own way: an ``OSError`` with errno ENOSPC from Python, a ``SafetensorError`` or a
tokenizers ``Exception`` whose text ends "(os error 28)" from Rust. `disk_full` knows them all, and
`DiskFullError` says which file could not be written, that nothing of it was left, and what is
intact, so that a command can end with that line instead of a traceback.
"""
from __future__ import annotations

import contextlib
import errno
import os
import uuid
from pathlib import Path
from typing import Callable, Iterator

FULL = {errno.ENOSPC: "No space left on device", getattr(errno, "EDQUOT", 122): "Disk quota exceeded"}


def disk_full(error: BaseException | None) -> int | None:
    """ENOSPC or EDQUOT if ``error`` (or what caused it) is a full disk or quota, whichever library raised it;
    else None."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in FULL:
            return error.errno
        text = str(error)
        for number, message in FULL.items():
            if message in text or f"os error {number})" in text:
                return number
        error = error.__cause__ or error.__context__
    return None


class DiskFullError(OSError):
    """A write ran out of disk space (or quota); nothing of the file was left behind. ``kept`` says what is
    intact; ``code``: ENOSPC or EDQUOT."""

    def __init__(self, path: str | os.PathLike, kept: str = "", code: int | None = errno.ENOSPC):
        code = code if code in FULL else errno.ENOSPC
        super().__init__(code, FULL[code], os.fspath(path))
        self.path, self.kept = Path(path), kept

    def __str__(self) -> str:
        return (f"the disk is full ({FULL[self.errno]}): {self.path} could not be written, and nothing of it "
                f"was left behind{'; ' + self.kept if self.kept else ''}. Free some space on that disk")


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path to write; on success it becomes ``target``, on any error it is removed (a full
    disk raised as `DiskFullError` naming ``target``)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.part")
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if disk_full(e) and not isinstance(e, DiskFullError):
            raise DiskFullError(target, code=disk_full(e)) from e
        raise


@contextlib.contextmanager
def saying_what_is_intact(kept: Callable[[], str]) -> Iterator[None]:
    """A `DiskFullError` raised inside says ``kept()`` (what the failed write left intact, e.g. the last
    checkpoint), unless it already says what is."""
    try:
        yield
    except DiskFullError as e:
        if not e.kept:
            e.kept = kept()
        raise
