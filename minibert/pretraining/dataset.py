"""What the training loop reads: a dataset of pre-training examples and the batches it collates.

`build_pretraining_data` runs the whole pipeline (corpus -> pairs or packed sentences -> masks) and
returns a `PretrainingDataset` whose ``collate`` makes the batches that ``BertForPreTraining(**batch)``
or ``BertForMaskedLM(**batch)`` take.
"""
from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from ..heads import IGNORE_INDEX
from ..padding import pad
from .masking import MLMMasking, mask_dynamically, mask_statically
from .pairs import OBJECTIVES, packed_spans, packed_tokens, pair_spans
from .tokenized import TokenizedCorpus, tokenize_corpus


class SpanExamples(Sequence):
    """Pre-training examples kept as offsets into a `TokenizedCorpus`, made into dicts when read.

    Rows of ``spans`` are (A start, A end, B start, B end, label) for sentence pairs, (start, end) for
    packed sequences (`pairs`). Indexing gives what a list of example dicts would: ``input_ids``,
    ``token_type_ids`` and, for pairs, ``next_sentence_label``; a slice gives a list of them.
    """

    def __init__(self, corpus: TokenizedCorpus, spans: np.ndarray, cls_token_id: int, sep_token_id: int):
        self.corpus, self.spans, self.cls, self.sep = corpus, spans, cls_token_id, sep_token_id
        # where documents start (an empty one where the next does): once, not at every packed example read
        self.document_starts = np.unique(corpus.document_token_starts())

    def __len__(self) -> int:
        return len(self.spans)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        row = self.spans[index].tolist()
        if len(row) == 2:  # a packed sequence: [CLS] text [SEP]
            tokens = packed_tokens(self.corpus, *row, self.sep, self.document_starts)
            return {"input_ids": [self.cls, *tokens, self.sep], "token_type_ids": [0] * (len(tokens) + 2)}
        a, b = self.corpus.tokens(row[0], row[1]), self.corpus.tokens(row[2], row[3])
        return {"input_ids": [self.cls, *a, self.sep, *b, self.sep],                       # [CLS] A [SEP] B [SEP]
                "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1),
                "next_sentence_label": row[4]}

    def token_counts(self, vocab_size: int) -> np.ndarray:
        """(V,) how often each token occurs in all the examples, [CLS] and [SEP] included, without making them."""
        pairs = self.spans.shape[1] == 5
        segments = np.concatenate([self.spans[:, 0:2], self.spans[:, 2:4]]) if pairs else self.spans
        cover = np.zeros(len(self.corpus.ids) + 1, dtype=np.int64)  # how many segments hold each token
        np.add.at(cover, segments[:, 0], 1)
        np.add.at(cover, segments[:, 1], -1)
        counts = np.bincount(self.corpus.ids, weights=np.cumsum(cover)[:-1], minlength=vocab_size).astype(np.int64)
        counts[self.cls] += len(self)
        if pairs:
            counts[self.sep] += 2 * len(self)
        else:  # one closing [SEP] each, and one before every document that starts inside a sequence
            counts[self.sep] += len(self) + int(self.documents_inside().sum())
        return counts

    def documents_inside(self) -> np.ndarray:
        """(N,) for packed sequences: how many documents start inside each (each gets a [SEP] before it)."""
        starts = self.document_starts
        return np.searchsorted(starts, self.spans[:, 1], "left") - np.searchsorted(starts, self.spans[:, 0], "right")

    def lengths(self) -> np.ndarray:
        """(N,) tokens in each example, [CLS] and [SEP]s included, without making the examples."""
        if self.spans.shape[1] == 5:  # [CLS] A [SEP] B [SEP]
            return self.spans[:, 1] - self.spans[:, 0] + self.spans[:, 3] - self.spans[:, 2] + 3
        return self.spans[:, 1] - self.spans[:, 0] + 2 + self.documents_inside()  # [CLS] text [SEP]


class PretrainingDataset(Dataset):
    """Pre-tokenized examples (dicts: ``input_ids``, ``token_type_ids``, maybe ``next_sentence_label`` and,
    when masked statically, ``labels``; a list, or `SpanExamples` that make them when read) and the
    ``collate`` that turns a list of them into a batch.

    ``DataLoader(dataset, batch_size=32, shuffle=True, collate_fn=dataset.collate)``.
    """

    def __init__(self, examples: list[dict], masking: MLMMasking, pad_to: int | None = None,
                 random_positions: int | None = None):
        self.examples, self.masking, self.pad_to = examples, masking, pad_to
        # With random_positions, each sequence's positions start at a random offset so that they fall within the
        # first random_positions: a model trained on short sequences then has every position of a longer
        # stage trained (where starting at 0 leaves positions 17-128 untouched by 16-token sequences).
        self.random_positions = random_positions

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int) -> dict:
        return self.examples[index]

    def collate(self, examples: list[dict]) -> dict[str, Tensor]:
        """Pad to the longest example (or ``pad_to``) and mask (`mask_dynamically`, unless masked already)."""
        lengths = [len(e["input_ids"]) for e in examples]
        if self.pad_to is not None and self.pad_to < max(lengths):
            raise ValueError(f"pad_to={self.pad_to} is shorter than an example ({max(lengths)} tokens)")
        T = self.pad_to or max(lengths)
        batch = {"input_ids": pad([e["input_ids"] for e in examples], self.masking.pad_token_id, T),  # (B, T)
                 "attention_mask": pad([[1] * n for n in lengths], 0, T),
                 "token_type_ids": pad([e["token_type_ids"] for e in examples], 0, T)}
        if "labels" in examples[0]:
            batch["labels"] = pad([e["labels"] for e in examples], IGNORE_INDEX, T)
        else:
            batch["input_ids"], batch["labels"] = mask_dynamically(batch["input_ids"], self.masking)
        if self.random_positions is not None:
            if self.random_positions < T:
                raise ValueError(f"random_positions={self.random_positions} is fewer than the batch's {T} tokens")
            offsets = torch.randint(0, self.random_positions - T + 1, (len(examples), 1))  # (B, 1)
            batch["position_ids"] = offsets + torch.arange(T)                              # (B, 1) + (T,) -> (B, T)
        if "next_sentence_label" in examples[0]:
            batch["next_sentence_label"] = torch.tensor([e["next_sentence_label"] for e in examples])  # (B,)
        return batch


def build_pretraining_data(tokenizer, sources, objective: str = "nsp", max_seq_len: int = 128, *,
                           masking: MLMMasking | None = None, static_masking: bool = False,
                           short_seq_prob: float = 0.1, dupe_factor: int = 1, seed: int = 0,
                           pad_to: int | None = None) -> PretrainingDataset:
    """Text in, a dataset of pre-training examples out: the whole pipeline of `minibert.pretraining`.

    ``sources``: see `load_documents`. ``objective``: ``"nsp"`` (BERT: MLM + next sentence
    prediction), ``"sop"`` (ALBERT: MLM + sentence order) or ``"none"`` (RoBERTa: MLM alone on packed
    full sentences; train a ``BertForMaskedLM``, as there is no ``next_sentence_label``).
    ``short_seq_prob``: see `create_sentence_pairs` (NSP and SOP). ``masking``: an `MLMMasking`
    (default 15%, 80/10/10). ``static_masking``: mask once now (BERT) instead of in every batch
    (RoBERTa). ``dupe_factor``: make the examples that many times over, pairs and static masks drawn
    anew each time, as Google's script did. The same ``seed`` gives the same examples.

    >>> dataset = build_pretraining_data(tokenizer, "wikitext2_raw/wiki.valid.raw", max_seq_len=128)
    >>> batch = dataset.collate([dataset[0], dataset[1]])  # input_ids, attention_mask, token_type_ids,
    >>> loss = BertForPreTraining(config)(**batch).loss    # labels, next_sentence_label
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    masking = masking or MLMMasking(tokenizer)
    corpus = tokenize_corpus(tokenizer, sources)
    if objective == "none":  # the same packing each time; only static masks differ between copies
        spans = np.tile(packed_spans(corpus, max_seq_len), (dupe_factor, 1))
    else:
        rng = random.Random(seed)
        spans = np.concatenate([pair_spans(corpus, max_seq_len, objective=objective, short_seq_prob=short_seq_prob,
                                           rng=rng) for _ in range(dupe_factor)])
    examples = SpanExamples(corpus, spans, tokenizer.cls_token_id, tokenizer.sep_token_id)
    if static_masking:
        examples = mask_statically(examples, masking, seed)
    return PretrainingDataset(examples, masking, pad_to)


# The held-out test every pre-training run and every shipped model is scored on, the same for all of them.
FILL_IN_THE_BLANK_RATE, FILL_IN_THE_BLANK_SEED = 0.15, 1234


def fill_in_the_blank_data(tokenizer, sources, objective: str = "none", max_seq_len: int = 128, *,
                           seed: int = FILL_IN_THE_BLANK_SEED) -> PretrainingDataset:
    """Held-out text as a fill-in-the-blank test: 15% of the tokens chosen once (seeded), every one of them
    replaced by [MASK].

    This is what "masked-LM accuracy" means to a user: the model sees a blank and must name the word.
    The training corruption (80/10/10) would leave 10% of the scored tokens in place, free answers
    that flatter an untrained model (a model that copies its input scores 10% with no learning at all).
    ``objective="nsp"`` or ``"sop"`` makes sentence pairs, so the same data also scores that task.
    """
    blanks = MLMMasking(tokenizer, FILL_IN_THE_BLANK_RATE, (1.0, 0.0, 0.0))
    return build_pretraining_data(tokenizer, sources, objective, max_seq_len, masking=blanks,
                                  static_masking=True, seed=seed)

