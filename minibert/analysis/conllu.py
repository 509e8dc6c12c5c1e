"""Dependency trees from CoNLL-U files (Universal Dependencies), the gold syntax that heads are scored on.

A CoNLL-U sentence is comment lines (``# sent_id = ...``, ``# text = ...``) and then one line per
token with ten tab-separated columns ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC, ended by a
blank line. Three kinds of ID occur:

- ``7``: a syntactic word. These are what we keep: each has a HEAD (the ID of the word it depends
  on, 0 for the root) and a DEPREL, so they are the units Clark et al. (2019) score attention on.
- ``3-4``: a multiword token, the surface form of several syntactic words (``didn't`` = ``did`` +
  ``n't``, ``company's`` = ``company`` + ``'s``). It has no head, so it is not a word of the
  analysis; the model reads the syntactic words, split as the treebank splits them, just as
  Clark et al. fed BERT the Penn Treebank's tokens (``did n't``, ``government 's``). The surface
  spans are kept in ``Sentence.multiword_tokens`` for display.
- ``8.1``: an empty node of the enhanced graph (an elided predicate). It is not in the basic tree
  and not in the text, so it is skipped.

DEPREL keeps its subtype (``nsubj:pass``); ``Word.relation`` is the universal relation before the
colon (``nsubj``), the level at which results are usually reported.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import data

COLUMNS = ("ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL", "DEPS", "MISC")


@dataclass(frozen=True)
class Word:
    id: int          # position in the sentence, from 1
    form: str
    upos: str
    head: int        # id of the governing word; 0 = the root of the sentence
    deprel: str      # full label with subtype, e.g. "nsubj:pass"

    @property
    def relation(self) -> str:
        """The universal relation without its language-specific subtype: nsubj:pass -> nsubj."""
        return self.deprel.split(":", 1)[0]


@dataclass
class Sentence:
    words: list[Word]
    sent_id: str | None = None
    text: str | None = None
    multiword_tokens: list[tuple[int, int, str]] = field(default_factory=list)  # (first id, last id, form)

    @property
    def forms(self) -> list[str]:
        return [w.form for w in self.words]


def parse_conllu(text: str, source: str = "<string>") -> list[Sentence]:
    """Sentences of a CoNLL-U document; an error names the line that is not CoNLL-U."""
    sentences, words, comments, multiword = [], [], {}, []
    # split("\n"), not splitlines(): a FORM may hold U+2028 or U+0085, which are not line ends in CoNLL-U
    for number, line in enumerate([*text.split("\n"), ""], start=1):  # "": the last sentence ends too
        line = line.removesuffix("\r")
        where = f"{source}, line {number}"
        if not line.strip():
            if words:
                sentences.append(Sentence(words, comments.get("sent_id"), comments.get("text"), multiword))
            words, comments, multiword = [], {}, []
            continue
        if line.startswith("#"):
            key, eq, value = line[1:].partition("=")
            if eq:
                comments[key.strip()] = value.strip()
            continue
        columns = line.split("\t")
        if len(columns) != len(COLUMNS):
            raise ValueError(f"{where}: {len(columns)} tab-separated column(s), but CoNLL-U has 10 "
                             f"({' '.join(COLUMNS)}). Is this a CoNLL-U file? {line[:80]!r}")
        token_id, form, _, upos, _, _, head, deprel, _, _ = columns
        first, dash, last = token_id.partition("-")
        if "." in token_id:  # an empty node: not in the basic tree
            continue
        if dash and first.isdigit() and last.isdigit():
            multiword.append((int(first), int(last), form))
            continue
        if not token_id.isdigit() or int(token_id) != len(words) + 1:
            raise ValueError(f"{where}: word ID {token_id!r} where {len(words) + 1} was expected "
                             "(IDs count 1, 2, 3 ... in each sentence; sentences end with a blank line)")
        if not head.isdigit():
            raise ValueError(f"{where}: word {form!r} has HEAD {head!r}; head analysis needs a treebank "
                             "with a dependency tree (a number in the HEAD column of every word)")
        words.append(Word(int(token_id), form, upos, int(head), deprel))
    if not sentences:
        raise ValueError(f"{source} holds no CoNLL-U sentences")
    return sentences


def read_conllu(path: str | os.PathLike) -> list[Sentence]:
    path = Path(path)
    return parse_conllu(path.read_text(encoding="utf-8"), source=str(path))


def load_ud_english_ewt(split: str = "dev") -> list[Sentence]:
    """UD English EWT (``dev``: 2,001 sentences, 25,147 words; ``test``), fetched first if absent."""
    if split not in ("dev", "test"):
        raise ValueError(f"split must be 'dev' or 'test', got {split!r} (the train split is not distributed here)")
    return read_conllu(data.ensure("ud_english_ewt") / f"en_ewt-ud-{split}.conllu")
