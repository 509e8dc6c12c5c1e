"""minibert: a small, readable, weight-compatible BERT in PyTorch, and the library of the course."""
from .config import PRESETS, BertConfig
from .heads import (BertForMaskedLM, BertForPreTraining, BertForQuestionAnswering,
                    BertForSequenceClassification, BertForTokenClassification)
from .model import BertModel
from .tokenizer import BertTokenizer
from .training import History, TrainConfig, Trainer

__all__ = ["PRESETS", "BertConfig", "BertTokenizer", "BertModel", "BertForPreTraining", "BertForMaskedLM",
           "BertForSequenceClassification", "BertForQuestionAnswering", "BertForTokenClassification",
           "Trainer", "TrainConfig", "History"]
__version__ = "0.1.0"
