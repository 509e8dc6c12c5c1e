"""Rotary position embedding, RoPE (Su et al. 2021), the way ModernBERT knows where each token is.

BERT adds a learnt vector per position, so it knows only the 512 positions it was trained on. RoPE adds
nothing: it turns each query and each key, pair of dimensions by pair of dimensions, by an angle
proportional to the token's position. A rotation keeps lengths and turns both vectors of a dot product alike,
so the score q·k depends on two positions through their difference only: attention sees relative order, at
any length. Pair i turns at its own frequency θ^(-2i/d), from one radian per token down to nearly nothing, so
some pairs tell neighbours apart and others still distinguish tokens thousands of positions apart.

ModernBERT uses two bases θ (the config's ``rope_theta``): 160,000 in the global layers, which read the
whole 8,192-token context (a larger base slows every pair down, so more of them tell apart positions
thousands of tokens away without wrapping round), and the usual 10,000 in the local layers, which never look
further than half their window.

The pairs are dimension i with dimension i + d/2 ("rotate half", the layout of GPT-NeoX and of transformers),
not neighbours 2i and 2i + 1: the same rotation on permuted dimensions, but the checkpoints were trained in this
layout, so this is the one that reproduces them.
"""
from __future__ import annotations

import torch
from torch import Tensor


def rotary_angles(positions: Tensor, head_dim: int, theta: float) -> tuple[Tensor, Tensor]:
    """cos and sin of each token's angles, for `rotate`: (N,) positions -> two (N, d) tables.

    Computed for the tokens at hand, in fp32 whatever the model's dtype (an angle of a few thousand
    radians in bf16 would be off by whole turns), and cheap: N × d/2 products, once per layer type.
    """
    inverse_frequency = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=positions.device).float() / head_dim)
    angles = positions.float()[:, None] * inverse_frequency[None, :]  # (N, 1) × (1, d/2) -> (N, d/2)
    angles = torch.cat((angles, angles), dim=-1)                      # (N, d/2) -> (N, d): dims i and i + d/2 share one
    return angles.cos(), angles.sin()


def rotate_half(x: Tensor) -> Tensor:
    """(x₁, x₂) -> (-x₂, x₁) on the two halves of the last dimension: each pair (x₁ᵢ, x₂ᵢ) turned 90°."""
    first, second = x.chunk(2, dim=-1)  # (..., d) -> 2 × (..., d/2)
    return torch.cat((-second, first), dim=-1)


def rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Turn each token's vectors by its angles: x cos θ + rotate_half(x) sin θ, pair by pair.

    x: (N, heads, d), the packed tokens' queries or keys; cos, sin: (N, d) from `rotary_angles`, the same for
    every head. Computed in fp32 and returned in x's dtype.
    """
    cos, sin = cos[:, None, :], sin[:, None, :]  # (N, d) -> (N, 1, d): broadcast over the heads
    turned = x.float() * cos + rotate_half(x.float()) * sin
    return turned.to(x.dtype)
