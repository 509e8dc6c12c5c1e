"""The course's datasets: one registry, one local layout, one command to fill it.

Loaders read ``<data_dir>/<dataset>/<file>`` and nothing else. ``fetch`` fills that layout either
from the internet (the Hugging Face Hub for datasets that live there, files pinned to a git commit
for the rest) or, offline, by copying from a mirror folder with the same layout
(``MINIBERT_DATA_MIRROR``). Every file is written atomically and checked against its sha256 where
one is known, so a file that is present is complete.

What exists is in `registry`, where it lives in `layout`, how it gets there in `fetching` (and
`hub_files` for datasets rebuilt from Hub tables); this module is the command line:

    python -m minibert.data list
    python -m minibert.data fetch sst2 squad_v1.1 [--mirror DIR] [--dest DIR] [--force]
"""
from __future__ import annotations

import argparse
import sys

from .fetching import ChecksumError, damaged, ensure, fetch
from .layout import data_dir, path
from .registry import DATASETS


def _print_list():
    root = data_dir()
    print(f"data folder: {root}")
    for name, spec in DATASETS.items():
        present = sum((root / name / f).is_file() for f in spec["files"])
        bad = damaged(name, root / name) if present else []
        files = f"{present}/{len(spec['files'])} files" + (f", {len(bad)} damaged: fetch {name} again" if bad else "")
        print(f"{name:<16}{files:<13}{spec['licence']}")  # a licence can run long: the description goes below
        print(f"{'':<29}{spec['description']}")
        print(f"{'':<29}source: {spec['source']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m minibert.data", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    get = commands.add_parser("fetch", help="download the datasets, or copy them from a mirror")
    get.add_argument("names", nargs="*", metavar="NAME", help="datasets to fetch (default: all)")
    get.add_argument("--dest", help="folder to fill (default: $MINIBERT_DATA_DIR or the checkout's data/)")
    get.add_argument("--mirror", help="copy from this mirror folder (default: $MINIBERT_DATA_MIRROR; "
                                      "'' downloads)")
    get.add_argument("--force", action="store_true", help="fetch again files that are already there")
    commands.add_parser("list", help="the datasets, what is present, licences")
    args = parser.parse_args(argv)
    if args.command == "list":
        _print_list()
        return
    try:
        folders = fetch(args.names or None, dest=args.dest, mirror=args.mirror, force=args.force)
    except (ValueError, OSError) as err:
        sys.exit(f"error: {err}")
    for name, folder in folders.items():
        print(f"{name}: {folder}")
