#!/usr/bin/env python3
"""The course's two commands: install what is missing, then open the notebooks or run every test.

    python3 course.py lab            # JupyterLab on notebooks/
    python3 course.py test           # every test: unit, parity, notebooks (nbval), grading (what CI runs)
    python3 course.py test --quick   # a few minutes: no notebook runs, no tests marked slow

Both create ``.venv/`` beside this file on first use, install torch first and pinned (an unpinned
torch pulls gigabytes of CUDA packages a laptop does not need), then the pinned rest from
pyproject.toml. Later runs skip the install until pyproject.toml changes, so they also work offline.
Extra arguments go to the program: ``python3 course.py test -k parity``, ``python3 course.py lab --port 8890``.
"""
import hashlib
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
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


def ensure_installed() -> None:
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + sys.version.encode()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    if not PYTHON.exists():
        print(f"Creating a virtual environment in {VENV.name}/ ...", flush=True)
        venv.create(VENV, with_pip=True)
    pip = [str(PYTHON), "-m", "pip", "install", "--disable-pip-version-check"]
    print(f"Installing {torch_pin()} (CPU build is enough), then the course's pinned packages ...", flush=True)
    for args in ([torch_pin()], ["-e", f"{ROOT}[test]"]):
        if subprocess.call(pip + args) != 0:
            sys.exit("Installation failed (see pip's message above). Without internet, install from a "
                     "local wheel folder: PIP_FIND_LINKS=DIR python3 course.py ...")
    STAMP.write_text(wanted)


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 11):
        sys.exit(f"minibert needs Python 3.11 or newer; this is {sys.version.split()[0]}. "
                 "Run it as python3.11 course.py ... (or newer).")
    if not argv or argv[0] not in ("lab", "test"):
        sys.exit(__doc__)
    command, extra = argv[0], argv[1:]
    if command == "test" and not (ROOT / "tests").is_dir():
        sys.exit("This copy of the course is the student release: it has no tests. "
                 "Run python3 course.py lab to open the notebooks.")
    ensure_installed()
    os.chdir(ROOT)
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
        cmd = [str(PYTHON), "-m", "pytest", *paths, *options, *extra]
    print("$", Path(cmd[0]).name, *cmd[1:], flush=True)
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
