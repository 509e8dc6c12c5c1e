"""Unpadding: only the real tokens of a padded batch go through the model's per-token work.

A batch of texts of different lengths is padded to the longest, and in a BERT every padding position
goes through every projection, feed-forward network and norm, computing vectors nobody reads. Those
per-token parts (Wqkv, Wo, the GeGLU, the LayerNorms: nearly all of a layer's multiply-adds) treat each
token on its own, so they need no batch shape at all: ModernBERT (§2.1.2, after Portes et al.'s MosaicBERT)
packs the real tokens of the whole batch into one (N, H) matrix, N = the number of real tokens, and runs
them there. Only attention, where tokens meet, needs to know which tokens share a sequence; see
`minibert.modernbert.layers` for how it is done here (BERT's `minibert.attention` does the same when asked,
``packed_positions``).

`Packing` records where each packed token came from; `unpad` and `pad` move tensors between the padded
(B, T, ...) layout that callers use and the packed (N, ...) one. `packed_positions` finds the real tokens
beforehand, on the host: N depends on the mask's values, so found on a GPU it makes the host wait.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Packing:
    """Where the real tokens of a (B, T) batch sit: packed row r is padded position ``indices[r]`` of the
    flattened B·T grid, in row-major order, so each sequence's tokens are consecutive packed rows."""

    indices: Tensor  # (N,) long: flat positions b·T + t of the real tokens
    batch: int       # B
    length: int      # T

    @classmethod
    def of(cls, attention_mask: Tensor) -> "Packing":
        """From the tokenizer's (B, T) attention_mask, 1 (or True) on real tokens. Finding N reads the mask's
        values: on a GPU a wait for the device, once per forward pass, not once per layer."""
        B, T = attention_mask.shape
        return cls(packed_positions(attention_mask), B, T)

    @property
    def positions(self) -> Tensor:
        """(N,): each token's column in the padded batch, the position RoPE turns it by (as transformers
        numbers positions, so a left-padded sequence starts at its number of pads)."""
        return self.indices % self.length

    @property
    def cu_seqlens(self) -> Tensor:
        """(B + 1,) int32: sequence b is packed rows cu_seqlens[b]:cu_seqlens[b + 1]. The layout that
        variable-length attention kernels (flash-attn's ``flash_attn_varlen_func``) take; the CPU path here
        re-pads for attention instead (see `minibert.modernbert.layers`), so nothing in it reads this."""
        lengths = torch.bincount(self.indices // self.length, minlength=self.batch)  # (B,) real tokens per sequence
        return torch.nn.functional.pad(lengths.cumsum(0), (1, 0)).to(torch.int32)


def packed_positions(attention_mask: Tensor) -> Tensor:
    """(B, T) attention_mask -> (N,) long: the real tokens' flat positions b·T + t, row-major (`Packing.indices`).
    Compute it where reading the mask is free, on the host before the batch moves (the Trainer does, in its
    DataLoader, as for `minibert.heads.masked_lm_positions`)."""
    return attention_mask.flatten().nonzero().flatten()  # (B·T,) -> (N, 1) -> (N,)


def unpad(x: Tensor, packing: Packing) -> Tensor:
    """(B, T, ...) -> (N, ...): the real tokens' rows, in order."""
    return x.flatten(0, 1).index_select(0, packing.indices)  # (B, T, ...) -> (B·T, ...) -> (N, ...)


def pad(x: Tensor, packing: Packing) -> Tensor:
    """(N, ...) -> (B, T, ...), zeros at the padding positions: the inverse of `unpad` on the real tokens."""
    grid = x.new_zeros(packing.batch * packing.length, *x.shape[1:])          # (B·T, ...)
    grid = grid.index_copy(0, packing.indices, x)                             # out of place: autograd reaches x
    return grid.view(packing.batch, packing.length, *x.shape[1:])             # (B·T, ...) -> (B, T, ...)
