"""Multi-head self-attention, Attention(Q, K, V) = softmax(QKᵀ/√d_k) V (Vaswani et al. 2017, eq. 1).

Two paths give the same numbers: ``attention_probabilities`` writes the formula out and returns the
probabilities that notebooks draw and that head analysis reads; ``F.scaled_dot_product_attention``
is the fused kernel (flash / memory-efficient on GPU) used whenever nobody asks for the
probabilities. Module and parameter names are the Hugging Face ones, so checkpoints load as they are.

The pieces, by their names in the papers: `padding_mask` (which keys a query may see),
`attention_probabilities` and `scaled_dot_product_attention` (one head's formula),
`BertSelfAttention.split_heads` / `merge_heads` (h heads of d_k = H / h dimensions, side by side),
and `BertAttention`, the sub-layer: multi-head attention, then add & norm (`BertSelfOutput`).

Unpadded (a `minibert.unpadding.Packing` given), the layer reads and writes only the batch's N real tokens,
(N, H): the projections and everything after attention skip the padding. Attention itself re-pads queries,
keys and values to (B, nh, T, hs) for the fused kernel and keeps the real rows of its output, as ModernBERT's
layer here does (`minibert.modernbert.layers` says why re-padding, not a variable-length kernel).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .add_norm import AddNorm
from .config import BertConfig
from .unpadding import Packing, pad, unpad


def padding_mask(attention_mask: Tensor | None) -> Tensor | None:
    """The tokenizer's (B, T) attention_mask (1 = real token, 0 = padding) as attention takes it.

    A boolean (B, 1, 1, T), True where a key may be attended to: the same keys for every head and
    every query, so a padded sequence's real tokens get exactly the vectors they get unpadded (the
    padding positions still compute vectors of their own, which nobody reads).
    """
    if attention_mask is None:
        return None
    return attention_mask.bool()[:, None, None, :]  # (B, T) -> (B, 1, 1, T)


def causal_mask(T: int, device: torch.device | str | None = None) -> Tensor:
    """(1, 1, T, T), True where query i may attend to key j: j <= i. A left-to-right language model
    (OpenAI GPT) sees only the past, so it can be trained to predict every next token at once."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()[None, None]


def attention_probabilities(q: Tensor, k: Tensor, mask: Tensor | None = None) -> Tensor:
    """softmax(QKᵀ/√d_k) over the keys; ``mask`` is True where a key may be attended to."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, nh, T, T)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return scores.softmax(dim=-1)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
    """The formula written out, for teaching and for checking the fused kernel."""
    return attention_probabilities(q, k, mask) @ v


class BertSelfAttention(nn.Module):
    """Project to queries, keys and values and attend with ``num_attention_heads`` heads in parallel.

    ``head_gate``, when set to a (num_heads,) tensor, multiplies each head's output: 1 everywhere
    changes nothing, and the gradient of a loss with respect to it measures how much each head
    matters (Michel et al. 2019), which is how heads are chosen for pruning.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_p = config.attention_probs_dropout_prob
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)
        self.head_gate: Tensor | None = None

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, T, H) -> (B, nh, T, hs): each head attends in its own hs = H / nh dimensions."""
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, hs)

    @staticmethod
    def merge_heads(x: Tensor) -> Tensor:
        """Concat(head_1, ..., head_h): the inverse of ``split_heads``."""
        B, nh, T, hs = x.shape
        return x.transpose(1, 2).reshape(B, T, nh * hs)  # (B, nh, T, hs) -> (B, T, H)

    def forward(self, hidden: Tensor, mask: Tensor | None = None, output_attentions: bool = False,
                packing: Packing | None = None) -> tuple[Tensor, Tensor | None]:
        """hidden: (B, T, H), or (N, H) packed real tokens with ``packing``; the output has hidden's shape."""
        q, k, v = self.query(hidden), self.key(hidden), self.value(hidden)  # each (B, T, H) or (N, H)
        if packing is not None:  # (N, H) -> (B, T, H), zeros at the padding, which the mask hides as keys
            q, k, v = pad(q, packing), pad(k, packing), pad(v, packing)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)  # (B, nh, T, hs)
        probs = None
        if output_attentions:
            probs = self.dropout(attention_probabilities(q, k, mask))  # (B, nh, T, T)
            context = probs @ v
        else:  # the same mask as a number added to the scores: a row with no key to attend to (a sequence
            # of padding only) then averages every value, as the explicit path and transformers do
            additive = None if mask is None else torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(
                ~mask, torch.finfo(q.dtype).min)                                            # (B, 1, 1 or T, T)
            context = F.scaled_dot_product_attention(
                q, k, v, attn_mask=additive, dropout_p=self.dropout_p if self.training else 0.0)
        if self.head_gate is not None:
            context = context * self.head_gate.view(1, -1, 1, 1)  # (B, nh, T, hs), one factor per head
        context = self.merge_heads(context)                                    # (B, T, H)
        return (context if packing is None else unpad(context, packing)), probs  # the real rows: (N, H)


class BertSelfOutput(AddNorm):
    """W_O (H → H) over the concatenated heads, then add & norm (the Hugging Face name)."""

    def __init__(self, config: BertConfig):
        super().__init__(config, config.hidden_size)


class BertAttention(nn.Module):
    """The attention sub-layer: LayerNorm(x + Dropout(W_O · MultiHead(x)))."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)
        self.pruned_heads: set[int] = set()  # numbered as in the unpruned layer

    def prune_heads(self, heads) -> None:
        """Remove heads for good: their rows of W_Q, W_K, W_V and their columns of W_O.

        The remaining heads compute exactly what they did, with fewer multiply-adds; the model's
        ``config.pruned_heads`` records which ones went, so a saved model loads with the same shapes.
        """
        original = self.self.num_heads + len(self.pruned_heads)
        remaining = [h for h in range(original) if h not in self.pruned_heads]  # original numbers, in order
        drop = {remaining.index(h) for h in set(heads) - self.pruned_heads}     # positions now
        if not drop:
            return
        if len(drop) == len(remaining):
            raise ValueError("cannot prune every head of a layer; keep at least one")
        hs = self.self.head_dim
        keep = torch.tensor([i * hs + d for i in range(len(remaining)) if i not in drop for d in range(hs)])
        for name in ("query", "key", "value"):
            setattr(self.self, name, _select(getattr(self.self, name), keep, dim=0))
        self.output.dense = _select(self.output.dense, keep, dim=1)
        self.self.num_heads -= len(drop)
        self.pruned_heads |= set(heads)

    def forward(self, hidden: Tensor, mask: Tensor | None = None, output_attentions: bool = False,
                packing: Packing | None = None) -> tuple[Tensor, Tensor | None]:
        context, probs = self.self(self.output.normalize_input(hidden), mask, output_attentions, packing)
        return self.output(context, hidden), probs


def _select(linear: nn.Linear, index: Tensor, dim: int) -> nn.Linear:
    """A copy of ``linear`` keeping the output features (dim 0) or input features (dim 1) in ``index``."""
    weight = linear.weight.detach().index_select(dim, index)
    bias = linear.bias.detach()[index] if dim == 0 else linear.bias.detach()
    new = nn.Linear(weight.size(1), weight.size(0)).to(weight.device, weight.dtype)
    with torch.no_grad():
        new.weight.copy_(weight)
        new.bias.copy_(bias)
    return new
