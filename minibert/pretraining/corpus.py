"""Steps 1 and 2 of pre-training data: sources -> documents -> sentences -> WordPiece ids.

Document boundaries matter: NSP's "next sentence" must come from the same document and its random
one from another, so every source is read as a list of documents, each a list of sentences (the
formats are read by `text` and `wikipedia`).
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import NamedTuple

from .. import data
from .text import read_text, squad_to_documents, text_to_sentences, wikitext_to_documents
from .wikipedia import held_out_titles, read_wikipedia

# The registry's text corpora: in Wikipedia, WikiText and SQuAD an article is a document, elsewhere a
# file is. SQuAD's paragraphs are Wikipedia text (the questions are left out): in-domain text for a
# model scored on WikiText, and the same kind of text BERT read. Wikipedia's articles that an
# evaluation is scored on are left out (`wikipedia.held_out_titles`).
TEXT_CORPORA = ("wikipedia_2015", "wikitext2_raw", "wikitext2", "squad_v1.1", "gutenberg", "gutenberg_more",
                "state_union", "inaugural")


class WikiTextAsStored(NamedTuple):
    """A WikiText corpus or file (``"wikitext2_raw/wiki.test.raw"``) read as stored: its tokenisation marks
    (`` @-@ ``, `` @,@ ``, `` @.@ ``) kept, as a test written in WikiText's own format sees them. A plain
    name reads the text as people write it, the marks undone (`wikitext_articles`)."""
    source: str


class HubDataset(NamedTuple):
    """A text dataset on the Hugging Face Hub, one row per document: ``load_dataset(path, name, split)[column]``."""
    path: str
    name: str | None = None
    split: str = "train"
    column: str = "text"


def load_documents(sources) -> list[list[str]]:
    """Documents, each a list of sentences, from one source or a list of them.

    A source is a corpus of the data registry (``"wikipedia_2015"``, ``"wikitext2_raw"``, ``"gutenberg"``,
    ``"state_union"``, ...) or one of its files (``"gutenberg/carroll-alice.txt"``) or folders
    (``"wikipedia_2015/AA"``: 25 of its 100 shards), fetched if missing
    (Wikipedia without the articles the course evaluates on: `wikipedia.held_out_titles`); a
    `WikiTextAsStored` WikiText file, its tokenisation marks kept; a `Path` (or a str that is not a
    corpus name) to a ``.txt`` file or a folder of them, one file = one document; or a `HubDataset`,
    one row = one document.
    """
    if isinstance(sources, (str, Path, HubDataset, WikiTextAsStored)):
        sources = [sources]
    documents = []
    for source in sources:
        found = [doc for doc in _source_documents(source) if doc]
        if not found:
            raise ValueError(f"the source {source!r} holds no text")
        documents += found
    return documents


def source_files(source) -> list[Path] | None:
    """The files a source reads (a registry corpus fetched first if missing), or None for a Hub dataset."""
    if isinstance(source, HubDataset):
        return None
    if isinstance(source, WikiTextAsStored):
        if not source.source.startswith("wikitext"):
            raise ValueError(f"WikiTextAsStored reads a WikiText corpus (wikitext2_raw, wikitext2), not {source.source!r}")
        return source_files(source.source)
    name, _, filename = str(source).partition("/")
    if isinstance(source, str) and name in TEXT_CORPORA:
        spec = data.DATASETS[name]
        known = [*spec["files"], *spec.get("online_extras", ())]
        inside = [f for f in known if f.startswith(filename.rstrip("/") + "/")] if filename else []  # a folder of it
        if filename and filename not in known and not inside:
            shown = ", ".join(known[:8]) + (f" ... ({len(known)} files)" if len(known) > 8 else "")
            raise ValueError(f"{name} has no file or folder {filename!r}; its files are {shown}")
        folder = data.ensure(name)  # a file cut off or edited is refused there, not trained on
        if filename in known:
            return [data.path(name, filename)]
        return [folder / f for f in (inside or known) if (folder / f).is_file()]
    path = Path(source)
    if not path.exists():
        raise ValueError(f"{source!r} is neither a text corpus ({', '.join(TEXT_CORPORA)}) nor an existing "
                         "file or folder; for a Hugging Face Hub dataset pass HubDataset(path, name, split)")
    files = sorted(path.rglob("*.txt")) if path.is_dir() else [path]
    if not files:
        raise ValueError(f"the folder {path} holds no .txt files (one file = one document)")
    return files


def _source_documents(source) -> list[list[str]]:
    if isinstance(source, HubDataset):
        import datasets  # here: it takes seconds to import, and only this source needs it

        rows = datasets.load_dataset(source.path, source.name, split=source.split)[source.column]
        return [text_to_sentences(row) for row in rows]
    files, name = source_files(source), str(source).partition("/")[0]
    if isinstance(source, WikiTextAsStored):
        return [doc for file in files for doc in wikitext_to_documents(read_text(file), undo_marks=False)]
    if isinstance(source, str) and name == "wikipedia_2015":
        return read_wikipedia(files, exclude=held_out_titles())
    if isinstance(source, str) and name.startswith("wikitext"):
        return [doc for file in files for doc in wikitext_to_documents(read_text(file))]
    if isinstance(source, str) and name == "squad_v1.1":
        return [doc for file in files for doc in squad_to_documents(read_text(file), file)]
    return [text_to_sentences(read_text(file)) for file in files]


def tokenize_documents(tokenizer, documents: list[list[str]]) -> list[list[list[int]]]:
    """Each sentence -> its WordPiece ids (no special tokens), in one batch call to the Rust tokenizer.

    Sentences that tokenize to nothing are dropped, and then documents left empty.
    """
    sentences = [sentence for document in documents for sentence in document]
    encodings = tokenizer.backend_tokenizer.encode_batch(sentences, add_special_tokens=False)
    ids = iter([encoding.ids for encoding in encodings])
    tokenized = [[s for s in itertools.islice(ids, len(document)) if s] for document in documents]
    return [document for document in tokenized if document]
