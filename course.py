#!/usr/bin/env python3
"""The course's two commands: install what is missing, then open the notebooks or run every test.

    python3 course.py lab            # JupyterLab on notebooks/
    python3 course.py test           # every test: unit, parity, notebooks (nbval), grading (what CI runs)
    python3 course.py test --quick   # a few minutes: no notebook runs, no tests marked slow
    python3 course.py run CMD ...    # any command in the course's environment: run minibert finetune sst2 ...

Both create ``.venv/`` beside this file on first use, install torch first and pinned (on Linux without
an NVIDIA GPU, the CPU build from PyTorch's index: PyPI's Linux wheel is the CUDA build, gigabytes a
laptop does not need), then the pinned rest from pyproject.toml. Later runs skip the install until pyproject.toml changes, so they also work offline.
Extra arguments go to the program: ``python3 course.py test -k parity``, ``python3 course.py lab --port 8890``.
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
CALLER = Path.cwd()
VENV = Path(os.environ.get("MINIBERT_VENV", ROOT / ".venv"))
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".minibert-installed"
NBVAL = ["--nbval", "--nbval-current-env", "--nbval-sanitize-with", "tests/nbval_sanitize.cfg",
         "--nbval-cell-timeout=600"]


def torch_pin() -> str:
    """The torch requirement exactly as pyproject.toml pins it."""
    match = re.search(r'"(torch==[^"]+)"', (ROOT / "pyproject.toml").read_text())
    if not match:
        sys.exit("pyproject.toml does not pin torch (expected a line like \"torch==2.13.0\")")
    return match.group(1)


CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # PyTorch's own index of CPU-only builds


def has_nvidia_gpu() -> bool:
    return Path("/proc/driver/nvidia").exists() or any(
        (Path(folder) / "nvidia-smi").exists() for folder in os.environ.get("PATH", "").split(os.pathsep))


def torch_installs() -> list[list[str]]:
    """pip arguments that install the pinned torch, to be tried in order.

    On Linux, PyPI's torch wheel is the CUDA build: about 2.5 GB with its nvidia packages. A Linux machine
    without an NVIDIA driver gets the CPU build of the same version from PyTorch's CPU index instead (a
    few hundred MB); where that index cannot be reached (no internet, a registry mirror), pip's own
    configured indexes come next. macOS and Windows wheels on PyPI are CPU builds already.
    """
    pin = torch_pin()
    if sys.platform.startswith("linux") and not has_nvidia_gpu() and not os.environ.get("MINIBERT_TORCH_DEFAULT_INDEX"):
        return [[pin, "--index-url", CPU_INDEX, "--timeout", "15", "--retries", "1"], [pin]]
    return [[pin]]


def ensure_installed() -> None:
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + sys.version.encode()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    if not PYTHON.exists():
        print(f"Creating a virtual environment in {VENV.name}/ ...", flush=True)
        venv.create(VENV, with_pip=True)
    pip = [str(PYTHON), "-m", "pip", "install", "--disable-pip-version-check"]
    attempts = torch_installs()
    print(f"Installing {torch_pin()}" + (" (the CPU build: no NVIDIA GPU here)" if len(attempts) > 1 else "")
          + ", then the course's pinned packages ...", flush=True)
    for k, args in enumerate(attempts):
        if subprocess.call(pip + args) == 0:
            break
        if k + 1 < len(attempts):
            print(f"{CPU_INDEX} could not be used; trying pip's configured index instead ...", flush=True)
    else:
        sys.exit("Installing torch failed (see pip's message above). Without internet, install from a "
                 "local wheel folder: PIP_FIND_LINKS=DIR python3 course.py ...")
    if subprocess.call(pip + ["-e", f"{ROOT}[test]"]) != 0:
        sys.exit("Installation failed (see pip's message above). Without internet, install from a "
                 "local wheel folder: PIP_FIND_LINKS=DIR python3 course.py ...")
    STAMP.write_text(wanted)


NBGRADER_SERVER_EXTENSIONS = ("formgrader", "assignment_list", "course_list", "validate_assignment")


def student_jupyter_config() -> Path:
    """A Jupyter config folder for the student release: nbgrader is installed (the course's grading
    needs it), but its menus (Create Assignment, Formgrader, ...) are for teachers, so its server and
    JupyterLab extensions are switched off here, without touching the environment or ~/.jupyter."""
    folder = ROOT / ".jupyter-student"
    (folder / "labconfig").mkdir(parents=True, exist_ok=True)
    server = {"ServerApp": {"jpserver_extensions": {f"nbgrader.server_extensions.{name}": False
                                                    for name in NBGRADER_SERVER_EXTENSIONS}}}
    (folder / "jupyter_server_config.json").write_text(json.dumps(server, indent=2) + "\n")
    (folder / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyter/nbgrader": True}}, indent=2) + "\n")
    return folder


def workers(extra: list[str], named_paths: bool) -> list[str]:
    """pytest-xdist options for a run over the whole suite: a worker per core (at most four), and each file
    whole on one worker (`--dist loadfile`), so a notebook's cells run in order in one kernel and a module's
    fixtures are made once. Not for named files, nor when the arguments choose workers themselves or need one
    process (``--pdb``, ``-p no:xdist``). Each worker's torch then gets its share of the cores (`main` sets
    OMP_NUM_THREADS): two kernels each spinning two threads on two cores run slower than one after the other."""
    chosen = {"-n", "--numprocesses", "--pdb", "--trace", "-p", "-s"}
    if named_paths or (os.cpu_count() or 1) < 2 or any(arg.split("=")[0] in chosen or arg.startswith("-n")
                                                        for arg in extra):
        return []
    return ["-n", str(min(4, os.cpu_count() or 1)), "--dist", "loadfile"]


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 11):
        sys.exit(f"minibert needs Python 3.11 or newer; this is {sys.version.split()[0]}. "
                 "Run it as python3.11 course.py ... (or newer).")
    if not argv or argv[0] not in ("lab", "test", "run") or argv == ["run"]:
        sys.exit(__doc__)
    command, extra = argv[0], argv[1:]
    if command == "test" and not (ROOT / "tests").is_dir():
        sys.exit("This copy of the course is the student release: it has no tests. "
                 "Run python3 course.py lab to open the notebooks.")
    ensure_installed()
    os.chdir(ROOT)
    if command == "run":  # the venv's programs first on PATH, as `source .venv/bin/activate` would do
        env = {**os.environ, "VIRTUAL_ENV": str(VENV), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        program = BIN / extra[0]
        cmd = [str(PYTHON) if extra[0] in ("python", "python3") else str(program) if program.exists() else extra[0],
               *extra[1:]]
        os.chdir(CALLER)  # relative paths in the command mean what they meant where it was typed
        return hand_over(cmd, env)
    if command == "lab" and not (ROOT / "tests").is_dir():  # the student release: no instructor menus
        os.environ["JUPYTER_CONFIG_DIR"] = str(student_jupyter_config())
    if command == "lab":
        # Jupyter hides the stored interactive outputs (bertviz views, widgets) of a notebook it has not
        # been told to trust; these are the course's own notebooks, so trust them (the files are not changed).
        subprocess.call([str(BIN / "jupyter"), "trust", *map(str, sorted((ROOT / "notebooks").glob("*.ipynb")))],
                        stdout=subprocess.DEVNULL)
        cmd = [str(BIN / "jupyter"), "lab", "notebooks", *extra]
        if hasattr(os, "geteuid") and os.geteuid() == 0:  # a container or cloud VM: Jupyter refuses root otherwise
            cmd.append("--allow-root")
    else:
        quick = "--quick" in extra
        extra = [arg for arg in extra if arg != "--quick"]
        named_paths = any(Path(arg.split("::")[0]).exists() for arg in extra if not arg.startswith("-"))
        paths = [] if named_paths else ["tests"] if quick else ["tests", "notebooks"]
        options = ["-m", "not slow"] if quick else NBVAL
        parallel = workers(extra, named_paths)
        if parallel and "OMP_NUM_THREADS" not in os.environ:   # the cores shared out, not oversubscribed
            threads = str(max(1, (os.cpu_count() or 1) // int(parallel[1])))
            os.environ.update(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
        cmd = [str(PYTHON), "-m", "pytest", *paths, *options, *parallel, *extra]
    print("$", Path(cmd[0]).name, *cmd[1:], flush=True)
    return hand_over(cmd)


def hand_over(cmd: list[str], env: dict | None = None) -> int:
    """Run ``cmd`` as this very process (POSIX ``exec``), so that Ctrl-C, a ``kill`` or a closed terminal
    reaches Jupyter, pytest or the command itself: a parent that waited for it would end alone and leave it
    running, orphaned. Windows has no such exec (its ``os.exec*`` starts a new process and returns at once),
    so there the command runs as a child and its status is returned."""
    if os.name == "posix":
        os.execvpe(cmd[0], cmd, os.environ if env is None else env)
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
