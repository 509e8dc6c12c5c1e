"""minibert.pretraining on real text: corpus loading from the data mirror, the sentence splitter,
NSP / SOP pairs and full-sentence packing checked against the documents they came from, masking
statistics on large samples, static and dynamic masking, and an MLM loss that only masked positions feed."""
from __future__ import annotations

import itertools
import math
import random
import sys
import time
import types
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from offline import fresh_data_fixture, mirror_with

from minibert import BertConfig, BertForMaskedLM, BertForPreTraining
from minibert.pretraining import (
    HubDataset,
    MLMMasking,
    PretrainingDataset,
    WikiTextAsStored,
    build_pretraining_data,
    create_sentence_pairs,
    fill_mask,
    load_documents,
    mask_statically,
    next_sentence_accuracy,
    pack_full_sentences,
    read_text,
    sentence_order_pairs,
    split_sentences,
    tokenize_documents,
)
from minibert.pretraining.corpus import squad_to_documents
from minibert.recipes.pretrain import PretrainSettings

WIKI_VALID = "wikitext2_raw/wiki.valid.raw"


@pytest.fixture(scope="module")
def mirror() -> Path:
    return mirror_with("wikitext2_raw/wiki.valid.raw")


data_home = fresh_data_fixture()  # loaders copy from the mirror into a fresh folder, never the checkout's data/


@pytest.fixture(scope="module")
def wiki_docs(tokenizer, mirror) -> list[list[list[int]]]:
    return tokenize_documents(tokenizer, load_documents(WIKI_VALID))


@pytest.fixture(scope="module")
def tiny_config(tokenizer) -> BertConfig:
    return BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)


def within(count: int, n: int, p: float, sigmas: float = 5) -> bool:
    """count is a plausible draw of Binomial(n, p): within 5 standard deviations (+1 for p near 0 or 1)."""
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p)) + 1


# ---- sentences and documents ------------------------------------------------------------------

@pytest.mark.parametrize("text, sentences", [
    ("Mr. Smith went to Washington. He arrived at 5 p.m. on Monday.",
     ["Mr. Smith went to Washington.", "He arrived at 5 p.m. on Monday."]),
    ('Dr. Watson, e.g. the narrator, agreed. "Indeed!" said he. Was it Mrs. Hudson? No.',
     ["Dr. Watson, e.g. the narrator, agreed.", '"Indeed!" said he.', "Was it Mrs. Hudson?", "No."]),
    ("The U.S. Army left in 1945. In 1946 it came back (briefly.) Then J. R. R. Tolkien wrote.",
     ["The U.S. Army left in 1945.", "In 1946 it came back (briefly.)", "Then J. R. R. Tolkien wrote."]),
    ("FEDERALIST No. 1 General Introduction. See Fig. 3 and vol. 2, i.e. the end.",
     ["FEDERALIST No. 1 General Introduction.", "See Fig. 3 and vol. 2, i.e. the end."]),
    ("It is closely related to the American lobster , H. americanus . It may grow to 60 cm .",  # WikiText spacing
     ["It is closely related to the American lobster , H. americanus .", "It may grow to 60 cm ."]),
    ("“Who is it?” she asked. ‘Me,’ said he. Wait... Then silence!",
     ["“Who is it?” she asked.", "‘Me,’ said he.", "Wait...", "Then silence!"]),
])
def test_sentence_splitter_keeps_abbreviations_whole(text, sentences):
    assert split_sentences(text) == sentences


def test_wikitext_articles_are_documents(mirror):
    documents = load_documents(WIKI_VALID)
    assert len(documents) == 60  # the manifest's article count
    assert documents[0][:2] == [
        "Homarus gammarus , known as the European lobster or common lobster , is a species of clawed lobster "
        "from the eastern Atlantic Ocean , Mediterranean Sea and parts of the Black Sea .",
        "It is closely related to the American lobster , H. americanus ."]
    sentences = [s for doc in documents for s in doc]
    assert not [s for s in sentences if s.startswith("=") or "@-@" in s or "@,@" in s or "@.@" in s]
    assert "0.7–2.2 kg" in " ".join(documents[0]).replace(" – ", "–")  # "0 @.@ 7" -> "0.7"
    # the test split has two formula lines that look like titles; only real articles start documents
    assert len(load_documents("wikitext2_raw/wiki.test.raw")) == 60
    # As stored, the same articles keep WikiText's marks, and only them differ.
    stored = load_documents(WikiTextAsStored(WIKI_VALID))
    assert len(stored) == 60 and "0 @.@ 7" in " ".join(stored[0])
    text = lambda doc: "".join("".join(doc).split())  # the characters, whatever the sentence splits
    undone = [" ".join(doc).replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".") for doc in stored]
    assert [text(doc) for doc in undone] == [text(doc) for doc in documents]
    with pytest.raises(ValueError, match="reads a WikiText corpus"):
        load_documents(WikiTextAsStored("gutenberg"))


def test_squad_paragraphs_are_wikipedia_documents(mirror, tmp_path):
    documents = load_documents("squad_v1.1")
    assert len(documents) == 48  # the manifest's article count: one document per article
    assert documents[0][0].startswith("Super Bowl 50 was an American football game")
    text = " ".join(s for doc in documents for s in doc)
    assert "?" not in documents[0][0] and len(text.split()) > 250_000  # the contexts (about 254k words), no questions
    broken = tmp_path / "dev-v1.1.json"
    broken.write_text('{"version": "1.1"}')
    with pytest.raises(ValueError, match=r"dev-v1.1.json is not SQuAD's JSON.*fetch it again"):
        squad_to_documents(broken.read_text(), broken)


def test_gutenberg_header_and_licence_are_stripped(mirror):
    raw = (mirror / "gutenberg_more" / "hamilton_madison_jay-federalist.txt").read_bytes()
    assert b"\r\n" in raw and raw.count(b"Project Gutenberg") > 20  # CRLF, a full PG header and footer
    [document] = load_documents("gutenberg_more/hamilton_madison_jay-federalist.txt")
    text = " ".join(document)
    assert "Gutenberg" not in text and "\r" not in text
    assert document[0] == "Produced by The Consitution Society and Anonymous Volunteers"
    assert text.count("FEDERALIST No.") >= 85  # every essay is in
    [tom] = load_documents("gutenberg_more/twain-tom_sawyer.txt")  # a BOM, then the bare START marker
    assert tom[0] == "THE ADVENTURES OF TOM SAWYER" and "END OF THE PROJECT" not in " ".join(tom)


def test_latin1_and_utf8_files_decode(mirror):
    latin1 = mirror / "state_union" / "1954-Eisenhower.txt"
    with pytest.raises(UnicodeDecodeError):
        latin1.read_text(encoding="utf-8")
    assert read_text(latin1) == latin1.read_bytes().decode("latin-1")
    biden = read_text(mirror / "inaugural" / "2021-Biden.txt")  # UTF-8 curly quotes stay as they are
    assert "—" in biden and "\ufffd" not in biden
    documents = load_documents("state_union")  # the whole corpus: one file, one document
    assert len(documents) == 65 and documents[0][0].startswith("PRESIDENT HARRY S. TRUMAN'S ADDRESS")


def test_a_folder_of_text_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("First line\nwraps here. Second sentence.\n\nNew paragraph", encoding="utf-8")
    (tmp_path / "sub" / "b.txt").write_bytes("Café crème. Très bien.".encode("latin-1"))
    (tmp_path / "notes.md").write_text("Not a document.")
    assert load_documents(tmp_path) == [["First line wraps here.", "Second sentence.", "New paragraph"],
                                        ["Café crème.", "Très bien."]]
    assert load_documents([str(tmp_path / "a.txt"), tmp_path / "sub" / "b.txt"])[1] == ["Café crème.", "Très bien."]


def test_a_hub_dataset_one_row_per_document(monkeypatch):
    calls = []

    def load_dataset(path, name=None, split=None):
        calls.append((path, name, split))
        return {"body": ["One. Two.\n\nThree.", "Four! Five?"]}

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    source = HubDataset("someone/corpus", "en", split="train[:1%]", column="body")
    assert load_documents(source) == [["One.", "Two.", "Three."], ["Four!", "Five?"]]
    assert calls == [("someone/corpus", "en", "train[:1%]")]


def test_source_errors_say_what_is_wrong(tmp_path):
    with pytest.raises(ValueError, match="'wikitext3' is neither a text corpus .*wikitext2_raw.* nor an existing"):
        load_documents("wikitext3")
    with pytest.raises(ValueError, match="'sst2' is neither a text corpus"):  # in the registry, but not a corpus
        load_documents("sst2")
    with pytest.raises(ValueError, match="wikitext2_raw has no file or folder 'wiki.dev.raw'; its files are wiki.valid.raw"):
        load_documents("wikitext2_raw/wiki.dev.raw")
    with pytest.raises(ValueError, match=f"the folder {tmp_path} holds no .txt files"):
        load_documents(tmp_path)
    (tmp_path / "empty.txt").write_text(" \n\n")
    with pytest.raises(ValueError, match="holds no text"):
        load_documents(tmp_path)


def test_documents_too_short_for_pairs_are_an_error():
    with pytest.raises(ValueError, match="NSP needs at least two documents"):
        create_sentence_pairs([[[5, 6], [7, 8]]], 32)
    with pytest.raises(ValueError, match="every document is shorter than two sentences"):
        create_sentence_pairs([[[5, 6, 7]], [[8, 9]]], 32)
    with pytest.raises(ValueError, match="objective must be one of"):
        build_pretraining_data(None, [], objective="mlm+nsp")


# ---- NSP, SOP, full sentences ------------------------------------------------------------------

def as_text(ids) -> str:
    """Token ids as a str, one character each, so that str.find locates a segment in a document."""
    return "".join(map(chr, ids))


class Corpus:
    """The tokenized documents as strings, with the offsets where their sentences start."""

    def __init__(self, documents):
        self.texts = [as_text([t for s in doc for t in s]) for doc in documents]
        self.starts = [set(itertools.accumulate(map(len, doc), initial=0)) for doc in documents]

    def find(self, segment) -> list[tuple[int, int]]:
        """(document, offset) of every place the segment occurs."""
        needle, places = as_text(segment), []
        for d, text in enumerate(self.texts):
            offset = text.find(needle)
            while offset >= 0:
                places.append((d, offset))
                offset = text.find(needle, offset + 1)
        return places

    def follows(self, first, second) -> bool:
        """second comes after first in one document, with a sentence boundary between them and only
        truncated tokens (fewer than a sequence) in the gap."""
        for d, a in self.find(first):
            b = self.texts[d].find(as_text(second), a + len(first))
            if b >= 0 and b - (a + len(first)) < 128 and any(a + len(first) <= s <= b for s in self.starts[d]):
                return True
        return False


def test_nsp_pairs_are_next_or_from_another_document(wiki_docs):
    pairs = create_sentence_pairs(wiki_docs, 128, rng=random.Random(1))
    corpus = Corpus(wiki_docs)
    assert len(pairs) > 2000 and within(sum(label == 0 for *_, label in pairs), len(pairs), 0.5)
    assert all(len(a) >= 1 and len(b) >= 1 and len(a) + len(b) + 3 <= 128 for a, b, _ in pairs)
    for a, b, label in pairs:
        [doc_a] = {d for d, _ in corpus.find(a)}
        if label == 0:  # IsNext: B is the text that follows A
            assert corpus.follows(a, b)
        else:  # NotNext: B is from a random place in another document
            assert any(d != doc_a for d, _ in corpus.find(b))
            if len(b) >= 10:
                assert doc_a not in [d for d, _ in corpus.find(b)]


def test_short_seq_prob_makes_some_inputs_short(wiki_docs):
    def short(probability):
        pairs = create_sentence_pairs(wiki_docs, 128, short_seq_prob=probability, rng=random.Random(0))
        return sum(len(a) + len(b) < 100 for a, b, _ in pairs) / len(pairs)

    assert short(0.0) < 0.03 and 0.05 < short(0.1) < 0.12 and short(0.5) > 0.25


def test_sop_negatives_are_swapped_positives(wiki_docs):
    pairs = sentence_order_pairs(wiki_docs, 64, rng=random.Random(2))
    assert pairs == create_sentence_pairs(wiki_docs, 64, objective="sop", rng=random.Random(2))
    corpus = Corpus(wiki_docs)
    assert within(sum(label for *_, label in pairs), len(pairs), 0.5)
    for a, b, label in pairs:
        assert len(a) + len(b) + 3 <= 64
        assert corpus.follows(b, a) if label else corpus.follows(a, b)  # both halves from one document


def test_nsp_examples_have_the_bert_layout(tokenizer, mirror):
    dataset = build_pretraining_data(tokenizer, ["gutenberg/carroll-alice.txt", "gutenberg/blake-poems.txt"],
                                     max_seq_len=64)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    for example in dataset.examples:
        ids, types_ = example["input_ids"], example["token_type_ids"]
        first_sep = ids.index(sep)
        assert len(ids) == len(types_) <= 64 and ids[0] == cls and ids[-1] == sep and ids.count(sep) == 2
        assert types_ == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
        assert example["next_sentence_label"] in (0, 1) and "labels" not in example
    batch = dataset.collate(dataset.examples[:8])
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels", "next_sentence_label"}
    assert batch["next_sentence_label"].shape == (8,) and batch["input_ids"].dtype == torch.long


def test_next_sentence_accuracy_reads_unmasked_pairs_with_the_nsp_layer(tokenizer, tiny_config, mirror):
    pairs = build_pretraining_data(tokenizer, ["inaugural/1789-Washington.txt", "inaugural/1861-Lincoln.txt"],
                                   max_seq_len=64).examples
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config).eval()
    with torch.no_grad():  # the model's own forward, one pair at a time, no padding
        guesses = [model(torch.tensor([e["input_ids"]]), token_type_ids=torch.tensor([e["token_type_ids"]]))
                   .seq_relationship_logits.argmax().item() for e in pairs]
    expected = sum(g == e["next_sentence_label"] for g, e in zip(guesses, pairs)) / len(pairs)
    assert next_sentence_accuracy(model, pairs, tokenizer.pad_token_id, batch_size=7) == pytest.approx(expected)
    with torch.no_grad():  # a model told the answers is right every time
        model.cls.seq_relationship.weight.zero_()
        model.cls.seq_relationship.bias.copy_(torch.tensor([1.0, 0.0]))
    assert next_sentence_accuracy(model, [e for e in pairs if e["next_sentence_label"] == 0]) == 1.0


def test_fill_mask_gives_each_blank_the_models_likeliest_tokens(tokenizer, tiny_config):
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config).eval()
    text = "the [MASK] went to [MASK] store ."
    guesses = fill_mask(model, tokenizer, text, k=3)
    enc = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        probabilities = model(**enc).prediction_logits[0].softmax(-1)                     # (T, V)
    blanks = (enc["input_ids"][0] == tokenizer.mask_token_id).nonzero()[:, 0].tolist()
    assert len(guesses) == 2 and all(len(g) == 3 for g in guesses)
    for blank, found in zip(blanks, guesses):
        top = probabilities[blank].topk(3)
        assert [t for t, _ in found] == tokenizer.convert_ids_to_tokens(top.indices.tolist())
        assert [p for _, p in found] == pytest.approx(top.values.tolist())
    with pytest.raises(ValueError, match="has no \\[MASK\\]"):
        fill_mask(model, tokenizer, "no blank here")


def test_full_sentences_fill_the_sequence_and_lose_no_text(wiki_docs, tokenizer):
    sep = tokenizer.sep_token_id
    sequences = pack_full_sentences(wiki_docs, 128, sep)
    assert all(len(s) <= 126 for s in sequences)  # room for [CLS] and [SEP]
    assert [t for s in sequences for t in s if t != sep] == [t for doc in wiki_docs for s in doc for t in s]
    crossings = sum(s.count(sep) for s in sequences)
    assert 0 < crossings < len(wiki_docs)  # an extra [SEP] where a sequence runs into the next document
    # full: a sequence ends only where the next sentence (and the [SEP] before a new document) would not fit
    sentence_at, document_starts, offset = {}, set(), 0
    for doc in wiki_docs:
        document_starts.add(offset)
        for sentence in doc:
            sentence_at[offset] = len(sentence)
            offset += len(sentence)
    offset = 0
    for sequence in sequences[:-1]:
        offset += len(sequence) - sequence.count(sep)
        if offset in sentence_at:
            assert len(sequence) + min(sentence_at[offset], 126) + (offset in document_starts) > 126
        else:  # a piece of a sentence longer than a whole sequence
            assert len(sequence) == 126
    assert sum(map(len, sequences)) / len(sequences) > 0.8 * 126
    # a sentence longer than a sequence is cut in pieces; a new document after text gets a [SEP]
    packed = pack_full_sentences([[[1, 2, 3, 4, 5, 6, 7]], [[8]], [[9, 10]]], 5, sep)
    assert packed == [[1, 2, 3], [4, 5, 6], [7, sep, 8], [9, 10]]


def test_no_nsp_batches_feed_a_masked_lm(tokenizer, tiny_config, mirror):
    dataset = build_pretraining_data(tokenizer, "gutenberg/blake-poems.txt", objective="none", max_seq_len=128)
    assert all(len(e["input_ids"]) <= 128 and set(e["token_type_ids"]) == {0} for e in dataset.examples)
    batch = dataset.collate(dataset.examples[:4])
    assert "next_sentence_label" not in batch
    assert torch.isfinite(BertForMaskedLM(tiny_config)(**batch).loss)


# ---- masking ---------------------------------------------------------------------------------

def sample_batch(tokenizer, masking, rows=700, length=400, seed=0):
    """(rows, length) ids: [CLS] A [SEP] B [SEP] [PAD]...; about 200k ordinary tokens."""
    g = torch.Generator().manual_seed(seed)
    ids = masking.random_ids[torch.randint(len(masking.random_ids), (rows, length), generator=g)]
    ids[:, 0] = tokenizer.cls_token_id
    ids[:, length // 2] = tokenizer.sep_token_id
    ends = torch.randint(length // 2 + 2, length + 1, (rows,), generator=g)
    ids[torch.arange(rows), ends - 1] = tokenizer.sep_token_id
    ids[torch.arange(length) >= ends[:, None]] = tokenizer.pad_token_id
    return ids


@pytest.mark.parametrize("p, shares", [
    (0.15, (0.8, 0.1, 0.1)),  # BERT
    (0.15, (1.0, 0.0, 0.0)),  # Table 8 rows
    (0.15, (0.8, 0.0, 0.2)),
    (0.15, (0.0, 0.0, 1.0)),
    (0.15, (0.8, 0.2, 0.0)),
    (0.30, (0.8, 0.1, 0.1)),  # higher masking rates
    (0.45, (0.8, 0.1, 0.1)),
])
def test_masking_statistics(tokenizer, p, shares):
    masking = MLMMasking(tokenizer, p, shares)
    ids = sample_batch(tokenizer, masking)
    corrupted, labels = masking(ids, torch.Generator().manual_seed(1))
    chosen = labels != -100
    special = torch.isin(ids, torch.tensor(tokenizer.all_special_ids))
    assert not (chosen & special).any()  # [CLS], [SEP], [PAD] are never chosen
    assert torch.equal(labels[chosen], ids[chosen])  # the label is the original token
    assert torch.equal(corrupted[~chosen], ids[~chosen])  # and nothing else is touched
    n_choosable, n_chosen = int((~special).sum()), int(chosen.sum())
    assert n_choosable > 200_000 and within(n_chosen, n_choosable, p)

    share_mask, share_same, share_rnd = shares
    chance_same = 1 / len(masking.random_ids)  # a random token can be the original by chance
    is_mask = corrupted[chosen] == tokenizer.mask_token_id
    is_same = corrupted[chosen] == ids[chosen]
    is_rnd = ~is_mask & ~is_same
    assert within(int(is_mask.sum()), n_chosen, share_mask)
    assert within(int(is_same.sum()), n_chosen, share_same + share_rnd * chance_same)
    assert within(int(is_rnd.sum()), n_chosen, share_rnd * (1 - chance_same))
    replaced = corrupted[chosen][is_rnd]
    assert not torch.isin(replaced, torch.tensor(tokenizer.all_special_ids)).any()  # RND is never special
    assert all(not t.startswith("[") for t in tokenizer.convert_ids_to_tokens(replaced.unique()))  # nor [unused]


def test_every_sequence_gets_at_least_one_masked_token(tokenizer):
    masking = MLMMasking(tokenizer)
    ids = torch.tensor([[tokenizer.cls_token_id, 2023, 2003, tokenizer.sep_token_id, 0, 0]] * 2000)
    for whole_word in (False, True):
        masking.whole_word = whole_word
        _, labels = masking(ids, torch.Generator().manual_seed(0))
        assert ((labels != -100).sum(dim=1) >= 1).all()
        assert (labels[:, [0, 3, 4, 5]] == -100).all()
        # left to the coins, 0.85² = 72% of these rows would have nothing to predict; the stand-in is a fair pick
        assert within(int((labels[:, 1] != -100).sum()), 2000, 0.15 + 0.85 ** 2 / 2)


def test_whole_word_masking_masks_all_pieces_of_a_word(tokenizer, mirror):
    sentences = load_documents("gutenberg/chesterton-brown.txt")[0][:3000]
    encoding = tokenizer(sentences, truncation=True, max_length=64, padding=True, return_tensors="pt")
    ids = encoding["input_ids"]
    words = [encoding.word_ids(i) for i in range(len(sentences))]
    multi_piece = sum(sum(1 for w in row if w is not None) - len(set(row) - {None}) for row in words)
    assert multi_piece > 1000  # "##" pieces: plenty of words come in several pieces

    def split_words(labels):
        """How many words are partly chosen, and how many words are chosen (whole)."""
        partly = chosen_words = 0
        for row, word_ids in zip(labels != -100, words):
            groups = {}
            for position, word in enumerate(word_ids):
                if word is not None:
                    groups.setdefault(word, []).append(bool(row[position]))
            partly += sum(any(g) and not all(g) for g in groups.values())
            chosen_words += sum(all(g) for g in groups.values())
        return partly, chosen_words, sum(len(set(w) - {None}) for w in words)

    _, labels = MLMMasking(tokenizer, whole_word=True)(ids, torch.Generator().manual_seed(0))
    partly, chosen_words, n_words = split_words(labels)
    assert partly == 0
    assert within(chosen_words, n_words, 0.15, 6)  # 6σ: the at-least-one rule adds a few in short rows
    _, labels = MLMMasking(tokenizer)(ids, torch.Generator().manual_seed(0))
    assert split_words(labels)[0] > 100  # token-level masking does split words


@pytest.mark.parametrize("kwargs, message", [
    (dict(mask_same_rnd=(0.8, 0.1, 0.2)), r"mask_same_rnd=\(0.8, 0.1, 0.2\) must be three shares .* sum to 1"),
    (dict(mask_same_rnd=(1.1, 0.0, -0.1)), "must be three shares >= 0"),
    (dict(mask_same_rnd=(0.9, 0.1)), "must be three shares"),
    (dict(mlm_probability=0.0), r"mlm_probability must be in \(0, 1\], got 0.0"),
    (dict(mlm_probability=1.5), r"mlm_probability must be in \(0, 1\]"),
])
def test_bad_masking_settings_name_the_problem(tokenizer, kwargs, message):
    with pytest.raises(ValueError, match=message):
        MLMMasking(tokenizer, **kwargs)


@pytest.fixture(scope="module")
def small_examples(tokenizer, mirror):
    return build_pretraining_data(tokenizer, ["inaugural/1789-Washington.txt", "inaugural/1861-Lincoln.txt"],
                                  max_seq_len=64).examples


def test_static_masks_repeat_every_epoch_dynamic_ones_do_not(tokenizer, small_examples):
    masking = MLMMasking(tokenizer)
    static = PretrainingDataset(mask_statically(small_examples, masking, seed=3), masking)
    epoch1, epoch2 = (static.collate([static[i] for i in range(16)]) for _ in range(2))
    assert all(torch.equal(epoch1[k], epoch2[k]) for k in epoch1)
    assert (epoch1["input_ids"] == tokenizer.mask_token_id).any()

    dynamic = PretrainingDataset(small_examples, masking)
    epoch1, epoch2 = (dynamic.collate([dynamic[i] for i in range(16)]) for _ in range(2))
    assert not torch.equal(epoch1["labels"], epoch2["labels"])
    assert torch.equal(epoch1["token_type_ids"], epoch2["token_type_ids"])


def test_static_copies_hold_the_same_text_under_different_masks(tokenizer, small_examples):
    masking = MLMMasking(tokenizer)
    copies = mask_statically(small_examples, masking, seed=3, dupe_factor=3)
    n = len(small_examples)
    assert len(copies) == 3 * n
    first, second = copies[0], copies[n]  # the same sequence, masked twice
    restore = lambda e: [y if y != -100 else x for x, y in zip(e["input_ids"], e["labels"])]
    assert restore(first) == restore(second) == small_examples[0]["input_ids"]
    assert any(a["labels"] != b["labels"] for a, b in zip(copies[:n], copies[n:2 * n]))
    assert mask_statically(small_examples, masking, seed=3)[:5] == copies[:5]  # copy 1 is the one-copy masking
    with pytest.raises(ValueError, match="dupe_factor"):
        mask_statically(small_examples, masking, dupe_factor=0)


def test_dynamic_masking_replays_from_the_torch_rng_state_alone(tokenizer, small_examples):
    dataset = PretrainingDataset(small_examples, MLMMasking(tokenizer, whole_word=True))
    torch.manual_seed(0)
    state = torch.get_rng_state()
    python_state = random.getstate()
    first = dataset.collate(small_examples[:16])
    assert random.getstate() == python_state  # collate draws from torch's RNG and no other
    random.seed(12345)  # other generators do not matter
    torch.set_rng_state(state)
    again = dataset.collate(small_examples[:16])
    assert all(torch.equal(first[k], again[k]) for k in first)


def test_same_seed_same_data(tokenizer, mirror):
    def build(seed, objective):
        return build_pretraining_data(tokenizer, ["inaugural/1789-Washington.txt", "inaugural/1793-Washington.txt",
                                                  "inaugural/1797-Adams.txt"], objective=objective,
                                      max_seq_len=48, static_masking=True, dupe_factor=2, seed=seed).examples

    for objective in ("nsp", "sop", "none"):
        assert build(0, objective) == build(0, objective)
        assert build(0, objective) != build(1, objective)
    copies = build(0, "none")  # dupe_factor: the same text, masked differently in each copy
    half = len(copies) // 2
    assert [e["token_type_ids"] for e in copies[:half]] == [e["token_type_ids"] for e in copies[half:]]
    assert [e["labels"] for e in copies[:half]] != [e["labels"] for e in copies[half:]]


def test_collate_pads_to_a_fixed_length(tokenizer, small_examples):
    dataset = PretrainingDataset(small_examples, MLMMasking(tokenizer), pad_to=80)
    batch = dataset.collate(small_examples[:4])
    lengths = [len(e["input_ids"]) for e in small_examples[:4]]
    assert batch["input_ids"].shape == (4, 80)
    assert batch["attention_mask"].sum(dim=1).tolist() == lengths
    assert (batch["input_ids"][batch["attention_mask"] == 0] == tokenizer.pad_token_id).all()
    assert (batch["labels"][batch["attention_mask"] == 0] == -100).all()
    with pytest.raises(ValueError, match="pad_to=8 is shorter than an example"):
        PretrainingDataset(small_examples, MLMMasking(tokenizer), pad_to=8).collate(small_examples[:4])


def test_random_positions_spread_short_sequences_over_the_position_table(tokenizer, small_examples):
    """Every position of a later, longer stage gets trained by a stage on short sequences."""
    dataset = PretrainingDataset(small_examples, MLMMasking(tokenizer), random_positions=128)
    torch.manual_seed(0)
    seen = set()
    for start in range(0, 64 * 8, 8):
        batch = dataset.collate([small_examples[i % len(small_examples)] for i in range(start, start + 8)])
        positions = batch["position_ids"]
        assert positions.shape == batch["input_ids"].shape
        assert (positions.diff(dim=1) == 1).all() and positions.min() >= 0 and positions.max() < 128  # consecutive
        seen |= set(positions.flatten().tolist())
    assert seen == set(range(128))
    assert "position_ids" not in PretrainingDataset(small_examples, MLMMasking(tokenizer)).collate(small_examples[:4])
    with pytest.raises(ValueError, match="random_positions=8 is fewer than"):
        PretrainingDataset(small_examples, MLMMasking(tokenizer), random_positions=8).collate(small_examples[:4])
    with pytest.raises(ValueError, match="random_positions=16"):
        PretrainSettings(max_seq_len=32, random_positions=16)


# ---- the loss ------------------------------------------------------------------------------

@pytest.mark.parametrize("model_class, objective", [(BertForPreTraining, "nsp"), (BertForMaskedLM, "none")])
def test_mlm_loss_counts_only_masked_positions(tokenizer, tiny_config, mirror, model_class, objective):
    """Tutorials that put the original ids as labels everywhere train the model to copy its input.

    Changing the model's predictions at unmasked positions must leave the loss exactly as it is,
    changing them at masked positions must not; a loss over all positions fails both.
    """
    dataset = build_pretraining_data(tokenizer, ["inaugural/1789-Washington.txt", "inaugural/1861-Lincoln.txt"],
                                     objective, max_seq_len=64)
    batch = dataset.collate(dataset.examples[:8])
    masked = batch["labels"] != -100                                  # (B, T)
    assert 0 < masked.sum() < 0.3 * batch["attention_mask"].sum()
    torch.manual_seed(0)
    model = model_class(tiny_config).eval()  # evaluation: the MLM head scores every position

    def loss_with_noise_at(where):
        def hook(module, inputs, logits):                              # (B, T, V)
            return logits + 10 * torch.randn_like(logits) * where[..., None]
        handle = model.cls.predictions.register_forward_hook(hook)
        try:
            with torch.no_grad():
                return model(**batch).loss
        finally:
            handle.remove()

    with torch.no_grad():
        out = model(**batch)
    mlm_logits = out.prediction_logits if objective == "nsp" else out.logits
    nsp = F.cross_entropy(out.seq_relationship_logits, batch["next_sentence_label"]) if objective == "nsp" else 0
    assert torch.allclose(out.loss, F.cross_entropy(mlm_logits[masked], batch["labels"][masked]) + nsp)
    everywhere = torch.where(masked, batch["labels"], batch["input_ids"])  # the tutorials' labels
    assert not torch.allclose(out.loss, F.cross_entropy(mlm_logits.flatten(0, 1), everywhere.flatten()) + nsp)
    assert torch.allclose(loss_with_noise_at(~masked), out.loss)  # unmasked predictions do not count...
    assert not torch.allclose(loss_with_noise_at(masked), out.loss)  # ...masked ones do
    with torch.no_grad():  # training scores only the masked positions: the same loss (no dropout here)
        assert torch.allclose(model.train()(**batch).loss, out.loss, atol=1e-5)


def test_a_whole_corpus_builds_in_seconds(tokenizer, mirror):
    start = time.perf_counter()
    dataset = build_pretraining_data(tokenizer, WIKI_VALID, max_seq_len=128, static_masking=True)
    assert time.perf_counter() - start < 15  # about 2 s on one core
    assert len(dataset) > 2000 and all("labels" in e for e in dataset.examples[:10])


def test_fill_in_the_blank_masks_every_scored_token_and_the_same_ones_each_time(tokenizer, mirror):
    from minibert.pretraining import fill_in_the_blank_data
    a = fill_in_the_blank_data(tokenizer, [str(mirror / WIKI_VALID)], max_seq_len=64)
    b = fill_in_the_blank_data(tokenizer, [str(mirror / WIKI_VALID)], max_seq_len=64)
    scored = [(i, y) for e in a.examples for i, y in zip(e["input_ids"], e["labels"]) if y != -100]
    assert all(i == tokenizer.mask_token_id for i, _ in scored), "a scored token left in place is a free answer"
    assert 0.13 < len(scored) / sum(len(e["input_ids"]) for e in a.examples) < 0.16
    assert [e["labels"] for e in a.examples] == [e["labels"] for e in b.examples]
    batch = a.collate(a.examples[:4])
    assert torch.equal(batch["labels"], a.collate(a.examples[:4])["labels"])  # static: collate draws nothing


def test_unigram_loss_is_the_cross_entropy_of_token_frequencies():
    from minibert.pretraining import unigram_loss
    train = [{"input_ids": [1, 1, 1, 2]}]                       # p(1) = 3/4, p(2) = 1/4
    held_out = [{"labels": [1, -100, 2, 2]}]
    assert unigram_loss(train, held_out, vocab_size=3) == pytest.approx(-(math.log(0.75) + 2 * math.log(0.25)) / 3)
    with pytest.raises(ValueError, match="no masked positions"):
        unigram_loss(train, [{"labels": [-100]}], vocab_size=3)
