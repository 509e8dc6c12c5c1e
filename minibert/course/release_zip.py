"""The student release as one zip that an LMS or JupyterHub accepts: unzip, then ``python3 course.py lab``.

The zip holds one folder, ``minibert-course/``, laid out like the repository, so ``course.py``
installs the ``minibert`` package from it and opens the notebooks as it does in a checkout. The
notebooks are nbgrader's student versions (solutions and hidden tests removed, outputs cleared) with
the files they load beside them (``pretrained/``, ``results/``). What students need not or must not
have stays home: instructor notebooks, tests, benchmarks, authors' notes, runs, checkpoints,
downloaded data, the instructor's guide.
"""
import zipfile
from pathlib import Path

from ..atomic import atomic_path

ROOT = Path(__file__).resolve().parents[2]  # minibert/course/release_zip.py -> the checkout it ships
FOLDER = "minibert-course"
FILES = ("course.py", "pyproject.toml", "environment.yml", "data/README.md")
STUDENT_README = Path(__file__).with_name("STUDENT_README.md")  # the zip's README.md: the repository's is for teachers

PACKAGE = "minibert"
LEFT_OUT = {"__pycache__", ".ipynb_checkpoints", ".minibert-release"}  # the last: release()'s own mark


def write(release, target, root=ROOT) -> Path:
    """Zip the student notebooks in ``release`` (what `minibert.grading.release` wrote) with the
    package and install files of ``root`` into ``target``. The old zip is replaced only once the new
    one is complete, so an upload never picks up half a file."""
    release, target, root = Path(release), Path(target), Path(root)
    missing = [name for name in (*FILES, PACKAGE) if not (root / name).exists()]
    if missing:
        raise FileNotFoundError(f"{root} lacks {', '.join(missing)}: the course zip is made from a "
                                "checkout of the course repository")
    entries = [*_tree(release, f"{FOLDER}/notebooks"), *_tree(root / PACKAGE, f"{FOLDER}/{PACKAGE}"),
               *((root / name, f"{FOLDER}/{name}") for name in FILES), (STUDENT_README, f"{FOLDER}/README.md")]
    with atomic_path(target) as partial, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, name in entries:
            archive.write(path, name)
    return target


def _tree(folder: Path, prefix: str) -> list[tuple[Path, str]]:
    """(file, name in the zip) for every file under ``folder``, caches and checkpoints left out."""
    return [(path, f"{prefix}/{path.relative_to(folder).as_posix()}") for path in sorted(folder.rglob("*"))
            if path.is_file() and path.suffix != ".pyc" and not LEFT_OUT & set(path.relative_to(folder).parts)]
