"""Step 2, run walled: the student's process, where it can reach nothing of the grader's.

Grading as root: a user id of its own (`reserve_identity`) inside bubblewrap (`wrap`), dropped there by
``setpriv`` with no groups or capabilities; its own pid, network (none), IPC and host namespaces; of the machine
only what its Python needs, read-only: the operating system (`SYSTEM`) and the environment, the library, the data
and the model cache (`needed_paths`), never the rest (homes, other checkouts of the course, the grader's files);
its own bounded scratch folders; the instructor's and other students' files covered where they lie inside what
it needs; an environment of the variables it needs only (`ENVIRONMENT`: no tokens or secrets of the grader's);
bounded processes, file size, memory, CPU time (`limits`) and kept output (`KEPT_OUTPUT`). Without bubblewrap
(or root) it still runs apart from the checks, as that id (root) or as the grader (not root), bounded the same way.
"""
from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

from . import stopping

try:
    import pwd
except ImportError:  # Windows: no users to switch to
    pwd = None

DEFAULT_USER = "nobody"
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")  # read-only, as they are
# The grader's environment variables the student's Python may see: how it runs, where the models and data are.
ENVIRONMENT = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUTF8",
               "PYTHONIOENCODING", "HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
               "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM", "CUBLAS_WORKSPACE_CONFIG", "CUDA_VISIBLE_DEVICES",
               "MINIBERT_DATA_MIRROR", "MINIBERT_SHARED_DATA_DIR"}
ENVIRONMENT_PREFIXES = ("LC_", "OMP_", "MKL_", "OPENBLAS_")
KEPT_OUTPUT = 8 * 2**20  # bytes of what a notebook's process prints that the grader keeps (the start: the first error)
SCRATCH_SIZE = 1 * 2**30  # bytes each of the student's scratch folders may hold
WORK = Path("/tmp/work")  # the student's working folder, inside its own /tmp
# One identity per graded notebook: user and group ids that no account has.
SUBMISSION_IDS = range(1_700_000, 1_800_000)
IDS_HELD = Path("/run/minibert-grader-ids") if Path("/run").is_dir() else Path("/tmp/minibert-grader-ids")
INSTALL = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"


class WallError(RuntimeError):
    """Student code cannot be run as asked; the message says why and what to do."""


def limits(cpu_seconds: int) -> dict[str, int]:
    """Bounds on the student's process: processes and threads (a fork bomb), a file's size, core dumps, memory
    (half the machine's: the grader's process holds the instructor's copy beside it) and CPU time."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"RLIMIT_NPROC": 4096, "RLIMIT_FSIZE": 512 * 2**20, "RLIMIT_CORE": 0, "RLIMIT_AS": memory // 2,
            "RLIMIT_CPU": cpu_seconds}


def _apply(bounds: dict[str, int]) -> None:
    for name, most in bounds.items():
        soft, hard = resource.getrlimit(getattr(resource, name))
        most = most if hard == resource.RLIM_INFINITY else min(most, hard)
        resource.setrlimit(getattr(resource, name), (most, most))


# --- who runs it -------------------------------------------------------------------------------------------

def user_to_run_as(requested: str | None):
    """The account whose reach stands for the student's (``requested``, else $MINIBERT_GRADER_RUN_AS, else
    ``nobody``) when the grader is root; None when student code runs as the grader."""
    requested = requested or os.environ.get("MINIBERT_GRADER_RUN_AS") or None
    if pwd is None or os.geteuid() != 0:
        if requested and (pwd is None or requested != pwd.getpwuid(os.geteuid()).pw_name):
            raise WallError(f"--run-as {requested}: only a grader started as root can run student code as "
                            "another user; grade as root (it switches to that user) or leave --run-as out")
        return None
    name = requested or DEFAULT_USER
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        raise WallError(f"--run-as {name}: no such user on this machine; create an unprivileged account "
                        "for grading (e.g. useradd --system grader) and pass --run-as grader") from None
    return None if user.pw_uid == 0 else user


def check_user(user) -> None:
    """Start this Python as ``user`` (as the student's process will start) and import the course: a checkout
    the user cannot read would make every notebook fail, and the students lose points for the grader's setup."""
    cache = model_cache() if model_cache().exists() else None
    probe = ("import os, sys, minibert, IPython, cloudpickle, safetensors\n"
             "if sys.argv[1] and not os.access(sys.argv[1], os.R_OK | os.X_OK): print('blocked')")
    try:
        result = subprocess.run([sys.executable, "-c", probe, str(cache or "")], cwd="/", capture_output=True, text=True,
                                user=user.pw_uid, group=user.pw_gid, extra_groups=[], env={**os.environ, "HOME": "/"})
    except OSError as e:  # the Python itself is out of the user's reach: a checkout in a private (0700) home
        result = subprocess.CompletedProcess([], 126, "", f"{type(e).__name__}: {e.strerror}")
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        raise WallError(f"student code runs as {user.pw_name}, who cannot start {sys.executable} with the "
                        f"course's packages ({last}); install the course where {user.pw_name} can read it "
                        "(not under a private home such as /root), or name another user with --run-as")
    if "blocked" in result.stdout:
        raise WallError(f"student code runs as {user.pw_name}, who cannot read {cache}: the notebooks would fail "
                        f"to load their models. Point HF_HOME at a copy {user.pw_name} can read, or let it read and "
                        "enter that folder")


def reserve_identity() -> int:
    """A user (and group) id of `SUBMISSION_IDS` that no account has, no process runs as, and no other grading
    (a thread or another grader on this machine) holds: a file in `IDS_HELD` names the process that holds it.
    A grader that was killed (SIGKILL, a power cut) never gave its id back: the id is taken again, once what
    it left in the scratch folders is removed, as soon as the process its file names has ended."""
    import fcntl

    IDS_HELD.mkdir(mode=0o700, exist_ok=True)
    with open(IDS_HELD / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one reservation at a time on this machine; released on close
        taken = {entry.pw_uid for entry in pwd.getpwall()} | {uid for _, uid in processes()}
        for uid in SUBMISSION_IDS:
            marker = IDS_HELD / str(uid)
            if uid in taken or _holder_alive(marker):
                continue
            if marker.exists():  # its holder ended without giving it back
                remove_files_of(uid)
            marker.write_text(f"{os.getpid()}\n")
            return uid
    raise WallError(f"every grading id of {SUBMISSION_IDS} is held by a running grader: wait for one to finish")


def _holder_alive(marker: Path) -> bool:
    try:
        holder = int(marker.read_text())
    except FileNotFoundError:
        return False
    except (OSError, ValueError):  # unreadable, or written by an older grader (empty): not provably free
        return True
    try:
        os.kill(holder, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, as another user
        pass
    return True


def release_identity(uid: int) -> None:
    """End every process of ``uid``, delete what it left in the shared scratch folders, give the id back."""
    for _ in range(50):
        left = [pid for pid, owner in processes() if owner == uid]
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
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


def remove_files_of(uid: int, places: tuple = ()) -> list[Path]:
    """Delete what ``uid`` left in the machine's shared scratch folders (without bubblewrap they are the
    machine's), and in the world-writable folders directly inside them. Links are removed, never followed."""
    removed = []
    for place in places or map(Path, SCRATCH):
        try:
            entries = list(place.iterdir())
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.lstat()
            except OSError:
                continue
            if info.st_uid == uid:
                shutil.rmtree(entry, ignore_errors=True) if stat.S_ISDIR(info.st_mode) else entry.unlink(missing_ok=True)
                removed.append(entry)
            elif stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002:
                removed += remove_files_of(uid, (entry,))
    return removed


# --- bubblewrap --------------------------------------------------------------------------------------------

def bubblewrap_missing() -> str:
    """Why grading as root does not use bubblewrap here, and what to do; empty if it does."""
    if os.environ.get("MINIBERT_NO_BUBBLEWRAP"):
        return "MINIBERT_NO_BUBBLEWRAP is set"
    if not (shutil.which("bwrap") and shutil.which("setpriv")):
        return f"bwrap or setpriv is not installed; {INSTALL}"
    if not _bubblewrap_works():
        return "this machine does not let bwrap make namespaces (a container without CAP_SYS_ADMIN?)"
    return ""


@functools.cache
def _bubblewrap_works() -> bool:
    probe = wrap(["true"], uid=65534, needed=[], covered=[], assets=None)
    return subprocess.run(probe, capture_output=True, timeout=60).returncode == 0


def model_cache() -> Path:
    """The Hugging Face cache the notebooks load their models from (``HF_HOME``, else its default)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return Path(os.environ.get("HF_HOME") or cache / "huggingface")


def needed_paths() -> list[Path]:
    """What the student's Python needs to read wherever it is: the environment, the library's package folder
    (not the checkout around it, which holds the instructor notebooks and the tests), the folders of
    PYTHONPATH, the data folder and mirror and the model cache (any of them may be under /tmp, which the walls
    replace)."""
    import minibert

    from ..data.layout import data_dir

    paths = [Path(sys.prefix), Path(sys.base_prefix), Path(minibert.__file__).resolve().parent, model_cache(),
             *map(Path, filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))),
             Path(os.environ.get("MINIBERT_SHARED_DATA_DIR") or data_dir()),
             *([Path(os.environ["MINIBERT_DATA_MIRROR"])] if os.environ.get("MINIBERT_DATA_MIRROR") else [])]
    return [p.resolve() for p in paths if p.exists()]


def wrap(command: list[str], *, uid: int, needed: list[Path], covered: list[Path], assets: Path | None) -> list[str]:
    """The command line that runs ``command`` as ``uid`` inside bubblewrap's walls (module docstring), in
    `WORK`, with each entry of ``assets`` bound read-only into it.

    An allow-list: the sandbox's root is empty, and only `SYSTEM` and ``needed`` are bound into it, each at its
    own path, the folders above a needed one made traversable but not listable. What is not named is not
    there: another checkout of the course with its solutions, a home folder, the grader's own files."""
    argv = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--unshare-net", "--unshare-cgroup-try"]
    for place in SYSTEM:
        if os.path.islink(place):  # /bin -> usr/bin on a merged /usr
            argv += ["--symlink", os.readlink(place), place]
        elif os.path.isdir(place):
            argv += ["--ro-bind", place, place]
    argv += ["--dev", "/dev", "--proc", "/proc"]
    for scratch in SCRATCH:
        argv += ["--size", str(SCRATCH_SIZE), "--perms", "1777", "--tmpfs", scratch]
    visible = [Path(p) for p in SYSTEM if os.path.isdir(p) and not os.path.islink(p)]
    made, bound = {Path("/"), *map(Path, SCRATCH)}, []
    for path in sorted(set(needed), key=lambda p: len(p.parts)):
        if any(path == v or v in path.parents for v in [*visible, *bound]):
            continue  # there already
        for parent in reversed(path.parents):  # bwrap would make them 0700: traversable, not listable
            if parent not in made:
                argv += ["--perms", "0711", "--dir", str(parent)]
                made.add(parent)
        argv += ["--ro-bind", str(path), str(path)]
        bound.append(path)
    for path in covered:  # inside a bound folder (a checkout on PYTHONPATH, /usr): laid over; elsewhere not there
        inside = any(path == b or b in path.parents for b in [*visible, *bound])
        if inside and not any(path == n or path in n.parents for n in needed):
            argv += ["--perms", "0555", "--tmpfs", str(path)]
    argv += ["--perms", "0777", "--dir", str(WORK), "--perms", "0777", "--dir", "/tmp/home"]
    for entry in course_files(assets):
        argv += ["--ro-bind", str(entry), str(WORK / entry.name)]
    return [*argv, "--chdir", str(WORK), "--", shutil.which("setpriv") or "setpriv", f"--reuid={uid}",
            f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
            *command]


def course_files(release: Path | None) -> list[Path]:
    """What students get beside their notebooks (models, results): the release folder less its notebooks."""
    if release is None or not release.is_dir():
        return []
    return [e for e in sorted(release.iterdir()) if not e.name.endswith(".ipynb") and not e.name.startswith(".")]


# --- starting it -------------------------------------------------------------------------------------------

def start(*, assets: Path, work: Path, uid: int | None, covered: list[Path], cpu_seconds: int, log: Path,
          exchange: Path | None = None):
    """Start the student's process (`minibert.grading.runner`); (process, requests pipe, answers pipe).

    ``work`` is a fresh folder of the grader's to use as the working folder where bubblewrap cannot
    be used; ``log`` gets what the student's code prints (never read by the grader's checks); ``exchange`` is
    a folder of the tests' files, bound read-only at its own path."""
    requests_read, requests_write = os.pipe()
    answers_read, answers_write = os.pipe()
    env = {key: value for key, value in os.environ.items()
           if key in ENVIRONMENT or key.startswith(ENVIRONMENT_PREFIXES)}  # no token or secret of the grader's
    env.update(MINIBERT_REQUESTS_FD=str(requests_read), MINIBERT_ANSWERS_FD=str(answers_write), MPLBACKEND="Agg",
               PYTHONDONTWRITEBYTECODE="1", TQDM_DISABLE="1")
    from ..data.layout import data_dir  # models and data read where they are: the student's home is new
    env.update(HF_HOME=str(model_cache()),
               MINIBERT_SHARED_DATA_DIR=env.get("MINIBERT_SHARED_DATA_DIR") or str(data_dir()))
    command = [sys.executable, "-m", "minibert.grading.runner"]
    bounds = limits(cpu_seconds)
    walled = uid is not None and not bubblewrap_missing()
    if walled:
        env.update(HOME="/tmp/home", MINIBERT_DATA_DIR="/tmp/home/data", USER=f"grader-{uid}", TMPDIR="/tmp")
        needed = [*needed_paths(), *([exchange] if exchange else [])]
        command, cwd = wrap(command, uid=uid, needed=needed, covered=covered, assets=assets), "/"
    else:
        work.mkdir(mode=0o700)
        for entry in course_files(assets):  # the grader's copies: linked for the grader, copied for another id
            if uid is None:
                (work / entry.name).symlink_to(entry)
            elif entry.is_dir():
                shutil.copytree(entry, work / entry.name, symlinks=False)
            else:
                shutil.copyfile(entry, work / entry.name)
        (work / ".home").mkdir()
        env.update(HOME=str(work / ".home"), MINIBERT_DATA_DIR=str(work / ".home" / "data"))
        if uid is not None:
            for path in [work, *work.rglob("*")]:
                os.chown(path, uid, uid, follow_symlinks=False)
        cwd = str(work)

    ends_with_the_checker = stopping.ends_with_this_process()  # (bubblewrap's own --die-with-parent when walled)

    def wall_in():
        os.setsid()
        _apply(bounds)
        if uid is not None and not walled:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        if not walled:
            ends_with_the_checker()  # after setuid, which clears it

    output_read, output_write = os.pipe()
    try:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=output_write,
                                   stderr=subprocess.STDOUT, pass_fds=(requests_read, answers_write),
                                   preexec_fn=wall_in)
    finally:
        for fd in (requests_read, answers_write, output_write):
            os.close(fd)
    threading.Thread(target=_keep_start_of_output, args=(output_read, log), daemon=True).start()
    return process, os.fdopen(requests_write, "wb", buffering=1 << 20), os.fdopen(answers_read, "rb", buffering=0)


def _keep_start_of_output(fd: int, log: Path) -> None:
    """Copy what the student's process prints into ``log``, its first `KEPT_OUTPUT` bytes (they hold the first
    error); the rest is read and dropped, so that printing in a loop cannot fill the grader's disk."""
    kept = 0
    with open(fd, "rb", closefd=True) as output, open(log, "ab") as out:
        while chunk := output.read1(1 << 16):
            if kept < KEPT_OUTPUT:
                out.write(chunk[:KEPT_OUTPUT - kept])
                kept += len(chunk)
                if kept >= KEPT_OUTPUT:
                    out.write(f"\n[the rest of the output was not kept: {KEPT_OUTPUT:,} bytes are]\n".encode())
                out.flush()


def stop(process: subprocess.Popen) -> None:
    """End the student's process and everything it started (its session; its namespace with bubblewrap)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.kill()
    process.wait()
