"""Recipes: whole runs (pre-train, fine-tune, export) built from the library's pieces."""
from .pretrain import (DEFAULT_TOKENIZER, export, export_parser, pretrain, pretrain_parser, pretraining_metrics,
                       save_weights, who_loads)
