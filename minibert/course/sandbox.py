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
- drops every group and switches to the user (``nobody`` unless the grader says otherwise),
  then becomes the kernel (``exec``: same process, so nbgrader's interrupts and kills still reach it).

The rest of the throwaway course folder (instructor copy, gradebook) is created private to root
(``PRIVATE_UMASK``), so the kernel cannot open it. What this cannot protect is what the user may
read anyway: `check_user` reports instructor notebooks and submissions left world-readable, and
INSTRUCTORS.md says what remains the grader's part (a container or VM, no network).

    python -m minibert.course.sandbox --user nobody --course ROOT -- PYTHON -m ipykernel_launcher -f FILE
"""
import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

try:
    import pwd
except ImportError:  # Windows: no users to switch to; student code runs as the grader
    pwd = None

DEFAULT_USER = "nobody"
PRIVATE_UMASK = 0o077  # what nbgrader writes while grading: root's only
TRAVERSE_ONLY = 0o711  # folders between the course root and the kernel's folder: enter, but not list


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
    result = subprocess.run([sys.executable, "-c", probe, str(hf_home) if hf_home.exists() else "", *map(str, private)],
                            cwd="/", capture_output=True, text=True, user=user.pw_uid, group=user.pw_gid,
                            extra_groups=[], env={**os.environ, "HOME": "/"})
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


def hand_over(folder: Path, course: Path, user) -> None:
    """Give ``folder`` (and everything in it) to ``user``; let it reach ``folder`` from ``course``."""
    for place in [course, *reversed(folder.relative_to(course).parents[:-1])]:
        (course / place).chmod(TRAVERSE_ONLY)
    for here, dirs, files in os.walk(folder):
        for name in [here, *(os.path.join(here, n) for n in dirs + files)]:
            os.chown(name, user.pw_uid, user.pw_gid, follow_symlinks=False)


def launch(user_name: str, course: Path, command: list[str]) -> None:
    """Become the kernel ``command`` as ``user_name``, in the current folder (never returns)."""
    user = pwd.getpwnam(user_name)
    home = course / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    os.chown(home, user.pw_uid, user.pw_gid)
    hand_over(Path.cwd(), course, user)
    if "-f" in command:  # the connection file: nbgrader writes it private to root
        at = command.index("-f") + 1
        copy = home / "connection.json"
        shutil.copyfile(command[at], copy)
        os.chown(copy, user.pw_uid, user.pw_gid)
        command = [*command[:at], str(copy), *command[at + 1:]]
    # the grader's data and models are read where they are; data they lack is fetched into the new home
    os.environ.update({variable: str(folder) for variable, folder in caches().items()})
    os.environ["MINIBERT_DATA_DIR"] = str(home / "data")
    os.environ.update(HOME=str(home), USER=user.pw_name, LOGNAME=user.pw_name)
    os.setgroups([])
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)
    os.execv(command[0], command)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minibert.course.sandbox", description=__doc__.split("\n")[0])
    parser.add_argument("--user", required=True, help="the unprivileged account the kernel runs as")
    parser.add_argument("--course", required=True, type=Path, help="the throwaway nbgrader course folder")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the kernel's command line")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no kernel command after --")
    launch(args.user, args.course.resolve(), command)
    return 1


if __name__ == "__main__":
    sys.exit(main())
