"""Rows of token ids of different lengths as one tensor: what every batch of text needs, whoever makes it
(pre-training data, fine-tuning tasks, probes), so it sits below all of them."""
from __future__ import annotations

import torch
from torch import Tensor


def pad(rows: list[list[int]], value: int, length: int | None = None) -> Tensor:
    """Rows of different lengths as one (B, T) tensor, padded with ``value`` to ``length`` (default: the longest)."""
    length = length or max(map(len, rows))
    return torch.tensor([row + [value] * (length - len(row)) for row in rows])


def pad_with_mask(rows: list[list[int]], value: int) -> tuple[Tensor, Tensor]:
    """`pad` to the longest row, and the (B, T) attention mask: 1 on the rows' tokens, 0 on the padding."""
    lengths = torch.tensor([len(row) for row in rows])
    mask = torch.arange(int(lengths.max())) < lengths[:, None]  # (B, T)
    return pad(rows, value), mask.long()
