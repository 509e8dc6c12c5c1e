"""Reading text: sentences, plain files, and the formats of the course's corpora (WikiText, SQuAD).

The pieces every corpus reader shares (`corpus` for the registry's corpora, `wikipedia` for
WikiExtractor's articles): a sentence splitter with a few readable rules, a file reader that copes
with old encodings and Project Gutenberg's licence, and WikiText's and SQuAD's layouts as documents.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..user_files import regular_file

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
    raw = regular_file(file).read_bytes()
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


def wikitext_articles(text: str, undo_marks: bool = True) -> list[tuple[str, list[str]]]:
    """WikiText -> [(title, sentences)]: an article starts at a `` = Title = `` line between blank lines;
    one paragraph per line.

    Headings are left out, as BERT's Wikipedia text left out headers; with ``undo_marks``, ``@-@``,
    ``@,@``, ``@.@`` (WikiText's escaped separators, as in ``1 @,@ 000``) go back to ``-``, ``,``, ``.``.
    """
    if undo_marks:
        text = text.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    lines = text.split("\n")
    articles = []
    for i, line in enumerate(lines):
        blank_around = 0 < i < len(lines) - 1 and not lines[i - 1].strip() and not lines[i + 1].strip()
        if _WIKITEXT_TITLE.fullmatch(line) and blank_around:
            articles.append((line.strip(" ="), []))
        elif articles and line.strip() and not line.lstrip().startswith("= "):
            articles[-1][1].extend(split_sentences(" ".join(line.split())))
    return articles


def wikitext_to_documents(text: str, undo_marks: bool = True) -> list[list[str]]:
    """WikiText -> documents, each the sentences of one article (`wikitext_articles`)."""
    return [sentences for _, sentences in wikitext_articles(text, undo_marks)]


def squad_to_documents(text: str, file: str | Path = "SQuAD JSON") -> list[list[str]]:
    """SQuAD's JSON -> one document per Wikipedia article: the sentences of its paragraphs, in order."""
    try:
        articles = json.loads(text)["data"]
        return [[s for paragraph in article["paragraphs"] for s in split_sentences(" ".join(paragraph["context"].split()))]
                for article in articles]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{file} is not SQuAD's JSON ({{'data': [{{'paragraphs': [{{'context': ...}}]}}]}}): "
                         f"{error}; fetch it again with `python -m minibert.data fetch squad_v1.1`") from error
