"""Recipes: whole runs (pre-train, fine-tune, evaluate, export) built from the library's pieces.

Each takes a settings object (plain data, checked when made) and returns what it wrote or measured;
``minibert pretrain|finetune|evaluate|export`` (`minibert.cli`) builds the same objects from flags.
"""
from .export import ExportSettings, export
from .finetune import EvaluateSettings, FinetuneSettings, Hyperparameters, evaluate, finetune
from .course_models import load_or_pretrain, pretrain_stages
from .pretrain import DEFAULT_TOKENIZER, PretrainSettings, TrainingSettings, pretrain
