"""What the models return: named fields, as in transformers, so ``out.last_hidden_state`` reads the same.

Fields a call did not compute are None (``attentions`` unless ``output_attentions=True``, ``loss``
unless labels were given).
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
    prediction_logits: Tensor                    # (B, T, V): masked-LM scores; (N_masked, V) when training with labels
    seq_relationship_logits: Tensor              # (B, 2): 0 = B follows A, 1 = B is random
    loss: Tensor | None = None
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None


@dataclass
class TaskOutput:
    """Masked LM, sequence / token classification: one logits tensor."""
    logits: Tensor
    loss: Tensor | None = None
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None


@dataclass
class QuestionAnsweringOutput:
    start_logits: Tensor                         # (B, T)
    end_logits: Tensor                           # (B, T)
    loss: Tensor | None = None
    hidden_states: tuple[Tensor, ...] | None = None
    attentions: tuple[Tensor, ...] | None = None
