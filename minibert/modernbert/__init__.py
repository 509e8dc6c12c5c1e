"""ModernBERT (Warner et al. 2024, "Smarter, Better, Faster, Longer"): BERT's encoder with the last six years'
improvements, weight-compatible with transformers' ``ModernBert*`` classes both ways.

One idea per module, by the paper's words: `config` (the config.json of either transformers generation),
`rope` (rotary positions, two bases), `sliding_window` (the local layers' mask), `layers` (attention, GeGLU,
the pre-norm layer) and `model` (the encoder and its heads). Unpadding (real tokens only) is
`minibert.unpadding`, shared with BERT's encoder.
"""
from .config import ModernBertConfig
from .model import (ModernBertForMaskedLM, ModernBertForPreTraining, ModernBertForSequenceClassification,
                    ModernBertModel, ModernBertPreTrainedModel)

__all__ = ["ModernBertConfig", "ModernBertModel", "ModernBertPreTrainedModel", "ModernBertForMaskedLM",
           "ModernBertForPreTraining", "ModernBertForSequenceClassification"]
