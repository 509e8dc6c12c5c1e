"""Fine-tuning tasks (Devlin et al. 2018, §4): each turns a dataset into model inputs, and the model's
outputs back into the task's answers and its official metric. The modules share a shape: load the
data, encode it, ``collate`` batches for the `Trainer`, ``evaluate`` a model, and ask it directly
(`classify`, `answer`, `tag`). `pairs` holds the sentence-pair tasks (MRPC, STS-B, RTE, QNLI, SNLI),
`ner` named entities (CoNLL-2003, WNUT-17). `registry` names them for the recipes: ``TASKS["sst2"]`` is its
model class, its new layer's size and its data made ready to train and score."""
from . import ner, pairs, sst2, tagging
from .ner import load_ner
from .pairs import classify_pairs, load_pairs
from .registry import TASKS, Task, TaskData, get_task
from .squad import (SquadExample, SquadFeatures, answer, best_spans, evaluate, load_squad, postprocess, predict,
                    read_squad, split_by_article)
from .squad_metric import exact_match_score, f1_score, normalize_answer, squad_metric
from .sst2 import classify, load_sst2
from .tagging import UPOS, feature_based, load_pos, tag

__all__ = ["SquadExample", "SquadFeatures", "answer", "best_spans", "evaluate", "load_squad", "postprocess",
           "predict", "read_squad", "split_by_article", "exact_match_score", "f1_score", "normalize_answer",
           "squad_metric", "sst2", "tagging", "classify", "load_sst2", "UPOS", "feature_based", "load_pos", "tag",
           "TASKS", "Task", "TaskData", "get_task", "ner", "pairs", "load_ner", "load_pairs", "classify_pairs"]
