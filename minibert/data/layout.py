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


def path(dataset: str, filename: str | None = None) -> Path:
    """The local folder of a dataset (or one of its files), or an error that says how to get it.

    Loaders call this rather than joining paths themselves, so that missing data fails with the
    command that fixes it instead of a bare FileNotFoundError deep inside a parser.
    """
    spec = dataset_spec(dataset)
    folder = data_dir() / dataset
    missing = [f for f in ([filename] if filename else spec["files"]) if not (folder / f).is_file()]
    if not missing:
        return folder / filename if filename else folder
    shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    message = (f"{dataset} is missing from {folder} ({shown}). Download it with\n"
               f"    python -m minibert.data fetch {dataset}\n"
               f"or, offline, copy it from a data mirror with\n"
               f"    python -m minibert.data fetch {dataset} --mirror /path/to/mirror\n"
               f"(or set MINIBERT_DATA_MIRROR=/path/to/mirror and use the first command).")
    if filename in spec.get("online_extras", ()):
        message += f"\n{filename} comes only with the online download: the mirror does not hold it."
    raise FileNotFoundError(message)
