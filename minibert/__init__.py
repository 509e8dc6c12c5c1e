"""minibert: a small, readable, weight-compatible BERT in PyTorch, and the library of the course.

The names below load on first use (PEP 562), so ``import minibert`` costs nothing and a part of the
package never pulls in what it does not use: the course tools (``minibert.course``) run without torch,
and the model never imports the notebook tooling (nbgrader, nbconvert, bertviz, matplotlib).
"""
import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what editors and type checkers read; at run time the names load lazily below
    from .config import PRESETS, BertConfig
    from .heads import (BertForMaskedLM, BertForMultipleChoice, BertForPreTraining, BertForQuestionAnswering,
                        BertForSequenceClassification, BertForTokenClassification)
    from .model import BertModel
    from .modernbert.config import ModernBertConfig
    from .modernbert.model import (ModernBertForMaskedLM, ModernBertForPreTraining, ModernBertForSequenceClassification,
                                   ModernBertModel)
    from .tokenizer import BertTokenizer
    from .training import History, TrainConfig, Trainer

_LAZY = {  # public name -> the module that defines it
    "PRESETS": "minibert.config",
    "BertConfig": "minibert.config",
    "BertModel": "minibert.model",
    "BertForPreTraining": "minibert.heads",
    "BertForMaskedLM": "minibert.heads",
    "BertForSequenceClassification": "minibert.heads",
    "BertForQuestionAnswering": "minibert.heads",
    "BertForTokenClassification": "minibert.heads",
    "BertForMultipleChoice": "minibert.heads",
    "ModernBertConfig": "minibert.modernbert.config",
    "ModernBertModel": "minibert.modernbert.model",
    "ModernBertForMaskedLM": "minibert.modernbert.model",
    "ModernBertForPreTraining": "minibert.modernbert.model",
    "ModernBertForSequenceClassification": "minibert.modernbert.model",
    "BertTokenizer": "minibert.tokenizer",
    "Trainer": "minibert.training",
    "TrainConfig": "minibert.training",
    "History": "minibert.training",
}

__all__ = list(_LAZY)
__version__ = "0.1.0"


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'minibert' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
