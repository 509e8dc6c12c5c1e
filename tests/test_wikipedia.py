"""Wikipedia as pre-training text: WikiExtractor's articles read as documents, the evaluation articles
left out by title (checked against the evaluation files themselves), and tokenized corpora kept as
flat arrays on disk that give exactly what the nested lists of the teaching path give."""
from __future__ import annotations

import random
import re

import numpy as np
import pytest
from offline import fresh_data_fixture

from minibert import data
from minibert.pretraining import (
    build_pretraining_data,
    create_sentence_pairs,
    load_documents,
    pack_full_sentences,
    tokenize_documents,
    unigram_loss,
)
from minibert.pretraining import tokenized as tokenized_module
from minibert.pretraining.corpus import source_files
from minibert.pretraining.tokenized import TokenizedCorpus, tokenize_corpus
from minibert.pretraining.wikipedia import held_out_titles, normalise_title, read_wikipedia, wikiextractor_to_documents
from minibert.training import example_lengths

# The shards that hold the four SQuAD dev articles the mirror's manifest names, and one without any.
HELD_OUT_SHARDS = {"Doctor Who": "AA/wiki_58", "Oxygen": "AB/wiki_70", "Rhine": "AB/wiki_98", "Warsaw": "AC/wiki_54"}
PLAIN_SHARD = "AA/wiki_02"


data_home = fresh_data_fixture("wikipedia_2015/AA/wiki_02")


SNIPPET = """<doc id="736" url="http://en.wikipedia.org/wiki?curid=736" title="Albert Einstein">
Albert Einstein

Albert Einstein (; ]; 14 March 1879 – 18 April 1955) was a German-born physicist. He developed the theory of relativity.
Early life and education.
Einstein was born in Ulm, in the Kingdom of Württemberg () on 14 March 1879 to a family of Jews.
</doc>
<doc id="12" url="http://en.wikipedia.org/wiki?curid=12" title="AT&amp;T">
AT&amp;T

AT&amp;T is an American company whose shares are traded in New York &amp; elsewhere.
</doc>
"""


def test_wikiextractor_articles_become_documents_without_headings_or_leftovers():
    assert wikiextractor_to_documents(SNIPPET) == [
        ("Albert Einstein", ["Albert Einstein (14 March 1879 – 18 April 1955) was a German-born physicist.",
                             "He developed the theory of relativity.",
                             "Einstein was born in Ulm, in the Kingdom of Württemberg on 14 March 1879 to a family of Jews."]),
        ("AT&T", ["AT&T is an American company whose shares are traded in New York & elsewhere."])]


@pytest.mark.parametrize("a, b", [("American Beauty ( 1999 film )", "American_Beauty_(1999_film)"),
                                  ("Nikola Tesla", "NIKOLA TESLA"), ("Zürich", "Zurich"),
                                  ("Kingdom of Great Britain @-@ Ireland", "Kingdom of Great Britain-Ireland")])
def test_titles_from_wikitext_squad_and_wikipedia_normalise_alike(a, b):
    assert normalise_title(a) == normalise_title(b)


def test_held_out_titles_are_read_from_every_evaluation_set():
    titles = held_out_titles()
    wikitext = []  # an article's title line sits between blank lines (a formula's " = ... = " does not)
    for file in ("wiki.valid.raw", "wiki.test.raw"):
        lines = (data.ensure("wikitext2_raw") / file).read_text().split("\n")
        wikitext += [line for before, line, after in zip(lines, lines[1:], lines[2:])
                     if re.fullmatch(r" = [^=].* = ", line) and not before.strip() and not after.strip()]
    assert len(wikitext) == 120
    assert {normalise_title("Robert Boulter"), normalise_title("Homarus gammarus")} <= titles  # test, valid
    assert all(normalise_title(line.strip(" =")) in titles for line in wikitext)
    assert {normalise_title(t) for t in ("Super Bowl 50", "Warsaw", "Doctor Who", "Oxygen", "Rhine")} <= titles


def test_the_evaluation_articles_in_the_shards_are_left_out():
    files = [data.ensure("wikipedia_2015") / shard for shard in (*HELD_OUT_SHARDS.values(), PLAIN_SHARD)]
    everything = [(title, sentences) for file in files for title, sentences in wikiextractor_to_documents(file.read_text())]
    assert set(HELD_OUT_SHARDS) <= {title for title, _ in everything}  # they are in the raw text
    kept = read_wikipedia(files, exclude=held_out_titles())
    dropped = [sentences for title, sentences in everything if title in HELD_OUT_SHARDS]
    assert len(kept) == sum(1 for _, sentences in everything if sentences) - len(dropped)
    kept_sentences = {s for document in kept for s in document}
    assert not any(s in kept_sentences for document in dropped for s in document[:20])
    # The registry corpus applies it by itself: no held-out article's text in what pre-training reads.
    read = load_documents([f"wikipedia_2015/{shard}" for shard in HELD_OUT_SHARDS.values()])
    assert read and not {s for document in read for s in document} & {s for document in dropped for s in document[:20]}


def test_a_shard_that_is_not_wikiextractor_output_is_refused(tmp_path):
    bad = tmp_path / "wiki_00"
    bad.write_text("just some text\nwithout doc tags\n")
    with pytest.raises(ValueError, match="wiki_00 holds no <doc"):
        read_wikipedia([bad])


def test_a_folder_of_a_corpus_is_its_files_in_that_folder():
    """``wikipedia_2015/AA``: a quarter of the shards, for a run that needs less than the whole corpus."""
    files = source_files("wikipedia_2015/AA")
    assert len(files) == 25 and all(f.parent.name == "AA" and f.is_file() for f in files)
    assert source_files("wikipedia_2015/AA/") == files and source_files(f"wikipedia_2015/{PLAIN_SHARD}") == [
        files[0]]
    for wrong in ("ZZ", "A"):  # no such folder; a name's beginning is not a folder
        with pytest.raises(ValueError, match=f"wikipedia_2015 has no file or folder '{wrong}'; its files are AA/wiki_02"):
            source_files(f"wikipedia_2015/{wrong}")


def test_the_tokenized_corpus_is_the_teaching_path_as_arrays(tokenizer):
    documents = load_documents(f"wikipedia_2015/{PLAIN_SHARD}")
    nested = tokenize_documents(tokenizer, documents)
    corpus = TokenizedCorpus.tokenize(tokenizer, documents)
    assert corpus.documents() == nested and corpus.ids.dtype == np.uint16  # 30,522 ids fit in 16 bits
    flat = build_pretraining_data(tokenizer, f"wikipedia_2015/{PLAIN_SHARD}", "nsp", 128, seed=3)
    assert len(flat) > 1000
    pairs = create_sentence_pairs(nested, 128, rng=random.Random(3))
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    assert [e["input_ids"] for e in flat.examples] == [[cls, *a, sep, *b, sep] for a, b, _ in pairs]
    assert [e["next_sentence_label"] for e in flat.examples] == [label for *_, label in pairs]
    packed = build_pretraining_data(tokenizer, f"wikipedia_2015/{PLAIN_SHARD}", "none", 64)
    assert [e["input_ids"] for e in packed.examples] == [[cls, *s, sep] for s in pack_full_sentences(nested, 64, sep)]
    for dataset in (flat, packed):  # the unigram plateau counted from the corpus equals counting the examples
        counts = np.bincount([i for e in dataset.examples for i in e["input_ids"]], minlength=tokenizer.vocab_size)
        assert np.array_equal(dataset.examples.token_counts(tokenizer.vocab_size), counts)
        # ... and the lengths read from the spans' ends equal the made examples' (what group_by_length reads)
        assert dataset.examples.lengths().tolist() == [len(e["input_ids"]) for e in dataset.examples]
        assert example_lengths(dataset) == dataset.examples.lengths().tolist()
    held_out = [{"labels": [2003, -100, 1996, 9999]}]
    assert unigram_loss(flat.examples, held_out, tokenizer.vocab_size) == pytest.approx(
        unigram_loss(list(flat.examples), held_out, tokenizer.vocab_size))


def test_a_tokenized_corpus_is_cached_then_memory_mapped(tokenizer, monkeypatch):
    source = f"wikipedia_2015/{PLAIN_SHARD}"
    first = tokenize_corpus(tokenizer, source)
    [folder] = [p for p in tokenized_module.cache_folder().iterdir() if not p.name.startswith(".")]
    monkeypatch.setattr("minibert.pretraining.tokenized.load_documents",
                        lambda *a, **k: pytest.fail("a cached corpus is read again"))
    again = tokenize_corpus(tokenizer, source)
    assert isinstance(again.ids, np.memmap) and np.array_equal(again.ids, first.ids)
    assert np.array_equal(again.sentence_starts, first.sentence_starts)
    # A damaged cache is made again, not trusted.
    np.save(folder / "sentence_starts.npy", first.sentence_starts[:-5])
    monkeypatch.undo()
    rebuilt = tokenize_corpus(tokenizer, source)
    assert np.array_equal(rebuilt.sentence_starts, first.sentence_starts)
    assert [p for p in tokenized_module.cache_folder().iterdir()] == [folder]  # replaced, nothing left beside it


def test_an_unwritable_cache_only_costs_time(tokenizer, monkeypatch, tmp_path):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(tokenized_module, "cache_folder", lambda: tmp_path / "cache")
    monkeypatch.setattr(TokenizedCorpus, "save", refuse)
    corpus = tokenize_corpus(tokenizer, f"wikipedia_2015/{PLAIN_SHARD}")
    assert corpus.num_documents > 10
