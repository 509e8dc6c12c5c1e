"""Steps 1 and 2 of pre-training data: text -> documents -> sentences -> WordPiece ids.

Document boundaries matter: NSP's "next sentence" must come from the same document and its random
one from another, so every source is read as a list of documents, each a list of sentences.
"""
from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import NamedTuple

from .. import data

# The registry's text corpora: in WikiText and SQuAD an article is a document, elsewhere a file is.
# SQuAD's paragraphs are Wikipedia text (the questions are left out): in-domain text for a model
# scored on WikiText, and the same kind of text BERT read.
TEXT_CORPORA = ("wikitext2_raw", "wikitext2", "squad_v1.1", "gutenberg", "gutenberg_more", "state_union", "inaugural")


class HubDataset(NamedTuple):
    """A text dataset on the Hugging Face Hub, one row per document: ``load_dataset(path, name, split)[column]``."""
    path: str
    name: str | None = None
    split: str = "train"
    column: str = "text"


# Words whose period does not end a sentence ("Mr. Hyde"); "No. 5" only before a number. Single
# letters (initials, "H. americanus") and dotted words ("e.g.", "U.S.") count as abbreviations too.
ABBREVIATIONS = frozenset("mr mrs ms messrs dr prof rev st jr sr gen col capt lt sgt gov sen rep hon "
                          "mt ft vs etc cf al approx inc ltd co corp jan feb mar apr jun jul aug sep sept "
                          "oct nov dec".split())
NUMBERED_ABBREVIATIONS = frozenset("no nos vol p pp fig ch art sec".split())
# A candidate sentence end: a word, end punctuation, closing quotes or brackets, space, then what can
# start a sentence (a capital or a digit, maybe after an opening quote or bracket).
_SENTENCE_END = re.compile(r"""(\S*?)([.!?]+)["'”’)\]]*\s+(?=["'“‘(\[]?[A-Z0-9])""")
_PG_START = re.compile(r"^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG.*$", re.MULTILINE | re.IGNORECASE)
_PG_END = re.compile(r"^(\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG|END OF (THE )?PROJECT GUTENBERG)",
                     re.MULTILINE | re.IGNORECASE)
_WIKITEXT_TITLE = re.compile(r" = [^=].* = ")  # " = Homarus gammarus = "; sections are " = = ... = = "


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences with a few readable rules (no trained model, no nltk).

    A sentence ends at ``.``, ``!`` or ``?`` followed by space and a capital or a digit, unless the
    period belongs to an abbreviation. Good enough for pre-training: a wrong split only moves a
    segment boundary, which NSP tolerates (the paper's "sentences" are spans of text anyway).
    """
    sentences, start = [], 0
    for end in _SENTENCE_END.finditer(text):
        word, punctuation = end.group(1).lstrip("\"'“‘([").lower(), end.group(2)
        if punctuation == "." and (len(word) == 1 and word.isalpha() or "." in word or word in ABBREVIATIONS
                                   or word in NUMBERED_ABBREVIATIONS and text[end.end()].isdigit()):
            continue
        sentences.append(text[start:end.end()].strip())
        start = end.end()
    sentences.append(text[start:].strip())
    return [s for s in sentences if s]


def read_text(file: str | Path) -> str:
    """A text file as str: UTF-8 (a BOM dropped), else Latin-1; ``\\n`` line ends; no Project Gutenberg licence.

    Latin-1 decodes any bytes, so old files that are not UTF-8 (some State of the Union addresses)
    still load. A Project Gutenberg header and licence footer are not the book: when the START / END
    marker lines are there, only the text between them is kept.
    """
    raw = Path(file).read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if start := _PG_START.search(text):
        text = text[start.end():]
    if end := _PG_END.search(text):
        text = text[:end.start()]
    return text


def text_to_sentences(text: str) -> list[str]:
    """One document's sentences: paragraphs are separated by blank lines, hard-wrapped lines are joined."""
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n\s*\n", text))
    return [sentence for paragraph in paragraphs for sentence in split_sentences(paragraph)]


def wikitext_to_documents(text: str) -> list[list[str]]:
    """WikiText: an article starts at a `` = Title = `` line between blank lines; one paragraph per line.

    Headings are left out, as BERT's Wikipedia text left out headers; ``@-@``, ``@,@``, ``@.@``
    (WikiText's escaped separators, as in ``1 @,@ 000``) go back to ``-``, ``,``, ``.``.
    """
    lines = text.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".").split("\n")
    documents = []
    for i, line in enumerate(lines):
        blank_around = 0 < i < len(lines) - 1 and not lines[i - 1].strip() and not lines[i + 1].strip()
        if _WIKITEXT_TITLE.fullmatch(line) and blank_around:
            documents.append([])
        elif documents and line.strip() and not line.lstrip().startswith("= "):
            documents[-1].extend(split_sentences(" ".join(line.split())))
    return documents


def squad_to_documents(text: str, file: str | Path = "SQuAD JSON") -> list[list[str]]:
    """SQuAD's JSON -> one document per Wikipedia article: the sentences of its paragraphs, in order."""
    try:
        articles = json.loads(text)["data"]
        return [[s for paragraph in article["paragraphs"] for s in split_sentences(" ".join(paragraph["context"].split()))]
                for article in articles]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{file} is not SQuAD's JSON ({{'data': [{{'paragraphs': [{{'context': ...}}]}}]}}): "
                         f"{error}; fetch it again with `python -m minibert.data fetch squad_v1.1`") from error


def load_documents(sources) -> list[list[str]]:
    """Documents, each a list of sentences, from one source or a list of them.

    A source is a corpus of the data registry (``"wikitext2_raw"``, ``"gutenberg"``, ``"state_union"``,
    ``"inaugural"``, ...) or one of its files (``"gutenberg/carroll-alice.txt"``), fetched if missing;
    a `Path` (or a str that is not a corpus name) to a ``.txt`` file or a folder of them, one file =
    one document; or a `HubDataset`, one row = one document.
    """
    if isinstance(sources, (str, Path, HubDataset)):
        sources = [sources]
    documents = []
    for source in sources:
        found = [doc for doc in _source_documents(source) if doc]
        if not found:
            raise ValueError(f"the source {source!r} holds no text")
        documents += found
    return documents


def _source_documents(source) -> list[list[str]]:
    if isinstance(source, HubDataset):
        import datasets  # here: it takes seconds to import, and only this source needs it

        rows = datasets.load_dataset(source.path, source.name, split=source.split)[source.column]
        return [text_to_sentences(row) for row in rows]
    name, _, filename = str(source).partition("/")
    if isinstance(source, str) and name in TEXT_CORPORA:
        spec = data.DATASETS[name]
        known = [*spec["files"], *spec.get("online_extras", ())]
        if filename and filename not in known:
            raise ValueError(f"{name} has no file {filename!r}; its files are {', '.join(known)}")
        folder = data.ensure(name)
        files = [data.path(name, filename)] if filename else [folder / f for f in known if (folder / f).is_file()]
        if name.startswith("wikitext"):
            return [doc for file in files for doc in wikitext_to_documents(read_text(file))]
        if name == "squad_v1.1":
            return [doc for file in files for doc in squad_to_documents(read_text(file), file)]
        return [text_to_sentences(read_text(file)) for file in files]
    path = Path(source)
    if not path.exists():
        raise ValueError(f"{source!r} is neither a text corpus ({', '.join(TEXT_CORPORA)}) nor an existing "
                         "file or folder; for a Hugging Face Hub dataset pass HubDataset(path, name, split)")
    files = sorted(path.rglob("*.txt")) if path.is_dir() else [path]
    if not files:
        raise ValueError(f"the folder {path} holds no .txt files (one file = one document)")
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
