"""Wikipedia as BERT read it: WikiExtractor's articles -> documents, with the held-out articles left out.

BERT pre-trained on English Wikipedia, "text passages only, ignoring lists, tables, and headers"
(Devlin et al. 2018, §3.1), read as documents so that a next sentence comes from the same article.
`wikiextractor_to_documents` reads WikiExtractor's output that way. A corpus that contains the
articles a model is later scored on would turn the held-out test into a memory test, so the
readers drop, by title, every article of the course's evaluation sets (`held_out_titles`).
"""
from __future__ import annotations

import functools
import html
import json
import re
import unicodedata

from .. import data
from .text import read_text, split_sentences, wikitext_articles

# <doc id="12" url="http://en.wikipedia.org/wiki?curid=12" title="Anarchism"> ... </doc>
_DOC = re.compile(r'<doc id="[^"]*" url="[^"]*" title="([^"]*)">\n(.*?)</doc>', re.DOTALL)
# What WikiExtractor leaves of removed pronunciations and templates: "Einstein (; ]; 14 March 1879".
_EMPTY_OPENING = re.compile(r"\((?:\s*[;,\]]+)+\s*")
_EMPTY_BRACKETS = re.compile(r"\s*\(\s*\)")
HEADING_WORDS = 6  # a line this short is a section heading ("Early life and education.") or a list's leftover


def normalise_title(title: str) -> str:
    """A title as all three sources can agree on it: WikiText's "American Beauty ( 1999 film )",
    SQuAD's "American_Beauty_(1999_film)" and Wikipedia's "American Beauty (1999 film)" are one
    article. Letters and digits only, lower case, accents dropped."""
    title = title.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    decomposed = unicodedata.normalize("NFKD", title)
    return "".join(c for c in decomposed if c.isalnum() and not unicodedata.combining(c)).casefold()


def clean_paragraph(line: str) -> str:
    """One paragraph line with WikiExtractor's leftovers removed: HTML entities, "(; ];", "()"."""
    line = html.unescape(line)
    line = _EMPTY_OPENING.sub("(", line)
    return " ".join(_EMPTY_BRACKETS.sub("", line).split())


def wikiextractor_to_documents(text: str) -> list[tuple[str, list[str]]]:
    """WikiExtractor output -> [(title, sentences)], one per ``<doc>``.

    Each article is its title on a line, then one paragraph a line. The title line, section headings
    and the stubs of removed lists (lines of at most `HEADING_WORDS` words) are left out, as BERT
    left out headers; a real one-line paragraph that short is rare and costs little.
    """
    documents = []
    for title, body in _DOC.findall(text):
        lines = body.split("\n")[1:]  # the first line repeats the title
        paragraphs = (clean_paragraph(line) for line in lines if len(line.split()) > HEADING_WORDS)
        documents.append((html.unescape(title), [s for p in paragraphs for s in split_sentences(p)]))
    return documents


def read_wikipedia(files, exclude: frozenset[str] = frozenset()) -> list[list[str]]:
    """The articles of WikiExtractor shard files as documents (lists of sentences), in file order,
    without those whose `normalise_title` is in ``exclude`` (see `held_out_titles`)."""
    documents = []
    for file in files:
        found = wikiextractor_to_documents(read_text(file))
        if not found and read_text(file).strip():
            raise ValueError(f"{file} holds no <doc ...> ... </doc> article: is it WikiExtractor output? "
                             "Fetch it again with `python -m minibert.data fetch wikipedia_2015`")
        documents += [sentences for title, sentences in found
                      if sentences and normalise_title(title) not in exclude]
    return documents


# The articles the course scores models on: pre-training text must not contain them.
HELD_OUT = {"wikitext2_raw": ("wiki.valid.raw", "wiki.test.raw"), "squad_v1.1": ("dev-v1.1.json",)}


@functools.cache
def held_out_titles() -> frozenset[str]:
    """The normalised titles of every article an evaluation of the course is scored on: WikiText-2's
    valid and test articles (fill-in-the-blank, NSP) and SQuAD v1.1's dev articles (notebook 10, whose
    offline split trains and scores on them), read from the evaluation files themselves."""
    titles = [title for file in HELD_OUT["wikitext2_raw"]
              for title, _ in wikitext_articles(read_text(data.ensure("wikitext2_raw") / file))]
    squad = json.loads(read_text(data.ensure("squad_v1.1") / HELD_OUT["squad_v1.1"][0]))
    titles += [article["title"].replace("_", " ") for article in squad["data"]]
    return frozenset(normalise_title(t) for t in titles)
