"""Word-level attention from word-piece attention (Clark et al. 2019, §4.1).

Treebank words are split into word pieces (``playing -> play ##ing``), but syntax relates words.
Clark et al. turn a piece-to-piece map into a word-to-word map so that each row is still a
distribution:

- attention TO a split word is the SUM over its pieces (the probability mass that lands on it);
- attention FROM a split word is the MEAN over its pieces (the average of its pieces' distributions).

With the membership matrix M (T pieces x W words, 1 where a piece belongs to a word) and the
row-normalised M̄ = M / (pieces per word), this is one product, W_att = M̄ᵀ A M, done for every
layer, head and sentence of a batch at once.

[CLS] and [SEP] stay in the map as words of their own, as in Clark et al.: word 0 is [CLS], words
1..n are the sentence's words (so position = CoNLL-U word ID), word n+1 is [SEP]. Keeping them keeps
the rows summing to 1; the scorers simply never pick them as a prediction.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def piece_words(encoding) -> Tensor:
    """(B, T) word index of each piece of a batch encoded with ``is_split_into_words=True``:
    0 for [CLS], k + 1 for a piece of the k-th word, n + 1 for [SEP], -1 for padding."""
    rows = []
    for b, mask in enumerate(torch.as_tensor(encoding["attention_mask"]).tolist()):
        ids = encoding.word_ids(b)
        n = max((w for w in ids if w is not None), default=-1) + 1
        rows.append([-1 if not real else 0 if t == 0 else n + 1 if w is None else w + 1
                     for t, (w, real) in enumerate(zip(ids, mask))])
    return torch.tensor(rows)


def word_attention(attention: Tensor, words: Tensor) -> Tensor:
    """Piece attention (B, ..., T, T) -> word attention (B, ..., W, W); ``words`` is (B, T) from `piece_words`.

    Rows and columns of words a sentence does not have (padding up to the batch's longest) are 0.
    """
    B, T = words.shape
    W = int(words.max()) + 1
    membership = F.one_hot(words.clamp(min=0), W).to(attention.dtype)  # (B, T, W)
    membership = membership * (words >= 0).unsqueeze(-1)              # padding belongs to no word
    mean_from = membership / membership.sum(1, keepdim=True).clamp(min=1)  # (B, T, W): 1/#pieces of each word
    head_dims = (1,) * (attention.dim() - 3)                           # broadcast over layers and heads
    to_words = attention @ membership.view(B, *head_dims, T, W)        # (B, ..., T, W): sum TO a word's pieces
    return mean_from.transpose(1, 2).view(B, *head_dims, W, T) @ to_words  # (B, ..., W, W): mean FROM them
