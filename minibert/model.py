"""The BERT encoder: embeddings → L post-LN Transformer layers → pooler (Devlin et al. 2018, §3).

Each layer is x ← LayerNorm(x + MultiHeadAttention(x)); x ← LayerNorm(x + FFN(x)) with
FFN(x) = W₂ GELU(W₁x + b₁) + b₂ and a 4H-wide hidden layer. Module and parameter names are the
Hugging Face ones, so ``model.state_dict()`` has exactly the keys of a BERT checkpoint.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from .add_norm import AddNorm
from .attention import BertAttention, causal_mask, padding_mask
from .config import ACT2FN, BertConfig
from .embeddings import BertEmbeddings, factorised_embedding_projection
from .hub import PretrainedMixin
from .inputs import check_inputs  # what a forward pass accepts, said in words
from .outputs import BaseModelOutput
from .unpadding import Packing, pad, unpad
from .unpadding import packed_positions as packed_positions_of


class BertIntermediate(nn.Module):
    """The feed-forward network's first half (the Hugging Face name): W₁ (H → 4H), then GELU."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = ACT2FN[config.hidden_act]

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.dense(x))


class BertOutput(AddNorm):
    """The feed-forward network's second half (the Hugging Face name): W₂ (4H → H), then add & norm."""

    def __init__(self, config: BertConfig):
        super().__init__(config, config.intermediate_size)


class FeedForward:
    """The position-wise feed-forward sub-layer: x ← LayerNorm(x + Dropout(W₂ GELU(W₁x + b₁) + b₂)).

    Each token goes through the same two-layer network on its own (attention is where tokens
    meet); the hidden layer is 4H wide. Checkpoints keep the two halves directly under the layer,
    ``intermediate`` (W₁, GELU) and ``output`` (W₂, add & norm), with no module around them, so
    this holds no weights of its own: `BertLayer` owns the halves and runs them with `feed_forward`.
    """

    intermediate: BertIntermediate
    output: BertOutput

    def feed_forward(self, x: Tensor) -> Tensor:
        return self.output(self.intermediate(self.output.normalize_input(x)), x)  # (B, T, H) -> (B, T, 4H) -> (B, T, H)


class BertLayer(FeedForward, nn.Module):
    """One Transformer encoder block: the attention sub-layer, then the feed-forward sub-layer."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden: Tensor, mask: Tensor | None = None, output_attentions: bool = False,
                packing: Packing | None = None) -> tuple[Tensor, Tensor | None]:
        attended, probs = self.attention(hidden, mask, output_attentions, packing)
        return self.feed_forward(attended), probs  # per token: (B, T, H) or packed (N, H) alike


class BertEncoder(nn.Module):
    """The stack: L layers in a row. ALBERT's options: the factorised embedding's E → H projection
    first, and ``share_layers``: one layer's weights applied L times."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embedding_hidden_mapping_in = factorised_embedding_projection(config)  # None in BERT
        distinct = 1 if config.share_layers else config.num_hidden_layers
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(distinct))
        for index, heads in config.pruned_heads.items():
            self.layers[index].attention.prune_heads(heads)
        # Pre-LN leaves the stream unnormalised; one LayerNorm after the last layer closes it.
        self.final_layer_norm = (nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
                                 if config.pre_layer_norm else None)

    @property
    def layers(self) -> list[BertLayer]:
        """The layers in the order they run: L of them, the same module L times when shared."""
        layers: list[BertLayer] = list(self.layer)  # type: ignore[arg-type]  # ModuleList does not say what it holds
        return layers * self.config.num_hidden_layers if self.config.share_layers else layers

    def forward(self, hidden: Tensor, mask: Tensor | None = None, output_attentions: bool = False,
                output_hidden_states: bool = False, packing: Packing | None = None) -> BaseModelOutput:
        """hidden: (B, T, E), or with ``packing`` the real tokens' (N, E); the states returned have its layout."""
        if self.embedding_hidden_mapping_in is not None:
            hidden = self.embedding_hidden_mapping_in(hidden)  # (B, T, E) -> (B, T, H), or (N, E) -> (N, H)
        all_hidden: list[Tensor] = [hidden]
        all_attentions: list[Tensor] = []
        for layer in self.layers:
            hidden, probs = layer(hidden, mask, output_attentions, packing)
            all_hidden.append(hidden)
            if output_attentions:
                all_attentions.append(probs)
        if self.final_layer_norm is not None:
            hidden = self.final_layer_norm(hidden)
            all_hidden[-1] = hidden
        return BaseModelOutput(
            last_hidden_state=hidden,
            hidden_states=tuple(all_hidden) if output_hidden_states else None,
            attentions=tuple(all_attentions) if output_attentions else None)


class BertPooler(nn.Module):
    """tanh(W h_[CLS] + b): the sentence vector the NSP head and sentence classifiers read."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden: Tensor) -> Tensor:
        return self.activation(self.dense(hidden[:, 0]))


class BertPreTrainedModel(PretrainedMixin, nn.Module):
    """Weight initialisation shared by BertModel and the task models: N(0, 0.02) as in the paper's code."""

    config: BertConfig

    def init_weights(self) -> None:
        self.apply(self._init_module)
        self.tie_weights()

    def _init_module(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=std)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def tie_weights(self) -> None:
        """Models with an MLM decoder share it with the input embeddings (overridden there)."""

    def num_parameters(self) -> int:
        """Distinct parameters: a tied MLM decoder is counted once, as in the paper's totals."""
        return sum(p.numel() for p in self.parameters())


class BertModel(BertPreTrainedModel):
    """The bare encoder: (input_ids, token_type_ids, attention_mask) → contextual vectors + pooled [CLS]."""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.init_weights()

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None,
                token_type_ids: Tensor | None = None, output_attentions: bool = False,
                output_hidden_states: bool = False, position_ids: Tensor | None = None,
                unpadded: bool = False, packed_positions: Tensor | None = None) -> BaseModelOutput:
        """``unpadded=True`` (needs ``attention_mask``) or ``packed_positions`` (`minibert.unpadding.packed_positions`
        of the mask, found on the host; implies ``unpadded``): the layers run on the batch's real tokens only
        (`minibert.unpadding`), what MosaicBERT and ModernBERT do to skip the padding's work. The outputs keep
        their (B, T, H) shape, with zeros at the padding positions, which padded runs fill with vectors nobody
        should read; the real tokens' vectors are the same either way."""
        check_inputs(self.config, input_ids, attention_mask, token_type_ids, position_ids, packed_positions)
        weights = self.embeddings.word_embeddings.weight
        if input_ids.device.type == "meta" != weights.device.type:  # shapes without values: nothing to look up
            raise ValueError(f"input_ids are on the meta device (shapes without values) and the model on {weights.device}; "
                             "make them there: tokenizer(..., return_tensors='pt').to(next(model.parameters()).device)")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        hidden = self.embeddings(input_ids, token_type_ids, position_ids)
        mask = padding_mask(attention_mask)                                   # (B, 1, 1, T) or None
        if self.config.is_decoder:  # left to right: (B, 1, 1, T) & (1, 1, T, T) -> (B, 1, T, T)
            causal = causal_mask(input_ids.size(1), input_ids.device)
            mask = causal if mask is None else mask & causal
        packing = None
        if unpadded or packed_positions is not None:
            if packed_positions is None:
                if attention_mask is None:
                    raise ValueError("unpadded=True needs the attention_mask: it says which tokens are real")
                packed_positions = packed_positions_of(attention_mask)  # on a GPU: a host-device sync, to learn N
            packing = Packing(packed_positions, *input_ids.shape)
            hidden = unpad(hidden, packing)                                   # (B, T, E) -> (N, E)
        out = self.encoder(hidden, mask, output_attentions, output_hidden_states, packing)
        if packing is not None:  # back to the callers' layout: (N, H) -> (B, T, H)
            out.last_hidden_state = pad(out.last_hidden_state, packing)
            if out.hidden_states is not None:
                out.hidden_states = tuple(pad(h, packing) for h in out.hidden_states)
        out.pooler_output = self.pooler(out.last_hidden_state) if self.pooler is not None else None
        return out

    def prune_heads(self, heads_by_layer: dict[int, list[int]]) -> None:
        """Remove attention heads, e.g. ``{0: [1, 3], 5: [0]}`` (heads numbered as in the unpruned
        model); recorded in ``config.pruned_heads`` so that save/load rebuilds the same shapes."""
        if self.config.share_layers:
            raise ValueError("heads of shared layers cannot be pruned one layer at a time")
        heads_by_layer = {int(layer): list(heads) for layer, heads in heads_by_layer.items()}
        merged = {layer: sorted(set(self.config.pruned_heads.get(layer, [])) | set(map(int, heads)))
                  for layer, heads in {**self.config.pruned_heads, **heads_by_layer}.items()}
        self.config.pruned_heads = self.config.replace(pruned_heads=merged).pruned_heads  # validated
        for layer, heads in heads_by_layer.items():
            self.encoder.layers[int(layer)].attention.prune_heads(heads)
