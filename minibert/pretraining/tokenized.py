"""Step 2 of pre-training data, at any size: tokenized documents as flat arrays, cached on disk.

Nested Python lists of ids cost about 40 bytes a token: 16M words of Wikipedia would take gigabytes
and a minute to rebuild at every start. A `TokenizedCorpus` keeps the same documents in three
arrays, as Megatron's and fairseq's indexed datasets do: every token end to end, where each sentence
starts, where each document starts. A pair of segments or a packed sequence is then a few offsets
into the tokens (`pairs`), and the arrays are saved once per corpus and tokenizer (`cached_corpus`)
and memory-mapped afterwards, so a run over all of Wikipedia starts in seconds the second time.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from .. import data
from .corpus import HubDataset, WikiTextAsStored, load_documents, source_files
from .wikipedia import held_out_titles

CACHE_VERSION = 1  # bump when reading or tokenizing changes what a cached corpus holds


class TokenizedCorpus:
    """Documents of tokenized sentences as flat arrays.

    ``ids`` (N_tokens,): every sentence's WordPiece ids, end to end, no special tokens;
    ``sentence_starts`` (N_sentences + 1,): sentence k is ``ids[sentence_starts[k]:sentence_starts[k + 1]]``;
    ``document_starts`` (N_documents + 1,): document d is sentences ``document_starts[d]`` up to ``[d + 1]``.
    """

    def __init__(self, ids: np.ndarray, sentence_starts: np.ndarray, document_starts: np.ndarray):
        self.ids, self.sentence_starts, self.document_starts = ids, sentence_starts, document_starts

    @classmethod
    def from_documents(cls, documents: list[list[list[int]]]) -> "TokenizedCorpus":
        """Nested lists (documents -> sentences -> ids) as flat arrays; empty sentences stay (length 0)."""
        lengths = [len(sentence) for document in documents for sentence in document]
        sentence_starts = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=sentence_starts[1:])
        document_starts = np.zeros(len(documents) + 1, dtype=np.int64)
        np.cumsum([len(document) for document in documents], out=document_starts[1:])
        ids = np.fromiter((i for document in documents for sentence in document for i in sentence),
                          dtype=np.int64, count=int(sentence_starts[-1]))
        return cls(ids, sentence_starts, document_starts)

    @classmethod
    def tokenize(cls, tokenizer, documents: list[list[str]], batch_sentences: int = 20_000,
                 progress: bool = True) -> "TokenizedCorpus":
        """Sentences -> WordPiece ids with the fast tokenizer, in batches (a progress bar on big corpora).

        Sentences that tokenize to nothing are dropped, and then documents left empty, as
        `tokenize_documents` does.
        """
        sentences = [sentence for document in documents for sentence in document]
        ids, lengths = [], []
        for start in tqdm(range(0, len(sentences), batch_sentences), desc="tokenizing", unit="batch",
                          disable=not progress or len(sentences) <= batch_sentences):
            for encoding in tokenizer.backend_tokenizer.encode_batch(sentences[start:start + batch_sentences],
                                                                     add_special_tokens=False):
                ids.append(np.asarray(encoding.ids, dtype=np.int32))
                lengths.append(len(encoding.ids))
        kept_per_document, k = [], 0
        for document in documents:
            kept_per_document.append(sum(1 for n in lengths[k:k + len(document)] if n))
            k += len(document)
        lengths = np.asarray(lengths, dtype=np.int64)
        sentence_starts = np.zeros(int((lengths > 0).sum()) + 1, dtype=np.int64)
        np.cumsum(lengths[lengths > 0], out=sentence_starts[1:])
        counts = np.asarray([n for n in kept_per_document if n], dtype=np.int64)
        document_starts = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=document_starts[1:])
        flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int32)
        return cls(flat.astype(_id_dtype(tokenizer.vocab_size)), sentence_starts, document_starts)

    # --- reading -------------------------------------------------------------------------------------
    @property
    def num_documents(self) -> int:
        return len(self.document_starts) - 1

    def sentence_lengths(self) -> np.ndarray:
        return np.diff(self.sentence_starts)

    def document_token_starts(self) -> np.ndarray:
        """(N_documents + 1,) where each document's tokens start in ``ids``."""
        return self.sentence_starts[self.document_starts]

    def tokens(self, start: int, end: int) -> list[int]:
        return self.ids[start:end].tolist()

    def documents(self) -> list[list[list[int]]]:
        """The nested lists back (documents -> sentences -> ids), for small corpora and for teaching."""
        starts = self.sentence_starts
        return [[self.tokens(starts[k], starts[k + 1]) for k in range(self.document_starts[d], self.document_starts[d + 1])]
                for d in range(self.num_documents)]

    # --- on disk -------------------------------------------------------------------------------------
    FILES = ("ids.npy", "sentence_starts.npy", "document_starts.npy")

    def save(self, folder: str | os.PathLike, info: dict | None = None) -> Path:
        """Write the arrays into ``folder``, which appears whole or not at all (a temporary folder beside
        it, renamed in one step); ``info`` (what the corpus is) goes into info.json."""
        folder = Path(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = folder.with_name(f".{folder.name}.{uuid.uuid4().hex[:12]}.part")
        try:
            tmp.mkdir()
            for name, array in zip(self.FILES, (self.ids, self.sentence_starts, self.document_starts)):
                np.save(tmp / name, np.ascontiguousarray(array), allow_pickle=False)
            (tmp / "info.json").write_text(json.dumps(info or {}, indent=1) + "\n")
            os.replace(tmp, folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return folder

    @classmethod
    def load(cls, folder: str | os.PathLike, mmap: bool = True) -> "TokenizedCorpus":
        """Read a saved corpus; ``mmap``: the token ids stay on disk and are paged in as read."""
        folder = Path(folder)
        ids, sentence_starts, document_starts = (
            np.load(folder / name, mmap_mode="r" if mmap and name == "ids.npy" else None, allow_pickle=False)
            for name in cls.FILES)
        if sentence_starts[-1] != len(ids) or document_starts[-1] != len(sentence_starts) - 1:
            raise ValueError(f"the tokenized corpus in {folder} is inconsistent (a damaged cache?); delete the "
                             "folder and it is made again")
        return cls(ids, sentence_starts, document_starts)


def _id_dtype(vocab_size: int):
    return np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32


def cache_key(tokenizer, sources: list, reader_info: dict) -> str:
    """What a cached corpus depends on: the sources (names, and each file's size and modification
    time), the tokenizer's whole definition, what the readers drop, and `CACHE_VERSION`."""
    described = {"version": CACHE_VERSION, "reader": reader_info,
                 "tokenizer": hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode()).hexdigest(),
                 "sources": [[str(s), [[str(f), f.stat().st_size, f.stat().st_mtime_ns] for f in files]]
                             for s, files in sources]}
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:20]


def cache_folder() -> Path:
    """Where tokenized corpora are kept: ``<data_dir>/cache/tokenized`` (git-ignored like the data)."""
    return data.data_dir() / "cache" / "tokenized"


def tokenize_corpus(tokenizer, sources, cache: bool = True, progress: bool = True) -> TokenizedCorpus:
    """The sources (see `load_documents`) read, tokenized and flattened: a `TokenizedCorpus`.

    With ``cache``, a corpus of files (a registry corpus, or files and folders) is saved under
    `cache_folder` the first time and memory-mapped from there afterwards; a folder that cannot be
    written (a read-only data folder, a full disk) only costs the time to tokenize again.
    """
    sources = [sources] if isinstance(sources, (str, os.PathLike, HubDataset, WikiTextAsStored)) else list(sources)
    files = [source_files(source) for source in sources]
    folder = None
    if cache and all(f is not None for f in files):
        reader = {"wikipedia_held_out": sorted(held_out_titles())} if any(
            str(s).startswith("wikipedia_2015") for s in sources) else {}
        folder = cache_folder() / cache_key(tokenizer, list(zip(sources, files)), reader)
        if (folder / "info.json").is_file():
            try:
                return TokenizedCorpus.load(folder)
            except (ValueError, OSError):
                shutil.rmtree(folder, ignore_errors=True)  # damaged: made again below
    corpus = TokenizedCorpus.tokenize(tokenizer, load_documents(sources), progress=progress)
    if folder is not None:
        try:
            corpus.save(folder, {"sources": [str(s) for s in sources], "tokens": int(len(corpus.ids)),
                                 "sentences": int(len(corpus.sentence_starts) - 1),
                                 "documents": corpus.num_documents})
        except OSError:
            pass
    return corpus
