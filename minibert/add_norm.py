"""Add & Norm: how each sub-layer's output joins the stream, LayerNorm(x + Dropout(W h + b)).

Every encoder layer has two sub-layers, attention and the feed-forward network, and each ends the
same way (Vaswani et al. 2017, §3.1 and Figure 1; BERT keeps it): a linear projection back to H,
dropout, the residual connection that adds the sub-layer's input x, then LayerNorm. The norm comes
*after* the sum ("post-LN"), as in the paper; later models moved it before the sub-layer (pre-LN,
``config.pre_layer_norm``): the sub-layer then reads LayerNorm(x) (`normalize_input`) and its output
joins the stream as x + Dropout(W h + b), so the residual path stays an identity from the top of the
stack to the bottom.
"""
from __future__ import annotations

from torch import Tensor, nn

from .config import BertConfig


class AddNorm(nn.Module):
    """LayerNorm(x + Dropout(dense(h))): ``h`` is the sub-layer's output, ``x`` its input (the residual).

    The submodules keep the Hugging Face names ``dense`` and ``LayerNorm``, so the checkpoint keys
    ``attention.output.*`` and ``output.*`` of every layer load as they are.
    """

    def __init__(self, config: BertConfig, in_features: int):
        super().__init__()
        self.dense = nn.Linear(in_features, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.pre_norm = config.pre_layer_norm

    def normalize_input(self, x: Tensor) -> Tensor:
        """What the sub-layer reads: x itself (post-LN, BERT) or LayerNorm(x) (pre-LN)."""
        return self.LayerNorm(x) if self.pre_norm else x

    def forward(self, h: Tensor, x: Tensor) -> Tensor:
        if self.pre_norm:
            return x + self.dropout(self.dense(h))                      # (B, T, in_features) -> (B, T, H)
        return self.LayerNorm(x + self.dropout(self.dense(h)))          # (B, T, in_features) -> (B, T, H)
