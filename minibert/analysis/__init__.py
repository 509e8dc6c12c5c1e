"""What BERT's attention heads learn (Clark et al. 2019, "What Does BERT Look At?"), for notebooks 06 and 06b.

Read gold structure (`load_ud_english_ewt`, `load_gap`), run a model once over it, turn piece
attention into word attention (`word_attention`) and score every layer x head against syntax
(`dependency_accuracy`) and coreference (`coreference_accuracy`), beside simple baselines and a
randomly initialised control (`random_like`). Results are numpy arrays of shape (layers, heads)
and plain dicts, ready for a heatmap or a table. The best head is chosen on some examples and
scored on others (`split_in_two`, `HeldOutSyntax`, `HeldOutCoreference`), so that picking the
maximum of many heads does not flatter it.
"""
from .conllu import Sentence, Word, load_ud_english_ewt, parse_conllu, read_conllu
from .control import random_like
from .coreference import CoreferenceAccuracy, coreference_accuracy
from .extract import attention_batches
from .gap import GapExample, load_gap, read_gap
from .held_out import HeldOutCoreference, HeldOutSyntax, split_in_two
from .syntax import DIRECTIONS, SyntaxAccuracy, dependency_accuracy, offset_accuracy, predict_heads
from .word_attention import piece_words, word_attention

__all__ = ["Word", "Sentence", "parse_conllu", "read_conllu", "load_ud_english_ewt",
           "GapExample", "read_gap", "load_gap",
           "attention_batches", "piece_words", "word_attention",
           "DIRECTIONS", "SyntaxAccuracy", "dependency_accuracy", "offset_accuracy", "predict_heads",
           "CoreferenceAccuracy", "coreference_accuracy", "random_like",
           "split_in_two", "HeldOutSyntax", "HeldOutCoreference"]
