"""What the models return: named fields, as in transformers, so ``out.last_hidden_state`` reads the same.

Fields a call did not compute are None (``attentions`` unless ``output_attentions=True``, ``loss``
unless labels were given). The masked-LM scores are (B, T, V) in ``prediction_logits`` / ``logits``
whatever the mode; with ``masked_only=True`` they are only the masked positions' (N_masked, V), in
``masked_logits``, and the full field is None.
"""
from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class BaseModelOutput:
    last_hidden_state: Tensor                    # (B, T, H)
    pooler_output: Tensor | None = None          # (B, H): tanh(W h_[CLS] + b)
    hidden_states: tuple[Tensor, ...] | None = None  # embeddings + each layer: L + 1 of (B, T, H)
    attentions: tuple[Tensor, ...] | None = None     # each layer: (B, heads, T, T)


@dataclass
class PreTrainingOutput:
    prediction_logits: Tensor | None             # (B, T, V): masked-LM scores; None with masked_only=True
    seq_relationship_logits: Tensor              # (B, 2): 0 = B follows A, 1 = B is random
    loss: Tensor | None = None
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None
    masked_logits: Tensor | None = None          # (N_masked, V) with masked_only=True: the masked positions, row-major


@dataclass
class TaskOutput:
    """Sequence / token classification: one logits tensor."""
    logits: Tensor                               # (B, num_labels) or (B, T, num_labels)
    loss: Tensor | None = None
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None


@dataclass
class MaskedLMOutput:
    logits: Tensor | None                        # (B, T, V); None with masked_only=True
    loss: Tensor | None = None
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None
    masked_logits: Tensor | None = None          # (N_masked, V) with masked_only=True: the masked positions, row-major


@dataclass
class QuestionAnsweringOutput:
    start_logits: Tensor                         # (B, T)
    end_logits: Tensor                           # (B, T)
    loss: Tensor | None = None
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None
