"""minibert.data against the real data mirror: the mirror route, the online route with its network
edge (Hub, GitHub) faked from the mirror's own files, atomic writes, the errors and the CLI."""
from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import datasets
import huggingface_hub
import pytest

from minibert import data

HUB_TABLES = {"sst2": ("nyu-mll/glue", "sst2"), "squad_v1.1": ("rajpurkar/squad", None),
              "wikitext2_raw": ("Salesforce/wikitext", "wikitext-2-raw-v1")}


def sha256(file: Path) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()


def read_sums(mirror: Path) -> dict[str, str]:
    """The mirror's SHA256SUMS, read independently of the code under test."""
    lines = (mirror / "SHA256SUMS").read_text().splitlines()
    return {rel.removeprefix("./"): digest for digest, rel in (line.split(maxsplit=1) for line in lines)}


@pytest.fixture(scope="session")
def mirror() -> Path:
    root = os.environ.get("MINIBERT_DATA_MIRROR")
    if root and (Path(root) / "SHA256SUMS").is_file():
        return Path(root)
    if os.environ.get("CI"):
        pytest.fail("CI runs the data tests against a mirror: set MINIBERT_DATA_MIRROR (data/README.md)")
    pytest.skip("no data mirror: set MINIBERT_DATA_MIRROR to a folder like shared/data")


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch) -> Path:
    """Loaders look in a fresh folder, so no test reads or writes the checkout's data/."""
    home = tmp_path / "home"
    monkeypatch.setenv("MINIBERT_DATA_DIR", str(home))
    return home


# ---- what the Hub and GitHub would serve, made from the mirror ---------------------------------

def lines(file: Path) -> list[str]:
    """Lines with their newline, split on "\\n" only, as a file object iterates them."""
    return [line + "\n" for line in file.read_text(encoding="utf-8").split("\n")[:-1]]


@functools.cache
def hub_sst2(mirror: Path) -> datasets.DatasetDict:
    """nyu-mll/glue sst2: columns sentence, label, idx; the sentences keep GLUE's trailing space."""
    def labelled(file):
        rows = [line[:-1].split("\t") for line in lines(mirror / "sst2" / file)[1:]]
        return datasets.Dataset.from_dict({"sentence": [s for s, _ in rows],
                                           "label": [int(y) for _, y in rows], "idx": list(range(len(rows)))})

    test = [line[:-1].split("\t") for line in lines(mirror / "sst2" / "test.tsv")[1:]]
    return datasets.DatasetDict(
        train=labelled("train.tsv"), validation=labelled("dev.tsv"),
        test=datasets.Dataset.from_dict({"sentence": [s for _, s in test], "label": [-1] * len(test),
                                         "idx": [int(i) for i, _ in test]}))


def squad_articles(mirror: Path, strip: bool) -> list[dict]:
    """The official dev set; with strip, trimmed the way the Hub's rajpurkar/squad rows are."""
    articles = json.loads((mirror / "squad_v1.1" / "dev-v1.1.json").read_bytes())["data"]
    if strip:
        for article in articles:
            article["title"] = article["title"].strip()
            for paragraph in article["paragraphs"]:
                paragraph["context"] = paragraph["context"].strip()
                for qa in paragraph["qas"]:
                    qa["question"] = qa["question"].strip()
                    for answer in qa["answers"]:
                        answer["text"] = answer["text"].strip()
    return articles


@functools.cache
def hub_squad(mirror: Path, strip: bool = True) -> datasets.DatasetDict:
    """rajpurkar/squad: one row per question. The first 3 dev articles stand in for the train split."""
    def rows(articles):
        return datasets.Dataset.from_list([
            {"id": qa["id"], "title": a["title"], "context": p["context"], "question": qa["question"],
             "answers": {"text": [x["text"] for x in qa["answers"]],
                         "answer_start": [x["answer_start"] for x in qa["answers"]]}}
            for a in articles for p in a["paragraphs"] for qa in p["qas"]])

    articles = squad_articles(mirror, strip)
    return datasets.DatasetDict(train=rows(articles[:3]), validation=rows(articles))


@functools.cache
def hub_wikitext(mirror: Path) -> datasets.DatasetDict:
    """Salesforce/wikitext: one row per line, blank lines as "". valid stands in for train."""
    def rows(file):
        text = [line if line.strip() else "" for line in lines(mirror / "wikitext2_raw" / file)]
        return datasets.Dataset.from_dict({"text": text})

    return datasets.DatasetDict(train=rows("wiki.valid.raw"), validation=rows("wiki.valid.raw"),
                                test=rows("wiki.test.raw"))


@functools.cache
def served_bytes(mirror: Path) -> dict[str, bytes]:
    """GitHub: each pinned URL's bytes, the NLTK zips rebuilt (README included) from the mirror."""
    served = {}
    for name, spec in data.DATASETS.items():
        for file, url in spec.get("urls", {}).items():
            stand_in = mirror / name / "valid.txt"  # for wikitext2/train.txt, too big for the mirror
            served[url] = (mirror / name / file if file in spec["files"] else stand_in).read_bytes()
        if "zip" in spec:
            archive = io.BytesIO()
            with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
                zf.writestr(f"{name}/README", "not a document\n")
                for file in spec["files"]:
                    zf.write(mirror / name / file, f"{name}/{file}")
            served[spec["zip"]] = archive.getvalue()
    return served


class Response(io.BytesIO):
    """An urlopen() answer; it can claim more bytes than it has, or break after some bytes."""

    def __init__(self, body: bytes, length: int | None = None, break_at: int | None = None):
        super().__init__(body)
        self.headers = {"Content-Length": str(len(body) if length is None else length)}
        self.break_at = break_at

    def read(self, size=-1):
        if self.break_at is not None and self.tell() >= self.break_at:
            raise ConnectionResetError(104, "Connection reset by peer")
        return super().read(size)


@pytest.fixture
def internet(mirror, monkeypatch) -> list:
    """Replace the network edge (urlopen, load_dataset, hf_hub_download); returns the calls made."""
    calls = []

    def urlopen(url, timeout=None):
        calls.append(url)
        return Response(served_bytes(mirror)[url])

    def load_dataset(path, name=None, **kwargs):
        calls.append((path, name))
        return {"nyu-mll/glue": hub_sst2, "rajpurkar/squad": hub_squad,
                "Salesforce/wikitext": hub_wikitext}[path](mirror)

    def hf_hub_download(repo_id, filename, **kwargs):
        calls.append((repo_id, filename))
        return str(mirror / "bert_vocab" / filename)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    return calls


# ---- the mirror route ---------------------------------------------------------------------------

def test_registry_names_exactly_the_mirror_files_with_their_canonical_digests(mirror):
    sums = read_sums(mirror)
    registry = {f"{name}/{file}": digest for name, spec in data.DATASETS.items()
                for file, digest in spec["files"].items()}
    assert registry.keys() == sums.keys()
    assert {rel: digest for rel, digest in registry.items() if digest} == {
        rel: sums[rel] for rel, digest in registry.items() if digest}


def test_fetch_from_mirror_copies_every_file_byte_for_byte(mirror, tmp_path):
    folders = data.fetch(dest=tmp_path, mirror=mirror)
    assert folders == {name: tmp_path / name for name in data.DATASETS}
    copied = {p.relative_to(tmp_path).as_posix(): sha256(p) for p in tmp_path.rglob("*") if p.is_file()}
    assert copied == read_sums(mirror)  # same files, same bytes, no temporary files left behind
    (tmp_path / "probe").touch()  # the permissions any new file gets (not mkstemp's 0600)
    assert (tmp_path / "sst2" / "dev.tsv").stat().st_mode == (tmp_path / "probe").stat().st_mode


def test_every_file_of_the_registry_has_a_pinned_sha256(mirror):
    """Nothing is trusted unchecked: not a mirror without SHA256SUMS, not a file cut off on disk. The pinned
    digests are the mirror's (read independently here), the files as their pinned sources give them."""
    sums = read_sums(mirror)
    for name, spec in data.DATASETS.items():
        for filename, digest in spec["files"].items():
            assert digest, f"{name}/{filename} has no sha256 in the registry"
            if f"{name}/{filename}" in sums:
                assert digest == sums[f"{name}/{filename}"], f"{name}/{filename}"


def test_a_mirror_without_sha256sums_is_checked_against_the_registry(mirror, tmp_path):
    copy = tmp_path / "mirror"
    shutil.copytree(mirror / "inaugural", copy / "inaugural")  # and no SHA256SUMS beside it
    speech = copy / "inaugural" / "1861-Lincoln.txt"
    speech.write_text(speech.read_text().replace("Union", "Onion"))
    with pytest.raises(data.ChecksumError, match="1861-Lincoln.txt: sha256 is"):
        data.fetch("inaugural", dest=tmp_path / "data", mirror=copy)
    assert not (tmp_path / "data" / "inaugural" / "1861-Lincoln.txt").exists()


def test_pre_training_refuses_a_corpus_file_cut_off_on_disk(mirror, data_home):
    from minibert.pretraining import load_documents

    data.fetch("gutenberg", dest=data_home, mirror=mirror)
    assert len(load_documents("gutenberg/blake-poems.txt")) == 1
    poems = data_home / "gutenberg" / "blake-poems.txt"
    poems.write_bytes(poems.read_bytes()[:5000])  # what a full disk or an interrupted copy leaves
    with pytest.raises(data.ChecksumError, match=r"blake-poems.txt is damaged: .*python -m minibert.data fetch gutenberg"):
        load_documents("gutenberg/blake-poems.txt")
    with pytest.raises(data.ChecksumError, match="blake-poems.txt is damaged"):
        load_documents("gutenberg")  # the whole corpus too
    data.fetch("gutenberg", dest=data_home, mirror=mirror)  # the fix the message gives
    assert len(load_documents("gutenberg/blake-poems.txt")) == 1


@pytest.mark.parametrize("load", ["sst2", "mrpc", "ud_english_ewt"])
def test_fine_tuning_and_evaluation_data_cut_off_on_disk_are_refused_too(mirror, data_home, load):
    """Every loader reads through `data.ensure`, which checks the files it hands out: `minibert evaluate`
    used to score 189 of SST-2's 872 dev phrases from a cut-off file without a word."""
    from minibert.analysis.conllu import load_ud_english_ewt
    from minibert.tasks.pairs import load_pairs
    from minibert.tasks.sst2 import load_sst2

    loader, file = {"sst2": (lambda: load_sst2("dev"), "dev.tsv"),
                    "mrpc": (lambda: load_pairs("mrpc", "test"), "msr_paraphrase_test.txt"),
                    "ud_english_ewt": (lambda: load_ud_english_ewt("dev"), "en_ewt-ud-dev.conllu")}[load]
    data.fetch(load, dest=data_home, mirror=mirror)
    whole = len(loader())
    damaged = data_home / load / file
    damaged.write_bytes(damaged.read_bytes()[:len(damaged.read_bytes()) // 4])
    with pytest.raises(data.ChecksumError, match=rf"{file} is damaged: .*python -m minibert.data fetch {load}"):
        loader()
    data.fetch(load, dest=data_home, mirror=mirror)  # the fix the message gives
    assert len(loader()) == whole


def test_present_files_are_verified_damaged_and_missing_ones_fetched_again(mirror, tmp_path, capsys, monkeypatch):
    data.fetch("sst2", dest=tmp_path, mirror=mirror)
    dev, train = tmp_path / "sst2" / "dev.tsv", tmp_path / "sst2" / "train.tsv"
    stamp = train.stat().st_mtime_ns
    dev.write_bytes(dev.read_bytes()[:1000])  # cut off, as a full disk or an interrupted copy elsewhere leaves it
    monkeypatch.setenv("MINIBERT_DATA_DIR", str(tmp_path))
    data.main(["list"])
    assert "sst2            3/3 files, 1 damaged: fetch sst2 again" in capsys.readouterr().out
    data.fetch("sst2", dest=tmp_path, mirror=mirror)
    assert "sst2/dev.tsv is damaged (its sha256 is not the registry's): fetching it again" in capsys.readouterr().err
    assert dev.read_bytes() == (mirror / "sst2" / "dev.tsv").read_bytes()
    assert train.stat().st_mtime_ns == stamp, "a verified file is kept as it is"
    train.unlink()
    data.fetch("sst2", dest=tmp_path, mirror=mirror)
    assert sha256(train) == sha256(mirror / "sst2" / "train.tsv")
    data.fetch("sst2", dest=tmp_path, mirror=mirror, force=True)
    assert dev.read_bytes() == (mirror / "sst2" / "dev.tsv").read_bytes()


@pytest.mark.parametrize("name, file", [("sst2", "dev.tsv"),  # digest in the registry and SHA256SUMS
                                        ("state_union", "1945-Truman.txt")])  # only in SHA256SUMS
def test_a_corrupt_mirror_file_is_refused_and_not_written(mirror, tmp_path, name, file):
    bad = tmp_path / "bad-mirror"
    (bad / name).mkdir(parents=True)
    (bad / "SHA256SUMS").write_bytes((mirror / "SHA256SUMS").read_bytes())
    for source in (mirror / name).iterdir():
        (bad / name / source.name).write_bytes(source.read_bytes())
    original = (mirror / name / file).read_bytes()
    (bad / name / file).write_bytes(original.replace(b"e", b"E", 1))
    with pytest.raises(data.ChecksumError, match=re.escape(file)):
        data.fetch(name, dest=tmp_path / "out", mirror=bad)
    assert not (tmp_path / "out" / name / file).exists()
    assert not [p for p in (tmp_path / "out" / name).iterdir() if p.name.startswith(".")]


def test_a_mirror_without_the_dataset_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="has no sst2/train.tsv"):
        data.fetch("sst2", dest=tmp_path / "out", mirror=tmp_path)


# ---- the online route, its network edge served from the mirror ----------------------------------

def test_fetch_online_writes_the_mirror_files(mirror, internet, tmp_path):
    data.fetch(dest=tmp_path, mirror="")
    for rel, digest in read_sums(mirror).items():
        if rel != "squad_v1.1/dev-v1.1.json":
            assert sha256(tmp_path / rel) == digest, rel
    # The Hub trims whitespace in SQuAD (344 questions, 6 contexts); all else is the official file.
    assert (tmp_path / "squad_v1.1" / "dev-v1.1.json").read_text() == json.dumps(
        {"data": squad_articles(mirror, strip=True), "version": "1.1"})
    # The online-only files, from the stand-in splits the fake serves.
    assert (tmp_path / "squad_v1.1" / "train-v1.1.json").read_text() == json.dumps(
        {"data": squad_articles(mirror, strip=True)[:3], "version": "1.1"})
    for stand_in, file in [("wikitext2_raw/wiki.valid.raw", "wikitext2_raw/wiki.train.raw"),
                           ("wikitext2/valid.txt", "wikitext2/train.txt")]:
        assert sha256(tmp_path / file) == sha256(mirror / stand_in)
    assert not (tmp_path / "gutenberg" / "README").exists()
    hub_calls = [call for call in internet if isinstance(call, tuple)]
    assert hub_calls == [*HUB_TABLES.values(), ("google-bert/bert-base-uncased", "vocab.txt")]
    urls = [call for call in internet if isinstance(call, str)]  # every GitHub file pinned to a commit
    pinned = re.compile(r"https://raw\.githubusercontent\.com/[\w.-]+/[\w.-]+/[0-9a-f]{40}/\S+")
    assert len(urls) == 149 and all(pinned.fullmatch(url) for url in urls)


def test_squad_rows_that_keep_their_whitespace_give_the_official_file(mirror, internet, monkeypatch, tmp_path):
    monkeypatch.setattr(datasets, "load_dataset", lambda path, name=None: hub_squad(mirror, strip=False))
    data.fetch("squad_v1.1", dest=tmp_path, mirror="")
    assert sha256(tmp_path / "squad_v1.1" / "dev-v1.1.json") == sha256(mirror / "squad_v1.1" / "dev-v1.1.json")


def test_online_fetch_skips_present_files(mirror, internet, tmp_path):
    data.fetch(["ud_english_ewt", "sst2"], dest=tmp_path, mirror=mirror)
    internet.clear()
    data.fetch(["ud_english_ewt", "sst2"], dest=tmp_path, mirror="")
    assert internet == []
    data.fetch("ud_english_ewt", dest=tmp_path, mirror="", force=True)
    assert len(internet) == 2


def test_an_interrupted_download_leaves_no_file(monkeypatch, tmp_path):
    body = bytes(3 << 20)
    monkeypatch.setattr(urllib.request, "urlopen",
                        lambda url, timeout=None: Response(body, break_at=1 << 20))
    with pytest.raises(ConnectionResetError):
        data.fetch("gap_coreference", dest=tmp_path, mirror="")
    assert list((tmp_path / "gap_coreference").iterdir()) == []


def test_a_short_download_is_not_taken_for_complete(monkeypatch, tmp_path):
    """http.client returns a body cut short without an error; the Content-Length check catches it."""
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout=None: Response(b"half", length=8))
    with pytest.raises(ConnectionError, match="got 4 of 8 bytes"):
        data.fetch("wikitext2", dest=tmp_path, mirror="")
    assert list((tmp_path / "wikitext2").iterdir()) == []


def raising(error: Exception):
    def call(*args, **kwargs):
        raise error
    return call


@pytest.mark.parametrize("name", ["ud_english_ewt", "gutenberg", "sst2", "bert_vocab"])
def test_no_network_and_no_mirror_suggests_a_mirror(monkeypatch, tmp_path, name):
    monkeypatch.delenv("MINIBERT_DATA_MIRROR", raising=False)
    # The errors each library raises here, where no host resolves.
    monkeypatch.setattr(urllib.request, "urlopen", raising(
        urllib.error.URLError(socket.gaierror(-2, "Name or service not known"))))
    monkeypatch.setattr(datasets, "load_dataset", raising(
        ConnectionError("Couldn't reach 'nyu-mll/glue' on the Hub (LocalEntryNotFoundError)")))
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", raising(
        huggingface_hub.errors.LocalEntryNotFoundError("cannot find the requested files in the local cache")))
    with pytest.raises(ConnectionError, match="MINIBERT_DATA_MIRROR"):
        data.fetch(name, dest=tmp_path)
    assert not (tmp_path / name).exists() or list((tmp_path / name).iterdir()) == []


# ---- paths for loaders, errors -------------------------------------------------------------------

def test_unknown_names_are_refused_with_the_known_ones():
    for call in (lambda: data.fetch(["sst2", "sst3"]), lambda: data.path("sst3"),
                 lambda: data.ensure("sst3")):
        with pytest.raises(ValueError, match="sst3") as err:
            call()
        assert all(name in str(err.value) for name in data.DATASETS)


def test_missing_data_names_the_command_that_fetches_it(data_home):
    with pytest.raises(FileNotFoundError) as err:
        data.path("sst2")
    message = str(err.value)
    assert str(data_home / "sst2") in message
    assert "python -m minibert.data fetch sst2\n" in message
    assert "python -m minibert.data fetch sst2 --mirror" in message and "MINIBERT_DATA_MIRROR" in message


def test_ensure_fetches_once_then_uses_the_local_copy(mirror, data_home, monkeypatch):
    assert data.ensure("squad_v1.1") == data_home / "squad_v1.1"
    dev = data.path("squad_v1.1", "dev-v1.1.json")
    assert sha256(dev) == sha256(mirror / "squad_v1.1" / "dev-v1.1.json")
    monkeypatch.setattr(data.fetching, "fetch", None)  # a second fetch would fail
    assert data.ensure("squad_v1.1") == data_home / "squad_v1.1"
    with pytest.raises(FileNotFoundError, match="comes only with the online download"):
        data.path("squad_v1.1", "train-v1.1.json")


def test_a_shared_read_only_copy_is_used_before_fetching(mirror, data_home, tmp_path, monkeypatch):
    """A class's shared folder (or the grader's data/, seen from a sandboxed grading kernel) is read
    where it is; what it lacks is fetched into the user's own data folder, and an unwritable data
    folder says what to do instead of a bare PermissionError."""
    shared = tmp_path / "shared"
    data.fetch("stsb", dest=shared, mirror=mirror)
    monkeypatch.setenv("MINIBERT_SHARED_DATA_DIR", str(shared))
    assert data.ensure("stsb") == shared / "stsb" and not (data_home / "stsb").exists()
    assert data.ensure("rte") == data_home / "rte"  # not in the shared copy: fetched into data_home
    is_file = Path.is_file

    def unreadable(path):  # what pathlib does in a folder this user may not enter
        if shared in path.parents:
            raise PermissionError(13, "Permission denied", str(path))
        return is_file(path)
    with monkeypatch.context() as mp:
        mp.setattr(Path, "is_file", unreadable)
        assert data.ensure("stsb") == data_home / "stsb"  # a copy it cannot read counts as absent
    monkeypatch.setattr(data.fetching, "fetch", lambda names: (_ for _ in ()).throw(PermissionError(13, "denied")))
    with pytest.raises(PermissionError, match=r"mrpc is not in .* cannot write there .* fetch mrpc"):
        data.ensure("mrpc")


def test_data_dir_is_the_environment_then_the_checkout(monkeypatch, tmp_path):
    monkeypatch.setenv("MINIBERT_DATA_DIR", str(tmp_path))
    assert data.data_dir() == tmp_path
    monkeypatch.delenv("MINIBERT_DATA_DIR")
    checkout = Path(data.__file__).resolve().parents[2]  # minibert/data/__init__.py -> the checkout
    assert (checkout / "pyproject.toml").is_file() and data.data_dir() == checkout / "data"


# ---- the command line ---------------------------------------------------------------------------

def test_cli_fetch_and_list(mirror, tmp_path, data_home, capsys):
    data.main(["fetch", "sst2", "--dest", str(data_home), "--mirror", str(mirror)])
    assert f"sst2: {data_home / 'sst2'}" in capsys.readouterr().out
    assert sha256(data_home / "sst2" / "train.tsv") == sha256(mirror / "sst2" / "train.tsv")
    data.main(["list"])
    listing = capsys.readouterr().out
    assert all(name in listing for name in data.DATASETS)
    assert re.search(r"^sst2 +3/3 files +none stated", listing, re.M)
    assert re.search(r"^state_union +0/65 files +public domain", listing, re.M)


def test_cli_errors_exit_with_a_message(capsys):
    with pytest.raises(SystemExit, match="unknown dataset 'sst3'"):
        data.main(["fetch", "sst3"])


def test_python_dash_m_runs_the_cli(data_home):
    result = subprocess.run([sys.executable, "-m", "minibert.data", "list"], capture_output=True,
                            text=True, env={**os.environ, "MINIBERT_DATA_DIR": str(data_home)}, check=True)
    assert f"data folder: {data_home}" in result.stdout and "bert_vocab" in result.stdout
