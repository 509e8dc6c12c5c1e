"""Alternating attention's local layers: each token attends to its neighbours within a sliding window.

Global attention costs T² per layer; ModernBERT (§2.1.2) lets only every third layer pay it, and the others
attend within a window of ``local_attention`` tokens (128): a token at position i sees keys j with
|i - j| <= local_attention // 2, the same rule as transformers' ``sliding_window_bidirectional_overlay``
with ``sliding_window = local_attention // 2``. Stacked, local layers still carry information further, a
half-window per layer, and the global layers connect the whole sequence.

The masks here are booleans, True where query i may attend to key j, as
``torch.nn.functional.scaled_dot_product_attention`` takes them.
"""
from __future__ import annotations

import torch
from torch import Tensor

from ..attention import padding_mask
from .config import GLOBAL, LOCAL


def sliding_window_mask(length: int, local_attention: int, device: torch.device | str | None = None) -> Tensor:
    """(T, T), True where |i - j| <= local_attention // 2: a band around the diagonal."""
    position = torch.arange(length, device=device)
    distance = (position[:, None] - position[None, :]).abs()  # (T, 1) - (1, T) -> (T, T)
    return distance <= local_attention // 2


def attention_masks(attention_mask: Tensor, local_attention: int) -> dict[str, Tensor]:
    """Both layer types' masks for a padded batch, {"full_attention": m, "sliding_attention": m}, each (B, 1, T, T).

    A query may attend to real keys (the padding mask), within the window in local layers. Every query may
    also attend to itself: a real query loses nothing by that (it is its own key within any window), and a
    padding query far from any real token gets a row with one key rather than none. Those rows are dropped
    when the tokens are packed again, but what a kernel makes of an empty row varies (zeros in today's CPU
    kernel, NaN in older PyTorch); with no empty row, every kernel computes finite numbers.
    """
    T = attention_mask.size(1)
    keys = padding_mask(attention_mask)                                         # (B, T) -> (B, 1, 1, T)
    assert keys is not None  # None only for no mask, and the model always makes one
    itself = torch.eye(T, dtype=torch.bool, device=attention_mask.device)       # (T, T)
    window = sliding_window_mask(T, local_attention, attention_mask.device)     # (T, T)
    return {GLOBAL: keys | itself, LOCAL: (keys & window) | itself}             # (B, 1, 1, T) & (T, T) -> (B, 1, T, T)
