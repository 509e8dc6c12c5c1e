"""The heads: BERT's two pre-training tasks and the task layers of fine-tuning (Devlin et al. §3.1, §4).

Masked LM predicts the original token at masked positions through a transform + a decoder that
shares its weights with the input embeddings (`BertLMPredictionHead`, `tie_decoder`, `masked_lm`);
NSP classifies the pooled [CLS] vector as IsNext / NotNext (`NextSentencePredictionHead`).
Fine-tuning adds one linear layer: on [CLS] for sentence classification, on every token for
tagging, a start/end scorer over tokens for SQuAD spans, and one score per candidate for multiple
choice (SWAG). Every model computes its loss when given labels; label -100 marks positions that do not count.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import ACT2FN, BertConfig
from .model import BertModel, BertPreTrainedModel
from .outputs import MaskedLMOutput, PreTrainingOutput, QuestionAnsweringOutput, TaskOutput

IGNORE_INDEX = -100  # cross_entropy's default ignore_index: unmasked tokens, padding, [CLS]/[SEP] tags


class BertPredictionHeadTransform(nn.Module):
    """H → E (= H in BERT), GELU, LayerNorm: back to the width of the tied word embeddings."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_dim)
        self.act = ACT2FN[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.embedding_dim, eps=config.layer_norm_eps)

    def forward(self, x: Tensor) -> Tensor:
        return self.LayerNorm(self.act(self.dense(x)))


class BertLMPredictionHead(nn.Module):
    """The masked-LM head: scores over the vocabulary; ``decoder.weight`` is tied to the word
    embeddings (V × E, see `tie_decoder`)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.embedding_dim, config.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, x: Tensor) -> Tensor:
        return self.decoder(self.transform(x)) + self.bias  # (..., H) -> (..., V)


class BertOnlyMLMHead(nn.Module):
    """A container, so that parameter names match checkpoints: ``cls.predictions.*``."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)


class NextSentencePredictionHead(nn.Linear):
    """NSP: is sentence B the one that followed A (0, IsNext) or a random one (1, NotNext)? A linear
    layer H → 2 on the pooled [CLS] vector. ALBERT's sentence-order prediction (SOP) uses it as it
    is: 0 for A, B in their order, 1 for the two swapped."""

    def __init__(self, config: BertConfig):
        super().__init__(config.hidden_size, 2)


class BertPreTrainingHeads(nn.Module):
    """A container for both pre-training heads: ``cls.predictions.*`` and ``cls.seq_relationship.*``."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        self.seq_relationship = NextSentencePredictionHead(config)


def masked_lm_positions(labels: Tensor) -> Tensor:
    """The masked tokens (labels != -100) as flat indices into a batch's B·T tokens, in row-major order:
    Google's ``masked_lm_positions``, flattened. Its length depends on the labels' values, so compute it
    where reading them is free, on the host before the batch moves (the Trainer does, in its DataLoader)."""
    return (labels.flatten() != IGNORE_INDEX).nonzero().flatten()  # (B·T,) -> (N_masked, 1) -> (N_masked,)


def masked_lm(head: BertLMPredictionHead, sequence: Tensor, labels: Tensor | None, masked_only: bool = False,
              masked_positions: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    """MLM logits and the mean cross-entropy over the masked positions (labels -100 elsewhere).

    The logits are (B, T, V), as in transformers. ``masked_only`` (masked-only decoding) runs the
    V-wide decoder only where labels != -100 and returns (N_masked, V), the masked positions in
    row-major order. That is about 15% of the tokens, and for a small BERT the (B·T, H) × (H, V)
    decoder costs more than the whole encoder, so most of a training step's work is saved (as
    Google's code did with ``masked_lm_positions``). The loss and its gradients are the same.
    ``masked_positions`` (`masked_lm_positions`; implies ``masked_only``) are those positions found
    beforehand, on the host: found here, on a GPU, they would make the host wait for the device, since
    N_masked depends on the labels' values.
    """
    if masked_only and masked_positions is None:
        if labels is None:
            raise ValueError("masked_only=True needs labels: they say which positions are masked (not -100)")
        masked_positions = masked_lm_positions(labels)  # on a GPU: a host-device sync, to learn N_masked
    if masked_positions is not None:
        masked = sequence.flatten(0, 1).index_select(0, masked_positions)  # (B·T, H) -> (N_masked, H)
        logits = head(masked)                                               # (N_masked, V)
        loss = None if labels is None else F.cross_entropy(logits, labels.flatten().index_select(0, masked_positions))
        return logits, loss
    logits = head(sequence)                                # (B, T, V)
    loss = None
    if labels is not None:
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
    return logits, loss


def classification_loss(logits: Tensor, labels: Tensor | None) -> Tensor | None:
    """A sequence classifier's loss: squared error for one output (a regression, as STS-B), else cross-entropy."""
    if labels is None:
        return None
    if logits.size(-1) == 1:
        return F.mse_loss(logits.squeeze(-1), labels.float())
    return F.cross_entropy(logits, labels.view(-1))


def tie_decoder(model: BertPreTrainedModel, head: BertLMPredictionHead) -> None:
    """The MLM decoder reuses the input embedding matrix (Press & Wolf 2017, as in BERT's code): one
    V × E table both reads tokens in and scores them out, and is counted and stored once."""
    bert: Any = model.bert  # nn.Module's attribute lookup types it Tensor | Module
    head.decoder.weight = bert.embeddings.word_embeddings.weight


class BertForPreTraining(BertPreTrainedModel):
    """MLM + NSP, the paper's pre-training objective: loss = mean MLM cross-entropy + NSP cross-entropy."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config)
        self.init_weights()

    def tie_weights(self) -> None:
        tie_decoder(self, self.cls.predictions)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                next_sentence_label=None, output_attentions=False, output_hidden_states=False,
                masked_only: bool = False, masked_positions: Tensor | None = None, position_ids: Tensor | None = None,
                unpadded: bool = False, packed_positions: Tensor | None = None):
        """``masked_only=True`` (needs ``labels``) or ``masked_positions`` (`masked_lm_positions`): the MLM
        decoder runs at the masked positions only; their logits are then in ``masked_logits`` and
        ``prediction_logits`` is None. ``unpadded`` / ``packed_positions``: the encoder skips the padding
        (`BertModel.forward`); the same loss."""
        out = self.bert(input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states, position_ids,
                        unpadded, packed_positions)
        nsp_logits = self.cls.seq_relationship(out.pooler_output)  # (B, 2)
        mlm_logits, mlm_loss = masked_lm(self.cls.predictions, out.last_hidden_state, labels, masked_only,
                                         masked_positions)
        loss = None
        if mlm_loss is not None and next_sentence_label is not None:
            loss = mlm_loss + F.cross_entropy(nsp_logits, next_sentence_label.view(-1))
        masked_only = masked_only or masked_positions is not None
        return PreTrainingOutput(None if masked_only else mlm_logits, nsp_logits, loss, out.hidden_states,
                                 out.attentions, masked_logits=mlm_logits if masked_only else None)


class BertForMaskedLM(BertPreTrainedModel):
    """Masked LM alone (what RoBERTa keeps after dropping NSP); no pooler, as in transformers."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=False)
        self.cls = BertOnlyMLMHead(config)
        self.init_weights()

    def tie_weights(self) -> None:
        tie_decoder(self, self.cls.predictions)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                output_attentions=False, output_hidden_states=False, masked_only: bool = False,
                masked_positions: Tensor | None = None, position_ids: Tensor | None = None, unpadded: bool = False,
                packed_positions: Tensor | None = None):
        """``masked_only=True`` (needs ``labels``) or ``masked_positions`` (`masked_lm_positions`): the
        decoder runs at the masked positions only; their logits are then in ``masked_logits`` and
        ``logits`` is None. ``unpadded`` / ``packed_positions``: the encoder skips the padding
        (`BertModel.forward`); the same loss."""
        out = self.bert(input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states, position_ids,
                        unpadded, packed_positions)
        logits, loss = masked_lm(self.cls.predictions, out.last_hidden_state, labels, masked_only, masked_positions)
        masked_only = masked_only or masked_positions is not None
        return MaskedLMOutput(None if masked_only else logits, loss, out.hidden_states, out.attentions,
                              masked_logits=logits if masked_only else None)


class BertForSequenceClassification(BertPreTrainedModel):
    """A linear layer on the pooled [CLS] vector (§4.1); one label is regression (MSE), more are classes."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.num_labels = config.num_labels
        self.bert = BertModel(config)
        p = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                output_attentions=False, output_hidden_states=False, unpadded: bool = False,
                packed_positions: Tensor | None = None):
        """``unpadded`` / ``packed_positions``: the encoder skips the padding (`BertModel.forward`), which
        fine-tuning batches of short sentences are full of; the same logits."""
        out = self.bert(input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states,
                        unpadded=unpadded, packed_positions=packed_positions)
        logits = self.classifier(self.dropout(out.pooler_output))  # (B, num_labels)
        loss = classification_loss(logits, labels)
        return TaskOutput(logits, loss, out.hidden_states, out.attentions)


class BertForTokenClassification(BertPreTrainedModel):
    """A linear layer on every token's vector: tagging (NER, POS); tags of sub-word pieces are -100."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.num_labels = config.num_labels
        self.bert = BertModel(config, add_pooling_layer=False)
        p = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                output_attentions=False, output_hidden_states=False, unpadded: bool = False,
                packed_positions: Tensor | None = None):
        """``unpadded`` / ``packed_positions``: the encoder skips the padding (`BertModel.forward`); the real
        tokens' logits are the same, the padding's come from zero vectors (their labels are -100 anyway)."""
        out = self.bert(input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states,
                        unpadded=unpadded, packed_positions=packed_positions)
        logits = self.classifier(self.dropout(out.last_hidden_state))  # (B, T, num_labels)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
        return TaskOutput(logits, loss, out.hidden_states, out.attentions)


class BertForQuestionAnswering(BertPreTrainedModel):
    """SQuAD (§4.2): a start vector S and an end vector E score every token; the answer is the best span."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, start_positions=None,
                end_positions=None, output_attentions=False, output_hidden_states=False, unpadded: bool = False,
                packed_positions: Tensor | None = None):
        """``unpadded`` / ``packed_positions``: the encoder skips the padding (`BertModel.forward`); the real
        tokens' start and end logits are the same. The padding, which then has no vector to score, is no candidate:
        its logits are the lowest number there is, so the loss is the softmax over the real tokens. (Padded, as in
        transformers, the padding's positions are scored and compete, usually far behind, in the softmax.)"""
        out = self.bert(input_ids, attention_mask, token_type_ids, output_attentions, output_hidden_states,
                        unpadded=unpadded, packed_positions=packed_positions)
        logits = self.qa_outputs(out.last_hidden_state)                                # (B, T, 2)
        if (unpadded or packed_positions is not None) and attention_mask is not None:
            logits = logits.masked_fill(attention_mask[..., None] == 0, torch.finfo(logits.dtype).min)
        start_logits, end_logits = logits.unbind(-1)                                   # 2 × (B, T)
        loss = None
        if start_positions is not None and end_positions is not None:
            # Positions outside the sequence (an answer truncated away) are ignored, as in transformers.
            T = start_logits.size(1)
            start = start_positions.view(-1).clamp(0, T)
            end = end_positions.view(-1).clamp(0, T)
            loss = (F.cross_entropy(start_logits, start, ignore_index=T)
                    + F.cross_entropy(end_logits, end, ignore_index=T)) / 2
        return QuestionAnsweringOutput(start_logits, end_logits, loss, out.hidden_states, out.attentions)


class BertForMultipleChoice(BertPreTrainedModel):
    """SWAG (§4.4): each of the k choices is read with the context as its own pair ``[CLS] A [SEP] B_i [SEP]``,
    and a single vector V scores each pooled [CLS] vector, V·C_i; the choices compete in a softmax.

    One score per choice, not one class per choice: the layer is H → 1 whatever k is, so the same weights
    rank four endings or five, and a choice's score does not depend on where it was listed. Inputs are
    (B, k, T); the encoder reads them as B·k pairs, as transformers does, so ``hidden_states`` and
    ``attentions`` come back per pair, (B·k, ...); ``logits`` are (B, k), ``labels`` (B,) the right choice.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        p = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.init_weights()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None,
                output_attentions=False, output_hidden_states=False, unpadded: bool = False,
                packed_positions: Tensor | None = None):
        """``unpadded`` / ``packed_positions`` (of the (B, k, T) mask, which are those of its (B·k, T) view): the
        encoder skips the padding (`BertModel.forward`); the same logits."""
        num_choices = input_ids.size(1)
        flat = [None if x is None else x.flatten(0, 1) for x in (input_ids, attention_mask, token_type_ids)]  # (B·k, T)
        out = self.bert(*flat, output_attentions, output_hidden_states, unpadded=unpadded,
                        packed_positions=packed_positions)
        logits = self.classifier(self.dropout(out.pooler_output)).view(-1, num_choices)  # (B·k, 1) -> (B, k)
        loss = None if labels is None else F.cross_entropy(logits, labels.view(-1))
        return TaskOutput(logits, loss, out.hidden_states, out.attentions)
