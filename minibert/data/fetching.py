"""How the data gets there: from a mirror folder, or downloaded; atomic writes checked against sha256.

Online, a dataset comes from the Hugging Face Hub where it lives there, else from files pinned to a
git commit (one URL per file, or a zip archive). Offline, a mirror folder with the same layout is
copied. Either way every file is written atomically and checked against its sha256 where one is
known, so a file that is present is complete.
"""
from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import urllib.request
import zipfile
from functools import partial
from pathlib import Path
from typing import Iterable

from tqdm import tqdm

from ..atomic import atomic_path
from ..user_files import regular_file
from .hub_files import HUB_TO_FILES
from .layout import data_dir, path
from .registry import DATASETS, dataset_spec

_OFFLINE_HINT = ("If this machine is offline, copy the data from a mirror folder instead: "
                 "set MINIBERT_DATA_MIRROR=/path/to/mirror, or run "
                 "`python -m minibert.data fetch NAME --mirror /path/to/mirror`.")


class ChecksumError(ValueError):
    """A copied or downloaded file is not the one the registry or the mirror's SHA256SUMS names."""


def ensure(dataset: str) -> Path:
    """The dataset's local folder, fetched first when incomplete: "use the local copy, else get it". Every
    loader reads its files through here, so a file of it that is not the registry's (cut off by a full
    disk, edited by hand) is refused before anything is read from it, not scored or trained on; and so is
    one that is not a regular file (a named pipe, a device), which would hang or never end its reader."""
    try:
        folder = path(dataset)
    except FileNotFoundError:
        try:
            folder = fetch([dataset])[dataset]
        except PermissionError as e:  # e.g. a grading kernel run as an unprivileged user
            raise PermissionError(f"{dataset} is not in {data_dir()} and this user cannot write there ({e}); "
                                  f"fetch it as the folder's owner first (python -m minibert.data fetch {dataset}), "
                                  "or set MINIBERT_DATA_DIR to a folder this user can write") from None
    spec = DATASETS[dataset]
    for name in [*spec["files"], *spec.get("online_extras", ())]:  # a FIFO would hang its reader, a device never end
        regular_file(folder / name, f"remove it, then fetch the dataset again: python -m minibert.data fetch {dataset}")
    bad = damaged(dataset, folder)
    if bad:
        raise ChecksumError(f"{folder / bad[0]} is damaged: its sha256 is not the one the registry pins for "
                            f"{dataset}/{bad[0]} (cut off by a full disk, or edited)"
                            + (f", and so are {', '.join(bad[1:])}" if bad[1:] else "")
                            + f". Fetch it again: python -m minibert.data fetch {dataset}")
    return folder


def fetch(names: str | Iterable[str] | None = None, *, dest: str | Path | None = None,
          mirror: str | Path | None = None, force: bool = False) -> dict[str, Path]:
    """Fill ``dest`` (default ``data_dir()``) with the named datasets (default: all); return their folders.

    ``mirror`` (default ``$MINIBERT_DATA_MIRROR``) is a folder with the same layout to copy from;
    without one (or with ``mirror=""``) the data is downloaded. Files already present are kept
    unless ``force``: writes are atomic, so a present file is a complete one.
    """
    names = list(DATASETS) if names is None else [names] if isinstance(names, str) else list(names)
    for name in names:
        dataset_spec(name)
    dest = Path(dest) if dest is not None else data_dir()
    mirror = os.environ.get("MINIBERT_DATA_MIRROR") if mirror is None else mirror
    sums = _mirror_sums(Path(mirror)) if mirror else {}
    for name in names:
        if mirror:
            _copy_from_mirror(name, Path(mirror), dest / name, sums, force)
        else:
            _download(name, dest / name, force)
    return {name: dest / name for name in names}


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in _chunks(f):
            digest.update(chunk)
    return digest.hexdigest()


_HASHED: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) -> sha256, for this process


def _sha256_once(file: Path) -> str:
    """``file_sha256``, computed again only when the file's size or time has changed since."""
    stat = file.stat()
    key = (str(file.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHED:
        _HASHED[key] = file_sha256(file)
    return _HASHED[key]


def damaged(name: str, folder: Path, sums: dict[str, str] | None = None) -> list[str]:
    """The dataset's files present in ``folder`` whose sha256 is not the registry's (or the mirror's
    SHA256SUMS'): cut off by a full disk, edited by hand, or from another release. A file the
    registry has no hash for is not checked."""
    spec, sums = DATASETS[name], sums or {}
    expected = {f: spec["files"].get(f) or sums.get(f"{name}/{f}") for f in spec["files"]}
    return [f for f, digest in expected.items() if digest and (folder / f).is_file()
            and _sha256_once(folder / f) != digest]


def _todo(name: str, folder: Path, files: list[str], force: bool, sums: dict[str, str] | None = None) -> list[str]:
    """The files to fetch: missing ones, damaged ones (said so), or all with ``force``."""
    if force:
        return files
    bad = damaged(name, folder, sums)
    for f in bad:
        print(f"{name}/{f} is damaged (its sha256 is not the registry's): fetching it again", file=sys.stderr)
    return [f for f in files if f in bad or not (folder / f).exists()]


def _mirror_sums(mirror: Path) -> dict[str, str]:
    """The mirror's ``sha256sum`` listing as {"sst2/dev.tsv": digest}; empty when it has none."""
    sums_file = mirror / "SHA256SUMS"
    if not sums_file.is_file():
        return {}
    sums = {}
    for line in sums_file.read_text().splitlines():
        digest, _, rel = line.partition(" ")
        sums[rel.lstrip(" *").removeprefix("./")] = digest
    return sums


def _copy_from_mirror(name: str, mirror: Path, folder: Path, sums: dict[str, str], force: bool):
    spec, source = DATASETS[name], mirror / name
    absent = [f for f in spec["files"] if not (source / f).is_file()]
    if absent:
        raise FileNotFoundError(f"the mirror {mirror} has no {name}/{absent[0]}; use a complete mirror "
                                f"or download: python -m minibert.data fetch {name} --mirror ''")
    extras = [f for f in spec.get("online_extras", ()) if (source / f).is_file()]
    todo = _todo(name, folder, [*spec["files"], *extras], force, sums)
    if not todo:
        return
    with tqdm(total=sum((source / f).stat().st_size for f in todo), desc=name, unit="B",
              unit_scale=True, disable=None) as bar:
        for f in todo:
            _copy(source / f, folder / f, spec["files"].get(f) or sums.get(f"{name}/{f}"), bar)


def _copy(source: Path, target: Path, sha256: str | None, bar: tqdm | None = None):
    with open(source, "rb") as src:
        _write_atomic(target, _chunks(src), sha256=sha256, bar=bar)


def _chunks(stream, size: int = 1 << 20) -> Iterable[bytes]:
    return iter(partial(stream.read, size), b"")


def _write_atomic(target: Path, chunks: Iterable[bytes], *, sha256: str | None = None,
                  size: int | None = None, bar: tqdm | None = None):
    """Write ``chunks`` so that ``target`` appears only complete and verified.

    The bytes go to a hidden temporary file in the same folder (same file system, so ``os.replace``
    is atomic) and are hashed on the way; an interruption or a mismatch removes the temporary file.
    """
    with atomic_path(target) as tmp:
        digest, written = hashlib.sha256(), 0
        with open(tmp, "xb") as out:  # open(), not mkstemp: the file gets the usual permissions
            for chunk in chunks:
                out.write(chunk)
                digest.update(chunk)
                written += len(chunk)
                if bar is not None:
                    bar.update(len(chunk))
        if size is not None and written != size:
            raise ConnectionError(f"{target.name}: got {written} of {size} bytes; try again")
        if sha256 and digest.hexdigest() != sha256:
            raise ChecksumError(f"{target.name}: sha256 is {digest.hexdigest()}, expected {sha256}; "
                                "the source copy is corrupt, so it was not written")


def _online(what: str, call, *args, **kwargs):
    """Make one network call; a failure becomes an error that names the offline alternative."""
    try:
        return call(*args, **kwargs)
    except OSError as err:  # URLError, the Hub's LocalEntryNotFoundError, datasets' ConnectionError
        raise ConnectionError(f"could not download {what}: {err}\n{_OFFLINE_HINT}") from err


def _download(name: str, folder: Path, force: bool):
    spec = DATASETS[name]
    todo = _todo(name, folder, [*spec["files"], *spec.get("online_extras", ())], force)
    if not todo:
        return
    if "hub" in spec:
        import datasets  # here, not at the top: it takes seconds to import, and `list` needs none of it

        repo, config = spec["hub"]
        tables = _online(f"{repo} from the Hugging Face Hub", datasets.load_dataset, repo, config)
        texts = HUB_TO_FILES[name](tables)
        for f in todo:
            _write_atomic(folder / f, [texts[f].encode("utf-8")])
        return
    with tqdm(total=0, desc=name, unit="B", unit_scale=True, disable=None) as bar:
        if "hf_repo" in spec:
            import huggingface_hub

            for f in todo:
                cached = _online(f"{spec['hf_repo']}/{f} from the Hugging Face Hub",
                                 huggingface_hub.hf_hub_download, spec["hf_repo"], f)
                _copy(Path(cached), folder / f, spec["files"][f], bar)
        elif "zip" in spec:
            _extract_zip(spec["zip"], folder, {f: spec["files"].get(f) for f in todo}, bar)
        else:
            for f in todo:
                _fetch_url(spec["urls"][f], folder / f, spec["files"].get(f), bar)


def _fetch_url(url: str, target: Path, sha256: str | None, bar: tqdm):
    response = _online(url, urllib.request.urlopen, url, timeout=60)
    with response:
        length = response.headers.get("Content-Length")
        size = int(length) if length else None
        bar.total += size or 0
        bar.refresh()
        _write_atomic(target, _chunks(response), sha256=sha256, size=size, bar=bar)


def _extract_zip(url: str, folder: Path, todo: dict[str, str | None], bar: tqdm):
    """Download an archive to a scratch folder, then take out the wanted files ({name: sha256}) by their
    base name, each checked against its digest."""
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / "download.zip"
        _fetch_url(url, archive, None, bar)
        with zipfile.ZipFile(archive) as zf:
            members = {Path(m).name: m for m in zf.namelist() if not m.endswith("/")}
            absent = [f for f in todo if f not in members]
            if absent:
                raise FileNotFoundError(f"{url} has no {', '.join(absent)}")
            for f in todo:
                with zf.open(members[f]) as src:
                    _write_atomic(folder / f, _chunks(src), sha256=todo[f])
