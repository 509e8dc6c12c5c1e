"""Step 3 of pre-training data: examples of at most ``max_seq_len`` tokens, one kind per objective.

- NSP, next sentence prediction (BERT, Devlin et al. 2018): ``[CLS] A [SEP] B [SEP]`` where B
  follows A (IsNext, label 0) or comes from another document (NotNext, 1) -- `create_sentence_pairs`;
- SOP, sentence-order prediction (ALBERT, Lan et al. 2019): B follows A (0) or the two are
  swapped (1) -- `sentence_order_pairs`;
- none (RoBERTa's FULL-SENTENCES, Liu et al. 2019): ``[CLS] s1 s2 ... [SEP]`` packed with whole
  sentences across documents, no sentence-level label -- `pack_full_sentences`.

NSP and SOP cut the documents into the same chunks (`_pairs_from_chunks`); they differ only in the
negative pair.
"""
from __future__ import annotations

import itertools
import random
from typing import Callable

OBJECTIVES = ("nsp", "sop", "none")

Pair = tuple[list[int], list[int], int]  # (tokens A, tokens B, label)
Negative = Callable[[int, list[int], list[int], int], tuple[list[int], list[int]]]  # (document, A, B, target) -> (A, B)


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
    if objective not in ("nsp", "sop"):
        raise ValueError(f"objective must be 'nsp' or 'sop' for sentence pairs, got {objective!r}")
    if objective == "sop":
        return sentence_order_pairs(documents, max_seq_len, short_seq_prob=short_seq_prob, rng=rng)
    max_num_tokens = _max_num_tokens(max_seq_len)
    if len(documents) < 2:
        raise ValueError(f"NSP needs at least two documents (NotNext takes B from another one), got {len(documents)}")
    rng = rng or random.Random(0)

    def not_next(index: int, tokens_a: list[int], tokens_b: list[int], target: int) -> tuple[list[int], list[int]]:
        other = rng.randrange(len(documents) - 1)
        other_document = documents[other + (other >= index)]
        random_b = []
        for sentence in other_document[rng.randrange(len(other_document)):]:
            random_b += sentence
            if len(random_b) >= target - len(tokens_a):
                break
        return tokens_a, random_b

    return _pairs_from_chunks(documents, max_num_tokens, short_seq_prob, rng, not_next, put_back_b=True)


def sentence_order_pairs(documents: list[list[list[int]]], max_seq_len: int = 128, *,
                         short_seq_prob: float = 0.1, rng: random.Random | None = None) -> list[Pair]:
    """SOP's (A, B, label) segment pairs: B follows A (0) or, by a fair coin, A and B are swapped (1).

    ALBERT's answer to NSP being too easy: a NotNext B comes from another document, so its topic
    alone gives it away. A swapped pair has the topic of a right one; only the order of the text,
    its coherence, tells them apart. The chunks are NSP's (`_pairs_from_chunks`); one document is
    enough, since nothing is taken from another.
    """
    max_num_tokens = _max_num_tokens(max_seq_len)
    rng = rng or random.Random(0)

    def swapped(index: int, tokens_a: list[int], tokens_b: list[int], target: int) -> tuple[list[int], list[int]]:
        return tokens_b, tokens_a

    return _pairs_from_chunks(documents, max_num_tokens, short_seq_prob, rng, swapped, put_back_b=False)


def _max_num_tokens(max_seq_len: int) -> int:
    """The tokens A and B may hold together: ``max_seq_len`` less ``[CLS] A [SEP] B [SEP]``'s three."""
    if max_seq_len < 5:
        raise ValueError(f"max_seq_len={max_seq_len} leaves no room for two segments and [CLS] [SEP] [SEP]")
    return max_seq_len - 3


def _pairs_from_chunks(documents: list[list[list[int]]], max_num_tokens: int, short_seq_prob: float,
                       rng: random.Random, negative: Negative, put_back_b: bool) -> list[Pair]:
    """The segment pairs NSP and SOP share; ``negative(index, tokens_a, tokens_b, target)`` makes a label-1 pair.

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

    pairs = []
    for index, document in enumerate(documents):
        chunk, length, i, target = [], 0, 0, draw_target()
        while i < len(document):
            chunk.append(document[i])
            length += len(document[i])
            i += 1
            if i < len(document) and (length < target or len(chunk) < 2):
                continue
            if len(chunk) >= 2:
                a_end = rng.randint(1, len(chunk) - 1)
                tokens_a, tokens_b = list(itertools.chain(*chunk[:a_end])), list(itertools.chain(*chunk[a_end:]))
                label = int(rng.random() < 0.5)
                if label:
                    tokens_a, tokens_b = negative(index, tokens_a, tokens_b, target)
                    if put_back_b:
                        i -= len(chunk) - a_end  # the unused sentences start the next chunk
                _truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
                pairs.append((tokens_a, tokens_b, label))
            chunk, length, target = [], 0, draw_target()
    if not pairs:
        raise ValueError("no sentence pair could be made: every document is shorter than two sentences")
    return pairs


def _truncate_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random) -> None:
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        del longer[0 if rng.random() < 0.5 else -1]


def pack_full_sentences(documents: list[list[list[int]]], max_seq_len: int, sep_token_id: int) -> list[list[int]]:
    """RoBERTa's FULL-SENTENCES inputs: whole sentences packed in order up to ``max_seq_len - 2`` tokens.

    A sequence may cross into the next document, with an extra ``[SEP]`` between the two. A sentence
    longer than a whole sequence is cut into pieces, so no text is lost. No NSP label: RoBERTa found
    that dropping NSP and filling every input matches or beats BERT (Liu et al. 2019, Table 2).
    """
    capacity = max_seq_len - 2  # [CLS] ... [SEP]
    if capacity < 1:
        raise ValueError(f"max_seq_len={max_seq_len} leaves no room for text beside [CLS] and [SEP]")
    sequences, current = [], []
    for document in documents:
        new_document = True
        for sentence in document:
            for start in range(0, len(sentence), capacity):
                piece = sentence[start:start + capacity]
                separator = [sep_token_id] if new_document and current else []
                if len(current) + len(separator) + len(piece) > capacity:
                    sequences.append(current)
                    current, separator = [], []
                current += separator + piece
                new_document = False
    return sequences + [current] if current else sequences
