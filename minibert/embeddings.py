"""BERT's input representation: token + segment + position embeddings, summed (Devlin et al. §3, Fig. 2).

Positions are learned (one vector per index up to ``max_position_embeddings``), not sinusoidal, and
the sum is normalised with LayerNorm and dropout before the first encoder layer. The vectors are
``config.embedding_dim`` wide: H in BERT, a smaller E in ALBERT, whose encoder projects them to H.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from .config import BertConfig


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        E = config.embedding_dim
        self.word_embeddings = nn.Embedding(config.vocab_size, E, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, E)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, E)
        self.LayerNorm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor) -> Tensor:
        T = input_ids.size(1)
        positions = torch.arange(T, device=input_ids.device)  # (T,), broadcast over the batch
        embeddings = (self.word_embeddings(input_ids)            # (B, T, E)
                      + self.token_type_embeddings(token_type_ids)
                      + self.position_embeddings(positions))
        return self.dropout(self.LayerNorm(embeddings))
