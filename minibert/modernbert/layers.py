"""ModernBERT's building blocks (Warner et al. 2024, §2.1): token embeddings, attention with RoPE, the GeGLU
feed-forward network, and the pre-norm layer that joins them. Module and parameter names are transformers'
(``Wqkv``, ``Wi``, ``Wo``, ``attn_norm``...), so checkpoints load as they are.

Every block reads and writes packed tokens, (N, H) with N the batch's real tokens (`minibert.unpadding`).
Attention is the one place that needs the batch's shape back: it re-pads queries, keys and values to
(B, heads, T, d) and calls ``torch.nn.functional.scaled_dot_product_attention`` with a boolean mask that
combines the padding and, in local layers, the sliding window (`minibert.modernbert.sliding_window`).

Why re-pad rather than attend over the packed tokens directly (a "varlen" kernel, as flash-attn's
``flash_attn_varlen_func`` with ``cu_seqlens``, which the paper uses on GPUs): PyTorch has no such kernel on
the CPU. The alternatives are a Python loop over the sequences (slow for a batch of many short texts) or one
(N, N) block-diagonal mask over the whole packed batch (B times the work and memory of re-padding). Re-padding
costs two index copies per layer, runs the fused kernel PyTorch has everywhere, and gives the same numbers:
padding's rows and columns are masked, and only the real tokens' rows are kept.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import attention_probabilities
from ..config import ACT2FN
from ..unpadding import Packing, pad, unpad
from .config import ModernBertConfig
from .rope import rotate


def layer_norm(config: ModernBertConfig) -> nn.LayerNorm:
    """ModernBERT's LayerNorm: no bias unless ``norm_bias`` (the paper drops the biases, §2.1.1)."""
    return nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)


class ModernBertEmbeddings(nn.Module):
    """Token embeddings, then LayerNorm and dropout. No position embeddings (RoPE turns queries and keys
    inside attention instead) and no token types."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.norm = layer_norm(config)
        self.drop = nn.Dropout(config.embedding_dropout)

    def forward(self, input_ids: Tensor) -> Tensor:
        return self.drop(self.norm(self.tok_embeddings(input_ids)))  # (N,) -> (N, H)


class ModernBertAttention(nn.Module):
    """Multi-head self-attention with RoPE: one fused projection ``Wqkv`` (H → 3H, no bias), each head's queries
    and keys turned by their positions, softmax(QKᵀ/√d)V over the keys the mask allows, then ``Wo``."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.num_heads, self.head_dim = config.num_attention_heads, config.head_dim
        self.Wqkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.attention_bias)
        self.Wo = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.dropout_p = config.attention_dropout
        self.out_drop = nn.Dropout(config.attention_dropout)

    def forward(self, x: Tensor, packing: Packing, angles: tuple[Tensor, Tensor], mask: Tensor,
                output_attentions: bool = False) -> tuple[Tensor, Tensor | None]:
        """x: (N, H) packed tokens; angles: (cos, sin), each (N, d); mask: (B, 1, T, T), True where allowed."""
        N = x.size(0)
        qkv = self.Wqkv(x).view(N, 3, self.num_heads, self.head_dim)  # (N, 3H) -> (N, 3, heads, d)
        q, k, v = qkv.unbind(dim=1)                                   # 3 × (N, heads, d)
        q, k = rotate(q, *angles), rotate(k, *angles)                 # positions enter here, and only here
        # (N, heads, d) -> (B, T, heads, d) -> (B, heads, T, d): each sequence back in its row, for the kernel
        q, k, v = (pad(t, packing).transpose(1, 2) for t in (q, k, v))
        probs = None
        if output_attentions:  # the formula written out (minibert.attention), to return the probabilities
            probs = F.dropout(attention_probabilities(q, k, mask), self.dropout_p, self.training)  # (B, heads, T, T)
            context = probs @ v
        else:
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                     dropout_p=self.dropout_p if self.training else 0.0)
        # (B, heads, T, d) -> (B, T, heads, d) -> (N, heads, d): the real tokens' rows only, packed again
        context = unpad(context.transpose(1, 2), packing)
        return self.out_drop(self.Wo(context.reshape(N, -1))), probs  # (N, heads, d) -> (N, H)


class ModernBertMLP(nn.Module):
    """GeGLU (Shazeer 2020): Wo(GELU(x W_input) ⊙ x W_gate). One matrix ``Wi`` (H → 2I) holds both halves; the
    gate lets each of the I units be switched per token, which trains better than a plain GELU layer of the
    same parameter count. No biases unless ``mlp_bias``."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.Wi = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=config.mlp_bias)
        self.act = ACT2FN[config.hidden_activation]
        self.drop = nn.Dropout(config.mlp_dropout)
        self.Wo = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)

    def forward(self, x: Tensor) -> Tensor:
        input, gate = self.Wi(x).chunk(2, dim=-1)          # (N, H) -> (N, 2I) -> 2 × (N, I): input first, then gate
        return self.Wo(self.drop(self.act(input) * gate))  # (N, I) -> (N, H)


class ModernBertEncoderLayer(nn.Module):
    """A pre-norm layer: x ← x + Attention(LayerNorm(x)); x ← x + MLP(LayerNorm(x)).

    Pre-norm keeps the residual stream an identity path from top to bottom, which trains deep stacks
    stably (Xiong et al. 2020); one ``final_norm`` closes the stack. The first layer's ``attn_norm`` is the
    identity, as in transformers: the embeddings end with a LayerNorm already, and a second would only
    rescale. ``attention_type`` is the layer's entry in ``config.layer_types``: global or local attention,
    which selects the mask and the RoPE base the model hands it.
    """

    def __init__(self, config: ModernBertConfig, index: int):
        super().__init__()
        assert config.layer_types is not None  # filled in by ModernBertConfig.__post_init__
        self.attention_type = config.layer_types[index]
        self.attn_norm = nn.Identity() if index == 0 else layer_norm(config)
        self.attn = ModernBertAttention(config)
        self.mlp_norm = layer_norm(config)
        self.mlp = ModernBertMLP(config)

    def forward(self, x: Tensor, packing: Packing, angles: tuple[Tensor, Tensor], mask: Tensor,
                output_attentions: bool = False) -> tuple[Tensor, Tensor | None]:
        attended, probs = self.attn(self.attn_norm(x), packing, angles, mask, output_attentions)
        x = x + attended                                  # (N, H)
        return x + self.mlp(self.mlp_norm(x)), probs      # (N, H)
