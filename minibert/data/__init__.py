"""The course's datasets: one registry, one local layout, one command to fill it.

Loaders read ``<data_dir>/<dataset>/<file>`` and nothing else. ``fetch`` fills that layout either
from the internet (the Hugging Face Hub for datasets that live there, files pinned to a git commit
for the rest) or, offline, by copying from a mirror folder with the same layout
(``MINIBERT_DATA_MIRROR``). Every file is written atomically and checked against its sha256 where
one is known, so a file that is present is complete.

    python -m minibert.data list
    python -m minibert.data fetch sst2 squad_v1.1 [--mirror DIR] [--dest DIR] [--force]
"""
from __future__ import annotations

import argparse
import hashlib
import json
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


def _github(repo: str, commit: str, path: str) -> str:
    """A raw file at a fixed commit: the bytes behind the URL can never change."""
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def _texts(stems: str) -> dict[str, None]:
    """File names of a many-document corpus (their digests are in the mirror's SHA256SUMS)."""
    return {f"{stem}.txt": None for stem in stems.split()}


_UD = ("UniversalDependencies/UD_English-EWT", "6d4e3e2d515c3da8dcb579bb437a62a2569f4c88",
       "81526baab558679e21e3cbdb6a021759d23e1ae8")
_GAP = ("google-research-datasets/gap-coreference", "da30315e77bfda9095cdb8b03203d58abeef90b2")
_WIKITEXT = ("pytorch/examples", "d5678bc8ac0cdd79dbd5e44d4130271018bcec4e",
             "word_language_model/data/wikitext-2/")
_NLTK_DATA = "nltk/nltk_data"
# file: (GitHub repo, path in the repo, commit, sha256). Project Gutenberg's own GitHub mirror
# (gutenbergbooks) where it has the book, else GITenberg; renamed NLTK-style author-title.txt.
_GUTENBERG_MORE = {
    "shelley-frankenstein.txt": (
        "gutenbergbooks/84", "84-0.txt", "8bd92d5ea00b020a3b1224f3558019e5b4024f94",
        "f572837d92b31a857df4f6d0612e54f4bd8003d134367ae6a35ef444b9a8336b"),
    "doyle-sherlock_holmes.txt": (
        "gutenbergbooks/1661", "1661-0.txt", "376014745d5384398cb3041740bebd617cd23875",
        "e21895308fe6da6919abc53e2cf77d81f914887897546153cc5d49b2eadefe50"),
    "austen-pride.txt": (
        "gutenbergbooks/1342", "1342-0.txt", "041e520899f9a02af517d6cb253bc1fdfbf923e2",
        "86dab871eec9c0cef97f4cb6313f86c6cc48f6f7809534e65cd3f1c1d486d247"),
    "stevenson-treasure_island.txt": (
        "gutenbergbooks/120", "120-0.txt", "e89155f2bb5ead1c0007ec1abcf9008fbfe0e40e",
        "26bbda47e0066a884b1706e2b1bf7bc4b427f0889c47a4b2511274b3cff145d3"),
    "thoreau-walden.txt": (
        "gutenbergbooks/205", "205-0.txt", "f60bf200e67773ef3fb31446d447c070e42b9e9a",
        "da5a69cc0ea653779939362bb1a4dfc621ce54909a933016b6671f59ed72ba48"),
    "fitzgerald-gatsby.txt": (
        "gutenbergbooks/64317", "64317-0.txt", "653801a8485640c1c44ae5cc55ebf4f198766419",
        "4a1d4acb31593be9582b392572b08f7aa9f5ee0587ad50b2a0adbcc3712a951a"),
    "stevenson-jekyll_hyde.txt": (
        "gutenbergbooks/43", "43-0.txt", "80805b3b9520b27bbdbe9af29347f409331ecea9",
        "afe16ff5b3645124f24e9dc6a7ab4dbc487d688b5f07b9ae71685101a5b05065"),
    "london-call_of_the_wild.txt": (
        "gutenbergbooks/215", "215-0.txt", "f33202980b37d78635543c942a997e63903e6efc",
        "d4833aa8bcfcbe2512fde65ebdbbbb617b05a6bf0fb4c84c74d07f6cf601a3dc"),
    "twain-tom_sawyer.txt": (
        "gutenbergbooks/74", "74-0.txt", "972a29e29e34eb11bb645cc36954600c1bf6c26a",
        "fe74f3e43a7c0a0d0189b40ce966ce73795559b63076ccc0ea2e8ba2b9a9b213"),
    "conrad-heart_of_darkness.txt": (
        "gutenbergbooks/219", "219-0.txt", "e8147aab7c505f5d4797dace0e0f4756e1e1e7be",
        "56e2c3f429ebc19aa5bfb837a4e0bbe73263f5b742e7d14ec445540baf88a729"),
    "russell-problems_of_philosophy.txt": (
        "gutenbergbooks/5827", "5827-0.txt", "f6ee34671a344cf9a68e8871c68d715f8a9c451a",
        "75d47a4099ae2260c60c3ac9c086a829b85ec1add7b112538c56a1f322175483"),
    "franklin-autobiography.txt": (
        "gutenbergbooks/20203", "20203-0.txt", "8884c28fb94fb345f0abcc88dac82f41c412d19e",
        "b8b1db570c1fb6f26b81d146744b282863989369518132f276d64bf65c5dd1d9"),
    "swift-gulliver.txt": (
        "gutenbergbooks/829", "829-0.txt", "6275703e86512dc829eac1be52b009f606817ed2",
        "1f67774a12b7132438f53c57057e91f2c786e346fb3eeb238aabc0c31bb3244f"),
    "dickens-oliver_twist.txt": (
        "gutenbergbooks/730", "730-0.txt", "032dbf63ed9fefb297d2a06772255b69ef7ce1af",
        "ed6843e69f29aee6606a1fcdeae401d9c6131b2a7f308b912ffa789dbdcc30f5"),
    "hamilton_madison_jay-federalist.txt": (
        "GITenberg/The-Federalist-Papers_1404", "1404.txt", "9f195e5db037899e98e76add49651fdf697b8107",
        "64dd04d805964a7c8f946072fcc8ba11d01613c8e6faf908511a28930dcb28e1"),
    "darwin-origin_of_species.txt": (
        "GITenberg/The-Origin-of-Species-by-Means-of-Natural-Selection--13-Or-the-Preservation"
        "-of-Favoured-Races-__2009",
        "2009.txt", "4481aa7f4922badb22d5dc00a5f474ef6d91ef12",
        "dd54ea57361cddcb7a73f126a8ae557f34515519ca84c73517820ab214c8b761"),
    "dickens-tale_of_two_cities.txt": (
        "GITenberg/A-Tale-of-Two-Cities_98", "98.txt", "0f6111bc7237af7375295ec1754c2e57e19f67f1",
        "e4733dca6c496f6b21f38ef270bbdb88a2243a57690494f3ba84fb3fd8708a12"),
    "stoker-dracula.txt": (
        "GITenberg/Dracula_345", "345.txt", "5216d6ea255fbf8966426a160b68251b18f16907",
        "c802711470ddb2aaca81432fc101ed29c154e7c3d32df4172478695c33f68eae"),
}

# name -> plain data. "files" maps each file to its canonical sha256 (None where no canonical hash is
# published); "online_extras" are files only the online route brings (too big for the mirror). The
# online route is exactly one of: "hub" (a Hub dataset rebuilt into the canonical files),
# "hf_repo" (files of a Hub model repo), "zip" (an archive to extract), "urls" (one URL per file).
DATASETS: dict[str, dict] = {
    "sst2": {
        "description": "SST-2 (GLUE): movie-review phrases labelled negative 0 / positive 1",
        "licence": "none stated (SST via GLUE)",
        "source": "Hub nyu-mll/glue, config sst2",
        "files": {"train.tsv": "48eac26399f8456935f81dd9e3a745c1430adb6c62e233ccfe22db4a0d15d1d1",
                  "dev.tsv": "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0",
                  "test.tsv": "69a938605609b3e6663b4487918fe1565eb293734e6e520d0366d1d412fd2a13"},
        "hub": ("nyu-mll/glue", "sst2"),
    },
    "squad_v1.1": {
        "description": "SQuAD v1.1: questions on Wikipedia paragraphs, answers are spans",
        "licence": "CC BY-SA 4.0",
        "source": "Hub rajpurkar/squad",
        "files": {"dev-v1.1.json": "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9"},
        "online_extras": ["train-v1.1.json"],
        "hub": ("rajpurkar/squad", None),
    },
    "wikitext2_raw": {
        "description": "WikiText-2 raw: Wikipedia Good/Featured articles, no <unk>",
        "licence": "CC BY-SA 3.0",
        "source": "Hub Salesforce/wikitext, config wikitext-2-raw-v1",
        "files": {"wiki.valid.raw": "4cd0f6876d07a413aa911261ff6d363c72d757d47f0fdd6015702014c89cb9c7",
                  "wiki.test.raw": "173c87a53759e0201f33e0ccf978e510c2042d7f2cb78229d9a50d79b9e7dd08"},
        "online_extras": ["wiki.train.raw"],
        "hub": ("Salesforce/wikitext", "wikitext-2-raw-v1"),
    },
    "wikitext2": {
        "description": "WikiText-2 tokenized: the same lines with rare words as <unk>",
        "licence": "CC BY-SA 3.0",
        "source": "github.com/pytorch/examples word_language_model/data/wikitext-2",
        "files": {"valid.txt": "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8",
                  "test.txt": "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0"},
        "online_extras": ["train.txt"],
        "urls": {f: _github(_WIKITEXT[0], _WIKITEXT[1], _WIKITEXT[2] + f)
                 for f in ("train.txt", "valid.txt", "test.txt")},
    },
    "ud_english_ewt": {
        "description": "UD English EWT v2.16: dependency trees (obj, det, nsubj ...), CoNLL-U",
        "licence": "CC BY-SA 4.0",
        "source": "github.com/UniversalDependencies/UD_English-EWT",
        "files": {
            "en_ewt-ud-dev.conllu": "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6",
            "en_ewt-ud-test.conllu": "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd"},
        "urls": {"en_ewt-ud-dev.conllu": _github(_UD[0], _UD[1], "en_ewt-ud-dev.conllu"),
                 "en_ewt-ud-test.conllu": _github(_UD[0], _UD[2], "en_ewt-ud-test.conllu")},
    },
    "gap_coreference": {
        "description": "GAP: gendered pronoun / name pairs, coreferent or not, on Wikipedia text",
        "licence": "Apache-2.0",
        "source": "github.com/google-research-datasets/gap-coreference",
        "files": {"gap-development.tsv": "b9a01434fcf58d8c2f9bc762480c27e58ce466cf1ffe8b09cfecbc7a20d2d634",
                  "gap-test.tsv": "1c35e36d5b14f6313ec3f6cd67b275de282595dd59e59390e00cfff9897a6819",
                  "gap-validation.tsv": "2d784f66b390404f554704b9aef6dcde8845e79dda9886b8391cf7e9a24fdb98"},
        "urls": {f: _github(*_GAP, f) for f in ("gap-development.tsv", "gap-test.tsv", "gap-validation.tsv")},
    },
    "gutenberg": {
        "description": "NLTK's 15 Project Gutenberg books (Austen, Carroll, Melville ...), 2008 selection",
        "licence": "public domain",
        "source": "github.com/nltk/nltk (history) nltk_data/corpora/gutenberg.zip",
        "files": _texts("austen-emma austen-persuasion austen-sense bible-kjv blake-poems carroll-alice "
                        "chesterton-ball chesterton-brown chesterton-thursday melville-moby_dick "
                        "milton-paradise shakespeare-caesar shakespeare-hamlet shakespeare-macbeth "
                        "whitman-leaves"),
        "zip": _github("nltk/nltk", "583117dd80c39f604910ead218cab30da18a8d9a",
                       "nltk_data/corpora/gutenberg.zip"),
    },
    "gutenberg_more": {
        "description": "18 more public-domain books (Shelley, Doyle, Darwin, the Federalist ...)",
        "licence": "public domain (US)",
        "source": "Project Gutenberg's GitHub mirrors: github.com/gutenbergbooks and GITenberg",
        "files": {name: sha for name, (*_, sha) in _GUTENBERG_MORE.items()},
        "urls": {name: _github(repo, commit, file)
                 for name, (repo, file, commit, _) in _GUTENBERG_MORE.items()},
    },
    "state_union": {
        "description": "State of the Union addresses 1945-2006, one per file (NLTK)",
        "licence": "public domain",
        "source": "github.com/nltk/nltk_data packages/corpora/state_union.zip",
        "files": _texts(
            "1945-Truman 1946-Truman 1947-Truman 1948-Truman 1949-Truman 1950-Truman 1951-Truman "
            "1953-Eisenhower 1954-Eisenhower 1955-Eisenhower 1956-Eisenhower 1957-Eisenhower "
            "1958-Eisenhower 1959-Eisenhower 1960-Eisenhower 1961-Kennedy 1962-Kennedy 1963-Johnson "
            "1963-Kennedy 1964-Johnson 1965-Johnson-1 1965-Johnson-2 1966-Johnson 1967-Johnson "
            "1968-Johnson 1969-Johnson 1970-Nixon 1971-Nixon 1972-Nixon 1973-Nixon 1974-Nixon 1975-Ford "
            "1976-Ford 1977-Ford 1978-Carter 1979-Carter 1980-Carter 1981-Reagan 1982-Reagan "
            "1983-Reagan 1984-Reagan 1985-Reagan 1986-Reagan 1987-Reagan 1988-Reagan 1989-Bush "
            "1990-Bush 1991-Bush-1 1991-Bush-2 1992-Bush 1993-Clinton 1994-Clinton 1995-Clinton "
            "1996-Clinton 1997-Clinton 1998-Clinton 1999-Clinton 2000-Clinton 2001-GWBush-1 "
            "2001-GWBush-2 2002-GWBush 2003-GWBush 2004-GWBush 2005-GWBush 2006-GWBush"),
        "zip": _github(_NLTK_DATA, "5f09e470fe339e1a119dd174ca284129a3c7a5bb",
                       "packages/corpora/state_union.zip"),
    },
    "inaugural": {
        "description": "US presidential inaugural addresses 1789-2021, one per file (NLTK)",
        "licence": "public domain",
        "source": "github.com/nltk/nltk_data packages/corpora/inaugural.zip",
        "files": _texts(
            "1789-Washington 1793-Washington 1797-Adams 1801-Jefferson 1805-Jefferson 1809-Madison "
            "1813-Madison 1817-Monroe 1821-Monroe 1825-Adams 1829-Jackson 1833-Jackson 1837-VanBuren "
            "1841-Harrison 1845-Polk 1849-Taylor 1853-Pierce 1857-Buchanan 1861-Lincoln 1865-Lincoln "
            "1869-Grant 1873-Grant 1877-Hayes 1881-Garfield 1885-Cleveland 1889-Harrison "
            "1893-Cleveland 1897-McKinley 1901-McKinley 1905-Roosevelt 1909-Taft 1913-Wilson "
            "1917-Wilson 1921-Harding 1925-Coolidge 1929-Hoover 1933-Roosevelt 1937-Roosevelt "
            "1941-Roosevelt 1945-Roosevelt 1949-Truman 1953-Eisenhower 1957-Eisenhower 1961-Kennedy "
            "1965-Johnson 1969-Nixon 1973-Nixon 1977-Carter 1981-Reagan 1985-Reagan 1989-Bush "
            "1993-Clinton 1997-Clinton 2001-Bush 2005-Bush 2009-Obama 2013-Obama 2017-Trump 2021-Biden"),
        "zip": _github(_NLTK_DATA, "c38fae336d2400f1d7bf5754d2c13cba832e64d8",
                       "packages/corpora/inaugural.zip"),
    },
    "bert_vocab": {
        "description": "bert-base-uncased WordPiece vocabulary, 30,522 tokens, one per line",
        "licence": "Apache-2.0",
        "source": "Hub google-bert/bert-base-uncased vocab.txt",
        "files": {"vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"},
        "hf_repo": "google-bert/bert-base-uncased",
    },
}

_OFFLINE_HINT = ("If this machine is offline, copy the data from a mirror folder instead: "
                 "set MINIBERT_DATA_MIRROR=/path/to/mirror, or run "
                 "`python -m minibert.data fetch NAME --mirror /path/to/mirror`.")


class ChecksumError(ValueError):
    """A copied or downloaded file is not the one the registry or the mirror's SHA256SUMS names."""


def data_dir() -> Path:
    """Where loaders look: $MINIBERT_DATA_DIR, else the checkout's git-ignored data/, else a user cache."""
    if os.environ.get("MINIBERT_DATA_DIR"):
        return Path(os.environ["MINIBERT_DATA_DIR"]).expanduser()
    checkout = Path(__file__).resolve().parents[2]  # minibert/data/__init__.py -> the checkout
    if (checkout / "pyproject.toml").is_file():
        return checkout / "data"
    return Path.home() / ".cache" / "minibert" / "data"


def _spec(name: str) -> dict:
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}")
    return DATASETS[name]


def path(dataset: str, filename: str | None = None) -> Path:
    """The local folder of a dataset (or one of its files), or an error that says how to get it.

    Loaders call this rather than joining paths themselves, so that missing data fails with the
    command that fixes it instead of a bare FileNotFoundError deep inside a parser.
    """
    spec = _spec(dataset)
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


def ensure(dataset: str) -> Path:
    """The dataset's local folder, fetched first when incomplete: "use the local copy, else get it"."""
    try:
        return path(dataset)
    except FileNotFoundError:
        return fetch([dataset])[dataset]


def fetch(names: str | Iterable[str] | None = None, *, dest: str | Path | None = None,
          mirror: str | Path | None = None, force: bool = False) -> dict[str, Path]:
    """Fill ``dest`` (default ``data_dir()``) with the named datasets (default: all); return their folders.

    ``mirror`` (default ``$MINIBERT_DATA_MIRROR``) is a folder with the same layout to copy from;
    without one (or with ``mirror=""``) the data is downloaded. Files already present are kept
    unless ``force``: writes are atomic, so a present file is a complete one.
    """
    names = list(DATASETS) if names is None else [names] if isinstance(names, str) else list(names)
    for name in names:
        _spec(name)
    dest = Path(dest) if dest is not None else data_dir()
    mirror = os.environ.get("MINIBERT_DATA_MIRROR") if mirror is None else mirror
    sums = _mirror_sums(Path(mirror)) if mirror else {}
    for name in names:
        if mirror:
            _copy_from_mirror(name, Path(mirror), dest / name, sums, force)
        else:
            _download(name, dest / name, force)
    return {name: dest / name for name in names}


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
    todo = [f for f in [*spec["files"], *extras] if force or not (folder / f).exists()]
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
    todo = [f for f in [*spec["files"], *spec.get("online_extras", ())]
            if force or not (folder / f).exists()]
    if not todo:
        return
    if "hub" in spec:
        import datasets  # here, not at the top: it takes seconds to import, and `list` needs none of it

        repo, config = spec["hub"]
        tables = _online(f"{repo} from the Hugging Face Hub", datasets.load_dataset, repo, config)
        texts = _HUB_TO_FILES[name](tables)
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
            _extract_zip(spec["zip"], folder, todo, bar)
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


def _extract_zip(url: str, folder: Path, todo: list[str], bar: tqdm):
    """Download an archive to a scratch folder, then take out the wanted files by their base name."""
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
                    _write_atomic(folder / f, _chunks(src))


# The Hub keeps tables, not files; these rebuild the canonical files from its rows.

def _tsv(header: str, *columns) -> str:
    return header + "\n" + "".join(f"{a}\t{b}\n" for a, b in zip(*columns))


def _sst2_files(splits) -> dict[str, str]:
    """GLUE's TSVs. The Hub keeps GLUE's trailing space in each sentence, so the bytes are GLUE's."""
    train, dev, test = splits["train"], splits["validation"], splits["test"]
    return {"train.tsv": _tsv("sentence\tlabel", train["sentence"], train["label"]),
            "dev.tsv": _tsv("sentence\tlabel", dev["sentence"], dev["label"]),
            "test.tsv": _tsv("index\tsentence", test["idx"], test["sentence"])}


def _squad_json(rows) -> str:
    """Regroup one row per question into SQuAD's nested articles > paragraphs > qas.

    Rows keep the file's order, so a new title starts an article and a new context a paragraph.
    The Hub strips whitespace around titles, contexts, questions and answers, which the official file
    keeps in a few hundred places; everything else comes out byte for byte.
    """
    articles = []
    for row in rows:
        if not articles or articles[-1]["title"] != row["title"]:
            articles.append({"title": row["title"], "paragraphs": []})
        paragraphs = articles[-1]["paragraphs"]
        if not paragraphs or paragraphs[-1]["context"] != row["context"]:
            paragraphs.append({"context": row["context"], "qas": []})
        answers = [{"answer_start": start, "text": text}
                   for start, text in zip(row["answers"]["answer_start"], row["answers"]["text"])]
        paragraphs[-1]["qas"].append({"answers": answers, "question": row["question"], "id": row["id"]})
    return json.dumps({"data": articles, "version": "1.1"})


def _squad_files(splits) -> dict[str, str]:
    return {"train-v1.1.json": _squad_json(splits["train"]),
            "dev-v1.1.json": _squad_json(splits["validation"])}


def _wikitext_files(splits) -> dict[str, str]:
    """wiki.*.raw: the Hub has one row per line, newline kept, but turns the blank lines " \\n" into ""."""
    return {f"wiki.{short}.raw": "".join(line or " \n" for line in splits[split]["text"])
            for short, split in (("train", "train"), ("valid", "validation"), ("test", "test"))}


_HUB_TO_FILES = {"sst2": _sst2_files, "squad_v1.1": _squad_files, "wikitext2_raw": _wikitext_files}


def _print_list():
    root = data_dir()
    print(f"data folder: {root}")
    for name, spec in DATASETS.items():
        present = sum((root / name / f).is_file() for f in spec["files"])
        files = f"{present}/{len(spec['files'])} files"
        print(f"{name:<16}{files:<13}{spec['licence']:<28}{spec['description']}")
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

