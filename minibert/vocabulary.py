"""A WordPiece vocabulary: the special tokens it starts with, and how it is learned from text.

Google never released WordPiece's training code (it picks merges by language-model likelihood);
``tokenizers`` learns the pieces with BPE-style frequency merges, and the pieces are then used with
WordPiece's longest match, like most BERT vocabularies since. `BertTokenizer.train` uses this.
"""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from tokenizers import Tokenizer, trainers

from .user_files import regular_file

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = [PAD, UNK, CLS, SEP, MASK]  # in this order a trained vocabulary starts: [PAD] = 0


def read_vocab_txt(path: str | os.PathLike) -> dict[str, int]:
    """A vocab.txt as {token: id}: one token a line, its id the line's number. A repeated line is refused:
    kept, it would leave a gap in the ids and renumber every token after it when the file is saved again."""
    vocab: dict[str, int] = {}
    for i, token in enumerate(regular_file(path).read_text(encoding="utf-8").splitlines()):
        if vocab.setdefault(token, i) != i:
            raise ValueError(f"{path}, line {i + 1} repeats {token!r} (line {vocab[token] + 1}): a vocab.txt gives "
                             "each token one line, its id; remove the repeat or download the file again")
    return vocab


def read_texts(texts_or_files) -> list[str]:
    """An iterable of strings (documents or lines) as a list, or the lines of a list of UTF-8 files."""
    if isinstance(texts_or_files, (str, os.PathLike)):
        if not os.path.isfile(texts_or_files):
            raise TypeError("texts_or_files must be an iterable of strings or a list of file paths, "
                            "got a single string; wrap it in a list")
        texts_or_files = [texts_or_files]
    if isinstance(texts_or_files, (list, tuple)) and all(_is_file(f) for f in texts_or_files):
        return [line for path in texts_or_files for line in Path(path).read_text(encoding="utf-8").splitlines()]
    return list(texts_or_files)


def learn_vocabulary(learner: Tokenizer, texts: list[str], vocab_size: int, min_frequency: int,
                     limit_alphabet: int) -> dict[str, int]:
    """Word pieces learned from ``texts`` through ``learner``'s normaliser and pre-tokeniser.

    ``learner`` is a BERT pipeline whose vocabulary is only the special tokens. The vocabulary
    starts with them, so ``[PAD]`` is 0 as in every BERT (the model's padding embedding); then come
    the characters: the ``limit_alphabet`` most frequent ones (rarer symbols become ``[UNK]``
    instead of taking vocabulary slots), as word starts and as ``##`` continuations; then merged
    pieces in the order they were learned, most frequent first, each seen at least
    ``min_frequency`` times.
    """
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive integer, got {vocab_size!r}")
    # Choose the alphabet here and number it in a fixed order. Left alone, tokenizers numbers the
    # ## characters in hash-map order, which breaks ties between equally frequent merges, so each
    # run learns a slightly different vocabulary (huggingface/tokenizers#1794). Listing them as
    # special tokens is the one way to number them first; BertTokenizer(vocab) drops that flag.
    counts: Counter[str] = Counter()
    inside: set[str] = set()
    split, normalize = learner.pre_tokenizer.pre_tokenize_str, learner.normalizer.normalize_str
    for text in texts:
        words = [word for word, _ in split(normalize(text))]
        counts.update("".join(words))
        inside.update("".join(word[1:] for word in words))
    alphabet = sorted(counts, key=lambda char: (-counts[char], char))[:limit_alphabet]
    continuations = ["##" + char for char in sorted(inside.intersection(alphabet))]

    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                        special_tokens=SPECIAL_TOKENS + continuations,
                                        initial_alphabet=alphabet, limit_alphabet=limit_alphabet,
                                        continuing_subword_prefix="##", show_progress=False)
    floor = len(SPECIAL_TOKENS) + len(alphabet) + len(continuations)
    if vocab_size <= floor:
        raise ValueError(f"vocab_size={vocab_size} leaves no room for a single word piece: the {len(SPECIAL_TOKENS)} "
                         f"special tokens and the {floor - len(SPECIAL_TOKENS)} characters of this text (as word starts "
                         f"and ## continuations) take {floor}; choose more than {floor} (BERT: 30,522; the course's "
                         "small models: 4,000 to 8,000), or a smaller limit_alphabet")
    learner.train_from_iterator(texts, trainer)
    return learner.get_vocab()


def _is_file(path) -> bool:
    return isinstance(path, (str, os.PathLike)) and os.path.isfile(path)
