"""Where the data lives: ``<data_dir>/<dataset>/<file>``, the only place loaders read."""
from __future__ import annotations

import os
from pathlib import Path

from .registry import dataset_spec


def data_dir() -> Path:
    """Where loaders look: $MINIBERT_DATA_DIR, else the checkout's git-ignored data/, else a user cache."""
    if os.environ.get("MINIBERT_DATA_DIR"):
        return Path(os.environ["MINIBERT_DATA_DIR"]).expanduser()
    checkout = Path(__file__).resolve().parents[2]  # minibert/data/layout.py -> the checkout
    if (checkout / "pyproject.toml").is_file():
        return checkout / "data"
    return Path.home() / ".cache" / "minibert" / "data"


def shared_data_dir() -> list[Path]:
    """$MINIBERT_SHARED_DATA_DIR, a read-only copy to use before fetching (a class's shared folder, or
    the grader's data/ seen from a sandboxed grading kernel); what it lacks is fetched into `data_dir`."""
    shared = os.environ.get("MINIBERT_SHARED_DATA_DIR")
    return [Path(shared).expanduser()] if shared else []


def path(dataset: str, filename: str | None = None) -> Path:
    """The local folder of a dataset (or one of its files), or an error that says how to get it.

    Loaders call this rather than joining paths themselves, so that missing data fails with the
    command that fixes it instead of a bare FileNotFoundError deep inside a parser.
    """
    spec = dataset_spec(dataset)
    wanted = [filename] if filename else list(spec["files"])
    for root in [data_dir(), *shared_data_dir()]:
        if _holds(root / dataset, wanted):
            return root / dataset / filename if filename else root / dataset
    folder = data_dir() / dataset
    missing = [f for f in wanted if not (folder / f).is_file()]
    shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    message = (f"{dataset} is missing from {folder} ({shown}). Download it with\n"
               f"    python -m minibert.data fetch {dataset}\n"
               f"or, offline, copy it from a data mirror with\n"
               f"    python -m minibert.data fetch {dataset} --mirror /path/to/mirror\n"
               f"(or set MINIBERT_DATA_MIRROR=/path/to/mirror and use the first command).")
    if filename in spec.get("online_extras", ()):
        message += f"\n{filename} comes only with the online download: the mirror does not hold it."
    raise FileNotFoundError(message)


def _holds(folder: Path, files: list[str]) -> bool:
    """Whether ``folder`` holds all ``files``; a folder this user may not read holds nothing (pathlib
    raises PermissionError there, as a sandboxed grading kernel meets the grader's data/)."""
    try:
        return all((folder / f).is_file() for f in files)
    except PermissionError:
        return False
