"""SpanBERT's masking (Joshi et al. 2020): contiguous spans of whole words instead of scattered pieces.

BERT chooses each token on its own, so a hidden piece usually has its neighbours in view: ``##ing``
after a visible ``play``, "York" after a visible "New". Whole-word masking (`MLMMasking`'s
``whole_word``) hides a word's pieces together; SpanBERT goes one step further and hides runs of
words. Span lengths, in words, follow a geometric distribution (p = 0.2) cut at 10 words and
renormalised, 3.8 words on average; spans are drawn until 15% of the tokens are hidden; and the
80/10/10 corruption is decided once per span, so a span is all [MASK], all random or all kept.

SpanBERT also added a *span boundary objective* (predict each hidden word from the two words just
outside the span and its position in it) and dropped NSP; only the masking is here, so its effect
can be compared with BERT's and whole-word masking on the same objective (notebook 05).
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..heads import IGNORE_INDEX

SPAN_P = 0.2           # the geometric distribution's p: P(length = l) ∝ p (1 - p)^(l - 1)
MAX_SPAN_WORDS = 10    # longer draws are not made (the distribution is cut and renormalised)


def span_length_probabilities(p: float = SPAN_P, max_words: int = MAX_SPAN_WORDS) -> Tensor:
    """(max_words,) P(length = 1, 2, ..., max_words): the geometric distribution cut and renormalised."""
    lengths = torch.arange(1, max_words + 1, dtype=torch.float64)
    weights = p * (1 - p) ** (lengths - 1)
    return weights / weights.sum()


def words_of(ids: list[int], choosable: list[bool], continues_word: list[bool]) -> list[tuple[int, int, int]]:
    """(first token, last token, segment) of each whole word: a word is a piece not starting with ``##``
    and the ``##`` pieces after it; special tokens end segments, and no span crosses one."""
    words, segment = [], 0
    for t in range(len(ids)):
        if not choosable[t]:
            segment += 1
        elif continues_word[t] and words and words[-1][1] == t - 1 and words[-1][2] == segment:
            words[-1] = (words[-1][0], t, segment)
        else:
            words.append((t, t, segment))
    return words


def choose_spans(words: list[tuple[int, int, int]], budget: int, generator: torch.Generator | None,
                 lengths: Tensor) -> list[list[int]]:
    """Spans (lists of token positions) covering about ``budget`` tokens: a length in words from
    ``lengths``, a start word uniformly, the span cut at its segment's end; a span that would overlap
    one already chosen is drawn again; one that would overshoot the budget loses words from its end
    (the first span always keeps one word, so every sequence has something to predict)."""
    spans, taken, hidden = [], set(), 0
    for _ in range(20 * len(words) + 20):  # ample: each draw fails only on an overlap
        if hidden >= budget or not words:
            break
        length = int(torch.multinomial(lengths, 1, generator=generator)) + 1
        start = int(torch.randint(len(words), (1,), generator=generator))
        chosen = [w for w in range(start, min(start + length, len(words))) if words[w][2] == words[start][2]]
        if taken.intersection(chosen):
            continue
        while len(chosen) > 1 and hidden + sum(words[w][1] - words[w][0] + 1 for w in chosen) > budget:
            chosen.pop()
        size = words[chosen[0]][1] - words[chosen[0]][0] + 1
        if len(chosen) == 1 and spans and hidden + size > budget:
            break  # one word alone would overshoot: close enough
        taken.update(chosen)
        span = [t for w in chosen for t in range(words[w][0], words[w][1] + 1)]
        spans.append(span)
        hidden += len(span)
    return spans


def span_mask(masking, input_ids: Tensor, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """(B, T) ids -> (corrupted ids, labels), as `MLMMasking.__call__` returns them, with spans of words
    chosen until ``masking.mlm_probability`` of each sequence's ordinary tokens are hidden, and each
    span corrupted as a whole by ``masking.mask_same_rnd``."""
    lengths = span_length_probabilities()
    corrupted, labels = input_ids.clone(), torch.full_like(input_ids, IGNORE_INDEX)
    choosable = ~masking.special[input_ids]                                   # (B, T)
    continues = masking.continues_word[input_ids]                             # (B, T)
    share_mask, share_same, _ = masking.mask_same_rnd
    for b in range(input_ids.shape[0]):
        words = words_of(input_ids[b].tolist(), choosable[b].tolist(), continues[b].tolist())
        budget = max(1, round(masking.mlm_probability * int(choosable[b].sum())))
        for span in choose_spans(words, budget, generator, lengths):
            positions = torch.tensor(span)
            labels[b, positions] = input_ids[b, positions]
            how = float(torch.rand(1, generator=generator))                   # one draw for the whole span
            if how < share_mask:
                corrupted[b, positions] = masking.mask_token_id
            elif how >= share_mask + share_same:
                pick = torch.randint(len(masking.random_ids), (len(span),), generator=generator)
                corrupted[b, positions] = masking.random_ids[pick]
    return corrupted, labels
