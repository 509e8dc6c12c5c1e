"""ModernBERT (Warner et al. 2024): the encoder, its masked-LM and sequence-classification heads, and BERT's
pre-training pair (MLM + a sentence-pair head) for the course's own pre-training.

The encoder is embeddings → L pre-norm layers (alternating global and local attention, RoPE, GeGLU) → a
final LayerNorm, run on the batch's real tokens only (`minibert.unpadding`); callers see the
usual padded (B, T, H), with zeros at padding positions. Parameter names and layout are transformers', so
``save_pretrained`` / ``from_pretrained`` (`minibert.hub.PretrainedMixin`, shared with BERT) move checkpoints
between the two libraries, and a Hub id such as "answerdotai/ModernBERT-base" resolves through the HF cache.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import ACT2FN
from ..heads import classification_loss, masked_lm
from ..hub import PretrainedMixin
from ..inputs import check_inputs
from ..outputs import BaseModelOutput, MaskedLMOutput, PreTrainingOutput, TaskOutput
from ..unpadding import Packing, pad
from .config import ModernBertConfig
from .layers import ModernBertAttention, ModernBertEmbeddings, ModernBertEncoderLayer, ModernBertMLP, layer_norm
from .rope import rotary_angles
from .sliding_window import attention_masks


class ModernBertPreTrainedModel(PretrainedMixin, nn.Module):
    """Loading and saving (BERT's, told the names of this family) and the paper's initialisation."""

    config: ModernBertConfig  # type: ignore[assignment]  # PretrainedMixin's default family is BERT
    config_class = ModernBertConfig  # type: ignore[assignment]
    family = "ModernBERT"
    base_model_prefix = "model"  # task models keep the encoder in ``self.model``, as transformers does
    base_modules = ("embeddings.", "layers.", "final_norm.")
    layer_key = r"layers\.(\d+)\."

    def init_weights(self) -> None:
        """Truncated normals (cut at ± initializer_cutoff_factor σ), as transformers initialises ModernBERT: σ for
        the input projections and embeddings, σ / √(2L) for every matrix that writes into the residual stream
        (so that L layers of additions keep its scale), 1/√H for a classifier; biases 0, norms 1."""
        c = self.config
        std_in, std_out = c.initializer_range, c.initializer_range / math.sqrt(2.0 * c.num_hidden_layers)

        def normal(module: nn.Linear | nn.Embedding, std: float) -> None:
            nn.init.trunc_normal_(module.weight, std=std, a=-c.initializer_cutoff_factor * std,
                                  b=c.initializer_cutoff_factor * std)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

        for module in self.modules():
            if isinstance(module, ModernBertEmbeddings):
                normal(module.tok_embeddings, std_in)
            elif isinstance(module, (ModernBertAttention, ModernBertMLP)):
                normal(module.Wqkv if isinstance(module, ModernBertAttention) else module.Wi, std_in)
                normal(module.Wo, std_out)
            elif isinstance(module, ModernBertPredictionHead):
                normal(module.dense, std_out)
            elif isinstance(module, nn.LayerNorm):
                module.reset_parameters()
        decoder = getattr(self, "decoder", None)  # the task layers
        if isinstance(decoder, nn.Linear):
            normal(decoder, std_out)
        for name in ("classifier", "seq_relationship"):
            if isinstance(getattr(self, name, None), nn.Linear):
                normal(getattr(self, name), c.hidden_size ** -0.5)
        self.tie_weights()

    def tie_weights(self) -> None:
        """Models with an MLM decoder share it with the token embeddings (overridden there)."""

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # a tied decoder counted once


class ModernBertModel(ModernBertPreTrainedModel):
    """The bare encoder: (input_ids, attention_mask) → contextual vectors (B, T, H).

    ``hidden_states`` (with ``output_hidden_states``) are the embeddings' output and each layer's, L + 1 of
    (B, T, H), the last after the final norm (= ``last_hidden_state``), as in transformers and in minibert's
    pre-LN BERT. Positions are the tokens' columns, as in transformers: right padding, which tokenizers do,
    numbers each text from 0.

    ``token_type_ids`` is accepted and not read, here and in the heads: ModernBERT has no segment embeddings
    (a pair is told apart by its [SEP] alone, and its own tokenizer gives no token types), so that a batch made
    for BERT (the course's pre-training batches, a ``BertTokenizer``'s output) feeds it as it is.
    """

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.config = config
        self.embeddings = ModernBertEmbeddings(config)
        self.layers = nn.ModuleList(ModernBertEncoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.final_norm = layer_norm(config)
        self.init_weights()

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, output_attentions: bool = False,
                output_hidden_states: bool = False, token_type_ids: Tensor | None = None,
                packed_positions: Tensor | None = None) -> BaseModelOutput:
        """``packed_positions``: the real tokens (`minibert.unpadding.packed_positions` of ``attention_mask``),
        found beforehand on the host, as the Trainer does; without them the model finds them, which on a GPU
        makes the host wait for the device once per forward pass."""
        check_inputs(self.config, input_ids, attention_mask,  # type: ignore[arg-type]  # the fields it reads are shared
                     packed_positions=packed_positions)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids, dtype=torch.bool)
        c = self.config
        assert c.layer_types is not None  # filled in by ModernBertConfig.__post_init__
        packing = self.pack(attention_mask, packed_positions)
        hidden = self.embed(input_ids, packing)                                         # (B, T) -> (N, H)
        masks = attention_masks(attention_mask, c.local_attention)                      # layer type -> (B, 1, T, T)
        angles = self.rotary_angles(packing)                                            # layer type -> 2 × (N, d)
        all_hidden, all_attentions = [hidden], []
        for layer, kind in zip(self.layers, c.layer_types):
            hidden, probs = layer(hidden, packing, angles[kind], masks[kind], output_attentions)
            all_hidden.append(hidden)
            all_attentions.append(probs)
        hidden = all_hidden[-1] = self.final_norm(hidden)  # the last entry after the norm, as in transformers
        return BaseModelOutput(
            last_hidden_state=pad(hidden, packing),                                      # (N, H) -> (B, T, H)
            hidden_states=tuple(pad(h, packing) for h in all_hidden) if output_hidden_states else None,
            attentions=tuple(all_attentions) if output_attentions else None)

    # The three steps where 2024 differs from 2018 before the layers, each a method so that an experiment
    # can take one back (`minibert.experiments.modern`) without a flag in the model.
    def pack(self, attention_mask: Tensor, packed_positions: Tensor | None = None) -> Packing:
        """Unpadding: which rows go through the layers (the real tokens; ``packed_positions`` if given)."""
        if packed_positions is None:
            return Packing.of(attention_mask)
        return Packing(packed_positions, *attention_mask.shape)

    def embed(self, input_ids: Tensor, packing: Packing) -> Tensor:
        """(B, T) ids -> (N, H): the packed tokens' embeddings; no position vectors (RoPE turns q and k instead)."""
        return self.embeddings(input_ids.flatten().index_select(0, packing.indices))  # (B, T) -> (B·T,) -> (N,) -> (N, H)

    def rotary_angles(self, packing: Packing) -> dict[str, tuple[Tensor, Tensor]]:
        """RoPE's (cos, sin) for each layer type, each (N, d): one base θ for global layers, one for local."""
        c = self.config
        assert c.layer_types is not None
        return {kind: rotary_angles(packing.positions, c.head_dim, c.rope_theta(kind)) for kind in set(c.layer_types)}


class ModernBertPredictionHead(nn.Module):
    """dense (H → H) + activation + LayerNorm: what both heads put before their last linear layer."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.classifier_bias)
        self.act = ACT2FN[config.classifier_activation]
        self.norm = layer_norm(config)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(self.act(self.dense(x)))  # (..., H) -> (..., H)


class ModernBertForMaskedLM(ModernBertPreTrainedModel):
    """Masked LM: ``head`` then ``decoder`` (H → V), whose weight is the token embedding matrix when
    ``tie_word_embeddings`` (it is in the released models), with a bias when ``decoder_bias``.

    With ``config.sparse_prediction`` and labels (or ``masked_only=True``, or ``masked_positions``), the V-wide
    decoder runs at the masked positions only (labels != ``sparse_pred_ignore_index``): their logits are in
    ``masked_logits``, (N_masked, V) in row-major order, and ``logits`` is None, as in BertForMaskedLM.
    """

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.config = config
        self.model = ModernBertModel(config)
        self.head = ModernBertPredictionHead(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=config.decoder_bias)
        self.init_weights()

    def tie_weights(self) -> None:
        if self.config.tie_word_embeddings:
            self.decoder.weight = self.model.embeddings.tok_embeddings.weight

    def scores(self, hidden: Tensor) -> Tensor:
        return self.decoder(self.head(hidden))  # (..., H) -> (..., V)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, labels: Tensor | None = None,
                output_attentions: bool = False, output_hidden_states: bool = False, masked_only: bool = False,
                masked_positions: Tensor | None = None, token_type_ids: Tensor | None = None,
                packed_positions: Tensor | None = None) -> MaskedLMOutput:
        out = self.model(input_ids, attention_mask, output_attentions, output_hidden_states,
                         packed_positions=packed_positions)
        if self.config.sparse_prediction and labels is not None and masked_positions is None:
            masked_positions = (labels.flatten() != self.config.sparse_pred_ignore_index).nonzero().flatten()
        # BERT's masked_lm, with this model's (..., H) -> (..., V) scores in place of BERT's head
        logits, loss = masked_lm(self.scores, out.last_hidden_state, labels,  # type: ignore[arg-type]
                                 masked_only, masked_positions)
        sparse = masked_only or masked_positions is not None
        return MaskedLMOutput(None if sparse else logits, loss, out.hidden_states, out.attentions,
                              masked_logits=logits if sparse else None)


class ModernBertForSequenceClassification(ModernBertPreTrainedModel):
    """One vector per text, then ``head``, dropout and ``classifier`` (H → num_labels); one label is
    regression (MSE), more are classes (cross-entropy).

    ``classifier_pooling`` "cls" reads the first token's vector; "mean" averages the real tokens' (the paper's
    choice for long texts: in the local layers the first token sees only its window). "cls" takes each text's
    first real token, which is column 0 with right padding, as in transformers; with left padding transformers
    would read a padding position, which has no meaning (and here holds zeros).
    """

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.config = config
        self.num_labels = config.num_labels
        self.model = ModernBertModel(config)
        self.head = ModernBertPredictionHead(config)
        self.drop = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def pool(self, hidden: Tensor, attention_mask: Tensor | None) -> Tensor:
        """(B, T, H) -> (B, H), by ``classifier_pooling``."""
        if attention_mask is None:
            attention_mask = torch.ones(hidden.shape[:2], dtype=torch.bool, device=hidden.device)
        if self.config.classifier_pooling == "cls":
            first = attention_mask.int().argmax(dim=1)                            # (B,): each text's first real token
            return hidden[torch.arange(hidden.size(0), device=hidden.device), first]
        real = attention_mask.to(hidden.dtype)[..., None]                         # (B, T) -> (B, T, 1)
        return (hidden * real).sum(dim=1) / real.sum(dim=1)                       # (B, T, H) -> (B, H)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, labels: Tensor | None = None,
                output_attentions: bool = False, output_hidden_states: bool = False,
                token_type_ids: Tensor | None = None, packed_positions: Tensor | None = None) -> TaskOutput:
        out = self.model(input_ids, attention_mask, output_attentions, output_hidden_states,
                         packed_positions=packed_positions)
        pooled = self.pool(out.last_hidden_state, attention_mask)
        logits = self.classifier(self.drop(self.head(pooled)))  # (B, H) -> (B, num_labels)
        loss = classification_loss(logits, labels)
        return TaskOutput(logits, loss, out.hidden_states, out.attentions)


class ModernBertForPreTraining(ModernBertForMaskedLM):
    """Masked LM + a sentence-pair head (NSP or ALBERT's SOP): BERT's pre-training objective on ModernBERT.

    ModernBERT dropped next-sentence prediction, and transformers has no such class for it; the course's own
    ModernBERT keeps a pair head so that it can be compared with its BERT on both of BERT's tasks. The pair is
    read from the first token's vector (right padding: [CLS]) through ``sentence_head`` (dense, activation,
    norm, as the classifier's) and ``seq_relationship`` (H → 2). The masked-LM part keeps
    ModernBertForMaskedLM's names, so transformers' ``AutoModelForMaskedLM`` reads a saved folder as a
    ModernBERT masked LM (and says it left the pair head out); minibert reads all of it.
    """

    def __init__(self, config: ModernBertConfig):
        super().__init__(config)
        self.sentence_head = ModernBertPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)
        self.init_weights()  # every weight again, the pair head's included: the same scheme for all

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None, labels: Tensor | None = None,
                next_sentence_label: Tensor | None = None, output_attentions: bool = False,
                output_hidden_states: bool = False, masked_only: bool = False, masked_positions: Tensor | None = None,
                token_type_ids: Tensor | None = None, packed_positions: Tensor | None = None) -> PreTrainingOutput:
        out = self.model(input_ids, attention_mask, output_attentions, output_hidden_states,
                         packed_positions=packed_positions)
        hidden = out.last_hidden_state                                              # (B, T, H)
        pair_logits = self.seq_relationship(self.sentence_head(hidden[:, 0]))       # (B, H) -> (B, 2)
        mlm_logits, mlm_loss = masked_lm(self.scores, hidden, labels, masked_only, masked_positions)  # type: ignore[arg-type]
        loss = None
        if mlm_loss is not None and next_sentence_label is not None:
            loss = mlm_loss + F.cross_entropy(pair_logits, next_sentence_label.view(-1))
        sparse = masked_only or masked_positions is not None
        return PreTrainingOutput(None if sparse else mlm_logits, pair_logits, loss, out.hidden_states, out.attentions,
                                 masked_logits=mlm_logits if sparse else None)
