"""Files a user hands in (data files, corpora, model folders, configs) are read only if they are regular files.

Opening a named pipe (FIFO) to read waits for a writer that may never come, so a command hangs without a
word; a character device such as /dev/zero never ends; a socket cannot be opened at all. `regular_file`
looks first (a stat never blocks) and refuses anything but a regular file, or a link to one, with a
message that names the path, what it is, and what to do. Every reader of such files goes through it:
`minibert.config.read_json` (configs, records, tokenizer files), the weights and vocabulary readers,
the corpus reader, and `minibert.data.ensure` for every file of a dataset.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO), which would make this command wait for a writer, maybe forever"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISDIR, "a folder"))


class NotARegularFile(ValueError):
    """A path to read is something other than a regular file; the message names it and says what to do."""


def regular_file(path: str | os.PathLike, fix: str = "put the file itself there") -> Path:
    """``path``, if it is a regular file or does not exist (opening it then says so); else `NotARegularFile`."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return path
    if stat.S_ISREG(mode):
        return path
    kind = next((what for test, what in KINDS if test(mode)), "not a regular file")
    raise NotARegularFile(f"{path} is not a regular file but {kind}; nothing was read from it. {fix[0].upper()}"
                          f"{fix[1:]}")
