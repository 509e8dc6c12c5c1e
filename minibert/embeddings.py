"""BERT's input representation: token + segment + position embeddings, summed (Devlin et al. §3, Fig. 2).

Token embeddings give each word piece a vector; segment embeddings add E_A or E_B, which sentence
of a pair the token is in (Hugging Face calls them ``token_type_embeddings``); position embeddings
are learned, one vector per index up to ``max_position_embeddings``, not the sinusoids of the
original Transformer. The sum is normalised with LayerNorm and dropout before the first layer.

The vectors are ``config.embedding_dim`` wide: H in BERT, a smaller E in ALBERT, whose factorised
embedding (`factorised_embedding_projection`) then projects them to H.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from .config import BertConfig


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        E = config.embedding_dim
        self.word_embeddings = nn.Embedding(config.vocab_size, E, padding_idx=config.pad_token_id)  # token
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, E)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, E)  # segment: 0 = A, 1 = B
        self.LayerNorm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor, position_ids: Tensor | None = None) -> Tensor:
        """``position_ids`` (B, T): each token's position, 0, 1, ..., T-1 unless given (a pre-training
        recipe may place a short sequence further along the table, so that every position gets trained)."""
        if position_ids is None:
            position_ids = torch.arange(input_ids.size(1), device=input_ids.device)  # (T,), broadcast over the batch
        token = self.word_embeddings(input_ids)                 # (B, T, E)
        segment = self.token_type_embeddings(token_type_ids)    # (B, T, E)
        position = self.position_embeddings(position_ids)       # (T, E) or (B, T, E)
        return self.dropout(self.LayerNorm(token + segment + position))


def factorised_embedding_projection(config: BertConfig) -> nn.Linear | None:
    """ALBERT's factorised embedding (Lan et al. 2019, §3.1): E-wide embeddings, then a linear E → H.

    A V × H table becomes V × E + E × H; with V = 30,000, H = 4096 and E = 128 that is 123M
    parameters down to 4.4M. None when E = H, as in BERT. The encoder holds the projection, under
    the name transformers' ALBERT gives it (``encoder.embedding_hidden_mapping_in``), so the
    checkpoint keys are ALBERT's.
    """
    if config.embedding_dim == config.hidden_size:
        return None
    return nn.Linear(config.embedding_dim, config.hidden_size)
