"""Files that appear whole or not at all.

A download, a dataset copy or a checkpoint interrupted half-way (Ctrl-C, a full disk, a killed
kernel) must never leave a file that looks complete. We write to a hidden temporary file in the
same folder, so that the final ``os.replace`` is a single atomic rename on the same file system.
"""
from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path to write; on success it becomes ``target``, on any error it is removed."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.part")
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
