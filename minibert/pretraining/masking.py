"""Step 4 of pre-training data: the masked LM's corruption, and when it is drawn.

`MLMMasking` chooses 15% of the tokens; of those, 80% become [MASK], 10% stay the SAME and 10%
become a RaNDom token; the model must predict the original token at exactly those positions.
The mask is drawn once and stored (`mask_statically`, BERT) or anew for every batch
(`mask_dynamically`, RoBERTa).
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..heads import IGNORE_INDEX
from ..padding import pad
from .span_masking import span_mask


class MLMMasking:
    """The masked-LM corruption (§3.1, Appendix A.1) with the knobs of its ablations.

    ``mlm_probability``: the chance that a token is chosen (15% in BERT; Wettig et al. 2023 find
    40% works well too). ``mask_same_rnd``: how the chosen tokens are corrupted, as in Table 8:
    [MASK], left the SAME, or a RaNDom token. [MASK] never appears at fine-tuning time, so some
    chosen tokens must look like ordinary input; then the model cannot tell which tokens it will
    be asked about and must keep a good representation of every one. ``whole_word``: choose whole
    words (the later "whole word masking" BERT): all pieces of a word are chosen together, where a
    piece starting with ``##`` continues the previous word, so ``play ##ing`` cannot be solved from
    ``play``. ``spans``: choose runs of whole words instead, as SpanBERT did (`span_masking`).

    Each token is chosen by its own coin (Bernoulli), as ``transformers``' collator does, so the count
    varies around 15%. A sequence whose coins all miss gets its one lowest-drawn token (or word)
    chosen anyway: the original BERT chose ``max(1, round(15% of n))`` tokens, and a batch of short
    sequences with nothing to predict would make the MLM loss a mean over no tokens, i.e. NaN. For
    a sequence of 100 tokens that is needed about once in ten million.
    """

    def __init__(self, tokenizer, mlm_probability: float = 0.15,
                 mask_same_rnd: tuple[float, float, float] = (0.8, 0.1, 0.1), whole_word: bool = False,
                 spans: bool = False):
        self.check(mlm_probability, mask_same_rnd, whole_word, spans)
        self.mlm_probability, self.mask_same_rnd, self.whole_word = mlm_probability, tuple(mask_same_rnd), whole_word
        self.spans = spans
        self.mask_token_id, self.pad_token_id = tokenizer.mask_token_id, tokenizer.pad_token_id
        vocab = tokenizer.get_vocab()
        size = max(vocab.values()) + 1
        self.special = torch.zeros(size, dtype=torch.bool)  # (V,) never chosen: [CLS] [SEP] [PAD] [UNK] [MASK]
        self.special[tokenizer.all_special_ids] = True
        self.continues_word = torch.zeros(size, dtype=torch.bool)  # (V,) "##" pieces
        self.continues_word[[i for token, i in vocab.items() if token.startswith("##")]] = True
        # RND draws from real tokens: not the special ones, nor the reserved "[unused7]" that text never holds.
        self.random_ids = torch.tensor(sorted(i for token, i in vocab.items()
                                              if not (len(token) > 2 and token[0] == "[" and token[-1] == "]")))

    @staticmethod
    def check(mlm_probability: float, mask_same_rnd: tuple[float, float, float], whole_word: bool = False,
              spans: bool = False) -> None:
        """The masking's knobs, checked (also by settings that make a masking later)."""
        for name, value in (("whole_word", whole_word), ("spans", spans)):
            if not isinstance(value, bool):  # "no" is a true value: say so rather than mask whole words
                raise ValueError(f"{name} must be True or False, got {value!r}")
        if whole_word and spans:
            raise ValueError("choose whole_word or spans, not both: spans are made of whole words already")
        if not 0 < mlm_probability <= 1:
            raise ValueError(f"mlm_probability must be in (0, 1], got {mlm_probability!r}")
        if len(mask_same_rnd) != 3 or not all(0 <= share <= 1 for share in mask_same_rnd) or \
                abs(sum(mask_same_rnd) - 1) > 1e-6:  # "not 0 <= x": a NaN fails it too
            raise ValueError(f"mask_same_rnd={tuple(mask_same_rnd)!r} must be three shares >= 0 of the chosen "
                             "tokens (MASK, SAME, RND) that sum to 1, e.g. (0.8, 0.1, 0.1)")

    def __call__(self, input_ids: Tensor, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """(B, T) ids -> (corrupted ids, labels): labels hold the original id where chosen, -100 elsewhere.

        ``generator`` None uses torch's global RNG, so restoring ``torch.get_rng_state()`` replays it.
        """
        if self.spans:
            return span_mask(self, input_ids, generator)
        B, T = input_ids.shape
        choosable = ~self.special[input_ids]                                 # (B, T)
        draw = torch.rand(B, T, generator=generator)                          # (B, T) one coin per token
        if self.whole_word:  # every piece takes the draw of its word's first piece
            starts = ~self.continues_word[input_ids]
            positions = torch.arange(T).expand(B, T)
            first_piece = torch.where(starts, positions, 0).cummax(dim=1).values  # (B, T)
            draw = draw.gather(1, first_piece)
        chosen = choosable & (draw < self.mlm_probability)
        draw = draw.masked_fill(~choosable, 2.0)
        lowest = draw == draw.min(dim=1, keepdim=True).values
        chosen |= lowest & choosable & ~chosen.any(dim=1, keepdim=True)       # at least one per sequence
        labels = torch.where(chosen, input_ids, IGNORE_INDEX)

        share_mask, share_same, _ = self.mask_same_rnd
        how = torch.rand(B, T, generator=generator)                           # (B, T) MASK | SAME | RND
        random_tokens = self.random_ids[torch.randint(len(self.random_ids), (B, T), generator=generator)]
        corrupted = torch.where(chosen & (how < share_mask), self.mask_token_id, input_ids)
        corrupted = torch.where(chosen & (how >= share_mask + share_same), random_tokens, corrupted)
        return corrupted, labels


def mask_statically(examples: list[dict], masking: MLMMasking, seed: int = 0, dupe_factor: int = 1) -> list[dict]:
    """Mask every example ``dupe_factor`` times, seeded, and store the copies: the original BERT's static masking.

    Google wrote masked examples to disk (each sentence ``dupe_factor=10`` times with different masks),
    so over 40 epochs the model saw each mask 4 times. RoBERTa's dynamic masking (a new mask for every
    batch, `mask_dynamically`) was slightly better (Liu et al. 2019, Table 1). On a small text trained
    for many epochs, one static mask is far worse: a small model memorises the blanks it sees again
    and again, so keep the copies' repeats near BERT's 4 (`BERT_MASK_REPEATS`).
    """
    if not isinstance(dupe_factor, int) or dupe_factor < 1:
        raise ValueError(f"dupe_factor must be a positive integer, got {dupe_factor!r}")
    generator = torch.Generator().manual_seed(seed)
    masked = []
    for _ in range(dupe_factor):
        for start in range(0, len(examples), 1024):  # in chunks: one padded tensor of a big corpus is too big
            batch = examples[start:start + 1024]
            ids = pad([e["input_ids"] for e in batch], masking.pad_token_id)   # (1024, T)
            corrupted, labels = masking(ids, generator)
            masked += [{**e, "input_ids": c[:len(e["input_ids"])].tolist(), "labels": y[:len(e["input_ids"])].tolist()}
                       for e, c, y in zip(batch, corrupted, labels)]
    return masked


BERT_MASK_REPEATS = 4  # 40 epochs over dupe_factor=10 copies: each static mask seen 4 times


def mask_dynamically(input_ids: Tensor, masking: MLMMasking) -> tuple[Tensor, Tensor]:
    """(B, T) ids -> (corrupted ids, labels) with a new mask for this batch: RoBERTa's dynamic masking.

    Over many epochs the model meets each sentence under many masks, not the same few. The draws
    come from torch's global RNG and nothing else, so a training loop that saves and restores the
    RNG state with its checkpoint resumes with exactly the same masks.
    """
    return masking(input_ids)
