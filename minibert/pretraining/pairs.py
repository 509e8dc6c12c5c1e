"""Step 3 of pre-training data: examples of at most ``max_seq_len`` tokens, one kind per objective.

- NSP, next sentence prediction (BERT, Devlin et al. 2018): ``[CLS] A [SEP] B [SEP]`` where B
  follows A (IsNext, label 0) or comes from another document (NotNext, 1) -- `create_sentence_pairs`;
- SOP, sentence-order prediction (ALBERT, Lan et al. 2019): B follows A (0) or the two are
  swapped (1) -- `sentence_order_pairs`;
- none (RoBERTa's FULL-SENTENCES, Liu et al. 2019): ``[CLS] s1 s2 ... [SEP]`` packed with whole
  sentences across documents, no sentence-level label -- `pack_full_sentences`.

Every segment is a run of consecutive text, so an example is a few offsets into a `TokenizedCorpus`
(`pair_spans`, `packed_spans`): all of Wikipedia's examples fit in a few megabytes. The functions
that take nested lists (documents -> sentences -> ids) run the same code and return the tokens.
NSP and SOP cut the documents into the same chunks (`_pairs_from_chunks`); they differ only in the
negative pair.
"""
from __future__ import annotations

import random
from typing import Callable

import numpy as np

from .tokenized import TokenizedCorpus

OBJECTIVES = ("nsp", "sop", "none")

Pair = tuple[list[int], list[int], int]  # (tokens A, tokens B, label)
Span = list[int]  # [start, end) in the corpus's ids; a list, so that truncation can move its ends
# (document, A, B, target length) -> (A, B) of a label-1 pair
Negative = Callable[[int, Span, Span, int], tuple[Span, Span]]


def create_sentence_pairs(documents: list[list[list[int]]], max_seq_len: int = 128, *,
                          objective: str = "nsp", short_seq_prob: float = 0.1,
                          rng: random.Random | None = None) -> list[Pair]:
    """NSP's (A, B, label) segment pairs from tokenized documents, as ``create_pretraining_data.py`` makes them.

    A and B are consecutive text of one chunk (`_pairs_from_chunks`); by a fair coin, B is kept
    (IsNext, 0) or replaced by text from a random start in another document (NotNext, 1), and the
    chunk's unused sentences are put back for the next chunk. NotNext draws from the *other*
    documents (Google's script makes ten tries that may all land on the same one).
    ``objective="sop"`` makes ALBERT's pairs instead: `sentence_order_pairs`.
    """
    corpus = TokenizedCorpus.from_documents(documents)
    spans = pair_spans(corpus, max_seq_len, objective=objective, short_seq_prob=short_seq_prob, rng=rng)
    return [(corpus.tokens(a0, a1), corpus.tokens(b0, b1), int(label)) for a0, a1, b0, b1, label in spans]


def sentence_order_pairs(documents: list[list[list[int]]], max_seq_len: int = 128, *,
                         short_seq_prob: float = 0.1, rng: random.Random | None = None) -> list[Pair]:
    """SOP's (A, B, label) segment pairs: B follows A (0) or, by a fair coin, A and B are swapped (1).

    ALBERT's answer to NSP being too easy: a NotNext B comes from another document, so its topic
    alone gives it away. A swapped pair has the topic of a right one; only the order of the text,
    its coherence, tells them apart. The chunks are NSP's (`_pairs_from_chunks`); one document is
    enough, since nothing is taken from another.
    """
    return create_sentence_pairs(documents, max_seq_len, objective="sop", short_seq_prob=short_seq_prob, rng=rng)


def pair_spans(corpus: TokenizedCorpus, max_seq_len: int = 128, *, objective: str = "nsp",
               short_seq_prob: float = 0.1, rng: random.Random | None = None) -> np.ndarray:
    """The pairs of `create_sentence_pairs` (``objective="nsp"``) or `sentence_order_pairs` ("sop") as
    offsets: (N, 5) rows of A's start and end, B's start and end in ``corpus.ids``, and the label."""
    if objective not in ("nsp", "sop"):
        raise ValueError(f"objective must be 'nsp' or 'sop' for sentence pairs, got {objective!r}")
    max_num_tokens = _max_num_tokens(max_seq_len)
    rng = rng or random.Random(0)
    starts, documents = corpus.sentence_starts, corpus.document_starts
    if objective == "sop":
        def negative(index: int, a: Span, b: Span, target: int) -> tuple[Span, Span]:
            return b, a
        return _pairs_from_chunks(corpus, max_num_tokens, short_seq_prob, rng, negative, put_back_b=False)

    if corpus.num_documents < 2:
        raise ValueError(f"NSP needs at least two documents (NotNext takes B from another one), got "
                         f"{corpus.num_documents}")

    def not_next(index: int, a: Span, b: Span, target: int) -> tuple[Span, Span]:
        other = rng.randrange(corpus.num_documents - 1)
        other += other >= index
        first, end = int(documents[other]), int(documents[other + 1])
        k = first + rng.randrange(end - first)
        wanted = target - (a[1] - a[0])
        stop = k + 1  # whole sentences from k until B is long enough, or the document ends
        while stop < end and starts[stop] - starts[k] < wanted:
            stop += 1
        return a, [int(starts[k]), int(starts[stop])]

    return _pairs_from_chunks(corpus, max_num_tokens, short_seq_prob, rng, not_next, put_back_b=True)


def _max_num_tokens(max_seq_len: int) -> int:
    """The tokens A and B may hold together: ``max_seq_len`` less ``[CLS] A [SEP] B [SEP]``'s three."""
    if max_seq_len < 5:
        raise ValueError(f"max_seq_len={max_seq_len} leaves no room for two segments and [CLS] [SEP] [SEP]")
    return max_seq_len - 3


def _pairs_from_chunks(corpus: TokenizedCorpus, max_num_tokens: int, short_seq_prob: float,
                       rng: random.Random, negative: Negative, put_back_b: bool) -> np.ndarray:
    """The segment pairs NSP and SOP share; ``negative(index, a, b, target)`` makes a label-1 pair.

    Whole sentences are gathered into a chunk until it reaches the target length (``max_num_tokens``;
    with probability ``short_seq_prob`` a random shorter target, so the model also sees the short
    inputs of fine-tuning). A random number of the chunk's sentences form A, the rest B. Then a fair
    coin keeps the pair (label 0) or makes it a ``negative`` (label 1); with ``put_back_b`` a negative
    did not use B's sentences, and they start the next chunk. Finally the longer segment loses a token
    from its front or back (at random, so the model does not learn where text was cut) until the pair fits.

    Departures from Google's script, so that the labels are exactly a fair coin: a chunk holds at
    least two sentences (there a one-sentence chunk is always NotNext), and a document's last
    sentence left alone is not used as A; the short target is drawn per pair, not per document.
    """
    def draw_target() -> int:
        return rng.randint(2, max_num_tokens) if rng.random() < short_seq_prob else max_num_tokens

    starts, lengths = corpus.sentence_starts, corpus.sentence_lengths()
    pairs = []
    for index in range(corpus.num_documents):
        first, end = int(corpus.document_starts[index]), int(corpus.document_starts[index + 1])
        chunk_start, length, i, target = first, 0, first, draw_target()  # the chunk: sentences chunk_start..i-1
        while i < end:
            length += int(lengths[i])
            i += 1
            chunk = i - chunk_start
            if i < end and (length < target or chunk < 2):
                continue
            if chunk >= 2:
                a_end = chunk_start + rng.randint(1, chunk - 1)
                a, b = [int(starts[chunk_start]), int(starts[a_end])], [int(starts[a_end]), int(starts[i])]
                label = int(rng.random() < 0.5)
                if label:
                    a, b = negative(index, a, b, target)
                    if put_back_b:
                        i = a_end  # the unused sentences start the next chunk
                _truncate_pair(a, b, max_num_tokens, rng)
                pairs.append((*a, *b, label))
            chunk_start, length, target = i, 0, draw_target()
    if not pairs:
        raise ValueError("no sentence pair could be made: every document is shorter than two sentences")
    return np.asarray(pairs, dtype=np.int64)


def _truncate_pair(a: Span, b: Span, max_num_tokens: int, rng: random.Random) -> None:
    """Cut the longer segment's front or back, a token at a time, until the two fit."""
    while (a[1] - a[0]) + (b[1] - b[0]) > max_num_tokens:
        longer = a if a[1] - a[0] > b[1] - b[0] else b
        if rng.random() < 0.5:
            longer[0] += 1
        else:
            longer[1] -= 1


def pack_full_sentences(documents: list[list[list[int]]], max_seq_len: int, sep_token_id: int) -> list[list[int]]:
    """RoBERTa's FULL-SENTENCES inputs: whole sentences packed in order up to ``max_seq_len - 2`` tokens.

    A sequence may cross into the next document, with an extra ``[SEP]`` between the two. A sentence
    longer than a whole sequence is cut into pieces, so no text is lost. No NSP label: RoBERTa found
    that dropping NSP and filling every input matches or beats BERT (Liu et al. 2019, Table 2).
    """
    corpus = TokenizedCorpus.from_documents(documents)
    return [packed_tokens(corpus, start, end, sep_token_id) for start, end in packed_spans(corpus, max_seq_len)]


def packed_spans(corpus: TokenizedCorpus, max_seq_len: int) -> np.ndarray:
    """The sequences of `pack_full_sentences` as (N, 2) rows of [start, end) in ``corpus.ids``; a sequence
    is that run of text with a ``[SEP]`` before every document that starts inside it (`packed_tokens`)."""
    capacity = max_seq_len - 2  # [CLS] ... [SEP]
    if capacity < 1:
        raise ValueError(f"max_seq_len={max_seq_len} leaves no room for text beside [CLS] and [SEP]")
    starts, lengths = corpus.sentence_starts, corpus.sentence_lengths()
    sequences, start, size = [], 0, 0  # the sequence being filled: its text starts at `start`, holds `size`
    for d in range(corpus.num_documents):
        new_document = True
        for k in range(corpus.document_starts[d], corpus.document_starts[d + 1]):
            for offset in range(0, int(lengths[k]), capacity):
                piece = min(capacity, int(lengths[k]) - offset)
                separator = int(new_document and size > 0)
                if size + separator + piece > capacity:
                    sequences.append((start, int(starts[k]) + offset))
                    start, size, separator = int(starts[k]) + offset, 0, 0
                size += separator + piece
                new_document = False
    if size:
        sequences.append((start, int(starts[-1])))
    return np.asarray(sequences, dtype=np.int64).reshape(-1, 2)


def packed_tokens(corpus: TokenizedCorpus, start: int, end: int, sep_token_id: int,
                  document_starts: np.ndarray | None = None) -> list[int]:
    """The text ``ids[start:end]`` with a ``[SEP]`` before each document that starts inside it.
    ``document_starts``: ``np.unique(corpus.document_token_starts())``, computed once by a caller that reads many."""
    if document_starts is None:
        document_starts = np.unique(corpus.document_token_starts())  # an empty document starts where the next does
    inside = document_starts[(document_starts > start) & (document_starts < end)]
    tokens, previous = [], start
    for boundary in inside.tolist():
        tokens += corpus.tokens(previous, boundary) + [sep_token_id]
        previous = boundary
    return tokens + corpus.tokens(previous, end)
