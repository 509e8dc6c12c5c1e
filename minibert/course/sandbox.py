"""Student code runs as an unprivileged user: the grading kernel's launcher, and its checks.

nbgrader executes a submission by starting a Jupyter kernel and sending it the student's cells. A
grader started as root would run that code as root: it could read the instructor notebooks with
the hidden tests, the gradebook and every other submission, and change anything on the machine.
So when the grader is root, its kernelspec starts each kernel through this module, which

- makes the notebook's working folder (a throwaway copy holding only that submission) the user's own,
  and the folders above it traversable but not listable;
- copies the connection file (written by nbgrader, readable by root only) into a private home;
- points the kernel at the grader's data folder and model cache (read where they are; data they
  lack is fetched into the private home);
- drops every group and switches to a user id of that notebook's own (`reserve_identity`; the account,
  ``nobody`` unless the grader says otherwise, is what the grader checks the kernel can read), with its
  resources bounded (`LIMITS`), then becomes the kernel (``exec``: same process, so nbgrader's interrupts and
  kills still reach it); when the grading ends, every process of that id is killed (`release_identity`).
- where the machine has bubblewrap, runs the kernel inside its walls (`minibert.course.bubblewrap`: a
  process namespace, a read-only machine, a /tmp of its own, the instructor notebooks it could read
  covered); else, where the machine allows, empties those notebooks in a mount namespace of its own
  (`hide`).

The rest of the throwaway course folder (instructor copy, gradebook) is created private to root
(``PRIVATE_UMASK``), so the kernel cannot open it. What this cannot protect is what the user may
read anyway: `check_user` reports instructor notebooks and submissions left world-readable, and
INSTRUCTORS.md says what remains the grader's part (a container or VM, no network).

    python -m minibert.course.sandbox --user nobody --course ROOT -- PYTHON -m ipykernel_launcher -f FILE
"""
import argparse
import ctypes
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

from . import bubblewrap

try:
    import pwd
except ImportError:  # Windows: no users to switch to; student code runs as the grader
    pwd = None

DEFAULT_USER = "nobody"
PRIVATE_UMASK = 0o077  # what nbgrader writes while grading: root's only
TRAVERSE_ONLY = 0o711  # folders between the course root and the kernel's folder: enter, but not list
# One identity per graded notebook: user and group ids that no account has, so that a process one submission
# leaves behind can neither signal the next one's kernel nor read its files, and can be found and ended.
SUBMISSION_IDS = range(1_700_000, 1_800_000)
# Bounds on what one submission's kernel may take, so that it cannot stop the batch: processes and threads
# (a fork bomb), the size of any file it writes (a full disk), core dumps, and memory (address space: at most
# the machine's memory, so that the kernel's own allocation fails before the machine's OOM killer picks a victim).
LIMITS = {"RLIMIT_NPROC": 4096, "RLIMIT_FSIZE": 2 * 2**30, "RLIMIT_CORE": 0, "RLIMIT_AS": 32 * 2**30}


def memory_of_this_machine() -> int | None:
    """Bytes of physical memory, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
IDS_HELD = Path("/run/minibert-grader-ids") if Path("/run").is_dir() else Path("/tmp/minibert-grader-ids")
CLONE_NEWNS, MS_BIND, MS_REC, MS_PRIVATE = 0x00020000, 4096, 16384, 1 << 18


class SandboxError(RuntimeError):
    """Student code cannot be run as the requested user; the message says why and what to do."""


def user_to_run_as(requested: str | None):
    """The account student code runs as: ``requested`` (else $MINIBERT_GRADER_RUN_AS, else ``nobody``)
    when the grader is root; None when student code runs as the grader: an ordinary grader cannot switch
    users, and ``root`` named on purpose means a throwaway container that needs no switch."""
    requested = requested or os.environ.get("MINIBERT_GRADER_RUN_AS") or None
    if pwd is None or os.geteuid() != 0:
        if requested and (pwd is None or requested != pwd.getpwuid(os.geteuid()).pw_name):
            raise SandboxError(f"--run-as {requested}: only a grader started as root can run student code as "
                               "another user; grade as root (it switches to that user) or leave --run-as out")
        return None
    name = requested or DEFAULT_USER
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        raise SandboxError(f"--run-as {name}: no such user on this machine; create an unprivileged account "
                           "for grading (e.g. useradd --system grader) and pass --run-as grader") from None
    return None if user.pw_uid == 0 else user


def caches() -> dict[str, Path]:
    """The grader's data folder and Hugging Face cache, which the kernel reads where they are (its own
    home is new and empty): environment variable -> folder."""
    from ..data.layout import data_dir

    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    hf_home = os.environ.get("HF_HOME") or cache / "huggingface"
    return {"MINIBERT_SHARED_DATA_DIR": Path(os.environ.get("MINIBERT_SHARED_DATA_DIR") or data_dir()),
            "HF_HOME": Path(hf_home)}


def check_user(user, private: list[Path]) -> list[Path]:
    """Start this Python as ``user`` (as the kernel will); return those of ``private`` it can read.

    Raises SandboxError when the user cannot import the course's packages (the environment lives where
    that user cannot read it, e.g. under /root) or cannot read the grader's model cache: every notebook
    would fail, and the students would lose points for the grader's setup.
    """
    # the model cache must be readable (offline, the notebooks have no other source); an unreadable data
    # folder only costs time, as the kernel fetches what it cannot read
    hf_home = caches()["HF_HOME"]
    probe = ("import os, sys, ipykernel, minibert\n"
             "cache, private = sys.argv[1], sys.argv[2:]\n"
             "if cache and not os.access(cache, os.R_OK | os.X_OK): print('blocked', cache)\n"
             "for p in private:\n"
             "    if os.access(p, os.R_OK): print('readable', p)\n")
    try:
        result = subprocess.run([sys.executable, "-c", probe, str(hf_home) if hf_home.exists() else "",
                                 *map(str, private)], cwd="/", capture_output=True, text=True, user=user.pw_uid,
                                group=user.pw_gid, extra_groups=[], env={**os.environ, "HOME": "/"})
    except OSError as e:  # the Python itself is out of the user's reach: a checkout in a private (0700) home
        result = subprocess.CompletedProcess([], 126, "", f"{type(e).__name__}: {e.strerror}")
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["exit status %d" % result.returncode])[-1]
        raise SandboxError(f"student code runs as {user.pw_name}, who cannot start {sys.executable} with the "
                           f"course's packages ({last}); install the course where {user.pw_name} can read it "
                           "(not under a private home such as /root), or name another user with --run-as")
    found = [line.split(" ", 1) for line in result.stdout.splitlines()]
    if any(kind == "blocked" for kind, _ in found):
        raise SandboxError(f"student code runs as {user.pw_name}, who cannot read {hf_home}: the notebooks would "
                           f"fail to load their models. Point HF_HOME at a copy {user.pw_name} can read, or let it "
                           "read and enter that folder")
    return [Path(path) for kind, path in found if kind == "readable"]


def secrets_beside(source, submission_dir: Path, most: int = 2000) -> list[Path]:
    """What else a kernel must not read, besides the instructor notebooks: this submission's notebooks and
    those of its sibling folders (a class's submissions side by side), and the git history of the checkout
    the instructor notebooks live in, which holds every hidden test."""
    found = sorted(submission_dir.glob("*.ipynb"))
    found += sorted(p for p in submission_dir.resolve().parent.glob("*/*.ipynb")
                    if p.parent != submission_dir.resolve())[:most]
    for folder in [Path(source).resolve(), *Path(source).resolve().parents]:
        if (folder / ".git").exists():
            found.append(folder / ".git")
            break
    return found


def hand_over(folder: Path, course: Path, uid: int, gid: int) -> None:
    """Give ``folder`` (and everything in it but notebooks) to ``uid``; let it reach ``folder`` from ``course``.

    The notebooks stay root's, unreadable: nbgrader writes the one being graded into this folder before the
    kernel starts, with every test cell restored (hidden tests and the canary's tokens included), and sends
    the kernel its cells itself, so the kernel never needs the file."""
    for place in [course, *reversed(folder.relative_to(course).parents[:-1])]:
        (course / place).chmod(TRAVERSE_ONLY)
    for here, dirs, files in os.walk(folder):
        for name in [here, *(os.path.join(here, n) for n in dirs + files)]:
            if name.endswith(".ipynb") and not os.path.islink(name):
                os.chown(name, 0, 0, follow_symlinks=False)
                os.chmod(name, 0o600)
                continue
            os.chown(name, uid, gid, follow_symlinks=False)


def reserve_identity() -> int:
    """A user (and group) id of `SUBMISSION_IDS` that no account has, no process runs as, and no other grading
    (a thread or another grader on this machine) holds: a file created exclusively in `IDS_HELD` marks it."""
    IDS_HELD.mkdir(mode=0o700, exist_ok=True)
    taken = {entry.pw_uid for entry in pwd.getpwall()} | {uid for _, uid in processes()}
    for uid in SUBMISSION_IDS:
        if uid in taken:
            continue
        try:
            os.close(os.open(IDS_HELD / str(uid), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            continue
        return uid
    raise SandboxError(f"every grading id of {SUBMISSION_IDS} is held: remove {IDS_HELD} if no grader is running")


# World-writable places a kernel can leave files in outside its own folder (which goes with the course folder).
SHARED_SCRATCH = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))


def remove_files_of(uid: int, places=SHARED_SCRATCH) -> list[Path]:
    """Delete what ``uid`` left in the machine's shared scratch folders (and in the world-writable folders
    directly inside them, such as /tmp/.X11-unix), so that the next submission to get the id finds nothing of
    this one's: notes, copies of its notebook, a planted module. Links are removed, never followed."""
    removed = []
    for place in places:
        try:
            entries = list(place.iterdir())
        except OSError:  # not on this machine, or not readable
            continue
        for entry in entries:
            try:
                info = entry.lstat()
            except OSError:
                continue
            if info.st_uid == uid:
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
                removed.append(entry)
            elif stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002:  # world-writable (and sticky)
                removed += remove_files_of(uid, (entry,))
    return removed


def release_identity(uid: int) -> None:
    """End every process of ``uid``, delete what it left in the shared scratch folders, and give the id back."""
    end_processes(uid)
    remove_files_of(uid)
    (IDS_HELD / str(uid)).unlink(missing_ok=True)


def processes() -> list[tuple[int, int]]:
    """(pid, real user id) of every process on the machine (Linux: read from /proc)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uid = next(line.split()[1] for line in status.read_text().splitlines() if line.startswith("Uid:"))
        except (OSError, StopIteration):  # gone meanwhile
            continue
        found.append((int(status.parent.name), int(uid)))
    return found


def end_processes(uid: int) -> int:
    """Kill every process running as ``uid`` (a submission's identity), again until none is left (one may
    fork while others die); how many were killed. A submission's detached processes end with its grading."""
    killed = 0
    for _ in range(50):
        left = [pid for pid, owner in processes() if owner == uid]
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    return killed


def hide(paths: list[Path], empty: Path, empty_dir: Path | None = None) -> None:
    """In a mount namespace of this process's own, lay ``empty`` (an empty file) over each file of ``paths``
    and ``empty_dir`` (an empty folder) over each folder: the kernel and everything it starts see empty files
    where the instructor notebooks are, and an empty folder where the checkout's git history is. Needs root
    with CAP_SYS_ADMIN (OSError otherwise; `can_hide` asks first)."""
    libc = ctypes.CDLL(None, use_errno=True)

    def check(result: int, what: str) -> None:
        if result != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"{what}: {os.strerror(error)}")

    check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")  # nothing leaks out
    for path in paths:
        cover = empty_dir if empty_dir is not None and Path(path).is_dir() else empty
        check(libc.mount(os.fsencode(cover), os.fsencode(path), None, MS_BIND, None), f"bind {cover} over {path}")


def can_hide() -> bool:
    """Whether this machine lets the grader hide files from a kernel (bubblewrap, or `hide`): root, and allowed
    to make a mount namespace (a container started without CAP_SYS_ADMIN is not)."""
    if pwd is None or os.geteuid() != 0 or not sys.platform.startswith("linux"):
        return False
    if bubblewrap.usable():
        return True
    probe = "import sys; from minibert.course.sandbox import hide; hide([], None)"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def limit_resources() -> None:
    """Apply `LIMITS` to this process and what it starts (never above a hard limit the grader already has)."""
    for name, most in LIMITS.items():
        if name == "RLIMIT_AS":
            most = min(most, memory_of_this_machine() or most)
        soft, hard = resource.getrlimit(getattr(resource, name))
        most = most if hard == resource.RLIM_INFINITY else min(most, hard)
        resource.setrlimit(getattr(resource, name), (most, most))


def launch(user_name: str, course: Path, command: list[str], uid: int | None = None,
           hidden: tuple[Path, ...] = ()) -> None:
    """Become the kernel ``command`` as ``user_name`` (or as the bare id ``uid``: one of its own for each
    submission), in the current folder, with ``hidden`` files emptied and resources bounded (never returns)."""
    account = pwd.getpwnam(user_name)
    uid = account.pw_uid if uid is None else uid
    gid = account.pw_gid if uid == account.pw_uid else uid
    name = account.pw_name if uid == account.pw_uid else f"grader-{uid}"
    home = course / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    os.chown(home, uid, gid)
    hand_over(Path.cwd(), course, uid, gid)
    if "-f" in command:  # the connection file: nbgrader writes it private to root
        at = command.index("-f") + 1
        copy = home / "connection.json"
        shutil.copyfile(command[at], copy)
        os.chown(copy, uid, gid)
        command = [*command[:at], str(copy), *command[at + 1:]]
    empty, empty_dir = course / "empty", course / "empty-folder"
    empty.write_bytes(b"")
    empty.chmod(0o444)
    empty_dir.mkdir(mode=0o555, exist_ok=True)
    walled = bubblewrap.usable()
    if hidden and not walled:
        hide(list(hidden), empty, empty_dir)
    # the grader's data and models are read where they are; data they lack is fetched into the new home
    os.environ.update({variable: str(folder) for variable, folder in caches().items()})
    os.environ["MINIBERT_DATA_DIR"] = str(home / "data")
    os.environ.update(HOME=str(home), USER=name, LOGNAME=name)
    limit_resources()
    if walled:  # bubblewrap's namespaces, then setpriv's drop to the id: the tools' walls, not ours
        # In its own process namespace the kernel's parent is pid 1, which ipykernel's parent poller reads as
        # "orphaned" and exits; bwrap's --die-with-parent ends the kernel with nbgrader instead.
        os.environ.pop("JPY_PARENT_PID", None)
        command = bubblewrap.wrap(command, writable=[Path.cwd(), home], hidden=list(hidden), empty=empty,
                                  uid=uid, gid=gid, cwd=Path.cwd())
        os.execv(command[0], command)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    os.execv(command[0], command)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minibert.course.sandbox", description=__doc__.split("\n")[0])
    parser.add_argument("--user", required=True, help="the unprivileged account the kernel runs as")
    parser.add_argument("--course", required=True, type=Path, help="the throwaway nbgrader course folder")
    parser.add_argument("--uid", type=int, help="run as this bare user and group id (one per submission)")
    parser.add_argument("--hide", type=Path, action="append", default=[], help="a file the kernel must not read")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the kernel's command line")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no kernel command after --")
    launch(args.user, args.course.resolve(), command, args.uid, tuple(args.hide))
    return 1


if __name__ == "__main__":
    sys.exit(main())
