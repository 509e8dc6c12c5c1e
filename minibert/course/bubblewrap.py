"""The grading kernel's walls from bubblewrap (``bwrap``, the sandbox Flatpak runs apps in), where the machine has it.

`minibert.course.sandbox` gives each submission's kernel an identity of its own and bounded resources. What
bubblewrap adds, from a tool many eyes have read rather than code of ours:

- its own **process namespace**: the kernel sees only its own processes, and every process it starts dies
  with it (the namespace ends with its first process), whatever it does to detach;
- a **read-only view of the machine**, in which only the kernel's own folder and its private home can be
  written;
- its own **/tmp, /var/tmp and /dev/shm**, empty and of bounded size, gone when the kernel ends: nothing is
  left for the next submission, and nothing another process put there is seen;
- the instructor notebooks, sibling submissions and git history it could otherwise read laid over with an
  empty file or folder;
- its own IPC and host name. The network is shared: the kernel talks to nbgrader over localhost.

Inside, ``setpriv`` (util-linux) drops to the submission's id, with no groups, no capabilities and no way to
gain privileges (``no_new_privs``). Without ``bwrap`` (or ``setpriv``), or where the machine does not let it
make namespaces, the sandbox falls back to its own mount namespace and says so (`missing`).
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")  # the kernel's own, empty: nothing shared with the machine or the next
SCRATCH_SIZE = 1 * 2**30  # bytes each may hold
INSTALL = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"


def tools() -> tuple[str, str] | None:
    """The paths of ``bwrap`` and ``setpriv``, or None if either is missing."""
    bwrap, setpriv = shutil.which("bwrap"), shutil.which("setpriv")
    return (bwrap, setpriv) if bwrap and setpriv else None


def usable() -> bool:
    """Whether this grader can wall kernels in with bubblewrap: Linux, root, both tools, a machine that lets it
    make the namespaces (tried once, with the options `wrap` uses), and not switched off by setting
    ``MINIBERT_NO_BUBBLEWRAP`` (the tests grade both ways; a machine where bwrap misbehaves)."""
    if os.environ.get("MINIBERT_NO_BUBBLEWRAP") or not sys.platform.startswith("linux") or os.geteuid() != 0:
        return False
    return tools() is not None and _works()


@functools.cache
def _works() -> bool:
    probe = wrap(["true"], writable=[], hidden=[], empty=Path("/dev/null"), uid=65534, gid=65534)
    return subprocess.run(probe, capture_output=True, timeout=60).returncode == 0


def missing() -> str:
    """Why grading as root does not use bubblewrap here, and what to do; empty if it does."""
    if usable():
        return ""
    if os.environ.get("MINIBERT_NO_BUBBLEWRAP"):
        return "MINIBERT_NO_BUBBLEWRAP is set"
    if tools() is None:
        return f"bwrap or setpriv is not installed; {INSTALL}"
    return "this machine does not let bwrap make namespaces (a container without CAP_SYS_ADMIN?)"


def wrap(command: list[str], *, writable: list[Path], hidden: list[Path], empty: Path, uid: int, gid: int,
         cwd: Path | None = None) -> list[str]:
    """The command line that runs ``command`` as ``uid``:``gid`` inside bubblewrap's walls (module docstring):
    ``writable`` folders bound read-write, each of ``hidden`` covered (a file by ``empty``, a folder by an
    empty one), starting in ``cwd``."""
    bwrap, setpriv = tools() or ("bwrap", "setpriv")
    argv = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for scratch in SCRATCH:
        argv += ["--size", str(SCRATCH_SIZE), "--perms", "1777", "--tmpfs", scratch]
    made = set()
    for folder in writable:  # a folder inside a fresh scratch folder needs its parents made, traversable only
        for parent in reversed(Path(folder).parents):
            if any(Path(scratch) in parent.parents for scratch in SCRATCH) and parent not in made:
                argv += ["--perms", "0711", "--dir", str(parent)]
                made.add(parent)
        argv += ["--bind", str(folder), str(folder)]
    for path in hidden:
        argv += ["--perms", "0555", "--tmpfs", str(path)] if Path(path).is_dir() else ["--ro-bind", str(empty), str(path)]
    if cwd is not None:
        argv += ["--chdir", str(cwd)]
    return [*argv, "--", setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--", *command]
