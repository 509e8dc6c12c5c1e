"""What the training loop reads: a dataset of pre-training examples and the batches it collates.

`build_pretraining_data` runs the whole pipeline (corpus -> pairs or packed sentences -> masks) and
returns a `PretrainingDataset` whose ``collate`` makes the batches that ``BertForPreTraining(**batch)``
or ``BertForMaskedLM(**batch)`` take.
"""
from __future__ import annotations

import random

import torch
from torch import Tensor
from torch.utils.data import Dataset

from ..heads import IGNORE_INDEX
from ..training.batching import pad
from .corpus import load_documents, tokenize_documents
from .masking import MLMMasking, mask_dynamically, mask_statically
from .pairs import OBJECTIVES, create_sentence_pairs, pack_full_sentences


class PretrainingDataset(Dataset):
    """Pre-tokenized examples (dicts: ``input_ids``, ``token_type_ids``, maybe ``next_sentence_label`` and,
    when masked statically, ``labels``) and the ``collate`` that turns a list of them into a batch.

    ``DataLoader(dataset, batch_size=32, shuffle=True, collate_fn=dataset.collate)``.
    """

    def __init__(self, examples: list[dict], masking: MLMMasking, pad_to: int | None = None):
        self.examples, self.masking, self.pad_to = examples, masking, pad_to

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
    documents = tokenize_documents(tokenizer, load_documents(sources))
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    rng, examples = random.Random(seed), []
    for _ in range(dupe_factor):
        if objective == "none":  # the same packing each time; only static masks differ between copies
            examples += [{"input_ids": [cls, *tokens, sep], "token_type_ids": [0] * (len(tokens) + 2)}
                         for tokens in pack_full_sentences(documents, max_seq_len, sep)]
            continue
        for a, b, label in create_sentence_pairs(documents, max_seq_len, objective=objective,
                                                 short_seq_prob=short_seq_prob, rng=rng):
            examples.append({"input_ids": [cls, *a, sep, *b, sep],                     # [CLS] A [SEP] B [SEP]
                             "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1),
                             "next_sentence_label": label})
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

